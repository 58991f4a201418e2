r"""The final fit of an in-memory budgeted run: more centers and a penalty chosen on the held-out rows.

The objectives tune :math:`\lambda` for the model at the stage's :math:`m`
centers: SGPR's noise variance :math:`n\lambda` absorbs the Nystrom error
:math:`\operatorname{tr}(K - Q)/n` as well as the data's noise, so at the
tuned point the penalty is larger than the predictions want, and more so
for a fit at more centers, whose Nystrom error is smaller.  Measured on the
robot arm at 36 000 rows, a 120 s run tuned at 1696 centers (test RMSE of
its model on the training rows 0.1190): the penalty times 0.15 gave 0.1141,
twice the centers at the tuned penalty 0.1171, three times the centers with
the penalty times 0.1 gave 0.1020 (``docs/tuning.md``, "A time budget").

So with at least :data:`MIN_HELD_OUT` rows held out by the run itself
(regression), the final fit is chosen on them (:func:`wide_refit`):

1. **Centers**: the winner's tuned centers, then new ones drawn as the grown
   stages draw theirs (:func:`~nyhopt.optim.budget._grow.add_centers`, in
   draw order), up to the largest count whose three fits (below) the time
   left buys: at most :data:`WIDE_FACTOR` times the tuned centers,
   :data:`~nyhopt.optim.budget._rows.FINAL_MAX_CENTERS`, and a center per
   :data:`MIN_ROWS_PER_CENTER` training rows.
2. **One pass** over the training rows gives the held-out error of every
   leading set of :data:`N_SIZES` sizes from the tuned count to that one,
   at every penalty :math:`\lambda_0 f`, :math:`f \in`
   :data:`PENALTY_FACTORS` (:func:`nyhopt.solvers.penalty_path.held_out_path`,
   float32 products under the stages' rule:
   :meth:`~nyhopt.optim.budget._precision.EpochRows.fit_products`).
3. The lowest error wins if the model there, fitted on the training rows,
   has held-out squared errors below the stage's by :data:`REFIT_Z` paired
   standard errors (:func:`~nyhopt.optim.budget._choice.clearly_better`); that model on the
   training rows calibrates the intervals, and the final model is fitted on
   all the rows at those centers and that penalty (the stage's tuned
   :math:`\lambda`, as the final fit of an in-memory run always took it).
   Otherwise nothing changes (the last stage on all the rows, then the fit).

A run on row samples (:mod:`nyhopt.optim.budget._rows`) makes the same
choice for its wide final fit where it holds out at least
:data:`MIN_HELD_OUT` rows (:func:`path_applies`): the path runs over the
final fit's own rows, from the tuned centers to the widest that
``final_size`` buys (which counts :data:`PATH_PASSES` fits for it), and the
final model is fitted at the choice (:func:`lowest_on_path`;
``nyhopt.optim.budget._finish.final_on_rows``).
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import IllConditionedError
from ...solvers.direct import products_in
from ...solvers.penalty_path import held_out_path
from .._progress import announce
from ._choice import clearly_better, holdout_losses
from ._grow import add_centers
from ._rows import FINAL_MAX_CENTERS

__all__ = ["PENALTY_FACTORS", "WIDE_FACTOR", "N_SIZES", "MIN_ROWS_PER_CENTER", "MIN_HELD_OUT", "REFIT_Z", "REFIT_SHARE",
           "PATH_PASSES", "refit_applies", "refit_reserve", "widest", "wide_refit",
           "path_applies", "path_sizes", "lowest_on_path"]

#: The penalties tried: the tuned one times these factors (4 down to 1/1024, by halves).
PENALTY_FACTORS = tuple(2.0 ** k for k in range(2, -11, -1))
#: The most centers of the final fit, as a multiple of the tuned ones.
WIDE_FACTOR = 4
#: Sizes tried from the tuned count to the widest (geometrically spaced, both ends included).
N_SIZES = 5
#: The final fit keeps at least this many training rows a center.
MIN_ROWS_PER_CENTER = 5
#: The search, the judge's fit and the final fit: this many fits at the widest size are projected.
FITS = 3.0
#: Held-out rows the choice needs (fewer estimate the error of ~65 fits too coarsely to choose among them).
MIN_HELD_OUT = 1000
#: The most of the budget the stages leave for the final fit (what its widest size needs, if less).
REFIT_SHARE = 0.25
#: A wide final fit on row samples chosen on the path costs this many fits: the path's pass over the rows, its
#: factorizations (one per penalty), then the fit at the choice (:func:`path_applies`).
PATH_PASSES = 2.25
#: The chosen fit's held-out squared errors must be below the stage's by this many paired standard errors.
REFIT_Z = 2.0


def _cap(run, m):
    """The most centers a final fit after a stage at ``m`` may take (module notes, point 1)."""
    return int(max(m, min(WIDE_FACTOR * m, FINAL_MAX_CENTERS, run.n_tr // MIN_ROWS_PER_CENTER)))


def _seconds(run, k):
    """Projected seconds of the choice, the judge's fit and the final fit at ``k`` centers (:data:`FITS` fits)."""
    n = run.n_tr
    return FITS * run.fit_seconds(k) * run.epoch_rows.fit_factor(n, k) * run.n_all / n


def refit_reserve(run, m):
    """Seconds a stage at ``m`` centers leaves for the final fit after it: those of the widest one it may take,
    at most :data:`REFIT_SHARE` of the budget, at least the fit on all the rows at ``m``."""
    at_m = 1.25 * run.fit_seconds(m) * run.n_all / run.n_tr
    return max(at_m, min(REFIT_SHARE * run.budget.seconds, _seconds(run, _cap(run, m))))


def widest(run, m):
    """The most centers (``>= m``) whose three fits the time left buys (module notes, point 1)."""
    hi = _cap(run, m)
    lo, room = m, run.usable(final=True)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _seconds(run, mid) <= room:
            lo = mid
        else:
            hi = mid - 1
    return lo


def refit_applies(run):
    """Whether the final fit is chosen on held-out rows: regression, at least :data:`MIN_HELD_OUT` held out by the run."""
    s = run.start
    return bool(getattr(run, "internal", False) and run.rows is None and s.task == "regression" and s.X_val is not None
                and s.X_val.shape[0] >= MIN_HELD_OUT)


def path_applies(run):
    """Whether the wide final fit of a run on row samples is chosen on the path: regression, at least
    :data:`MIN_HELD_OUT` held-out rows (``nyhopt.optim.budget._finish.final_on_rows``)."""
    s = run.start
    return bool(run.rows is not None and s.task == "regression" and s.X_val is not None
                and s.X_val.shape[0] >= MIN_HELD_OUT)


def wide_refit(run, k):
    """``(params, judge, top)`` of the final fit chosen on the held-out rows after stage ``k``, or None (module notes).

    ``judge`` is the model at ``params`` on the training rows (it calibrates
    the intervals); the caller fits the final model on all the rows.
    ``top``: the most centers considered (:meth:`~nyhopt.optim.budget._schedule._Run.refit_size`, the clock's
    decision, which a replay takes from the result).
    """
    s = run.start
    if not refit_applies(run) or run.losses[k] is None:
        return None
    loop, obj, _, _, _ = run.results[k]
    p = loop.best_params
    m = int(p.n_centers)
    top = run.refit_size(m)
    rng = np.random.default_rng(run.seed + 1)
    Z = add_centers(run.X_tr, p.centers, p.lengthscale, top - m, rng, in_draw_order=True) if top > m else p.centers
    announce(run.a["progress"], f"final fit: {N_SIZES} sizes up to {top} centers ({m} tuned), "
                                f"{len(PENALTY_FACTORS)} penalties, {max(run.budget.left(), 0.0):.0f}s left")
    chosen = lowest_on_path(run, obj, p, run.X_tr, run.y_tr, Z, run.epoch_rows.fit_products(run.n_tr, top))
    if chosen is None or not chosen[0] < float(np.mean(run.losses[k])):
        return None
    params = chosen[1]
    try:
        judge = run.fit(obj, params, run.X_tr, run.y_tr, products=run.epoch_rows.fit_products(run.n_tr, params.n_centers))
    except IllConditionedError:
        return None
    if not clearly_better(holdout_losses(judge, s.task, s.X_val, s.y_val), run.losses[k], z=REFIT_Z):
        return None
    return params, judge, top


def path_sizes(m, top):
    """The :data:`N_SIZES` numbers of leading centers tried, geometrically spaced from ``m`` to ``top``."""
    return sorted({int(round(v)) for v in np.geomspace(m, top, N_SIZES)})


def lowest_on_path(run, obj, p, X, y, Z, products):
    r"""``(error, params)`` of the lowest held-out error on the path from ``p``, or None.

    The fits on ``(X, y)`` at the leading :func:`path_sizes` of the centers
    ``Z`` (from ``p``'s count to all of ``Z``, which start with ``p``'s
    centers) and at the penalties :math:`\lambda_p f`, :math:`f \in`
    :data:`PENALTY_FACTORS`, scored on the run's held-out rows
    (:func:`~nyhopt.solvers.penalty_path.held_out_path`, one pass over ``X``,
    its products as ``products`` says: :func:`~nyhopt.solvers.direct.products_in`).
    None where that fails, where every fit fails, or where the lowest is
    ``p`` itself.
    """
    s = run.start
    m = int(p.n_centers)
    sizes = path_sizes(m, Z.shape[0])
    kernel = s.template.with_lengthscale(p.lengthscale.copy())
    intercept = getattr(obj, "mean", "zero") == "constant"
    try:
        with products_in(products):
            errors = held_out_path(kernel, X, Z, y, s.X_val, s.y_val, [p.penalty * f for f in PENALTY_FACTORS],
                                   sizes, fit_intercept=intercept)
    except IllConditionedError:
        return None
    if not np.isfinite(errors).any():
        return None
    i, j = np.unravel_index(np.nanargmin(errors), errors.shape)
    if sizes[i] == m and PENALTY_FACTORS[j] == 1.0:
        return None
    return float(errors[i, j]), p.replace(centers=Z[:sizes[i]],
                                          log_penalty=np.asarray(p.log_penalty + math.log(PENALTY_FACTORS[j])))
