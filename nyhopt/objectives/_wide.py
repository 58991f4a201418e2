"""The ``n``-sized linear algebra of the exact objectives, on nyhopt's worker pool (CPU).

Triangular solves with ``n`` right-hand sides (:func:`solve_lower_inplace`,
:func:`solve_lower_copy`), Gram products (:func:`gram`) and products of a
wide ``m x n`` matrix with thin ones (:func:`wide_times_thin`,
:func:`wide_t_times_thin`); in a pool phase (:mod:`nyhopt.backend._parallel`) they
run on column or row ranges of the wide matrix, one range per worker.

Thin products.  The exact objectives multiply :math:`A = L^{-1}K^\\top` (``m x n``) and the
validation kernel matrix by thin matrices: :math:`AY`, :math:`Y - A^\\top\\beta`
(the fit), :math:`A^\\top U` (low-rank cotangents), with ``r = p`` to ``3p + 1``
columns.  These passes are memory-bound, and OpenBLAS runs them well only
for one column: for ``r = 2`` or ``3`` its ``gemm`` took 2 to 4 times as long
as ``r`` matrix-vector products (``docs/performance-ops.md``).  So on the
CPU each column is its own matrix-vector product; :func:`wide_t_times_thin`
cuts the ``n`` rows into ranges on nyhopt's worker pool (a pool phase,
:mod:`nyhopt.backend._parallel`) and :func:`wide_times_thin` deals the columns to it.
On the GPU both are one product.

Examples
--------
>>> import numpy as np
>>> A = np.arange(6.0).reshape(2, 3); Y = np.ones((3, 2))
>>> wide_times_thin(A, Y, np)
array([[ 3.,  3.],
       [12., 12.]])
>>> wide_t_times_thin(A, np.ones((2, 1)), np, Y=np.ones((3, 1)), sign=-1.0).ravel()
array([-2., -4., -6.])
"""
from __future__ import annotations

import numpy as np

from ..backend._blas import trsm
from ..backend._parallel import active_workers, map_chunks, map_ranges, min_rows
from ..backend import is_cupy_namespace

__all__ = ["column_sumsq", "gram", "solve_lower_copy", "solve_lower_inplace", "wide_times_thin", "wide_t_times_thin"]


def _tri_solve(L, b, xp, trans=False):
    """``L^{-1} b`` (``L^{-T} b`` with ``trans``), lower-triangular ``L``, into a new array."""
    if is_cupy_namespace(xp):
        import cupyx.scipy.linalg as sla  # needs the CUDA libraries: only on GPU paths

        return sla.solve_triangular(L, b, trans=1 if trans else 0, lower=True)
    return trsm(L, b, lower=True, trans=trans)


def wide_times_thin(A, Y, xp):
    """:math:`AY` (m, r) in float64 for ``A`` (m, n) and ``Y`` (n, r) (the products in the dtype of ``A``)."""
    if is_cupy_namespace(xp) or Y.shape[1] <= 1:
        return (A @ Y.astype(A.dtype, copy=False)).astype(xp.float64)
    r = Y.shape[1]
    out = np.empty((A.shape[0], r), dtype=A.dtype)
    parts = max(1, min(active_workers(), r))

    def columns(c):
        for q in range(c, r, parts):
            np.matmul(A, Y[:, q].astype(A.dtype, copy=False), out=out[:, q])

    map_chunks(columns, parts)
    return out.astype(np.float64, copy=False)


def wide_t_times_thin(A, B, xp, Y=None, sign=1.0):
    """:math:`Y + \\mathrm{sign}\\,A^T B` (n, r) in the dtype of ``A``; ``A`` (m, n), ``B`` (m, r), ``Y`` (n, r) or None.

    ``B`` is cast to the dtype of ``A`` first (as the product
    ``A.T @ B.astype(A.dtype)`` would).
    """
    Bc = B.astype(A.dtype, copy=False)
    if is_cupy_namespace(xp):
        P = A.T @ Bc
        return P if Y is None else (Y + P if sign > 0 else Y - P) if sign in (1.0, -1.0) else Y + sign * P
    n, r = A.shape[1], B.shape[1]
    out = np.empty((n, r), dtype=A.dtype)

    def rows(lo, hi):
        for q in range(r):
            col = out[lo:hi, q]
            if r == 1:
                np.matmul(A[:, lo:hi].T, Bc[:, 0], out=out[lo:hi, 0])
            else:
                col[...] = A[:, lo:hi].T @ Bc[:, q]
            if sign != 1.0:
                col *= sign
            if Y is not None:
                col += Y[lo:hi, q]

    map_ranges(rows, n, min_rows(A.shape[0]))
    return out


def column_sumsq(A, xp):
    """:math:`\\sum_j A_{ji}^2` (n,) for ``A`` (m, n), in the dtype of ``A``; row ranges on the pool."""
    if is_cupy_namespace(xp):
        return xp.einsum("ji,ji->i", A, A)
    out = np.empty(A.shape[1], dtype=A.dtype)

    def part(lo, hi):
        a = A[:, lo:hi]
        np.einsum("ji,ji->i", a, a, out=out[lo:hi])

    map_ranges(part, A.shape[1], min_rows(A.shape[0]))
    return out


def solve_lower_inplace(L, B, xp, trans=False):
    """``B <- L^{-1} B`` (``L^{-T} B`` with ``trans``) for lower-triangular ``L`` (m, m) and ``B`` (m, n).

    The result has the dtype of ``B``.  On the CPU this is BLAS ``trsm`` in
    place, on column ranges of ``B`` run by the worker pool
    (:mod:`nyhopt.backend._parallel`) in a pool phase.
    """
    if is_cupy_namespace(xp) or not B.flags.c_contiguous:
        return _tri_solve(L, B, xp, trans=trans)
    Lc = L.astype(B.dtype, copy=False)
    map_ranges(lambda lo, hi: trsm(Lc, B[:, lo:hi], lower=True, trans=trans, overwrite_b=True), B.shape[1],
               min_rows(B.shape[0]))
    return B


def gram(A, xp, weights=None):
    """:math:`A A^T` (or :math:`A\\,\\mathrm{diag}(w)A^T`) in float64 for ``A`` (m, n).

    On the CPU the column ranges run on the worker pool and their partial
    products are summed in float64.  Non-negative weights are applied as
    :math:`(A\\,\\mathrm{diag}\\sqrt w)(A\\,\\mathrm{diag}\\sqrt w)^T`, a
    symmetric rank-k product (half the flops of a general product).
    """
    if weights is not None and not bool(xp.all(weights >= 0)):
        root = None
    else:
        root = None if weights is None else xp.sqrt(weights.astype(xp.float64, copy=False))

    def part(lo, hi):
        a = A[:, lo:hi]
        if weights is None:
            return (a @ a.T).astype(xp.float64, copy=False)
        if root is not None:
            a = a * root[lo:hi][None, :].astype(a.dtype, copy=False)
            return (a @ a.T).astype(xp.float64, copy=False)
        b = a * weights[lo:hi][None, :].astype(a.dtype, copy=False)
        return (a @ b.T).astype(xp.float64, copy=False)

    parts = [part(0, A.shape[1])] if is_cupy_namespace(xp) else map_ranges(part, A.shape[1], min_rows(A.shape[0]))
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return 0.5 * (out + out.T)


def solve_lower_copy(L, B, xp, out=None):
    """``L^{-1} B`` into a new array (or into ``out``, C-contiguous like ``B``), ``B`` (m, n) kept.

    On the CPU each column range of the worker pool copies its columns and
    solves them in place: the same ranges and calls as
    :func:`solve_lower_inplace`, hence the same numbers.
    """
    if is_cupy_namespace(xp) or not B.flags.c_contiguous:
        return _tri_solve(L, B, xp)
    if out is None:
        out = np.empty_like(B)
    Lc = L.astype(B.dtype, copy=False)

    def part(lo, hi):
        out[:, lo:hi] = B[:, lo:hi]
        trsm(Lc, out[:, lo:hi], lower=True, overwrite_b=True)

    map_ranges(part, B.shape[1], min_rows(B.shape[0]))
    return out
