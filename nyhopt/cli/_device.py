"""``--device``: the array module of a command (NumPy, or CuPy on a usable GPU)."""
from __future__ import annotations

import os
import sys

import numpy as np

from ._common import CLIError


DEVICES = ("auto", "cpu", "gpu")


def prefer_precompiled_headers():
    """Let CuPy's NVRTC compilations share precompiled headers in this process.

    A cold first call on a GPU compiles dozens of CuPy kernels, each of which parses
    CuPy's headers again; with ``CUPY_NVRTC_USE_PCH=1`` (NVRTC 12.8 or later) NVRTC
    parses them once (docs/performance-ops.md, "The first call on a GPU").  CuPy reads
    the variable when it is imported, so this only sets it, as a default the user's own
    setting overrides, while CuPy is not imported yet.  The command line is a process
    of its own; the library never sets it.
    """
    if "cupy" not in sys.modules:
        os.environ.setdefault("CUPY_NVRTC_USE_PCH", "1")


def gpu_module():
    """CuPy when it reports a usable CUDA device, else ``None``.

    The one place that decides whether the GPU path runs: tests replace it with a stand-in
    module (``asarray``/``asnumpy``) to follow that path without a GPU.
    """
    from ..backend import cupy_or_none, gpu_available

    prefer_precompiled_headers()

    return cupy_or_none() if gpu_available() else None


def array_module(device):
    """``numpy`` for the CPU, the CuPy module for the GPU (``device`` in :data:`DEVICES`)."""
    if device == "cpu":
        return np
    cp = gpu_module()
    if cp is not None:
        return cp
    if device == "gpu":
        from ._report import gpu_problem

        why = gpu_problem() or "CuPy reports no usable CUDA device"
        raise CLIError(f"--device gpu: no usable CUDA GPU: {why}; see 'nyhopt info'")
    return np


def to_host(a, xp):
    return a if xp is np else np.asarray(xp.asnumpy(a))


#: The fitted attributes that a fit on the GPU leaves on the device; the others (``y_mean_``,
#: ``intercept_``, ``x_scale_`` ...) are NumPy there too.  Class labels stay on the host: CuPy
#: cannot hold text.
DEVICE_ATTRIBUTES = ("alpha_", "centers_")


def model_to(model, xp):
    """Move the fitted arrays of ``model`` (and of its inner ``model_``) that live on the device after a
    fit on the GPU (:data:`DEVICE_ATTRIBUTES`) to ``xp``'s device."""
    if xp is np:
        return model
    for obj in (model, getattr(model, "model_", None)):
        if obj is None:
            continue
        for name in DEVICE_ATTRIBUTES:
            value = getattr(obj, name, None)
            if isinstance(value, np.ndarray):
                setattr(obj, name, xp.asarray(value))
    return model
