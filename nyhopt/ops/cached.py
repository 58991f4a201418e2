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
``"pool"`` phase (:mod:`nyhopt.backend._threads`) the row ranges run on nyhopt's
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

import numpy as np

from ..backend._config import block_rows, cache_fits
from ..backend._parallel import map_ranges, min_rows, sum_ranges
from ..backend import get_namespace, is_cupy_namespace
from . import _operand, half, kernel_matrix
from ._blocks import KernelBlocks
from .gram import RANGE_ROWS

__all__ = ["CachedKernel", "CACHE_POLICIES", "check_cache_policy", "cache_storage"]

#: Values of a kernel-cache setting: decide by the budget, always, never, or always in float16.
CACHE_POLICIES = ("auto", True, False, "float16")


def check_cache_policy(value, name):
    """``value`` as one of :data:`CACHE_POLICIES` (bools normalized), or a clear error naming ``name``."""
    if isinstance(value, str):
        if value not in CACHE_POLICIES:
            raise ValueError(f"{name} must be 'auto', 'float16', True or False, got {value!r}")
        return value
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be 'auto', 'float16', True or False, got {value!r}")
    return bool(value)


def cache_storage(policy, n, m, dtype, xp, name="cache"):
    """The dtype an ``n x m`` kernel matrix of ``dtype`` data is held in under ``policy``; None to stream.

    * ``True``: the data dtype; ``False``: None; ``"float16"``: float16
      (float32 data only, see :mod:`nyhopt.ops.half`).
    * ``"auto"``: the data dtype when ``n m`` such numbers fit the cache
      budget (:func:`nyhopt.get_cache_budget`), None otherwise.  It never
      picks float16: the rounding of :math:`K` to 16 bits raises the
      effective-dimension term of ``stoch-prop`` at small penalties (see
      :mod:`nyhopt.ops.half`), so it is the user's choice.

    Raises
    ------
    ValueError
        If ``policy`` is not a cache policy, or is ``"float16"`` and the
        data are not float32 (messages name the setting ``name``).
    """
    policy = check_cache_policy(policy, name)
    dtype = np.dtype(dtype)
    if policy == "float16":
        if dtype != np.float32:
            raise ValueError(f"{name}='float16' needs float32 data, got {dtype.name}")
        return half.STORAGE
    if policy != "auto":
        return dtype if policy else None
    return dtype if cache_fits(n, m, dtype.itemsize, xp) else None


class CachedKernel:
    """:math:`K = k(X, Z)` (n, m) evaluated once; products as in :mod:`nyhopt.ops`.

    Parameters
    ----------
    kernel : Kernel
    X : array (n, d)
    Z : array (m, d)
        Same array module as ``X`` (cast to its dtype).
    storage : dtype, optional
        Dtype the matrix is held in: the data dtype (default), or float16
        for float32 data (:mod:`nyhopt.ops.half`: half the memory; the
        products still compute in float32 and return the data dtype).

    Attributes
    ----------
    Kt : array (m, n)
        :math:`K^T`, C-ordered, of dtype ``storage``.
    dtype : numpy.dtype
        The data dtype: the dtype of the products.
    storage : numpy.dtype
        The dtype of ``Kt``.
    nbytes : int
        Memory held by ``Kt``.

    Raises
    ------
    ValueError
        If ``storage`` is neither the data dtype nor float16 with float32 data.
    """

    def __init__(self, kernel, X, Z, storage=None):
        self.xp = xp = get_namespace(X, Z)
        self.dtype = np.dtype(X.dtype)
        Z = xp.asarray(Z).astype(X.dtype, copy=False)
        self.storage = self.dtype if storage is None else np.dtype(storage)
        if self.storage == self.dtype:
            # Stored as K^T (m, n), C-ordered: the products below then have their best BLAS layouts.
            self.Kt = kernel_matrix(kernel, Z, X)
        elif self.storage == half.STORAGE and self.dtype == np.float32:
            self.Kt = self._evaluate_half(kernel, X, Z)
        else:
            raise ValueError(f"storage must be the data dtype or float16 for float32 data; got "
                             f"{self.storage.name} for {self.dtype.name} data")
        self.nbytes = int(self.Kt.nbytes)

    @property
    def _half(self):
        return self.storage != self.dtype

    def _evaluate_half(self, kernel, X, Z):
        """:math:`K^T` in float16, evaluated in float32 row blocks (no float32 ``n x m`` array)."""
        xp, (n, m) = self.xp, (X.shape[0], Z.shape[0])
        Kt = xp.empty((m, n), dtype=half.STORAGE)
        step = max(RANGE_ROWS, block_rows(n, m, self.dtype.itemsize, n_temps=2))
        blocks = KernelBlocks(kernel, X, Z)  # checked once, not per block
        for lo in range(0, n, step):
            Kt[:, lo:lo + step] = blocks.rows_t(lo, min(lo + step, n)).astype(half.STORAGE)
        return Kt

    @property
    def shape(self):
        return self.Kt.shape[::-1]

    def _ranges(self, fn):
        Kt = self.Kt
        if is_cupy_namespace(self.xp):
            return [fn(0, Kt.shape[1])]
        return map_ranges(fn, Kt.shape[1], min_rows(Kt.shape[0]))

    def _sum_ranges(self, fn, rows=None):
        """``sum(fn(lo, hi))`` (a tuple of float64 arrays) over fixed row ranges, added in row order.

        Fixed ranges (:data:`nyhopt.ops.gram.RANGE_ROWS`) make the rounding
        independent of the number of threads.  On a GPU the sum is one range,
        or ranges of ``rows`` rows where a range makes a temporary copy.
        """
        n = self.Kt.shape[1]
        if not is_cupy_namespace(self.xp):
            return sum_ranges(fn, n, RANGE_ROWS)
        if rows is None or rows >= n:
            return fn(0, n)
        total = None
        for lo in range(0, n, rows):
            part = fn(lo, min(lo + rows, n))
            total = part if total is None else tuple(None if t is None else t + p for t, p in zip(total, part))
        return total

    def kmv(self, V):
        """``K @ V`` for V (m, k); (n, k) in the data dtype."""
        Kt, xp = self.Kt, self.xp
        Vt = _operand(V, "V", Kt.shape[0], self.dtype, xp).T.copy()
        KVt = xp.empty((Vt.shape[0], Kt.shape[1]), dtype=self.dtype)
        if self._half:
            P, scale = half.split_half(Vt.T, xp)
            Pt = P.T.copy()

            def part(lo, hi):
                KVt[:, lo:hi] = half.kmv_block(Kt[:, lo:hi], Pt, scale, xp)
        else:
            def part(lo, hi):
                xp.matmul(Vt, Kt[:, lo:hi], out=KVt[:, lo:hi])
        self._ranges(part)
        return KVt.T

    def kmtv(self, U):
        """``K.T @ U`` for U (n, k); (m, k), summed over row ranges in float64."""
        Kt, xp = self.Kt, self.xp
        U2 = _operand(U, "U", Kt.shape[1], self.dtype, xp)
        f64 = xp.float64
        if self._half:
            return self._sum_ranges(lambda lo, hi: (half.kmtv_block(Kt[:, lo:hi], U2[lo:hi], xp).astype(f64),))[0]
        return self._sum_ranges(lambda lo, hi: ((U2[lo:hi].T @ Kt[:, lo:hi].T).T.astype(f64),))[0]

    def gram(self, U=None):
        """``(K^T K, K^T U or None)``, computed in float64 over row ranges (see :mod:`nyhopt.ops.gram`)."""
        Kt, xp = self.Kt, self.xp
        U2 = None if U is None else _operand(U, "U", Kt.shape[1], self.dtype, xp)

        def part(lo, hi):  # in float64, over fixed ranges added in row order: see nyhopt.ops.gram
            Kr = Kt[:, lo:hi].astype(xp.float64, copy=False)
            return Kr @ Kr.T, (None if U2 is None else Kr @ U2[lo:hi].astype(xp.float64, copy=False))

        m, n = Kt.shape
        rows = None if Kt.dtype == np.float64 else block_rows(n, m, 8, n_temps=1)
        G, KtU = self._sum_ranges(part, rows)
        return (0.5 * (G + G.T) if is_cupy_namespace(xp) else G), KtU

    def normal_matvec(self, V, U=None, *, kv=False):
        """``(K^T K V, K^T U or None)`` (and ``K V`` with ``kv``), like :func:`nyhopt.ops.normal_matvec`.

        The two sums are float64 (m, k) arrays.
        """
        Kt, xp = self.Kt, self.xp
        Vt = _operand(V, "V", Kt.shape[0], self.dtype, xp).T.copy()
        U2 = None if U is None else _operand(U, "U", Kt.shape[1], self.dtype, xp)
        KVt = xp.empty((Vt.shape[0], Kt.shape[1]), dtype=self.dtype)
        k, f64 = Vt.shape[0], xp.float64
        if self._half:
            P, scale = half.split_half(Vt.T, xp)
            Pt = P.T.copy()

            def part(lo, hi):
                Kr = Kt[:, lo:hi]
                KVt[:, lo:hi] = half.kmv_block(Kr, Pt, scale, xp)
                W = KVt[:, lo:hi].T if U2 is None else xp.concatenate([KVt[:, lo:hi].T, U2[lo:hi]], axis=1)
                both = half.kmtv_block(Kr, W, xp).astype(f64)
                return both[:, :k], (None if U2 is None else both[:, k:])
        else:
            def part(lo, hi):
                Kr = Kt[:, lo:hi]
                xp.matmul(Vt, Kr, out=KVt[:, lo:hi])
                KtKV = (KVt[:, lo:hi] @ Kr.T).T.astype(f64)
                return KtKV, (None if U2 is None else (U2[lo:hi].T @ Kr.T).T.astype(f64))

        KtKV, KtU = self._sum_ranges(part)
        return (KtKV, KtU, KVt.T) if kv else (KtKV, KtU)
