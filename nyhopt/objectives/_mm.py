"""The ``m x m`` algebra of the exact objectives, computed once per factorization.

With the factors of :mod:`nyhopt.objectives._exact` (:math:`\\tilde K = LL^T`,
:math:`S = AA^T`, :math:`M = S + n\\lambda I = CC^T`), the values and
gradients of the exact objectives need a few ``m x m`` matrices built from
:math:`M^{-1}`:

============ ============================================ ==========================================
key          matrix                                       computed as (flops, :math:`m^3` units)
============ ============================================ ==========================================
``Minv``     :math:`M^{-1}`                               ``potri`` on :math:`C` (2/3)
``M2``       :math:`M^{-2}`                               :math:`(M^{-1})^T M^{-1}`, symmetric rank-k (1)
``SMinv``    :math:`SM^{-1}`                              ``gemm`` (2)
``MSM``      :math:`M^{-1}SM^{-1}`                        ``gemm`` (2)
``F``        :math:`C^{-1}L^{-1}` (``loocv``)             ``trsm`` on the identity, then from the right (2)
============ ============================================ ==========================================

Every dense cotangent of the exact objectives is :math:`G_{nm} = A^T\\tilde W
L^{-1}`, :math:`G_{mm} = L^{-T}\\tilde G L^{-1}` with :math:`\\tilde W`,
:math:`\\tilde G` combinations of these matrices, :math:`S` and :math:`I`
(the "whitened frame"); :meth:`SmallAlgebra.unwhiten` applies
:math:`L^{-1}` to their sums once, with three triangular solves
(:math:`3m^3`), so :math:`L^{-1}` is never formed.  :math:`M^{-1}SM^{-1}`
is kept a product: :math:`M^{-1} - n\\lambda M^{-2}` loses its relative
accuracy when :math:`n\\lambda` dominates :math:`S`.

:class:`SmallAlgebra` computes each matrix on first use and keeps it, so the
value and the gradient of one evaluation share them (the value's
:math:`\\mathrm{Tr}\\,H = \\langle M^{-1}, S\\rangle` computes :math:`M^{-1}`,
which the gradient reuses).
:meth:`SmallAlgebra.prefetch` computes a set of them on nyhopt's worker
threads in a pool phase (:mod:`nyhopt.backend._parallel`), each worker taking the
next matrix whose inputs are known: these products are too small for a
threaded BLAS call to pay, but two of them run side by side, and beside the
fit of the targets (an ``n``-sized pass that the caller hands over as
``alongside``), which would otherwise leave the second core idle.

On the GPU the same matrices come from plain products and cupyx triangular
solves.  All matrices are float64.
"""
from __future__ import annotations

import threading

import numpy as np

from ..backend._blas import potri, trsm
from ..backend._parallel import active_workers, map_chunks, map_ranges, min_rows, pool_phase
from ..backend import is_cupy_namespace

__all__ = ["SmallAlgebra", "DEPENDS"]

#: The matrices each key is computed from.
DEPENDS = {"Minv": (), "M2": ("Minv",), "SMinv": ("Minv",), "MSM": ("Minv", "SMinv"), "F": ()}
_ORDER = tuple(DEPENDS)  # an order in which every matrix follows its inputs
# Relative cost (a general m x m product is 4): the largest ready matrix goes first.
_COST = {"Minv": 2, "M2": 2, "SMinv": 4, "MSM": 4, "F": 4}
# The cost of the longest chain from a matrix to the end: the ready matrix with the longest goes first.
_HEIGHT = {}
for _k in reversed(_ORDER):
    _HEIGHT[_k] = _COST[_k] + max((_HEIGHT[u] for u in _ORDER if _k in DEPENDS[u]), default=0)


def _sym(a):
    return 0.5 * (a + a.T)


def _into(dst, res):
    """Write ``res`` into ``dst`` unless it is there already (a solve in place)."""
    if res is not dst and not np.shares_memory(res, dst):
        dst[...] = res


class SmallAlgebra:
    """Lazily computed ``m x m`` matrices of one factorization (see the module notes).

    Parameters
    ----------
    L, C, S : arrays (m, m), float64
        :math:`L`, :math:`C` (lower triangular, zero above the diagonal) and
        :math:`S = AA^T`.
    xp : module
    """

    def __init__(self, L, C, S, xp):
        self.L, self.C, self.S, self.xp = L, C, S, xp
        self._gpu = is_cupy_namespace(xp)
        self._have = {}

    def _solve(self, T, B, trans=False, right=False, overwrite=False):
        """``op(T)^{-1} B`` (``B op(T)^{-1}`` with ``right``) for the lower-triangular ``T``."""
        if not self._gpu:
            return trsm(T, B, lower=True, trans=trans, right=right, overwrite_b=overwrite)
        import cupyx.scipy.linalg as sla  # needs the CUDA libraries: only on GPU paths

        if right:  # X op(T) = B  <=>  op(T)^T X^T = B^T
            return sla.solve_triangular(T, B.T, trans=0 if trans else 1, lower=True).T
        return sla.solve_triangular(T, B, trans=1 if trans else 0, lower=True, overwrite_b=overwrite)

    def _compute(self, key):
        g, S, xp = self._have, self.S, self.xp
        if key == "Minv":
            if not self._gpu:
                return potri(self.C, lower=True)
            Ci = self._solve(self.C, xp.eye(self.C.shape[0], dtype=xp.float64), overwrite=True)
            return Ci.T @ Ci
        if key == "M2":
            return g["Minv"].T @ g["Minv"]  # M^{-1} is symmetric: a symmetric rank-k product
        if key == "SMinv":
            return S @ g["Minv"]
        if key == "MSM":
            return _sym(g["Minv"] @ g["SMinv"])
        if key == "F":  # C^{-1} L^{-1}
            Ci = self._solve(self.C, xp.eye(self.C.shape[0], dtype=xp.float64), overwrite=True)
            return self._solve(self.L, Ci, right=True, overwrite=True)
        raise KeyError(key)

    def unwhiten(self, Wt=None, Gt=None):
        """:math:`(\\tilde W L^{-1},\\ L^{-T}\\tilde G L^{-1})` for ``Wt`` and ``Gt`` (m, m) float64 or None.

        Three triangular solves, no :math:`L^{-1}`: :math:`[\\tilde W; \\tilde G]L^{-1}`
        from the right, then :math:`L^{-T}` from the left on its lower block.
        On the CPU in a pool phase the rows (then the columns) are split over
        the workers.  A None input gives None.
        """
        xp, L = self.xp, self.L
        parts = [a for a in (Wt, Gt) if a is not None]
        if not parts:
            return None, None
        m = L.shape[0]
        X = xp.concatenate(parts, axis=0)  # ours: solved in place
        if self._gpu:
            X = self._solve(L, X, right=True)
        else:
            map_ranges(lambda lo, hi: _into(X[lo:hi], self._solve(L, X[lo:hi], right=True, overwrite=True)),
                       X.shape[0], min_rows(m))
        G = None
        if Gt is not None:
            G = X[-m:]
            if self._gpu:
                G = self._solve(L, G, trans=True)
            else:
                map_ranges(lambda lo, hi: _into(G[:, lo:hi], self._solve(L, G[:, lo:hi], trans=True, overwrite=True)),
                           m, min_rows(m))
        return (X[:m] if Wt is not None else None), G

    def get(self, key):
        """The matrix ``key`` (computed, with what it needs, on first use)."""
        if key not in self._have:
            self.prefetch(key)
        return self._have[key]

    def prefetch(self, *keys, alongside=None):
        """Compute the matrices ``keys`` and those they need; return ``alongside()`` when given.

        In a pool phase with two or more workers each worker takes the
        largest matrix whose inputs are known until none is left, and
        ``alongside`` (an ``n``-sized task of the caller, e.g. the fit) runs
        first on one of them, so the other computes matrices meanwhile.  Every
        task runs on one thread (its own row ranges in turn: the other worker
        is busy; were they handed to it, they would wait for its matrices).
        Outside a pool phase everything runs in turn on the calling thread.
        """
        need, stack = set(), list(keys)
        while stack:
            k = stack.pop()
            if k not in DEPENDS:
                raise KeyError(k)
            if k not in self._have and k not in need:
                need.add(k)
                stack.extend(DEPENDS[k])
        workers = 1 if self._gpu else min(active_workers(), len(need) + (alongside is not None))
        if workers <= 1:
            out = None if alongside is None else alongside()
            while need:
                k = min((k for k in need if all(d in self._have for d in DEPENDS[k])), key=_ORDER.index)
                self._have[k] = self._compute(k)
                need.discard(k)
            return out
        return self._schedule(need, alongside, workers)

    def _schedule(self, need, alongside, workers):
        """:meth:`prefetch` on ``workers`` threads: a ready matrix to whichever thread is free."""
        cond = threading.Condition()
        state = {"alongside": alongside, "error": None, "out": None}

        def take():  # under the lock: ("alongside", fn), ("key", k) or None when done
            while True:
                if state["error"] is not None:
                    return None
                fn = state["alongside"]
                if fn is not None:
                    state["alongside"] = None
                    return "alongside", fn
                ready = [k for k in need if all(d in self._have for d in DEPENDS[k])]
                if ready:
                    k = max(ready, key=lambda k: (_HEIGHT[k], -_ORDER.index(k)))
                    need.discard(k)
                    return "key", k
                if not need:
                    return None
                cond.wait()

        def run(_):
            while True:
                with cond:
                    task = take()
                if task is None:
                    return
                kind, item = task
                try:
                    with pool_phase(1):  # the task's own ranges in turn here: the other worker is busy
                        value = item() if kind == "alongside" else self._compute(item)
                except BaseException as exc:  # stop the other workers, raise in the caller
                    with cond:
                        state["error"] = exc
                        cond.notify_all()
                    raise
                with cond:
                    if kind == "alongside":
                        state["out"] = value
                    else:
                        self._have[item] = value
                    cond.notify_all()

        map_chunks(run, workers)
        return state["out"]
