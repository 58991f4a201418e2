"""``cupy_backends.cuda.api.runtime`` of the host stand-in: ``cupy.cuda.runtime``."""
from cupy.cuda.runtime import *  # noqa: F401,F403
from cupy.cuda.runtime import CUDA_R_8I, CUDA_R_16F, CUDA_R_32F, CUDA_R_32I  # noqa: F401
