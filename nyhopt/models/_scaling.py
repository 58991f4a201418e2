"""Column statistics and standardization that do not overflow for huge finite values.

``x.std()`` squares ``x``: for ``|x| > ~1e154`` the squares overflow to inf
although the standard deviation is a representable number.  Here every
column is first divided by a power of two ``2^e`` close to its largest
magnitude (so its values lie in ``[-2, 2]``), the statistics are computed on
that, and multiplied back by ``2^e``.  Scaling by a power of two is exact, so
for ordinary data the results are bit-for-bit those of ``mean``/``std``.
"""
from __future__ import annotations

import numpy as np

from ..backend import to_numpy

__all__ = ["pow2_scale", "column_mean_std", "standardize"]


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
