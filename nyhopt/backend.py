"""Array-module selection: NumPy on the CPU, CuPy on the GPU.

The array module (``xp``) is decided once, at a public entry point, from the
arrays the user passed; every function below that entry takes ``xp``
explicitly.  Nothing is ever copied between host and device behind the user's
back: mixing NumPy and CuPy arrays is an error.

Examples
--------
>>> import numpy as np
>>> from nyhopt.backend import get_namespace
>>> get_namespace(np.ones(3)) is np
True
"""
from __future__ import annotations

import numpy as np

__all__ = ["get_namespace", "is_cupy_namespace", "to_numpy", "cupy_or_none", "gpu_available"]


def cupy_or_none():
    """Return the ``cupy`` module if it can be imported, else ``None``."""
    try:
        import cupy  # noqa: F401
    except Exception:  # ImportError, or a broken CUDA install
        return None
    return cupy


def gpu_available() -> bool:
    """True when CuPy is importable and a CUDA device is usable."""
    cp = cupy_or_none()
    if cp is None:
        return False
    try:
        return bool(cp.is_available())
    except Exception:
        return False


def _is_cupy_array(a) -> bool:
    return type(a).__module__.split(".")[0] == "cupy"


def get_namespace(*arrays):
    """Return the array module (``numpy`` or ``cupy``) shared by ``arrays``.

    ``None`` entries and Python scalars are ignored.  Anything that is not a
    CuPy array is treated as host data (NumPy).

    Raises
    ------
    TypeError
        If host (NumPy) and device (CuPy) arrays are mixed.
    """
    kinds = set()
    for a in arrays:
        if a is None or np.isscalar(a):
            continue
        kinds.add("cupy" if _is_cupy_array(a) else "numpy")
    if len(kinds) > 1:
        raise TypeError(
            "inputs mix NumPy (host) and CuPy (device) arrays; move them to one "
            "device first (cupy.asarray / cupy.asnumpy)"
        )
    if kinds == {"cupy"}:
        import cupy

        return cupy
    return np


def is_cupy_namespace(xp) -> bool:
    """True if ``xp`` is the CuPy module."""
    return getattr(xp, "__name__", "") == "cupy"


def to_numpy(a):
    """Return ``a`` as a NumPy array (copies device arrays to the host)."""
    if _is_cupy_array(a):
        return a.get()
    return np.asarray(a)
