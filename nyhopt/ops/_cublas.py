"""One cuBLAS call on CuPy's handle and current stream, with host scalars.

The extended GEMMs (``SgemmEx``, ``GemmEx``) of :mod:`nyhopt.ops.half` and
:mod:`nyhopt.ops.gram8` are not wrapped by CuPy's array functions; their
``alpha`` and ``beta`` are passed as host pointers, so the handle's pointer
mode is set to host for the call and restored after.  CuPy is imported
inside the function: ``import nyhopt`` never needs it.
"""
from __future__ import annotations

__all__ = ["call"]


def call(name, *args):
    """``cublas.<name>(handle, *args)`` on the current device's handle and stream, scalars on the host."""
    import cupy
    from cupy_backends.cuda.libs import cublas

    handle = cupy.cuda.device.get_cublas_handle()
    cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
    mode = cublas.getPointerMode(handle)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    try:
        return getattr(cublas, name)(handle, *args)
    finally:
        cublas.setPointerMode(handle, mode)
