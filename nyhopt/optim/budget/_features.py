r"""The feature transform of a budgeted run: standard scaling, or the warp of skewed features too.

``tune(X, y, time_budget=T)`` with ``standardize=True`` (the default) on a
regression table whose standardized columns include skewed ones
(:func:`nyhopt.models._warp.skewed_features`) first chooses between two
transforms of the inputs on held-out rows (``docs/tuning.md``, "Feature
transform"):

* **scale**: the columns standardized, as everywhere;
* **warp**: the same, then each skewed column through
  :math:`\operatorname{asinh}` and standardized again
  (:mod:`nyhopt.models._warp`).

Both are tuned by the budgeted run itself on the same random rows (at most
:data:`CHOICE_ROWS` for training, :data:`CHOICE_HELD` held out; a seed of
their own, so the main run's random draws are those of a run without the
choice), each for :data:`CHOICE_SHARE` of the budget; the warp is kept only
when its held-out squared errors are lower than those of the scaling by more
than :data:`nyhopt.optim.budget._choice.PREFER_Z` paired standard errors
(:func:`~nyhopt.optim.budget._choice.clearly_better`).  The rest of the
budget then goes to the run on all the rows in the chosen coordinates.

There is no choice (the scaling is kept, and nothing else changes) for
classification, a budget under :data:`CHOICE_MIN_BUDGET` seconds, dask
arrays, given ``validation`` or initial ``centers``, fewer than
:data:`CHOICE_MIN_ROWS` rows, or no skewed column.
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from ...models._warp import FeatureWarp, apply_warp, fit_warp, skewed_features
from ...placement import on_cluster
from .._targets import resolve_task
from ._choice import clearly_better, holdout_error, holdout_losses
from ._clock import check_time_budget
from ._replay import replay_budgeted
from ._schedule import tune_budgeted

__all__ = ["TransformChoice", "CHOICE_SHARE", "CHOICE_MIN_BUDGET", "CHOICE_ROWS", "CHOICE_HELD",
           "choose_transform", "budgeted_with_transform"]

#: Fraction of the budget each of the two tuned transforms gets.
CHOICE_SHARE = 0.06
#: Budgets (seconds) below this keep the scaling without a choice.
CHOICE_MIN_BUDGET = 60.0
#: Training rows (at most) and held-out rows (at most; 10% of the rows below that) of the choice.
CHOICE_ROWS, CHOICE_HELD = 8000, 2000
#: Fewer rows than this keep the scaling without a choice.
CHOICE_MIN_ROWS = 1000


class TransformChoice(NamedTuple):
    """What the choice of :mod:`nyhopt.optim.budget._features` measured.

    Attributes
    ----------
    features : tuple of int
        The skewed columns (the candidates of the warp).
    warped : bool
        Whether the warp was kept (the model's ``input_warp_``).
    error_scaled, error_warped : float
        Held-out RMSE (the targets' units) of the two tuned runs.
    seconds : float
        Wall-clock time of the choice.
    """

    features: tuple
    warped: bool
    error_scaled: float
    error_warped: float
    seconds: float


def _applies(a, scaling) -> bool:
    X = a["X"]
    centers = a["centers"]
    return (scaling is not None and a["choose_warp"] and not on_cluster(X) and a["validation"] is None and a["checkpoint"] is None
            and (isinstance(centers, (int, np.integer, str)) or centers is None)
            and check_time_budget(a["time_budget"]) >= CHOICE_MIN_BUDGET and X.shape[0] >= CHOICE_MIN_ROWS
            and resolve_task(a["y"], a["task"]) == "regression")


def _seed(random_state) -> int:
    return int(random_state) if isinstance(random_state, (int, np.integer)) else 0


def choose_transform(a, parts, scaling, run):
    """``(X, warp, choice)``: ``a["X"]`` in the chosen coordinates (warped in place), its warp, the record.

    Parameters
    ----------
    a : dict
        The arguments of :func:`nyhopt.tune` by name, ``X`` standardized (a
        copy of the caller's own, which is warped in place when the warp wins).
    parts
        The stages of :func:`nyhopt.tune` (for ``run``).
    scaling : tuple or None
        The input scaling (None: ``standardize=False``, no choice; nor with
        ``standardize="scale"``, ``a["choose_warp"]`` False).
    run : callable
        ``run(a, parts)``: the budgeted run (:func:`nyhopt.optim.budget._schedule.tune_budgeted`).

    Returns
    -------
    X : array
    warp : FeatureWarp or None
    choice : TransformChoice or None
        None where there was no choice (see the module notes).
    """
    X = a["X"]
    if not _applies(a, scaling):
        return X, None, None
    features = skewed_features(X)
    if features.size == 0:
        return X, None, None
    t0 = time.perf_counter()
    warp = fit_warp(X, features)
    n = X.shape[0]
    held = min(CHOICE_HELD, max(200, n // 10))
    rows = np.random.default_rng([_seed(a["random_state"]), 46]).permutation(n)[:held + CHOICE_ROWS]
    rows_val, rows_tr = np.sort(rows[:held]), np.sort(rows[held:])
    y = a["y"].to_numpy() if hasattr(a["y"], "iloc") else a["y"] if hasattr(a["y"], "shape") else np.asarray(a["y"])
    errors, losses = {}, {}
    for name, w in (("scale", None), ("warp", warp)):
        X_val = apply_warp(X[rows_val], w, inplace=True)
        sub = dict(a, X=apply_warp(X[rows_tr], w, inplace=True), y=y[rows_tr], validation=(X_val, y[rows_val]),
                   time_budget=CHOICE_SHARE * a["time_budget"], progress=False, callback=None, track_errors=False)
        model = run(sub, parts).model
        losses[name] = holdout_losses(model, "regression", X_val, y[rows_val])
        errors[name] = holdout_error(losses[name], "regression")
    warped = clearly_better(losses["warp"], losses["scale"])
    choice = TransformChoice(tuple(int(j) for j in features), warped, errors["scale"], errors["warp"],
                             time.perf_counter() - t0)
    if not warped:
        return X, None, choice
    return apply_warp(X, warp, inplace=True), warp, choice


def replayed_transform(X, replay):
    """``(X, warp)``: ``X`` warped as in the recorded run ``replay`` (a ``TuneResult``), in place; else as given."""
    warp = getattr(getattr(replay, "model", None), "input_warp_", None)
    if not isinstance(warp, FeatureWarp):
        return X, None
    return apply_warp(X, warp, inplace=True), warp


def budgeted_with_transform(a, parts, scaling):
    """:func:`nyhopt.tune` with ``time_budget`` or ``replay``: the transform chosen (or replayed), then the run.

    The run gets the budget less the choice's time; the returned result's
    model keeps the warp (``input_warp_``), its ``transform`` the record, and
    its ``elapsed`` counts the choice.  A replay warps ``X`` as the recorded
    run's model did and replays its stages (:mod:`nyhopt.optim.budget._replay`).
    """
    replay = a["replay"]
    if replay is not None:
        a["X"], warp = replayed_transform(a["X"], replay)
        choice = getattr(replay, "transform", None)
        result = replay_budgeted(a, parts, replay)
    else:
        a["X"], warp, choice = choose_transform(a, parts, scaling, tune_budgeted)
        if choice is not None:
            a["time_budget"] = a["time_budget"] - choice.seconds
        result = tune_budgeted(a, parts)
    result.model.input_warp_ = warp
    spent = choice.seconds if choice is not None and replay is None else 0.0
    return result._replace(transform=choice, elapsed=result.elapsed + spent)
