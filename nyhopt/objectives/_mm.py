"""The ``m x m`` algebra of the exact objectives, computed once per factorization.

With the factors of :mod:`nyhopt.objectives._exact` (:math:`\\tilde K = LL^T`,
:math:`S = AA^T`, :math:`M = S + n\\lambda I = CC^T`), the values and
gradients of the exact objectives need a handful of ``m x m`` matrices built
from the two triangular inverses :math:`L^{-1}` and :math:`C^{-1}`:

============ ===================================================== ===========================
key          matrix                                                product
============ ===================================================== ===========================
``Linv``     :math:`L^{-1}`                                        ``trsm`` on the identity
``Ci``       :math:`C^{-1}`                                        ``trsm`` on the identity
``CiS``      :math:`C^{-1}S`                                       ``trmm``
``Minv``     :math:`M^{-1} = C^{-T}C^{-1}`                         symmetric rank-k
``MinvLinv`` :math:`P = M^{-1}L^{-1}`                              ``trmm``
``SMinv``    :math:`SM^{-1}`                                       ``gemm``
``M2Linv``   :math:`M^{-2}L^{-1} = M^{-1}P`                        ``gemm``
``SP``       :math:`SP`                                            ``gemm``
``FTSF``     :math:`P^TSP = L^{-T}M^{-1}SM^{-1}L^{-1}`             ``gemm``
``SLinv``    :math:`SL^{-1}`                                       ``trmm``
``LSL``      :math:`L^{-T}SL^{-1}`                                 ``trmm``
``FtF``      :math:`L^{-T}P = L^{-T}M^{-1}L^{-1}`                  ``trmm``
``LtL``      :math:`L^{-T}L^{-1} = \\tilde K^{-1}`                  symmetric rank-k
``F``        :math:`C^{-1}L^{-1}`                                  ``trmm``
``Q``        :math:`C^{-1}C^{-T}`                                  symmetric rank-k
============ ===================================================== ===========================

:class:`SmallAlgebra` computes each on first use and keeps it, so the value
and the gradient of one evaluation share them (the value's
:math:`\\mathrm{Tr}\\,H = \\langle C^{-1}S, C^{-1}\\rangle` computes :math:`C^{-1}`,
which the gradient reuses).
:meth:`SmallAlgebra.prefetch` computes a set of them on nyhopt's worker
threads in a pool phase (:mod:`nyhopt.backend._parallel`), each worker taking the
next matrix whose inputs are known: these products are too small for a
threaded BLAS call to pay, but two of them run side by side, and beside the
fit of the targets (an ``n``-sized pass that the caller hands over as
``alongside``), which would otherwise leave the second core idle.

Every product with a triangular factor is a ``trmm`` (half the flops of a
general product; :func:`nyhopt.backend._blas.trmm`); on the GPU they are plain
products (the factors have exact zeros in their other triangle).  All
matrices are float64.
"""
from __future__ import annotations

import threading

from ..backend._blas import trmm, trsm
from ..backend._parallel import active_workers, map_chunks, pool_phase
from ..backend import is_cupy_namespace

__all__ = ["SmallAlgebra", "DEPENDS"]

#: The matrices each key is computed from.
DEPENDS = {
    "Linv": (), "Ci": (), "CiS": ("Ci",), "Minv": ("Ci",), "MinvLinv": ("Minv", "Linv"), "SMinv": ("Minv",),
    "M2Linv": ("Minv", "MinvLinv"), "SP": ("MinvLinv",), "FTSF": ("MinvLinv", "SP"), "SLinv": ("Linv",),
    "LSL": ("Linv", "SLinv"), "FtF": ("Linv", "MinvLinv"), "LtL": ("Linv",), "F": ("Ci", "Linv"), "Q": ("Ci",),
}
_ORDER = tuple(DEPENDS)  # an order in which every matrix follows its inputs
# Relative cost (a general m x m product is 4): the largest ready matrix goes first.
_COST = {"Linv": 5, "Ci": 5, "CiS": 3, "Minv": 2, "MinvLinv": 3, "SMinv": 4, "M2Linv": 4, "SP": 4, "FTSF": 4,
         "SLinv": 3, "LSL": 3, "FtF": 3, "LtL": 2, "F": 3, "Q": 2}
# The cost of the longest chain from a matrix to the end: the ready matrix with the longest goes first.
_HEIGHT = {}
for _k in reversed(_ORDER):
    _HEIGHT[_k] = _COST[_k] + max((_HEIGHT[u] for u in _ORDER if _k in DEPENDS[u]), default=0)


def _sym(a):
    return 0.5 * (a + a.T)


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

    # -- triangular products (trmm on the CPU) ------------------------------------------------
    def _tmul(self, T, B, trans=False, right=False):
        """``op(T) @ B`` (``B @ op(T)`` with ``right``) for the lower-triangular ``T``."""
        if self._gpu:
            Tt = T.T if trans else T
            return B @ Tt if right else Tt @ B
        return trmm(T, B, lower=True, trans=trans, right=right)

    def _inverse(self, T):
        xp = self.xp
        eye = xp.eye(T.shape[0], dtype=xp.float64)
        if self._gpu:
            import cupyx.scipy.linalg as sla  # needs the CUDA libraries: only on GPU paths

            return sla.solve_triangular(T, eye, lower=True)
        return trsm(T, eye, lower=True, overwrite_b=True)

    def _compute(self, key):
        g, S = self._have, self.S
        if key in ("Linv", "Ci"):
            return self._inverse(self.L if key == "Linv" else self.C)
        if key == "CiS":
            return self._tmul(g["Ci"], S)
        if key == "Minv":
            return g["Ci"].T @ g["Ci"]
        if key == "MinvLinv":
            return self._tmul(g["Linv"], g["Minv"], right=True)
        if key == "SMinv":
            return S @ g["Minv"]
        if key == "M2Linv":
            return g["Minv"] @ g["MinvLinv"]
        if key == "SP":
            return S @ g["MinvLinv"]
        if key == "FTSF":
            return _sym(g["MinvLinv"].T @ g["SP"])
        if key == "SLinv":
            return self._tmul(g["Linv"], S, right=True)
        if key == "LSL":
            return _sym(self._tmul(g["Linv"], g["SLinv"], trans=True))
        if key == "FtF":
            return _sym(self._tmul(g["Linv"], g["MinvLinv"], trans=True))
        if key == "LtL":
            return g["Linv"].T @ g["Linv"]
        if key == "F":
            return self._tmul(g["Ci"], g["Linv"])
        if key == "Q":
            return g["Ci"] @ g["Ci"].T
        raise KeyError(key)

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
