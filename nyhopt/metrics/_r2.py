r"""The coefficient of determination from partial sums of row blocks, in memory and on a cluster alike.

.. math::
    R^2_c = 1 - \frac{\sum_i w_i (y_{ic} - \hat y_{ic})^2}{\sum_i w_i (y_{ic} - \bar y_c)^2},
    \qquad \bar y_c = \frac{\sum_i w_i y_{ic}}{\sum_i w_i},

averaged over the columns ``c``, as scikit-learn's ``r2_score``.  Each row
block ``b`` gives, in the units of a power of two :math:`s_b` near its
:math:`\max_i |y_{ic}|` (an exact scaling, so that no square overflows),
its weight :math:`W_b`, weighted mean :math:`\bar y_b`, centered sum of
squares :math:`M_b` and residual sum of squares; the blocks combine exactly
in the units of the largest :math:`s` (Chan, Golub and LeVeque's pairwise
update):

.. math::
    \bar y = \frac{\sum_b W_b \bar y_b}{W}, \qquad
    \sum_i w_i (y_i - \bar y)^2 = \sum_b M_b + \sum_b W_b (\bar y_b - \bar y)^2 .

In memory the whole array is one block; on a cluster every block is one task
(:mod:`nyhopt.distributed._score`).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..models._scaling import pow2_scale
from ..backend import get_namespace, to_numpy

__all__ = ["R2Partials", "r2_partials", "r2_combine", "r2_from_sums"]


class R2Partials(NamedTuple):
    """One row block's partial sums (host float64; the column arrays have shape (p,))."""

    finite_y: bool  #: ``y`` holds no NaN or infinity
    finite_w: bool  #: nor do the weights
    weight: float  #: :math:`W_b`
    amax: np.ndarray  #: :math:`\max_i |y_{ic}|`
    scale: np.ndarray  #: :math:`s_b`
    mean: np.ndarray  #: :math:`\bar y_b / s_b`
    centered: np.ndarray  #: :math:`M_b / s_b^2`
    residual: np.ndarray  #: :math:`\sum_i w_i (y_{ic} - \hat y_{ic})^2 / s_b^2`


def r2_partials(Y, P, w=None) -> R2Partials:
    """The partial sums of targets ``Y`` (r, p) against predictions ``P`` (r, p), weights ``w`` (r,) or none.

    ``Y``, ``P`` and ``w`` are float64 arrays of one module (NumPy or CuPy);
    one host read of a few numbers.
    """
    xp = get_namespace(Y, P)
    amax = xp.abs(Y).max(axis=0)
    finite_y = xp.isfinite(Y).all()
    finite_w = True if w is None else xp.isfinite(w).all()
    s = xp.asarray(pow2_scale(to_numpy(amax)))
    Ys, Ps = Y / s, P / s
    if w is None:
        weight = xp.asarray(float(Y.shape[0]))
        mean = Ys.mean(axis=0)
        centered, residual = ((Ys - mean) ** 2).sum(axis=0), ((Ys - Ps) ** 2).sum(axis=0)
    else:
        w = w[:, None]
        weight = w.sum()
        mean = (w * Ys).sum(axis=0) / xp.where(weight > 0, weight, 1.0)
        centered, residual = (w * (Ys - mean) ** 2).sum(axis=0), (w * (Ys - Ps) ** 2).sum(axis=0)
    host = [to_numpy(a, dtype=np.float64) for a in (finite_y, finite_w, weight, amax, s, mean, centered, residual)]
    return R2Partials(bool(host[0]), bool(host[1]), float(host[2]), *host[3:])


def r2_combine(parts):
    """``(ss_res, ss_tot, weight)`` of all blocks, in the units of the largest scale (float64 (p,), float).

    The sums come scaled by a power of two, which :math:`R^2` does not see.
    """
    s = pow2_scale(np.max([p.amax for p in parts], axis=0))
    W = sum(p.weight for p in parts)
    f = [p.scale / s for p in parts]  # powers of two <= 1: exact
    mean = sum(p.weight * p.mean * fb for p, fb in zip(parts, f)) / (W if W > 0 else 1.0)
    ss_tot = sum(p.centered * fb * fb + p.weight * (p.mean * fb - mean) ** 2 for p, fb in zip(parts, f))
    ss_res = sum(p.residual * fb * fb for p, fb in zip(parts, f))
    return ss_res, ss_tot, W


def r2_from_sums(ss_res, ss_tot) -> float:
    """Mean over columns of ``1 - ss_res / ss_tot`` (host arrays); a constant column scores 1 if fitted exactly, else 0."""
    ss_res, ss_tot = np.asarray(ss_res, dtype=np.float64), np.asarray(ss_tot, dtype=np.float64)
    r2 = np.where(ss_tot > 0, 1 - ss_res / np.where(ss_tot > 0, ss_tot, 1), np.where(ss_res == 0, 1.0, 0.0))
    return float(r2.mean())
