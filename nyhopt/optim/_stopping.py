r"""The early-stopping rule of :func:`nyhopt.tune`, relative to the objective's own progress.

A run stops at epoch :math:`k` when both hold:

1. no new best value (lower than the best by more than ``min_delta``) for
   ``patience`` consecutive steps (the classical rule);
2. the trend has stalled: with :math:`P` = ``patience``, the mean of the last
   :math:`P` values is not below the mean of the :math:`P` values before them
   by more than ``rel_delta`` times the progress made so far (nor by more
   than ``min_delta``),

   .. math::
       \bar L_{\rm prev} - \bar L_{\rm last} \le
       \max\big(\delta_{\rm rel}\,(L_0 - L_{\rm best}),\ \delta_{\min}\big).

Adam at a fixed learning rate oscillates: the best value may not be beaten
for ``patience`` steps while the objective still goes down on average.  The
second condition keeps such a run going, and it is scale free (a shift or a
rescaling of the objective does not change it).  ``rel_delta = 0`` gives
the classical rule alone.  See ``docs/tuning.md``, "Early stopping".
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["trend_stalled", "DEFAULT_REL_DELTA"]

#: Default ``rel_delta`` of :func:`nyhopt.tune`.
DEFAULT_REL_DELTA = 1e-3


def trend_stalled(values, patience, rel_delta, min_delta=0.0) -> bool:
    """Condition 2 of the module notes for the objective ``values`` recorded so far (epoch order).

    Examples
    --------
    >>> oscillating_but_improving = [10.0] + [5.0 - 0.01 * k + 0.5 * (-1) ** k for k in range(30)]
    >>> trend_stalled(oscillating_but_improving, 10, 1e-3)
    False
    >>> trend_stalled([10.0] + [5.0 + 0.5 * (-1) ** k for k in range(30)], 10, 1e-3)
    True
    """
    if rel_delta == 0 or not math.isfinite(min_delta):
        return True
    v = np.asarray(values, dtype=np.float64)
    k = v.size
    last, prev = v[k - patience:], v[max(0, k - 2 * patience):k - patience]
    if prev.size == 0 or last.size < patience:
        return True
    progress = float(v[0] - v.min())
    drop = float(prev.mean() - last.mean())
    if not (math.isfinite(progress) and math.isfinite(drop)):
        return True
    return drop <= max(rel_delta * progress, min_delta)
