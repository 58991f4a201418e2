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
values.  Arrays may be NumPy or CuPy, or dask arrays of either: then the
checks and the sums are one task per row block on the cluster (one pass, a
few numbers per block to this process; docs/scaling-out.md).  The results are
Python floats.

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

from ._metric_sums import block_partials, combine
from ..inputs._validation import numbers_from_objects
from ..backend import as_native, get_namespace, to_namespace
from ..placement import on_cluster

__all__ = ["rmse", "nlpd", "coverage"]


def _metric(kind, y, mean, std=None, z=None):
    """The metric ``kind`` (:func:`nyhopt.metrics._metric_sums.combine`) of ``y`` against ``mean`` (and ``std``).

    The inputs are float64 arrays of one shape in the array module of
    ``mean``; a mismatch names the argument.  Then the value checks (``std >
    0``, NaN or infinity, in this order) and the sums come from one pass:
    over the whole arrays in memory, or, when an input is a dask array
    (``predict`` of a model for a dask ``X``), one task per row block of the
    first dask input, in the array module of the predictions' chunks
    (:mod:`nyhopt.distributed._metrics`).
    """
    cluster = on_cluster(y, mean, std)
    if not cluster:
        xp = get_namespace(as_native(mean, "mean"))

    def placed(a, name):  # in memory, y and std follow mean across host and device
        if not on_cluster(a):
            a = as_native(a, name)
            a = numbers_from_objects(a if hasattr(a, "dtype") else np.asarray(a), name)
            if not cluster:
                a = to_namespace(a, xp)
        if a.dtype.kind not in "biuf":
            raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")
        return a if cluster else a.astype(np.float64)

    y = placed(y, "y")
    mean = placed(mean, "mean")
    if cluster:
        from ..distributed._metrics import known_shapes

        y, mean = known_shapes(y, mean)
    if y.size == 0:
        raise ValueError("y is empty")
    if y.shape != mean.shape:
        if y.size == mean.size and 1 in (y.ndim, mean.ndim) and max(y.ndim, mean.ndim) <= 2:
            y = y.reshape(mean.shape)
        else:
            raise ValueError(f"y has shape {tuple(y.shape)} but mean has shape {tuple(mean.shape)}")
    names = ("y", "mean")
    if std is not None:
        std = placed(std, "std")
        if cluster:
            (std,) = known_shapes(std)
        if std.shape != mean.shape:
            raise ValueError(f"std has shape {tuple(std.shape)} but mean has shape {tuple(mean.shape)}")
        names += ("std",)
    if cluster:
        from ..distributed._metrics import partials_dask

        parts = partials_dask(kind, mean, y, std, z=z)
    else:
        parts = [block_partials(kind, y, mean, std, z=z)]
    return combine(kind, parts, names, y.size)


def rmse(y, mean) -> float:
    """Root mean squared error over all values.

    Parameters
    ----------
    y, mean : arrays of shape (n,) or (n, p)

    Returns
    -------
    float

    Notes
    -----
    The differences are taken after a division by a power of two near the
    largest magnitude (exact): finite values near the float64 limit do not
    overflow.  For dask arrays every row block is one task on the cluster,
    which returns its checks, maxima and sum; the blocks' sums are added
    exactly in the units of the largest power of two.
    """
    return _metric("rmse", y, mean)


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
    return float(_metric("nlpd", y, mean, std) + 0.5 * math.log(2.0 * math.pi))


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

    return _metric("coverage", y, mean, std, z=float(ndtri(0.5 + 0.5 * float(level))))
