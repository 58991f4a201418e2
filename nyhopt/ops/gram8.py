r"""The Gram matrix :math:`K^T K` on integer tensor cores: exact sums of 8-bit digits.

Tensor cores multiply 8- or 16-bit numbers far faster than a GPU's float32
or float64 units, but their floating-point sums are not IEEE: on an H100 the
float16 products with float32 sums (:mod:`nyhopt.ops.gram16`) truncate, and
at the HIGGS size (:math:`n = 10^7`, :math:`m = 5000`) they biased the
diagonal of :math:`G` low by 8 against a penalty :math:`n \lambda = 1`
(Falkon's CG then diverged).  Their *integer* sums are exact.  So each
kernel value :math:`k \in [0, 1]` is written as three signed 8-bit digits,

.. math::  k = \frac{1}{127}\Big(d_0 + \frac{d_1}{254} + \frac{d_2}{254^2}\Big) + r,
           \qquad d_0 \in [0, 127],\; d_1, d_2 \in [-127, 127],
           \qquad |r| \le \frac{1}{2 \cdot 127 \cdot 254^2} = 6.1 \cdot 10^{-8},

(each digit the nearest integer to what is left: :func:`split_digits`), and

.. math::  G \approx \frac{1}{127^2}\Big(D_0^T D_0
           + \frac{D_0^T D_1 + D_1^T D_0}{254}
           + \frac{D_1^T D_1 + D_0^T D_2 + D_2^T D_0}{254^2}\Big),

four products of digit planes :math:`D_p` (``m x b`` blocks) with int32
sums: ``D_0^T [D_0, D_1, D_2]`` and ``D_1^T D_1``, each exact as long as a
block has at most :math:`(2^{31} - 1) / 127^2 = 133\,144` rows
(:data:`BLOCK_ROWS` is :math:`2^{16}`).  Each block's integer sums are
combined and added into float64 :math:`G`.

Accuracy.  What is left out is the digits' rounding :math:`r` (unbiased,
below float32's own rounding of :math:`k` near 1) and the terms of order
:math:`254^{-3}` (``D_1^T D_2`` and beyond, sums of digits of both signs):
at :math:`n = 10^7` both move an entry of :math:`G` by about :math:`10^{-4}`,
nothing near :math:`n \lambda`.  :math:`G` is the Gram matrix of the float32
kernel to about float32's precision, with no bias from the sums; a float64
product of the same float32 blocks agrees to about :math:`10^{-7}` of
:math:`\|G\|` (the tests check :math:`2 \cdot 10^{-7}`).

Cost.  :math:`4 n m^2` int8 multiply-adds, where the float64 route does
:math:`n m^2` float64 ones: at :math:`n = 10^7`, :math:`m = 5000`, about
:math:`2 \cdot 10^{15}` integer operations (about 1 s at an H100's int8
peak, against 10.7 s measured for float64 products), plus the kernel pass
that writes the digits and the float64 additions of each block's sums.

Layout.  The digits are written transposed (``m x b``, the rows of the data
contiguous) by ``nh_kernel_digits`` straight from the distance product
:math:`Z_s X_s^T`, which is the layout integer tensor-core GEMMs want (both
operands contiguous along the sum, cuBLAS ``GemmEx`` ``T``/``N`` with int8
inputs and int32 output); every length is padded to a multiple of
:data:`PAD` with zero digits.  The same pass leaves the float32 block
:math:`K_b^T` in place, from which :math:`K^T U` is one float32 GEMM per
block, added into float64.

On the CPU the same algorithm runs with NumPy: digits from the reference
kernel, products of digit planes by float64 BLAS (exact: every partial sum
is an integer below :math:`2^{53}`).  It is the host model the tests check,
term by term, against the CUDA kernel's emulation and against float64.

Examples
--------
>>> import numpy as np
>>> import nyhopt as nh
>>> from nyhopt.ops.gram8 import gram_matrix8
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(2000, 3)).astype(np.float32)
>>> G, _ = gram_matrix8(nh.GaussianKernel(1.5), X, X[:50], block=300)
>>> K = nh.ops.kernel_matrix(nh.GaussianKernel(1.5), X, X[:50]).astype(np.float64)
>>> bool(np.linalg.norm(G - K.T @ K) < 1e-7 * np.linalg.norm(K.T @ K))
True
"""
from __future__ import annotations

import numpy as np

from ..backend._config import block_rows
from ..backend import is_cupy_namespace
from . import _cublas, _operand, _prepare, _reference
from ..errors import warn_user

__all__ = ["BLOCK_ROWS", "PAD", "BASE0", "BASE", "split_digits", "join_digits", "digit_products",
           "add_digit_products", "gram_matrix8", "device_check", "failed_here"]

#: Most rows per integer product: every int32 sum stays below ``BLOCK_ROWS * 127^2 < 2^31``.
BLOCK_ROWS = 1 << 16
#: Lengths (rows of a block, centers) are padded to a multiple of this with zero digits.
PAD = 16
#: Scale of the leading digit: ``d0 = round(127 k)``.
BASE0 = 127.0
#: Scale of each further digit.
BASE = 254.0
#: Weights of the digit products in :math:`G`: ``D0'D0``, ``D1'D0`` (twice, before symmetrizing), ``D1'D1 + 2 D2'D0``.
_W0 = 1.0 / (BASE0 * BASE0)
_W1 = 2.0 / (BASE0 * BASE0 * BASE)
_W2 = 1.0 / (BASE0 * BASE0 * BASE * BASE)


def _ceil(v, q=PAD):
    return -(-int(v) // q) * q


def split_digits(K, xp=np):
    r"""Three int8 digit planes ``(3,) + K.shape`` of kernel values ``K`` in :math:`[0, 1]` (module notes).

    The host form of what ``nh_kernel_digits`` writes on a GPU (the same
    operations in float64, ties to even); values outside :math:`[0, 1]` are
    clipped and NaN gives 0.
    """
    v = xp.asarray(K, dtype=xp.float64)
    v = xp.where(v >= 0, xp.minimum(v, 1.0), 0.0) * BASE0
    out = xp.empty((3,) + v.shape, dtype=xp.int8)
    for p in range(3):
        digit = xp.rint(v)
        out[p] = digit
        v = (v - digit) * BASE
    return out


def join_digits(D, xp=np):
    """The values ``(d0 + d1 / 254 + d2 / 254^2) / 127`` (float64) of digit planes ``D`` (3, ...)."""
    D = D.astype(xp.float64)
    return (D[0] + (D[1] + D[2] / BASE) / BASE) / BASE0


def digit_products(D, rows, C1, C2, xp=np):
    r"""Integer products of one block's digit planes, into ``C1``, ``C2``.

    Parameters
    ----------
    D : array (3, mp, ld), int8
        Digit planes of :math:`K_b^T` (``mp`` centers padded, ``ld`` rows).
    rows : int
        Length of the sums (a multiple of :data:`PAD`, at most ``ld`` and
        :data:`BLOCK_ROWS`); the digits past the block's rows are zero.
    C1 : array (3, mp, mp)
        Receives :math:`D_p D_0^T`, ``p = 0, 1, 2`` (that is
        :math:`K_p^T K_0` of the digit matrices).
    C2 : array (mp, mp)
        Receives :math:`D_1 D_1^T`.

    On a GPU: two cuBLAS ``GemmEx`` calls, int8 inputs, int32 sums and
    output (:func:`_igemm_tn`).  On the CPU: float64 products of the digit
    values, exact (every partial sum is an integer below ``2^53``).
    """
    if rows > BLOCK_ROWS:
        raise ValueError(f"at most {BLOCK_ROWS} rows per integer product (int32 sums), got {rows}")
    mp = D.shape[1]
    if is_cupy_namespace(xp):
        _igemm_tn(D[0], D.reshape(3 * mp, D.shape[2]), C1.reshape(3 * mp, mp), rows)
        _igemm_tn(D[1], D[1], C2, rows)
        return C1, C2
    A = D[:, :, :rows].astype(np.float64)
    C1[...] = (A.reshape(3 * mp, rows) @ A[0].T).reshape(3, mp, mp)
    C2[...] = A[1] @ A[1].T
    return C1, C2


def _igemm_tn(A, B, C, rows):
    """``C = B A^T`` (int32, row-major (NB, NA)) for int8 row-major ``A`` (NA, ld), ``B`` (NB, ld), sums over ``rows``.

    cuBLAS ``GemmEx``, column-major: ``C^T`` (NA x NB, ``ldc = NA``) is
    ``op(A') op(B')`` with ``A'`` the (ld x NA) matrix ``A^T`` transposed
    (``T``) and ``B'`` (ld x NB) as it is (``N``): both contiguous along the
    sum, the layout of integer tensor-core products.  Compute type
    ``CUBLAS_COMPUTE_32I``, host scalars ``alpha = 1``, ``beta = 0`` in int32.
    """
    from cupy_backends.cuda.libs import cublas

    na, ld = A.shape
    nb = B.shape[0]
    if B.shape[1] != ld or C.shape != (nb, na) or not (A.flags.c_contiguous and B.flags.c_contiguous
                                                       and C.flags.c_contiguous):
        raise ValueError("integer products need C-contiguous operands of matching shapes")
    one, zero = np.ones(1, np.int32), np.zeros(1, np.int32)
    _cublas.call(
        "gemmEx", cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_N, na, nb, int(rows),
        one.ctypes.data, A.data.ptr, _CUDA_R_8I, ld, B.data.ptr, _CUDA_R_8I, ld,
        zero.ctypes.data, C.data.ptr, _CUDA_R_32I, na, cublas.CUBLAS_COMPUTE_32I, _GEMM_DEFAULT,
    )
    return C


# cudaDataType and cublasGemmAlgo_t codes (CUDA's headers).
_CUDA_R_8I, _CUDA_R_32I, _GEMM_DEFAULT = 3, 10, -1

_ADD = {}


def add_digit_products(G, C1, C2, m, xp=np):
    r"""``G += w0 C1[0] + w1 C1[1] + w2 (C2 + 2 C1[2])`` on the leading ``m x m`` entries (float64).

    The weights of the module notes, with the cross terms counted twice:
    :math:`G` is symmetrized at the end.  One elementwise pass on a GPU.
    """
    if not is_cupy_namespace(xp):
        return _add_host(G, C1, C2, m)
    if "k" not in _ADD:
        _ADD["k"] = xp.ElementwiseKernel(
            "int32 a, int32 b, int32 c, int32 e", "float64 g",
            f"g += {_W0!r} * (double)a + {_W1!r} * (double)b + {_W2!r} * ((double)c + 2.0 * (double)e)",
            "nh_add_digit_products")
    _ADD["k"](C1[0, :m, :m], C1[1, :m, :m], C2[:m, :m], C1[2, :m, :m], G)
    return G


def _add_host(G, C1, C2, m):
    """:func:`add_digit_products` with NumPy (integer sums of any integer or float64 dtype)."""
    f64 = np.float64
    G += _W0 * C1[0, :m, :m].astype(f64) + _W1 * C1[1, :m, :m].astype(f64) + _W2 * (
        C2[:m, :m].astype(f64) + 2.0 * C1[2, :m, :m].astype(f64))
    return G


def gram_matrix8(kernel, X, Z, U=None, *, block=None, checked=False):
    r"""``(K^T K, K^T U or None)`` for float32 data, from 8-bit digits on integer tensor cores (module notes).

    Parameters
    ----------
    kernel : Kernel
        A kernel with values in :math:`[0, 1]` (every kernel of nyhopt).
    X : array (n, d), float32
    Z : array (m, d)
    U : array (n,) or (n, k), optional
    block : int, optional
        Rows per integer product (default: as many as the memory budget
        allows, at most :data:`BLOCK_ROWS`).
    checked : bool, default False
        ``X`` and ``Z`` are valid already (:func:`nyhopt.ops.gram.gram_matrix`
        checked them; on a GPU each check is a host synchronization).

    Returns
    -------
    G : array (m, m), float64, exactly symmetric
    KtU : array (m, k) (or (m,)), float64, or None
    """
    xp, X, Z, ell = _prepare(kernel, X, Z, (U, "U"), checked=checked)
    if X.dtype != np.float32:
        raise TypeError(f"gram_matrix8 needs float32 data, got {X.dtype.name}")
    n, m = X.shape[0], Z.shape[0]
    U2 = None if U is None else _operand(U, "U", n, X.dtype, xp)
    k = 0 if U2 is None else U2.shape[1]
    mp = _ceil(m)
    # Per row of a block: the float32 block and three digits per center.
    b = min(block_rows(n, m, 7, n_temps=1, per_row=k), BLOCK_ROWS) if block is None else int(block)
    if not 1 <= b <= BLOCK_ROWS:
        raise ValueError(f"block must be in [1, {BLOCK_ROWS}], got {block}")
    b = min(b, n) if n else 1
    ld = _ceil(b)
    G = xp.zeros((m, m), dtype=xp.float64)
    KtU = None if U2 is None else xp.zeros((m, k), dtype=xp.float64)
    D = xp.zeros((3, mp, ld), dtype=xp.int8)  # rows m..mp stay zero
    C1 = xp.empty((3, mp, mp), dtype=xp.int32 if is_cupy_namespace(xp) else xp.float64)
    C2 = xp.empty((mp, mp), dtype=C1.dtype)
    gpu = is_cupy_namespace(xp)
    flat = xp.empty(m * b, dtype=xp.float32)
    pts = None
    if gpu:
        from ._cupy import kernel_block_digits

        pts = kernel_block_digits(kernel, X, Z, ell, xp)
    for lo in range(0, n, b):
        hi = min(n, lo + b)
        Kt = flat[: m * (hi - lo)].reshape(m, hi - lo)
        if gpu:
            pts.block_digits(slice(lo, hi), Kt, D)
        else:
            Kt[...] = _reference.kernel_matrix(kernel, X[lo:hi], Z, ell, xp).T
            D[:, :m, : hi - lo] = split_digits(Kt, xp)
            D[:, :m, hi - lo:] = 0
        digit_products(D, _ceil(hi - lo), C1, C2, xp)
        add_digit_products(G, C1, C2, m, xp)
        if KtU is not None:
            KtU += (Kt @ U2[lo:hi]).astype(xp.float64)
    G = 0.5 * (G + G.T)
    if KtU is not None and xp.asarray(U).ndim == 1:
        KtU = KtU[:, 0]
    return G, KtU


#: Rows and centers of :func:`device_check`'s sample (no multiple of :data:`PAD`).
CHECK_ROWS, CHECK_CENTERS = 203, 37
#: Largest difference of :func:`device_check`'s float32 kernel values (in [0, 1]) from the
#: reference evaluation of the same points: room for float32 cancellation in distances
#: from a GEMM; a wrong layout or formula is off by O(1).
CHECK_KERNEL_TOL = 1e-3

_CHECKED = {}


def device_check(kernel, X, Z, xp):
    r"""Whether the int8 route computes, on the current GPU, what its host model computes.

    Run once per device and kernel kind (the result is kept for the
    process), on the first :data:`CHECK_ROWS` rows of ``X`` and
    :data:`CHECK_CENTERS` rows of ``Z``: the digits ``nh_kernel_digits``
    writes must be exactly :func:`split_digits` of the float32 values it
    leaves (zero in the padding), the integer products of
    :func:`digit_products` exactly the float64 products of the same digits,
    and the float32 values within :data:`CHECK_KERNEL_TOL` of the
    reference kernel.  A failure (or an error of cuBLAS or the kernel) warns
    once with what failed and returns False: the caller then forms
    :math:`G` in float64 products.  Always True on the host, whose route is
    exact by construction.

    Parameters
    ----------
    kernel : Kernel
    X, Z : CuPy arrays (n, d), (m, d), float32, already validated
    xp : module
    """
    if not is_cupy_namespace(xp) or X.shape[0] == 0 or Z.shape[0] == 0:
        return True
    key = (int(xp.cuda.Device().id), kernel.kind)
    if key not in _CHECKED:
        try:
            failed = _device_mismatch(kernel, X[:CHECK_ROWS], Z[:CHECK_CENTERS], xp)
        except Exception as exc:  # a cuBLAS status or a launch failure: the route does not run here
            failed = f"{type(exc).__name__}: {exc}"
        if failed:
            warn_user(f"nyhopt: the int8 tensor-core Gram route failed its check on GPU {key[0]} "
                      f"({failed}); Gram matrices there are formed in float64 products "
                      "(nyhopt.ops.gram.TENSOR_CORES = False chooses that without the check)",
                      RuntimeWarning)
        _CHECKED[key] = not failed
    return _CHECKED[key]


def failed_here():
    """Whether :func:`device_check` failed on the current GPU in this process (for any kernel)."""
    failed = {dev for (dev, _), ok in _CHECKED.items() if not ok}
    if not failed:
        return False
    import cupy

    return int(cupy.cuda.Device().id) in failed


def _device_mismatch(kernel, X, Z, xp):
    """What of :func:`device_check` fails on ``X``, ``Z`` (an empty string when nothing does).

    The device runs only what the route runs (the digits kernel, the integer
    products); the references are computed on the host from copies of the
    few rows, so that the check compiles nothing of its own.
    """
    from ._cupy import kernel_block_digits

    ell = kernel.lengthscale_array(X.shape[1])
    b, m = X.shape[0], Z.shape[0]
    mp, ld = _ceil(m), _ceil(b)
    Kt = xp.empty((m, b), dtype=xp.float32)
    D = xp.zeros((3, mp, ld), dtype=xp.int8)
    D[:, :m] = 7  # the kernel must overwrite the padding columns too
    kernel_block_digits(kernel, X, Z, ell, xp).block_digits(slice(0, b), Kt, D)
    C1, C2 = xp.empty((3, mp, mp), dtype=xp.int32), xp.empty((mp, mp), dtype=xp.int32)
    digit_products(D, ld, C1, C2, xp)
    Kt, D, C1, C2 = (a.get() for a in (Kt, D, C1, C2))
    want = _reference.kernel_matrix(kernel, X.get(), Z.get(), ell, np)
    if not np.abs(Kt.astype(np.float64) - want.T).max() <= CHECK_KERNEL_TOL:
        return "kernel values"
    digits = np.zeros_like(D)
    digits[:, :m, :b] = split_digits(Kt)
    if not np.array_equal(D, digits):
        return "digits"
    A = D.astype(np.float64)
    if not (np.array_equal(C1, (A.reshape(3 * mp, ld) @ A[0].T).reshape(3, mp, mp))
            and np.array_equal(C2, A[1] @ A[1].T)):
        return "integer products"
    return ""
