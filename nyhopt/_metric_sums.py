r"""The sums behind the metrics, and their input checks, for NumPy, CuPy and dask arrays alike.

Every metric of :mod:`nyhopt.metrics` and :mod:`nyhopt.datasets` is a few sums
over all values, divided by their number on the host:

.. math::
    \mathrm{RMSE} = s\Big(\frac1n\sum_i \big(y_i/s - \mu_i/s\big)^2\Big)^{1/2},
    \qquad
    \mathrm{NLPD} = \frac1n\sum_i \Big[\tfrac12 z_i^2 + \log\sigma_i\Big] + \tfrac12\log 2\pi,
    \quad z_i = \frac{y_i - \mu_i}{\sigma_i},

the coverage counts :math:`|y_i - \mu_i| \le z\sigma_i`, the mean of ``nrmse``
is :math:`s_y \sum_i (y_i/s_y) / n`, and ``c_error`` counts wrong labels.
:math:`s` is a power of two near the largest magnitude of the operands
(:func:`nyhopt._scaling.pow2_scale`): dividing by it is exact, so for
ordinary values these are bit for bit the plain formulas, and for finite
values near the float64 limit (or below its normal range) nothing overflows
or flushes to zero.

The functions here use array operators, methods and the ufuncs of the module
``fm`` they are given only: eager for NumPy and CuPy arrays (``fm`` their
module), lazy for dask arrays (``fm`` is ``dask.array``), whose sums the
caller computes on the cluster (``nyhopt.distributed._metrics``).  The checks
are collected the same way (:class:`Checks`) and raise, in the order the
in-memory functions always had, the same errors on every kind of array.
"""
from __future__ import annotations

import math

from ._scaling import pow2_scale
from .backend import to_numpy

__all__ = ["Checks", "host_values", "scale_of", "sq_error_sum", "rms", "scaled_sum", "nlpd_sum",
           "covered_count", "label_stats", "label_rule", "wrong_count"]


def host_values(values):
    """Already computed values (NumPy or CuPy scalars, Python numbers) as host NumPy values."""
    return [to_numpy(v) for v in values]


class Checks:
    """Checks of a metric's inputs, evaluated together and raised in the order they were stated.

    ``need(ok, message)`` states a check whose value may be lazy (a dask
    array); ``fail(exc)`` is a check that failed on shapes or dtypes alone: it
    raises the first failed check stated before it, else ``exc``; ``run(stats)``
    evaluates every check with ``stats`` (one compute on a cluster), raises the
    first ``ValueError(message)`` of a failed one, and returns the stats as
    host values.

    Parameters
    ----------
    evaluate : callable
        ``evaluate(list_of_values) -> list of host values``: :func:`host_values`
        in memory, one ``dask.compute`` on a cluster.
    """

    def __init__(self, evaluate=host_values):
        self.evaluate = evaluate
        self._items = []

    def need(self, ok, message):
        self._items.append((ok, message))

    def fail(self, exc):
        self.run()
        raise exc

    def run(self, stats=()):
        stats = list(stats)
        values = self.evaluate([ok for ok, _ in self._items] + stats)
        for (_, message), ok in zip(self._items, values):
            if not bool(ok):
                raise ValueError(message)
        self._items = []
        return values[len(values) - len(stats):] if stats else []


def scale_of(*maxima) -> float:
    """The power of two near the largest of ``maxima`` (host numbers), 1.0 for zero."""
    return float(pow2_scale(max(float(m) for m in maxima)))


def sq_error_sum(Y, M, s):
    """:math:`\\sum ((Y - M) / s)^2` over all values, as ``Y/s - M/s`` (no overflow for ``s`` from :func:`scale_of`)."""
    D = Y / s - M / s
    return (D * D).sum()


def rms(total, n, s) -> float:
    """``s * sqrt(total / n)``: the root mean square of the values whose scaled squares sum to ``total``."""
    return s * math.sqrt(float(total) / n)


def scaled_sum(Y, s):
    """:math:`\\sum Y / s` over all values."""
    return (Y / s).sum()


def nlpd_sum(Y, M, S, fm):
    """:math:`\\sum \\tfrac12 z^2 + \\log S`, :math:`z = (Y - M)/S`, over all values."""
    Z = (Y - M) / S
    return (0.5 * Z * Z + fm.log(S)).sum()


def covered_count(Y, M, S, z, fm):
    """How many values have :math:`|Y - M| \\le z S`."""
    return (fm.abs(Y - M) <= z * S).sum()


def wrong_count(T, P, rule):
    """How many rows of predictions ``P`` miss their labels ``T``.

    ``rule`` is ``"argmax"`` (one-hot rows), ``"half"`` (0/1 labels against
    ``P > 0.5``) or ``"sign"`` (the signs of both).
    """
    if rule == "argmax":
        return (T.argmax(axis=1) != P.argmax(axis=1)).sum()
    cut = 0.5 if rule == "half" else 0.0
    return ((P > cut) != (T > cut)).sum()


def label_rule(T, stats):
    """``c_error``'s rule for labels ``T`` given :func:`label_stats`' values."""
    if T.ndim == 2 and T.shape[1] >= 2:
        return "argmax"
    only_01, any_0 = (bool(v) for v in stats)
    return "half" if only_01 and any_0 else "sign"


def label_stats(T):
    """Whether every label is 0 or 1, and whether one is 0 (lazy for dask arrays)."""
    return [((T == 0) | (T == 1)).all(), (T == 0).any()]

