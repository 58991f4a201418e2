"""Train and validation errors of the N-KRR model at given hyperparameters.

Used by the tuning loop to record, per epoch, how the model fitted with the
current hyperparameters does: the coefficients are solved on the training data
(the objective's ``X`` and encoded targets) and the errors are computed in the
user's terms (RMSE in the targets' units, or the fraction of wrong labels).

What it costs (``docs/tuning.md``, "Tracking the errors").  The exact
objectives that factorize all their rows (``prop``, ``gcv``, ``loocv``,
``creg``, ``sgpr``) solve the very N-KRR system of the step on the way to
their value; :class:`ErrorTracker` attached to one of them
(:meth:`ErrorTracker.attach`) reads that fit
(:mod:`nyhopt.objectives._last_fit`): the training predictions are the
objective's fitted values, the validation rows cost one kernel product and
two triangular solves each, :math:`O(m(d + m))`, and no solve of its own is
made.  It then tracks every epoch.  With the other objectives (``holdout``
fits a part of the rows, ``stoch-prop`` never forms the fit) each tracked
epoch is a solve of its own, about the cost of a step, so it tracks every
:data:`TRACK_EVERY`-th epoch by default, the last epoch and the best one
(:func:`track`, and the tuning loop fills the best epoch in at the end).
"""
from __future__ import annotations

import math

import numpy as np

from ..backend import get_namespace, to_namespace, to_numpy
from ..models._intercept import profile_intercept, with_ones
from ..ops import kmv
from ._targets import TargetEncoding, decode_predictions

__all__ = ["choose_solver", "solve_alpha", "prediction_error", "predictive_scores", "ErrorTracker", "track",
           "TRACK_EVERY"]

#: ``solver="auto"`` uses the direct (Cholesky) solver while ``n * m**2`` is at most this.
DIRECT_MAX_WORK = 1e11

#: Epochs between two tracked ones when tracking costs a solve of its own (objectives whose fit is not reused).
TRACK_EVERY = 20


def choose_solver(solver, n, m) -> str:
    """``"direct"`` or ``"falkon"``: ``"auto"`` picks direct while ``n m^2 <= 1e11``."""
    if solver == "auto":
        return "direct" if float(n) * float(m) ** 2 <= DIRECT_MAX_WORK else "falkon"
    if solver not in ("direct", "falkon"):
        raise ValueError(f"solver must be 'auto', 'direct' or 'falkon', got {solver!r}")
    return solver


def solve_alpha(kernel, X, Z, Y, penalty, solver):
    """Coefficients (m, p) with the chosen solver (Falkon at tol 1e-7, 100 iterations)."""
    if solver == "direct":
        from ..solvers import direct_solve

        return direct_solve(kernel, X, Z, Y, penalty)
    from ..solvers import falkon_solve

    return falkon_solve(kernel, X, Z, Y, penalty, tol=1e-7, maxiter=100, warn=False).alpha


def prediction_error(pred, truth, task) -> float:
    """RMSE (regression, over all outputs) or fraction of wrong labels (classification).

    Computed on the device of ``pred`` when ``truth`` lives there too.
    """
    if not hasattr(truth, "shape"):
        truth = np.asarray(truth)
    xp = get_namespace(pred)
    if get_namespace(truth) is not xp:  # e.g. text labels on the host
        pred, truth = to_numpy(pred), to_numpy(truth)
        xp = np
    if task == "regression":
        diff = pred.astype(xp.float64).reshape(truth.shape) - truth.astype(xp.float64)
        return float(xp.sqrt(xp.mean(diff * diff)))
    return float(xp.mean(pred.reshape(-1) != truth.reshape(-1)))


def predictive_scores(model, X_val, y_val):
    """``{"rmse", "nlpd", "coverage"}`` of a fitted regressor on validation rows (95% interval), or None.

    None when the model has no variance model.  See :mod:`nyhopt.metrics`.
    """
    from .. import metrics

    if getattr(model, "variance_model_", None) is None:
        return None
    mean, std = model.predict(X_val, return_std=True)
    return {"rmse": metrics.rmse(y_val, mean), "nlpd": metrics.nlpd(y_val, mean, std),
            "coverage": metrics.coverage(y_val, mean, std, level=0.95)}


def track(tracker, params, epoch, last=False):
    """``(train_error, validation_error)`` of ``tracker`` at ``params`` when epoch ``epoch`` is tracked, else NaNs.

    A tracker without a ``due`` method (the Dask one) tracks every epoch.
    The ``last`` epoch is always tracked.
    """
    if tracker is None:
        return math.nan, math.nan
    due = getattr(tracker, "due", None)
    if due is not None and not last and not due(params, epoch):
        tracker.last_scores = (math.nan, math.nan)
        return math.nan, math.nan
    return tracker(params)


def fill_best(history, best_epoch, best_params, tracker) -> None:
    """Track the best epoch of ``history`` at ``best_params`` when it was not (NaN errors); in place."""
    if tracker is None or not len(history):
        return
    i = next((k for k, r in enumerate(history) if r.epoch == best_epoch), None)
    if i is None or not (math.isnan(history[i].train_error) and math.isnan(history[i].validation_error)):
        return
    train_err, val_err = tracker(best_params)
    nlpd, cov = getattr(tracker, "last_scores", (math.nan, math.nan))
    history.replace(i, history[i]._replace(train_error=train_err, validation_error=val_err,
                                           validation_nlpd=nlpd, validation_coverage=cov))


def _same_point(a, b) -> bool:
    """Whether two Params have the same penalty, lengthscales and centers (the amplitude leaves the fit alone)."""
    if a is b:
        return True
    if float(a.log_penalty) != float(b.log_penalty):
        return False
    if not np.array_equal(np.asarray(a.log_lengthscale), np.asarray(b.log_lengthscale)):
        return False
    za, zb = a.centers, b.centers
    if za is zb:
        return True
    xp = get_namespace(za)
    return get_namespace(zb) is xp and za.shape == zb.shape and bool(xp.all(za == zb))


class ErrorTracker:
    """Errors of the model at given params on the training and a validation set.

    Parameters
    ----------
    X : array (n, d)
        Training inputs, as the objective sees them.
    enc : TargetEncoding
        Encoded training targets.
    y_train : array
        Training targets in the user's terms (values or labels).
    X_val, y_val : arrays or None
        Validation data in the same coordinates as ``X``.
    kernel : Kernel
        Kernel template (its lengthscale is replaced).
    dtype : numpy dtype
        dtype of the data (the centers are cast to it).
    solver : {"direct", "falkon"}
    fit_intercept : bool, default False
        Fit the model with an unpenalized constant (the objective's ``mean="constant"``).
    every : int or None, default None
        Track every ``every``-th epoch (:meth:`due`); None: every epoch when
        the attached objective's fit is reused (:meth:`attach`), every
        :data:`TRACK_EVERY`-th otherwise.
    """

    def __init__(self, X, enc: TargetEncoding, y_train, X_val, y_val, kernel, dtype, solver, fit_intercept=False,
                 every=None):
        self.X, self.enc, self.y_train = X, enc, y_train
        self.X_val, self.y_val = X_val, y_val
        self.kernel, self.dtype, self.solver = kernel, dtype, solver
        #: ``(validation_nlpd, validation_coverage)`` of the last call (NaN when not computed)
        self.last_scores = (float("nan"), float("nan"))
        #: use ``params.amplitude`` for the error bars (objectives that tune it), else SGPR's closed form
        self.use_amplitude = False
        self.fit_intercept = bool(fit_intercept)
        self.every = every
        #: the objective whose fit is read (:meth:`attach`), or None
        self.source = None

    def attach(self, obj) -> bool:
        """Read the fit of ``obj`` where it has one (the exact objectives on all rows); True when it does.

        Sets ``obj.keep_fit`` (:mod:`nyhopt.objectives._last_fit`), which
        leaves the objective's values and gradients as they are.
        """
        if _keeps_fit(obj):
            obj.keep_fit = True
            obj.last_fit = None
            self.source = obj
        return self.source is not None

    @property
    def period(self) -> int:
        """Epochs between two tracked ones (:attr:`every`, or its default)."""
        if self.every is not None:
            return int(self.every)
        return 1 if self.source is not None else TRACK_EVERY

    def due(self, params, epoch) -> bool:
        """Whether epoch ``epoch`` (at ``params``) is tracked: every :attr:`period`-th epoch."""
        return epoch % self.period == 0

    def __call__(self, params):
        """``(train_error, validation_error)``; NaN for a missing validation set.

        Regression with validation rows and the direct solver (or a reused
        fit) also sets :attr:`last_scores`: the error bars of the same model
        on the validation rows (its variance model comes from the direct
        solver's own pass; the validation rows cost :math:`O(m^2)` each).
        """
        kernel = self.kernel.with_lengthscale(params.lengthscale)
        Z = params.centers.astype(self.dtype, copy=False)
        last = self._reused(params)
        if last is not None:
            return self._from_fit(kernel, Z, params, last)
        Y = self.enc.Y
        xp = get_namespace(Y)
        scores = self.X_val is not None and self.enc.task == "regression" and self.solver == "direct"
        vm = None
        Y_fit = with_ones(Y, xp) if self.fit_intercept else Y
        if scores:
            from ..posterior import direct_fit

            alpha, vm = direct_fit(kernel, self.X, Z, Y_fit, params.penalty,
                                   amplitude=params.amplitude if self.use_amplitude else None,
                                   intercept=self.fit_intercept)
        else:
            alpha = solve_alpha(kernel, self.X, Z, Y_fit, params.penalty, self.solver)
        c = 0.0
        if self.fit_intercept:
            alpha, c = profile_intercept(kernel, self.X, Z, Y, alpha, params.penalty)
            c = xp.asarray(c)
        train = prediction_error(decode_predictions(kmv(kernel, self.X, Z, alpha) + c, self.enc),
                                 self.y_train, self.enc.task)
        return train, self._validation(kernel, Z, alpha, c, vm)

    def _reused(self, params):
        """The attached objective's fit when it was computed at ``params`` (then forgotten), else None."""
        obj = self.source
        last = None if obj is None else obj.last_fit
        if last is None or not _same_point(last.params, params):
            return None
        obj.last_fit = None  # read once: holds an n x p array
        return last

    def _from_fit(self, kernel, Z, params, last):
        """The errors of the objective's own fit ``last`` (a :class:`~nyhopt.objectives._last_fit.LastFit`)."""
        xp = get_namespace(last.fitted)
        train = prediction_error(decode_predictions(last.fitted, self.enc), self.y_train, self.enc.task)
        c = 0.0 if last.intercept is None else xp.asarray(last.intercept)
        vm = None
        if self.X_val is not None and self.enc.task == "regression":
            from ..posterior import VarianceModel

            if self.use_amplitude:
                a = params.amplitude
            else:  # SGPR's profiled amplitude (nyhopt.posterior.amplitude_from_fit)
                n, p = last.fitted.shape
                a = max(last.fit, 0.0) / (n * p * last.n_lam)
            vm = VarianceModel(last.L, last.C, last.n_lam, float(a))
        return train, self._validation(kernel, Z, last.alpha, c, vm)

    def _validation(self, kernel, Z, alpha, c, vm):
        """Validation error of the coefficients ``alpha`` (and constant ``c``); sets :attr:`last_scores`."""
        self.last_scores = (float("nan"), float("nan"))
        if self.X_val is None:
            return float("nan")
        if vm is None:
            pred = decode_predictions(kmv(kernel, self.X_val, Z, alpha) + c, self.enc)
            return prediction_error(pred, self.y_val, self.enc.task)
        mean, var = mean_and_variance(kernel, self.X_val, Z, alpha, vm)
        pred = decode_predictions(mean + c, self.enc)
        self.last_scores = self._scores(var + vm.noise_variance, pred)
        return prediction_error(pred, self.y_val, self.enc.task)

    def _scores(self, var, pred):
        """NLPD and 95% coverage of the predictions ``pred`` (user units) with variance ``var`` (encoded units)."""
        from .. import metrics

        xp = get_namespace(pred)
        std = xp.sqrt(var)[:, None] * xp.asarray(np.asarray(self.enc.y_scale, dtype=np.float64))
        mean = pred.reshape(std.shape)
        y = to_namespace(self.y_val, xp, xp.float64).reshape(std.shape)
        return metrics.nlpd(y, mean, std), metrics.coverage(y, mean, std, level=0.95)


def mean_and_variance(kernel, X, Z, alpha, vm):
    r"""Latent mean :math:`k(x, Z)^T\alpha` (n, p) and variance (n,) of the rows of ``X``, float64.

    The variance is :func:`nyhopt.posterior.latent_variance`'s, and both come
    from one kernel block per row block: with :math:`v = L^{-1}k_x` and
    :math:`\beta = L^T\alpha`, the mean is :math:`v^T\beta`, and :math:`v`
    is overwritten by :math:`w = C^{-1}v` (two triangular solves in place,
    :math:`2m^2` flops per row, no other ``m x n`` array).  On the CPU it runs
    in the objectives' ``"pool"`` phase (:mod:`nyhopt.backend._threads`): BLAS
    threads left spinning between two steps made the next step of ``prop``
    up to twice as slow (83 against 44 ms, n = 32614, m = 100).
    """
    from ..backend._config import block_rows
    from ..backend._threads import cpu_threads
    from ..objectives._exact import tri_solve
    from ..ops._blocks import KernelBlocks

    xp = get_namespace(X)
    blocks = KernelBlocks(kernel, X, Z.astype(X.dtype, copy=False))
    n, m = X.shape[0], Z.shape[0]
    L, C = xp.asarray(vm.L), xp.asarray(vm.C)
    beta = L.T @ xp.asarray(alpha, dtype=xp.float64)
    kxx = kernel.diag(blocks.X).astype(xp.float64, copy=False)
    mean = xp.empty((n, beta.shape[1]), dtype=xp.float64)
    var = xp.empty(n, dtype=xp.float64)
    b = block_rows(n, m, 8, n_temps=2)
    with cpu_threads("pool", xp):
        for lo in range(0, n, b):
            hi = min(n, lo + b)
            V = tri_solve(L, blocks.rows_t(lo, hi).astype(xp.float64, copy=False), xp, overwrite=True)
            mean[lo:hi] = V.T @ beta
            vv = xp.einsum("ij,ij->j", V, V)
            W = tri_solve(C, V, xp, overwrite=True)
            var[lo:hi] = xp.maximum(kxx[lo:hi] - vv + vm.n_lam * xp.einsum("ij,ij->j", W, W), 0.0)
    var *= vm.amplitude
    return mean, var


def _keeps_fit(obj) -> bool:
    """Whether ``obj`` factorizes all its rows through :func:`nyhopt.objectives._mean.factor_and_fit`."""
    from ..objectives import CReg, GCV, LOOCV, Prop, SGPR

    return isinstance(obj, (CReg, GCV, LOOCV, Prop, SGPR))
