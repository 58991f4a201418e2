r"""Column statistics and standardization that do not overflow for huge finite values.

``x.std()`` squares ``x``: for ``|x| > ~1e154`` the squares overflow to inf
although the standard deviation is a representable number.  Here every
column is first divided by a power of two ``2^e`` close to its largest
magnitude (so its values lie in ``[-2, 2]``), the statistics are computed on
that, and multiplied back by ``2^e``.  Scaling by a power of two is exact, so
for ordinary data the results are bit-for-bit those of ``mean``/``std``.

The input standardization of the estimators and of :func:`nyhopt.tune`,
:math:`\tilde x = (x - \mu) / \sigma` with the training columns' mean
:math:`\mu` and standard deviation :math:`\sigma` (1 where it is 0, so a
constant column is only centered), is :func:`standardization` (the statistics)
and :func:`apply_standardization` (NumPy or CuPy) or :func:`standardize_lazily`
(a dask array, block by block).
"""
from __future__ import annotations

import numpy as np

from ..backend import get_namespace, to_numpy
from ..inputs._door import trust

__all__ = ["pow2_scale", "column_mean_std", "standardize", "standardization", "apply_standardization",
           "standardize_lazily"]


def pow2_scale(amax):
    """Powers of two ``2^e <= amax < 2^(e+1)`` (1 where ``amax`` is 0 or not finite), float64 NumPy."""
    amax = np.asarray(amax, dtype=np.float64)
    ok = np.isfinite(amax) & (amax > 0)
    _, e = np.frexp(np.where(ok, amax, 1.0))
    return np.where(ok, np.ldexp(1.0, e - 1), 1.0)


def column_mean_std(A, xp):
    """Mean and (population) standard deviation of each column of ``A`` (n, p).

    Parameters
    ----------
    A : array (n, p), NumPy or CuPy, finite
    xp : module

    Returns
    -------
    mean, std : numpy.ndarray of shape (p,), float64
        Finite for every finite ``A`` (no intermediate overflow).
    """
    A64 = A.astype(xp.float64)
    s = pow2_scale(to_numpy(xp.max(xp.abs(A64), axis=0)))
    U = A64 / xp.asarray(s)
    mean = to_numpy(U.mean(axis=0), dtype=np.float64) * s
    std = to_numpy(U.std(axis=0), dtype=np.float64) * s
    return mean, std


def standardize(A64, mean, scale, xp):
    """``(A64 - mean) / scale`` in float64 without overflow in the difference.

    Halving is exact, so this equals the plain formula bit for bit where that
    one does not overflow.
    """
    out = A64 * 0.5
    out -= xp.asarray(mean * 0.5)
    out /= xp.asarray(scale)
    out *= 2.0
    return out


def standardization(X):
    """Column means and scales of ``X`` (float64 NumPy arrays; a zero std becomes 1).

    Overflow-free for any finite ``X`` (:func:`column_mean_std`).
    """
    xp = get_namespace(X)
    mean, scale = column_mean_std(X, xp)
    return mean, np.where(scale > 0, scale, 1.0)


def apply_standardization(X, mean, scale):
    """``(X - mean) / scale`` computed in float64 and returned in the dtype of ``X``.

    The difference cannot overflow (:func:`standardize`); a value that does
    not fit the dtype of ``X`` after scaling raises.

    Raises
    ------
    ValueError
        If a standardized value is not finite in the dtype of ``X`` (the
        message names the column).
    """
    xp = get_namespace(X)
    out = standardize(X.astype(xp.float64), mean, scale, xp).astype(X.dtype, copy=False)
    bad = ~xp.isfinite(out).all(axis=0)
    if bool(bad.any()):
        col = int(xp.argmax(bad))
        raise ValueError(f"X column {col}: standardized values overflow {X.dtype} "
                         f"(mean {mean[col]:.6g}, scale {scale[col]:.6g})")
    trust(out)  # shape and dtype of a checked X, every value finite: not checked again in this call
    return out


def _standardized_block(A, mean, scale, dtype):
    """One block of :func:`standardize_lazily`: :func:`standardize` in float64, in ``dtype``."""
    xp = get_namespace(A)
    return standardize(A.astype(xp.float64), mean, scale, xp).astype(dtype, copy=False)


def standardize_lazily(X, mean, scale):
    """``(X - mean) / scale`` of a dask array ``X``, block by block (lazy; float dtype kept, else float64).

    ``mean`` and ``scale`` are host float64 arrays, moved to each block's
    device (NumPy or CuPy blocks).
    """
    dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    mean, scale = np.asarray(mean, dtype=np.float64), np.asarray(scale, dtype=np.float64)
    return X.map_blocks(_standardized_block, mean, scale, dtype, dtype=dtype, meta=X._meta.astype(dtype))
