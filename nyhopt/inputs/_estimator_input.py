"""The estimators' public inputs checked and converted: ``X`` with its feature names, any array-like.

Shared by :mod:`nyhopt.estimator` and :mod:`nyhopt.hyperopt`: pandas objects
and DLPack producers become NumPy or CuPy arrays here, and bad input gets
scikit-learn's messages.
"""
from __future__ import annotations

import numpy as np

from ..models._estimator_params import feature_names
from ._feature_names import check_names
from ._frame_errors import frame_errors
from ._missing import advice_for, is_missing
from ._door import recall, remember
from ._validation import check_matrix
from ..backend import as_native, get_namespace, is_cupy_namespace

__all__ = ["DataConversionWarning", "as_array", "check_X"]


class DataConversionWarning(UserWarning):
    """The input was converted (for instance a column-vector ``y`` to 1-D)."""


def as_array(a, name, numeric=True, hint=""):
    """Array-like -> array (NumPy or CuPy), with clear errors for unsupported input kinds.

    The one conversion of the estimators' public inputs: pandas objects and
    DLPack producers become NumPy/CuPy arrays here (:func:`nyhopt.backend.as_native`).
    ``hint`` is appended to the message of a failed conversion to numbers.
    """
    if a is None:
        raise ValueError(f"{name} is None; this estimator requires y to be passed, but the target y is None"
                         if name == "y" else f"{name} is None")
    if hasattr(a, "tocsr") or hasattr(a, "toarray"):
        raise TypeError(f"{name} is a sparse matrix; sparse input is not supported, use {name}.toarray()")
    a = as_native(a, name)
    xp = get_namespace(a)
    if not is_cupy_namespace(xp):
        a = np.asarray(a)
        if a.dtype == object and numeric:
            try:
                a = np.asarray(a, dtype=np.float64)
            except (TypeError, ValueError) as exc:  # NumPy's message names the element; the type stays NumPy's
                raise type(exc)(_missing_message(a, name) or f"{name}: {exc}{hint}") from None
    if a.dtype.kind == "c":
        raise ValueError(f"{name}: Complex data not supported")
    return a


def _missing_message(a, name):
    """The message for the first missing element (``None``, an empty string ...) of the object array ``a``, or None.

    Only the failure path pays for this scan.
    """
    for index, v in np.ndenumerate(a):
        if is_missing(v):
            where = ", ".join(map(str, index))
            advice = advice_for(name)
            return (f"{name} holds a missing value ({v!r}) at {name}[{where}]"
                    + (f"; {advice}" if advice else ""))
    return None


def regression_targets(y, classifier):
    """``y`` of a regressor as an array of numbers; text says which classifier takes labels.

    Raises
    ------
    TypeError or ValueError
        Text labels (the type NumPy's conversion gives), the message naming ``classifier``.
    """
    hint = f" (a regressor's targets are numbers; for class labels use {classifier})"
    y = as_array(y, "y", hint=hint)
    if y.dtype.kind in "USO":
        raise TypeError(f"y must hold real numbers, got dtype {y.dtype}{hint}")
    return y


def check_X(est, X, reset):
    """Validated 2-D float ``X`` and its namespace; records (``reset``) or checks feature names.

    Names that differ from those of fit raise a ``ValueError`` listing the
    differences (:func:`nyhopt.inputs._feature_names.names_differ`).

    Once per public call (:mod:`nyhopt.inputs._door`): the same ``X`` given
    again inside the call gets the array made the first time.
    """
    check_names(est, feature_names(X), reset)
    given, seen = X, recall(X)
    if seen is not None and (reset or seen.shape[1] == est.n_features_in_):
        return seen, get_namespace(seen)
    with frame_errors(given, "X"):
        X = as_array(X, "X")
    xp = get_namespace(X)
    if X.ndim != 2:
        raise ValueError(
            f"X must be 2-D (n_samples, n_features), got shape {tuple(X.shape)}. Reshape your data "
            "with X.reshape(-1, 1) for one feature or X.reshape(1, -1) for one sample"
        )
    if X.shape[0] == 0 or X.shape[1] == 0:
        what = "sample(s)" if X.shape[0] == 0 else "feature(s)"
        raise ValueError(
            f"X has 0 {what} (shape={tuple(X.shape)}) while a minimum of 1 is required."
        )
    if not reset and X.shape[1] != est.n_features_in_:
        raise ValueError(
            f"X has {X.shape[1]} features, but {type(est).__name__} is expecting "
            f"{est.n_features_in_} features as input"
        )
    with frame_errors(given, "X"):
        X = check_matrix(X, "X", xp)
    remember(given, X)  # checked: the layers below this call take it as it is
    return X, xp
