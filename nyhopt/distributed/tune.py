r"""What :func:`nyhopt.tune` does differently for dask arrays: its setup, error tracking, standardization.

:func:`setup_dask` mirrors the single-process setup of :func:`nyhopt.tune`
step for step, with the same draws from the same generator, so that a seed
gives the same start on both paths, but nothing of size ``n`` reaches the
driver:

* the regression targets are standardized with moments from a Dask reduction
  (the encoded targets stay a lazy dask array, persisted by the objective);
* the centers are the rows of a seeded random subset, gathered by index
  (``m x d``); the median heuristic uses a gathered subsample of rows;
* the objective is :class:`~nyhopt.objectives.stoch_prop.StochasticProp` on a
  :class:`~nyhopt.distributed.sharded.ShardedOperator`;
  the final model is fitted by the distributed Falkon solver.

Classification targets and ``validation`` as a fraction are refused (a
label encoding and a random row split of a sharded array are not built).
"""
from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import dask.array as da
import numpy as np

from ..inputs._door import trust
from ..backend import to_numpy
from ..kernels import Kernel, make_kernel
from ..models._warp import warp_lazily
from ..params import Params
from ..optim._targets import TargetEncoding
from ..optim._tracking import TRACK_EVERY
from ..optim._setup import build_objective, initial_params
from ._detect import is_dask_array, refuse_dask_objective
from . import _blocks
from .estimator import _predict_block, intercept_from_stats
from .falkon import falkon_solve_sharded
from .sharded import ShardedData, _check_dask_matrix, _check_dask_targets, resolve_client

__all__ = ["DaskSetup", "setup_dask", "DaskErrorTracker", "dask_standardization", "apply_dask_standardization",
           "fit_hyperopt_dask", "transform_dask"]


class DaskSetup(NamedTuple):
    """What the tuning loop needs, built from dask arrays (see :func:`setup_dask`)."""

    X: object
    y: object
    X_val: object
    task: str
    enc: TargetEncoding
    params: Params
    template: Kernel
    objective: object
    solver: str
    tracker: object
    client: object


def _as_float_dask(X, dtype):
    if dtype is None:
        dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    return X if X.dtype == dtype else X.astype(dtype), np.dtype(dtype)


def _resolve_task(y, task, client):
    """``"regression"``; classification (asked, or what ``task="auto"`` could mean) is refused."""
    if task == "classification":
        raise ValueError("task='classification' is not available for dask arrays yet; "
                         "tune on dask arrays does regression (task='regression')")
    if task == "regression":
        return task
    ambiguous = y.ndim == 1 and (y.dtype.kind in "biu" or (
        y.dtype.kind == "f" and bool(client.compute(da.all(y == da.round(y))).result())))
    if ambiguous:
        raise ValueError("y holds integer values: task='auto' cannot tell regression from classification "
                         "without collecting the labels; pass task='regression' (classification on dask "
                         "arrays is not built yet)")
    return "regression"


def _encode(y, dtype, client):
    """Standardized targets (a lazy dask array, n x p) with moments from one Dask reduction."""
    Y = (y[:, None] if y.ndim == 1 else y).astype(np.float64)
    mean, var = (to_numpy(v, dtype=np.float64) for v in client.compute([Y.mean(axis=0), Y.var(axis=0)], sync=True))
    std = np.sqrt(var)
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(std))):
        raise ValueError("y contains NaN or infinity (or values whose variance overflows float64)")
    scale = np.where(std > 0, std, 1.0)
    return TargetEncoding("regression", _standardized(Y, mean, scale, dtype), y.ndim == 1, mean, scale, None)


def _standardized(A, mean, scale, dtype):
    """``(A - mean) / scale`` in ``dtype``, lazily, on the chunks' device (host ``mean``, ``scale``)."""
    return A.map_blocks(_blocks.standardize_columns, mean, scale, np.dtype(dtype), dtype=dtype,
                        meta=A._meta.astype(dtype))


def _validation(validation, d, dtype):
    if validation is None:
        return None, None
    if isinstance(validation, numbers.Real) and not isinstance(validation, bool):
        raise ValueError("validation as a fraction is not available for dask arrays (a random row split "
                         "of sharded data is not built); pass validation=(X_val, y_val) as dask arrays")
    if not (isinstance(validation, (tuple, list)) and len(validation) == 2):
        raise TypeError("validation must be None or a tuple (X_val, y_val) of dask arrays")
    X_val, y_val = validation
    if not is_dask_array(X_val):
        raise TypeError(f"validation X must be a dask array like X, got {type(X_val).__name__}")
    _check_dask_matrix(X_val)
    if X_val.shape[1] != d:
        raise ValueError(f"validation X has {X_val.shape[1]} features but X has {d}")
    y_val = _check_dask_targets(y_val, X_val)
    return _as_float_dask(X_val, dtype)[0], y_val




def setup_dask(X, y, *, objective, centers, penalty, lengthscale, kernel, ard, rng, validation, task, dtype,
               solver, objective_options, track_errors, client):
    """The setup of :func:`nyhopt.tune` for dask arrays (the loop is shared).

    Raises
    ------
    ValueError, TypeError
        Bad input (named), an exact objective, ``solver="direct"``,
        classification, ``validation`` as a fraction, a closed ``client``.
    """
    refuse_dask_objective(objective)  # the exact objectives raise, naming "stoch-prop"
    client = resolve_client(client)
    if solver not in ("auto", "falkon"):
        raise ValueError(f"solver={solver!r} does not take dask arrays (it forms n x m matrices on one "
                         "machine); use solver='falkon' or 'auto'")
    if not is_dask_array(X):
        raise TypeError("y is a dask array but X is not; pass X as a dask array too")
    _check_dask_matrix(X)
    if X.shape[0] < 2:
        raise ValueError(f"X has n_samples = {X.shape[0]}; tuning needs at least 2 samples")
    y = _check_dask_targets(y, X)
    X, dtype = _as_float_dask(X, dtype)
    task = _resolve_task(y, task, client)
    X_val, y_val = _validation(validation, X.shape[1], dtype)
    enc = _encode(y, dtype, client)
    params = initial_params(X, centers, penalty, lengthscale, kernel, ard, rng, np, client=client)
    template = make_kernel(kernel, params.lengthscale)
    obj_seed = int(rng.integers(0, 2**31 - 1))
    options = dict(objective_options or {})
    options.setdefault("client", client)
    obj = build_objective(objective, X, enc, template, obj_seed, options)
    trust(X)  # its row blocks were checked where the objective placed them: the final fit's placement trusts them
    if track_errors is None:
        track_errors = X_val is not None
    tracker = None
    if track_errors:
        tracker = DaskErrorTracker(obj.data, X_val, y_val, enc, template, dtype,
                                   intercept=getattr(obj, "mean", "zero") == "constant")
    return DaskSetup(X, y, X_val, task, enc, params, template, obj, "falkon", tracker, client)


class DaskErrorTracker:
    r"""Train and validation RMSE of the model at given params, on the cluster.

    The coefficients are solved by the distributed Falkon (tol 1e-7, 100
    iterations, as the single-process tracker) on the objective's persisted
    blocks, whose targets are ``[R | Y]``: the probe columns are solved too and
    ignored.  Errors are reductions over the workers' blocks (the training
    error is one pass, run again like the others if a worker is lost).  With
    ``intercept`` (an objective with ``mean="constant"``, targets
    ``[R | Y | 1]``) the model is that of the fit with an intercept: one more
    reduction gives the constant and the training error
    :math:`\|r_y - c\,r_1\|^2` from the residuals of ``Y`` and of the ones.
    """

    def __init__(self, data: ShardedData, X_val, y_val, enc, kernel, dtype, intercept=False):
        self.data, self.X_val, self.y_val, self.enc = data, X_val, y_val, enc
        self.kernel, self.dtype, self.intercept = kernel, dtype, bool(intercept)

    def due(self, params, epoch) -> bool:
        """Every ``TRACK_EVERY``-th epoch: each is a distributed solve (as the in-memory ``stoch-prop``'s)."""
        return epoch % TRACK_EVERY == 0

    def _rmse(self, X, y, alpha, kernel, Z, c=0.0):
        scale = np.asarray(self.enc.y_scale, dtype=np.float64)
        args = (kernel, Z, alpha, np.asarray(self.enc.y_mean, dtype=np.float64) + scale * c, self.enc.y_scale)
        pred = X.map_blocks(_predict_block, *args, chunks=(X.chunks[0], (alpha.shape[1],)), dtype=self.dtype)
        Y = y[:, None] if y.ndim == 1 else y
        mse = ((pred.astype(np.float64) - Y.astype(np.float64)) ** 2).mean()
        return math.sqrt(float(self.data.client.compute(mse).result()))

    def __call__(self, params):
        """``(train_error, validation_error)``: RMSE in the targets' units; NaN without validation data."""
        kernel = self.kernel.with_lengthscale(params.lengthscale)
        Z = np.asarray(params.centers, dtype=self.dtype)
        res = falkon_solve_sharded(kernel, self.data, Z, params.penalty, tol=1e-7, maxiter=100, warn=False)
        p = self.enc.y_mean.shape[0]
        shared = self.data.broadcast((kernel, Z))
        c = 0.0
        if self.intercept:  # [R | Y | 1]: the ones come last
            alpha = res.alpha[:, -p - 1:]
            s = self.data.reduce(_blocks.block_intercept_stats, shared, res.alpha)[0][-p - 1:]  # r_w^T r_1
            sq = self.data.reduce(_blocks.block_sq_residuals, shared, alpha)[0][:p]  # r_y^T r_y
            alpha, c = intercept_from_stats(s[:p], s[p], alpha[:, :p], alpha[:, p], kernel, Z, self.data.n,
                                            params.penalty)
            sq = sq - 2.0 * c * s[:p] + c * c * s[p]
        else:
            alpha = res.alpha[:, -p:]  # the target columns (the probes come first)
            sq = self.data.reduce(_blocks.block_sq_residuals, shared, alpha)[0]
        scale2 = np.asarray(self.enc.y_scale, dtype=np.float64) ** 2
        train = math.sqrt(float(np.sum(sq * scale2)) / (self.data.n * p))
        val = math.nan if self.X_val is None else self._rmse(self.X_val, self.y_val, alpha, kernel, Z, c)
        return train, val


def dask_standardization(X, client=None):
    """Column means and scales of a dask ``X`` (float64 NumPy; a zero std becomes 1), by one reduction."""
    client = resolve_client(client)
    _check_dask_matrix(X)
    X64 = X.astype(np.float64)
    mean, var = (to_numpy(v, dtype=np.float64) for v in client.compute([X64.mean(axis=0), X64.var(axis=0)], sync=True))
    std = np.sqrt(var)
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(std))):
        raise ValueError("X contains NaN or infinity (or values whose variance overflows float64)")
    return mean, np.where(std > 0, std, 1.0)


def apply_dask_standardization(X, mean, scale):
    """``(X - mean) / scale`` in float64, back in the dtype of ``X`` (a lazy dask array)."""
    dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    return _standardized(X, np.asarray(mean, dtype=np.float64), np.asarray(scale, dtype=np.float64), dtype)


def fit_hyperopt_dask(est, X, y, validation=None, callback=None, *, tune):
    """:meth:`nyhopt.HyperoptKRR.fit` on dask arrays (objective "stoch-prop", regression); returns ``est``.

    ``tune`` is :func:`nyhopt.tune` (given by the caller: the tuning loop is above this module).
    """
    if est._task != "regression":
        raise ValueError(f"{type(est).__name__} does not take dask arrays yet; HyperoptKRR (regression) does")
    if not is_dask_array(X):
        raise TypeError("y is a dask array but X is not; pass X as a dask array too")
    client = resolve_client(None)
    _check_dask_matrix(X)
    if est.standardize:
        mean, scale = dask_standardization(X, client)
    else:
        mean, scale = np.zeros(X.shape[1]), np.ones(X.shape[1])
    prep = (lambda A: apply_dask_standardization(A, mean, scale)) if est.standardize else (lambda A: A)
    if validation is not None:
        if not (isinstance(validation, (tuple, list)) and len(validation) == 2):
            raise TypeError("validation must be a tuple (X_val, y_val)")
        if not is_dask_array(validation[0]):
            raise TypeError("validation X must be a dask array like X")
        val = (prep(validation[0]), validation[1])
    elif est.validation_fraction is not None:
        raise ValueError("validation_fraction is not available for dask arrays (a random row split of "
                         "sharded data is not built); pass validation=(X_val, y_val) to fit")
    else:
        val = None
    result = tune(
        prep(X), y, objective=est.objective, centers=est.centers, epochs=est.epochs, lr=est.lr,
        kernel=est.kernel, ard=est.ard, random_state=est.random_state, validation=val,
        progress=est.progress, penalty=est.penalty, lengthscale=est.lengthscale,
        freeze=est.freeze if est.freeze is not None else (), patience=est.patience,
        callback=callback, task="regression", dtype=est.dtype,
        objective_options=est.objective_options, solver=est.solver, record_terms=est.record_terms,
        client=client,
    )
    est._set_fitted(result, mean, scale, X.shape[1])
    if hasattr(est, "_check_feature_names"):
        est._check_feature_names(None, reset=True)  # a dask array has no feature names
    return est


def transform_dask(est, X):
    """A dask ``X`` in the coordinates a fitted :class:`~nyhopt.HyperoptKRR` was tuned in (lazy)."""
    _check_dask_matrix(X)
    if X.shape[1] != est.n_features_in_:
        raise ValueError(f"X has {X.shape[1]} features, but {type(est).__name__} is expecting "
                         f"{est.n_features_in_} features as input")
    if not est.standardize:
        return X
    return warp_lazily(apply_dask_standardization(X, est.x_mean_, est.x_scale_), getattr(est, "x_warp_", None))
