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
checks and the sums are reductions on the cluster (two passes, a few numbers
to this process; docs/scaling-out.md).  The results are Python floats.

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

from ._metric_sums import Checks, covered_count, host_values, nlpd_sum, rms, scale_of, sq_error_sum
from .backend import as_native, get_namespace, is_dask_array, to_numpy

__all__ = ["rmse", "nlpd", "coverage"]


class _InMemory:
    """Inputs placed on the device of ``mean`` (NumPy or CuPy), checks and sums evaluated as they are stated."""

    def __init__(self, mean):
        self.xp = self.fm = get_namespace(as_native(mean, "mean"))

    def place(self, a, name):
        a = as_native(a, name)
        return self.xp.asarray(to_numpy(a) if get_namespace(a) is not self.xp else a)

    evaluate = staticmethod(host_values)


def _arrays(y, mean, std=None):
    """``(on, [y, mean(, std)], checks)``: float64 arrays of one shape in the array module of ``mean``.

    A mismatch names the argument (raised here); the value checks (``std > 0``,
    NaN or infinity) are stated in ``checks`` for the metric to run with its
    first statistics.  When an input is a dask array (``predict`` of a model
    for a dask ``X``) they are all dask arrays on the row blocks of the first
    one, and ``on.evaluate`` computes on the cluster.
    """
    if any(is_dask_array(a) for a in (y, mean, std)):
        from .distributed._metrics import DaskRows

        on = DaskRows(mean, y, std)
    else:
        on = _InMemory(mean)

    def placed(a, name):  # y and std follow mean across host and device
        a = on.place(a, name)
        if a.dtype.kind not in "biuf":
            raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")
        return a.astype(np.float64)

    y = placed(y, "y")
    mean = placed(mean, "mean")
    if y.size == 0:
        raise ValueError("y is empty")
    if y.shape != mean.shape:
        if y.size == mean.size and 1 in (y.ndim, mean.ndim) and max(y.ndim, mean.ndim) <= 2:
            y = y.reshape(mean.shape)
        else:
            raise ValueError(f"y has shape {tuple(y.shape)} but mean has shape {tuple(mean.shape)}")
    out = [y, mean]
    checks = Checks(on.evaluate)
    if std is not None:
        std = placed(std, "std")
        if std.shape != mean.shape:
            raise ValueError(f"std has shape {tuple(std.shape)} but mean has shape {tuple(mean.shape)}")
        checks.need((std > 0).all(), "std must be > 0 everywhere (a zero standard deviation has no density)")
        out.append(std)
    for name, a in zip(("y", "mean", "std"), out):
        checks.need(on.fm.isfinite(a).all(), f"{name} contains NaN or infinity")
    return on, out, checks


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
    overflow.  For dask arrays the checks and the sum are two reductions on
    the cluster; two numbers, then one, reach this process.
    """
    on, (y, mean), checks = _arrays(y, mean)
    s = scale_of(*checks.run([abs(y).max(), abs(mean).max()]))
    (total,) = on.evaluate([sq_error_sum(y, mean, s)])
    return rms(total, y.size, s)


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
    on, (y, mean, std), checks = _arrays(y, mean, std)
    checks.run()
    (total,) = on.evaluate([nlpd_sum(y, mean, std, on.fm)])
    return float(float(total) / y.size + 0.5 * math.log(2.0 * math.pi))


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

    on, (y, mean, std), checks = _arrays(y, mean, std)
    checks.run()
    z = float(ndtri(0.5 + 0.5 * float(level)))
    (count,) = on.evaluate([covered_count(y, mean, std, z, on.fm)])
    return float(count) / y.size
