r"""How a budgeted run chooses among its stages: held-out losses, paired z-scores, the size within the noise.

Every stage of a budgeted run (:mod:`nyhopt.optim.budget._schedule`) is fitted on
its training rows at its best hyperparameters and scored on the run's
held-out rows; the choices here read those per-row losses
(``docs/tuning.md``, "A time budget").
"""
from __future__ import annotations

import math
import statistics

import numpy as np

from ...backend import to_numpy

__all__ = ["PREFERRED", "PREFER_Z", "holdout_losses", "holdout_error", "clearly_better", "variance_factor",
           "choose_candidate", "with_fallback", "largest_within_noise"]

#: The candidate of ``"auto"`` that grows: SGPR's bound tightens towards the exact GP's likelihood as
#: centers are added, and its held-out error kept falling with the centers where ``prop``'s levelled
#: off, even where ``prop`` was clearly better at 100 centers (docs/tuning.md, "A time budget").  The
#: other candidates' first stages give the final model only when their held-out losses are lower than
#: the best grown stage's by a paired z-score above PREFER_Z.
PREFERRED, PREFER_Z = "sgpr", 2.0


def holdout_losses(model, task, X_val, y_val):
    """Per-row losses of a fitted model on held-out rows: squared errors (regression) or 0/1 errors."""
    pred = to_numpy(model.predict(X_val))
    truth = to_numpy(y_val)
    if task == "regression":
        diff = pred.astype(np.float64) - truth.reshape(pred.shape).astype(np.float64)
        return (diff * diff).reshape(diff.shape[0], -1).mean(axis=1)
    return (pred.reshape(-1) != truth.reshape(-1)).astype(np.float64)


def holdout_error(losses, task):
    """RMSE (regression, in the units of ``y``) or error rate from :func:`holdout_losses`."""
    mean = float(np.mean(losses))
    return math.sqrt(mean) if task == "regression" else mean


def clearly_better(losses, than, z=None):
    r"""Whether per-row ``losses`` are lower than ``than`` (same rows) by more than ``z`` standard errors.

    The paired z-score :math:`\bar d / (s_d/\sqrt k)` of the differences
    :math:`d_i` = ``than`` - ``losses`` on the :math:`k` rows; ``z`` None
    is :data:`PREFER_Z`.
    """
    d = np.asarray(than, dtype=np.float64) - np.asarray(losses, dtype=np.float64)
    if d.size < 2:
        return False
    mean, sd = float(np.mean(d)), float(np.std(d, ddof=1))
    if sd == 0.0:
        return mean > 0.0
    return mean / (sd / math.sqrt(d.size)) > (PREFER_Z if z is None else z)


def variance_factor(model, X_val, y_val, level=0.95):
    r"""The factor of a model's predictive variance that makes its ``level`` intervals cover held-out rows, or None.

    With residuals :math:`r_i` and predictive standard deviations
    :math:`\sigma_i` (noise included) on :math:`k` rows the model was not
    fitted on, the factor is :math:`(q / z)^2`: :math:`q` the
    :math:`\lceil (k+1)\,\text{level}\rceil`-th smallest of
    :math:`|r_i|/\sigma_i` (split conformal prediction with normalized
    residuals: the interval :math:`\mu \pm q\sigma` covers a new row with
    probability at least ``level``), :math:`z` the normal quantile of the
    ``level`` interval (1.96 at 95%).
    """
    if getattr(model, "variance_model_", None) is None:
        return None
    mu, sd = model.predict(X_val, return_std=True)
    mu, sd = to_numpy(mu).astype(np.float64), to_numpy(sd).astype(np.float64)
    truth = to_numpy(y_val, dtype=np.float64)
    r = truth.reshape(mu.shape) - mu
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.abs(r) / sd.reshape(sd.shape + (1,) * (r.ndim - sd.ndim))
    score = np.sort(score.ravel())
    k = score.size
    rank = min(k, math.ceil((k + 1) * level))
    z = statistics.NormalDist().inv_cdf(0.5 + level / 2.0)
    factor = float((score[rank - 1] / z) ** 2) if k else math.nan
    return factor if 0.0 < factor < math.inf else None


def choose_candidate(run, names, auto):
    """``(k, fallbacks)``: the stage 0 candidate that grows and those kept for the end (indices in ``run.stages``).

    The lowest held-out error grows; with ``auto``, :data:`PREFERRED` grows
    and the other candidates' stages stay as fallbacks: the final model is
    one of them only when it is clearly better than the best grown stage
    (:func:`with_fallback`).
    """
    errors = [s.validation_error for s in run.stages[:len(names)]]
    valid = [i for i, e in enumerate(errors) if not math.isnan(e)]  # none without held-out rows
    if not valid:
        return 0, []
    p = names.index(PREFERRED) if PREFERRED in names else None
    if auto and p in valid:
        return p, [i for i in valid if i != p]
    return min(valid, key=errors.__getitem__), []


def with_fallback(run, best, fallbacks):
    """``best``, or a fallback stage whose held-out losses are clearly lower (:func:`clearly_better`).

    Asked twice: after stage 0, for the point the first grown stage starts
    from (``sgpr`` at 100 centers can settle where the lengthscales are long
    and the signal is taken for noise, and growing from there stays there,
    where ``prop``'s point leads the bound to the short lengthscales:
    docs/tuning.md, "A time budget"), and at the end, for the final model.
    """
    for f in fallbacks:
        if clearly_better(run.losses[f], run.losses[best]):
            best = f
    return best


def largest_within_noise(run, best, pool):
    """The stage of ``pool`` with the most centers whose held-out losses are not clearly above ``best``'s.

    Stages whose held-out errors differ by less than their noise are told
    apart by their size: the larger is the better approximation of the
    kernel, the one that more centers bring towards the exact GP (measured:
    docs/tuning.md, "A time budget", point 5).  Ties in size go to the lower
    error.
    """
    within = [k for k in pool if run.losses[k] is not None and not math.isnan(run.stages[k].validation_error)
              and not clearly_better(run.losses[best], run.losses[k])]
    return max(within, key=lambda k: (run.stages[k].centers, -run.stages[k].validation_error), default=best)
