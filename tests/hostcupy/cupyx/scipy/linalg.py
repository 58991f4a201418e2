"""``cupyx.scipy.linalg`` of the host stand-in: SciPy's functions on device arrays."""
from __future__ import annotations

import scipy.linalg as _sla

from cupy import _device_function


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, check_finite=False):
    """As ``cupyx.scipy.linalg.solve_triangular``: no check of the inputs, NaN or inf for a singular factor."""
    return _device_function(_sla.solve_triangular)(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal,
                                                   overwrite_b=False, check_finite=False)


def __getattr__(name):
    target = getattr(_sla, name, None)
    if target is None or not callable(target) or name.startswith("__"):
        raise AttributeError(f"module 'cupyx.scipy.linalg' (host stand-in) has no attribute {name!r}")
    return _device_function(target, name)
