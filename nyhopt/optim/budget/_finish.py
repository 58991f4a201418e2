r"""The end of a budgeted run: the winning stage, the last stage on all the rows, the final model.

``docs/tuning.md``, "A time budget", point 5:

* **The winner** (:func:`winning_stage`): the largest stage whose held-out
  losses are not clearly above those of the stage with the lowest held-out
  error (:func:`~nyhopt.optim.budget._choice.largest_within_noise`), or a
  fallback objective's stage where that one is clearly better; without
  held-out errors, the last stage that did not fail.
* **The last stage** (:func:`polish`): with rows held out by the run itself,
  the winner's objective tuned on all the rows from its best point, for the
  time left.
* **The final model** (:func:`finish`): fitted on all the rows (on the
  largest prefix of them that the time buys for a run on row samples,
  :func:`final_on_rows`), its predictive variance calibrated on the held-out
  rows (:func:`~nyhopt.optim.budget._choice.variance_factor`).
"""
from __future__ import annotations

import math

import numpy as np

from ...backend import get_namespace
from ...errors import IllConditionedError
from ...posterior._predictive import scale_variance
from .._history import History
from .._setup import build_objective
from .._targets import encode_targets
from .._tracking import predictive_scores
from .._progress import announce
from ._choice import holdout_losses, largest_within_noise, variance_factor, with_fallback
from ._grow import add_centers
from ._refit import lowest_on_path, path_applies, wide_refit
from ._rows import rescale_penalty

__all__ = ["CALIBRATE", "CALIBRATE_MIN_ROWS", "winning_stage", "polish", "final_on_rows", "finish"]

#: Scale the final model's predictive variance so that its 95% intervals cover the held-out rows
#: (:func:`~nyhopt.optim.budget._choice.variance_factor`) when the run held them out itself: the noise of
#: the bound absorbs the Nystrom error, and the intervals over-cover where the data's own noise is low.
#: Only from CALIBRATE_MIN_ROWS held-out rows: fewer estimate the 95% quantile too coarsely.
CALIBRATE, CALIBRATE_MIN_ROWS = True, 1000


def concat_rows(a, b):
    """The rows of ``a`` then those of ``b`` (NumPy, or CuPy for device arrays)."""
    if hasattr(a, "get"):  # a CuPy array
        return get_namespace(a).concatenate([a, b])
    return np.concatenate([np.asarray(a), np.asarray(b)])


def winning_stage(run, best_i, best_err, grown, n_candidates, fallbacks):
    """The index of the stage that gives the model (module notes).

    ``best_i``, ``best_err``: the stage with the lowest held-out error and
    that error (None or NaN without held-out errors); ``grown``: the stage-0
    candidate that grew; the grown stages follow the ``n_candidates``
    stage-0 stages; ``fallbacks``: the other candidates' stages.
    """
    if best_i is None or math.isnan(best_err):
        return max((i for i, s in enumerate(run.stages) if not s.stop_reason.startswith("failed")),
                   default=len(run.stages) - 1)
    pool = [grown] + list(range(n_candidates, len(run.stages)))
    return with_fallback(run, largest_within_noise(run, best_i, pool), fallbacks)


def polish(run, k, X_all, y_all, freeze):
    """Stage ``k`` (the winner) tuned on all the rows for the time left: ``(loop, objective, offset)`` or None.

    The held-out rows have chosen the size and the objective; the last stage
    gives them to the objective too, warm-started from stage ``k``'s best
    point (its record 0 is that point, so its best is no worse on all rows).
    """
    loop = run.results[k][0]
    m, name = run.stages[k].centers, run.stages[k].objective
    room = run.polish_room(m)
    if room is None:
        return None
    s = run.start
    xp = get_namespace(X_all)
    enc = encode_targets(y_all, s.task, X_all.shape[0], xp, s.dtype)
    obj_all = build_objective(name, X_all, enc, s.template, run.seed, run.a["objective_options"])  # data's dtype
    obj_all, wrt, mask, profile = run.parts.objective_stage(obj_all, freeze, None)
    offset = len(run.records)
    polished, _, _ = run.stage(name, obj_all, wrt, mask, profile, loop.best_params, None, room, polish=True)
    return polished, obj_all, offset


def _calibrate(run, model, judge):
    """Scale ``model``'s predictive variance by ``judge``'s factor on the held-out rows (module notes)."""
    s = run.start
    if s.task == "regression" and CALIBRATE and s.X_val.shape[0] >= CALIBRATE_MIN_ROWS:
        factor = variance_factor(judge, s.X_val, s.y_val)
        if factor is not None:
            scale_variance(model, factor)


def final_on_rows(run, k):
    """``(model, params, rows, considered)`` of a run on row samples: stage ``k`` refitted as widely as the time buys.

    ``considered``: the most centers of the choice on held-out rows where it
    made the final model, else 0 (``TuneResult.final_centers``, which a
    replay takes as its widest fit).

    :meth:`_Run.final_size` gives the centers and rows
    (:func:`nyhopt.optim.budget._rows.final_size`).  More centers than stage
    ``k`` tuned are added as the grown stages add theirs
    (:func:`nyhopt.optim.budget._grow.add_centers`, in the tuned metric, in
    draw order); with enough held-out rows
    (:func:`~nyhopt.optim.budget._refit.path_applies`) the leading centers
    and the penalty are chosen on them from one pass over the final rows
    (:func:`~nyhopt.optim.budget._refit.lowest_on_path`), as an in-memory
    run chooses its final fit (:mod:`nyhopt.optim.budget._refit`).  The
    wider fit (its products in float32 where the stages' may be:
    :meth:`~nyhopt.optim.budget._precision.EpochRows.fit_products`) replaces
    the stage's model only where it succeeds and its held-out error is lower;
    its rows (at most ``FINAL_MAX_ROWS``)
    are gathered to the driver, as the stages' are, so its cost is the one the
    run measured.  The rows are a prefix of the run's permutation, never the
    held-out ones, which then calibrate the final model's intervals (rows it
    has not seen).
    """
    loop, obj, model, _, _ = run.results[k]
    st = run.stages[k]
    m, rows = run.final_size(st)
    m = min(m, run.X_tr.shape[0])  # the new centers are rows of the tuning sample
    params = rescale_penalty(loop.best_params, st.rows, rows)
    if m > st.centers and model is not None:
        rng = np.random.default_rng(run.seed)
        centers = add_centers(run.X_tr, params.centers, params.lengthscale, m - st.centers, rng, in_draw_order=True)
        wide = params.replace(centers=centers)
        choose = path_applies(run)
        announce(run.a["progress"], f"final fit: {rows} rows, {m} centers ({st.centers} tuned)"
                                    f"{', centers and penalty chosen on held-out rows' if choose else ''}, "
                                    f"{max(run.budget.left(), 0.0):.0f}s left")
        X, y = run.rows.gather(*run.full, run.rows.sample(rows), run.client)  # to the driver (bounded: final_size)
        if choose:
            chosen = lowest_on_path(run, obj, params, X, y, centers, run.epoch_rows.fit_products(rows, m))
            wide = wide if chosen is None else chosen[1]
        try:
            wide_model = run.fit(obj, wide, X, y, products=run.epoch_rows.fit_products(rows, wide.n_centers))
        except IllConditionedError:  # a failed factorization (float32 products too round?): the stage's model
            wide_model = None
        if wide_model is not None:
            losses = holdout_losses(wide_model, run.start.task, run.start.X_val, run.start.y_val)
            if float(np.mean(losses)) < float(np.mean(run.losses[k])):
                _calibrate(run, wide_model, wide_model)
                return wide_model, wide, rows, m if choose else 0
        params, rows = loop.best_params, st.rows  # the stage's own model: lower held-out error
    elif rows > st.rows or model is None:
        X, y = run.rows.select(*run.full, run.rows.sample(rows))
        model = run.fit(obj, params, X, y, client=run.client)
    _calibrate(run, model, model)
    return model, params, rows, 0


def finish(run, k, freeze, feature_names):
    """The :class:`~nyhopt.optim.TuneResult` of a run whose stage ``k`` won (module notes)."""
    start, parts = run.start, run.parts
    loop, obj, model, offset, _ = run.results[k]
    extra = {}
    if run.rows is not None:
        model, params, extra["final_rows"], extra["final_centers"] = final_on_rows(run, k)
    else:
        refit = None
        if run.internal:
            X_all, y_all = concat_rows(start.X, start.X_val), concat_rows(start.y, start.y_val)
            refit = wide_refit(run, k)
            polished = None if refit is not None else polish(run, k, X_all, y_all, freeze)
            if polished is not None:
                loop, obj, offset = polished
        params = loop.best_params if refit is None else refit[0]
        if refit is not None:
            extra["final_centers"] = refit[2]
        if run.internal:
            n_all, m = X_all.shape[0], params.n_centers
            model = run.fit(obj, params, X_all, y_all,
                            products=None if refit is None else run.epoch_rows.fit_products(n_all, m))
            _calibrate(run, model, run.results[k][2] if refit is None else refit[1])
        elif model is None:
            model = run.fit(obj, params, start.X, start.y)
        elif start.task == "regression" and start.y_val is not None:
            extra["validation_scores"] = predictive_scores(model, start.X_val, start.y_val)
    if feature_names is not None:
        model.feature_names_in_ = feature_names
    return parts.result(model, params, History(run.records), obj, offset + loop.best_epoch,
                        run.stages[-1].stop_reason, start.task, run.budget.now(), stages=tuple(run.stages), **extra)
