"""Reference block-wise kernel products, written once for any array module.

These functions run on NumPy (the CPU reference) and on CuPy (the GPU path
reuses them for everything that cuBLAS does well).  Every loop walks ``X`` in
row blocks sized by :func:`nyhopt.block_rows`, so temporaries are ``b x m``,
never ``n x m``.

Conventions: ``X`` (n, d) and ``Z`` (m, d) share a floating dtype; ``ell`` is
the float64 lengthscale array of shape (1,) or (d,).  Accumulation precision:
each block product runs in the data dtype (float32 GEMMs stay float32), but
every sum *across* blocks (``K^T U``, ``K^T K V`` and the adjoint sums) is
accumulated in float64 and cast back to the data dtype at the end, so the
rounding error of float32 does not grow with the number of blocks.
"""
from __future__ import annotations

from ..backend._config import block_rows
from ._grad import KernelGrad

__all__ = [
    "scaled",
    "sqdist",
    "kernel_block",
    "kernel_matrix",
    "kmv",
    "kmtv",
    "normal_matvec",
    "adjoint_dense",
    "adjoint_lowrank",
    "adjoint_residual",
]


def scaled(A, ell, xp):
    """``A / ell`` in the dtype of ``A``."""
    return A / xp.asarray(ell, dtype=A.dtype)


def sqdist(Xs, Zs, xp, exact=False, zz=None):
    """Squared distances between rows of scaled ``Xs`` (b, d) and ``Zs`` (m, d).

    ``exact=True`` sums coordinate differences (exact zeros for coincident
    points); otherwise ``|x|^2 + |z|^2 - 2 x.z`` with one GEMM, clipped at 0.
    When a squared norm overflows (``|x| > ~1e154`` in float64), the GEMM form
    would give ``inf - inf = NaN``: the differences are summed instead (an
    overflowing distance is then ``inf``, and the kernel value 0).
    """
    if not exact:
        if zz is None:
            zz = xp.sum(Zs * Zs, axis=1)
        xx = xp.sum(Xs * Xs, axis=1)
        exact = not bool(xp.isfinite(xx.sum() + zz.sum()))
    if exact:
        s = xp.zeros((Xs.shape[0], Zs.shape[0]), dtype=Xs.dtype)
        for j in range(Xs.shape[1]):
            diff = Xs[:, j : j + 1] - Zs[:, j][None, :]
            diff *= diff
            s += diff
        return s
    s = Xs @ Zs.T
    s *= -2
    s += xx[:, None]
    s += zz[None, :]
    return xp.maximum(s, 0, out=s)


def kernel_block(kernel, Xs, Zs, xp, zz=None):
    """Kernel block ``k(X_b, Z)`` from scaled coordinates."""
    return kernel.profile(sqdist(Xs, Zs, xp, kernel.needs_exact_distances, zz), xp)


def _blocks(n, m, itemsize, n_temps=3, per_row=0):
    b = block_rows(n, m, itemsize, n_temps, per_row)
    for start in range(0, n, b):
        yield slice(start, min(start + b, n))


def kernel_matrix(kernel, X, Z, ell, xp, symmetric=False):
    """Dense ``k(X, Z)``; exactly symmetric with unit diagonal when ``symmetric``."""
    Xs, Zs = scaled(X, ell, xp), scaled(Z, ell, xp)
    s = sqdist(Xs, Zs, xp, kernel.needs_exact_distances)
    if symmetric:
        s += s.T.copy()
        s *= 0.5
        xp.fill_diagonal(s, 0)
    return kernel.profile(s, xp)


def kmv(kernel, X, Z, V, ell, xp):
    """``k(X, Z) @ V`` for V of shape (m, k); result (n, k)."""
    Xs, Zs = scaled(X, ell, xp), scaled(Z, ell, xp)
    zz = xp.sum(Zs * Zs, axis=1)
    out = xp.empty((X.shape[0], V.shape[1]), dtype=X.dtype)
    for sl in _blocks(X.shape[0], Z.shape[0], X.dtype.itemsize, per_row=V.shape[1]):
        out[sl] = kernel_block(kernel, Xs[sl], Zs, xp, zz) @ V
    return out


def kmtv(kernel, X, Z, U, ell, xp):
    """``k(X, Z).T @ U`` for U of shape (n, k); result (m, k)."""
    Xs, Zs = scaled(X, ell, xp), scaled(Z, ell, xp)
    zz = xp.sum(Zs * Zs, axis=1)
    out = xp.zeros((Z.shape[0], U.shape[1]), dtype=xp.float64)
    for sl in _blocks(X.shape[0], Z.shape[0], X.dtype.itemsize, per_row=U.shape[1]):
        out += kernel_block(kernel, Xs[sl], Zs, xp, zz).T @ U[sl]
    return out.astype(X.dtype, copy=False)


def normal_matvec(kernel, X, Z, V, ell, xp, U=None, kv=False):
    """``K^T (K V)`` in one pass over the data, plus ``K^T U`` when ``U`` is given.

    Returns ``(K^T K V, K^T U or None)``; both (m, k); with ``kv=True`` also
    ``K V`` (n, k), the intermediate product of the same pass.
    """
    Xs, Zs = scaled(X, ell, xp), scaled(Z, ell, xp)
    zz = xp.sum(Zs * Zs, axis=1)
    out = xp.zeros((Z.shape[0], V.shape[1]), dtype=xp.float64)
    outu = None if U is None else xp.zeros((Z.shape[0], U.shape[1]), dtype=xp.float64)
    KV = xp.empty((X.shape[0], V.shape[1]), dtype=X.dtype) if kv else None
    per_row = 2 * V.shape[1] + (0 if U is None else U.shape[1])
    for sl in _blocks(X.shape[0], Z.shape[0], X.dtype.itemsize, per_row=per_row):
        Kb = kernel_block(kernel, Xs[sl], Zs, xp, zz)
        KbV = Kb @ V
        if kv:
            KV[sl] = KbV
        out += Kb.T @ KbV
        if U is not None:
            outu += Kb.T @ U[sl]
    res = (out.astype(X.dtype, copy=False), None if U is None else outu.astype(X.dtype, copy=False))
    return res + (KV,) if kv else res


def _contract(W, Xs, Zs, ell, wrt, xp, acc):
    """Accumulate the adjoint sums of one block from ``W = G * phi'(s)``."""
    f64 = xp.float64
    need_ell = "lengthscale" in wrt
    rw = W.sum(axis=1)
    if "centers" in wrt or need_ell:
        cw = W.sum(axis=0)
        WtX = W.T @ Xs
        if "centers" in wrt:
            acc["cw_z"] += cw.astype(f64)
            acc["WtX"] += WtX.astype(f64)
        if need_ell:
            acc["ell"] += (cw[:, None] * Zs * Zs).sum(axis=0).astype(f64)
            acc["ell"] -= (2 * (WtX * Zs).sum(axis=0)).astype(f64)
            acc["ell"] += (rw[:, None] * Xs * Xs).sum(axis=0).astype(f64)
    if "X" in wrt:
        acc["X"].append((rw[:, None] * Xs - W @ Zs).astype(f64))


def _adjoint(kernel, X, Z, ell, xp, wrt, cotangent_block, per_row):
    wrt = set(wrt)
    unknown = wrt - {"lengthscale", "centers", "X"}
    if unknown:
        raise ValueError(f"wrt must name 'lengthscale', 'centers' or 'X', got {sorted(unknown)}")
    Xs, Zs = scaled(X, ell, xp), scaled(Z, ell, xp)
    zz = xp.sum(Zs * Zs, axis=1)
    d, m = X.shape[1], Z.shape[0]
    f64 = xp.float64
    acc = {"cw_z": xp.zeros(m, f64), "WtX": xp.zeros((m, d), f64), "ell": xp.zeros(d, f64), "X": []}
    for sl in _blocks(X.shape[0], m, X.dtype.itemsize, n_temps=4, per_row=per_row):
        phi, dphi = kernel.profile_and_derivative(sqdist(Xs[sl], Zs, xp, kernel.needs_exact_distances, zz), xp)
        dphi *= cotangent_block(sl, phi)
        _contract(dphi, Xs[sl], Zs, ell, wrt, xp, acc)
    ell_dev = xp.asarray(ell, dtype=f64)
    g_ell = g_z = g_x = None
    if "lengthscale" in wrt:
        g = -2.0 * acc["ell"] / ell_dev
        g_ell = g.sum(keepdims=True) if ell.size == 1 else g
        g_ell = xp.asarray(g_ell).reshape(ell.shape)
    if "centers" in wrt:
        g_z = 2.0 * (acc["cw_z"][:, None] * Zs.astype(f64) - acc["WtX"]) / ell_dev
    if "X" in wrt:
        g_x = 2.0 * xp.concatenate(acc["X"], axis=0) / ell_dev
    return KernelGrad(g_ell, g_z, g_x)


def adjoint_dense(kernel, X, Z, G, ell, xp, wrt=("lengthscale", "centers")):
    """Gradients of ``<G, k(X, Z)>`` for a dense cotangent ``G`` (n, m)."""
    return _adjoint(kernel, X, Z, ell, xp, wrt, lambda sl, _: G[sl], per_row=Z.shape[0])


def adjoint_lowrank(kernel, X, Z, P, Q, ell, xp, wrt=("lengthscale", "centers")):
    """Gradients of ``<P Q^T, k(X, Z)>``; ``P`` (n, k), ``Q`` (m, k); no n x m array."""
    QT = Q.T
    return _adjoint(kernel, X, Z, ell, xp, wrt, lambda sl, _: P[sl] @ QT, per_row=P.shape[1])


def residual_block(P0, Kb, B):
    """``P0 - [K_b B | 0]``: the residual cotangent's ``P`` on one row block (``B`` has at most as many columns)."""
    kb = B.shape[1]
    P = P0.copy()
    P[:, :kb] -= Kb @ B
    return P


def adjoint_residual(kernel, X, Z, P0, B, Q, ell, xp, wrt=("lengthscale", "centers")):
    """Gradients of ``<P Q^T, k(X, Z)>`` with ``P = P0 - [K B | 0]``, in one pass (no ``K B`` beforehand).

    ``P0`` (n, r), ``B`` (m, kb) with ``kb <= r``, ``Q`` (m, r).  Each row
    block's :math:`K_b B` comes from the kernel values the block evaluates
    for :math:`\\varphi'` anyway.
    """
    QT = Q.T
    return _adjoint(kernel, X, Z, ell, xp, wrt, lambda sl, Kb: residual_block(P0[sl], Kb, B) @ QT,
                    per_row=2 * P0.shape[1])
