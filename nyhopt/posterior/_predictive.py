"""The estimators' side of the predictive variance: flags, fitted attributes, shapes and units.

The algebra is in :mod:`nyhopt.posterior`; this module turns its float64
variance of the fitted (standardized) targets into what ``predict`` returns:
the standard deviation or covariance in the units of ``y``, one column per
output, in the dtype and on the device of ``X``.
"""
from __future__ import annotations

import numpy as np

from ..backend import get_namespace
from . import check_variance_model, latent_covariance, latent_variance

__all__ = ["check_flags", "set_variance", "uncertainty", "spread_columns"]


def _check_bool(value, name):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_flags(return_std, return_cov, include_noise):
    """Validated ``(return_std, return_cov, include_noise)``; both returns at once is refused."""
    return_std = _check_bool(return_std, "return_std")
    return_cov = _check_bool(return_cov, "return_cov")
    include_noise = _check_bool(include_noise, "include_noise")
    if return_std and return_cov:
        raise ValueError("at most one of return_std and return_cov can be requested")
    return return_std, return_cov, include_noise


def set_variance(est, vm, reason=None):
    """Store a :class:`~nyhopt.posterior.VarianceModel` (or None, and why) and its amplitude and noise variance."""
    est.variance_model_ = vm
    est._no_variance_reason = reason
    est.amplitude_ = None if vm is None else float(vm.amplitude)
    est.noise_variance_ = None if vm is None else float(vm.noise_variance)


def scale_variance(est, factor):
    r"""Multiply a fitted model's predictive variance by ``factor`` > 0 (its mean is unchanged).

    Both parts of the variance, the latent :math:`a[\dots]` and the noise
    :math:`a n\lambda`, are proportional to the amplitude :math:`a`
    (:mod:`nyhopt.posterior`), so the factor multiplies :math:`a`.
    """
    vm = est.variance_model_
    set_variance(est, vm._replace(amplitude=float(vm.amplitude) * float(factor)),
                 getattr(est, "_no_variance_reason", None))


def uncertainty(est, X, cov, include_noise):
    """Variance (n,) or covariance (n, n) of the prediction in the fitted units, float64.

    ``X`` is validated, in the model's coordinates and on the model's device.
    """
    vm = getattr(est, "variance_model_", None)
    check_variance_model(vm, est.centers_.shape[0], f"this {type(est).__name__}",
                         getattr(est, "_no_variance_reason", None))
    xp = get_namespace(X)
    if cov:
        out = latent_covariance(est.kernel_, X, est.centers_, vm)
        if include_noise:
            idx = xp.arange(out.shape[0])
            out[idx, idx] += vm.noise_variance
        return out
    out = latent_variance(est.kernel_, X, est.centers_, vm)
    if include_noise:
        out += vm.noise_variance
    return out


def spread_columns(var, est, cov, dtype):
    """The standard deviation (``cov`` False) or covariance in the units of ``y``, one column per output.

    One output (``alpha_`` 1-D): shape (n,) or (n, n).  ``p`` outputs: (n, p)
    or (n, n, p), each column scaled by ``y_scale_`` (with ``normalize_y``).
    """
    xp = get_namespace(var)
    out = var if cov else xp.sqrt(var)
    alpha = est.alpha_
    scale = getattr(est, "y_scale_", None) if getattr(est, "normalize_y", False) else None
    if alpha.ndim == 1:
        if scale is not None:
            out = out * (float(scale[0]) ** (2 if cov else 1))
        return out.astype(dtype, copy=False)
    p = alpha.shape[1]
    s = xp.ones(p) if scale is None else xp.asarray(np.asarray(scale, dtype=np.float64))
    s = s ** 2 if cov else s
    return (out[..., None] * s).astype(dtype, copy=False)
