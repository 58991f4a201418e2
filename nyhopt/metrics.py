r"""Quality of predictions with error bars: RMSE, negative log predictive density, interval coverage.

For targets :math:`y_i`, predictive means :math:`\mu_i` and standard
deviations :math:`\sigma_i > 0` (``predict(X, return_std=True)``, the spread
of a new observation):

.. math::
    \mathrm{RMSE} = \Big(\frac1n\sum_i (y_i - \mu_i)^2\Big)^{1/2}, \qquad
    \mathrm{NLPD} = \frac1n\sum_i \Big[\tfrac12\log(2\pi\sigma_i^2)
        + \frac{(y_i - \mu_i)^2}{2\sigma_i^2}\Big],

in nats per value (lower is better; it rewards error bars of the right size),
and the coverage of the central interval of probability ``level``: the
fraction of :math:`y_i` with :math:`|y_i - \mu_i| \le z\,\sigma_i`,
:math:`z = \Phi^{-1}((1 + \text{level})/2)` (1.96 for 95%), which is ``level``
for calibrated error bars.  Several output columns are averaged over all
values.  Arrays may be NumPy or CuPy (or dask arrays of either, computed
first); the results are Python floats.

Examples
--------
>>> import numpy as np
>>> from nyhopt import metrics
>>> y = np.array([0.0, 1.0, 2.0]); mean = np.array([0.1, 0.9, 2.5]); std = np.full(3, 0.2)
>>> round(metrics.rmse(y, mean), 4), round(metrics.coverage(y, mean, std), 4)
(0.3, 0.6667)
>>> round(metrics.nlpd(y, mean, std), 4)
0.4345
"""
from __future__ import annotations

import math

import numpy as np

from .backend import as_native, get_namespace, to_numpy

__all__ = ["rmse", "nlpd", "coverage"]


def _arrays(y, mean, std=None):
    """``(y, mean, std)``: float64 arrays of one shape on the device of ``mean``; a mismatch names the argument.

    Dask arrays (``predict`` of a model for a dask ``X``) are computed first.
    """
    y, mean, std = as_native(y, "y"), as_native(mean, "mean"), as_native(std, "std")
    xp = get_namespace(mean)

    def on_mean_device(a, name):  # y and std follow mean across host and device
        a = xp.asarray(to_numpy(a) if get_namespace(a) is not xp else a)
        if a.dtype.kind not in "biuf":
            raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")
        return a.astype(xp.float64)

    y = on_mean_device(y, "y")
    mean = on_mean_device(mean, "mean")
    if y.size == 0:
        raise ValueError("y is empty")
    if y.shape != mean.shape:
        if y.size == mean.size and 1 in (y.ndim, mean.ndim) and max(y.ndim, mean.ndim) <= 2:
            y = y.reshape(mean.shape)
        else:
            raise ValueError(f"y has shape {tuple(y.shape)} but mean has shape {tuple(mean.shape)}")
    out = [y, mean]
    if std is not None:
        std = on_mean_device(std, "std")
        if std.shape != mean.shape:
            raise ValueError(f"std has shape {tuple(std.shape)} but mean has shape {tuple(mean.shape)}")
        if not bool(xp.all(std > 0)):
            raise ValueError("std must be > 0 everywhere (a zero standard deviation has no density)")
        out.append(std)
    for name, a in zip(("y", "mean", "std"), out):
        if not bool(xp.all(xp.isfinite(a))):
            raise ValueError(f"{name} contains NaN or infinity")
    return xp, out


def rmse(y, mean) -> float:
    """Root mean squared error over all values.

    Parameters
    ----------
    y, mean : arrays of shape (n,) or (n, p)

    Returns
    -------
    float
    """
    xp, (y, mean) = _arrays(y, mean)
    d = y - mean
    return float(xp.sqrt(xp.mean(d * d)))


def nlpd(y, mean, std) -> float:
    """Mean negative log density of ``y`` under :math:`N(\\mu, \\sigma^2)`, in nats (module notes).

    Parameters
    ----------
    y, mean, std : arrays of shape (n,) or (n, p)
        ``std > 0``: the standard deviation of an observation (``include_noise=True``).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Mismatched shapes, ``std <= 0``, NaN or infinity.
    """
    xp, (y, mean, std) = _arrays(y, mean, std)
    z = (y - mean) / std
    return float(xp.mean(0.5 * z * z + xp.log(std)) + 0.5 * math.log(2.0 * math.pi))


def coverage(y, mean, std, level=0.95) -> float:
    """Fraction of ``y`` inside the central interval :math:`\\mu \\pm z\\sigma` of probability ``level``.

    Parameters
    ----------
    y, mean, std : arrays of shape (n,) or (n, p)
    level : float in (0, 1), default 0.95

    Returns
    -------
    float
    """
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not 0.0 < level < 1.0:
        raise ValueError(f"level must be a probability in (0, 1), got {level!r}")
    from scipy.special import ndtri

    xp, (y, mean, std) = _arrays(y, mean, std)
    z = float(ndtri(0.5 + 0.5 * float(level)))
    return float(xp.mean((xp.abs(y - mean) <= z * std).astype(xp.float64)))
