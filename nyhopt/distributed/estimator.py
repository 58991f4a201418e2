"""``NystromKRR.fit`` and ``predict`` on dask arrays (called by :mod:`nyhopt.estimator`).

``fit`` persists ``X`` and ``y`` on the workers by row blocks and solves with
Falkon, the CG loop on the driver (:mod:`nyhopt.distributed.falkon`); the
fitted attributes are NumPy arrays on the driver.  ``predict`` returns a dask
array computed block by block with ``map_blocks`` (NumPy or CuPy chunks, like
the input).
"""
from __future__ import annotations

import numpy as np

from .. import ops
from ..models._centers import select_centers
from ..inputs._validation import check_matrix
from ..backend import get_namespace, to_numpy
from ..models._fitted import as_intercept, check_fitted, intercept_of
from ..posterior._predictive import set_variance
from ..posterior import block_whitened, check_variance_model, latent_variance, variance_model
from ..solvers import jitter
from ..solvers.direct import kmm_upper
from . import _blocks
from ..solvers import ConvergenceWarning
from ._detect import is_dask_array
from .falkon import falkon_solve_sharded
from .sharded import ShardedData, _check_dask_matrix
from ..errors import warn_user

__all__ = ["fit_dask", "predict_dask", "std_dask"]


def fit_dask(est, X, y, client=None):
    """Fit a :class:`~nyhopt.NystromKRR` on dask arrays (solver "falkon" only); returns ``est``."""
    solver, penalty, tol, maxiter, kernel = est._check_params()
    if solver != "falkon":
        raise ValueError(
            f"solver={solver!r} does not take dask arrays (it forms n x m matrices on one machine); "
            "use solver='falkon'"
        )
    if not is_dask_array(X):
        raise TypeError("y is a dask array but X is not; pass X as a dask array too")
    if y is None:
        raise ValueError("y is None; this estimator requires y to be passed, but the target y is None")
    fit_intercept = getattr(est, "fit_intercept", False)
    if not isinstance(fit_intercept, (bool, np.bool_)):
        raise TypeError(f"fit_intercept must be True or False, got {fit_intercept!r}")
    data = ShardedData(X, y, client=client)
    c = np.zeros(data.p)
    try:
        kernel.lengthscale_array(data.d)
        Z = select_centers(X, est.centers, est.random_state, np)
        Z = to_numpy(Z.compute() if is_dask_array(Z) else Z)
        Z = check_matrix(Z, "centers", np, dtype=data.dtype, n_features=data.d)
        mean, scale = np.zeros(data.p), np.ones(data.p)
        if getattr(est, "normalize_y", False):
            mean, std = data.target_moments()
            scale = np.where(std > 0, std, 1.0)
            data = data.scale_targets(mean, scale)
        if fit_intercept:
            data = data.derive(_blocks.block_with_ones)
        record = falkon_solve_sharded(kernel, data, Z, penalty, tol=tol, maxiter=maxiter, warn=False)
        alpha = record.alpha
        if fit_intercept:
            alpha, c = _profile_intercept(data, kernel, Z, alpha, penalty)
        variance = _variance_pass(est, kernel, data, Z, penalty, fit_intercept) if est.predictive_variance else None
    finally:
        data.release()
    if not record.cg.converged:
        warn_user(
            f"{type(est).__name__}: Falkon CG stopped after {record.cg.iterations} iterations "
            f"with relative residual {record.cg.residual_norms[-1]:.3g} above tol={tol:.3g}; "
            "increase maxiter (see converged_ and solve_)",
            ConvergenceWarning
        )
    est.kernel_, est.centers_, est.solve_, est.converged_ = kernel, Z, record, record.cg.converged
    est.n_features_in_ = data.d
    if hasattr(est, "_check_feature_names"):
        est._check_feature_names(None, reset=True)  # a dask array has no feature names
    est.alpha_ = alpha[:, 0] if np.ndim(y) == 1 else alpha
    est.y_mean_, est.y_scale_ = mean, scale
    est.intercept_ = as_intercept(mean + scale * c, np.ndim(y) == 1)
    set_variance(est, variance)
    return est


def _variance_pass(est, kernel, data, Z, penalty, intercept=False):
    """The :class:`~nyhopt.posterior.VarianceModel` from one more pass over the sharded data.

    ``(kernel, Z, L^T)`` is broadcast once; each block returns its float64
    partial ``(S, AY, ||Y||^2)`` (``m x m``), summed by the data's reducer.
    """
    Lt = kmm_upper(kernel, Z, data.dtype, np)
    S, AY, yy, YtY = data.reduce(block_whitened, data.broadcast((kernel, Z, Lt)))
    return variance_model(0.5 * (S + S.T), AY, float(yy[0]), Lt.T, data.n, penalty, np,
                          amplitude=est.amplitude, YtY=YtY if intercept else None)


def _std_block(Xb, kernel, Z, vm, scale, include_noise):
    """Standard deviation of one block's predictions (float64 algebra, the block's dtype)."""
    xp = get_namespace(Xb)
    Xb = check_matrix(Xb, "X", xp)
    var = latent_variance(kernel, Xb, xp.asarray(Z, dtype=Xb.dtype), vm)
    if include_noise:
        var = var + vm.noise_variance
    std = xp.sqrt(var)
    if scale is None:
        return std.astype(Xb.dtype)
    return (std[:, None] * xp.asarray(scale)).astype(Xb.dtype)


def std_dask(est, X, include_noise):
    """Standard deviation of the predictions of a fitted model for a dask ``X``: a dask array.

    The variance model (two ``m x m`` factors) enters the graph once, as one
    delayed object that every block task depends on (Dask sends it once to
    each worker that runs a block).
    """
    import dask

    check_fitted(est)
    _check_dask_matrix(X)
    if X.shape[1] != est.n_features_in_:
        raise ValueError(
            f"X has {X.shape[1]} features, but {type(est).__name__} is expecting {est.n_features_in_} features as input"
        )
    vm = getattr(est, "variance_model_", None)
    check_variance_model(vm, est.centers_.shape[0], f"this {type(est).__name__}",
                         getattr(est, "_no_variance_reason", None))
    vm = vm._replace(L=to_numpy(vm.L), C=to_numpy(vm.C))
    dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    alpha = est.alpha_
    scale = None
    if alpha.ndim == 2:
        scale = np.asarray(est.y_scale_ if getattr(est, "normalize_y", False) else np.ones(alpha.shape[1]),
                           dtype=np.float64)
    elif getattr(est, "normalize_y", False):
        vm = vm._replace(amplitude=vm.amplitude * float(est.y_scale_[0]) ** 2)
    shared = dask.delayed(vm, pure=True)
    args = (est.kernel_, to_numpy(est.centers_), shared, scale, include_noise)
    meta = X._meta.astype(dtype)
    if scale is None:
        return X.map_blocks(_std_block, *args, drop_axis=1, dtype=dtype, meta=meta.reshape(0))
    return X.map_blocks(_std_block, *args, chunks=(X.chunks[0], (alpha.shape[1],)), dtype=dtype, meta=meta)


def _profile_intercept(data, kernel, Z, alpha, penalty):
    """``(alpha_c, c)`` from ``alpha`` of ``[Y | 1]`` (:func:`nyhopt.models._intercept.profile_intercept` on the blocks)."""
    p = alpha.shape[1] - 1
    s = data.reduce(_blocks.block_intercept_stats, data.broadcast((kernel, Z)), alpha)[0]  # R^T r_1
    return intercept_from_stats(s[:p], float(s[p]), alpha[:, :p], alpha[:, p], kernel, Z, data.n, penalty)


def intercept_from_stats(s_y, s_1, alpha_y, alpha_1, kernel, Z, n, penalty):
    r"""``(alpha_c, c)`` of the ridge fit with an intercept, from the solves of ``Y`` and of the ones.

    ``s_y`` (p,), ``s_1`` are :math:`r_y^Tr_1`, :math:`r_1^Tr_1` with
    :math:`r = w - K\alpha_w` (one reduction of
    :func:`~nyhopt.distributed._blocks.block_intercept_stats`); then
    :math:`c = (s_y + n\lambda\,\alpha_y^TK_{mm}\alpha_1)/\gamma`,
    :math:`\gamma = s_1 + n\lambda\,\alpha_1^TK_{mm}\alpha_1`, and
    :math:`\alpha_c = \alpha_y - \alpha_1c^T`.
    """
    Kmm = ops.kernel_matrix(kernel, Z).astype(np.float64)
    Kmm[np.arange(Kmm.shape[0]), np.arange(Kmm.shape[0])] += jitter(Z.dtype)
    nl = n * float(penalty)
    Ka1 = Kmm @ alpha_1
    gamma = float(s_1) + nl * float(alpha_1 @ Ka1)
    c = (np.asarray(s_y) + nl * (alpha_y.T @ Ka1)) / gamma
    if not (gamma > 0 and np.all(np.isfinite(c))):
        raise ValueError(f"the intercept is not determined (1^T (I - H) 1 = {gamma:.3g}); use a larger penalty "
                         "or fit_intercept=False")
    return alpha_y - alpha_1[:, None] @ c[None, :], c


def _predict_block(Xb, kernel, Z, alpha, mean, scale):  # mean: the intercept (None: f as it is)
    xp = get_namespace(Xb)
    Xb = check_matrix(Xb, "X", xp)
    f = ops.kmv(kernel, Xb, xp.asarray(Z, dtype=Xb.dtype), xp.asarray(alpha))
    if mean is None:
        return f
    if f.ndim == 1:
        return f * f.dtype.type(scale[0]) + f.dtype.type(mean[0])
    return f * xp.asarray(scale, dtype=f.dtype) + xp.asarray(mean, dtype=f.dtype)


def predict_dask(est, X):
    """Predictions of a fitted :class:`~nyhopt.NystromKRR` for a dask ``X``: a dask array."""
    check_fitted(est)
    _check_dask_matrix(X)
    if X.shape[1] != est.n_features_in_:
        raise ValueError(
            f"X has {X.shape[1]} features, but {type(est).__name__} is expecting {est.n_features_in_} features as input"
        )
    alpha = to_numpy(est.alpha_)
    dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    shift = intercept_of(est)
    norm = (shift, est.y_scale_) if getattr(est, "normalize_y", False) or np.any(shift) else (None, None)
    args = (est.kernel_, to_numpy(est.centers_), alpha, *norm)
    meta = X._meta.astype(dtype)  # an empty array of the chunks' type (NumPy or CuPy)
    if alpha.ndim == 1:
        return X.map_blocks(_predict_block, *args, drop_axis=1, dtype=dtype, meta=meta.reshape(0))
    return X.map_blocks(_predict_block, *args, chunks=(X.chunks[0], (alpha.shape[1],)), dtype=dtype, meta=meta)
