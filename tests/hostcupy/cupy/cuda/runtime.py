"""``cupy.cuda.runtime`` of the host stand-in (also ``cupy_backends.cuda.api.runtime``)."""
from __future__ import annotations

CUDA_R_16F, CUDA_R_32F, CUDA_R_64F, CUDA_R_8I, CUDA_R_32I, CUDA_R_16BF = 2, 0, 1, 3, 10, 14
is_hip = False


class CUDARuntimeError(RuntimeError):
    pass


def getDeviceCount():
    return 1


def getDevice():
    return 0


def setDevice(device):
    if int(device) != 0:
        raise CUDARuntimeError("cudaErrorInvalidDevice")


def getDeviceProperties(device):
    from . import memory

    return {"name": b"host CuPy (no GPU)", "totalGlobalMem": memory.TOTAL_MEMORY, "multiProcessorCount": 132,
            "major": 9, "minor": 0, "sharedMemPerBlock": 48 * 1024, "warpSize": 32}


def memGetInfo():
    """(free, total): the device's memory less what device arrays hold now."""
    from . import memory

    return (max(memory.TOTAL_MEMORY - memory.used_bytes(), 0), memory.TOTAL_MEMORY)


def deviceSynchronize():
    return None


def runtimeGetVersion():
    return 13000


def driverGetVersion():
    return 13000
