r"""Nystrom kernel ridge regression estimators (scikit-learn compatible).

:class:`NystromKRR` fits

.. math::
    \alpha = (K_{nm}^T K_{nm} + n\lambda K_{mm})^{-1} K_{nm}^T Y, \qquad
    f(x) = k(x, Z)\,\alpha,

the minimizer of :math:`\frac1n\|Y - K_{nm}\alpha\|^2 + \lambda\,
\mathrm{Tr}(\alpha^T K_{mm}\alpha)` over functions spanned by the kernel at
the centers :math:`Z` (:math:`K_{nm} = k(X, Z)`, :math:`K_{mm} = k(Z, Z)`),
with the Falkon solver (:func:`nyhopt.solvers.falkon_solve`, bounded memory)
or the direct Cholesky solver (:func:`nyhopt.solvers.direct_solve`).
:class:`NystromKRRClassifier` regresses on -1/+1 targets (two classes) or on
one-hot 0/1 targets (more classes).

Both follow the scikit-learn estimator protocol (``get_params``,
``set_params``, ``clone``, fitted attributes ending in ``_``) without
importing scikit-learn.  Arrays stay where they are: CuPy inputs give CuPy
outputs, computed on the GPU.
"""
from __future__ import annotations

import numpy as np

from .metrics._r2 import r2_combine, r2_from_sums, r2_partials
from .models._scaling import column_mean_std, standardize
from .models._nystrom_base import NystromBase
from .inputs._door import entry_point, trust
from .inputs._estimator_input import DataConversionWarning, as_array as _as_array, check_X as _check_X
from .inputs._estimator_input import regression_targets
from .inputs._validation import check_label_kind, check_labels, check_sample_weight, check_targets
from .backend import as_native, get_namespace, is_cupy_namespace
from .models._fitted import NotFittedError, check_fitted as _check_fitted
from .models._fitted import as_intercept as _as_intercept, intercept_of as _intercept_of
from .placement import on_cluster
from .solvers import ConvergenceWarning
from .posterior import check_variance_model
from .posterior._predictive import check_flags
from .errors import warn_user

__all__ = [
    "NystromKRR",
    "NystromKRRClassifier",
    "NotFittedError",
    "ConvergenceWarning",
    "DataConversionWarning",
]

# ----------------------------------------------------------------------------- regression


class NystromKRR(NystromBase):
    r"""Nystrom kernel ridge regression.

    Parameters
    ----------
    kernel : Kernel, str or None, default None
        A kernel instance (with its lengthscales), a kernel name for
        :func:`nyhopt.make_kernel` (lengthscale 1), or None for
        ``GaussianKernel(1.0)``.
    penalty : float, default 1e-6
        Ridge penalty :math:`\lambda > 0` (the loss is divided by ``n``).
    centers : int or array of shape (m, d), default 100
        Number of Nystrom centers drawn uniformly without replacement from the
        training points (seeded by ``random_state``), or the centers
        themselves (converted to the array type and dtype of ``X``).
    solver : {"falkon", "direct"}, default "falkon"
        "falkon": preconditioned CG, memory bounded by row blocks;
        "direct": Cholesky (:math:`O(n m^2)`), for small problems.
    maxiter : int, default 100
        Maximal Falkon CG iterations.
    tol : float, default 1e-7
        Relative residual tolerance of Falkon CG.
    random_state : None, int, numpy Generator or RandomState
        Seed of the random choice of centers.
    normalize_y : bool, default False
        Standardize each target column with its training mean and standard
        deviation before solving, and map predictions back
        (:math:`\mu + \sigma k(x, Z)\alpha`); a constant column is only centered.
        This is how the paper fits after tuning on standardized labels.
    fit_intercept : bool, default False
        Fit an unpenalized constant :math:`c` per output with the
        coefficients (ridge regression with intercept):
        :math:`\min_{\alpha, c}\frac1n\|Y - 1c^T - K_{nm}\alpha\|^2 +
        \lambda\,\mathrm{Tr}(\alpha^TK_{mm}\alpha)`, solved in closed
        form (``docs/objectives.md``, "A constant mean").  The model that
        :func:`nyhopt.tune` fits for an objective with ``mean="constant"``.
    predictive_variance : bool, default True
        Keep what ``predict(X, return_std=True)`` needs (two ``m x m``
        factors, ``docs/uncertainty.md``).  The direct solver gets them from
        its own pass; after Falkon they cost one more pass over the training
        data (:math:`O(nm^2)` flops, the work of the direct solver).  False
        skips it.
    amplitude : float or None, default None
        Kernel amplitude :math:`a` (signal variance) of the error bars, in the
        units of the fitted targets; None: SGPR's closed-form optimum at the
        fitted penalty, lengthscales and centers.  The predictions do not
        depend on it.

    Attributes
    ----------
    alpha_ : array, shape (m,) or (m, p)
        Coefficients (float64), on the device of the training data, for the
        standardized targets when ``normalize_y`` is True.
    intercept_ : float or numpy.ndarray of shape (p,)
        The constant of the predictor in the units of ``y`` (a float for a
        1-D ``y``): predictions are ``intercept_ + y_scale_ * k(x, Z) alpha_``.
        The fitted constant with ``fit_intercept`` (plus ``y_mean_``), else
        ``y_mean_`` with ``normalize_y``, else 0.
    y_mean_, y_scale_ : numpy.ndarray of shape (p,)
        Target statistics (0 and 1 when ``normalize_y`` is False).
    centers_ : array, shape (m, d)
        The centers used, in the dtype of the training data.
    kernel_ : Kernel
        The kernel used (a copy).
    input_mean_, input_scale_ : numpy.ndarray of shape (d,) or None
        The input scaling of a model returned by :func:`nyhopt.tune`
        (``standardize=True``): ``predict``, ``score`` and the error bars take
        raw ``X`` and use :math:`(x - \mu)/\sigma` (``input_mean_``,
        ``input_scale_``), the coordinates of ``centers_`` and of the
        lengthscales.  None after ``fit``: ``X`` is used as given.
    input_warp_ : FeatureWarp or None
        The warp of skewed features that :func:`nyhopt.tune` chose under a
        time budget, applied after the input scaling
        (:mod:`nyhopt.models._warp`, ``docs/tuning.md``, "Transforms"); None otherwise.
    target_transform_ : {None, "log"}
        ``"log"``: the model was tuned on :math:`\log y` (chosen by
        :func:`nyhopt.tune` under a time budget on held-out rows) and
        ``predict`` returns :math:`\exp` of the predicted log (see
        :meth:`predict`); None after ``fit``.
    n_features_in_ : int
    feature_names_in_ : numpy.ndarray of str objects, shape (d,)
        Column names of a DataFrame ``X`` whose names are all strings (absent
        otherwise); ``predict`` checks them as scikit-learn does.
    solve_ : FalkonResult or None
        The Falkon record (iterations, residuals); None for the direct solver.
    converged_ : bool
        False when Falkon stopped at ``maxiter`` above ``tol`` (a
        :class:`~nyhopt.solvers.ConvergenceWarning` is issued too).
    amplitude_ : float or None
        Kernel amplitude :math:`a` of the error bars (``amplitude``, or
        :math:`F/(np\,n\lambda)` with the penalized fit :math:`F`), in the
        units of the fitted targets (standardized with ``normalize_y``);
        None when ``predictive_variance`` is False.
    noise_variance_ : float or None
        :math:`a n\lambda`, the noise variance of the same model, in the same units.
    variance_model_ : VarianceModel or None
        The factors of the predictive variance (:mod:`nyhopt.posterior`).

    Notes
    -----
    The coefficients solve :math:`(K_{nm}^T K_{nm} + n\lambda K_{mm})\alpha
    = K_{nm}^T Y`; predictions are :math:`k(x, Z)\alpha`, computed in row
    blocks in the dtype of the input.

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(500, 2)); y = np.sin(3 * X[:, 0]) + X[:, 1]
    >>> model = nh.NystromKRR(nh.GaussianKernel(0.5), penalty=1e-6, centers=50, random_state=0)
    >>> model.fit(X, y).score(X, y) > 0.99
    True
    >>> model.predict(X[:3]).shape, model.alpha_.shape, model.converged_
    ((3,), (50,), True)
    >>> mean, std = model.predict(X[:3], return_std=True)
    >>> std.shape, bool(np.all(std > 0))
    ((3,), True)
    """

    _estimator_type = "regressor"

    def __init__(self, kernel=None, penalty=1e-6, centers=100, solver="falkon", maxiter=100, tol=1e-7,
                 random_state=None, normalize_y=False, fit_intercept=False, predictive_variance=True,
                 amplitude=None):
        super().__init__(kernel=kernel, penalty=penalty, centers=centers, solver=solver, maxiter=maxiter,
                         tol=tol, random_state=random_state, fit_intercept=fit_intercept,
                         predictive_variance=predictive_variance, amplitude=amplitude)
        self.normalize_y = normalize_y

    @entry_point
    def fit(self, X, y, client=None):
        """Fit the model.

        Parameters
        ----------
        X : array of shape (n, d)
            Training inputs (NumPy or CuPy; float32 or float64; ints become float64); a
            DataFrame (its column names are recorded) or any DLPack array (PyTorch, JAX:
            a GPU array gives CuPy results) is converted without a copy where possible.
        y : array of shape (n,) or (n, p)
            Targets.
        client : distributed.Client, optional
            For dask arrays ``X``, ``y`` (solver "falkon"): the cluster to run
            on; default the current client.  Refused for in-memory data.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad input (the message names it); non-finite coefficients.
        nyhopt.errors.IllConditionedError
            A ``ValueError``: the system is not numerically positive definite
            (the message says what to change: distinct centers, a larger penalty).
        """
        self.input_mean_ = self.input_scale_ = self.input_warp_ = None  # inputs as given (nyhopt.tune sets them)
        self.target_transform_ = None  # predictions in the units of y (nyhopt.tune may set "log")
        if on_cluster(X, y):  # solver "falkon" on the Dask client
            from .distributed.estimator import fit_dask

            return fit_dask(self, X, y, client=client)
        if client is not None:
            raise ValueError("client is only used with dask arrays X, y; leave it out for in-memory data")
        X, xp = _check_X(self, X, reset=True)
        y = regression_targets(y, "NystromKRRClassifier")
        get_namespace(X, y)
        Y, was_1d = check_targets(y, "y", X.shape[0], xp, dtype=X.dtype)
        p = Y.shape[1]
        mean, scale = np.zeros(p), np.ones(p)
        if self.normalize_y:
            mean, std = column_mean_std(Y, xp)  # no overflow for huge finite targets
            scale = np.where(std > 0, std, 1.0)
            Y = standardize(Y.astype(xp.float64), mean, scale, xp).astype(X.dtype)
            trust(Y)  # finite targets standardized: |Y| <= sqrt(n)
        alpha, c = self._fit_with_intercept(X, Y, xp)
        self.alpha_ = alpha[:, 0] if was_1d else alpha
        self.y_mean_, self.y_scale_ = mean, scale
        self.intercept_ = _as_intercept(mean + scale * c, was_1d)
        return self

    @entry_point
    def predict(self, X, return_std=False, return_cov=False, include_noise=True):
        """Predictions :math:`c + s\\,k(X, Z)\\alpha` (``intercept_``, ``y_scale_``, ``alpha_``), and their uncertainty.

        A model tuned on :math:`\\log y` (``target_transform_`` ``"log"``:
        :func:`nyhopt.tune` under a time budget chose it on held-out rows)
        predicts :math:`\\exp(\\mu)`, the median of its log-normal predictive
        distribution, and ``return_std`` gives :math:`\\exp(\\mu)\\,s` (the
        delta method: :math:`s` is the standard deviation of the predicted
        log; the interval :math:`\\exp(\\mu \\pm z s)` is the exact one).

        Parameters
        ----------
        X : array of shape (n, d)
        return_std : bool, default False
            Also return the standard deviation of the predictive distribution
            (``docs/uncertainty.md``), as scikit-learn's ``GaussianProcessRegressor``.
        return_cov : bool, default False
            Also return the covariance of the predictions (``n x n`` memory).
        include_noise : bool, default True
            True: the spread of a new observation :math:`y(x)`, the latent
            variance plus ``noise_variance_`` (scikit-learn's GPR with a
            ``WhiteKernel``, GPflow's ``predict_y``); False: the spread of the
            latent function :math:`f(x)` (GPflow's ``predict_f``).

        Returns
        -------
        mean : array of shape (n,) or (n, p)
            Same array type and dtype as ``X``.
        std : array of shape (n,) or (n, p), only with ``return_std``
        cov : array of shape (n, n) or (n, n, p), only with ``return_cov``

        Raises
        ------
        ValueError
            ``X`` of the wrong width; both ``return_std`` and ``return_cov``;
            a model without a variance model (``predictive_variance=False``).
        TypeError
            A flag that is not a bool.
        """
        return_std, return_cov, include_noise = check_flags(return_std, return_cov, include_noise)
        log = getattr(self, "target_transform_", None) == "log"
        if return_std or return_cov:
            if log and return_cov:
                raise ValueError("return_cov is not available for a model tuned on log y (target_transform_ "
                                 "'log'); use return_std")
            mean = self.predict(X)
            spread = self._spread(X, return_cov, include_noise)
            return mean, (mean * spread if log else spread)
        if on_cluster(X):  # a dask array, block by block
            from .distributed.estimator import predict_dask

            pred = predict_dask(self, self._dask_inputs(X))
            return np.exp(pred) if log else pred
        f = self._decision(X)
        shift = _intercept_of(self)
        if not self.normalize_y and not np.any(shift):
            return get_namespace(f).exp(f) if log else f
        xp = get_namespace(f)
        if f.ndim == 1:
            out = f * f.dtype.type(self.y_scale_[0]) + f.dtype.type(shift[0])
        else:
            out = f * xp.asarray(self.y_scale_, dtype=f.dtype) + xp.asarray(shift, dtype=f.dtype)
        if not bool(xp.all(xp.isfinite(out))):
            raise ValueError(f"predictions overflow {f.dtype} when mapped back to the units of y "
                             f"(y_scale_ = {self.y_scale_.tolist()}); X is far outside the training data")
        return xp.exp(out) if log else out

    @entry_point
    def score(self, X, y, sample_weight=None):
        """Coefficient of determination :math:`R^2` (averaged over outputs), as scikit-learn.

        Parameters
        ----------
        X : array (n, d)
        y : array (n,) or (n, p)
        sample_weight : array (n,), optional

        Returns
        -------
        float

        Notes
        -----
        For a dask ``X`` the sums are reduced on the cluster, one task per
        row block (its predictions, targets and weights): the predictions
        are not collected, and a few numbers per output reach this process.
        """
        if on_cluster(X):
            from .distributed._score import r2_sums_dask

            return r2_from_sums(*r2_sums_dask(self, self._dask_inputs(X), y, sample_weight))
        pred = as_native(self.predict(X), "X")
        xp = get_namespace(pred)
        Y, _ = check_targets(_as_array(y, "y"), "y", pred.shape[0], xp, dtype=np.float64)
        if pred.size != Y.size:
            raise ValueError(f"y has {Y.shape[1]} output column(s) but the model predicts "
                             f"{pred.size // max(pred.shape[0], 1)}")
        P = pred.reshape(Y.shape).astype(np.float64)
        w = None if sample_weight is None else check_sample_weight(
            as_native(sample_weight, "sample_weight"), Y.shape[0], xp)
        ss_res, ss_tot, _ = r2_combine([r2_partials(Y, P, w)])
        return r2_from_sums(ss_res, ss_tot)


# ----------------------------------------------------------------------------- classification


def _encode_labels(y, xp):
    """Sorted class labels and the index of each sample's class."""
    if y.dtype.kind == "f":
        if not bool(xp.all(xp.isfinite(y))):
            raise ValueError("y contains NaN or infinity")
        if not bool(xp.all(y == xp.round(y))):
            raise ValueError("Unknown label type: continuous targets; a classifier needs class labels")
    classes, idx = xp.unique(y, return_inverse=True)
    return classes, idx.reshape(-1)


class NystromKRRClassifier(NystromBase):
    r"""Nystrom kernel ridge regression used as a classifier.

    Two classes are regressed as a single output with targets -1 (``classes_[0]``)
    and +1 (``classes_[1]``); ``predict`` returns ``classes_[1]`` where the
    score is > 0.  More classes are regressed with one-hot targets (1 for the
    sample's class, 0 elsewhere, as in the paper), and ``predict`` returns the
    class of the largest score.

    Parameters
    ----------
    kernel, penalty, centers, solver, maxiter, tol, random_state, fit_intercept, predictive_variance, amplitude
        As for :class:`NystromKRR` (the constant is fitted to the encoded
        -1/+1 or one-hot targets).

    Attributes
    ----------
    classes_ : array, shape (n_classes,)
        Sorted class labels.
    alpha_ : array, shape (m,) for two classes, (m, n_classes) otherwise
    intercept_ : float or numpy.ndarray of shape (n_classes,)
        The constant of the scores (0 unless ``fit_intercept``).
    centers_, kernel_, input_mean_, input_scale_, input_warp_, n_features_in_, feature_names_in_, solve_, converged_
        As for :class:`NystromKRR` (``predict_proba`` and ``decision_function``
        apply the input scaling too).
    amplitude_, noise_variance_, variance_model_
        As for :class:`NystromKRR`, for the regression on the encoded labels
        (the standard deviation of ``decision_function``).

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = np.where(X[:, 0] * X[:, 1] > 0, "same", "diff")
    >>> clf = nh.NystromKRRClassifier(penalty=1e-5, centers=60, random_state=0).fit(X, y)
    >>> clf.classes_.tolist(), clf.score(X, y) > 0.95
    (['diff', 'same'], True)
    >>> clf.decision_function(X[:2]).shape
    (2,)
    """

    _estimator_type = "classifier"

    @entry_point
    def fit(self, X, y):
        """Fit on class labels ``y`` of shape (n,).

        Parameters
        ----------
        X : array of shape (n, d)
        y : array of shape (n,)
            Labels (numbers or strings); at least two classes.

        Returns
        -------
        self
        """
        self.input_mean_ = self.input_scale_ = self.input_warp_ = None  # inputs as given (nyhopt.tune sets them)
        X, xp = _check_X(self, X, reset=True)
        y = _as_array(check_labels(y, "y"), "y", numeric=False)
        get_namespace(X, y)
        if y.ndim == 2 and y.shape[1] == 1:
            warn_user(
                "A column-vector y was passed when a 1d array was expected; y was raveled to shape (n,)",
                DataConversionWarning
            )
            y = y.reshape(-1)
        if y.ndim != 1:
            raise ValueError(f"y should be a 1d array of labels, got shape {tuple(y.shape)}")
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y has {y.shape[0]} rows but X has {X.shape[0]}")
        classes, idx = _encode_labels(y, xp)
        if classes.shape[0] < 2:
            raise ValueError(f"y has only one class ({classes.tolist()}); a classifier needs at least 2 classes")
        if classes.shape[0] == 2:
            Y = (2.0 * idx - 1.0).astype(X.dtype)[:, None]
        else:
            Y = xp.zeros((X.shape[0], classes.shape[0]), dtype=X.dtype)
            Y[xp.arange(X.shape[0]), idx] = 1
        trust(Y)  # +-1 or one-hot
        alpha, c = self._fit_with_intercept(X, Y, xp)
        self.classes_ = classes
        self.alpha_ = alpha[:, 0] if classes.shape[0] == 2 else alpha
        self.intercept_ = _as_intercept(c, classes.shape[0] == 2)
        return self

    @entry_point
    def decision_function(self, X, return_std=False, include_noise=False):
        """Scores :math:`c + k(X, Z)\\alpha`: shape (n,) for two classes (> 0 means ``classes_[1]``), else
        (n, n_classes).

        With ``return_std=True`` also the standard deviation of each score
        under the regression's Gaussian model (``docs/uncertainty.md``), of
        the same shape (one amplitude for all classes, so the columns of a
        multiclass model are equal); ``include_noise`` adds the noise variance.
        """
        return_std, _, include_noise = check_flags(return_std, False, include_noise)
        f = self._decision(X)
        shift = _intercept_of(self)
        if np.any(shift):
            xp = get_namespace(f)
            f = f + (f.dtype.type(shift[0]) if f.ndim == 1 else xp.asarray(shift, dtype=f.dtype))
        if not return_std:
            return f
        return f, self._spread(X, False, include_noise)

    @entry_point
    def predict_proba(self, X, include_latent=False):
        r"""Class probabilities from the Gaussian model of the regression on the encoded labels.

        A new encoded label at ``x`` is taken as :math:`y^* \sim \mathcal
        N(\mu, s^2)`, :math:`\mu` the score (:meth:`decision_function`) and
        :math:`s = \sigma_n` the fitted noise standard deviation
        (``sqrt(noise_variance_)``).  Two classes (targets -1/+1):

        .. math::
            P(\text{classes\_}[1] \mid x) = P(y^* > 0) = \Phi(\mu / s),

        a probit of the score.  More classes (one-hot targets, the outputs
        taken independent): the probability that class :math:`k` draws the
        largest label,

        .. math::
            P(k \mid x) = \int \varphi(z) \prod_{j \ne k}
            \Phi\Big(\frac{\mu_k - \mu_j + s_k z}{s_j}\Big)\, dz,

        summed over a grid of draws shared by the classes (within
        :math:`10^{-6}`), rows normalized to 1.  Both are
        approximations (least squares on labels is not a likelihood for
        classes); ``docs/pipelines.md`` ("Class probabilities") measures their
        calibration.  Needs ``predictive_variance=True``.

        Parameters
        ----------
        X : array of shape (n, d)
        include_latent : bool, default False
            Add the latent variance of the score at each point,
            :math:`s^2 = \sigma_f^2(x) + \sigma_n^2`
            (``decision_function(X, return_std=True, include_noise=True)``):
            probabilities move toward :math:`1/K` away from the data.  They
            are then no longer a monotone function of the score (the
            ranking of ``predict_proba`` and ``decision_function`` can
            differ), and cost :math:`O(m^2)` per row.

        Returns
        -------
        array of shape (n, n_classes), float64
            Column ``k`` is the probability of ``classes_[k]``; on the
            device of the scores (CuPy scores give CuPy probabilities).
        """
        from .posterior._proba import class_probabilities

        if not isinstance(include_latent, (bool, np.bool_)):
            raise TypeError(f"include_latent must be True or False, got {include_latent!r}")
        if include_latent:
            mu, s = self.decision_function(X, return_std=True, include_noise=True)
            return class_probabilities(mu, s)
        _check_fitted(self)
        check_variance_model(getattr(self, "variance_model_", None), self.centers_.shape[0],
                             f"this {type(self).__name__}", getattr(self, "_no_variance_reason", None))
        mu = self.decision_function(X)
        return class_probabilities(mu, float(np.sqrt(self.noise_variance_)))

    @entry_point
    def predict_log_proba(self, X, include_latent=False):
        """Logarithm of :meth:`predict_proba`, shape (n, n_classes)."""
        p = self.predict_proba(X, include_latent=include_latent)
        xp = get_namespace(p)
        with np.errstate(divide="ignore"):
            return xp.log(p)

    @entry_point
    def predict(self, X):
        """Predicted class labels, shape (n,), same array type as ``X``."""
        scores = self.decision_function(X)
        xp = get_namespace(scores)
        idx = (scores > 0).astype(np.int64) if scores.ndim == 1 else xp.argmax(scores, axis=1)
        return self.classes_[idx]

    @entry_point
    def score(self, X, y, sample_weight=None):
        """Mean accuracy (weighted by ``sample_weight`` if given), as scikit-learn.

        Returns
        -------
        float
        """
        pred = as_native(self.predict(X), "X")
        xp = get_namespace(pred)
        y = _as_array(check_labels(y, "y"), "y", numeric=False).reshape(-1)
        check_label_kind(y, self.classes_)
        if is_cupy_namespace(xp) and get_namespace(y) is not xp:  # host labels, model on the GPU: as NystromKRR.score
            if y.dtype.kind not in "biuf":
                raise TypeError(f"y holds {y.dtype} labels but the model was fitted on the GPU (numeric classes_)")
            y = xp.asarray(y)
        if y.shape[0] != pred.shape[0]:
            raise ValueError(f"y has {y.shape[0]} rows but X has {pred.shape[0]}")
        hit = (pred == y).astype(np.float64)
        if sample_weight is None:
            return float(hit.mean())
        w = check_sample_weight(as_native(sample_weight, "sample_weight"), pred.shape[0], xp)
        return float((w * hit).sum() / w.sum())
