r"""Choosing the objective by validation error: ``tune(X, y, objective=[...], validation=...)``.

No single objective is best on every dataset, so :func:`nyhopt.tune` also
takes a list of objective names.  :func:`tune_by_validation` then

1. converts and checks the data once, and takes the validation data: a
   fraction of the rows split off at random, ``k`` folds of the rows (an
   integer ``validation=k``), or the given ``(X_val, y_val)``;
2. computes the initialization once: the same centers, median-heuristic
   lengthscale and penalty start for every candidate (and every fold), and the
   same seed for each objective's own draws.  With a fraction or explicit
   validation data it is computed on the training part; with ``k`` folds on
   all the rows, exactly as the final ``tune`` call computes it, so every fold
   starts from the point the chosen objective is finally tuned from (the
   centers are rows of ``X``, some of them in a fold's validation part: their
   inputs are used, never their targets);
3. tunes every candidate from that start on the training part (on each of the
   ``k`` training parts in turn), with the validation data passed to
   :func:`nyhopt.tune` (which tracks the error);
4. picks the candidate whose tuned hyperparameters (its lowest objective
   value) have the lowest validation score, the first in the list on ties:
   for regression the validation RMSE, for classification the mean squared
   error of the decision function against the encoded labels,
   :math:`s = \frac{1}{n_v}\sum_i \lVert f(x_i) - t_i\rVert^2` with
   :math:`t_i = \pm 1` (two classes) or one-hot (more), the quantity the
   N-KRR classifier fits.  The error rate counts whole rows and ranked the
   candidates badly: on svmguide1 it preferred ``gcv`` on most seeds, with 5
   folds too, where ``sgpr`` had the lower test error on every seed; the
   squared error picked ``sgpr`` on all of them, and ``prop``, the best on
   higgs_small, on all of those (``docs/experiments.md``).  With ``k`` folds the error and
   the score are means over the folds weighted by the fold sizes,
   :math:`\bar e = \sum_f n_f e_f / n`;
5. with a fraction or folds, tunes the chosen objective again on all the rows,
   exactly as ``tune(X, y, objective=<chosen>)`` with the same arguments would
   (the hyperparameters tuned on the training part alone were measurably
   worse: up to 3% in test error on the paper's datasets); with an explicit
   ``(X_val, y_val)`` the candidate was already tuned on ``(X, y)`` as given,
   and its result is kept.

The folds are a permutation of the rows drawn from ``random_state``, dealt
out in turn (fold sizes differ by at most one); for classification the
permutation is sorted by class first (stably), so that every fold holds each
class in the proportion of the whole data.

Candidates record the validation error at their best epoch only (one
prediction), unless ``track_errors=True`` asks for the tracked epochs of
:func:`~nyhopt.tune` (every epoch for the exact objectives).  See
``docs/tuning.md``, "Choosing the objective by validation".
"""
from __future__ import annotations

import copy
import math
import numbers
import time
from typing import NamedTuple

import numpy as np

from ..inputs._validation import check_labels, check_matrix
from ..inputs._frame_errors import frame_errors
from ..backend import as_native, get_namespace, to_numpy
from ..params import Params
from ..placement import check_objective, on_cluster
from ._history import History
from ._init import as_generator
from ._setup import check_dtype, initial_params, split_validation
from ._targets import resolve_task
from ._tracking import prediction_error

__all__ = ["Candidate", "check_candidates", "check_folds", "fold_rows", "is_folds", "tune_by_validation"]

_VALIDATION_KINDS = "a fraction in (0, 1), a number of folds k >= 2 (int) or a tuple (X_val, y_val)"


class Candidate(NamedTuple):
    """What one candidate objective reached, in ``TuneResult.candidates``.

    Attributes
    ----------
    objective : str
        The objective's name.
    validation_error : float
        Error on the validation data of the model fitted on the training part
        with this candidate's tuned hyperparameters (RMSE in the targets' units
        or error rate); with ``k`` folds, the mean of ``fold_errors`` weighted
        by the fold sizes.
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
        Wall-clock seconds of the candidate's tuning (with ``k`` folds, of
        all ``k`` runs).
    fold_errors : tuple of float
        The validation error of each split: one entry for a fraction or an
        explicit ``(X_val, y_val)``, ``k`` (in fold order) for ``k`` folds.
        With folds, ``objective_value``, ``best_epoch``, ``epochs``,
        ``stop_reason``, ``params`` and ``history`` are those of the first
        fold's run.
    validation_score : float
        What the choice minimizes (the lowest wins): ``validation_error`` for
        regression; for classification the mean squared error of the
        decision function against the -1/+1 (two classes) or one-hot labels
        on the validation data (with ``k`` folds, the weighted mean over the
        folds).  ``inf`` for a failed candidate.
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
    fold_errors: tuple = ()
    validation_score: float = math.nan


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


def is_folds(validation) -> bool:
    """Whether ``validation`` asks for k-fold validation (an integer, not a bool)."""
    return isinstance(validation, numbers.Integral) and not isinstance(validation, (bool, np.bool_))


def check_folds(k, n) -> int:
    r"""The number of folds ``validation=k`` for ``n`` rows, checked.

    Raises
    ------
    ValueError
        Unless :math:`2 \le k \le n` and every training part (the rows of
        the other folds) holds at least 2 rows.
    """
    k = int(k)
    if k < 2:
        raise ValueError(f"validation={k} folds: give k >= 2 folds (or a fraction in (0, 1) such as 0.2)")
    if k > n:
        raise ValueError(f"validation={k} folds but X has only {n} rows; give at most {n} folds")
    if n - math.ceil(n / k) < 2:
        raise ValueError(f"validation={k} folds leaves fewer than 2 training rows per fold (n = {n})")
    return k


def fold_rows(n, k, rng, labels=None) -> list:
    """The validation rows of each of ``k`` folds: sorted index arrays that partition ``range(n)``.

    A permutation drawn from ``rng`` is dealt out to the folds in turn; with
    ``labels`` (classification) it is first sorted by class, stably, so that
    each fold holds every class in the proportion of the whole data (up to
    one row per class).
    """
    order = rng.permutation(n)
    if labels is not None:
        _, codes = np.unique(to_numpy(labels).reshape(-1)[order], return_inverse=True)
        order = order[np.argsort(codes.reshape(-1), kind="stable")]
    fold = np.empty(n, dtype=np.intp)
    fold[order] = np.arange(n) % k
    return [np.flatnonzero(fold == f) for f in range(k)]


def _rows(X, y, index, xp):
    """``X`` and ``y`` restricted to the host indices ``index`` (y on its own device)."""
    dev = xp.asarray(index)
    y_arr = y if hasattr(y, "shape") else np.asarray(y)
    return X[dev], (y_arr[dev] if hasattr(y_arr, "get") else np.asarray(y_arr)[index])


def _validation_error(result, X_val, y_val, task):
    """The error that ``tune`` tracked at the best epoch, or one prediction when it tracked none."""
    err = result.history[result.best_epoch].validation_error
    if not math.isfinite(err):
        err = prediction_error(result.model.predict(X_val), y_val, task)
    return float(err) if math.isfinite(err) else math.inf


def _validation_score(result, X_val, y_val, task, error):
    """The choice's criterion: the error for regression, the squared error of the scores for classes."""
    if task != "classification" or not math.isfinite(error):
        return error
    model = result.model
    scores = to_numpy(model.decision_function(X_val), dtype=np.float64)
    labels, classes = to_numpy(y_val).reshape(-1), to_numpy(model.classes_)
    # A label absent from the training part matches no class: its target is 0 (one-hot: all zeros).
    where = np.clip(np.searchsorted(classes, labels), 0, classes.size - 1)
    known = classes[where] == labels
    if scores.ndim == 1:
        target = np.where(known, 2.0 * where - 1.0, 0.0)
    else:
        target = np.zeros_like(scores)
        target[np.flatnonzero(known), where[known]] = 1.0
    score = float(np.mean(np.sum((scores - target).reshape(labels.size, -1) ** 2, axis=1)))
    return score if math.isfinite(score) else math.inf


def _weighted_mean(values, sizes):
    if any(not math.isfinite(v) for v in values):
        return math.inf
    return float(sum(s * v for s, v in zip(sizes, values)) / sum(sizes))


def _candidate(name, first, errors, scores, sizes, seconds):
    """The record of one candidate: its first split's result, the error on every split."""
    return Candidate(name, _weighted_mean(errors, sizes), float(first.history[first.best_epoch].objective),
                     first.best_epoch, int(first.history[-1].epoch), first.stop_reason, first.params,
                     first.history, seconds, tuple(errors), _weighted_mean(scores, sizes))


def tune_by_validation(tune, options):
    """Tune each candidate of ``options["objective"]`` and keep the best on validation data.

    Called by :func:`nyhopt.tune` with its own arguments when ``objective`` is
    not a str (see its documentation and the module notes).  With ``k``
    folds it runs ``k`` times as many tuning runs as there are candidates,
    plus one of the chosen objective on all the rows; with a fraction, one
    per candidate plus that final one.

    Parameters
    ----------
    tune : callable
        :func:`nyhopt.tune`, run once per candidate (and fold).
    options : dict
        Every argument of the :func:`nyhopt.tune` call, by name.

    Returns
    -------
    TuneResult
        The chosen objective's result (tuned again on all the rows for a
        fraction or folds), ``elapsed`` the whole call and ``candidates`` one
        :class:`Candidate` per name, in the given order.

    Raises
    ------
    ValueError, TypeError
        An empty list, unknown or repeated names, no ``validation`` or a bad
        one (the message names ``validation``), and whatever
        :func:`nyhopt.tune` refuses.
    """
    from ..models._centers import fit_centers

    t_start = time.perf_counter()
    state = options["random_state"]
    if state is None:  # fresh entropy, drawn once: the final run must start where the candidates did
        state = np.random.default_rng()
    final_state = copy.deepcopy(state)  # the final run starts where the call did
    names = check_candidates(options["objective"])
    validation = options["validation"]
    if validation is None:
        raise ValueError("objective lists candidates to choose by validation error: give validation= "
                         f"({_VALIDATION_KINDS})")
    X, y = options["X"], options["y"]
    if on_cluster(X, y):
        check_objective(names[0], X, y)  # an exact candidate: named in the error
        raise ValueError("choosing the objective among candidates by validation error needs the rows on one "
                         "machine; on dask arrays tune with objective='stoch-prop'")

    rng = as_generator(state)
    frame = X
    X, y = as_native(X, "X"), as_native(y, "y")
    xp = get_namespace(X, y if hasattr(y, "shape") else None)
    y = check_labels(y, "y")
    with frame_errors(frame, "X"):
        X = check_matrix(X, "X", xp, dtype=check_dtype(options["dtype"]), min_rows=2)
    task = resolve_task(y, options["task"])
    folds = is_folds(validation)
    retune = folds or (isinstance(validation, numbers.Real) and not isinstance(validation, (bool, np.bool_)))
    if folds:
        k = check_folds(validation, X.shape[0])
        centers = options["centers"]
        if isinstance(centers, numbers.Integral) and not isinstance(centers, (bool, np.bool_)):
            centers = fit_centers(int(centers), X.shape[0] - math.ceil(X.shape[0] / k))  # the smallest training part
        start = initial_params(X, centers, options["penalty"], options["lengthscale"],
                                options["kernel"], options["ard"], rng, xp)
        every = np.arange(X.shape[0])
        splits = [(np.setdiff1d(every, rows, assume_unique=True), rows)
                  for rows in fold_rows(X.shape[0], k, rng, y if task == "classification" else None)]
    else:
        if retune:
            X_tr, y_tr, X_val, y_val = split_validation(X, y, float(validation), rng, xp)
        elif isinstance(validation, (tuple, list)) and len(validation) == 2:
            X_tr, y_tr = X, y
            X_val = as_native(validation[0], "validation X")
            get_namespace(X, X_val)
            with frame_errors(validation[0], "validation X"):
                X_val = check_matrix(X_val, "validation X", xp, dtype=X.dtype, n_features=X.shape[1])
            y_val = check_labels(as_native(validation[1], "validation y"), "validation y")
        else:
            raise TypeError(f"validation must be {_VALIDATION_KINDS}, got {validation!r}")
        start = initial_params(X_tr, options["centers"], options["penalty"], options["lengthscale"],
                                options["kernel"], options["ard"], rng, xp)
        splits = [None]

    track = bool(options["track_errors"])  # None: the best epoch's error alone (one prediction)
    shared = dict(options, dtype=X.dtype, task=task, centers=start.centers, penalty=start.penalty,
                  lengthscale=start.lengthscale, track_errors=track)
    first, seconds = {}, dict.fromkeys(names, 0.0)
    errors, scores = ({name: [] for name in names} for _ in range(2))
    sizes = []
    for split in splits:
        if split is not None:
            X_tr, y_tr = _rows(X, y, split[0], xp)
            X_val, y_val = _rows(X, y, split[1], xp)
        sizes.append(X_val.shape[0])
        for name in names:
            # Each candidate, on each split, draws its objective's seed from the same generator state.
            res = tune(**dict(shared, X=X_tr, y=y_tr, validation=(X_val, y_val), objective=name,
                              random_state=copy.deepcopy(rng)))
            first.setdefault(name, res)  # the later folds' results (and their data) are not kept
            errors[name].append(_validation_error(res, X_val, y_val, task))
            scores[name].append(_validation_score(res, X_val, y_val, task, errors[name][-1]))
            seconds[name] += res.elapsed
    candidates = [_candidate(name, first[name], errors[name], scores[name], sizes, seconds[name])
                  for name in names]
    best = 0
    for i, cand in enumerate(candidates):
        if cand.validation_score < candidates[best].validation_score:
            best = i
    if retune:
        chosen = tune(**dict(options, X=X, y=y, objective=names[best], validation=None, task=task,
                             random_state=final_state))
    else:
        chosen = first[names[best]]
    return chosen._replace(candidates=tuple(candidates), elapsed=time.perf_counter() - t_start)
