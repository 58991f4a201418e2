r"""The transforms of a budgeted run: standard scaling, the warp of skewed features, ``log y``.

``tune(X, y, time_budget=T)`` with ``standardize=True`` (the default) on a
regression table whose standardized columns include skewed ones
(:func:`nyhopt.models._warp.skewed_features`), or whose target is positive
and right-skewed (:func:`log_target_applies`), first chooses among these
transforms on held-out rows (``docs/tuning.md``, "Transforms"):

* ``"scale"``: the columns standardized, as everywhere;
* ``"warp"``: the same, then each skewed column through
  :math:`\operatorname{asinh}` and standardized again
  (:mod:`nyhopt.models._warp`);
* ``"log"``: the scaled columns, the model tuned on :math:`\log y` (its
  predictions are :math:`\exp` of the predicted log: ``target_transform_``
  of :class:`~nyhopt.NystromKRR`);
* ``"log+warp"``: both.

Each that applies is tuned by the budgeted run itself for
:data:`CHOICE_SHARE` of the budget on the same random rows
(:func:`choice_splits`: on a table of at most ``CHOICE_ROWS + CHOICE_HELD``
rows, :data:`CHOICE_FOLDS` folds, each row held out once, the share split
among them; on a larger one, :data:`CHOICE_HELD` rows held out and at most
:data:`CHOICE_ROWS` others; a seed of their own, so the main run's random
draws are those of a run without the choice), and its squared errors on the
held-out rows, in the units of ``y``, are compared with those of
``"scale"``: a transform is eligible only when its held-out RMSE is below
that of ``"scale"`` by :data:`TRANSFORM_GAIN` and its squared errors are
lower by more than :data:`TRANSFORM_Z` paired standard errors
(:func:`~nyhopt.optim.budget._choice.clearly_better`), and the eligible one
of lowest held-out error is kept (``"scale"`` when none is).  The test is
milder than the stages' (:data:`~nyhopt.optim.budget._choice.PREFER_Z`):
the squared errors of a heavy-tailed target are heavy-tailed themselves, and
on a price-like synthetic table ``log y`` more than halved the held-out RMSE
at a paired z of 1.3.  Folds, because a tenth of a small table is too few
rows: on the Ames houses (2 344 training rows) one split of 234 held-out
rows put ``scale`` and ``log y`` within 1% of each other (z -0.8 to 0.7 at
3 to 30 s), while four folds at 3 s a fold put ``log y`` 6.5% lower
(z 1.5), and on the test rows it was 19% lower after the full budget.  The rest of the
budget goes to the run on all the rows in the chosen coordinates.

There is no choice (the scaling is kept, and nothing else changes) for
classification, a budget under :data:`CHOICE_MIN_BUDGET` seconds, dask
arrays, given ``validation`` or initial ``centers``, fewer than
:data:`CHOICE_MIN_ROWS` rows, or neither a skewed column nor a candidate
target.
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from ...backend import to_numpy
from ...models._warp import FeatureWarp, apply_warp, column_skewness, fit_warp, skewed_features
from ...placement import on_cluster
from .._targets import resolve_task
from ._choice import clearly_better, holdout_error, holdout_losses
from ._clock import check_time_budget
from ._replay import replay_budgeted
from ._schedule import tune_budgeted

__all__ = ["TransformChoice", "CHOICE_SHARE", "CHOICE_MIN_BUDGET", "CHOICE_ROWS", "CHOICE_HELD",
           "choose_transform", "budgeted_with_transform"]

#: Fraction of the budget each tuned transform gets (at most four: 20%).
CHOICE_SHARE = 0.05
#: Budgets (seconds) below this keep the scaling without a choice.
CHOICE_MIN_BUDGET = 60.0
#: Training rows (at most) and held-out rows (at most; 10% of the rows below that) of the choice.
CHOICE_ROWS, CHOICE_HELD = 8000, 2000
#: Folds of the choice on tables of at most CHOICE_ROWS + CHOICE_HELD rows.
CHOICE_FOLDS = 4
#: Fewer rows than this keep the scaling without a choice.
CHOICE_MIN_ROWS = 1000
#: A transform must lower the held-out RMSE of ``"scale"`` by this fraction, at this paired z-score.
TRANSFORM_GAIN, TRANSFORM_Z = 0.02, 1.0
#: ``log y`` is a candidate for positive targets of one output whose skewness is above this.
LOG_SKEW_MIN = 0.5


class TransformChoice(NamedTuple):
    """What the choice of :mod:`nyhopt.optim.budget._features` measured.

    Attributes
    ----------
    features : tuple of int
        The skewed columns (the candidates of the warp; empty when none).
    candidates : tuple of str
        The transforms tuned, in order: ``"scale"``, then those that apply of
        ``"warp"``, ``"log"`` and ``"log+warp"``.
    errors : tuple of float
        Their held-out RMSE, in the units of ``y``.
    chosen : str
        The transform kept.
    seconds : float
        Wall-clock time of the choice.
    """

    features: tuple
    candidates: tuple
    errors: tuple
    chosen: str
    seconds: float

    @property
    def warped(self) -> bool:
        """Whether the features are warped (``model.input_warp_``)."""
        return self.chosen.endswith("warp")

    @property
    def log_target(self) -> bool:
        """Whether the model was tuned on ``log y`` (``model.target_transform_ == "log"``)."""
        return self.chosen.startswith("log")


def _applies(a, scaling) -> bool:
    X = a["X"]
    centers = a["centers"]
    return (scaling is not None and a["choose_warp"] and not on_cluster(X) and a["validation"] is None
            and a["checkpoint"] is None and (isinstance(centers, (int, np.integer, str)) or centers is None)
            and check_time_budget(a["time_budget"]) >= CHOICE_MIN_BUDGET and X.shape[0] >= CHOICE_MIN_ROWS
            and resolve_task(a["y"], a["task"]) == "regression")


def _seed(random_state) -> int:
    return int(random_state) if isinstance(random_state, (int, np.integer)) else 0


def _targets(y):
    return y.to_numpy() if hasattr(y, "iloc") else y if hasattr(y, "shape") else np.asarray(y)


def log_target_applies(y) -> bool:
    """Whether ``log y`` is a candidate: one output, every value > 0, skewness above :data:`LOG_SKEW_MIN`."""
    v = to_numpy(y, dtype=np.float64).reshape(y.shape[0], -1)
    return v.shape[1] == 1 and bool(np.all(v > 0)) and float(column_skewness(v)[0]) > LOG_SKEW_MIN


def choice_splits(n, seed):
    """``[(training rows, held-out rows), ...]`` of the choice, sorted row indices (see the module notes).

    Up to ``CHOICE_ROWS + CHOICE_HELD`` rows: :data:`CHOICE_FOLDS` folds of a
    random permutation, so that every row is held out once; more: one split,
    ``min(CHOICE_HELD, n/10)`` held out and at most ``CHOICE_ROWS`` others.
    """
    order = np.random.default_rng([seed, 46]).permutation(n)
    if n <= CHOICE_ROWS + CHOICE_HELD:
        return [(np.sort(np.setdiff1d(order, fold)), np.sort(fold)) for fold in np.array_split(order, CHOICE_FOLDS)]
    held = min(CHOICE_HELD, n // 10)
    return [(np.sort(order[held:held + CHOICE_ROWS]), np.sort(order[:held]))]


def choose_transform(a, parts, scaling):
    """``(X, y, warp, choice)``: the inputs in the chosen coordinates, the warp, the record.

    Parameters
    ----------
    a : dict
        The arguments of :func:`nyhopt.tune` by name, ``X`` standardized (a
        copy of the caller's own, which is warped in place when the warp wins).
    parts
        The stages of :func:`nyhopt.tune` (for the budgeted runs of the
        candidates, :func:`nyhopt.optim.budget._schedule.tune_budgeted`).
    scaling : tuple or None
        The input scaling (None: ``standardize=False``, no choice; nor with
        ``standardize="scale"``, ``a["choose_warp"]`` False).

    Returns
    -------
    X, y : arrays
        ``y`` is ``log y`` (a new array) when that was chosen, else as given.
    warp : FeatureWarp or None
    choice : TransformChoice or None
        None where there was no choice (see the module notes); ``log y``
        when ``choice.log_target``.
    """
    X, y = a["X"], a["y"]
    if not _applies(a, scaling):
        return X, y, None, None
    y_arr = _targets(y)
    features = skewed_features(X)
    log_ok = log_target_applies(y_arr)
    if features.size == 0 and not log_ok:
        return X, y, None, None
    t0 = time.perf_counter()
    warp = fit_warp(X, features) if features.size else None
    names = ["scale"] + (["warp"] if warp is not None else []) + (["log"] if log_ok else []) + \
        (["log+warp"] if log_ok and warp is not None else [])
    n = X.shape[0]
    splits = choice_splits(n, _seed(a["random_state"]))
    losses = {}
    for name in names:
        w = warp if name.endswith("warp") else None
        log = name.startswith("log")
        parts_of_losses = []
        for rows_tr, rows_val in splits:
            X_val, y_val = apply_warp(X[rows_val], w, inplace=True), y_arr[rows_val]
            y_tr = np.log(y_arr[rows_tr]) if log else y_arr[rows_tr]
            sub = dict(a, X=apply_warp(X[rows_tr], w, inplace=True), y=y_tr,
                       validation=(X_val, np.log(y_val) if log else y_val),
                       time_budget=CHOICE_SHARE * a["time_budget"] / len(splits), progress=False, callback=None,
                       track_errors=False)
            model = tune_budgeted(sub, parts).model
            if log:
                model.target_transform_ = "log"
            parts_of_losses.append(holdout_losses(model, "regression", X_val, y_val))
        losses[name] = np.concatenate(parts_of_losses)
    errors = {name: holdout_error(losses[name], "regression") for name in names}
    better = [name for name in names[1:] if errors[name] < (1.0 - TRANSFORM_GAIN) * errors["scale"]
              and clearly_better(losses[name], losses["scale"], z=TRANSFORM_Z)]
    chosen = min(better, key=errors.get) if better else "scale"
    choice = TransformChoice(tuple(int(j) for j in features), tuple(names), tuple(errors[k] for k in names), chosen,
                             time.perf_counter() - t0)
    if choice.log_target:
        y = np.log(y_arr)
    if not choice.warped:
        return X, y, None, choice
    return apply_warp(X, warp, inplace=True), y, warp, choice


def replayed_transform(X, y, replay):
    """``(X, y, warp, log)``: ``X`` and ``y`` transformed as in the recorded run ``replay`` (a ``TuneResult``).

    ``X`` is warped in place; ``y`` becomes ``log y`` (a new array) where the
    recorded model was tuned on it.  A bare ``stages`` tuple has no model:
    everything is returned as given.
    """
    model = getattr(replay, "model", None)
    warp = getattr(model, "input_warp_", None)
    log = getattr(model, "target_transform_", None) == "log"
    if log:
        y = np.log(_targets(y))
    if not isinstance(warp, FeatureWarp):
        return X, y, None, log
    return apply_warp(X, warp, inplace=True), y, warp, log


def budgeted_with_transform(a, parts, scaling):
    """:func:`nyhopt.tune` with ``time_budget`` or ``replay``: the transform chosen (or replayed), then the run.

    The run gets the budget less the choice's time; the returned result's
    model keeps the warp (``input_warp_``), its ``transform`` the record, and
    its ``elapsed`` counts the choice.  A replay warps ``X`` as the recorded
    run's model did and replays its stages (:mod:`nyhopt.optim.budget._replay`).
    """
    replay = a["replay"]
    if replay is not None:
        a["X"], a["y"], warp, log = replayed_transform(a["X"], a["y"], replay)
        choice = getattr(replay, "transform", None)
        result = replay_budgeted(a, parts, replay)
    else:
        a["X"], a["y"], warp, choice = choose_transform(a, parts, scaling)
        log = choice is not None and choice.log_target
        if choice is not None:
            a["time_budget"] = a["time_budget"] - choice.seconds
        result = tune_budgeted(a, parts)
    result.model.input_warp_ = warp
    if log:
        result.model.target_transform_ = "log"
    spent = choice.seconds if choice is not None and replay is None else 0.0
    return result._replace(transform=choice, elapsed=result.elapsed + spent)
