"""GPU (CuPy) block-wise kernel products and adjoints.

Same functions and signatures as :mod:`nyhopt.ops._reference`
(``op(kernel, X, Z, <operands>, ell, xp, ...)`` with ``xp = cupy``).

* Kernel blocks are evaluated in one pass over the block.  For kernels of
  the squared distance that tolerate its GEMM form (Gaussian, Matern), one
  cuBLAS GEMM forms ``Xs Zs^T`` (tensor-core friendly, any ``d``) and the
  fused CUDA kernel ``nh_kernel_dot`` (``_cuda/kernel_dot.cu``) turns it in
  place into ``phi(|x|^2 + |z|^2 - 2 x.z)`` (norms, clamp, profile and the
  output cast in one read and one write), instead of a chain of elementwise
  passes over the ``b x m`` block.  The points are centered first (distances
  do not change), so the GEMM form loses no more than for centered data.
  The Laplacian, whose cusp needs exact distances, and the exactly symmetric
  ``k(X, X)`` use ``nh_kernel_block`` (``_cuda/kernel_block.cu``), which sums
  coordinate differences (the reference path beyond ``FUSED_BLOCK_MAX_D``
  features).  The products with the operands (``K V``, ``K^T U``,
  ``K^T (K V)``) are cuBLAS GEMMs on row blocks sized by the memory budget,
  exactly as in the reference.  ``nh_kernel_dot`` also writes a block as
  float16 hi/lo parts for the tensor-core Gram matrix
  (:mod:`nyhopt.ops.gram16`, :func:`kernel_block_half`), and
  ``nh_kernel_digits`` (``_cuda/kernel_digits.cu``) writes a transposed block
  and its int8 digits for the integer tensor-core Gram matrix
  (:mod:`nyhopt.ops.gram8`, :func:`kernel_block_digits`).
* Adjoints run the fused CUDA kernel ``nh_adjoint`` (``_cuda/adjoint.cu``):
  ``W_ij = G_ij phi'(s_ij)`` (``G_ij = P_i . Q_j`` for the low-rank form) is
  reduced on the fly into the center, lengthscale and ``X`` sums, with no
  ``n x m`` (nor ``b x m``) array.  Per-thread sums over 4 rows are in the
  data dtype, every sum across threads and blocks in float64.

CuPy is imported lazily by :mod:`nyhopt.ops` (this module is only loaded for
CuPy inputs) and the CUDA modules are compiled on first use, once per device
(:func:`nyhopt.ops._cuda_compile.get_function`).

Examples
--------
On a machine with a GPU, through the public entry points (which dispatch
CuPy arrays here)::

    import cupy, nyhopt as nh
    from nyhopt import ops
    X = cupy.random.standard_normal((100000, 8))
    k = nh.GaussianKernel(1.0)
    KtKV, _ = ops.normal_matvec(k, X, X[:1000], cupy.ones((1000, 21)))
    grad = ops.adjoint_lowrank(k, X, X[:1000], cupy.ones((100000, 3)), cupy.ones((1000, 3)))
"""
from __future__ import annotations

import os

import numpy as np

from ..backend._config import block_rows
from ._grad import KernelGrad
from . import _reference
from ._cuda_compile import KINDS, get_function

__all__ = [
    "ADJOINT_GEMM",
    "DISTANCE_GEMM",
    "FUSED_BLOCK_MAX_D",
    "FUSED_ADJOINT_MAX_D",
    "kernel_matrix",
    "kmv",
    "kmtv",
    "normal_matvec",
    "adjoint_dense",
    "adjoint_lowrank",
    "adjoint_residual",
]

#: Largest number of features for which kernel blocks use the fused CUDA
#: kernel (beyond, GEMM-based distances are faster).
FUSED_BLOCK_MAX_D = 64
#: Largest number of features of the fused adjoint: its shared memory holds
#: ``33 d`` doubles, within the 48 KiB every CUDA device grants by default.
FUSED_ADJOINT_MAX_D = (48 * 1024) // (33 * 8)

_BLOCK = (32, 8)  # threads: 32 centers (one warp) x 8 rows
_BLOCKS_PER_SM = 8  # adjoint grid: about this many blocks per multiprocessor
_MAX_GRID_Y = 65535


def _removed_fused_setting(value):
    """The fused streaming products were removed: ``NYHOPT_CUDA_FUSED`` other than off is an error."""
    if value.strip().lower() not in ("", "0"):
        raise ValueError(
            f"NYHOPT_CUDA_FUSED={value!r}: the fused streaming products were removed (cuBLAS blocks with "
            "one fused kernel evaluation are faster, see docs/performance-ops.md); unset the variable")


_removed_fused_setting(os.environ.get("NYHOPT_CUDA_FUSED", ""))


def _fused(kernel, X, max_d):
    return kernel.kind in KINDS and X.shape[1] <= max_d


#: Kernel blocks of the kinds that allow it from a distance GEMM plus ``nh_kernel_dot``
#: (``False``: every block from the coordinate-difference kernel ``nh_kernel_block``).
DISTANCE_GEMM = True


#: The low-rank adjoint from GEMMs and one fused pass (:mod:`nyhopt.ops._adjoint_gemm`) instead of
#: ``nh_adjoint`` (``asv_bench/gpu_report.py blocks`` times both: on an H100 at n = 1e7, m = 5000,
#: d = 28, k = 21, float32, 1.49 s against 2.65 s, results within 2e-7 relative).
ADJOINT_GEMM = True


def _uses_dot(kernel):
    """Whether blocks of ``kernel`` come from a GEMM plus ``nh_kernel_dot`` (see the module notes)."""
    return DISTANCE_GEMM and kernel.kind in KINDS and not kernel.needs_exact_distances


def _scaled_inputs(X, Z, ell, xp):
    """C-contiguous ``X / ell - c`` (n, d) and ``(Z / ell - c)^T`` (d, m), ``c`` the mean scaled center.

    Distances do not depend on ``c``; centering keeps the GEMM form of the
    squared distance (``nh_kernel_dot``) from cancelling the norms of
    uncentered data.
    """
    Xs, Zs = _reference.scaled(X, ell, xp), _reference.scaled(Z, ell, xp)
    if Zs.shape[0]:
        c = Zs.mean(axis=0)
        Xs, Zs = Xs - c, Zs - c
    return xp.ascontiguousarray(Xs), xp.ascontiguousarray(Zs.T)


def _i32(v):
    return np.int32(v)


def _grid(b, m):
    return ((m + _BLOCK[0] - 1) // _BLOCK[0], min((b + _BLOCK[1] - 1) // _BLOCK[1], _MAX_GRID_Y))


class _Points:
    """Scaled, centered rows and centers of one call, with the squared norms of the GEMM form."""

    def __init__(self, kernel, X, Z, ell, xp, dot=None):
        self.kernel, self.xp, self.X, self.Z, self.ell = kernel, xp, X, Z, ell
        self.Xs, self.Zt = _scaled_inputs(X, Z, ell, xp)
        self.dot = _uses_dot(kernel)
        self.xn = self.zn = None
        if self.dot:
            self.xn = (self.Xs * self.Xs).sum(axis=1)
            self.zn = (self.Zt * self.Zt).sum(axis=0)
            # An overflowing norm would give inf - inf = NaN: sum differences instead (as the reference).
            # ``dot=True``: the caller bounded the norms of all its blocks at once (nyhopt.ops._blocks.dot_safe).
            self.dot = dot is True or bool(xp.isfinite(self.xn.sum() + self.zn.sum()))
        self.exact = not self.dot and _fused(kernel, X, FUSED_BLOCK_MAX_D)

    def block(self, sl, out):
        """``k`` of the rows ``sl`` against every center into ``out`` (b, m), in the data dtype."""
        Xr = self.Xs[sl]
        b, m = Xr.shape[0], self.Zt.shape[1]
        if b == 0:
            return out
        if self.dot:
            self.xp.matmul(Xr, self.Zt, out=out)
            fn = get_function("kernel_dot", Xr.dtype, self.kernel.kind, 0)
            fn(_grid(b, m), _BLOCK, (out, self.xn[sl], self.zn, out, _i32(b), _i32(m)))
            return out
        if self.kernel.kind not in KINDS:  # a kernel without CUDA code: the reference
            out[...] = _reference.kernel_matrix(self.kernel, self.X[sl], self.Z, self.ell, self.xp)
            return out
        fn = get_function("kernel_block", Xr.dtype, self.kernel.kind)
        fn(_grid(b, m), _BLOCK, (Xr, self.Zt, out, _i32(b), _i32(m), _i32(Xr.shape[1])))
        return out

    def block_half(self, sl, out, work):
        """``k`` of the rows ``sl`` as float16 ``[hi | lo]`` parts into ``out`` (b, 2m); see ``kernel_block_half``.

        ``work`` is a float32 (>= b, m) buffer for the distance product.
        """
        xp = self.xp
        Xr = self.Xs[sl]
        b, m = Xr.shape[0], self.Zt.shape[1]
        if b == 0:
            return out
        g = work[:b]
        if self.dot:
            xp.matmul(Xr, self.Zt, out=g)
            fn = get_function("kernel_dot", Xr.dtype, self.kernel.kind, 1)
            fn(_grid(b, m), _BLOCK, (g, self.xn[sl], self.zn, out, _i32(b), _i32(m)))
            return out
        self.block(sl, g)
        _split_kernel(xp)(g, out[:, :m], out[:, m:])
        return out

    def block_digits(self, sl, kt, digits):
        """``k`` of the rows ``sl``, transposed, into float32 ``kt`` (m, b) and its int8 digits into ``digits``.

        ``digits`` (3, mp, ld) receives the three digit planes of
        :mod:`nyhopt.ops.gram8` in its first ``m`` rows (columns past ``b``
        set to zero); see ``kernel_block_digits``.
        """
        xp = self.xp
        Xr = self.Xs[sl]
        b, m = Xr.shape[0], self.Zt.shape[1]
        ld = digits.shape[2]
        if b == 0:
            return kt
        grid = ((ld + _BLOCK[0] - 1) // _BLOCK[0], min((m + _BLOCK[1] - 1) // _BLOCK[1], _MAX_GRID_Y))
        tail = (_i32(b), _i32(m), _i32(ld), np.int64(digits.shape[1] * ld))
        if self.dot:
            xp.matmul(self.Zt.T, Xr.T, out=kt)
            fn = get_function("kernel_digits", Xr.dtype, self.kernel.kind, 0)
            fn(grid, _BLOCK, (kt, self.xn[sl], self.zn, digits) + tail)
            return kt
        work = xp.empty((b, m), dtype=Xr.dtype)
        kt[...] = self.block(sl, work).T
        fn = get_function("kernel_digits", Xr.dtype, KINDS[0], 1)  # values given: the kind is not used
        fn(grid, _BLOCK, (kt, kt, kt, digits) + tail)
        return kt


_SPLIT = {}


def _split_kernel(xp):
    """One elementwise pass ``k -> (fl16(k), fl16(2048 (k - fl16(k))))`` (the exact-distance kernels)."""
    if "k" not in _SPLIT:
        _SPLIT["k"] = xp.ElementwiseKernel(
            "float32 k", "float16 hi, float16 lo",
            "hi = (float16)k; lo = (float16)((k - (float)hi) * 2048.0f)", "nh_split_half")
    return _SPLIT["k"]


def _blocks(n, m, itemsize, per_row):
    b = block_rows(n, m, itemsize, n_temps=1, per_row=per_row)
    for start in range(0, n, b):
        yield slice(start, min(start + b, n)), b


def kernel_block_half(kernel, X, Z, ell, xp):
    """A :class:`_Points` of ``X``, ``Z`` for :mod:`nyhopt.ops.gram16` (``.block_half`` per row range).

    Used with float32 data only; the reference path (``d > FUSED_BLOCK_MAX_D``
    for the Laplacian) evaluates float32 blocks and splits them.
    """
    return _Points(kernel, X, Z, ell, xp)


def kernel_block_digits(kernel, X, Z, ell, xp):
    """A :class:`_Points` of ``X``, ``Z`` for :mod:`nyhopt.ops.gram8` (``.block_digits`` per row range)."""
    return _Points(kernel, X, Z, ell, xp)


def kernel_matrix(kernel, X, Z, ell, xp, symmetric=False, dot=None):
    """Dense ``k(X, Z)`` (n, m) in the dtype of ``X``.

    With ``symmetric`` the exact-difference kernel runs on the same rounded
    numbers on both sides, so ``k(X, X)`` is exactly symmetric with a unit
    diagonal.  ``dot=True``: the squared norms are known not to overflow
    (no check, no host synchronization; see :class:`_Points`).
    """
    if symmetric:
        if not _fused(kernel, X, FUSED_BLOCK_MAX_D):
            return _reference.kernel_matrix(kernel, X, Z, ell, xp, symmetric=True)
        Xs, _ = _scaled_inputs(X, X, ell, xp)
        Zt = xp.ascontiguousarray(Xs.T)
        out = xp.empty((X.shape[0], X.shape[0]), dtype=X.dtype)
        n = X.shape[0]
        if n:
            fn = get_function("kernel_block", X.dtype, kernel.kind)
            fn(_grid(n, n), _BLOCK, (Xs, Zt, out, _i32(n), _i32(n), _i32(X.shape[1])))
        return out
    pts = _Points(kernel, X, Z, ell, xp, dot)
    if not (pts.dot or pts.exact):
        return _reference.kernel_matrix(kernel, X, Z, ell, xp)
    return pts.block(slice(0, X.shape[0]), xp.empty((X.shape[0], Z.shape[0]), dtype=X.dtype))


def kmv(kernel, X, Z, V, ell, xp, dot=None):
    """``k(X, Z) @ V`` for V (m, k); result (n, k).  ``dot``: as for :func:`kernel_matrix`."""
    pts = _Points(kernel, X, Z, ell, xp, dot)
    if not (pts.dot or pts.exact):
        return _reference.kmv(kernel, X, Z, V, ell, xp)
    n, m = X.shape[0], Z.shape[0]
    out = xp.empty((n, V.shape[1]), dtype=X.dtype)
    buf = None
    for sl, b in _blocks(n, m, X.dtype.itemsize, V.shape[1]):
        buf = xp.empty((b, m), dtype=X.dtype) if buf is None else buf
        out[sl] = pts.block(sl, buf[: sl.stop - sl.start]) @ V
    return out


def kmtv(kernel, X, Z, U, ell, xp, dot=None):
    """``k(X, Z).T @ U`` for U (n, k); result (m, k).  ``dot``: as for :func:`kernel_matrix`."""
    pts = _Points(kernel, X, Z, ell, xp, dot)
    if not (pts.dot or pts.exact):
        return _reference.kmtv(kernel, X, Z, U, ell, xp)
    n, m = X.shape[0], Z.shape[0]
    out = xp.zeros((m, U.shape[1]), dtype=xp.float64)  # sums across blocks in float64, as the CPU paths
    buf = None
    for sl, b in _blocks(n, m, X.dtype.itemsize, U.shape[1]):
        buf = xp.empty((b, m), dtype=X.dtype) if buf is None else buf
        out += pts.block(sl, buf[: sl.stop - sl.start]).T @ U[sl]
    return out.astype(X.dtype, copy=False)


def normal_matvec(kernel, X, Z, V, ell, xp, U=None, kv=False, dot=None):
    """``(K^T K V, K^T U or None)`` in one pass over ``X``; both (m, k) (and ``K V`` (n, k) with ``kv``).

    ``dot``: as for :func:`kernel_matrix`.
    """
    pts = _Points(kernel, X, Z, ell, xp, dot)
    if not (pts.dot or pts.exact):
        return _reference.normal_matvec(kernel, X, Z, V, ell, xp, U=U, kv=kv)
    n, m = X.shape[0], Z.shape[0]
    out = xp.zeros((m, V.shape[1]), dtype=xp.float64)  # sums across blocks in float64, as the CPU paths
    outu = None if U is None else xp.zeros((m, U.shape[1]), dtype=xp.float64)
    KV = xp.empty((n, V.shape[1]), dtype=X.dtype) if kv else None
    per_row = 2 * V.shape[1] + (0 if U is None else U.shape[1])
    buf = None
    for sl, b in _blocks(n, m, X.dtype.itemsize, per_row):
        buf = xp.empty((b, m), dtype=X.dtype) if buf is None else buf
        Kb = pts.block(sl, buf[: sl.stop - sl.start])
        KbV = Kb @ V
        if kv:
            KV[sl] = KbV
        out += Kb.T @ KbV
        if U is not None:
            outu += Kb.T @ U[sl]
    res = (out.astype(X.dtype, copy=False), None if outu is None else outu.astype(X.dtype, copy=False))
    return res + (KV,) if kv else res


# ---------------------------------------------------------------------- adjoints
def _wanted(wrt):
    wrt = set(wrt)
    unknown = wrt - {"lengthscale", "centers", "X"}
    if unknown:
        raise ValueError(f"wrt must name 'lengthscale', 'centers' or 'X', got {sorted(unknown)}")
    return ("centers" in wrt) | (("lengthscale" in wrt) << 1) | (("X" in wrt) << 2)


def _multiprocessors(xp):
    """Number of streaming multiprocessors of the current device."""
    return xp.cuda.Device().attributes["MultiProcessorCount"]


def _grid_y(n, gx, xp):
    """Blocks along the rows: enough to fill the device, each striding over tiles."""
    sms = _multiprocessors(xp)
    tiles = (n + 31) // 32
    return int(max(1, min(tiles, _MAX_GRID_Y, -(-_BLOCKS_PER_SM * sms // gx))))


def _adjoint(kernel, X, Z, ell, xp, wanted, C, Qt, lowrank):
    n, d = X.shape
    m = Z.shape[0]
    Xs, Zt = _scaled_inputs(X, Z, ell, xp)
    f64 = xp.float64
    gz = xp.zeros((d, m) if wanted & 1 else (1,), dtype=f64)
    ge = xp.zeros(d, dtype=f64)
    gx = xp.zeros((n, d) if wanted & 4 else (1,), dtype=f64)
    r = Qt.shape[0] if lowrank else 0
    fn = get_function("adjoint", X.dtype, kernel.kind, lowrank)
    grid_x = (m + 31) // 32
    grid = (grid_x, _grid_y(n, grid_x, xp))
    args = (Xs, Zt, C, Qt, _i32(n), _i32(m), _i32(d), _i32(r), _i32(wanted), gz, ge, gx)
    fn(grid, _BLOCK, args, shared_mem=33 * d * 8)
    return _finish_adjoint(gz, ge, gx, ell, wanted, xp)


def _finish_adjoint(gz, ge, gx, ell, wanted, xp):
    """:class:`KernelGrad` from the raw sums of ``nh_adjoint`` (``gz`` (d, m), ``ge`` (d,), ``gx`` (n, d))."""
    f64 = xp.float64
    ell_dev = xp.asarray(ell, dtype=f64)
    g_ell = g_z = g_x = None
    if wanted & 2:
        g = -2.0 * ge / ell_dev
        g_ell = (g.sum(keepdims=True) if np.size(ell) == 1 else g).reshape(np.shape(ell))
    if wanted & 1:
        g_z = xp.ascontiguousarray((2.0 * gz / ell_dev[:, None]).T)
    if wanted & 4:
        g_x = gx
        g_x *= 2.0 / ell_dev
    return KernelGrad(g_ell, g_z, g_x)


def adjoint_dense(kernel, X, Z, G, ell, xp, wrt=("lengthscale", "centers")):
    """Gradients of ``<G, k(X, Z)>`` for a dense cotangent ``G`` (n, m); float64."""
    wanted = _wanted(wrt)
    if not _fused(kernel, X, FUSED_ADJOINT_MAX_D):
        return _reference.adjoint_dense(kernel, X, Z, G, ell, xp, wrt=wrt)
    G = xp.ascontiguousarray(G)
    return _adjoint(kernel, X, Z, ell, xp, wanted, G, G, lowrank=False)


def adjoint_lowrank(kernel, X, Z, P, Q, ell, xp, wrt=("lengthscale", "centers")):
    """Gradients of ``<P Q^T, k(X, Z)>``; ``P`` (n, k), ``Q`` (m, k); float64.

    With :data:`ADJOINT_GEMM` (kinds of the distance GEMM) the sums come from
    GEMMs and one fused pass (:mod:`nyhopt.ops._adjoint_gemm`), else from ``nh_adjoint``.
    """
    wanted = _wanted(wrt)
    if ADJOINT_GEMM and _uses_dot(kernel):
        from ._adjoint_gemm import lowrank_sums

        Xs, Zt = _scaled_inputs(X, Z, ell, xp)
        sums = lowrank_sums(kernel, Xs, Zt, xp.ascontiguousarray(P), xp.ascontiguousarray(Q), wanted, xp)
        return _finish_adjoint(*sums, ell, wanted, xp)
    if not _fused(kernel, X, FUSED_ADJOINT_MAX_D):
        return _reference.adjoint_lowrank(kernel, X, Z, P, Q, ell, xp, wrt=wrt)
    P = xp.ascontiguousarray(P)
    Qt = xp.ascontiguousarray(Q.T)
    return _adjoint(kernel, X, Z, ell, xp, wanted, P, Qt, lowrank=True)


def adjoint_residual(kernel, X, Z, P0, B, Q, ell, xp, wrt=("lengthscale", "centers"), dot=None):
    """Gradients of ``<P Q^T, k(X, Z)>``, ``P = P0 - [K B | 0]``; float64.

    With :data:`ADJOINT_GEMM` (kinds of the distance GEMM) each block's
    :math:`K_b B` comes from the values of its distance GEMM in the same
    pass (:func:`nyhopt.ops._adjoint_gemm.lowrank_sums`); otherwise ``P`` is
    formed by one :func:`kmv` and the low-rank adjoint runs on it (two passes;
    ``dot`` for that :func:`kmv`).
    """
    wanted = _wanted(wrt)
    if ADJOINT_GEMM and _uses_dot(kernel):
        from ._adjoint_gemm import lowrank_sums

        Xs, Zt = _scaled_inputs(X, Z, ell, xp)
        sums = lowrank_sums(kernel, Xs, Zt, xp.ascontiguousarray(P0), xp.ascontiguousarray(Q), wanted, xp,
                            B=xp.ascontiguousarray(B))
        return _finish_adjoint(*sums, ell, wanted, xp)
    P = P0.copy()
    P[:, :B.shape[1]] -= kmv(kernel, X, Z, B, ell, xp, dot)
    return adjoint_lowrank(kernel, X, Z, P, Q, ell, xp, wrt=wrt)
