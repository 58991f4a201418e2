r"""The low-rank adjoint's sums by GEMMs and one fused pass (an alternative to ``nh_adjoint``).

For the cotangent :math:`P Q^T` and :math:`W_{ij} = (P Q^T)_{ij}\,\phi'(s_{ij})`,
the sums of the CUDA adjoint (``_cuda/adjoint.cu``), in scaled coordinates,

.. math::
   g^z_{jk} = \sum_i W_{ij} (z_{jk} - x_{ik}) = c_j z_{jk} - (W^T X)_{jk}, \qquad
   g^x_{ik} = \sum_j W_{ij} (x_{ik} - z_{jk}) = r_i x_{ik} - (W Z)_{ik},

   g^\ell_k = \sum_{ij} W_{ij} (z_{jk} - x_{ik})^2
            = \sum_i r_i x_{ik}^2 + \sum_j c_j z_{jk}^2 - 2 \sum_j z_{jk} (W^T X)_{jk},

with :math:`r = W 1`, :math:`c = W^T 1`, are matrix products: per row block,
two GEMMs in the data dtype (:math:`X_s Z_s^T` and :math:`P Q^T`), one fused
pass writing :math:`W` in float64 (``nh_adjoint_dot`` on a GPU), and float64
GEMMs and sums.  The points are centered on the mean center first (the sums
do not change), which keeps the expanded forms from cancelling.

For the residual cotangent :math:`P = P_0 - [K B \mid 0]` of ``stoch-prop``
(``B`` given), each block also turns its distance product into kernel
values (``nh_kernel_dot``, out of place) and forms :math:`P_b = P_{0,b} -
K_b B` by one more GEMM before :math:`P_b Q^T`: the same pass, no
:math:`K B` beforehand.

Used by :mod:`nyhopt.ops._cupy` when :data:`nyhopt.ops._cupy.ADJOINT_GEMM` is
on (off by default until timed on a GPU against ``nh_adjoint``); on NumPy it
runs the same algebra, which is how the tests check it.
"""
from __future__ import annotations

import numpy as np

from ..backend._config import block_rows
from ..backend import is_cupy_namespace
from ._cuda_compile import get_function
from ._reference import residual_block

__all__ = ["lowrank_sums"]


def _weights(kernel, g, c, xn, zn, xp):
    """:math:`W = c \\odot \\phi'(\\max(xn + zn - 2g, 0))` in float64."""
    if is_cupy_namespace(xp):
        b, m = g.shape
        W = xp.empty((b, m), dtype=xp.float64)
        if b:
            grid = ((m + 31) // 32, min((b + 7) // 8, 65535))
            get_function("adjoint_dot", g.dtype, kernel.kind)(grid, (32, 8), (g, c, xn, zn, W, np.int32(b), np.int32(m)))
        return W
    s = xn[:, None] + zn[None, :] - 2 * g
    xp.maximum(s, 0, out=s)
    _, dphi = kernel.profile_and_derivative(s, xp)
    return c.astype(xp.float64) * dphi.astype(xp.float64)


def _values(kernel, g, xn, zn, xp):
    """Kernel values :math:`\\phi(\\max(xn + zn - 2g, 0))` of a block in its dtype (``g`` is kept)."""
    if is_cupy_namespace(xp):
        b, m = g.shape
        K = xp.empty_like(g)
        if b:
            grid = ((m + 31) // 32, min((b + 7) // 8, 65535))
            get_function("kernel_dot", g.dtype, kernel.kind, 0)(grid, (32, 8), (g, xn, zn, K, np.int32(b), np.int32(m)))
        return K
    s = xn[:, None] + zn[None, :] - 2 * g
    xp.maximum(s, 0, out=s)
    return kernel.profile(s, xp)


def lowrank_sums(kernel, Xs, Zt, P, Q, wanted, xp, B=None):
    """Raw sums ``(gz (d, m), ge (d,), gx (n, d))`` of ``nh_adjoint`` for ``P Q^T`` (unwanted ones zero).

    ``Xs`` (n, d) and ``Zt`` (d, m) are the scaled, centered points (C-contiguous,
    data dtype); ``P`` (n, k), ``Q`` (m, k) in the data dtype; ``wanted`` the
    bit mask of ``nh_adjoint`` (1 centers, 2 lengthscales, 4 ``X``).  With
    ``B`` (m, kb <= k; data dtype) the cotangent is ``(P - [K B | 0]) Q^T``.
    """
    f64 = xp.float64
    n, d = Xs.shape
    m = Zt.shape[1]
    xn = (Xs * Xs).sum(axis=1)
    zn = (Zt * Zt).sum(axis=0)
    Qt = xp.ascontiguousarray(Q.T)
    Z64 = Zt.T.astype(f64)
    WtX = xp.zeros((m, d), dtype=f64)
    c = xp.zeros(m, dtype=f64)
    ex = xp.zeros(d, dtype=f64)
    gx = xp.zeros((n, d) if wanted & 4 else (1,), dtype=f64)
    b = block_rows(n, m, (2 if B is None else 3) * Xs.dtype.itemsize + 8, n_temps=1)
    for lo in range(0, n, b):
        hi = min(n, lo + b)
        g = Xs[lo:hi] @ Zt
        Pb = P[lo:hi] if B is None else residual_block(P[lo:hi], _values(kernel, g, xn[lo:hi], zn, xp), B)
        W = _weights(kernel, g, Pb @ Qt, xn[lo:hi], zn, xp)
        x64 = Xs[lo:hi].astype(f64)
        r = W.sum(axis=1)
        c += W.sum(axis=0)
        if wanted & 3:
            WtX += W.T @ x64
        if wanted & 2:
            ex += r @ (x64 * x64)
        if wanted & 4:
            gx[lo:hi] = r[:, None] * x64 - W @ Z64
    gz = (c[:, None] * Z64 - WtX).T if wanted & 1 else xp.zeros((1,), dtype=f64)
    ge = ex + c @ (Z64 * Z64) - 2 * (Z64 * WtX).sum(axis=0) if wanted & 2 else xp.zeros(d, dtype=f64)
    return gz, ge, gx
