"""The kernel adjoint of a cotangent in factored form, never formed whole (CPU).

:func:`adjoint_factored` contracts
:math:`G = \\mathrm{diag}(u_0) B_0 V_0 + P Q^T + \\sum_{k \\ge 1} \\mathrm{diag}(u_k) B_k V_k`
with :math:`\\partial k(X, Z)`, the cotangent of the exact objectives
(:math:`G_{nm} = A^T W + \\ldots`, :mod:`nyhopt.objectives._exact`).  The
rows are cut into blocks of :data:`FACTORED_BLOCK`: a block of ``G`` is
formed by BLAS products (NumPy's library, :mod:`nyhopt.backend._blas`) in a buffer
that stays in cache and contracted at once, so no ``n x m`` array is
written or read back.

Two contractions:

* Gaussian kernel with the kernel matrix ``k(Z, X)`` kept by the caller:
  the products part of the block is formed transposed, :math:`G^T`
  (m x b), :func:`_gaussian_columns` adds the thin part :math:`PQ^T`
  (four columns per pass), reads :math:`\\varphi' = -\\varphi/2` from the
  kept matrix (no kernel evaluation) and sums over the rows in registers,
  four centers per pass over the rows (difference form, as
  :mod:`nyhopt.ops._numba`);
* otherwise the row loop of :func:`nyhopt.ops._numba.adjoint_dense`, which
  evaluates :math:`\\varphi'` row by row, on each block.

Row ranges run on nyhopt's worker pool (:func:`nyhopt.backend._parallel.map_ranges`)
with their own float64 accumulators, summed in range order.
"""
from __future__ import annotations

import numba
import numpy as np

from ..backend._blas import gemm_update
from ..backend._parallel import map_ranges, min_rows
from ._grad import KernelGrad
from ._numba import _check_wrt, _setup, adjoint_dense
from ._numba_base import _LOOP
from ._numba_loops import _adjoint_dense
from . import _reference

__all__ = ["FACTORED_BLOCK", "adjoint_factored", "factored_matrix"]


@numba.njit(**_LOOP)
def _gaussian_columns(Zs, Xs, KT, GT, use_g, lo, az, ae, w, Pt, Q):
    """Adjoint sums of the columns ``lo : lo + b`` of a Gaussian ``k(Z, X)`` (centers as rows).

    ``GT`` (m, b) holds the block of the products part of :math:`G^T` (read
    when ``use_g``, else taken as zero), to which the thin part
    :math:`(PQ^T)^T` is added here (``Pt`` (r, n) is
    :math:`P^T`, ``Q`` (m, r); ``r = 0`` for none), ``KT`` the whole kernel
    matrix ``k(Z, X)`` (m, n), ``Zs`` the scaled centers (m, d) and ``Xs``
    the scaled rows transposed (d, n).  With :math:`W_{ij} = -\\tfrac12
    K_{ij} G_{ij}` (:math:`\\varphi' = -\\varphi/2`), four centers at a time:
    ``az[j, k] += sum_i W_ij (Zs_jk - Xs_ki)`` and
    ``ae[k] += sum_ij W_ij (Zs_jk - Xs_ki)^2``, reductions over ``i`` in
    registers (one pass over ``Xs[k]`` serves four centers).
    """
    m, d = Zs.shape
    b = GT.shape[1]
    nq = Q.shape[1]
    # Rows of the 2-D arrays are taken as 1-D slices first: indexing them as w[r, i] inside the
    # loops made LLVM's code 1.6-1.9x slower (same results, bit for bit).
    for j in range(0, m, 4):
        nj = min(4, m - j)
        for r in range(4):
            wr = w[r, :b]
            if r < nj:
                if use_g:
                    wr[:] = GT[j + r, :b]
                else:
                    wr[:] = 0.0
                q0 = nq % 4  # the odd columns one at a time, then four per pass over the row
                for q in range(q0):
                    qv = np.float64(Q[j + r, q])
                    pq = Pt[q, lo:lo + b]
                    for i in range(b):
                        wr[i] += qv * pq[i]
                for q in range(q0, nq, 4):
                    qa, qb = np.float64(Q[j + r, q]), np.float64(Q[j + r, q + 1])
                    qc, qd = np.float64(Q[j + r, q + 2]), np.float64(Q[j + r, q + 3])
                    pa, pb = Pt[q, lo:lo + b], Pt[q + 1, lo:lo + b]
                    pc, pd = Pt[q + 2, lo:lo + b], Pt[q + 3, lo:lo + b]
                    for i in range(b):
                        wr[i] += (qa * pa[i] + qb * pb[i]) + (qc * pc[i] + qd * pd[i])
                kt = KT[j + r, lo:lo + b]
                for i in range(b):
                    wr[i] = (-0.5 * kt[i]) * wr[i]
            else:
                wr[:] = 0.0
        w0, w1, w2, w3 = w[0, :b], w[1, :b], w[2, :b], w[3, :b]
        j1, j2, j3 = min(j + 1, m - 1), min(j + 2, m - 1), min(j + 3, m - 1)
        for k in range(d):
            xk = Xs[k, lo:lo + b]
            z0, z1, z2, z3 = Zs[j, k], Zs[j1, k], Zs[j2, k], Zs[j3, k]
            e0 = e1 = e2 = e3 = 0.0
            g0 = g1 = g2 = g3 = 0.0
            for i in range(b):
                x = xk[i]
                t0 = z0 - x
                t1 = z1 - x
                t2 = z2 - x
                t3 = z3 - x
                a0 = w0[i] * t0
                a1 = w1[i] * t1
                a2 = w2[i] * t2
                a3 = w3[i] * t3
                g0 += a0
                g1 += a1
                g2 += a2
                g3 += a3
                e0 += a0 * t0
                e1 += a1 * t1
                e2 += a2 * t2
                e3 += a3 * t3
            az[j, k] += g0
            if nj > 1:
                az[j1, k] += g1
            if nj > 2:
                az[j2, k] += g2
            if nj > 3:
                az[j3, k] += g3
            ae[k] += (e0 + e1) + (e2 + e3)


#: Rows per block of :func:`adjoint_factored`: the block of ``G`` (``m x 256``) stays in cache.
FACTORED_BLOCK = 256


def _factored_block(products, P, Qc, s, e, out, tmp, transposed):
    """Rows ``s:e`` of ``G = B_0 V_0 + P Q^T + sum_{k>0} diag(u_k) B_k V_k`` into ``out``.

    ``out`` is ``(e - s, m)``, or its transpose ``(m, e - s)`` when
    ``transposed``; both C-contiguous, as is ``tmp`` (same shape).
    """
    def prod(B, V, dst):
        if transposed:
            return np.matmul(V.T, B[s:e].T, out=dst)
        return np.matmul(B[s:e], V, out=dst)

    def add_thin():
        if P is None:
            return
        if transposed:
            gemm_update(out, Qc, P[s:e])
        else:
            gemm_update(out, P[s:e], Qc)

    if products:
        B, u, V = products[0]
        prod(B, V, out)
        if u is not None:
            out *= u[None, s:e] if transposed else u[s:e, None]
        add_thin()
    elif P is not None:
        out[...] = 0
        add_thin()
    for B, u, V in products[1:]:
        t = prod(B, V, tmp)
        if u is not None:
            t *= u[None, s:e] if transposed else u[s:e, None]
        out += t
    return out


def factored_matrix(products, P, Q, n, m, dtype):
    """The dense ``G`` (n, m) of a factored cotangent (see :func:`adjoint_factored`)."""
    G = np.empty((n, m), dtype=dtype)
    tmp = np.empty((n, m), dtype=dtype) if len(products) > 1 else None
    Qc = None if P is None else np.ascontiguousarray(Q, dtype=dtype)
    return _factored_block(products, P, Qc, 0, n, G, tmp, False)


def adjoint_factored(kernel, X, Z, products, P, Q, ell, xp, wrt=("lengthscale", "centers"), KT=None):
    """Gradients of ``<G, k(X, Z)>`` for ``G = sum_k diag(u_k) B_k V_k + P Q^T``, never formed whole.

    Parameters
    ----------
    products : sequence of ``(B (n, r), u (n,) or None, V (r, m))``
        In the data dtype.
    P, Q : arrays (n, r), (m, r) or None
    KT : array (m, n), optional
        ``k(Z, X)`` as computed by :func:`kernel_matrix`; reused by the
        Gaussian kernel instead of evaluating the kernel again.

    Notes
    -----
    The rows are cut into blocks of :data:`FACTORED_BLOCK`; each block of
    ``G`` is formed by BLAS products in a buffer that stays in cache and is
    contracted at once, so no ``n x m`` array is written.  With the Gaussian
    kernel and ``KT`` the block is formed transposed and contracted by
    :func:`_gaussian_columns` (:math:`\\varphi'` read from ``KT``, sums over
    rows in registers); otherwise by the row loop of :func:`adjoint_dense`.
    Row ranges run on nyhopt's worker pool (:func:`nyhopt.backend._parallel.map_ranges`).
    """
    need_z, need_ell, need_x = _check_wrt(wrt)
    code, Xc, ell_full, Zt = _setup(kernel, X, Z, ell)
    n, d = Xc.shape
    m = Zt.shape[1]
    dtype = np.dtype(X.dtype)
    if code is None or need_x:
        G = factored_matrix(products, P, Q, n, m, dtype)
        if code is None:
            return _reference.adjoint_dense(kernel, X, Z, G, ell, xp, wrt=wrt)
        return adjoint_dense(kernel, X, Z, G, ell, xp, wrt=wrt)
    transposed = (code == 0 and KT is not None and KT.shape == (m, n) and KT.dtype == dtype
                  and KT.flags.c_contiguous)
    Qc = None if P is None else np.ascontiguousarray(Q, dtype=dtype)
    block = FACTORED_BLOCK
    if transposed:  # the thin part P Q^T is added inside _gaussian_columns
        Zs = np.ascontiguousarray(Zt.T)
        Xs = np.ascontiguousarray((Xc / ell_full).T)
        Pt = np.zeros((0, n), dtype=dtype) if P is None else np.ascontiguousarray(P.T, dtype=dtype)
        Qg = np.zeros((m, 0), dtype=dtype) if P is None else Qc

    def run(lo, hi):
        if transposed:
            az, ae = np.zeros((m, d)), np.zeros(d)
            w = np.empty((4, block))
        else:
            az, ae = np.zeros((1, d, m) if need_z else (1, 0, 0)), np.zeros((1, d))
            gx = np.empty((0, 0))
        buf = np.empty(m * block, dtype=dtype)
        tmp = np.empty(m * block, dtype=dtype) if len(products) > 1 else None
        for s in range(lo, hi, block):
            e = min(s + block, hi)
            shape = (m, e - s) if transposed else (e - s, m)
            G = buf[:m * (e - s)].reshape(shape)
            t = None if tmp is None else tmp[:m * (e - s)].reshape(shape)
            if transposed:
                if products:
                    _factored_block(products, None, None, s, e, G, t, True)
                _gaussian_columns(Zs, Xs, KT, G, bool(products), s, az, ae, w, Pt, Qg)
            else:
                _factored_block(products, P, Qc, s, e, G, t, False)
                _adjoint_dense.plain(code, Xc[s:e], ell_full, Zt, G, az, ae, gx, need_z, False, 1, 0, 1)
        return (az.T, ae) if transposed else (az[0], ae[0])

    parts = map_ranges(run, n, max(min_rows(m), block))
    az, ae = parts[0]
    for a, b in parts[1:]:
        az = az + a
        ae = ae + b
    g_ell = g_z = None
    if need_ell:
        g = -2.0 * ae / ell_full
        g_ell = (g.sum(keepdims=True) if np.size(ell) == 1 else g).reshape(np.shape(ell))
    if need_z:
        g_z = (2.0 * az / ell_full[:, None]).T.copy()
    return KernelGrad(g_ell, g_z, None)
