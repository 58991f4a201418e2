r"""The Gram matrix :math:`K^T K` on tensor cores: float16 products in short row blocks, summed in float64.

On a GPU, :math:`G = K^T K` of float32 data costs :math:`n m^2` multiply-adds:
13.6 s in float64 and 9.7 s in float32 (no tensor cores) at the HIGGS size
(:math:`n = 10^7`, :math:`m = 5000`, one H200), against 0.73 s for one
product with float16 inputs and float32 output on tensor cores.  Two things
make that product less accurate than float32, and this module removes both:

* *Rounding* :math:`K` *to 16 bits* adds :math:`\sum_r \delta_{ri}^2`, a
  positive bias, to each diagonal entry of :math:`G`, of the order of
  :math:`n \epsilon_{16}^2` -- as large as the penalty :math:`n \lambda` at
  :math:`\lambda = 1/n` (the reason ``kernel_cache="float16"`` is never
  chosen by default).  Each block is therefore split,

  .. math::  K_b = H + L / 2^{11}, \qquad H = \mathrm{fl}_{16}(K_b), \quad
             L = \mathrm{fl}_{16}\big(2^{11} (K_b - H)\big),

  which holds :math:`K_b` to about :math:`2^{-22}` of each entry (float32's
  precision), and :math:`K_b^T K_b \approx H^T H + (L^T H + H^T L) / 2^{11}`
  is *one* product :math:`[H, L]^T H` (``2m x m``; the cross term serves
  both orders, the :math:`L^T L / 2^{22}` term is below float32's rounding).
  ``nh_kernel_dot`` writes :math:`[H \,|\, L]` straight from the distance
  product, so no float32 block is stored.
* *The tensor cores' float32 accumulation is not IEEE*: measured, the
  relative (Frobenius) error of one product over :math:`5 \cdot 10^5` rows
  was :math:`3.2 \cdot 10^{-3}` with or without the split (TF32 and bfloat16:
  the same), against :math:`2 \cdot 10^{-6}` for a float32 SGEMM.  It grows
  with the length of the sum, as truncated additions do (about
  :math:`6 \cdot 10^{-9}` per row).  The products therefore run over short
  row blocks of :data:`BLOCK_ROWS` rows; :data:`FOLD` consecutive products
  are summed by cuBLAS itself (``beta = 1``: its epilogue adds in IEEE
  float32), and each such sum is added into float64.

Default block length, from the figures above (docs/solvers.md, "The Gram
matrix on a GPU").  Error: at the measured rate a block of :math:`L` rows
is off by about :math:`6.4 \cdot 10^{-9} L`, 1.3e-5 at 2048 rows (1e-6
would take about 160 rows).  Time at :math:`n = 10^7`, :math:`m = 5000`:
the two products of the split take 1.46 s whatever :math:`L`, but each
block also reads and writes its ``2m x m`` float32 sum (0.08 ms at about
4.8 TB/s) and every :data:`FOLD` blocks that sum is added into float64
(0.2 ms): 0.5 s at 2048 rows, 1.0 s at 1024, 4 s at 256.  2048 rows keep
:math:`G` near 2 s with an error of the order of float32's; the GPU report
(``asv_bench/gpu_report.py gram``) measures both over a sweep of the block
length and fold, and prints the longest block within 1.5e-6.

Right-hand sides :math:`K^T U` come from the same pass: ``U`` is split into
float16 parts with a power-of-two scale per column (:func:`nyhopt.ops.half.split_half`),
each block's product :math:`[H, L]^T [U_{hi}, U_{lo}]` is added into float64.

On the CPU the same algorithm runs with NumPy (float16 parts converted to
float32, products by float32 BLAS with IEEE sums): that is the host
emulation the tests check against float64; the CPU's own Gram route stays
:mod:`nyhopt.ops.gram` (float64 products).

Examples
--------
>>> import numpy as np
>>> import nyhopt as nh
>>> from nyhopt.ops.gram16 import gram_matrix16
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(2000, 3)).astype(np.float32)
>>> G, _ = gram_matrix16(nh.GaussianKernel(1.5), X, X[:50], block=300)
>>> K = nh.ops.kernel_matrix(nh.GaussianKernel(1.5), X.astype(np.float64), X[:50].astype(np.float64))
>>> bool(np.linalg.norm(G - K.T @ K) < 1e-6 * np.linalg.norm(K.T @ K))
True
"""
from __future__ import annotations

import numpy as np

from ..backend._config import block_rows
from ..backend import is_cupy_namespace
from . import _operand, _prepare, _reference
from .half import join_half, sgemm_ex, split_half

__all__ = ["BLOCK_ROWS", "FOLD", "SPLIT_SCALE", "gram_matrix16", "split_block", "accumulate_gram"]

#: Rows per tensor-core product (see the module notes for the choice).
BLOCK_ROWS = 2048
#: Products summed in float32 by cuBLAS (``beta = 1``) before each float64 add.
FOLD = 8
#: Scale of the low float16 part: ``K = H + L / SPLIT_SCALE``.
SPLIT_SCALE = 2048.0


def split_block(K, xp, split=True):
    """Float16 ``[H | L]`` (b, 2m) of a float32 block ``K`` (b, m), or ``H`` (b, m) without ``split``.

    The host form of what ``nh_kernel_dot`` writes on a GPU.
    """
    K = K.astype(xp.float32, copy=False)
    H = K.astype(xp.float16)
    if not split:
        return H
    L = ((K - H.astype(xp.float32)) * xp.float32(SPLIT_SCALE)).astype(xp.float16)
    return xp.concatenate([H, L], axis=1)


def _cublas_tn(A, B, C, beta):
    """``C = A^T B + beta C`` (float32 ``C``) for float16 row-major ``A`` (K, M), ``B`` (K, N) with unit column stride."""
    return sgemm_ex(A, B, C, trans_a=True, beta=beta)


def _matmul_tn(A, B, C, beta, xp):
    """``C = A^T B + beta C`` in float32 for float16 ``A``, ``B``: cuBLAS on a GPU, float32 BLAS on the host."""
    if is_cupy_namespace(xp):
        return _cublas_tn(A, B, C, beta)
    P = A.astype(np.float32).T @ B.astype(np.float32)
    if beta:
        C += P
    else:
        C[...] = P
    return C


def accumulate_gram(HL, m, G2, C, Q=None, KtQ=None, *, block=BLOCK_ROWS, fold=FOLD, xp=np, matmul=None):
    """Add the products of one evaluated block ``HL`` (b, 2m or m) into ``G2``, in row blocks of ``block`` rows.

    Parameters
    ----------
    HL : array (b, 2m) or (b, m), float16
        ``[H | L]`` (split) or ``H``.
    G2 : array (2m or m, m), float64
        Receives :math:`[H, L]^T H` summed over the rows.
    C : array like ``G2``, float32
        Work space of the float32 sums of ``fold`` products (the right-hand
        sides' sums are folded the same way).
    Q : array (b, 2k), float16, optional
        Split right-hand sides of these rows (:func:`nyhopt.ops.half.split_half`).
    KtQ : array (2m or m, 2k), float64
        Receives :math:`[H, L]^T Q`.
    matmul : callable, optional
        ``matmul(A, B, C, beta, xp)``, ``C = A^T B + beta C``; the tests pass
        a model of the tensor cores' accumulation here.
    """
    matmul = _matmul_tn if matmul is None else matmul
    b = HL.shape[0]
    H = HL[:, :m]
    cq = None if Q is None else xp.empty((HL.shape[1], Q.shape[1]), dtype=xp.float32)
    for i, lo in enumerate(range(0, b, block)):
        hi = min(b, lo + block)
        beta = 1.0 if i % fold else 0.0
        flush = (i + 1) % fold == 0 or hi == b
        matmul(HL[lo:hi], H[lo:hi], C, beta, xp)
        if Q is not None:
            matmul(HL[lo:hi], Q[lo:hi], cq, beta, xp)
        if flush:
            G2 += C
            if Q is not None:
                KtQ += cq


def _finish(G2, KtQ, m, split, scale_u, k, xp):
    """:math:`K^T K` (symmetrized) and :math:`K^T U` from the float64 sums of the parts."""
    G = G2[:m]
    if split:
        cross = G2[m:]
        G = G + (cross + cross.T) * (1.0 / SPLIT_SCALE)
    G = 0.5 * (G + G.T)
    if KtQ is None:
        return G, None
    KQ = KtQ[:m] + KtQ[m:] * (1.0 / SPLIT_SCALE) if split else KtQ
    return G, join_half(KQ, scale_u.astype(xp.float64), axis=1)[:, :k]


def gram_matrix16(kernel, X, Z, U=None, *, block=None, fold=None, split=True, matmul=None, checked=False):
    r"""``(K^T K, K^T U or None)`` for float32 data, from float16 parts on tensor cores (see the module notes).

    Parameters
    ----------
    kernel : Kernel
    X : array (n, d), float32
    Z : array (m, d)
    U : array (n,) or (n, k), optional
    block : int, optional
        Rows per product (default :data:`BLOCK_ROWS`).
    fold : int, optional
        Products summed in float32 before each float64 add (default :data:`FOLD`).
    split : bool, default True
        Split each block into two float16 parts (without: the rounding of
        :math:`K` to 16 bits shows, see the module notes).
    matmul : callable, optional
        Replaces the product (tests: a model of the tensor cores).
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
        raise TypeError(f"gram_matrix16 needs float32 data, got {X.dtype.name}")
    block = BLOCK_ROWS if block is None else int(block)
    fold = FOLD if fold is None else int(fold)
    if block < 1 or fold < 1:
        raise ValueError(f"block and fold must be positive, got {block} and {fold}")
    n, m = X.shape[0], Z.shape[0]
    U2 = None if U is None else _operand(U, "U", n, X.dtype, xp)
    k = 0 if U2 is None else U2.shape[1]
    parts = 2 if split else 1
    G2 = xp.zeros((parts * m, m), dtype=xp.float64)
    C = xp.empty((parts * m, m), dtype=xp.float32)
    Q = scale_u = KtQ = None
    if U2 is not None:
        Q, scale_u = split_half(U2, xp)
        KtQ = xp.zeros((parts * m, 2 * k), dtype=xp.float64)
    # Evaluated blocks: float16 parts plus the float32 distance product (per row: 2*parts + 4 bytes per center).
    b = block_rows(n, m, 2 * parts + 4, n_temps=1)
    b = max(block, (b // block) * block) if b >= block else b
    gpu = is_cupy_namespace(xp)
    pts = None
    if gpu:
        from ._cupy import kernel_block_half

        pts = kernel_block_half(kernel, X, Z, ell, xp)
        HL = xp.empty((b, 2 * m), dtype=xp.float16)
        work = xp.empty((b, m), dtype=xp.float32)
    for lo in range(0, n, b):
        hi = min(n, lo + b)
        if gpu:
            parts_b = pts.block_half(slice(lo, hi), HL[: hi - lo], work)
            if not split:
                parts_b = parts_b[:, :m]
        else:
            Kb = _reference.kernel_matrix(kernel, X[lo:hi], Z, ell, xp)
            parts_b = split_block(Kb, xp, split)
        accumulate_gram(parts_b, m, G2, C, None if Q is None else Q[lo:hi], KtQ, block=block, fold=fold, xp=xp,
                        matmul=matmul)
    G, KtU = _finish(G2, KtQ, m, split, scale_u, k, xp)
    if KtU is not None and xp.asarray(U).ndim == 1:
        KtU = KtU[:, 0]
    return G, KtU
