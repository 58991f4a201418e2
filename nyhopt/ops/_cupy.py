"""GPU (CuPy) block-wise kernel products and adjoints.

Same functions and signatures as :mod:`nyhopt.ops._reference`
(``op(kernel, X, Z, <operands>, ell, xp, ...)`` with ``xp = cupy``).

* Kernel blocks come from the fused CUDA kernel ``nh_kernel_block``
  (``_cuda/kernel_block.cu``): one pass computes the scaled squared distance
  from coordinate differences and applies the profile, instead of a GEMM plus
  four elementwise passes (and instead of ``d`` passes for the Laplacian,
  whose cusp needs exact distances).  The products with the operands
  (``K V``, ``K^T U``, ``K^T (K V)``) are cuBLAS GEMMs on row blocks sized
  by the memory budget, exactly as in the reference.  For many features
  (``d > FUSED_BLOCK_MAX_D``) a GEMM computes the distances faster, so the
  reference path is used as is.
* Opt-in fused streaming products (``NYHOPT_CUDA_FUSED``, off by default
  until measured on a GPU): ``K V``, ``K^T U`` and ``K^T (K V)`` run the
  CUDA kernel ``nh_fused_products`` (``_cuda/fused_products.cu``), which
  forms 64 x 64 tiles of ``k(X, Z)`` in registers and contracts them with
  the operand on chip, so no kernel block reaches GPU memory.  ``K^T U`` is
  the same kernel with rows and centers swapped (``k`` is symmetric), its
  sum over the rows split across blocks and added in float64;
  ``normal_matvec`` is two sweeps, ``W = K V`` and then ``K^T [W, U]``
  (``K`` is computed twice).  Operands wider than 32 columns (16 in
  float64) take one sweep per group of columns.  The variable is read once,
  when this module is imported, into :data:`FUSED_PRODUCTS`:

  ===============  ==========================================================
  unset, ``0``      off: the cuBLAS path above
  ``1``             fused, distances from coordinate differences (the same
                    kernel values as ``nh_kernel_block``)
  ``dot``           fused, ``|x|^2 + |z|^2 - 2 x.z`` (half the distance work;
                    the Laplacian keeps exact differences)
  ===============  ==========================================================

  Setting :data:`FUSED_PRODUCTS` (``""``, ``"exact"`` or ``"dot"``) later
  takes effect at the next call.  Timings: docs/benchmarks.md.
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

from .._config import block_rows
from ._grad import KernelGrad
from . import _reference
from ._cuda_compile import KINDS, get_function

__all__ = [
    "FUSED_BLOCK_MAX_D",
    "FUSED_ADJOINT_MAX_D",
    "FUSED_PRODUCTS",
    "kernel_matrix",
    "kmv",
    "kmtv",
    "normal_matvec",
    "adjoint_dense",
    "adjoint_lowrank",
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


def _fused_setting(value):
    """``""`` (off), ``"exact"`` or ``"dot"`` from the text of ``NYHOPT_CUDA_FUSED``."""
    text = value.strip().lower()
    if text in ("", "0"):
        return ""
    if text in ("1", "exact"):
        return "exact"
    if text == "dot":
        return "dot"
    raise ValueError(f"NYHOPT_CUDA_FUSED must be '0', '1' (or 'exact') or 'dot', got {value!r}")


#: Fused streaming products: ``""`` (off, the default), ``"exact"`` or
#: ``"dot"``; from ``NYHOPT_CUDA_FUSED`` at import (see the module notes).
FUSED_PRODUCTS = _fused_setting(os.environ.get("NYHOPT_CUDA_FUSED", ""))
_FUSED_TILE = 64  # points per block and per tile of nh_fused_products (BM = BN)
_FUSED_WIDTHS = {"float32": (8, 16, 32), "float64": (8, 16)}  # its column widths KC
_FUSED_BLOCKS_PER_SM = 32  # sums split across blocks: about this many blocks per multiprocessor


def _fused(kernel, X, max_d):
    return kernel.kind in KINDS and X.shape[1] <= max_d


def _scaled_inputs(X, Z, ell, xp):
    """C-contiguous ``X / ell`` (n, d) and ``(Z / ell)^T`` (d, m) in the data dtype."""
    Xs = xp.ascontiguousarray(_reference.scaled(X, ell, xp))
    Zt = xp.ascontiguousarray(_reference.scaled(Z, ell, xp).T)
    return Xs, Zt


def _i32(v):
    return np.int32(v)


def _block_into(kernel, Xs_rows, Zt, out):
    """Fill ``out`` (b, m) with ``k`` between scaled rows ``Xs_rows`` and ``Zt``."""
    b, d = Xs_rows.shape
    m = Zt.shape[1]
    if b == 0:
        return out
    fn = get_function("kernel_block", Xs_rows.dtype, kernel.kind)
    grid = ((m + _BLOCK[0] - 1) // _BLOCK[0], min((b + _BLOCK[1] - 1) // _BLOCK[1], _MAX_GRID_Y))
    fn(grid, _BLOCK, (Xs_rows, Zt, out, _i32(b), _i32(m), _i32(d)))
    return out


def _blocks(n, m, itemsize, per_row):
    b = block_rows(n, m, itemsize, n_temps=1, per_row=per_row)
    for start in range(0, n, b):
        yield slice(start, min(start + b, n)), b


# ------------------------------------------------------ fused streaming products
def _streaming(kernel, X):
    return bool(FUSED_PRODUCTS) and _fused(kernel, X, FUSED_BLOCK_MAX_D)


def _scaled_rows(X, Z, ell, xp):
    """C-contiguous ``X / ell`` (n, d) and ``Z / ell`` (m, d) in the data dtype."""
    return (xp.ascontiguousarray(_reference.scaled(X, ell, xp)), xp.ascontiguousarray(_reference.scaled(Z, ell, xp)))


def _norms(kernel, *points):
    """Squared norms of each array of scaled points for the ``dot`` distances, else ``None``."""
    if FUSED_PRODUCTS != "dot" or kernel.needs_exact_distances:
        return None
    return tuple((P * P).sum(axis=1) for P in points)


def _column_groups(k, dtype):
    """``(c0, kc, KC)`` per sweep: ``k`` columns in balanced groups of at most the widest ``KC``."""
    widths = _FUSED_WIDTHS[np.dtype(dtype).name]
    groups = -(-k // widths[-1])
    size = -(-k // groups)
    for c0 in range(0, k, size):
        kc = min(size, k - c0)
        yield c0, kc, next(w for w in widths if w >= kc)


def _contract(kernel, A, B, V, xp, norms=None, out=None):
    """``out[a, :k] = sum_b k(A_a, B_b) V[b, :]`` with the fused kernel, in the dtype of ``A``.

    Parameters
    ----------
    A, B : arrays (na, d), (nb, d)
        Scaled points, C-contiguous: the rows of the result, and the points
        summed over (``kmv``: ``A = X / ell``, ``B = Z / ell``; ``kmtv``:
        swapped, since :math:`k(x, z) = k(z, x)`).
    V : array (nb, k), C-contiguous
    norms : (array (na,), array (nb,)) or None
        Squared norms of ``A`` and ``B`` rows for the ``dot`` distances.
    out : array (na, >= k), C-contiguous, optional
        Receives the result in its first ``k`` columns.

    Returns
    -------
    out : array (na, k) (or the given ``out``)

    Notes
    -----
    A block owns 64 points of ``A``; when there are too few of them to fill
    the device, the points of ``B`` are split in ``gy`` ranges and the blocks
    add their float64 sums atomically (then one cast to the data dtype).
    """
    na, d = A.shape
    nb, k = V.shape
    out = xp.empty((na, k), dtype=A.dtype) if out is None else out
    if na == 0 or k == 0:
        return out
    if nb == 0:
        out[:, :k] = 0
        return out
    gx = -(-na // _FUSED_TILE)
    tiles = -(-nb // _FUSED_TILE)
    gy = min(tiles, _MAX_GRID_Y, max(1, -(-_FUSED_BLOCKS_PER_SM * _multiprocessors(xp) // gx)))
    per = -(-tiles // gy)
    gy = -(-tiles // per)
    accumulate = gy > 1
    out64 = xp.zeros((na, k), dtype=xp.float64) if accumulate else xp.empty(1, dtype=xp.float64)
    An2, Bn2 = (A, B) if norms is None else norms  # unused without dot: any valid pointers
    ints = (na, nb, d, k)
    for c0, kc, width in _column_groups(k, A.dtype):
        fn = get_function("fused_products", A.dtype, kernel.kind, width)
        args = (A, B, V, An2, Bn2, *map(_i32, ints + (c0, kc, per * _FUSED_TILE, norms is not None, accumulate)),
                out, out64, _i32(k if accumulate else out.shape[1]))
        fn((gx, gy), _BLOCK, args)
    if accumulate:
        out[:, :k] = out64
    return out


def _fused_normal_matvec(kernel, X, Z, V, ell, xp, U, kv):
    """``normal_matvec`` in two fused sweeps: ``W = K V`` into ``[W, U]``, then ``K^T [W, U]``."""
    Xs, Zs = _scaled_rows(X, Z, ell, xp)
    k = V.shape[1]
    WU = xp.empty((X.shape[0], k + (0 if U is None else U.shape[1])), dtype=X.dtype)
    norms = _norms(kernel, Xs, Zs)
    _contract(kernel, Xs, Zs, xp.ascontiguousarray(V), xp, norms=norms, out=WU)
    if U is not None:
        WU[:, k:] = U
    KtWU = _contract(kernel, Zs, Xs, WU, xp, norms=None if norms is None else norms[::-1])
    KtKV = xp.ascontiguousarray(KtWU[:, :k])
    KtU = None if U is None else xp.ascontiguousarray(KtWU[:, k:])
    if not kv:
        return KtKV, KtU
    return KtKV, KtU, (WU if U is None else xp.ascontiguousarray(WU[:, :k]))


def kernel_matrix(kernel, X, Z, ell, xp, symmetric=False):
    """Dense ``k(X, Z)`` (n, m) in the dtype of ``X``.

    The fused kernel computes distances from coordinate differences, so
    ``k(X, X)`` is exactly symmetric with a unit diagonal.
    """
    if not _fused(kernel, X, FUSED_BLOCK_MAX_D):
        return _reference.kernel_matrix(kernel, X, Z, ell, xp, symmetric=symmetric)
    Xs, Zt = _scaled_inputs(X, Z, ell, xp)
    if symmetric:
        Zt = xp.ascontiguousarray(Xs.T)  # the same rounded numbers on both sides
    out = xp.empty((X.shape[0], Zt.shape[1]), dtype=X.dtype)
    return _block_into(kernel, Xs, Zt, out)


def kmv(kernel, X, Z, V, ell, xp):
    """``k(X, Z) @ V`` for V (m, k); result (n, k)."""
    if not _fused(kernel, X, FUSED_BLOCK_MAX_D):
        return _reference.kmv(kernel, X, Z, V, ell, xp)
    if _streaming(kernel, X):
        Xs, Zs = _scaled_rows(X, Z, ell, xp)
        return _contract(kernel, Xs, Zs, xp.ascontiguousarray(V), xp, norms=_norms(kernel, Xs, Zs))
    Xs, Zt = _scaled_inputs(X, Z, ell, xp)
    n, m = X.shape[0], Z.shape[0]
    out = xp.empty((n, V.shape[1]), dtype=X.dtype)
    buf = None
    for sl, b in _blocks(n, m, X.dtype.itemsize, V.shape[1]):
        buf = xp.empty((b, m), dtype=X.dtype) if buf is None else buf
        Kb = _block_into(kernel, Xs[sl], Zt, buf[: sl.stop - sl.start])
        out[sl] = Kb @ V
    return out


def kmtv(kernel, X, Z, U, ell, xp):
    """``k(X, Z).T @ U`` for U (n, k); result (m, k)."""
    if not _fused(kernel, X, FUSED_BLOCK_MAX_D):
        return _reference.kmtv(kernel, X, Z, U, ell, xp)
    if _streaming(kernel, X):
        Xs, Zs = _scaled_rows(X, Z, ell, xp)
        return _contract(kernel, Zs, Xs, xp.ascontiguousarray(U), xp, norms=_norms(kernel, Zs, Xs))
    Xs, Zt = _scaled_inputs(X, Z, ell, xp)
    n, m = X.shape[0], Z.shape[0]
    out = xp.zeros((m, U.shape[1]), dtype=xp.float64)  # sums across blocks in float64, as the CPU paths
    buf = None
    for sl, b in _blocks(n, m, X.dtype.itemsize, U.shape[1]):
        buf = xp.empty((b, m), dtype=X.dtype) if buf is None else buf
        Kb = _block_into(kernel, Xs[sl], Zt, buf[: sl.stop - sl.start])
        out += Kb.T @ U[sl]
    return out.astype(X.dtype, copy=False)


def normal_matvec(kernel, X, Z, V, ell, xp, U=None, kv=False):
    """``(K^T K V, K^T U or None)`` in one pass over ``X``; both (m, k) (and ``K V`` (n, k) with ``kv``)."""
    if not _fused(kernel, X, FUSED_BLOCK_MAX_D):
        return _reference.normal_matvec(kernel, X, Z, V, ell, xp, U=U, kv=kv)
    if _streaming(kernel, X):
        return _fused_normal_matvec(kernel, X, Z, V, ell, xp, U, kv)
    Xs, Zt = _scaled_inputs(X, Z, ell, xp)
    n, m = X.shape[0], Z.shape[0]
    out = xp.zeros((m, V.shape[1]), dtype=xp.float64)  # sums across blocks in float64, as the CPU paths
    outu = None if U is None else xp.zeros((m, U.shape[1]), dtype=xp.float64)
    KV = xp.empty((n, V.shape[1]), dtype=X.dtype) if kv else None
    per_row = 2 * V.shape[1] + (0 if U is None else U.shape[1])
    buf = None
    for sl, b in _blocks(n, m, X.dtype.itemsize, per_row):
        buf = xp.empty((b, m), dtype=X.dtype) if buf is None else buf
        Kb = _block_into(kernel, Xs[sl], Zt, buf[: sl.stop - sl.start])
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
    """Gradients of ``<P Q^T, k(X, Z)>``; ``P`` (n, k), ``Q`` (m, k); float64."""
    wanted = _wanted(wrt)
    if not _fused(kernel, X, FUSED_ADJOINT_MAX_D):
        return _reference.adjoint_lowrank(kernel, X, Z, P, Q, ell, xp, wrt=wrt)
    P = xp.ascontiguousarray(P)
    Qt = xp.ascontiguousarray(Q.T)
    return _adjoint(kernel, X, Z, ell, xp, wanted, P, Qt, lowrank=True)
