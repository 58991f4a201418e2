"""Kernel products with :math:`K = k(X, Z)` held in memory.

The streaming operations of :mod:`nyhopt.ops` evaluate the kernel again on
every pass: that is what keeps their memory at row blocks, and what makes a
pass cost several times a matrix product on the CPU.  When the ``n x m``
matrix fits in memory and the same :math:`K` is used for many passes (a
Falkon solve: one per CG iteration), :class:`CachedKernel` evaluates it once
and turns every pass into BLAS products.  The Falkon solver and ``stoch-prop``
hold it by default when ``n x m`` numbers fit the cache budget
(:func:`nyhopt.set_cache_budget`; 1 GiB on the host by default) and stream
otherwise (:class:`nyhopt.ops.operator.KernelOperator`).

Sums over the rows are accumulated in float64 across fixed row ranges
(added in row order, so the rounding does not depend on the thread count),
as in the streaming operations; within a range the products see the data dtype.  In a
``"pool"`` phase (:mod:`nyhopt._threads`) the row ranges run on nyhopt's
worker threads.

Examples
--------
>>> import numpy as np
>>> import nyhopt as nh
>>> from nyhopt import ops
>>> from nyhopt.ops.cached import CachedKernel
>>> rng = np.random.default_rng(0)
>>> X, V = rng.normal(size=(50, 2)), rng.normal(size=(5, 3))
>>> ck = CachedKernel(nh.GaussianKernel(1.0), X, X[:5])
>>> bool(np.allclose(ck.normal_matvec(V)[0], ops.normal_matvec(nh.GaussianKernel(1.0), X, X[:5], V)[0]))
True
"""
from __future__ import annotations

from .._parallel import map_ranges, min_rows, sum_ranges
from ..backend import get_namespace, is_cupy_namespace
from . import _operand, kernel_matrix
from .gram import RANGE_ROWS

__all__ = ["CachedKernel"]


class CachedKernel:
    """:math:`K = k(X, Z)` (n, m) evaluated once; products as in :mod:`nyhopt.ops`.

    Parameters
    ----------
    kernel : Kernel
    X : array (n, d)
    Z : array (m, d)
        Same array module as ``X`` (cast to its dtype).

    Attributes
    ----------
    Kt : array (m, n), dtype of ``X``
        :math:`K^T`, C-ordered.
    nbytes : int
        Memory held by ``Kt``.
    """

    def __init__(self, kernel, X, Z):
        self.xp = get_namespace(X, Z)
        Z = self.xp.asarray(Z).astype(X.dtype, copy=False)
        # Stored as K^T (m, n), C-ordered: the products below then have their best BLAS layouts.
        self.Kt = kernel_matrix(kernel, Z, X)
        self.nbytes = int(self.Kt.nbytes)

    @property
    def shape(self):
        return self.Kt.shape[::-1]

    def _ranges(self, fn):
        Kt = self.Kt
        if is_cupy_namespace(self.xp):
            return [fn(0, Kt.shape[1])]
        return map_ranges(fn, Kt.shape[1], min_rows(Kt.shape[0]))

    def _sum_ranges(self, fn):
        """``sum(fn(lo, hi))`` (a tuple of float64 arrays) over fixed row ranges, added in row order.

        Fixed ranges (:data:`nyhopt.ops.gram.RANGE_ROWS`) make the rounding
        independent of the number of threads.
        """
        if is_cupy_namespace(self.xp):
            return fn(0, self.Kt.shape[1])
        return sum_ranges(fn, self.Kt.shape[1], RANGE_ROWS)

    def kmv(self, V):
        """``K @ V`` for V (m, k); (n, k) in the data dtype."""
        Kt, xp = self.Kt, self.xp
        Vt = _operand(V, "V", Kt.shape[0], Kt.dtype, xp).T.copy()
        KVt = xp.empty((Vt.shape[0], Kt.shape[1]), dtype=Kt.dtype)
        self._ranges(lambda lo, hi: xp.matmul(Vt, Kt[:, lo:hi], out=KVt[:, lo:hi]))
        return KVt.T

    def kmtv(self, U):
        """``K.T @ U`` for U (n, k); (m, k), summed over row ranges in float64."""
        Kt = self.Kt
        U2 = _operand(U, "U", Kt.shape[1], Kt.dtype, self.xp)
        f64 = self.xp.float64
        return self._sum_ranges(lambda lo, hi: ((U2[lo:hi].T @ Kt[:, lo:hi].T).T.astype(f64),))[0]

    def gram(self, U=None):
        """``(K^T K, K^T U or None)``, computed in float64 over row ranges (see :mod:`nyhopt.ops.gram`)."""
        Kt, xp = self.Kt, self.xp
        U2 = None if U is None else _operand(U, "U", Kt.shape[1], Kt.dtype, xp)

        def part(lo, hi):  # in float64, over fixed ranges added in row order: see nyhopt.ops.gram
            Kr = Kt[:, lo:hi].astype(xp.float64, copy=False)
            return Kr @ Kr.T, (None if U2 is None else Kr @ U2[lo:hi].astype(xp.float64, copy=False))

        G, KtU = self._sum_ranges(part)
        return (0.5 * (G + G.T) if is_cupy_namespace(xp) else G), KtU

    def normal_matvec(self, V, U=None, *, kv=False):
        """``(K^T K V, K^T U or None)`` (and ``K V`` with ``kv``), like :func:`nyhopt.ops.normal_matvec`.

        The two sums are float64 (m, k) arrays.
        """
        Kt, xp = self.Kt, self.xp
        Vt = _operand(V, "V", Kt.shape[0], Kt.dtype, xp).T.copy()
        U2 = None if U is None else _operand(U, "U", Kt.shape[1], Kt.dtype, xp)
        KVt = xp.empty((Vt.shape[0], Kt.shape[1]), dtype=Kt.dtype)

        f64 = xp.float64

        def part(lo, hi):
            Kr = Kt[:, lo:hi]
            xp.matmul(Vt, Kr, out=KVt[:, lo:hi])
            KtKV = (KVt[:, lo:hi] @ Kr.T).T.astype(f64)
            return KtKV, (None if U2 is None else (U2[lo:hi].T @ Kr.T).T.astype(f64))

        KtKV, KtU = self._sum_ranges(part)
        return (KtKV, KtU, KVt.T) if kv else (KtKV, KtU)
