"""The test errors of the paper: ``rmse``, ``nrmse`` and ``c_error`` (public from :mod:`nyhopt.datasets`).

Host float64 arithmetic on NumPy or CuPy inputs (copied to the host), with
the input checks every metric shares.  Dask arrays are reduced on the cluster
instead, in the array module of the predictions' chunks: the checks and the
sums of :mod:`nyhopt._metric_sums` (the same on both paths) are two passes,
and a few numbers reach this process.
"""
from __future__ import annotations

import numpy as np

from ._metric_sums import (Checks, host_values, label_rule, label_stats, rms, scale_of, scaled_sum,
                           sq_error_sum, wrong_count)
from .backend import as_native, is_dask_array, to_numpy

__all__ = ["rmse", "nrmse", "c_error"]


class _Host:
    """In memory: host float64 arrays (device arrays copied), checks and sums evaluated as stated."""

    fm = np
    evaluate = staticmethod(host_values)

    @staticmethod
    def place(a, name):
        return to_numpy(as_native(a, name))


def _as_real_array(a, name, on, checks):
    try:
        arr = on.place(a, name)
    except Exception as exc:
        err = TypeError(f"{name} must be array-like of real numbers")
        err.__cause__ = exc
        checks.fail(err)
    if arr.dtype.kind not in "biuf":
        checks.fail(TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}"))
    if arr.ndim not in (1, 2):
        checks.fail(ValueError(f"{name} must be 1-D (n,) or 2-D (n, p), got shape {arr.shape}"))
    arr = arr.astype(np.float64, copy=False)
    checks.need(on.fm.isfinite(arr).all(), f"{name} contains NaN or infinity")
    return arr


def _as_float_arrays(y_true, y_pred):
    """``(on, y_true, y_pred, checks)``: float64 arrays of one shape, their value checks stated in ``checks``.

    In memory ``on`` is the host; with a dask input, every input is a dask
    array on the row blocks of the first one (``nyhopt.distributed._metrics``).
    """
    if is_dask_array(y_true) or is_dask_array(y_pred):
        from .distributed._metrics import DaskRows

        on = DaskRows(y_pred, y_true)
    else:
        on = _Host
    checks = Checks(on.evaluate)
    y_true = _as_real_array(y_true, "y_true", on, checks)
    y_pred = _as_real_array(y_pred, "y_pred", on, checks)
    if y_true.ndim == 2 and y_true.shape[1] == 1 and y_pred.ndim == 1:
        y_true = y_true[:, 0]
    if y_pred.ndim == 2 and y_pred.shape[1] == 1 and y_true.ndim == 1:
        y_pred = y_pred[:, 0]
    if y_true.shape != y_pred.shape:
        checks.fail(ValueError(
            f"y_true and y_pred must have the same shape, got {y_true.shape} and {y_pred.shape}"
        ))
    if y_true.size == 0:
        checks.fail(ValueError("y_true is empty"))
    return on, y_true, y_pred, checks


def _rms_and_mean(on, y_true, y_pred, checks, with_mean=False):
    """``sqrt(mean((y_true - y_pred)**2))`` (and ``|mean(y_true)|``) without overflow or underflow for finite input.

    Runs the checks with the maxima for the scales, then evaluates the sums.
    """
    amax_true, amax_pred = checks.run([abs(y_true).max(), abs(y_pred).max()])
    s, s_true = scale_of(amax_true, amax_pred), scale_of(amax_true)
    sums = [sq_error_sum(y_true, y_pred, s)] + ([scaled_sum(y_true, s_true)] if with_mean else [])
    values = on.evaluate(sums)
    err = rms(values[0], y_true.size, s)
    return (err, abs(s_true * (float(values[1]) / y_true.size))) if with_mean else err


def rmse(y_true, y_pred) -> float:
    """Root mean squared error.

    Parameters
    ----------
    y_true, y_pred : array_like of shape (n,) or (n, p)
        Targets and predictions: NumPy or CuPy arrays, or dask arrays of
        either (then reduced on the cluster; module notes).

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
    return _rms_and_mean(*_as_float_arrays(y_true, y_pred))


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
    err, mean = _rms_and_mean(*_as_float_arrays(y_true, y_pred), with_mean=True)
    if mean == 0.0:
        raise ValueError("nrmse is undefined: mean(y_true) is zero")
    return float(err / mean)


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
    on, y_true, y_pred, checks = _as_float_arrays(y_true, y_pred)
    one_hot = y_true.ndim == 2 and y_true.shape[1] >= 2
    rule = label_rule(y_true, checks.run([] if one_hot else label_stats(y_true)))
    (count,) = on.evaluate([wrong_count(y_true, y_pred, rule)])
    return float(count) / (y_true.shape[0] if rule == "argmax" else y_true.size)
