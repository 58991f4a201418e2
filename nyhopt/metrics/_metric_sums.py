r"""The metrics from partial sums of row blocks, in memory and on a cluster alike.

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
(:func:`nyhopt.models._scaling.pow2_scale`): dividing by it is exact, so for
ordinary values these are bit for bit the plain formulas, and for finite
values near the float64 limit (or below its normal range) nothing overflows
or flushes to zero.

:func:`block_partials` gives one row block's value checks, the maxima of its
magnitudes and its sums, each sum in the units of the block's own power of
two :math:`s_b`; :func:`combine` checks the blocks' flags in order and adds
their sums exactly in the units of the largest scale :math:`s =
\max_b s_b` (:math:`s_b/s` is a power of two):

.. math::
    \sum_i \big((y_i - \mu_i)/s\big)^2 = \sum_b (s_b/s)^2 \sum_{i\in b} \big(y_i/s_b - \mu_i/s_b\big)^2 .

In memory the whole array is one block (:math:`s_b = s`: the plain formulas
above); on a cluster every row block is one task
(:mod:`nyhopt.distributed._metrics`).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..models._scaling import pow2_scale
from ..backend import get_namespace, to_namespace, to_numpy

__all__ = ["Partials", "block_partials", "combine", "MESSAGES"]

#: The value checks' messages, in the order the metrics raise them.
MESSAGES = {
    "std": "std must be > 0 everywhere (a zero standard deviation has no density)",
    "finite": "{} contains NaN or infinity",
}


class Partials(NamedTuple):
    """One row block's value checks and numbers (host values)."""

    ok: tuple  #: True where the block passes each value check, in the order they are raised
    values: tuple  #: the maxima and sums of :func:`block_partials` (float)


def _read(xp, values):
    """0-d arrays of one module (flags or numbers) as host floats: one transfer."""
    host = to_numpy(xp.stack([xp.asarray(v, dtype=xp.float64) for v in values]), dtype=np.float64)
    return [float(v) for v in host]


def _scale(*maxima) -> float:
    return float(pow2_scale(max(maxima)))


def block_partials(kind, Y, M, S=None, z=None) -> Partials:
    """The value checks and sums of targets ``Y`` against predictions ``M`` (and ``S``) of one row block.

    Parameters
    ----------
    kind : {"rmse", "rmse+mean", "nlpd", "coverage", "labels", "argmax"}
        The metric the numbers are for.
    Y, M : arrays of one shape
        Targets and predictions; ``Y`` (and ``S``) are taken to the array
        module of ``M`` (NumPy or CuPy) in float64.
    S : array of the same shape, optional
        Standard deviations (``nlpd``, ``coverage``).
    z : float, optional
        The half width of the interval in standard deviations (``coverage``).

    Returns
    -------
    Partials
        ``ok``: ``std > 0`` (with ``S``), then ``Y``, ``M`` (and ``S``)
        finite.  ``values``: for ``rmse`` the maxima of :math:`|Y|` and
        :math:`|M|` and :math:`\\sum (Y/s_b - M/s_b)^2`, :math:`s_b` the
        power of two of the larger maximum; ``rmse+mean`` adds
        :math:`\\sum Y/t_b`, :math:`t_b` that of :math:`\\max|Y|`; ``nlpd``
        the sum of :math:`\\tfrac12 z^2 + \\log S`; ``coverage`` the count of
        :math:`|Y - M| \\le z S`; ``labels`` whether every label is 0 or 1,
        whether one is 0, and the wrong labels for the cuts 0.5 and 0;
        ``argmax`` the rows whose arg-max differ.
    """
    xp = get_namespace(M)

    def here(a):  # host targets for device predictions, or the reverse
        return to_namespace(a, xp, np.float64)

    Y, M = here(Y), here(M)
    arrays = (Y, M) if S is None else (Y, M, here(S))
    if Y.size == 0:  # an empty row block adds nothing
        return Partials((True,) * (len(arrays) + (S is not None)), _EMPTY[kind])
    flags = ([(arrays[2] > 0).all()] if S is not None else []) + [xp.isfinite(a).all() for a in arrays]
    with np.errstate(all="ignore"):  # values that fail a check are never used
        if kind.startswith("rmse"):
            flags_and_maxima = _read(xp, flags + [xp.abs(Y).max(), xp.abs(M).max()])
            ok, (amax_y, amax_m) = flags_and_maxima[:-2], flags_and_maxima[-2:]
            s = _scale(amax_y, amax_m)
            D = Y / s - M / s
            sums = [(D * D).sum()] + ([(Y / _scale(amax_y)).sum()] if kind == "rmse+mean" else [])
            values = [amax_y, amax_m] + _read(xp, sums)
        else:
            host = _read(xp, flags + _sums(kind, xp, *arrays, z))
            ok, values = host[:len(flags)], host[len(flags):]
    return Partials(tuple(bool(v) for v in ok), tuple(values))


_EMPTY = {"rmse": (0.0, 0.0, 0.0), "rmse+mean": (0.0, 0.0, 0.0, 0.0), "nlpd": (0.0,), "coverage": (0.0,),
          "labels": (1.0, 0.0, 0.0, 0.0), "argmax": (0.0,)}


def _sums(kind, xp, Y, M, S=None, z=None):
    if kind == "nlpd":
        Z = (Y - M) / S
        return [(0.5 * Z * Z + xp.log(S)).sum()]
    if kind == "coverage":
        return [(xp.abs(Y - M) <= z * S).sum()]
    if kind == "argmax":
        return [(Y.argmax(axis=1) != M.argmax(axis=1)).sum()]
    if kind == "labels":
        wrong = [((M > cut) != (Y > cut)).sum() for cut in (0.5, 0.0)]
        return [((Y == 0) | (Y == 1)).all(), (Y == 0).any()] + wrong
    raise ValueError(f"unknown kind {kind!r}")


def combine(kind, parts, names, size):
    """The metric of the blocks' :class:`Partials`, after their value checks.

    Parameters
    ----------
    kind : str
        As :func:`block_partials`.
    parts : sequence of Partials
    names : sequence of str
        The arguments' names, for the messages: ``(y, mean)``, ``(y, mean,
        std)`` or ``(y_true, y_pred)``.
    size : int
        The number of values (rows for ``argmax``).

    Returns
    -------
    float or tuple of float
        ``rmse``: the root mean square error; ``rmse+mean``: it and
        :math:`|\\bar y|` as scaled parts ``(s, r, t, m)``, the error :math:`s r`
        and :math:`|\\bar y| = t m` (:math:`s, t` powers of two: a product may
        leave float64's range where the quotient does not); ``nlpd``: the
        mean of the summands; ``coverage``, ``argmax``: the fraction counted; ``labels``: the fraction of wrong
        labels by ``c_error``'s rule.

    Raises
    ------
    ValueError
        The first failed value check, in the order of :func:`block_partials`.
    """
    messages = ([MESSAGES["std"]] if len(names) == 3 else []) + [MESSAGES["finite"].format(n) for n in names]
    for i, message in enumerate(messages):
        if not all(p.ok[i] for p in parts):
            raise ValueError(message)
    values = [p.values for p in parts]
    if kind.startswith("rmse"):
        s = _scale(*(v[0] for v in values), *(v[1] for v in values))
        f = [_scale(v[0], v[1]) / s for v in values]  # powers of two <= 1: exact
        root = math.sqrt(math.fsum(v[2] * fb * fb for v, fb in zip(values, f)) / size)
        if kind == "rmse":
            return s * root
        t = _scale(*(v[0] for v in values))
        return s, root, t, abs(math.fsum(v[3] * (_scale(v[0]) / t) for v in values) / size)
    if kind == "labels":
        half = all(v[0] for v in values) and any(v[1] for v in values)
        return math.fsum(v[2 if half else 3] for v in values) / size
    return math.fsum(v[0] for v in values) / size
