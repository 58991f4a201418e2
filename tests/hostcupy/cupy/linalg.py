"""``cupy.linalg`` of the host stand-in.

:func:`cholesky` does not raise on a matrix that is not positive definite:
CuPy leaves cuSOLVER's status unchecked by default (``cupyx.errstate``), and
the factor is then not usable; here it is NaN, so code that relies on an
exception is caught.
"""
from __future__ import annotations

import numpy as _np

from . import _device_function, _unwrap, ndarray

LinAlgError = _np.linalg.LinAlgError


def cholesky(a):
    x = _unwrap(a)
    try:
        return ndarray._of(_np.linalg.cholesky(x))
    except _np.linalg.LinAlgError:
        return ndarray._of(_np.full(x.shape, _np.nan, dtype=x.dtype))


def __getattr__(name):
    target = getattr(_np.linalg, name, None)
    if target is None or not callable(target) or name.startswith("__"):
        raise AttributeError(f"module 'cupy.linalg' (host stand-in) has no attribute {name!r}")
    return _device_function(target, name)
