r"""Choosing the objective by validation error: ``tune(X, y, objective=[...], validation=...)``.

No single objective is best on every dataset, so :func:`nyhopt.tune` also
takes a list of objective names.  :func:`tune_by_validation` then

1. converts and checks the data once, splits off the validation rows (a
   fraction) or takes the given ``(X_val, y_val)``;
2. computes the initialization once on the training part: the same centers,
   median-heuristic lengthscale and penalty start for every candidate, and the
   same seed for each objective's own draws;
3. tunes every candidate from that start on the training part, with the
   validation data passed to :func:`nyhopt.tune` (which tracks the error);
4. picks the candidate whose tuned hyperparameters (its lowest objective
   value) have the lowest validation error, the first in the list on ties;
5. with a fraction, tunes the chosen objective again on all the rows, exactly
   as ``tune(X, y, objective=<chosen>)`` with the same arguments would (the
   hyperparameters tuned on the training part alone were measurably worse:
   up to 3% in test error on the paper's datasets); with an explicit
   ``(X_val, y_val)`` the candidate was already tuned on ``(X, y)`` as given,
   and its result is kept.

Candidates record the validation error at their best epoch only (one
prediction), unless ``track_errors=True`` asks for every epoch.
"""
from __future__ import annotations

import copy
import math
import numbers
import time
from typing import NamedTuple

from .._validation import check_labels, check_matrix
from ..backend import as_native, get_namespace
from ..distributed._detect import any_dask_array, refuse_dask_objective
from ..params import Params
from ._history import History
from ._init import as_generator
from ._targets import resolve_task
from ._tracking import prediction_error

__all__ = ["Candidate", "check_candidates", "tune_by_validation"]


class Candidate(NamedTuple):
    """What one candidate objective reached, in ``TuneResult.candidates``.

    Attributes
    ----------
    objective : str
        The objective's name.
    validation_error : float
        Error on the validation data of the model fitted on the training part
        with this candidate's tuned hyperparameters (RMSE in the targets' units
        or error rate); the choice is the lowest.
    objective_value : float
        The candidate's lowest objective value (at ``params``).
    best_epoch : int
        Epoch of ``params`` in ``history``.
    epochs : int
        Adam steps run.
    stop_reason : str
        As :attr:`TuneResult.stop_reason`.
    params : Params
        The candidate's tuned hyperparameters.
    history : History
        The candidate's per-epoch records.
    elapsed : float
        Wall-clock seconds of the candidate's tuning.
    """

    objective: str
    validation_error: float
    objective_value: float
    best_epoch: int
    epochs: int
    stop_reason: str
    params: Params
    history: History
    elapsed: float


def _canonical(name):
    return name.strip().lower().replace("_", "-")


def check_candidates(objective) -> tuple:
    """The candidate names of a list ``objective``, checked.

    Raises
    ------
    TypeError
        If ``objective`` is not a str, list or tuple, or holds something else
        than names.
    ValueError
        For an empty list, an unknown name or a name given twice.
    """
    from ..objectives import available_objectives

    if not isinstance(objective, (list, tuple)):
        raise TypeError(f"objective must be a name (str) or a list of names, got {type(objective).__name__}")
    if not objective:
        raise ValueError("objective is an empty list; give at least one objective name")
    known = available_objectives()
    names = []
    for name in objective:
        if not isinstance(name, str):
            raise TypeError(f"objective must hold names (str), got {type(name).__name__} {name!r}")
        key = _canonical(name)
        if key not in known:
            raise ValueError(f"unknown objective {name!r} in objective; expected names among {known}")
        if key in names:
            raise ValueError(f"objective names {key!r} twice; give each candidate once")
        names.append(key)
    return tuple(names)


def _validation_error(result, X_val, y_val, task):
    """The error that ``tune`` tracked at the best epoch, or one prediction when it tracked none."""
    err = result.history[result.best_epoch].validation_error
    if not math.isfinite(err):
        err = prediction_error(result.model.predict(X_val), y_val, task)
    return float(err) if math.isfinite(err) else math.inf


def tune_by_validation(tune, options):
    """Tune each candidate of ``options["objective"]`` and keep the best on validation data.

    Called by :func:`nyhopt.tune` with its own arguments when ``objective`` is
    not a str (see its documentation and the module notes).

    Parameters
    ----------
    tune : callable
        :func:`nyhopt.tune`, run once per candidate.
    options : dict
        Every argument of the :func:`nyhopt.tune` call, by name.

    Returns
    -------
    TuneResult
        The chosen objective's result (tuned again on all the rows for a
        fraction ``validation``), ``elapsed`` the whole call and
        ``candidates`` one :class:`Candidate` per name, in the given order.

    Raises
    ------
    ValueError, TypeError
        An empty list, unknown or repeated names, no ``validation``, and
        whatever :func:`nyhopt.tune` refuses.
    """
    from .tune import _check_dtype, _initial_params, _split_validation

    t_start = time.perf_counter()
    final_state = copy.deepcopy(options["random_state"])  # the final run starts where the call did
    names = check_candidates(options["objective"])
    validation = options["validation"]
    if validation is None:
        raise ValueError("objective lists candidates to choose by validation error: give validation= "
                         "(a fraction in (0, 1) or a tuple (X_val, y_val))")
    X, y = options["X"], options["y"]
    if any_dask_array(X, y):
        refuse_dask_objective(names[0])

    rng = as_generator(options["random_state"])
    X, y = as_native(X, "X"), as_native(y, "y")
    xp = get_namespace(X, y if hasattr(y, "shape") else None)
    y = check_labels(y, "y")
    X = check_matrix(X, "X", xp, dtype=_check_dtype(options["dtype"]), min_rows=2)
    task = resolve_task(y, options["task"])
    retune = isinstance(validation, numbers.Real) and not isinstance(validation, bool)
    if retune:
        X_tr, y_tr, X_val, y_val = _split_validation(X, y, float(validation), rng, xp)
    elif isinstance(validation, (tuple, list)) and len(validation) == 2:
        X_tr, y_tr = X, y
        X_val = as_native(validation[0], "validation X")
        get_namespace(X, X_val)
        X_val = check_matrix(X_val, "validation X", xp, dtype=X.dtype, n_features=X.shape[1])
        y_val = check_labels(as_native(validation[1], "validation y"), "validation y")
    else:
        raise TypeError("validation must be a fraction in (0, 1) or a tuple (X_val, y_val)")

    start = _initial_params(X_tr, options["centers"], options["penalty"], options["lengthscale"],
                            options["kernel"], options["ard"], rng, xp)
    track = bool(options["track_errors"])  # None: the best epoch's error alone (one prediction)
    shared = dict(options, X=X_tr, y=y_tr, validation=(X_val, y_val), dtype=X.dtype, task=task,
                  centers=start.centers, penalty=start.penalty, lengthscale=start.lengthscale,
                  track_errors=track)
    results, candidates = [], []
    for name in names:
        # Each candidate draws its objective's seed from the same generator state.
        res = tune(**dict(shared, objective=name, random_state=copy.deepcopy(rng)))
        results.append(res)
        candidates.append(Candidate(name, _validation_error(res, X_val, y_val, task),
                                    float(res.history[res.best_epoch].objective), res.best_epoch,
                                    int(res.history[-1].epoch), res.stop_reason, res.params, res.history,
                                    res.elapsed))
    best = 0
    for i, cand in enumerate(candidates):
        if cand.validation_error < candidates[best].validation_error:
            best = i
    chosen = results[best]
    if retune:
        chosen = tune(**dict(options, X=X, y=y, objective=names[best], validation=None, task=task,
                             random_state=final_state))
    return chosen._replace(candidates=tuple(candidates), elapsed=time.perf_counter() - t_start)
