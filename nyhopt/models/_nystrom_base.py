r"""What the two Nystrom estimators share: their parameters, the fit and the spread of a prediction.

:class:`NystromBase` solves for the coefficients of :math:`f(x) = k(x, Z)\,\alpha`
(``docs/solvers.md``) with the Falkon or the direct solver, fits the
variance model of the error bars beside them (``docs/uncertainty.md``) and
profiles the unpenalized constant of ``fit_intercept``; a model that
:func:`nyhopt.tune` fitted on standardized inputs keeps their scaling
(``input_mean_``, ``input_scale_``) and applies it to every ``X`` it is
given (:meth:`NystromBase._inputs`).  The public classes
are :class:`nyhopt.NystromKRR` and :class:`nyhopt.NystromKRRClassifier`.
"""
from __future__ import annotations

import numpy as np

from ..backend import get_namespace
from ..errors import warn_user
from ..inputs._door import trust
from ..inputs._estimator_input import check_X as _check_X
from ..inputs._validation import check_positive, check_real
from ..kernels import GaussianKernel, Kernel, make_kernel
from ..ops import kmv
from ..placement import on_cluster
from ..posterior import direct_fit, fit_variance
from ..posterior._predictive import set_variance, spread_columns, uncertainty
from ..solvers import ConvergenceWarning, direct_solve, falkon_solve
from ._centers import select_centers
from ._estimator_params import EstimatorMixin
from ._fitted import check_fitted as _check_fitted
from ._intercept import profile_intercept, with_ones
from ._scaling import apply_standardization, pow2_scale, standardize_lazily
from ._warp import apply_warp, warp_lazily

__all__ = ["NystromBase"]

_SOLVERS = ("falkon", "direct")


def _scaled(amplitude, y_pow2):
    """``amplitude * y_pow2**2`` (targets solved as ``y / y_pow2``), or None when it overflows."""
    try:
        a = amplitude * y_pow2 ** 2
    except OverflowError:
        return None
    return a if np.isfinite(a) else None


class NystromBase(EstimatorMixin):
    """Parameters, fitting and prediction shared by the two estimators."""

    def __init__(self, kernel=None, penalty=1e-6, centers=100, solver="falkon", maxiter=100, tol=1e-7,
                 random_state=None, fit_intercept=False, predictive_variance=True, amplitude=None):
        self.kernel = kernel
        self.penalty = penalty
        self.centers = centers
        self.solver = solver
        self.maxiter = maxiter
        self.tol = tol
        self.random_state = random_state
        self.predictive_variance = predictive_variance
        self.amplitude = amplitude
        self.fit_intercept = fit_intercept

    def __sklearn_is_fitted__(self):
        return hasattr(self, "alpha_")

    # -- fitting ----------------------------------------------------------------------------------
    def _check_params(self):
        if isinstance(self.solver, str) and self.solver in _SOLVERS:
            solver = self.solver
        else:
            raise ValueError(f"solver must be one of {_SOLVERS}, got {self.solver!r}")
        penalty = check_positive(self.penalty, "penalty")
        tol = check_real(self.tol, "tol", low=0.0)
        mi = self.maxiter
        if isinstance(mi, bool) or not isinstance(mi, (int, np.integer)) or mi < 1:
            raise ValueError(f"maxiter must be an integer >= 1, got {mi!r}")
        for name in ("predictive_variance", "normalize_y"):  # the classifier has no normalize_y
            value = getattr(self, name, False)
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {value!r}")
        if self.amplitude is not None:
            check_positive(self.amplitude, "amplitude")
        if self.kernel is None:
            kernel = GaussianKernel(1.0)
        elif isinstance(self.kernel, str):
            kernel = make_kernel(self.kernel)
        elif isinstance(self.kernel, Kernel):
            ell = self.kernel.lengthscale
            kernel = make_kernel(self.kernel).with_lengthscale(ell.copy() if hasattr(ell, "copy") else ell)
        else:
            raise TypeError(f"kernel must be None, a kernel name or a Kernel instance, got {self.kernel!r}")
        return solver, penalty, tol, int(mi), kernel

    def _fit_targets(self, X, Y, xp, intercept=False):
        """Fit on validated ``X`` (n, d) and float targets ``Y`` (n, p); sets the fitted attributes.

        ``intercept``: the last column of ``Y`` is the constant of ``fit_intercept`` (the
        variance model's amplitude is then that of the other columns, constants profiled).
        """
        solver, penalty, tol, maxiter, kernel = self._check_params()
        kernel.lengthscale_array(X.shape[1])  # validates the lengthscale against the features
        Z = select_centers(X, self.centers, self.random_state, xp)
        # The system is linear in Y: solve for Y / 2^e (exact) so that huge targets cannot
        # overflow the solvers' sums of squares, and scale alpha back.
        y_pow2 = float(pow2_scale(float(xp.max(xp.abs(Y))) if Y.size else 0.0))
        if y_pow2 != 1.0:
            Y = Y / Y.dtype.type(y_pow2)
        variance, no_variance = None, None
        if solver == "direct" and self.predictive_variance:  # the direct solve is the variance model's pass
            alpha, variance = direct_fit(kernel, X, Z, Y, penalty, intercept=intercept)
            record, converged = None, True
        elif solver == "direct":
            alpha = direct_solve(kernel, X, Z, Y, penalty)
            record, converged = None, True
        else:
            record = falkon_solve(kernel, X, Z, Y, penalty, tol=tol, maxiter=maxiter, warn=False)
            alpha, converged = record.alpha, record.cg.converged
            if not converged:
                warn_user(
                    f"{type(self).__name__}: Falkon CG stopped after {record.cg.iterations} iterations "
                    f"with relative residual {record.cg.residual_norms[-1]:.3g} above tol={tol:.3g}; "
                    "increase maxiter (see converged_ and solve_)",
                    ConvergenceWarning
                )
        if self.predictive_variance and variance is None:  # one more pass over the data after Falkon
            variance = fit_variance(kernel, X, Z, Y, penalty, intercept=intercept)
        if y_pow2 != 1.0:
            alpha = alpha * y_pow2
        if variance is not None:  # the amplitude in the units of the targets (Y was divided by y_pow2)
            a = float(self.amplitude) if self.amplitude is not None else _scaled(variance.amplitude, y_pow2)
            variance = None if a is None else variance._replace(amplitude=a)
            if variance is None:
                no_variance = "the noise variance of these targets overflows float64; scale y (normalize_y=True)"
        if not bool(xp.all(xp.isfinite(alpha))):
            raise ValueError(
                f"{type(self).__name__}.fit: the coefficients are not finite (overflow or a failed solve); "
                "scale the targets y (normalize_y=True), or use a larger penalty"
            )
        self.kernel_ = kernel
        self.centers_ = Z
        self.solve_ = record
        self.converged_ = converged
        self.n_features_in_ = X.shape[1]
        set_variance(self, variance, no_variance)
        return alpha

    def _fit_with_intercept(self, X, Y, xp):
        """``(alpha, c)``: coefficients and the unpenalized constant (float64 NumPy (p,), zeros without it).

        With ``fit_intercept`` the system is solved for ``[Y | 1]`` and the
        constant profiled in closed form (:func:`nyhopt.models._intercept.profile_intercept`).
        """
        fi = self.fit_intercept
        if not isinstance(fi, (bool, np.bool_)):
            raise TypeError(f"fit_intercept must be True or False, got {fi!r}")
        n, p = Y.shape
        if not fi:
            return self._fit_targets(X, Y, xp), np.zeros(p)
        Y1 = with_ones(Y, xp)
        trust(Y1)  # the checked targets beside a column of ones
        alpha = self._fit_targets(X, Y1, xp, intercept=True)
        try:
            return profile_intercept(self.kernel_, X, self.centers_, Y, alpha, self.penalty)
        except ValueError as exc:
            raise ValueError(f"{type(self).__name__}.fit: {exc} (fit_intercept=False)") from None

    def _inputs(self, X):
        """Validated ``X`` in the coordinates of the fit, and its namespace.

        A model that keeps an input scaling (``input_mean_``, ``input_scale_``,
        set by :func:`nyhopt.tune`) standardizes ``X`` with it:
        :math:`(x - \\mu)/\\sigma`, then warps the features of
        ``input_warp_`` where it keeps one (:mod:`nyhopt.models._warp`); one
        fitted by ``fit`` takes ``X`` as it is.
        """
        X, xp = _check_X(self, X, reset=False)
        mean = getattr(self, "input_mean_", None)
        if mean is not None:
            X = apply_warp(apply_standardization(X, mean, self.input_scale_), getattr(self, "input_warp_", None),
                           inplace=True)
        return X, xp

    def _dask_inputs(self, X):
        """A dask ``X`` in the coordinates of the fit (lazy; see :meth:`_inputs`)."""
        mean = getattr(self, "input_mean_", None)
        if mean is None or X.ndim != 2 or X.shape[1] != mean.shape[0]:  # a wrong width: refused by the caller
            return X
        return warp_lazily(standardize_lazily(X, mean, self.input_scale_), getattr(self, "input_warp_", None))

    def _decision(self, X):
        _check_fitted(self)
        X, xp = self._inputs(X)
        get_namespace(X, self.centers_)  # clear error when host/device differ from fit
        return kmv(self.kernel_, X, self.centers_, self.alpha_)

    def _spread(self, X, cov, include_noise):
        """Standard deviation (or covariance) of the prediction at ``X``, in the units of ``y``."""
        _check_fitted(self)
        if on_cluster(X):
            if cov:
                raise ValueError("return_cov is not available for dask arrays (it is n x n); use return_std")
            from ..distributed.estimator import std_dask

            return std_dask(self, self._dask_inputs(X), include_noise)
        X, xp = self._inputs(X)
        get_namespace(X, self.centers_)
        return spread_columns(uncertainty(self, X, cov, include_noise), self, cov, X.dtype)
