"""The constructor parameters of an estimator in a model file, as JSON text (no pickle).

:func:`nyhopt.save_model` stores ``get_params(deep=False)`` in the field
``params`` so that :func:`nyhopt.load_model` gives back an estimator whose
``get_params()`` is the one that was fitted (``clone(load_model(path))`` refits
with the same settings).  Values are encoded as JSON: numbers, strings,
booleans and ``None`` as they are, lists as lists, and the kinds JSON lacks as
one-key objects: ``{"tuple": [...]}``, ``{"array": [...]}`` (a 1-D array of
numbers), ``{"dict": {...}}`` and ``{"kernel": name, "lengthscale": ...}``.
A value of another kind (a ``numpy.random.Generator``, an ``(m, d)`` array of
centers) is left out, and the loader falls back to what the rest of the file
says (the number of centers, the fitted kernel).
"""
from __future__ import annotations

import json
import math
import numbers

import numpy as np

from ._model_file import KERNELS
from ..errors import DataError

__all__ = ["kernel_name", "encode_params", "decode_params"]


class _Skip(Exception):
    """A value this encoding does not represent."""


def kernel_name(kernel) -> str:
    """Name under which :func:`nyhopt.make_kernel` rebuilds ``kernel``."""
    kind = kernel.kind
    if type(kernel).__name__ == "MaternKernel" and float(kernel.nu) == 0.5:
        return "matern12"
    if kind not in KERNELS:  # pragma: no cover - a kernel family this format does not know
        raise ValueError(f"cannot save a model with kernel {kernel!r}")
    return kind


def _encode(value):
    from ..kernels import Kernel

    if value is None or isinstance(value, (bool, np.bool_, str)):
        return value.item() if isinstance(value, np.bool_) else value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        if not math.isfinite(float(value)):
            raise _Skip
        return float(value)
    if isinstance(value, Kernel):
        try:
            name = kernel_name(value)
        except ValueError:
            raise _Skip from None
        return {"kernel": name, "lengthscale": _encode(value.lengthscale)}
    if isinstance(value, np.ndarray):
        if value.ndim != 1 or value.dtype.kind not in "biuf":
            raise _Skip
        return {"array": [_encode(v) for v in value.tolist()]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [_encode(v) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: _encode(v) for k, v in value.items()}}
    if isinstance(value, (type, np.dtype)):
        try:
            return str(np.dtype(value))
        except TypeError:
            raise _Skip from None
    raise _Skip


def encode_params(params: dict) -> str:
    """JSON text of the parameters this encoding represents (the others are left out)."""
    out = {}
    for name, value in params.items():
        try:
            out[name] = _encode(value)
        except _Skip:
            pass
    return json.dumps(out, sort_keys=True)


def _decode(value, path):
    from ..kernels import make_kernel

    if isinstance(value, list):
        return [_decode(v, path) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"tuple"} and isinstance(value["tuple"], list):
        return tuple(_decode(v, path) for v in value["tuple"])
    if set(value) == {"array"} and isinstance(value["array"], list):
        arr = np.asarray(value["array"])
        if arr.ndim != 1 or arr.dtype.kind not in "biuf":
            raise DataError(f"{path}: field 'params' holds an array that is not 1-D numbers")
        return arr
    if set(value) == {"dict"} and isinstance(value["dict"], dict):
        return {k: _decode(v, path) for k, v in value["dict"].items()}
    if set(value) == {"kernel", "lengthscale"} and value["kernel"] in KERNELS:
        ell = _decode(value["lengthscale"], path)
        try:
            arr = np.asarray(ell, dtype=float) if isinstance(ell, (int, float, list, np.ndarray)) else None
        except (TypeError, ValueError):
            arr = None
        if arr is None or arr.ndim > 1 or arr.size == 0 or not np.all(np.isfinite(arr) & (arr > 0)):
            raise DataError(f"{path}: field 'params' holds a kernel with lengthscale {ell!r}")
        return make_kernel(value["kernel"], ell)
    raise DataError(f"{path}: field 'params' holds an unknown value {value!r}")


def decode_params(text: str, names, path: str) -> dict:
    """The parameters stored by :func:`encode_params`, among ``names`` (others are ignored).

    Raises
    ------
    DataError
        Text that is not a JSON object, or a value this encoding does not produce.
    """
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise DataError(f"{path}: field 'params' is not JSON text ({exc})") from None
    if not isinstance(raw, dict):
        raise DataError(f"{path}: field 'params' must be a JSON object, got {type(raw).__name__}")
    return {k: _decode(v, path) for k, v in raw.items() if k in names}
