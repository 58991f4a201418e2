r"""Products with a kernel matrix held in 16 bits (float16 storage, float32 arithmetic).

A held :math:`K = k(X, Z)` of float32 data takes ``4 n m`` bytes; in float16
it takes half, and a product with it reads half as many bytes, which is what
bounds the skinny products of a Falkon solve.  The entries of :math:`K` lie
in :math:`[0, 1]`, so float16 holds them with a relative error of at most
:math:`2^{-11}` (and an absolute one of :math:`2^{-25}` for tiny values):
the operator is :math:`\tilde K = \mathrm{fl}_{16}(K)`, one fixed matrix for
the whole solve, so CG sees a consistent operator.

The other operand (``V``, ``U``) is *not* rounded to 16 bits.  Matrix
products with float16 inputs and float32 results (cuBLAS ``SgemmEx`` on a
GPU, with tensor cores) need both inputs in float16, so each column
:math:`v` is split into two float16 parts and a power-of-two scale,

.. math::  v \approx s\,(v_{hi} + v_{lo}), \qquad
           v_{hi} = \mathrm{fl}_{16}(v / s), \quad
           v_{lo} = \mathrm{fl}_{16}(v / s - v_{hi}),
           \qquad s = 2^{\lceil \log_2 \max_i |v_i| \rceil},

which represents :math:`v` to about :math:`2^{-22}` of its largest entry (the
power-of-two scale is exact and keeps :math:`v/s` in float16's range).  A
product :math:`\tilde K v` is then one matrix product with the ``2k``
columns :math:`[v_{hi}, v_{lo}]`, added in float32; the pass reads
:math:`\tilde K` once whatever ``k``.

On the CPU (no 16-bit BLAS) the same algorithm runs with the float16 blocks
converted to float32 one row range at a time; it is how the GPU path is
tested without a GPU, and a way to hold twice the rows in the same memory.

Accuracy.  Each product is the float32 product of :math:`\tilde K` (to
about :math:`10^{-6}`), within about :math:`10^{-3}` of the product of
:math:`K`.  A solve sees :math:`\tilde K^T \tilde K = K^T K + E`, where
the rounding errors add a noise :math:`E` of about :math:`n \sigma^2` to the
diagonal (:math:`\sigma \approx 2^{-12}` of a typical entry): negligible
beside :math:`\lambda n K_{mm}` for moderate penalties, not for the
smallest eigenvalues at small ones.  Measured on float32 data (3000 rows,
60 centers, ``stoch-prop``): at :math:`\lambda = 10^{-3}` the data fit
moves by 5e-4 but the effective-dimension term rises by 7% (value 1.3e-2
from float64, against 3e-4 for a float32 cache); at
:math:`\lambda = 10^{-5}` by 17%.  On protein (36584 rows, 200 centers, 20
Adam steps) the tuning trajectory stays within 0.6% of the float32 one and
the test RMSE is 0.7371 against 0.7347.  On a smooth kernel (the HIGGS
setting's shape: d = 28, lengthscale 4, :math:`\lambda = 1/n`) the value
moves by 2e-5 and 20 Adam steps stay within 0.14%.  The default (``kernel_cache="auto"``)
therefore never holds :math:`K` in 16 bits; ``kernel_cache="float16"`` does.

Examples
--------
>>> import numpy as np
>>> from nyhopt.ops.half import split_half, join_half
>>> V = np.array([[3.0, -1e-3], [0.1, 2e-3]], dtype=np.float32)
>>> P, scale = split_half(V, np)
>>> P.dtype, P.shape, scale.tolist()
(dtype('float16'), (2, 4), [4.0, 0.00390625])
>>> bool(np.allclose(join_half(P.astype(np.float32), scale, axis=1), V, rtol=1e-6, atol=0))
True
"""
from __future__ import annotations

import numpy as np

from ..backend import is_cupy_namespace
from . import _cublas

__all__ = ["STORAGE", "split_half", "join_half", "half_matmul", "sgemm_ex", "kmv_block", "kmtv_block"]

#: The 16-bit storage dtype of a held kernel matrix.
STORAGE = np.dtype(np.float16)


def split_half(V, xp):
    """Columns of float32 ``V`` (r, k) as float16 ``[hi, lo]`` (r, 2k) and power-of-two scales (k,).

    ``V ≈ (hi + lo) * scale`` (see the module notes); a zero column gets scale 1.
    """
    V = V.astype(xp.float32, copy=False)
    top = xp.max(xp.abs(V), axis=0) if V.shape[0] else xp.zeros(V.shape[1], dtype=xp.float32)
    exponent = xp.ceil(xp.log2(xp.where(top > 0, top, xp.float32(1))))
    scale = xp.exp2(exponent).astype(xp.float32)
    Vs = V / scale
    hi = Vs.astype(xp.float16)
    lo = (Vs - hi.astype(xp.float32)).astype(xp.float16)
    return xp.concatenate([hi, lo], axis=1), scale


def join_half(Y, scale, axis):
    """``(Y_hi + Y_lo) * scale`` for float32 ``Y`` holding the two halves along ``axis`` (0 or 1)."""
    k = Y.shape[axis] // 2
    if axis == 0:
        return (Y[:k] + Y[k:]) * scale[:, None]
    return (Y[:, :k] + Y[:, k:]) * scale


def _row_major(a, xp):
    """``a`` itself when its rows are contiguous (unit column stride), else a C-ordered copy."""
    if a.strides[1] == a.itemsize and a.strides[0] >= a.shape[1] * a.itemsize and a.strides[0] > 0:
        return a
    return xp.ascontiguousarray(a)


def sgemm_ex(A, B, C, trans_a=False, beta=0.0):
    """Row-major ``C = op(A) B + beta C`` by cuBLAS ``SgemmEx``: float16 ``A``, ``B``, float32 ``C``.

    ``op(A)`` is ``A`` (M, K) or, with ``trans_a``, ``A^T`` for ``A`` (K, M);
    ``B`` is (K, N).  Every operand has unit column stride.  Float32
    accumulation and output (tensor cores where the device has them).  A
    row-major product is the column-major ``C^T = B^T op(A)^T``: the buffers
    as they are, operands swapped.
    """
    from cupy_backends.cuda.api import runtime
    from cupy_backends.cuda.libs import cublas

    M, K = (A.shape[1], A.shape[0]) if trans_a else A.shape
    N = B.shape[1]
    one, b = np.ones(1, np.float32), np.full(1, beta, np.float32)
    _cublas.call(
        "sgemmEx", cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_T if trans_a else cublas.CUBLAS_OP_N, N, M, K,
        one.ctypes.data, B.data.ptr, runtime.CUDA_R_16F, B.strides[0] // B.itemsize,
        A.data.ptr, runtime.CUDA_R_16F, A.strides[0] // A.itemsize,
        b.ctypes.data, C.data.ptr, runtime.CUDA_R_32F, C.strides[0] // C.itemsize,
    )
    return C


def _cublas_half_matmul(A, B):
    """``A @ B`` (float32) for float16 CuPy matrices, by cuBLAS ``SgemmEx`` (float32 accumulation)."""
    import cupy

    A, B = _row_major(A, cupy), _row_major(B, cupy)
    M, K = A.shape
    N = B.shape[1]
    C = cupy.empty((M, N), dtype=cupy.float32)
    if M == 0 or N == 0:
        return C
    if K == 0:
        C.fill(0)
        return C
    return sgemm_ex(A, B, C)


def half_matmul(A, B, xp):
    """``A @ B`` in float32 for float16 matrices ``A`` (M, K) and ``B`` (K, N).

    cuBLAS ``SgemmEx`` on a GPU; on the CPU the operands are converted to
    float32 first (the products of float16 numbers are exact in float32, so
    both round only in the float32 sums).
    """
    if is_cupy_namespace(xp):
        return _cublas_half_matmul(A, B)
    return A.astype(np.float32) @ B.astype(np.float32)


def kmv_block(Kb, Pt, scale, xp):
    r"""``(K_b V)^T`` (k, r), float32, for a block ``Kb`` (m, r) of :math:`\tilde K^T`.

    ``Pt`` (2k, m) and ``scale`` are :func:`split_half` of ``V`` (transposed).
    """
    return join_half(half_matmul(Pt, Kb, xp), scale, axis=0)


def kmtv_block(Kb, U, xp):
    r"""``K_b^T U`` (m, k), float32, for a block ``Kb`` (m, r) of :math:`\tilde K^T` and float32 ``U`` (r, k)."""
    Q, scale = split_half(U, xp)
    return join_half(half_matmul(Kb, Q, xp), scale, axis=1)
