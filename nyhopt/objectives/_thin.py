"""Products of a wide ``m x n`` matrix with thin ``n x r`` or ``m x r`` ones (CPU: column by column).

The exact objectives multiply :math:`A = L^{-1}K^\\top` (``m x n``) and the
validation kernel matrix by thin matrices: :math:`AY`, :math:`Y - A^\\top\\beta`
(the fit), :math:`A^\\top U` (low-rank cotangents), with ``r = p`` to ``3p + 1``
columns.  These passes are memory-bound, and OpenBLAS runs them well only
for one column: for ``r = 2`` or ``3`` its ``gemm`` took 2 to 4 times as long
as ``r`` matrix-vector products (``docs/performance-ops.md``).  So on the
CPU each column is its own matrix-vector product; :func:`wide_t_times_thin`
cuts the ``n`` rows into ranges on nyhopt's worker pool (a pool phase,
:mod:`nyhopt._parallel`) and :func:`wide_times_thin` deals the columns to it.
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

from .._parallel import active_workers, map_chunks, map_ranges, min_rows
from ..backend import is_cupy_namespace

__all__ = ["wide_times_thin", "wide_t_times_thin"]


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
