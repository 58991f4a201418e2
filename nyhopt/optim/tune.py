r"""The paper's tuning procedure, end to end: :func:`tune`.

Given data and an objective name, :func:`tune`

1. encodes the targets as the paper does (regression targets standardized,
   two classes as -1/+1, more classes one-hot; see ``nyhopt.optim._targets``);
2. initializes the hyperparameters as the paper does: :math:`\lambda_0 = 1/n`,
   :math:`\ell_0` by the median heuristic (the same value in every dimension),
   the centers a random subset of the training points;
3. runs Adam on :math:`\theta = (\log\lambda, \log\ell, Z)` for ``epochs``
   full-batch steps, recording the objective, its terms, the hyperparameters
   and (on request) train/validation errors (every step for the exact
   objectives, read from their own fit; every 20th for the others,
   ``nyhopt.optim._tracking``), stopping early when
   the objective has not improved for ``patience`` steps and its trend has
   stalled (relative to its own progress, ``nyhopt.optim._stopping``);
4. fits the final N-KRR model with the best hyperparameters found (the lowest
   objective value).
"""
from __future__ import annotations

import math
import numbers
import time
from typing import NamedTuple

import numpy as np

from ..models._estimator_params import check_feature_names_arg, check_validation_names
from ..inputs._door import entry_point, trust
from ..inputs._validation import check_label_kind, check_labels, check_matrix
from ..inputs._frame_errors import frame_errors
from ..backend import as_native, get_namespace, is_cupy_namespace, to_numpy
from ..kernels import Kernel, make_kernel
from ..params import Params
from ..placement import on_cluster
from . import adam
from ._history import History, TuneRecord
from ._init import as_generator
from ._setup import build_objective as _build_objective, final_model
from ._setup import default_noise_variance
from ._setup import initial_params as _initial_params
from ._setup import split_validation as _split_validation
from ._progress import make_progress
from ._result import TuneResult
from ._standardize import standardize_inputs, with_input_scaling
from ._stopping import DEFAULT_REL_DELTA, trend_stalled
from ._targets import encode_targets, resolve_task
from ._tune_args import FIELDS, check_arguments as _check_arguments, check_switches
from ._tracking import ErrorTracker, choose_solver, fill_best, predictive_scores, track
from ..errors import warn_user

__all__ = ["tune", "TuneResult", "TuneRecord", "History", "FIELDS", "default_noise_variance"]


# ----------------------------------------------------------------------------- argument checks


def _warn_auto_classification(y):
    """Warn when ``task="auto"`` took numbers for class labels (text and booleans are plainly labels)."""
    arr = to_numpy(y)
    if arr.dtype.kind in "iuf":
        warn_user(
            f"task='auto': y holds {np.unique(arr).size} distinct integer values, so a classifier is tuned; "
            "pass task='regression' to regress on them (or task='classification' to say so and silence "
            "this warning)", UserWarning)  # tune -> _start -> _start_in_memory -> here


# ----------------------------------------------------------------------------- tune


@entry_point
def tune(X, y, objective="auto", centers=100, epochs=200, lr=0.05, kernel="gaussian", ard=True,
         random_state=0, validation=None, progress=True, *, penalty=None, lengthscale=None,
         freeze=(), patience=10, min_delta=0.0, callback=None, task="auto", dtype=None,
         objective_options=None, solver="auto", record_terms=True, track_errors=None,
         b1=0.9, b2=0.999, eps=1e-8, client=None, checkpoint=None, feature_names=None,
         rel_delta=DEFAULT_REL_DELTA, time_budget=None, standardize=True, replay=None) -> TuneResult:
    r"""Tune penalty, lengthscales and centers of N-KRR by Adam on an objective.

    Parameters
    ----------
    X : array of shape (n, d)
        Training inputs (NumPy or CuPy; float32 or float64, integers become
        float64; a DataFrame, whose column names ``result.model`` keeps as
        ``feature_names_in_``).  Never modified.  Its columns are
        standardized by default (``standardize``).
    y : array of shape (n,) or (n, p)
        Targets: values (regression) or class labels (classification).
    objective : str or list of str, default "auto"
        "holdout", "loocv", "gcv", "creg", "sgpr", "prop" or "stoch-prop"
        (see :func:`nyhopt.make_objective`), or "auto": ``"prop"`` (the
        paper's objective) without ``time_budget``; with one, ``"prop"`` and
        ``"sgpr"`` at the first stage, then ``"sgpr"`` grows (``"prop"``'s stage
        is the result if clearly better held out; ``"prop"`` alone below 200
        rows without ``validation``, or with ``objective_options``).  A list (e.g. ``["prop", "sgpr",
        "gcv"]``) chooses by validation error, which needs ``validation``:
        each candidate is tuned from the same start on the training part, the
        one whose tuned model has the lowest validation error wins (the first
        on ties).  With ``k`` folds (``validation=k``) each candidate is tuned
        on each fold's training part, from the start the final run has, and
        its error is the mean over the folds weighted by their sizes.  With
        a fraction or folds, the chosen objective is then tuned again on all
        the rows, as ``tune(X, y, objective=<chosen>)`` with the same
        arguments would; with an explicit ``(X_val, y_val)`` the candidate,
        tuned on ``(X, y)``, is the result.  Cost: one run per candidate (per
        fold) plus the final one.  ``candidates`` in the result says what
        each reached; ``callback`` and the progress bar see every
        candidate's epochs in turn.
    centers : int, "auto", tuple of int or array of shape (m, d), default 100
        Number of Nystrom centers (a random subset of the rows of ``X``) or
        the initial centers themselves.  A number larger than the training
        rows uses every row, with a warning (as scikit-learn's ``Nystroem``).
        ``"auto"`` is 100.  With ``time_budget``, the run starts with these
        centers and grows them while it pays; a tuple of increasing sizes
        (e.g. ``(100, 400, 1600)``) fixes the sizes instead (``(500,)``: 500
        centers for the whole budget).
    epochs : int, default 200
        Maximal number of Adam steps (full batch; the paper's value).
    lr : float, default 0.05
        Adam's learning rate (the paper's value).
    kernel : str or Kernel, default "gaussian"
        Kernel family; a :class:`~nyhopt.Kernel` instance also gives the
        initial lengthscale (unless ``lengthscale`` is given).
    ard : bool, default True
        One lengthscale per feature (True) or one shared by all features.
    random_state : None, int or numpy.random.Generator, default 0
        Seeds the initial centers, the median-heuristic subsample, the
        validation split and the objective's own draws (splits, probes).
        With ``time_budget`` the stages also follow measured times, so the
        same seed can give other sizes on another machine or load;
        ``replay=result`` runs a budgeted result's stages again exactly.
    validation : None, float, int or tuple (X_val, y_val), optional
        Data on which to track the error at every epoch; a float in (0, 1)
        holds out that fraction of ``(X, y)`` at random (the model is then
        tuned and fitted on the rest).  Only tracked, never used to choose,
        unless ``objective`` is a list (then required).  An int ``k >= 2``,
        for a list ``objective`` only, chooses by ``k``-fold validation (folds
        seeded by ``random_state``, stratified by class for classification;
        ``k`` times the candidates' cost).
    progress : bool or "log", default True
        Show a progress bar on stderr when it is a terminal.  ``"log"`` (what
        ``nyhopt tune`` passes unless ``--quiet``) also writes, when stderr
        is not a terminal (a log file, a pipe), a plain line after the first
        epoch, then at most one every 10 seconds, and one at the end.
    penalty : float, optional
        Initial :math:`\lambda`; default :math:`1/n` (the paper's choice).
    lengthscale : float or array of shape (d,), optional
        Initial :math:`\ell`; default the median heuristic, the same in every
        dimension (the paper's choice).
    freeze : iterable of {"penalty", "lengthscale", "centers", "amplitude"}, default ()
        Hyperparameters kept at their initial value.  The kernel amplitude
        (``params.amplitude``, starting at 1) is learned only by the
        objectives whose value depends on it (``sgpr``; the others ignore it
        and keep it at 1; ``sgpr`` profiles it by default, see its option
        ``amplitude``); ``freeze=("amplitude",)`` keeps it at 1 for
        ``sgpr`` too (no profiling), which gives the SGPR objective without
        amplitude.
    patience : int or None, default 10
        Stop when the objective has not improved by more than ``min_delta``
        for this many consecutive steps *and* its trend has stalled (see
        ``rel_delta``); None: never stop early.
    min_delta : float, default 0.0
        Smallest decrease of the objective that counts as an improvement.
    rel_delta : float, default 1e-3
        The trend has stalled when the mean of the last ``patience`` values
        is not below the mean of the ``patience`` values before them by more
        than ``rel_delta`` times the progress so far (initial value minus
        best): relative to the objective's own scale, so that Adam's
        oscillations do not stop a run that still improves on average
        (``docs/tuning.md``, "Early stopping").  0 gives the classical rule
        (no new best for ``patience`` steps) alone.
    callback : callable, optional
        ``callback(epoch, record)`` after every evaluation (``record`` is a
        :class:`TuneRecord`); return True to stop.
    task : {"auto", "regression", "classification"}, default "auto"
        "auto": classification for 1-D labels that are strings, booleans or
        integers with at most 20 distinct values, regression otherwise.  When
        "auto" takes numbers for class labels it warns (``UserWarning``):
        pass ``task="regression"`` to regress on them.
    dtype : {None, "float32", "float64"}, default None
        dtype of the data during tuning (None keeps the dtype of ``X``;
        with ``time_budget``, on the CPU, the large grown stages of float64
        data tune on a float32 copy and the fits stay float64: ``docs/tuning.md``,
        "A time budget", point 8).  Hyperparameters and optimizer state are
        always float64.
    objective_options : dict, optional
        Extra keyword arguments for :func:`nyhopt.make_objective` (for
        instance ``{"val_fraction": 0.5}`` or ``{"n_probes": 50}``).  The
        noise variance ``noise_variance`` defaults to 1, except for more than
        two classes: ``1 / n_classes`` (see Notes).
    solver : {"auto", "direct", "falkon"}, default "auto"
        Solver of the final model and of the error tracking; "auto" is
        "direct" while :math:`n m^2 \le 10^{11}`, "falkon" otherwise.
    record_terms : bool, default True
        Record the objective's terms every epoch (one extra forward
        evaluation per epoch).
    track_errors : bool, optional
        Record train (and validation) errors; default True when
        ``validation`` is given, else False.  The exact objectives on all
        rows (``prop``, ``gcv``, ``loocv``, ``creg``, ``sgpr``) compute the
        fit of each step anyway: their errors are read from it at every
        epoch, at the cost of predicting the validation rows.  With
        ``holdout`` and ``stoch-prop`` each tracked epoch costs an N-KRR
        solve of its own, so every 20th epoch is tracked, and the last and
        the best one (the others hold NaN); see ``docs/tuning.md``,
        "Tracking the errors".
    b1, b2, eps : float
        Adam's constants (defaults of Kingma & Ba).
    checkpoint : str or os.PathLike, optional
        File (``.npz``) where the loop is saved after every step
        (parameters, Adam's state, history, best point, the objective's warm
        start); when it exists, the call resumes from it and ends exactly as
        an uninterrupted run would.  A checkpoint written by a different call
        raises ``ValueError``.  See ``docs/tuning.md``, "Checkpoints".
    client : distributed.Client, optional
        For dask arrays ``X``, ``y`` (objective "stoch-prop", regression):
        the cluster to run on; default the current client.  Refused for
        in-memory data.  See ``docs/scaling-out.md``.
    feature_names : sequence of str, optional
        Names of the columns of ``X``, kept by ``result.model`` as
        ``feature_names_in_`` (for a dask array or any array without
        column names; a DataFrame's own names are taken by default).
    time_budget : float, optional
        Seconds the call may take, the final fit included: the run then
        tunes in stages, growing the centers (doubled, then to the largest
        size that fits; k-means++ seeds in the tuned metric) while the
        held-out error improves, warm-started; ``epochs`` caps each stage;
        from 1000 rows held out, 95% intervals are scaled to cover them.
        It holds out ``min(10%, 5000)`` rows to choose among the stages unless
        ``validation`` is given (the final model is then fitted on all the
        rows) and may switch from ``prop`` to ``stoch-prop`` where that is
        measured to be faster.  A list ``objective`` is chosen at the first
        stage.  ``stages`` in the result says what was run.  In-memory data
        only; not with ``checkpoint``.  See ``docs/tuning.md``, "A time
        budget".  None (the default): no budget, the run is exactly as before.
    standardize : bool or "scale", default True
        Tune on :math:`\tilde x = (x - \mu)/\sigma`, the columns of ``X``
        standardized with their mean and standard deviation over all the
        rows given (before any validation split; a constant column is only
        centered), as the paper and :class:`~nyhopt.HyperoptKRR` do.
        ``validation=(X_val, y_val)`` is standardized with the same
        statistics, ``centers`` given as an array are taken in standardized
        coordinates, and ``result.model`` keeps :math:`(\mu, \sigma)`
        (``input_mean_``, ``input_scale_``) so that it predicts from raw
        inputs.  ``result.params`` and ``history`` stay in standardized
        coordinates: a center :math:`\tilde z` is :math:`\mu + \sigma\tilde z`
        in the units of ``X``, a lengthscale :math:`\tilde\ell_j` is
        :math:`\sigma_j\tilde\ell_j` (``docs/tuning.md``, "Inputs").  With
        ``time_budget`` on a regression table with skewed columns or a
        positive right-skewed target, True also chooses on held-out rows
        whether to warp those columns (asinh) and whether to tune on
        :math:`\log y`, each kept only when clearly better
        (``result.transform``, ``model.input_warp_``,
        ``model.target_transform_``; ``docs/tuning.md``, "Transforms");
        ``"scale"`` standardizes without that choice.  False: ``X`` is used
        as given.
    replay : TuneResult, optional
        The result of an earlier ``time_budget`` run of the same call: its
        stages are run again for their recorded epochs (sizes, objectives,
        rows and the final fit's rows from the record, everything else as
        computed), giving the same hyperparameters and model bit for bit,
        whatever the machine's speed.  Not with ``time_budget``; raises when
        the stages come out otherwise.  See ``docs/tuning.md``, "Replaying a
        budgeted run".

    Returns
    -------
    TuneResult
        ``model`` (fitted with the best hyperparameters), ``params``,
        ``history``, ``objective``, ``best_epoch``, ``stop_reason``, ``task``,
        ``elapsed``, ``candidates``.

    Raises
    ------
    ValueError, TypeError
        Bad arguments (the message names them), unknown objective or kernel.

    Notes
    -----
    The optimized coordinates are :math:`\theta = (\log\lambda, \log\ell, Z)`
    and each step is :math:`\theta \leftarrow \mathrm{Adam}(\theta,
    \nabla_\theta\mathcal{L}(\theta))` with the hand-written gradient of the
    objective.  The record of epoch :math:`k` holds :math:`\mathcal{L}` at the
    point reached after :math:`k` steps; the returned ``params`` are those of
    the lowest recorded value.  Regression targets are standardized before the
    objective sees them (so its noise variance :math:`s^2 = 1` is an upper
    bound); errors and predictions are in the original units.  With
    :math:`K > 2` classes the targets are :math:`K` one-hot columns and
    :math:`s^2 = 1/K` by default: the authors' released implementation adds the
    effective dimension once for all outputs, which is :math:`s^2 = 1/K` in the
    per-output normalization of the objectives (and a one-hot column's variance
    is below :math:`1/K`).  On scikit-learn's digits this took the test error of
    ``nyhopt demo`` from 1.45% to 0.84% (mean of 5 seeds).

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(300, 2)); y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=300)
    >>> res = nh.tune(X, y, objective="prop", centers=20, epochs=30, progress=False)
    >>> bool(res.history.objective[-1] < res.history.objective[0])
    True
    >>> res.model.predict(X[:2]).shape, res.params.lengthscale.shape
    ((2,), (2,))
    """
    if isinstance(validation, (tuple, list)) and len(validation) == 2:  # rows used by position
        check_validation_names(check_feature_names_arg(feature_names, X), validation[0])
        if _n_outputs(validation[1]) != _n_outputs(y):
            raise ValueError(f"validation y has {_n_outputs(validation[1])} output column(s) but y has "
                             f"{_n_outputs(y)}")
    X, validation, feature_names, scaling = standardize_inputs(standardize, X, validation, centers, feature_names,
                                                                dtype, client)
    choose_warp = standardize is True or isinstance(standardize, np.bool_) and bool(standardize)
    standardize = False  # done: the runs below (candidates, stages) take X as it now is
    if time_budget is not None or replay is not None:  # a budgeted run, or one again from its record
        from .budget._features import budgeted_with_transform

        return with_input_scaling(budgeted_with_transform(dict(locals()), _STAGES, scaling), scaling)
    if isinstance(objective, str) and objective == "auto":
        objective = "prop"
    if isinstance(centers, str) and centers == "auto":
        centers = 100
    elif _is_schedule(centers):
        raise ValueError(f"centers={centers!r} is a schedule of sizes, which needs time_budget=; give an int "
                         "without a budget")
    if not isinstance(objective, str):
        if checkpoint is not None:
            raise ValueError("checkpoint is not available with a list of objectives (each candidate would "
                             "write the same file); tune the chosen objective with checkpoint=")
        arguments = {k: v for k, v in locals().items() if k not in ("scaling", "choose_warp")}  # the arguments
        from ._select import tune_by_validation

        names = check_feature_names_arg(feature_names, X)
        result = tune_by_validation(tune, arguments)
        if names is not None:
            result.model.feature_names_in_ = names
        return with_input_scaling(result, scaling)
    t_start = time.perf_counter()
    epochs, patience, min_delta, rel_delta, freeze, dtype = _check_arguments(
        validation, epochs, patience, min_delta, rel_delta, lr, b1, b2, eps, freeze, dtype, callback, kernel,
        objective_options)
    check_switches(ard, progress, record_terms, track_errors)
    names = check_feature_names_arg(feature_names, X)
    rng = as_generator(random_state)
    if checkpoint is not None:  # restores the generator's state when resuming: before any draw
        from ._checkpoint import Checkpointer

        checkpoint = Checkpointer(checkpoint, rng)
    start = _start(X, y, objective=objective, centers=centers, penalty=penalty, lengthscale=lengthscale,
                   kernel=kernel, ard=ard, rng=rng, validation=validation, task=task, dtype=dtype, solver=solver,
                   objective_options=objective_options, track_errors=track_errors, client=client)
    obj, wrt, mask, profile = _objective_stage(start.obj, freeze, start.tracker)
    signature = None
    if checkpoint is not None:
        from ._checkpoint import call_signature

        signature = call_signature(start.X, start.enc, obj, random_state, lr, b1, b2, eps, freeze, patience,
                                   min_delta, kernel, ard, objective_options, track_errors, record_terms, rel_delta)
    loop = _loop(obj, start.params, wrt, mask, profile, start.tracker, start.X_val is not None, epochs=epochs,
                 lr=lr, b1=b1, b2=b2, eps=eps, patience=patience, min_delta=min_delta, rel_delta=rel_delta,
                 callback=callback,
                 record_terms=record_terms, progress=progress, checkpoint=checkpoint, signature=signature)
    # mean="constant": the ridge fit with intercept at the tuned hyperparameters, whose constant is the
    # objective's profiled c* (in the units of y); normalize_y's centring does not change it.
    model = final_model(start.task, start.template, loop.best_params, start.X, start.y, start.dtype, start.solver,
                         start.client, fit_intercept=getattr(obj, "mean", "zero") == "constant",
                         amplitude=loop.best_params.amplitude if obj.uses_amplitude else None)
    scores = None
    if start.task == "regression" and start.y_val is not None:  # in memory; before the names: X_val is an array
        scores = predictive_scores(model, start.X_val, start.y_val)
    if names is not None:
        model.feature_names_in_ = names
    return with_input_scaling(TuneResult(model, loop.best_params, loop.history, obj, loop.best_epoch,
                                         loop.stop_reason, start.task, time.perf_counter() - t_start,
                                         validation_scores=scores), scaling)


# ----------------------------------------------------------------------------- the stages of tune


class _Start(NamedTuple):
    """What stage 2 (start) hands on: the data as the loop and the final fit take them, and the start."""

    X: object
    y: object
    X_val: object
    y_val: object  # in-memory validation targets (None on a cluster)
    task: str
    enc: object
    params: Params
    template: Kernel
    obj: object
    solver: str
    tracker: object
    client: object
    dtype: object


def _start(X, y, *, objective, centers, penalty, lengthscale, kernel, ard, rng, validation, task, dtype, solver,
           objective_options, track_errors, client):
    """Stage 2, start: the data checked, the targets encoded, the initial params and the objective.

    The one place where :func:`tune` looks at where the data live: dask arrays
    take :func:`nyhopt.distributed.tune.setup_dask` (nothing ``n``-sized on the
    driver), the others :func:`_start_in_memory`.
    """
    kw = dict(objective=objective, centers=centers, penalty=penalty, lengthscale=lengthscale, kernel=kernel,
              ard=ard, rng=rng, validation=validation, task=task, dtype=dtype, solver=solver,
              objective_options=objective_options, track_errors=track_errors, client=client)
    if on_cluster(X, y):
        from ..distributed.tune import setup_dask  # dask is optional: imported only for dask arrays

        X, y, X_val, task, enc, params, template, obj, solver, tracker, client = setup_dask(X, y, **kw)
        return _Start(X, y, X_val, None, task, enc, params, template, obj, solver, tracker, client, X.dtype)
    if client is not None:
        raise ValueError("client is only used with dask arrays X, y; leave it out for in-memory data")
    return _start_in_memory(X, y, **kw)


def _is_schedule(centers) -> bool:
    """Whether ``centers`` is a tuple of sizes (a schedule of a budgeted run), not the rows of an array."""
    return isinstance(centers, tuple) and len(centers) > 0 and all(
        isinstance(c, numbers.Integral) and not isinstance(c, bool) for c in centers)


def _n_outputs(y) -> int:
    """Number of target columns of ``y`` ((n,) and (n, 1): one), read from its shape alone."""
    shape = getattr(y, "shape", None)
    if shape is None:
        shape = np.shape(y)
    return 1 if len(shape) < 2 else int(shape[1])


def _start_in_memory(X, y, *, objective, centers, penalty, lengthscale, kernel, ard, rng, validation, task, dtype,
                     solver, objective_options, track_errors, client):
    """Stage 2 for NumPy/CuPy data: validation split or set, encoded targets, start, objective, tracker."""
    frame = X
    X, y = as_native(X, "X"), as_native(y, "y")
    xp = get_namespace(X, y if hasattr(y, "shape") else None)
    if is_cupy_namespace(xp) and y is not None and not hasattr(y, "shape"):  # host data, as for the estimators
        raise TypeError(f"y is a {type(y).__name__} (host data) but X is a CuPy (device) array; pass y as a "
                        "CuPy array (text class labels as their indices: numpy.unique(y, return_inverse=True))")
    y = check_labels(y, "y")  # before any work: mixed label types fail here, not after tuning
    with frame_errors(frame, "X"):
        X = check_matrix(X, "X", xp, dtype=dtype, min_rows=2)
    dtype = X.dtype
    if task == "auto" and resolve_task(y, task) == "classification":
        _warn_auto_classification(y)
    task = resolve_task(y, task)

    X_val = y_val = None
    if validation is not None:
        if isinstance(validation, numbers.Real) and not isinstance(validation, bool):
            X, y, X_val, y_val = _split_validation(X, y, float(validation), rng, xp)
        elif isinstance(validation, (tuple, list)) and len(validation) == 2:
            X_val, y_val = as_native(validation[0], "validation X"), as_native(validation[1], "validation y")
            get_namespace(X, X_val)
            with frame_errors(validation[0], "validation X"):
                X_val = check_matrix(X_val, "validation X", xp, dtype=dtype, n_features=X.shape[1])
            if len(y_val) != X_val.shape[0]:
                raise ValueError(f"validation y has {len(y_val)} rows but validation X has {X_val.shape[0]}")
            if task == "classification":
                y_val = check_labels(y_val, "validation y")
                check_label_kind(y_val, np.unique(y) if isinstance(y, np.ndarray) else y, "validation y")
        else:
            raise TypeError("validation must be None, a fraction in (0, 1) or a tuple (X_val, y_val)")
    if track_errors is None:
        track_errors = X_val is not None
    trust(X, X_val)  # checked (rows of a checked X): the objective, tracker and final fit take them as they are

    enc = encode_targets(y, task, X.shape[0], xp, dtype)
    params = _initial_params(X, centers, penalty, lengthscale, kernel, ard, rng, xp)
    template = make_kernel(kernel, params.lengthscale)
    obj_seed = int(rng.integers(0, 2**31 - 1))
    obj = _build_objective(objective, X, enc, template, obj_seed, objective_options)
    solver = choose_solver(solver, X.shape[0], params.n_centers)
    tracker = (ErrorTracker(X, enc, y, X_val, y_val, template, dtype, solver,
                            fit_intercept=getattr(obj, "mean", "zero") == "constant")
               if track_errors else None)
    return _Start(X, y, X_val, y_val, task, enc, params, template, obj, solver, tracker, None, dtype)


def _objective_stage(obj, freeze, tracker=None):
    """Stage 3, objective: the fields to differentiate; ``(obj, wrt, Adam mask, profile the amplitude)``."""
    if tracker is not None and hasattr(tracker, "use_amplitude"):
        tracker.use_amplitude = obj.uses_amplitude  # the error bars use the amplitude the objective tunes
    if tracker is not None and hasattr(tracker, "attach"):
        tracker.attach(obj)  # reads the fit the exact objectives compute anyway
    profile = getattr(obj, "amplitude", None) == "profile"  # sgpr sets a = a* at every evaluation
    if profile and "amplitude" in freeze:
        obj.amplitude, profile = "learn", False  # frozen: a stays at the params' value
    if not obj.uses_amplitude:
        freeze = freeze | {"amplitude"}
    if freeze == set(FIELDS):
        raise ValueError(f"freeze leaves nothing to tune: objective {obj.name!r} ignores the amplitude")
    wrt = tuple(f for f in FIELDS if f not in freeze)
    mask = {"log_penalty": "penalty" not in freeze, "log_lengthscale": "lengthscale" not in freeze,
            "centers": "centers" not in freeze, "log_amplitude": "amplitude" not in freeze}
    return obj, wrt, mask, profile


class _LoopResult(NamedTuple):
    best_params: Params
    best_epoch: int
    history: History
    stop_reason: str
    last_params: Params = None
    state: object = None  # Adam's state at last_params


def _loop(obj, params, wrt, mask, profile, tracker, has_val, *, epochs, lr, b1, b2, eps, patience, min_delta,
          rel_delta, callback, record_terms, progress, checkpoint, signature, state=None, status=None):
    """Stage 4, loop: Adam steps on ``obj`` from ``params`` (resumed from ``checkpoint`` if its ``signature`` matches).

    ``state``: Adam's state to go on from (default a new one); ``status``: a
    callable whose text leads the progress bar's message (a budgeted run's
    time left and centers).
    """
    state = adam.init(params) if state is None else state
    history = History()
    best_value, best_params, best_epoch = math.inf, params, 0
    stale, stop_reason, t_opt = 0, "epochs", 0.0
    init, first_epoch = params, 0
    if checkpoint is not None:
        resumed = checkpoint.resume(signature, params, epochs, obj)
        if resumed is not None:
            first_epoch, params, state, history = resumed.epoch, resumed.params, resumed.state, resumed.history
            best_value, best_params, best_epoch = resumed.best_value, resumed.best_params, resumed.best_epoch
            stale, t_opt = resumed.stale, resumed.t_opt
    bar = make_progress(progress, epochs + 1, tracker is not None, has_val, name=getattr(obj, "name", None))
    try:
        for epoch in range(first_epoch, epochs + 1):
            last = epoch == epochs
            t0 = time.perf_counter()
            try:
                if last:
                    value, grad = obj.value(params), None
                else:
                    value, grad = obj.value_and_grad(params, wrt=wrt)
            except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
                if epoch == 0:
                    raise
                stop_reason = f"failed: {type(exc).__name__}: {exc}"
                warn_user(f"tune: stopped at epoch {epoch}, the objective failed ({exc}); "
                          f"keeping the best point (epoch {best_epoch})", RuntimeWarning)
                break
            t_opt += time.perf_counter() - t0
            if profile:
                params = params.replace(log_amplitude=np.asarray(math.log(obj.last_amplitude)))
            if not math.isfinite(value):
                if epoch == 0:
                    raise ValueError(f"the objective is not finite ({value}) at the initial hyperparameters")
                stop_reason = f"failed: non-finite objective ({value})"
                warn_user(f"tune: stopped at epoch {epoch}, non-finite objective; keeping the best point "
                          f"(epoch {best_epoch})", RuntimeWarning)
                break
            terms = dict(obj.last_terms or {}) if record_terms else {}
            train_err, val_err = track(tracker, params, epoch, last)
            val_nlpd, val_cov = getattr(tracker, "last_scores", (math.nan, math.nan))
            record = TuneRecord(epoch, float(value), terms, params.penalty, params.lengthscale,
                                train_err, val_err, t_opt, params.amplitude, val_nlpd, val_cov)
            history.append(record)
            if value < best_value - min_delta:
                stale = 0
            else:
                stale += 1
            if value < best_value:
                best_value, best_params, best_epoch = float(value), params, epoch
            if bar is not None:
                bar.update(epoch, value, params.penalty, train_err, val_err, status=None if status is None else status())
            if callback is not None and callback(epoch, record):
                stop_reason = "callback"
                break
            if patience is not None and stale >= patience and trend_stalled(history.objective, patience,
                                                                             rel_delta, min_delta):
                stop_reason = "patience"
                break
            if last:
                break
            t0 = time.perf_counter()
            params, state = adam.update(grad, state, params, lr=lr, b1=b1, b2=b2, eps=eps, mask=mask)
            t_opt += time.perf_counter() - t0
            if checkpoint is not None:
                checkpoint.save(epoch + 1, init, params, state, history, best_value, best_params, best_epoch,
                                stale, t_opt, obj)
    finally:
        if bar is not None:
            bar.close()
    fill_best(history, best_epoch, best_params, tracker)  # an untracked best epoch (tracking every k-th)
    return _LoopResult(best_params, best_epoch, history, stop_reason, params, state)


class _Stages(NamedTuple):
    """The stages of :func:`tune`, handed to the budgeted run (``nyhopt.optim.budget._schedule``), which cannot import them."""

    start: object
    objective_stage: object
    loop: object
    final_model: object
    result: object


_STAGES = _Stages(_start, _objective_stage, _loop, final_model, TuneResult)
