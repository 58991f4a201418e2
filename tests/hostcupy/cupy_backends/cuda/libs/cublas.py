"""``cupy_backends.cuda.libs.cublas`` of the host stand-in: the extended GEMMs on host memory.

Column-major, as cuBLAS: a matrix is a pointer, a shape and a leading
dimension, and these models read and write the raw memory behind the
pointers (host addresses here), so a wrong leading dimension, transpose or
type code gives wrong numbers as it would on a GPU.  ``SgemmEx`` sums in
float32 (tensor cores sum in float32 too, though not IEEE-exactly);
``GemmEx`` with int8 inputs sums exactly in int32 and fails on an overflow.
"""
from __future__ import annotations

import ctypes

import numpy as np
from numpy.lib.stride_tricks import as_strided

CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C = 0, 1, 2
CUBLAS_POINTER_MODE_HOST, CUBLAS_POINTER_MODE_DEVICE = 0, 1
CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32I, CUBLAS_COMPUTE_64F = 68, 72, 70
CUBLAS_GEMM_DEFAULT, CUBLAS_GEMM_DEFAULT_TENSOR_OP = -1, 99
_OPS = (CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C)
_TYPES = {2: np.float16, 0: np.float32, 1: np.float64, 3: np.int8, 10: np.int32}
_mode = {}


class CUBLASError(RuntimeError):
    pass


def setStream(handle, stream):
    return None


def getPointerMode(handle):
    return _mode.get(handle, CUBLAS_POINTER_MODE_DEVICE)


def setPointerMode(handle, mode):
    _mode[handle] = int(mode)


def column_major(ptr, dtype, rows, cols, ld):
    """The column-major ``rows x cols`` matrix with leading dimension ``ld`` at address ``ptr`` (a view)."""
    dtype = np.dtype(dtype)
    if rows <= 0 or cols <= 0:
        return np.empty((max(rows, 0), max(cols, 0)), dtype)
    buf = np.ctypeslib.as_array((ctypes.c_char * (dtype.itemsize * (ld * (cols - 1) + rows))).from_address(int(ptr)))
    return as_strided(buf.view(dtype), shape=(rows, cols), strides=(dtype.itemsize, ld * dtype.itemsize))


def _scalar(ptr, ctype):
    return (ctype * 1).from_address(int(ptr))[0]


def _operands(transa, transb, m, n, k, A, Atype, lda, B, Btype, ldb, ldc):
    if min(m, n, k) < 0 or transa not in _OPS or transb not in _OPS:
        raise CUBLASError("CUBLAS_STATUS_INVALID_VALUE: a negative size or an unknown operation")
    ar, ac = (m, k) if transa == CUBLAS_OP_N else (k, m)
    br, bc = (k, n) if transb == CUBLAS_OP_N else (n, k)
    if lda < max(1, ar) or ldb < max(1, br) or ldc < max(1, m):
        raise CUBLASError("CUBLAS_STATUS_INVALID_VALUE: a leading dimension is too small")
    a = column_major(A, _TYPES[Atype], ar, ac, lda)
    b = column_major(B, _TYPES[Btype], br, bc, ldb)
    return (a if transa == CUBLAS_OP_N else a.T), (b if transb == CUBLAS_OP_N else b.T)


def _check_mode(handle):
    if getPointerMode(handle) != CUBLAS_POINTER_MODE_HOST:
        raise CUBLASError("host CuPy models host scalars only: set CUBLAS_POINTER_MODE_HOST")


def sgemmEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc):
    """``C = alpha op(A) op(B) + beta C``: float16 or float32 inputs, float32 output and sums."""
    _check_mode(handle)
    if Ctype != 0 or Atype not in (0, 2) or Btype not in (0, 2):
        raise CUBLASError("CUBLAS_STATUS_NOT_SUPPORTED: SgemmEx types")
    a, b = _operands(transa, transb, m, n, k, A, Atype, lda, B, Btype, ldb, ldc)
    c = column_major(C, np.float32, m, n, ldc)
    al, be = np.float32(_scalar(alpha, ctypes.c_float)), np.float32(_scalar(beta, ctypes.c_float))
    product = al * (a.astype(np.float32) @ b.astype(np.float32))
    c[...] = product if be == 0 else product + be * c


def gemmEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
           computeType, algo):
    """``C = alpha op(A) op(B) + beta C`` for int8 inputs and int32 output and sums (``CUBLAS_COMPUTE_32I``)."""
    _check_mode(handle)
    if (Atype, Btype, Ctype, computeType) != (3, 3, 10, CUBLAS_COMPUTE_32I):
        raise CUBLASError("host CuPy models GemmEx for int8 inputs and int32 output only")
    if not (algo == CUBLAS_GEMM_DEFAULT or 0 <= algo <= 23 or CUBLAS_GEMM_DEFAULT_TENSOR_OP <= algo <= 115):
        raise CUBLASError(f"CUBLAS_STATUS_INVALID_VALUE: no cublasGemmAlgo_t {algo}")
    if lda % 4 or ldb % 4 or ldc % 4 or m % 4 or k % 4:
        raise CUBLASError("CUBLAS_STATUS_NOT_SUPPORTED: int8 GemmEx needs multiples of 4")
    a, b = _operands(transa, transb, m, n, k, A, Atype, lda, B, Btype, ldb, ldc)
    al, be = _scalar(alpha, ctypes.c_int32), _scalar(beta, ctypes.c_int32)
    product = al * (a.astype(np.int64) @ b.astype(np.int64))
    c = column_major(C, np.int32, m, n, ldc)
    total = product if be == 0 else product + be * c.astype(np.int64)
    if np.abs(total).max(initial=0) >= 2**31:
        raise CUBLASError("int32 overflow in GemmEx (the device would wrap around)")
    c[...] = total
