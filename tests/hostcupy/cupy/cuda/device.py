"""``cupy.cuda.device`` of the host stand-in: library handles are plain numbers."""
from __future__ import annotations


def get_cublas_handle():
    return 1


def get_cusolver_handle():
    return 2


def get_device_id():
    return 0
