"""Small dense linear algebra (Cholesky, triangular solves) on NumPy or CuPy.

The GPU path imports ``cupyx.scipy.linalg`` lazily: it needs the CUDA
libraries, which a CPU-only installation of CuPy lacks.
"""
from __future__ import annotations

import numpy as np

from ..backend import is_cupy_namespace

__all__ = ["cholesky_upper", "solve_triangular", "add_to_diagonal"]


def add_to_diagonal(M, value, xp):
    """Return ``M + value * I`` (a new array; ``M`` is left intact)."""
    out = M.copy()
    n = out.shape[0]
    out.reshape(-1)[:: n + 1] += value
    return out


def cholesky_upper(M, xp, name="matrix"):
    """Upper Cholesky factor ``U`` with ``U^T U = M`` (``M`` symmetric positive definite).

    Raises
    ------
    numpy.linalg.LinAlgError
        If ``M`` is not numerically positive definite (NumPy); on CuPy the
        factor holds NaN instead, which is detected and reported the same way.
    """
    try:
        L = xp.linalg.cholesky(M)
    except np.linalg.LinAlgError as exc:
        raise np.linalg.LinAlgError(f"{name} is not positive definite: {exc}") from None
    if is_cupy_namespace(xp) and not bool(xp.all(xp.isfinite(L))):
        raise np.linalg.LinAlgError(f"{name} is not positive definite")
    return L.T.copy()


def solve_triangular(U, B, xp, trans=False, lower=False):
    """Solve ``U X = B`` (``trans=False``) or ``U^T X = B`` (``trans=True``) for triangular ``U``."""
    if is_cupy_namespace(xp):
        from cupyx.scipy.linalg import solve_triangular as _solve
    else:
        from scipy.linalg import solve_triangular as _solve
    return _solve(U, B, trans=1 if trans else 0, lower=lower, check_finite=False)
