r"""Error bounds for tests that compare results computed in another order or precision.

A test that compares two roundings of the same quantity (float32 against
float64, one blocking against another, one BLAS kernel against another)
bounds the difference by what rounding can produce, never by what one
machine printed.  The derivations are in ``docs/dev/testing.md``; in short:

* A sum of :math:`n` terms in floating point, in *any* order (recursive,
  pairwise, blocked, vectorised lanes: each term passes through at most
  :math:`n - 1` additions), is off by at most :math:`\gamma_{n-1} \sum_i |x_i|`,
  :math:`\gamma_k = k u / (1 - k u)`, :math:`u` the unit roundoff
  (:func:`worst_sum_error`).
* With rounding errors that behave as independent and of mean zero (the
  model of Higham and Mary, 2019, which sums of data like the tests' follow),
  the error is below :math:`\lambda \sqrt{n}\, u \sum_i |x_i|` except with
  probability :math:`2 e^{-\lambda^2 / 2}` (Azuma's inequality on the
  :math:`n` bounded errors): :func:`sum_error`, with the margin
  :data:`LAMBDA` = 6 (probability 3e-8 per sum).
* A sum whose terms cancel is relatively worse by its condition number
  :math:`\sum_i |x_i| / |\sum_i x_i|`: the bounds are therefore stated
  against :math:`|A|^T |B|`, not against the result (:func:`dot_bound`).
"""
from __future__ import annotations

import math

import numpy as np

#: Margin of the probabilistic bounds, in standard deviations of the rounding model.
LAMBDA = 6.0


def unit_roundoff(dtype) -> float:
    """:math:`u`: half the spacing of the floating-point numbers at 1 (2^-24 for float32, 2^-53 for float64)."""
    return float(np.finfo(dtype).eps) / 2


def worst_sum_error(n: int, dtype) -> float:
    r""":math:`\gamma_{n-1}`: the relative error (against :math:`\sum |x_i|`) of a sum of ``n`` terms in any order."""
    k = max(int(n) - 1, 0) * unit_roundoff(dtype)
    if k >= 1:
        raise ValueError(f"no worst-case bound for {n} terms in {np.dtype(dtype).name}")
    return k / (1 - k)


def sum_error(n: int, dtype, lam: float = LAMBDA) -> float:
    r""":math:`\lambda \sqrt{n}\, u` capped by the worst case: the relative error of a sum of ``n`` terms, any order."""
    typical = lam * math.sqrt(max(int(n), 1)) * unit_roundoff(dtype)
    try:
        return min(typical, worst_sum_error(n, dtype))
    except ValueError:
        return typical


def dot_error(A, B, n: int, dtype, *, dA=0.0, dB=0.0, extra: float = 0.0, lam: float = LAMBDA):
    r"""Entrywise bound (float64 array) on the error of a computed :math:`A^T B`.

    Parameters
    ----------
    A, B : array (r, p), (r, q)
        The exact operands (or the reference's).
    n : int
        The longest chain of roundings one entry passes through in ``dtype``
        (for a product of blocks summed in float32 and added in float64: the
        block length plus the number of blocks summed in float32).
    dtype
        Precision of those roundings.
    dA, dB : scalar or array broadcasting against ``A``, ``B``
        Entrywise bounds on the representation errors of the operands actually
        multiplied (for example ``2**-22 * abs(K)`` for a two-part float16 split).
    extra : float
        Further relative error against :math:`|A|^T |B|` (for example terms
        the algorithm drops).

    Returns
    -------
    array (p, q)
        :math:`|A|^T dB + dA^T |B| + dA^T dB + (\epsilon + e) (|A| + dA)^T (|B| + dB)`
        with :math:`\epsilon` = :func:`sum_error` ``(n, dtype)`` plus the float64
        rounding of a sum of ``r`` terms, :math:`e` = ``extra``; enlarged by the
        worst-case rounding of its own (nonnegative) float64 sums.
    """
    A = np.abs(np.asarray(A, dtype=np.float64))
    B = np.abs(np.asarray(B, dtype=np.float64))
    dA = np.broadcast_to(np.abs(np.asarray(dA, dtype=np.float64)), A.shape)
    dB = np.broadcast_to(np.abs(np.asarray(dB, dtype=np.float64)), B.shape)
    eps = sum_error(n, dtype, lam) + sum_error(A.shape[0], np.float64, lam) + extra
    E = A.T @ dB + dA.T @ B + dA.T @ dB + eps * ((A + dA).T @ (B + dB))
    return E * (1 + worst_sum_error(4 * A.shape[0] + 8, np.float64))


def dot_bound(A, B, n: int, dtype, **kwargs) -> float:
    r"""Frobenius norm of :func:`dot_error` (same arguments): a bound on :math:`\|\widehat{A^T B} - A^T B\|_F`."""
    return float(np.linalg.norm(dot_error(A, B, n, dtype, **kwargs)))


def rel_error(a, b) -> float:
    r""":math:`\|a - b\|_F / \|b\|_F` in float64."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))
