"""Row helpers of the fused CPU loops (Numba): distances, profiles, contractions.

Each helper works on one row (or four rows) of a kernel block held in a
float64 buffer of length ``m``; the chunked loops of
:mod:`nyhopt.ops._numba_loops` call them (module notes:
:mod:`nyhopt.ops._numba`).
"""
from __future__ import annotations

import numba
import numpy as np

from ._numba_base import _LOOP, _S_CAP, _SQRT3, _SQRT5, _exp

__all__: list = []


# ------------------------------------------------------------------ row helpers
@numba.njit(**_LOOP)
def _sqdist_row(X, i, ell, Zt, s):
    """``s[j] = sum_k (X[i, k] / ell[k] - Zt[k, j])**2`` (float64).

    Features are taken two at a time to halve the loads and stores of ``s``; the
    rows of ``Zt`` are read through 1-D slices (indexed as ``Zt[k, j]`` the
    loop was slower, docs/performance-ops.md).
    """
    d, m = X.shape[1], s.shape[0]
    k0 = 0
    if d % 2:
        x0 = X[i, 0] / ell[0]
        z0 = Zt[0]
        for j in range(m):
            t0 = x0 - z0[j]
            s[j] = t0 * t0
        k0 = 1
    else:
        for j in range(m):
            s[j] = 0.0
    for k in range(k0, d, 2):
        x0 = X[i, k] / ell[k]
        x1 = X[i, k + 1] / ell[k + 1]
        z0 = Zt[k]
        z1 = Zt[k + 1]
        for j in range(m):
            t0 = x0 - z0[j]
            t1 = x1 - z1[j]
            s[j] += t0 * t0 + t1 * t1


@numba.njit(**_LOOP)
def _cap_row(s):
    """Clip ``s`` at ``_S_CAP`` in place (NaN stays NaN); a loop of its own keeps the profiles' loops as they were."""
    for j in range(s.shape[0]):
        if s[j] > _S_CAP:
            s[j] = _S_CAP


@numba.njit(**_LOOP)
def _profile_row(kind, s):
    """Overwrite ``s`` with ``phi(s)`` for kernel code ``kind``."""
    m = s.shape[0]
    if kind == 0:
        for j in range(m):
            s[j] = _exp(-0.5 * s[j])
    elif kind == 1:
        for j in range(m):
            s[j] = _exp(-np.sqrt(s[j]))
    elif kind == 2:
        _cap_row(s)
        for j in range(m):
            a = _SQRT3 * np.sqrt(s[j])
            s[j] = (1.0 + a) * _exp(-a)
    else:
        _cap_row(s)
        for j in range(m):
            a = _SQRT5 * np.sqrt(s[j])
            s[j] = (1.0 + a + (5.0 / 3.0) * s[j]) * _exp(-a)


@numba.njit(**_LOOP)
def _derivative_row(kind, s):
    """Overwrite ``s`` with ``phi'(s)`` (0 at s = 0 for the Laplacian)."""
    m = s.shape[0]
    if kind == 0:
        for j in range(m):
            s[j] = -0.5 * _exp(-0.5 * s[j])
    elif kind == 1:
        for j in range(m):
            r = np.sqrt(s[j])
            rr = r if r > 0.0 else 1.0
            s[j] = -0.5 * _exp(-r) / rr if r > 0.0 else 0.0
    elif kind == 2:
        for j in range(m):
            s[j] = -1.5 * _exp(-_SQRT3 * np.sqrt(s[j]))
    else:
        _cap_row(s)
        for j in range(m):
            a = _SQRT5 * np.sqrt(s[j])
            s[j] = (-5.0 / 6.0) * (1.0 + a) * _exp(-a)


@numba.njit(**_LOOP)
def _value_derivative_row(kind, s, v):
    """``v = phi(s)`` and ``s = phi'(s)`` with one ``exp`` per entry (the values of :func:`_profile_row`
    and :func:`_derivative_row`; Matern 3/2's derivative with ``s`` capped, where both are 0 already)."""
    m = s.shape[0]
    if kind == 0:
        for j in range(m):
            e = _exp(-0.5 * s[j])
            v[j] = e
            s[j] = -0.5 * e
    elif kind == 1:
        for j in range(m):
            r = np.sqrt(s[j])
            e = _exp(-r)
            rr = r if r > 0.0 else 1.0
            v[j] = e
            s[j] = -0.5 * e / rr if r > 0.0 else 0.0
    elif kind == 2:
        _cap_row(s)
        for j in range(m):
            a = _SQRT3 * np.sqrt(s[j])
            e = _exp(-a)
            v[j] = (1.0 + a) * e
            s[j] = -1.5 * e
    else:
        _cap_row(s)
        for j in range(m):
            a = _SQRT5 * np.sqrt(s[j])
            e = _exp(-a)
            v[j] = (1.0 + a + (5.0 / 3.0) * s[j]) * e
            s[j] = (-5.0 / 6.0) * (1.0 + a) * e


@numba.njit(**_LOOP)
def _profile_rows4(kind, X, i, hi, ell, Zt, s0, s1, s2, s3):
    """``phi`` rows of ``X[i : i + 4]`` into ``s0..s3``; returns how many are real.

    Rows at or past ``hi`` repeat row ``hi - 1`` (their weights are set to 0
    by the callers), so the contractions below can always take four rows.
    """
    last = hi - 1
    _sqdist_row(X, i, ell, Zt, s0)
    _sqdist_row(X, min(i + 1, last), ell, Zt, s1)
    _sqdist_row(X, min(i + 2, last), ell, Zt, s2)
    _sqdist_row(X, min(i + 3, last), ell, Zt, s3)
    _profile_row(kind, s0)
    _profile_row(kind, s1)
    _profile_row(kind, s2)
    _profile_row(kind, s3)
    return min(4, hi - i)


@numba.njit(**_LOOP)
def _weights4(A, i, q, nr):
    """``A[i + r, q]`` as float64 for r < nr, 0 for the padding rows."""
    w0 = np.float64(A[i, q])
    w1 = np.float64(A[i + 1, q]) if nr > 1 else 0.0
    w2 = np.float64(A[i + 2, q]) if nr > 2 else 0.0
    w3 = np.float64(A[i + 3, q]) if nr > 3 else 0.0
    return w0, w1, w2, w3


@numba.njit(**_LOOP)
def _dots4(Vt, q, s0, s1, s2, s3):
    """``(s_r . Vt[q])`` for the four rows: one pass over ``Vt[q]``."""
    t0 = t1 = t2 = t3 = 0.0
    for j in range(Vt.shape[1]):
        v = Vt[q, j]
        t0 += s0[j] * v
        t1 += s1[j] * v
        t2 += s2[j] * v
        t3 += s3[j] * v
    return t0, t1, t2, t3


@numba.njit(**_LOOP)
def _rank4_update(a, q, w0, w1, w2, w3, s0, s1, s2, s3):
    """``a[q, :] += sum_r w_r s_r``: one load and store of ``a`` for four rows."""
    for j in range(a.shape[1]):
        a[q, j] += w0 * s0[j] + w1 * s1[j] + w2 * s2[j] + w3 * s3[j]


@numba.njit(**_LOOP)
def _dots4x2(Vt, q, s0, s1, s2, s3):
    """``(s_r . Vt[q])`` and ``(s_r . Vt[q + 1])`` for the four rows in one pass."""
    t0 = t1 = t2 = t3 = 0.0
    r0 = r1 = r2 = r3 = 0.0
    for j in range(Vt.shape[1]):
        v, w = Vt[q, j], Vt[q + 1, j]
        a0, a1, a2, a3 = s0[j], s1[j], s2[j], s3[j]
        t0 += a0 * v
        t1 += a1 * v
        t2 += a2 * v
        t3 += a3 * v
        r0 += a0 * w
        r1 += a1 * w
        r2 += a2 * w
        r3 += a3 * w
    return t0, t1, t2, t3, r0, r1, r2, r3


@numba.njit(**_LOOP)
def _rank4x2_update(a, q, w0, w1, w2, w3, v0, v1, v2, v3, s0, s1, s2, s3):
    """``a[q] += sum_r w_r s_r`` and ``a[q + 1] += sum_r v_r s_r`` in one pass over the rows."""
    for j in range(a.shape[1]):
        b0, b1, b2, b3 = s0[j], s1[j], s2[j], s3[j]
        a[q, j] += w0 * b0 + w1 * b1 + w2 * b2 + w3 * b3
        a[q + 1, j] += v0 * b0 + v1 * b1 + v2 * b2 + v3 * b3


@numba.njit(**_LOOP)
def _store4(out, i, q, nr, t0, t1, t2, t3):
    """``out[i + r, q] = t_r`` for the ``nr`` real rows."""
    out[i, q] = t0
    if nr > 1:
        out[i + 1, q] = t1
    if nr > 2:
        out[i + 2, q] = t2
    if nr > 3:
        out[i + 3, q] = t3


@numba.njit(**_LOOP)
def _weighted_rows4(a, U, i, nr, s0, s1, s2, s3):
    """``a[q] += sum_r U[i + r, q] s_r`` for every column q (two at a time)."""
    nu = U.shape[1]
    for q in range(0, nu - 1, 2):
        u0, u1, u2, u3 = _weights4(U, i, q, nr)
        v0, v1, v2, v3 = _weights4(U, i, q + 1, nr)
        _rank4x2_update(a, q, u0, u1, u2, u3, v0, v1, v2, v3, s0, s1, s2, s3)
    if nu % 2:
        u0, u1, u2, u3 = _weights4(U, i, nu - 1, nr)
        _rank4_update(a, nu - 1, u0, u1, u2, u3, s0, s1, s2, s3)

@numba.njit(**_LOOP)
def _contract_row(X, i, ell, Zt, w, az, ae, gx, need_z, need_x):
    """Add row ``i`` of ``W`` (in ``w``) to the adjoint sums (difference form).

    One sweep over the centers per feature ``k`` updates the center sums
    ``az[k, j] += W_ij (Z~_jk - X~_ik)`` (when ``need_z``), the lengthscale
    sum ``ae[k] += sum_j W_ij (Z~_jk - X~_ik)^2`` and the ``X`` gradient row.
    """
    m = Zt.shape[1]
    for k in range(X.shape[1]):
        xk = X[i, k] / ell[k]
        e = 0.0
        g = 0.0
        if need_z:
            for j in range(m):
                t = Zt[k, j] - xk
                wt = w[j] * t
                az[k, j] += wt
                e += wt * t
                g += wt
        else:
            for j in range(m):
                t = Zt[k, j] - xk
                wt = w[j] * t
                e += wt * t
                g += wt
        ae[k] += e
        if need_x:
            gx[i, k] = -g

@numba.njit(**_LOOP)
def _lowrank_row(P, i, Qt, g):
    """``g[j] = sum_q P[i, q] Qt[q, j]``, two columns at a time."""
    r, m = P.shape[1], g.shape[0]
    q0 = 0
    if r % 2:
        p0 = np.float64(P[i, 0])
        for j in range(m):
            g[j] = p0 * Qt[0, j]
        q0 = 1
    else:
        for j in range(m):
            g[j] = 0.0
    for q in range(q0, r, 2):
        p0 = np.float64(P[i, q])
        p1 = np.float64(P[i, q + 1])
        for j in range(m):
            g[j] += p0 * Qt[q, j] + p1 * Qt[q + 1, j]



@numba.njit(**_LOOP)
def _residual_row(P0, i, Bt, Qt, v, p, g):
    """``g = (P0[i] - [v B | 0]) Qt``: the residual cotangent's row ``i`` from the kernel row ``v``.

    ``p`` (r,) is a buffer for the row of ``P``; ``Bt`` (kb, m), ``Qt`` (r, m).
    """
    r, kb, m = P0.shape[1], Bt.shape[0], v.shape[0]
    for q in range(r):
        p[q] = np.float64(P0[i, q])
    for q in range(0, kb - 1, 2):  # two columns of B per sweep over the kernel row
        t0 = t1 = 0.0
        for j in range(m):
            vj = v[j]
            t0 += vj * Bt[q, j]
            t1 += vj * Bt[q + 1, j]
        p[q] -= t0
        p[q + 1] -= t1
    if kb % 2:
        t0 = 0.0
        for j in range(m):
            t0 += v[j] * Bt[kb - 1, j]
        p[kb - 1] -= t0
    for j in range(m):
        g[j] = 0.0
    for q in range(0, r - 1, 2):
        p0, p1 = p[q], p[q + 1]
        for j in range(m):
            g[j] += p0 * Qt[q, j] + p1 * Qt[q + 1, j]
    if r % 2:
        p0 = p[r - 1]
        for j in range(m):
            g[j] += p0 * Qt[r - 1, j]
