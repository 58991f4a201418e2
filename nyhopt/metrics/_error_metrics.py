"""The test errors of the paper: ``rmse``, ``nrmse`` and ``c_error`` (public from :mod:`nyhopt.datasets`).

Host float64 arithmetic on NumPy or CuPy inputs (copied to the host), with
the input checks every metric shares.  Dask arrays are reduced on the cluster
instead, one task per row block in the array module of the predictions'
chunks: the checks and the partial sums of :mod:`nyhopt.metrics._metric_sums` (the
in-memory path is its one-block case), a few numbers per block to this
process.
"""
from __future__ import annotations

import math

import numpy as np

from ._metric_sums import block_partials, combine
from ..inputs._validation import numbers_from_objects
from ..backend import as_native, get_namespace, to_numpy
from ..placement import on_cluster

__all__ = ["rmse", "nrmse", "c_error"]


def _raise(exc, placed):
    """Raise the first NaN or infinity among the arrays ``placed`` (name, array) so far, else ``exc``.

    The values of an argument are checked before anything about the next one,
    as in memory; on dask arrays that is one compute, on this error path only.
    """
    if any(on_cluster(arr) for _, arr in placed):
        from ..distributed._metrics import all_finite

        finite = all_finite(*(arr for _, arr in placed))
    else:
        finite = [bool(get_namespace(arr).isfinite(arr).all()) for _, arr in placed]
    for (name, _), ok in zip(placed, finite):
        if not ok:
            raise ValueError(f"{name} contains NaN or infinity")
    raise exc


def _as_real_array(a, name, cluster, placed):
    try:
        if on_cluster(a):
            arr = a
        elif cluster:  # NumPy or CuPy as they are: the tasks take them to the predictions' module
            arr = as_native(a, name)
            arr = arr if hasattr(arr, "dtype") else np.asarray(arr)
        else:
            arr = to_numpy(as_native(a, name))
    except Exception as exc:
        err = TypeError(f"{name} must be array-like of real numbers")
        err.__cause__ = exc
        _raise(err, placed)
    try:  # Python numbers in an object array convert, as at every other entry point
        arr = numbers_from_objects(arr, name)
    except TypeError as exc:
        _raise(exc, placed)
    if arr.dtype.kind not in "biuf":
        _raise(TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}"), placed)
    if arr.ndim not in (1, 2):
        _raise(ValueError(f"{name} must be 1-D (n,) or 2-D (n, p), got shape {arr.shape}"), placed)
    if not cluster:
        arr = arr.astype(np.float64, copy=False)
    placed.append((name, arr))
    return arr


def _metric(kind, y_true, y_pred):
    """The metric ``kind`` (:func:`nyhopt.metrics._metric_sums.combine`) of ``y_true`` against ``y_pred``.

    In memory the inputs are float64 host arrays of one shape, one block;
    with a dask input, every input goes on the row blocks of the first dask
    one (the predictions', else the targets'), one task per block in the
    array module of its predictions (``nyhopt.distributed._metrics``).
    """
    cluster = on_cluster(y_true, y_pred)
    placed = []
    y_true = _as_real_array(y_true, "y_true", cluster, placed)
    y_pred = _as_real_array(y_pred, "y_pred", cluster, placed)
    if cluster:
        from ..distributed._metrics import known_shapes

        y_true, y_pred = known_shapes(y_true, y_pred)
        placed = list(zip(("y_true", "y_pred"), (y_true, y_pred)))
    if y_true.ndim == 2 and y_true.shape[1] == 1 and y_pred.ndim == 1:
        y_true = y_true[:, 0]
    if y_pred.ndim == 2 and y_pred.shape[1] == 1 and y_true.ndim == 1:
        y_pred = y_pred[:, 0]
    if y_true.shape != y_pred.shape:
        _raise(ValueError(f"y_true and y_pred must have the same shape, got {y_true.shape} and {y_pred.shape}"),
               placed)
    if y_true.size == 0:
        _raise(ValueError("y_true is empty"), placed)
    if kind == "labels" and y_true.ndim == 2 and y_true.shape[1] >= 2:
        kind, size = "argmax", y_true.shape[0]
    else:
        size = y_true.size
    if cluster:
        from ..distributed._metrics import partials_dask

        parts = partials_dask(kind, y_pred, y_true)
    else:
        parts = [block_partials(kind, y_true, y_pred)]
    return combine(kind, parts, ("y_true", "y_pred"), size)


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
    return _metric("rmse", y_true, y_pred)


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
        shapes differ, or ``mean(y_true)`` is zero, or the quotient exceeds
        float64's range (a mean near zero, such as a subnormal one, beside
        errors of order one).

    Examples
    --------
    >>> from nyhopt.datasets import nrmse
    >>> nrmse([2.0, 4.0], [2.0, 2.0])    # rmse sqrt(2) over mean 3
    0.4714045207910317
    """
    s, root, t, mean = _metric("rmse+mean", y_true, y_pred)
    if mean == 0.0:
        raise ValueError("nrmse is undefined: mean(y_true) is zero")
    if root == 0.0:
        return 0.0
    # (s root) / (t mean) from the parts: a subnormal mean, or the products, leave float64 where the quotient need not
    (fr, er), (fm, em), (_, es), (_, et) = map(math.frexp, (root, mean, s, t))
    try:
        return math.ldexp(fr / fm, er - em + es - et)
    except OverflowError:
        raise ValueError(
            f"nrmse is too large for float64: the rmse ({math.ldexp(fr, er + es - 1):.3g}) is more than "
            f"1.8e308 times |mean(y_true)| ({math.ldexp(fm, em + et - 1):.3g}); mean(y_true) is nearly zero "
            "beside the errors") from None


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
    return _metric("labels", y_true, y_pred)
