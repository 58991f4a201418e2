r"""Estimators that tune their own hyperparameters inside ``fit``.

:class:`HyperoptKRR` and :class:`HyperoptKRRClassifier` wrap :func:`nyhopt.tune`
in the scikit-learn estimator protocol: ``fit(X, y)`` optionally standardizes
the columns of ``X`` (training mean and standard deviation, as the paper
does), runs the tuning loop on the chosen objective and keeps the fitted
N-KRR model with the best hyperparameters; ``predict`` applies the same
standardization and the model.

With standardization :math:`\tilde x = (x - \mu_x) / \sigma_x` (a constant
column is only centered) the prediction is

.. math::  f(x) = \mu_y + \sigma_y\, k_\ell\big(\tilde x, Z\big)\,\alpha,

where :math:`(\lambda, \ell, Z)` are the tuned hyperparameters in standardized
coordinates, :math:`\alpha` the N-KRR coefficients and
:math:`(\mu_y, \sigma_y)` the target standardization (regression only).
"""
from __future__ import annotations

import numbers
from functools import partial

import numpy as np

from .models._estimator_params import EstimatorMixin, check_feature_names_arg, check_validation_names
from .inputs._validation import check_labels, check_matrix
from .models._scaling import apply_standardization, standardization
from .models._warp import apply_warp
from .optim._standardize import warn_if_centers_in_data_units
from .placement import on_cluster
from .models._fitted import not_fitted_error as _not_fitted_error
from .inputs._door import entry_point
from .inputs._estimator_input import DataConversionWarning, as_array as _as_array, check_X as _check_X
from .inputs._frame_errors import frame_errors
from .inputs._estimator_input import regression_targets
from .errors import warn_user

__all__ = ["HyperoptKRR", "HyperoptKRRClassifier"]


class _HyperoptBase(EstimatorMixin):
    """Constructor parameters, fitting and the scikit-learn protocol (shared)."""

    _task = None

    def __init__(self, objective="auto", centers=100, epochs=200, lr=0.05, kernel="gaussian", ard=True,
                 random_state=0, standardize=True, penalty=None, lengthscale=None, freeze=(),
                 patience=10, validation_fraction=None, dtype=None, objective_options=None,
                 solver="auto", record_terms=True, progress=False, time_budget=None):
        self.objective = objective
        self.centers = centers
        self.epochs = epochs
        self.lr = lr
        self.kernel = kernel
        self.ard = ard
        self.random_state = random_state
        self.standardize = standardize
        self.penalty = penalty
        self.lengthscale = lengthscale
        self.freeze = freeze
        self.patience = patience
        self.validation_fraction = validation_fraction
        self.dtype = dtype
        self.objective_options = objective_options
        self.solver = solver
        self.record_terms = record_terms
        self.progress = progress
        self.time_budget = time_budget

    # -- scikit-learn parameter protocol -------------------------------------------------
    def __sklearn_is_fitted__(self):
        return hasattr(self, "model_")

    # -- fitting ---------------------------------------------------------------------------
    @entry_point
    def fit(self, X, y, validation=None, callback=None, feature_names=None):
        """Tune the hyperparameters on ``(X, y)`` and fit the model with the best ones.

        Parameters
        ----------
        X : array of shape (n, d)
            Training inputs: NumPy or CuPy, a DataFrame (its column names are
            recorded) or any DLPack array (a GPU array gives CuPy results).
        y : array
            Targets (regressor: (n,) or (n, p); classifier: (n,) labels).
        validation : tuple (X_val, y_val), optional
            Data on which to track the error per epoch (in the units of
            ``X``; standardized like the training data).  Overrides
            ``validation_fraction``.
        callback : callable, optional
            ``callback(epoch, record)``, see :func:`nyhopt.tune`.
        feature_names : sequence of str, optional
            Column names for an ``X`` that has none (a dask array built from
            a DataFrame, say), kept as ``feature_names_in_``; a DataFrame's
            own names are taken by default.

        Returns
        -------
        self
        """
        from .optim import tune

        self._check_options(validation)
        names = check_feature_names_arg(feature_names, X)
        if on_cluster(X, y):  # "stoch-prop" regression on the current Dask client
            if self.time_budget is not None:
                raise ValueError("time_budget is for in-memory data (NumPy or CuPy arrays); for dask arrays "
                                 "give centers= and epochs=")
            from .distributed.tune import fit_hyperopt_dask

            fit_hyperopt_dask(self, X, y, validation, callback, tune=partial(tune, standardize=False))
            self._check_feature_names(names, reset=True)
            return self
        X, xp = _check_X(self, X, reset=True)
        self._check_feature_names(names, reset=True)
        if X.shape[0] < 2:
            raise ValueError(f"X has n_samples = {X.shape[0]}; tuning needs at least 2 samples")
        vf = self.validation_fraction
        if validation is None and isinstance(vf, numbers.Integral) and not isinstance(vf, (bool, np.bool_)) \
                and vf > X.shape[0]:
            raise ValueError(f"validation_fraction={vf!r} folds but X has only {X.shape[0]} rows; give at most "
                             f"{X.shape[0]} folds")
        if self._task == "regression":
            y = regression_targets(check_labels(y, "y"), "HyperoptKRRClassifier")
        else:
            y = _as_array(check_labels(y, "y"), "y", numeric=False)
        if self._task == "classification" and y.ndim == 2 and y.shape[1] == 1:
            warn_user("A column-vector y was passed when a 1d array was expected; y was raveled to "
                      "shape (n,)", DataConversionWarning)
            y = y.reshape(-1)
        # Under a time budget tune standardizes X itself, with the same statistics, and may warp skewed
        # features (nyhopt.optim.budget._features); the estimator keeps both.
        by_tune = bool(self.standardize) and self.time_budget is not None
        here = bool(self.standardize) and not by_tune
        mean, scale = standardization(X) if here else (np.zeros(X.shape[1]), np.ones(X.shape[1]))
        Xs = apply_standardization(X, mean, scale) if here else X
        if here:
            warn_if_centers_in_data_units(self.centers, Xs, mean, scale)
        if validation is not None:
            if not (isinstance(validation, (tuple, list)) and len(validation) == 2):
                raise TypeError("validation must be a tuple (X_val, y_val)")
            check_validation_names(names, validation[0])
            with frame_errors(validation[0], "validation X"):
                Xv = _as_array(validation[0], "validation X")
                Xv = check_matrix(Xv, "validation X", xp, n_features=X.shape[1])
            val = (apply_standardization(Xv, mean, scale) if here else Xv,
                   _as_array(check_labels(validation[1], "validation y"), "validation y",
                             numeric=self._task == "regression"))
        else:
            val = self.validation_fraction
        result = tune(
            Xs, y, objective=self.objective, centers=self.centers, epochs=self.epochs, lr=self.lr,
            kernel=self.kernel, ard=self.ard, random_state=self.random_state, validation=val,
            progress=self.progress, penalty=self.penalty, lengthscale=self.lengthscale,
            freeze=self.freeze if self.freeze is not None else (), patience=self.patience,
            callback=callback, task=self._task, dtype=self.dtype,
            objective_options=self.objective_options, solver=self.solver, record_terms=self.record_terms,
            time_budget=self.time_budget, standardize=by_tune,  # else X is standardized here, as self.standardize says
        )
        if by_tune:  # the scaling and the warp move from the model to the estimator
            model = result.model
            mean, scale, self.x_warp_ = model.input_mean_, model.input_scale_, model.input_warp_
            model.input_mean_ = model.input_scale_ = model.input_warp_ = None
        else:
            self.x_warp_ = None
        return self._set_fitted(result, mean, scale, X.shape[1])

    def _check_options(self, validation=None):
        """The estimator's own options (``tune`` checks the ones it is passed), with errors naming them."""
        if not isinstance(self.standardize, (bool, np.bool_)):
            raise TypeError(f"standardize must be True or False, got {self.standardize!r}")
        vf = self.validation_fraction
        candidates = isinstance(self.objective, (list, tuple))
        if candidates and vf is None and validation is None:
            raise ValueError("objective lists candidates to choose by validation error: give "
                             "validation_fraction= (a fraction in (0, 1) or a number of folds k >= 2), or "
                             "fit(X, y, validation=(X_val, y_val))")
        if isinstance(vf, numbers.Integral) and not isinstance(vf, (bool, np.bool_)):
            if validation is not None:
                return  # fit's validation= overrides it
            if not candidates:
                raise ValueError(f"validation_fraction={vf!r} is a number of folds, which chooses among a list of "
                                 "objectives; with one objective give a fraction in (0, 1) such as 0.2")
            if vf < 2:
                raise ValueError(f"validation_fraction={vf!r} folds: give k >= 2 folds (or a fraction in (0, 1) "
                                 "such as 0.2)")
            return  # k-fold choice among objectives: the number of rows is checked by tune
        if vf is not None and (isinstance(vf, (bool, np.bool_)) or not isinstance(vf, numbers.Real)
                               or not 0.0 < float(vf) < 1.0):
            raise ValueError(f"validation_fraction must be None, a fraction in (0, 1) or a number of folds, "
                             f"got {vf!r}")

    def _set_fitted(self, result, mean, scale, n_features):
        """Store a :class:`~nyhopt.TuneResult` and the input scaling as fitted attributes."""
        self.model_ = result.model
        self.params_ = result.params
        self.amplitude_ = getattr(result.model, "amplitude_", None)
        if self.amplitude_ is None:  # a model without a variance model
            self.amplitude_ = result.params.amplitude
        self.noise_variance_ = getattr(result.model, "noise_variance_", None)
        self.intercept_ = result.model.intercept_
        self.history_ = result.history
        self.best_epoch_ = result.best_epoch
        self.stop_reason_ = result.stop_reason
        self.objective_ = result.objective.name
        self.candidates_ = result.candidates
        self.validation_scores_ = getattr(result, "validation_scores", None)
        self.stages_ = getattr(result, "stages", ())
        self.transform_ = getattr(result, "transform", None)
        self.x_mean_, self.x_scale_ = mean, scale
        self.n_features_in_ = n_features
        return self

    # -- prediction --------------------------------------------------------------------------
    def _check_fitted(self):
        if not hasattr(self, "model_"):
            raise _not_fitted_error()(
                f"This {type(self).__name__} instance is not fitted yet; call 'fit' before using it"
            )

    def _transform(self, X):
        self._check_fitted()
        if on_cluster(X):  # a lazy dask array, standardized block by block
            from .distributed.tune import transform_dask

            return transform_dask(self, X)
        X, _ = _check_X(self, X, reset=False)
        if not self.standardize:
            return X
        return apply_warp(apply_standardization(X, self.x_mean_, self.x_scale_), getattr(self, "x_warp_", None),
                          inplace=True)

    @entry_point
    def predict(self, X):
        """Predictions for ``X`` (values, or class labels for the classifier).

        Parameters
        ----------
        X : array of shape (n, d)

        Returns
        -------
        array of shape (n,) or (n, p)
        """
        Xs = self._transform(X)
        return self.model_.predict(Xs)

    @entry_point
    def score(self, X, y, sample_weight=None):
        """:math:`R^2` (regressor) or mean accuracy (classifier), as scikit-learn.

        Returns
        -------
        float
        """
        Xs = self._transform(X)
        return self.model_.score(Xs, y, sample_weight=sample_weight)


_PARAMS_DOC = """
    Parameters
    ----------
    objective : str or list of str, default "auto"
        Objective to minimize: "holdout", "loocv", "gcv", "creg", "sgpr",
        "prop" or "stoch-prop"; "auto" is "prop" without ``time_budget`` and
        the better of "prop" and "sgpr" on held-out rows with one (see
        :func:`nyhopt.tune`).  A list (e.g. ``["prop", "sgpr", "gcv"]``)
        tunes each on the training part and keeps the one with the lowest
        validation error (``validation_fraction`` or ``fit(...,
        validation=...)`` is then required); with ``validation_fraction``
        the chosen objective is then tuned again on all the rows given to
        ``fit`` (see :func:`nyhopt.tune`).  ``validation_fraction=k``, an
        int, chooses by ``k``-fold validation instead.
    centers : int, "auto", tuple of int or array of shape (m, d), default 100
        Number of Nystrom centers (random training rows; ``"auto"``: 100;
        with ``time_budget`` the starting size, or a tuple of sizes to go
        through) or initial centers
        (in standardized coordinates when ``standardize`` is True: a
        ``UserWarning`` says so when they look like rows of ``X`` in its own
        units).
    epochs : int, default 200
        Maximal number of Adam steps.
    lr : float, default 0.05
        Adam's learning rate.
    kernel : str or Kernel, default "gaussian"
    ard : bool, default True
        One lengthscale per feature.
    random_state : None, int or Generator, default 0
        Seed of the initial centers, splits and probes (0, as :func:`nyhopt.tune`
        and the command line: the same data give the same model).  With
        ``time_budget`` the stages follow measured times too (the same seed
        can give other sizes on another machine or load); ``nyhopt.tune(...,
        replay=result)`` replays a budgeted run exactly (``docs/tuning.md``).
    standardize : bool, default True
        Standardize the columns of ``X`` (training mean and standard
        deviation) before tuning and predicting, as the paper,
        :func:`nyhopt.tune` and the command line do (``x_mean_``,
        ``x_scale_``; ``model_`` works in the standardized coordinates).
    penalty : float, optional
        Initial penalty (default :math:`1/n`).
    lengthscale : float or array of shape (d,), optional
        Initial lengthscale(s), in standardized coordinates when
        ``standardize`` is True (default: the median heuristic; a ``Kernel``
        instance as ``kernel`` also gives its lengthscale).  One per feature
        needs ``ard=True``.
    freeze : iterable of {"penalty", "lengthscale", "centers", "amplitude"}, default ()
        Hyperparameters that are not tuned.  The kernel amplitude is learned
        only by ``sgpr`` (the other objectives ignore it); freezing it keeps
        it at 1 (see :func:`nyhopt.tune`).
    patience : int or None, default 10
        Early stopping patience (steps without improvement of the objective).
    validation_fraction : float or int, optional
        Hold out this fraction of the training data to track the error per
        epoch (``history_``); the model is then fitted on the rest.  With a
        list ``objective``, the validation data that chooses; an int
        ``k >= 2`` chooses by ``k``-fold validation (``k`` runs per
        candidate, then the chosen objective on all the rows; see
        :func:`nyhopt.tune`).
    dtype : {None, "float32", "float64"}
        dtype of the data during tuning (None keeps that of ``X``).
    objective_options : dict, optional
        Passed to :func:`nyhopt.make_objective`.
    solver : {"auto", "direct", "falkon"}, default "auto"
        Solver of the final model.
    record_terms : bool, default True
        Record the objective's terms in ``history_`` (one more forward evaluation per epoch).
    progress : bool or "log", default False
        Progress bar on stderr (only on a terminal); ``"log"`` also writes
        a plain line every 10 seconds when stderr is not a terminal (a log
        file, a pipe; see :func:`nyhopt.tune`).  Off by default, unlike
        :func:`nyhopt.tune` and the command line: an estimator is fitted many
        times by scikit-learn's model selection (``GridSearchCV``,
        ``cross_val_score``), and silent, as scikit-learn's estimators are.
    time_budget : float, optional
        Seconds ``fit`` may take, the final fit included: the centers start
        at ``centers`` and grow while it pays, ``epochs`` caps each stage
        (see :func:`nyhopt.tune` and ``docs/tuning.md``, "A time budget").
        None (the default): a fixed ``centers`` and ``epochs``, as before.

    Attributes
    ----------
    model_ : NystromKRR or NystromKRRClassifier
        The model fitted with the best hyperparameters (standardized coordinates).
    params_ : Params
        The best hyperparameters (standardized coordinates).
    history_ : History
        Per-epoch records of the tuning (see :func:`nyhopt.tune`).
    amplitude_ : float
        The kernel amplitude (signal variance) of the error bars, in the
        units of the standardized targets: the one ``sgpr`` learned (or
        profiled), and SGPR's closed-form optimum at the tuned
        hyperparameters for the objectives that ignore it
        (``docs/uncertainty.md``).  The predictions do not depend on it.
    noise_variance_ : float
        :math:`a n\\lambda`, the noise variance of the same model (standardized
        units; ``model_.y_scale_ ** 2`` times it in the units of ``y``).
    intercept_ : float or numpy.ndarray
        ``model_.intercept_``: the constant of the predictions (in the units
        of ``y`` for the regressor, of the scores for the classifier): the
        tuned constant with ``objective_options={"mean": "constant"}`` (the
        default of ``sgpr``), else the targets' mean (regressor) or 0.
    best_epoch_ : int
    stop_reason_ : str
    objective_ : str
        The objective that was minimized (the chosen one for a list).
    candidates_ : tuple of Candidate
        What each candidate of a list ``objective`` reached (see
        :attr:`nyhopt.TuneResult.candidates`); ``()`` for a single name.
    stages_ : tuple of Stage
        With ``time_budget``: the stages of the run (centers, objective,
        epochs, seconds, held-out error; see :attr:`nyhopt.TuneResult.stages`);
        ``()`` otherwise.
    validation_scores_ : dict or None
        The final model's RMSE, negative log predictive density and 95%
        interval coverage on the validation rows (regression with
        ``validation_fraction`` or ``validation``; see
        :attr:`nyhopt.TuneResult.validation_scores`).
    x_mean_, x_scale_ : numpy.ndarray of shape (d,)
        Input standardization (zeros and ones when ``standardize`` is False).
    transform_ : TransformChoice or None
        With ``time_budget``: the choice among the feature and target
        transforms (``TuneResult.transform``); None where none was made.
    x_warp_ : FeatureWarp or None
        The warp of skewed features applied after the standardization, where
        a ``time_budget`` run chose it on held-out rows
        (:mod:`nyhopt.models._warp`, ``docs/tuning.md``, "Transforms"); None otherwise.
    n_features_in_ : int
    feature_names_in_ : numpy.ndarray of str objects, shape (d,)
        Column names of a DataFrame ``X`` whose names are all strings (absent
        otherwise); ``predict`` checks them as scikit-learn does.
"""


class HyperoptKRR(_HyperoptBase):
    __doc__ = (
        """Nystrom KRR regressor that tunes penalty, lengthscales and centers in ``fit``.
"""
        + _PARAMS_DOC
        + """
    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(300, 2)); y = 5 + np.sin(3 * X[:, 0])
    >>> est = nh.HyperoptKRR(centers=20, epochs=30, random_state=0).fit(X, y)
    >>> est.score(X, y) > 0.95, len(est.history_) > 1
    (True, True)
    """
    )

    _task = "regression"
    _estimator_type = "regressor"

    @entry_point
    def predict(self, X, return_std=False, return_cov=False, include_noise=True):
        """Predictions for ``X``, and their uncertainty as :meth:`NystromKRR.predict`.

        Parameters
        ----------
        X : array of shape (n, d)
        return_std, return_cov, include_noise : bool
            See :meth:`nyhopt.NystromKRR.predict` (``docs/uncertainty.md``).

        Returns
        -------
        mean : array of shape (n,) or (n, p)
        std or cov : array, only with ``return_std`` or ``return_cov``
        """
        Xs = self._transform(X)  # checks that the estimator is fitted
        return self.model_.predict(Xs, return_std=return_std, return_cov=return_cov, include_noise=include_noise)


class HyperoptKRRClassifier(_HyperoptBase):
    __doc__ = (
        """Nystrom KRR classifier that tunes penalty, lengthscales and centers in ``fit``.

    Two classes are regressed as -1/+1, more classes as one-hot targets (the
    paper's setting); ``predict`` returns labels.
"""
        + _PARAMS_DOC
        + """    classes_ : array
        Sorted class labels.

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = np.where(X[:, 0] * X[:, 1] > 0, "same", "diff")
    >>> clf = nh.HyperoptKRRClassifier(centers=30, epochs=30, random_state=0).fit(X, y)
    >>> clf.classes_.tolist(), clf.score(X, y) > 0.9
    (['diff', 'same'], True)
    """
    )

    _task = "classification"
    _estimator_type = "classifier"

    @entry_point
    def fit(self, X, y, validation=None, callback=None, feature_names=None):
        super().fit(X, y, validation=validation, callback=callback, feature_names=feature_names)
        self.classes_ = self.model_.classes_
        return self

    fit.__doc__ = _HyperoptBase.fit.__doc__

    @entry_point
    def decision_function(self, X, return_std=False, include_noise=False):
        """Scores: (n,) for two classes (> 0 means ``classes_[1]``), else (n, n_classes).

        ``return_std`` and ``include_noise`` as :meth:`NystromKRRClassifier.decision_function`.
        """
        Xs = self._transform(X)
        return self.model_.decision_function(Xs, return_std=return_std, include_noise=include_noise)

    @entry_point
    def predict_proba(self, X, include_latent=False):
        r"""Class probabilities, shape (n, n_classes): :meth:`NystromKRRClassifier.predict_proba` of ``model_``.

        Two classes: :math:`\Phi(\mu / \sigma_n)` of the score :math:`\mu`
        and the fitted noise standard deviation :math:`\sigma_n`; more
        classes: the probability that a class draws the largest one-hot label
        (``docs/pipelines.md``, "Class probabilities").  Column ``k`` is
        ``classes_[k]``; ``include_latent`` as in
        :meth:`NystromKRRClassifier.predict_proba`.
        """
        Xs = self._transform(X)
        return self.model_.predict_proba(Xs, include_latent=include_latent)

    @entry_point
    def predict_log_proba(self, X, include_latent=False):
        """Logarithm of :meth:`predict_proba`, shape (n, n_classes)."""
        Xs = self._transform(X)
        return self.model_.predict_log_proba(Xs, include_latent=include_latent)

    @entry_point
    def predict(self, X):
        """Class labels for ``X`` (an array of ``classes_`` values, shape (n,)).

        The scores and their uncertainty come from
        :meth:`decision_function` (``return_std=True``).
        """
        return super().predict(X)
