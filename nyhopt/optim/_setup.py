"""The stages of a tuning run that every placement shares: argument checks, the start, the objective.

Documented internal API of :func:`nyhopt.tune` and its Dask setup
(:mod:`nyhopt.distributed.tune`): :func:`check_dtype`,
:func:`split_validation`, :func:`initial_params`,
:func:`default_noise_variance`, :func:`build_objective`.
"""
from __future__ import annotations

import numbers
import warnings

import numpy as np

from ..models._centers import fit_centers
from ..inputs._validation import check_lengthscale, check_matrix
from ..kernels import Kernel
from ..params import Params
from ..placement import driver_array
from ._init import initial_centers, median_heuristic

__all__ = ["check_dtype", "split_validation", "initial_params", "default_noise_variance", "build_objective",
           "final_model"]


def check_dtype(dtype):
    """``dtype`` of :func:`~nyhopt.tune` checked: None, float32 or float64 (a ``numpy.dtype``)."""
    if dtype is None:
        return None
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32, float64 or None, got {dtype!r}")
    return dt


def split_validation(X, y, fraction, rng, xp):
    """Random split of (X, y): the last ``fraction`` of a permutation is held out."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"validation must be a fraction in (0, 1) or a tuple (X_val, y_val), got {fraction!r}")
    n = X.shape[0]
    n_val = int(round(fraction * n))
    if n_val < 1 or n - n_val < 2:
        raise ValueError(f"validation={fraction!r} leaves too few rows for training or validation (n = {n})")
    perm = rng.permutation(n)
    tr, va = np.sort(perm[: n - n_val]), np.sort(perm[n - n_val:])
    tr_i, va_i = xp.asarray(tr), xp.asarray(va)
    y_arr = y if hasattr(y, "shape") else np.asarray(y)
    return X[tr_i], _take(y_arr, tr, tr_i), X[va_i], _take(y_arr, va, va_i)


def _take(y, host_idx, dev_idx):
    return y[dev_idx] if hasattr(y, "get") else np.asarray(y)[host_idx]


def initial_params(X, centers, penalty, lengthscale, kernel, ard, rng, xp, client=None):
    """The starting :class:`~nyhopt.Params` of a tuning run (penalty ``1/n``, median-heuristic lengthscales,
    centers drawn from the rows by ``rng``, unless given); see :func:`nyhopt.tune`."""
    # For data on a cluster (xp is NumPy): rows are gathered by index and the centers live on the host.
    n, d = X.shape
    lam = 1.0 / n if penalty is None else penalty
    if lengthscale is None and isinstance(kernel, Kernel):
        lengthscale = kernel.lengthscale
    if lengthscale is None:
        ell = np.array([median_heuristic(X, random_state=rng, client=client)])
    else:
        ell = check_lengthscale(lengthscale)
        if ell.size not in (1, d):
            raise ValueError(f"lengthscale has {ell.size} entries but X has {d} features")
    if ard and ell.size == 1:
        ell = np.full(d, ell[0])
    elif not ard and ell.size != 1:
        raise ValueError("ard=False means one lengthscale shared by all features; give a scalar lengthscale")
    if isinstance(centers, numbers.Integral) and not isinstance(centers, bool):
        Z = driver_array(X, initial_centers(X, fit_centers(int(centers), n), rng, client=client))
    elif isinstance(centers, (bool, np.bool_, str, float)) or centers is None:
        raise TypeError(f"centers must be an int or an array of shape (m, {d}), got {centers!r}")
    else:
        centers = driver_array(X, centers)  # TypeError when host and device are mixed
        Z = check_matrix(centers, "centers", xp, dtype=np.float64, n_features=d)
        if Z.shape[0] > n:
            raise ValueError(f"centers has {Z.shape[0]} rows, more than the {n} training rows")
    return Params.from_natural(lam, ell, Z)


def default_noise_variance(enc) -> float:
    """The noise-variance estimate :math:`s^2` that :func:`tune` gives the objective.

    1 (the objectives' default) for regression, whose targets are standardized,
    and for two classes (-1/+1 labels of variance at most 1).  For ``K > 2``
    classes, one-hot columns, :math:`1/K`: the authors' released
    implementation counts the effective dimension once for all ``K`` outputs,
    which is :math:`s^2 = 1/K` in the per-output normalization of the
    objectives, and a one-hot column's variance, :math:`(1/K)(1 - 1/K)`, is
    below :math:`1/K` (so :math:`s^2 = 1` would assume noise ten times the
    signal for ten classes).
    """
    if enc.task == "classification" and enc.Y.shape[1] > 1:
        return 1.0 / enc.Y.shape[1]
    return 1.0


def build_objective(objective, X, enc, kernel, random_state, options):
    """The objective of a tuning run on the encoded targets ``enc.Y`` (the seed and ``s^2`` as defaults)."""
    from ..objectives import make_objective

    options = dict(options or {})
    options.setdefault("random_state", random_state)
    options.setdefault("noise_variance", default_noise_variance(enc))
    return make_objective(objective, X, enc.Y, kernel=kernel, **options)


def final_model(task, kernel, params, X, y, dtype, solver, client=None, fit_intercept=False, amplitude=None):
    """The model of a tuning run: ``NystromKRR`` (or the classifier) fitted at the tuned ``params``.

    ``fit_intercept``: the objective's constant mean; ``amplitude``: the one the
    objective tuned, else SGPR's closed form (None).  ``client``: the Dask
    client of cluster data.
    """
    from ..estimator import NystromKRR, NystromKRRClassifier

    kw = dict(kernel=kernel.with_lengthscale(params.lengthscale.copy()), penalty=params.penalty,
              centers=params.centers.astype(dtype, copy=True), solver=solver, fit_intercept=fit_intercept,
              amplitude=amplitude)
    if task == "classification":
        model = NystromKRRClassifier(**kw)
    else:
        model = NystromKRR(normalize_y=True, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # column-vector y etc.
        return model.fit(X, y) if client is None else model.fit(X, y, client=client)
