"""``cupy_backends.cuda.libs.nvrtc`` of the host stand-in: a version, and no compiler.

The host stand-in never compiles CUDA (its ``RawModule`` runs NumPy versions
of nyhopt's kernels); ``tests/test_cuda_sources.py`` compiles the sources
with the real NVRTC, outside the host-CuPy run.
"""


class NVRTCError(RuntimeError):
    pass


def getVersion():
    return (13, 0)


def createProgram(*args, **kwargs):
    raise NVRTCError("host CuPy has no NVRTC: run the compile tests without NYHOPT_HOST_CUPY")
