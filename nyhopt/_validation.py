"""Input checks shared by every public entry point.

Each check raises ``ValueError``/``TypeError`` whose message names the
argument, and never modifies what the user passed.
"""
from __future__ import annotations

import numbers

import numpy as np

__all__ = ["check_matrix", "check_targets", "check_lengthscale", "check_positive", "check_finite"]


def _is_float_dtype(dtype) -> bool:
    return np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.float64))


def check_finite(a, name: str, xp=np) -> None:
    """Raise ``ValueError`` if ``a`` holds NaN or infinity."""
    if not bool(xp.all(xp.isfinite(a))):
        raise ValueError(f"{name} contains NaN or infinity")


def check_matrix(a, name: str, xp=np, dtype=None, n_features: int | None = None, min_rows: int = 1):
    """Return ``a`` as a 2-D floating array of ``xp`` (float32 or float64).

    Integer and boolean input is converted to float64; float32/float64 keep
    their dtype unless ``dtype`` is given.  No copy is made when none is needed.

    Raises
    ------
    ValueError
        Wrong number of dimensions, too few rows, wrong number of features,
        NaN or infinity.
    TypeError
        Complex or non-numeric data.
    """
    try:
        arr = xp.asarray(a)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise TypeError(f"{name} must be array-like of numbers") from exc
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {tuple(arr.shape)}")
    if arr.shape[0] < min_rows:
        raise ValueError(f"{name} must have at least {min_rows} row(s), got {arr.shape[0]}")
    if arr.shape[1] < 1:
        raise ValueError(f"{name} must have at least one feature (column)")
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(f"{name} has {arr.shape[1]} features, expected {n_features}")
    target = dtype if dtype is not None else (arr.dtype if _is_float_dtype(arr.dtype) else np.float64)
    if arr.dtype != target:
        arr = arr.astype(target)
    check_finite(arr, name, xp)
    return arr


def check_targets(y, name: str, n: int, xp=np, dtype=None):
    """Return targets as ``(n, p)`` floating array and whether the input was 1-D."""
    arr = xp.asarray(y)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D (n,) or 2-D (n, p), got shape {tuple(arr.shape)}")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} rows but X has {n}")
    was_1d = arr.ndim == 1
    arr = arr.reshape(n, -1)
    target = dtype if dtype is not None else (arr.dtype if _is_float_dtype(arr.dtype) else np.float64)
    if arr.dtype != target:
        arr = arr.astype(target)
    check_finite(arr, name, xp)
    return arr, was_1d


def check_positive(value, name: str) -> float:
    """Return ``value`` as a float, raising if it is not a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        try:
            value = float(value)
        except Exception as exc:
            raise TypeError(f"{name} must be a positive number, got {value!r}") from exc
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return value


def check_lengthscale(lengthscale, n_features: int | None = None, name: str = "lengthscale") -> np.ndarray:
    """Return lengthscales as a float64 NumPy array of shape ``(1,)`` or ``(d,)``.

    Raises
    ------
    ValueError
        Non-positive or non-finite entries, wrong length, more than one dimension.
    """
    ell = np.asarray(lengthscale if not hasattr(lengthscale, "get") else lengthscale.get(), dtype=np.float64)
    if ell.ndim > 1:
        raise ValueError(f"{name} must be a scalar or 1-D array, got shape {ell.shape}")
    ell = ell.reshape(-1)
    if ell.size == 0:
        raise ValueError(f"{name} must not be empty")
    if not np.all(np.isfinite(ell)) or np.any(ell <= 0):
        raise ValueError(f"{name} must be finite and > 0, got {lengthscale!r}")
    if n_features is not None and ell.size not in (1, n_features):
        raise ValueError(f"{name} has {ell.size} entries but the data have {n_features} features")
    return ell
