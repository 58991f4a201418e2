"""Train and validation errors of the N-KRR model at given hyperparameters.

Used by the tuning loop to record, per epoch, how the model fitted with the
current hyperparameters does: the coefficients are solved on the training data
(the objective's ``X`` and encoded targets) and the errors are computed in the
user's terms (RMSE in the targets' units, or the fraction of wrong labels).
"""
from __future__ import annotations

import numpy as np

from ..backend import get_namespace, to_namespace, to_numpy
from ..models._intercept import profile_intercept, with_ones
from ..ops import kmv
from ._targets import TargetEncoding, decode_predictions

__all__ = ["choose_solver", "solve_alpha", "prediction_error", "predictive_scores", "ErrorTracker"]

#: ``solver="auto"`` uses the direct (Cholesky) solver while ``n * m**2`` is at most this.
DIRECT_MAX_WORK = 1e11


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
    """

    def __init__(self, X, enc: TargetEncoding, y_train, X_val, y_val, kernel, dtype, solver, fit_intercept=False):
        self.X, self.enc, self.y_train = X, enc, y_train
        self.X_val, self.y_val = X_val, y_val
        self.kernel, self.dtype, self.solver = kernel, dtype, solver
        #: ``(validation_nlpd, validation_coverage)`` of the last call (NaN when not computed)
        self.last_scores = (float("nan"), float("nan"))
        #: use ``params.amplitude`` for the error bars (objectives that tune it), else SGPR's closed form
        self.use_amplitude = False
        self.fit_intercept = bool(fit_intercept)

    def __call__(self, params):
        """``(train_error, validation_error)``; NaN for a missing validation set.

        Regression with validation rows and the direct solver also sets
        :attr:`last_scores`: the error bars of the same model on the
        validation rows (its variance model comes from the direct solver's
        own pass; the validation rows cost :math:`O(m^2)` each).
        """
        kernel = self.kernel.with_lengthscale(params.lengthscale)
        Z = params.centers.astype(self.dtype, copy=False)
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
        val = float("nan")
        self.last_scores = (float("nan"), float("nan"))
        if self.X_val is not None:
            pred = decode_predictions(kmv(kernel, self.X_val, Z, alpha) + c, self.enc)
            val = prediction_error(pred, self.y_val, self.enc.task)
            if vm is not None:
                self.last_scores = self._scores(kernel, Z, vm, pred)
        return train, val

    def _scores(self, kernel, Z, vm, pred):
        """NLPD and 95% coverage of the predictions ``pred`` (user units) on the validation rows."""
        from .. import metrics
        from ..posterior import latent_variance

        xp = get_namespace(pred)
        var = latent_variance(kernel, self.X_val, Z, vm) + vm.noise_variance
        std = xp.sqrt(var)[:, None] * xp.asarray(np.asarray(self.enc.y_scale, dtype=np.float64))
        mean = pred.reshape(std.shape)
        y = to_namespace(self.y_val, xp, xp.float64).reshape(std.shape)
        return metrics.nlpd(y, mean, std), metrics.coverage(y, mean, std, level=0.95)
