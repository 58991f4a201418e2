"""``cupyx.scipy.special`` of the host stand-in: SciPy's special functions on device arrays."""
from __future__ import annotations

import scipy.special as _sp

from cupy import _device_function


def __getattr__(name):
    target = getattr(_sp, name, None)
    if target is None or not callable(target) or name.startswith("__"):
        raise AttributeError(f"module 'cupyx.scipy.special' (host stand-in) has no attribute {name!r}")
    return _device_function(target, name)
