r"""The inputs of :func:`nyhopt.tune` standardized at the door (``standardize=True``, the default).

The columns of the ``X`` the caller passed (all its rows, before any
validation split) give the means :math:`\mu_j` and standard deviations
:math:`\sigma_j` (1 where a column is constant, which is then only
centered; overflow-free, :mod:`nyhopt.models._scaling`).  The tuning runs on

.. math::  \tilde x = (x - \mu) / \sigma ,

validation rows given as ``(X_val, y_val)`` are standardized with the same
statistics, and initial ``centers`` given as an array are taken in the
standardized coordinates (a warning says so when they look like rows of ``X``
in its own units).  The returned model keeps :math:`(\mu, \sigma)` as
``input_mean_`` and ``input_scale_`` and predicts from raw inputs:
:math:`f(x) = \tilde f\big((x - \mu)/\sigma\big)`.

The tuned hyperparameters stay in the standardized coordinates.  In the units
of ``X`` a center :math:`\tilde z` is the point :math:`\mu + \sigma\tilde z`,
and a lengthscale :math:`\tilde\ell_j` is :math:`\sigma_j\tilde\ell_j`: every
kernel here depends on :math:`(\tilde x_j - \tilde x'_j)/\tilde\ell_j =
(x_j - x'_j)/(\sigma_j\tilde\ell_j)`, so with ``ard=False`` the one tuned
lengthscale is a different one per feature in raw units
(``docs/tuning.md``, "Targets").

Dask arrays: the statistics are two reductions on the cluster (the columns'
largest magnitudes, then the moments of the columns scaled by powers of two)
and ``X`` is standardized lazily, block by block.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..backend import as_native, get_namespace, to_numpy
from ..errors import warn_user
from ..inputs._frame_errors import frame_errors
from ..inputs._validation import check_matrix
from ..models._estimator_params import check_feature_names_arg
from ..models._scaling import apply_standardization, pow2_scale, standardization, standardize_lazily
from ..placement import on_cluster
from ._setup import check_dtype

__all__ = ["standardize_inputs", "with_input_scaling", "warn_if_centers_in_data_units", "dask_statistics"]


def standardize_inputs(standardize, X, validation, centers, feature_names, dtype, client):
    """``(X, validation, feature_names, scaling)`` for the rest of :func:`nyhopt.tune`.

    Parameters
    ----------
    standardize : bool or "scale"
        False: everything is returned as given and ``scaling`` is None;
        True or ``"scale"``: standardized.
    X, validation, centers, feature_names, dtype, client
        The arguments of :func:`nyhopt.tune` (not modified).

    Returns
    -------
    X : array
        The standardized copy (NumPy or CuPy in the checked dtype; a lazy
        dask array for a dask ``X``).
    validation
        ``(X_val, y_val)`` with ``X_val`` standardized; any other value as given.
    feature_names : numpy.ndarray or None
        The names of a DataFrame ``X`` (or the given ones), which the
        standardized array no longer carries.
    scaling : tuple (mean, scale) of float64 NumPy arrays (d,), or None

    Raises
    ------
    TypeError
        ``standardize`` is not a bool or ``"scale"``.
    ValueError
        ``X`` or ``validation X`` is not a finite numeric matrix (the
        message names it).
    """
    if isinstance(standardize, str) and standardize == "scale":
        standardize = True
    if not isinstance(standardize, (bool, np.bool_)):
        raise TypeError(f"standardize must be True, False or \"scale\", got {standardize!r}")
    if not standardize:
        return X, validation, feature_names, None
    names = check_feature_names_arg(feature_names, X)
    pair = isinstance(validation, (tuple, list)) and len(validation) == 2
    if on_cluster(X):
        from ..distributed.sharded import resolve_client  # dask is optional: imported only for dask arrays

        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
        mean, scale = dask_statistics(X, lambda arrays: resolve_client(client).compute(arrays, sync=True))
        if pair and on_cluster(validation[0]):
            validation = (standardize_lazily(validation[0], mean, scale), validation[1])
        return standardize_lazily(X, mean, scale), validation, names, (mean, scale)
    frame = X
    X = as_native(X, "X")
    xp = get_namespace(X)
    with frame_errors(frame, "X"):
        X = check_matrix(X, "X", xp, dtype=check_dtype(dtype), min_rows=2)
    X = xp.ascontiguousarray(X)  # a DataFrame's columns (Fortran order) sum in another order: the same statistics
    mean, scale = standardization(X)
    Xs = apply_standardization(X, mean, scale)
    warn_if_centers_in_data_units(centers, Xs, mean, scale)
    if pair:
        X_val = as_native(validation[0], "validation X")
        get_namespace(X, X_val)
        with frame_errors(validation[0], "validation X"):
            X_val = check_matrix(X_val, "validation X", xp, dtype=X.dtype, n_features=X.shape[1])
        validation = (apply_standardization(X_val, mean, scale), validation[1])
    return Xs, validation, names, (mean, scale)


def with_input_scaling(result, scaling):
    """``result`` (a :class:`~nyhopt.TuneResult`) whose model standardizes its inputs with ``scaling``.

    ``scaling`` None leaves the model as it is (``input_mean_`` and
    ``input_scale_`` None, as after ``fit``).
    """
    if scaling is not None:
        result.model.input_mean_, result.model.input_scale_ = (np.array(s, dtype=np.float64) for s in scaling)
    return result


def dask_statistics(X, compute):
    """Column means and scales of a dask ``X`` (float64 NumPy; a zero std becomes 1), overflow-free.

    ``compute`` maps a list of dask arrays to their values (a client's
    ``compute(..., sync=True)``).  The columns are divided by powers of two
    near their largest magnitudes first, as :func:`nyhopt.models._scaling.column_mean_std`.

    Raises
    ------
    ValueError
        ``X`` holds NaN or infinity.
    """
    X64 = X.astype(np.float64)
    (amax,) = compute([abs(X64).max(axis=0)])
    amax = to_numpy(amax, dtype=np.float64)
    if not np.all(np.isfinite(amax)):
        raise ValueError("X contains NaN or infinity")
    s = pow2_scale(amax)
    U = standardize_lazily(X64, np.zeros_like(s), s)  # exact: a division by powers of two
    mean, std = (to_numpy(v, dtype=np.float64) * s for v in compute([U.mean(axis=0), U.std(axis=0)]))
    return mean, np.where(std > 0, std, 1.0)


def warn_if_centers_in_data_units(centers, Xs, mean, scale):
    """Warn when initial ``centers`` lie in the box of ``X`` in its own units but mostly outside the standardized one.

    With ``standardize=True`` initial centers are in standardized coordinates;
    rows of ``X`` given as they are would start far from the data, silently.
    Data that are nearly standardized already never warn (both boxes agree).
    """
    if centers is None or isinstance(centers, (numbers.Number, str)):
        return
    try:
        C = to_numpy(as_native(centers, "centers"), dtype=np.float64)
    except (TypeError, ValueError):  # tune reports centers that are not numbers
        return
    if C.ndim != 2 or C.shape[1] != Xs.shape[1] or not np.all(np.isfinite(C)):
        return
    lo = to_numpy(Xs.min(axis=0), dtype=np.float64) - 1.0  # a margin of one standard deviation
    hi = to_numpy(Xs.max(axis=0), dtype=np.float64) + 1.0

    def inside(Z):
        return float(np.mean(np.all((Z >= lo) & (Z <= hi), axis=1))) if Z.shape[0] else 1.0

    with np.errstate(all="ignore"):
        as_data_units = (C - mean) / scale
    if inside(C) < 0.5 and inside(as_data_units) >= 0.9:
        warn_user(
            "centers: most initial centers lie outside the standardized data, but inside X in its own units; "
            "with standardize=True they are taken in standardized coordinates: pass "
            "(centers - X.mean(axis=0)) / X.std(axis=0), or standardize=False",
            UserWarning)
