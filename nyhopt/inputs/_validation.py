"""Input checks shared by every public entry point.

Each check raises ``ValueError``/``TypeError`` whose message names the
argument, and never modifies what the user passed.
"""
from __future__ import annotations

import numbers

import numpy as np

from ._door import trust, trusted
from ._missing import advice_for

__all__ = [
    "check_matrix",
    "check_targets",
    "check_target_layout",
    "check_sample_weight",
    "check_labels",
    "check_lengthscale",
    "check_positive",
    "check_real",
    "check_finite",
    "is_bool",
    "reject_bool",
]


def is_bool(value) -> bool:
    """True for a Python or NumPy boolean, or an array of booleans."""
    if isinstance(value, (bool, np.bool_)):
        return True
    dtype = getattr(value, "dtype", None)
    return isinstance(dtype, np.dtype) and dtype.kind == "b"


def reject_bool(value, name: str):
    """Return ``value``; raise ``ValueError`` if it is a boolean where a number is expected.

    ``True`` is an ``int`` to Python, so without this check ``penalty=True``
    would silently mean 1.
    """
    if is_bool(value):
        raise ValueError(f"{name} must be a number, not a boolean (got {value!r})")
    return value


def _is_float_dtype(dtype) -> bool:
    return np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.float64))


def check_finite(a, name: str, xp=np) -> None:
    """Raise ``ValueError`` if ``a`` holds NaN or infinity, naming the first such element of a 1-D or 2-D ``a``.

    A NaN in data rows or targets is a missing value: the message then says
    what to do with it (:func:`nyhopt.inputs._missing.advice_for`).

    Examples
    --------
    >>> check_finite(np.array([[1.0, 2.0], [3.0, np.inf]]), "X")
    Traceback (most recent call last):
    ...
    ValueError: X contains NaN or infinity (first at X[1, 1])
    >>> check_finite(np.array([1.0, np.nan]), "y")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: y contains NaN or infinity (first at y[1]); a NaN is a missing value: drop the rows whose ...
    """
    if bool(xp.all(xp.isfinite(a))):
        return
    where = ""
    if a.ndim in (1, 2) and a.size:
        flat = int(xp.argmax(~xp.isfinite(a.reshape(-1))))
        index = str(flat) if a.ndim == 1 else f"{flat // a.shape[1]}, {flat % a.shape[1]}"
        where = f" (first at {name}[{index}])" if name.isidentifier() else f" (first at [{index}])"
    advice = advice_for(name)
    if advice and bool(xp.any(xp.isnan(a))):
        advice = f"; a NaN is a missing value: {advice}"
    else:
        advice = ""
    raise ValueError(f"{name} contains NaN or infinity{where}{advice}")


def numbers_from_objects(a, name: str):
    """``a`` as float64 when it is a NumPy object array (Python numbers, a pandas object column); else ``a``.

    Raises
    ------
    TypeError
        An element is not a real number (``None``, text, complex; the message names ``name``).
    """
    if isinstance(a, np.ndarray) and a.dtype == object:
        for v in a.flat:
            if not isinstance(v, numbers.Real):
                raise TypeError(f"{name} must hold real numbers, got {v!r} ({type(v).__name__}) in an object array")
        return a.astype(np.float64)
    return a


def check_matrix(a, name: str, xp=np, dtype=None, n_features: int | None = None, min_rows: int = 1):
    """Return ``a`` as a 2-D floating array of ``xp`` (float32 or float64).

    Integer and boolean input is converted to float64; float32/float64 keep
    their dtype unless ``dtype`` is given.  No copy is made when none is needed.
    An array checked earlier in the current public call (:mod:`nyhopt.inputs._door`)
    is returned as it is when it has the dtype, width and rows asked for; the
    array returned is trusted for the rest of the call.

    Raises
    ------
    ValueError
        Wrong number of dimensions, too few rows, wrong number of features,
        NaN or infinity.
    TypeError
        Complex or non-numeric data.
    """
    if trusted(a) and (dtype is None or a.dtype == dtype) and (n_features is None or a.shape[1] == n_features) \
            and a.shape[0] >= min_rows:
        return a
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
    trust(arr, _same_values(a, arr))
    return arr


def _same_values(given, checked):
    """``given`` when it is an array with the values and dtype of ``checked`` (trusted with it), else None."""
    same = getattr(given, "dtype", None) == checked.dtype and getattr(given, "size", -1) == checked.size
    return given if same and given is not checked else None


def check_target_layout(a, name: str, n: int):
    """Raise for ``a`` (any array, dask included: dtype and shape only) that is not ``n`` rows of real numbers, 1-D or 2-D; return ``a``."""
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")
    if a.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D (n,) or 2-D (n, p), got shape {tuple(a.shape)}")
    if a.shape[0] != n:
        raise ValueError(f"{name} has {a.shape[0]} rows but X has {n}")
    return a


def check_targets(y, name: str, n: int, xp=np, dtype=None):
    """Return targets as ``(n, p)`` floating array and whether the input was 1-D.

    Targets checked earlier in the same public call (:mod:`nyhopt.inputs._door`)
    are not checked again when the dtype asked for is theirs.
    """
    if trusted(y) and y.ndim in (1, 2) and y.shape[0] == n and (dtype is None or y.dtype == dtype):
        return y.reshape(n, -1), y.ndim == 1
    arr = check_target_layout(xp.asarray(y), name, n)
    was_1d = arr.ndim == 1
    target = dtype if dtype is not None else (arr.dtype if _is_float_dtype(arr.dtype) else np.float64)
    if arr.dtype != target:
        arr = arr.astype(target)
    check_finite(arr, name, xp)  # in the shape given: y[3] for 1-D targets, y[3, 0] for 2-D ones
    arr = arr.reshape(n, -1)
    trust(arr, _same_values(y, arr))
    return arr, was_1d


def check_sample_weight(w, n: int, xp=np):
    """``w`` as float64 weights (n,) of ``xp`` (host weights move to a device ``xp``); a scalar is every row's.

    Raises
    ------
    TypeError
        Non-numeric weights.
    ValueError
        Another shape than ``(n,)``, NaN or infinity, a sum that is not > 0.
    """
    if xp is np and hasattr(w, "get"):  # device weights for host predictions
        w = w.get()
    try:
        arr = xp.asarray(w)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"sample_weight must be array-like of numbers ({exc})") from None
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"sample_weight must hold real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim == 0:
        arr = xp.full(n, arr)
    if tuple(arr.shape) != (n,):
        raise ValueError(f"sample_weight has shape {tuple(arr.shape)}, expected ({n},)")
    check_finite(arr, "sample_weight", xp)
    if not bool(arr.sum() > 0):
        raise ValueError("sample_weight must have a sum > 0")
    return arr


def _as_float(value, name: str, what: str) -> float:
    reject_bool(value, name)
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be {what}, got {value!r}")
    try:
        return float(value)
    except Exception as exc:
        raise TypeError(f"{name} must be {what}, got {value!r}") from exc


def _label_kind(value):
    """"string", "bytes" or "number" for one label; None for anything else."""
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, (numbers.Real, np.bool_)):
        return "number"
    return None


def check_labels(y, name: str = "y"):
    """Return ``y`` with labels of a single kind: all numbers, all strings or all bytes.

    Lists, tuples and object arrays (a pandas object column too) are checked
    element by element and returned as a NumPy array of that kind; any other
    array is returned as it is, at no cost.  Without this check NumPy turns
    ``[1, "a", 2.0]`` into the strings ``["1", "a", "2.0"]`` without a word,
    and an object array fails deep inside a sort.

    Parameters
    ----------
    y : array-like
        Targets or class labels; not modified.
    name : str, default "y"
        Name used in error messages.

    Returns
    -------
    array
        ``y`` itself, or a new NumPy array (numeric, ``str`` or ``bytes``).

    Raises
    ------
    TypeError
        Labels of different kinds (numbers and strings), or elements that are
        neither numbers nor strings (None, lists of different lengths ...).

    Examples
    --------
    >>> check_labels(["b", "a"]).tolist()
    ['b', 'a']
    >>> check_labels([1, "a"])
    Traceback (most recent call last):
    ...
    TypeError: y mixes label types (number, string); give labels of one type, for instance all strings
    """
    if isinstance(y, (list, tuple)):
        try:
            arr = np.asarray(y)
        except ValueError:  # ragged nesting
            arr = None
        if arr is None:  # ragged nesting: its elements are the (rejected) sequences
            obj = np.empty(len(y), dtype=object)
            obj[:] = list(y)
        elif arr.dtype.kind in "biufc":
            return arr
        else:
            obj = np.asarray(y, dtype=object)
    elif isinstance(getattr(y, "dtype", None), np.dtype) and y.dtype.kind == "O":
        obj = np.asarray(y, dtype=object)
    else:
        return y
    values = obj.ravel().tolist()
    kinds = set(map(_label_kind, values))
    if None in kinds:
        bad = next(v for v in values if _label_kind(v) is None)
        raise TypeError(f"{name} must hold numbers or strings, got an element {bad!r} of type {type(bad).__name__}")
    if len(kinds) > 1:
        raise TypeError(
            f"{name} mixes label types ({', '.join(sorted(kinds))}); give labels of one type, for instance "
            "all strings"
        )
    if not values:
        return np.asarray(y, dtype=np.float64)
    kind = kinds.pop()
    if kind == "number":
        return np.asarray(obj.tolist())
    return obj.astype(str if kind == "string" else bytes)


def check_label_kind(y, classes, name: str = "y"):
    """Refuse labels of another kind than ``classes``: text never equals a number.

    ``y`` and ``classes`` as :func:`check_labels` returns them (numbers,
    ``str`` or ``bytes``; NumPy or CuPy).  Without this check, text labels
    scored against numeric classes (or the reverse) count as all wrong.

    Raises
    ------
    TypeError
        ``y`` holds strings and the classes numbers, or the reverse.

    Examples
    --------
    >>> check_label_kind(np.array(["a"]), np.array([0, 1]))
    Traceback (most recent call last):
    ...
    TypeError: y holds strings but the classes are numbers [0, 1]; give labels of the kind the model was fitted on
    """
    def kind(a):
        return {"U": "strings", "S": "bytes"}.get(getattr(getattr(a, "dtype", None), "kind", "f"), "numbers")

    if kind(y) != kind(classes):
        shown = [v.item() if hasattr(v, "item") else v for v in list(classes[:6])]
        listed = f"{shown[:5]}".rstrip("]") + (", ...]" if len(shown) > 5 else "]")
        raise TypeError(f"{name} holds {kind(y)} but the classes are {kind(classes)} {listed}; give labels of the "
                        "kind the model was fitted on")


def check_positive(value, name: str) -> float:
    """Return ``value`` as a float, raising if it is not a finite number > 0.

    Raises
    ------
    TypeError
        Not a number (a string, a sequence, None ...).
    ValueError
        A boolean, NaN, infinity, zero or a negative number.
    """
    out = _as_float(value, name, "a positive number")
    if not np.isfinite(out) or out <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return out


def check_real(value, name: str, low: float | None = None) -> float:
    """Return ``value`` as a float, raising if it is not a finite number ``>= low``.

    Raises
    ------
    TypeError
        Not a number.
    ValueError
        A boolean, NaN, infinity, or a number below ``low``.
    """
    out = _as_float(value, name, "a real number")
    if not np.isfinite(out) or (low is not None and out < low):
        bound = "" if low is None else f" >= {low:g}"
        raise ValueError(f"{name} must be a finite number{bound}, got {value!r}")
    return out


def check_lengthscale(lengthscale, n_features: int | None = None, name: str = "lengthscale") -> np.ndarray:
    """Return lengthscales as a float64 NumPy array of shape ``(1,)`` or ``(d,)``.

    Raises
    ------
    ValueError
        Non-positive or non-finite entries, booleans, wrong length, more than
        one dimension.
    """
    if is_bool(lengthscale) or (isinstance(lengthscale, (list, tuple)) and any(map(is_bool, lengthscale))):
        raise ValueError(f"{name} must hold numbers, not booleans (got {lengthscale!r})")
    try:
        ell = np.asarray(lengthscale if not hasattr(lengthscale, "get") else lengthscale.get(), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a positive number or an array of them, got {lengthscale!r} ({exc})") from None
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
