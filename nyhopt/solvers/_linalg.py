"""Small dense linear algebra (Cholesky, triangular solves) on NumPy or CuPy.

The GPU path imports ``cupyx.scipy.linalg`` lazily: it needs the CUDA
libraries, which a CPU-only installation of CuPy lacks.  The CPU path stays in
NumPy's own BLAS (:mod:`nyhopt.backend._blas` explains why SciPy's is avoided).
"""
from __future__ import annotations

import numpy as np

from ..backend._blas import potrf, trsm
from ..backend import is_cupy_namespace
from ..errors import IllConditionedError

__all__ = ["cholesky_upper", "cholesky_adjoint", "solve_triangular", "add_to_diagonal", "device_cholesky",
           "NOT_PD_HINT"]

#: What to change when a factorization of the N-KRR system fails (in the IllConditionedError).
NOT_PD_HINT = ("duplicate centers, a penalty too small for the conditioning of the problem or a very "
               "large lengthscale; use distinct centers, a larger penalty or a smaller lengthscale")


def add_to_diagonal(M, value, xp, overwrite=False):
    """Return ``M + value * I``; in place (and ``M`` itself) when ``overwrite``."""
    out = M if overwrite else M.copy()
    n = out.shape[0]
    if out.flags.c_contiguous or out.flags.f_contiguous:
        out.reshape(-1)[:: n + 1] += value
    else:  # pragma: no cover - the callers pass contiguous arrays
        idx = xp.arange(n)
        out[idx, idx] += value
    return out


def device_cholesky(M, xp):
    """Lower Cholesky factor of ``M`` on CuPy, or None when ``M`` is not numerically positive definite.

    CuPy leaves cuSOLVER's status unchecked by default, so a failed
    factorization returns an array that is not a factor: NaN, or, as LAPACK's
    ``potrf`` leaves it, the factor up to a non-positive pivot on the diagonal
    with the trailing part untouched (all finite).  A factor is accepted only
    when its diagonal is positive and every entry finite (one synchronization).
    """
    L = xp.linalg.cholesky(M)
    ok = xp.all(xp.diagonal(L) > 0) & xp.all(xp.isfinite(L))
    return L if bool(ok) else None


def cholesky_upper(M, xp, name="matrix", overwrite=False):
    """Upper Cholesky factor ``U`` with ``U^T U = M`` (``M`` symmetric positive definite).

    With ``overwrite=True`` the factorization may reuse the memory of ``M``
    (which is then destroyed): an ``m x m`` float64 matrix is 200 MB at
    m = 5000, so the preconditioner avoids extra copies.  Only the lower
    triangle of ``M`` is read.

    Raises
    ------
    nyhopt.errors.IllConditionedError
        If ``M`` is not numerically positive definite (on CuPy, whose
        factorization does not raise, the failed factor is detected by
        :func:`device_cholesky`);
        the message says what to change (:data:`NOT_PD_HINT`).  It is a
        ``numpy.linalg.LinAlgError`` and a ``ValueError``, like every other
        error of a bad problem.
    """
    if is_cupy_namespace(xp):
        L = device_cholesky(M, xp)
        if L is None:
            raise IllConditionedError(f"{name} is not numerically positive definite ({NOT_PD_HINT})")
        return L.T  # an F-ordered view, no copy
    try:
        # M is symmetric: factor its transposed view, which LAPACK can overwrite in place
        return potrf(M.T if M.flags.f_contiguous else M, lower=False, overwrite=overwrite)
    except np.linalg.LinAlgError as exc:
        raise IllConditionedError(f"{name} is not numerically positive definite ({NOT_PD_HINT}): {exc}") from None


def solve_triangular(U, B, xp, trans=False, lower=False):
    """Solve ``U X = B`` (``trans=False``) or ``U^T X = B`` (``trans=True``) for triangular ``U``."""
    if is_cupy_namespace(xp):
        from cupyx.scipy.linalg import solve_triangular as _solve

        return _solve(U, B, trans=1 if trans else 0, lower=lower, check_finite=False)
    return trsm(U, B, lower=lower, trans=trans)


def cholesky_adjoint(T, C, xp):
    r"""Cotangent on :math:`A` from a cotangent ``C`` on its upper Cholesky factor.

    For :math:`T^T T = A` (``T`` upper triangular) and a scalar :math:`f` with
    :math:`\partial f/\partial T = C` (only the upper triangle of ``C``
    matters), returns the symmetric

    .. math:: \bar A = \operatorname{sym}\big(T^{-1}\,\Phi(T C^T)\,T^{-T}\big),

    where :math:`\Phi` keeps the lower triangle and halves the diagonal
    (from :math:`T^{-T} dA\, T^{-1} = X + X^T` with :math:`X = dT^T T^{-T}`
    lower triangular).  All float64, ``O(m^3)``.
    """
    M = T @ C.T
    Phi = xp.tril(M)
    idx = xp.arange(M.shape[0])
    Phi[idx, idx] *= 0.5
    Y = solve_triangular(T, Phi, xp)  # T^{-1} Phi
    Y = solve_triangular(T, Y.T, xp).T  # T^{-1} Phi T^{-T}
    return 0.5 * (Y + Y.T)
