"""Targets as the paper uses them: standardized for regression, -1/+1 or one-hot for classes.

* Regression: each output column is standardized with its training mean and
  standard deviation, :math:`\\tilde y = (y - \\mu) / \\sigma` (a constant column
  only centered), so that the noise-variance estimate :math:`s^2 = 1` of the
  objectives is an upper bound; predictions are mapped back with
  :math:`\\mu + \\sigma f`.
* Binary classification: the larger of the two (sorted) classes is +1, the
  other -1; the predicted class is the sign of :math:`f` (0 counts as the
  first class).
* Multiclass: one-hot columns (1 for the class, 0 elsewhere), in the sorted
  order of the classes; the predicted class is the arg-max.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..models._scaling import column_mean_std, standardize as _standardize
from ..inputs._door import trust
from ..inputs._validation import check_targets
from ..backend import get_namespace, to_numpy

__all__ = ["TASKS", "TargetEncoding", "resolve_task", "encode_targets", "decode_predictions"]

TASKS = ("auto", "regression", "classification")
#: ``task="auto"`` calls 1-D integer-valued targets with at most this many distinct values classes.
MAX_AUTO_CLASSES = 20


class TargetEncoding(NamedTuple):
    """How targets were turned into the numbers the objective sees.

    Attributes
    ----------
    task : str
        ``"regression"`` or ``"classification"``.
    Y : array of shape (n, p)
        Encoded targets (dtype of the data, device of the data).
    was_1d : bool
        Whether the user's targets were 1-D.
    y_mean, y_scale : numpy.ndarray of shape (p,) or None
        Regression standardization (float64).
    classes : numpy.ndarray or None
        Sorted class labels (classification).
    """

    task: str
    Y: object
    was_1d: bool
    y_mean: object = None
    y_scale: object = None
    classes: object = None


def _labels(y):
    """``y`` as an array of its own module (CuPy stays on the device, the rest NumPy)."""
    if hasattr(y, "get") and hasattr(y, "dtype"):
        return y, get_namespace(y)
    return np.asarray(y), np


def resolve_task(y, task="auto") -> str:
    """``"regression"`` or ``"classification"`` for targets ``y``.

    With ``task="auto"``: classification when ``y`` is 1-D and holds labels
    that are not numbers (strings, booleans) or integer values with at most
    20 distinct values; regression otherwise.

    Examples
    --------
    >>> resolve_task([0.5, 1.5, 2.0]), resolve_task([0, 1, 1, 0]), resolve_task(["a", "b"])
    ('regression', 'classification', 'classification')
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    if task != "auto":
        return task
    arr, xp = _labels(y)
    if arr.ndim != 1:
        return "regression"
    if arr.dtype.kind in "bUSO":
        return "classification"
    if arr.dtype.kind in "iu" or (
        arr.dtype.kind == "f" and bool(xp.all(xp.isfinite(arr))) and bool(xp.all(arr == xp.round(arr)))
    ):
        if int(xp.unique(arr).size) <= MAX_AUTO_CLASSES:
            return "classification"
    return "regression"


def encode_targets(y, task, n, xp, dtype, standardize=True) -> TargetEncoding:
    """Encode ``y`` for the objective (see the module notes).

    Parameters
    ----------
    y : array of shape (n,) or (n, p)
    task : {"auto", "regression", "classification"}
    n : int
        Number of rows of X.
    xp : module
        Array module of the data.
    dtype : numpy dtype
        dtype of the data.
    standardize : bool, default True
        Standardize regression targets.

    Returns
    -------
    TargetEncoding

    Raises
    ------
    ValueError
        Wrong length, 2-D class labels, fewer than two classes, NaN/inf.
    """
    task = resolve_task(y, task)
    if task == "regression":
        Y, was_1d = check_targets(y, "y", n, xp, dtype=dtype)
        p = Y.shape[1]
        if standardize:
            mean, scale = column_mean_std(Y, xp)  # no overflow for huge finite targets
            scale = np.where(scale > 0, scale, 1.0)
            Y = _standardize(Y.astype(xp.float64), mean, scale, xp).astype(dtype)
            trust(Y)  # finite targets standardized: |Y| <= sqrt(n), finite in any dtype
        else:
            mean, scale = np.zeros(p), np.ones(p)
        return TargetEncoding("regression", Y, was_1d, mean, scale, None)

    labels, lxp = _labels(y)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise ValueError(f"y must be 1-D class labels for classification, got shape {tuple(labels.shape)}")
    if labels.shape[0] != n:
        raise ValueError(f"y has {labels.shape[0]} rows but X has {n}")
    if labels.dtype.kind == "f" and not bool(lxp.all(lxp.isfinite(labels))):
        raise ValueError("y contains NaN or infinity")
    if labels.dtype.kind == "O":
        labels = labels.astype(str)
    classes, codes = lxp.unique(labels, return_inverse=True)
    codes = xp.asarray(codes.reshape(-1))
    k = int(classes.shape[0])
    if k < 2:
        raise ValueError(f"classification needs at least two classes in y, got {classes.tolist()}")
    if k == 2:
        Y = (2.0 * codes - 1.0)[:, None]
    else:
        Y = xp.zeros((n, k))
        Y[xp.arange(n), codes] = 1.0
    Y = Y.astype(dtype)
    trust(Y)  # +-1 or one-hot
    return TargetEncoding("classification", Y, True, None, None, classes)


def decode_predictions(F, enc: TargetEncoding):
    """Turn model outputs ``F`` (n, p) into predictions in the user's terms.

    Regression: :math:`\\mu + \\sigma F` (1-D when the targets were 1-D).
    Classification: class labels (``classes[1]`` where :math:`F > 0` for two
    classes, the arg-max otherwise).  Arrays stay on their device.
    """
    xp = get_namespace(F)
    if enc.task == "regression":
        out = F.astype(xp.float64) * xp.asarray(enc.y_scale) + xp.asarray(enc.y_mean)
        return out[:, 0] if enc.was_1d else out
    idx = (F[:, 0] > 0).astype(xp.int64) if enc.classes.shape[0] == 2 else xp.argmax(F, axis=1)
    if get_namespace(enc.classes) is not xp:  # host labels (strings) for device scores
        idx = to_numpy(idx)
    return enc.classes[idx]
