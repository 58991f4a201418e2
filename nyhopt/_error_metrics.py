"""The test errors of the paper: ``rmse``, ``nrmse`` and ``c_error`` (public from :mod:`nyhopt.datasets`).

Host float64 arithmetic on NumPy or CuPy inputs (copied to the host), with
the input checks every metric shares.
"""
from __future__ import annotations

import numpy as np

__all__ = ["rmse", "nrmse", "c_error"]


def _as_real_array(a, name):
    from .backend import as_native, to_numpy

    try:
        arr = to_numpy(as_native(a, name))
    except Exception as exc:
        raise TypeError(f"{name} must be array-like of real numbers") from exc
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D (n,) or 2-D (n, p), got shape {arr.shape}")
    arr = arr.astype(np.float64, copy=False)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinity")
    return arr


def _as_float_arrays(y_true, y_pred):
    y_true = _as_real_array(y_true, "y_true")
    y_pred = _as_real_array(y_pred, "y_pred")
    if y_true.ndim == 2 and y_true.shape[1] == 1 and y_pred.ndim == 1:
        y_true = y_true[:, 0]
    if y_pred.ndim == 2 and y_pred.shape[1] == 1 and y_true.ndim == 1:
        y_pred = y_pred[:, 0]
    if y_true.shape != y_pred.shape:
        raise ValueError(
            f"y_true and y_pred must have the same shape, got {y_true.shape} and {y_pred.shape}"
        )
    if y_true.size == 0:
        raise ValueError("y_true is empty")
    return y_true, y_pred


def _rms_diff(y_true, y_pred):
    """``sqrt(mean((y_true - y_pred)**2))`` without overflow or underflow for finite input."""
    with np.errstate(over="ignore", under="ignore"):
        diff = y_true - y_pred
        plain = float(np.sqrt(np.mean(diff ** 2)))
        if np.isfinite(plain) and (plain > 0.0 or not np.any(diff)):
            return plain
        factor = 1.0
        if not np.all(np.isfinite(diff)):  # |y_true - y_pred| beyond the float64 range
            diff, factor = y_true * 0.5 - y_pred * 0.5, 2.0
        scale = float(np.max(np.abs(diff)))
        return factor * scale * float(np.sqrt(np.mean((diff / scale) ** 2)))


def _abs_mean(y):
    """``|mean(y)|`` without overflow of the sum for finite input."""
    with np.errstate(over="ignore"):
        mean = float(np.mean(y))
    if np.isfinite(mean):
        return abs(mean)
    scale = float(np.max(np.abs(y)))
    return abs(scale * float(np.mean(y / scale)))


def rmse(y_true, y_pred) -> float:
    """Root mean squared error.

    Parameters
    ----------
    y_true, y_pred : array_like of shape (n,) or (n, p)
        Targets and predictions (NumPy or CuPy arrays).

    Returns
    -------
    float
        ``sqrt(mean((y_true - y_pred)**2))`` over all entries.

    Raises
    ------
    TypeError
        If ``y_true`` or ``y_pred`` is not real (complex, strings).
    ValueError
        If either holds NaN or infinity, is not 1-D or 2-D, is empty, or the
        shapes differ.

    Examples
    --------
    >>> from nyhopt.datasets import rmse
    >>> rmse([1.0, 2.0], [1.0, 4.0])
    1.4142135623730951
    """
    y_true, y_pred = _as_float_arrays(y_true, y_pred)
    return _rms_diff(y_true, y_pred)


def nrmse(y_true, y_pred) -> float:
    """Normalized root mean squared error, the paper's regression metric.

    Parameters
    ----------
    y_true, y_pred : array_like of shape (n,) or (n, p)
        Targets and predictions on the original (not standardized) label scale.

    Returns
    -------
    float
        ``sqrt(mean((y_true - y_pred)**2)) / |mean(y_true)|``.

    Raises
    ------
    TypeError
        If ``y_true`` or ``y_pred`` is not real (complex, strings).
    ValueError
        If either holds NaN or infinity, is not 1-D or 2-D, is empty, or the
        shapes differ, or ``mean(y_true)`` is zero.

    Examples
    --------
    >>> from nyhopt.datasets import nrmse
    >>> nrmse([2.0, 4.0], [2.0, 2.0])    # rmse sqrt(2) over mean 3
    0.4714045207910317
    """
    y_true, y_pred = _as_float_arrays(y_true, y_pred)
    mean = _abs_mean(y_true)
    if mean == 0.0:
        raise ValueError("nrmse is undefined: mean(y_true) is zero")
    return float(_rms_diff(y_true, y_pred) / mean)


def c_error(y_true, y_pred) -> float:
    """Classification error (fraction of wrong labels).

    Parameters
    ----------
    y_true : array_like of shape (n,) or (n, p)
        Binary labels (1-D: positive means class +1, otherwise -1, so both
        -1/+1 and 0/1 labels work) or one-hot labels (2-D, p >= 2).
    y_pred : array_like of the same shape
        Real-valued predictions: the predicted class is ``sign(y_pred)``
        (0 counts as -1) in 1-D, where 0/1 labels are compared with
        ``y_pred > 0.5``; the arg-max of each row in 2-D.

    Returns
    -------
    float
        Fraction of misclassified rows, in [0, 1].

    Raises
    ------
    TypeError
        If ``y_true`` or ``y_pred`` is not real (complex, strings).
    ValueError
        If either holds NaN or infinity, is not 1-D or 2-D, is empty, or the
        shapes differ.

    Examples
    --------
    >>> from nyhopt.datasets import c_error
    >>> c_error([1, -1, 1, -1], [0.3, -2.0, -0.1, -0.5])
    0.25
    >>> c_error([[1, 0], [0, 1]], [[0.9, 0.2], [0.6, 0.4]])
    0.5
    """
    y_true, y_pred = _as_float_arrays(y_true, y_pred)
    if y_true.ndim == 2 and y_true.shape[1] >= 2:
        return float(np.mean(np.argmax(y_true, axis=1) != np.argmax(y_pred, axis=1)))
    if np.all((y_true == 0) | (y_true == 1)) and np.any(y_true == 0):
        return float(np.mean((y_pred > 0.5) != (y_true > 0.5)))
    return float(np.mean((y_pred > 0) != (y_true > 0)))
