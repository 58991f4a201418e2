"""The chunked fused loops (Numba): one chunk of rows of ``X`` per thread.

Each loop is a :class:`~nyhopt.ops._numba_base._ChunkLoop`, compiled with
``prange`` and as a plain loop for forked children; the dispatchers of
:mod:`nyhopt.ops._numba` allocate the outputs and accumulators and run them
(module notes there).
"""
from __future__ import annotations

import numpy as np
from numba import prange

from ._numba_base import _ChunkLoop, _chunk
from ._numba_rows import (_contract_row, _derivative_row, _dots4, _dots4x2, _lowrank_row, _profile_row,
                          _profile_rows4, _rank4_update, _rank4x2_update, _residual_row, _sqdist_row, _store4,
                          _value_derivative_row, _weighted_rows4)

__all__: list = []


@_ChunkLoop
def _kernel_matrix(kind, X, ell, Zt, out, out2, nch, c0, c1):
    """``out = k(X, Z)``, and ``out2`` the same when it has rows (a copy without reading ``out`` back).

    The rows of ``Zt`` and of the outputs are read and written through 1-D slices
    (:func:`_sqdist_row`, ``out[i]``): indexed as ``out[i, j]`` the loops were slower
    (a Gaussian ``k(Z, X)`` at P1 with its copy: 17.0 -> 14.0 ms on one core, the same numbers).
    """
    n, m = X.shape[0], Zt.shape[1]
    two = out2.shape[0] > 0
    for c in prange(c0, c1):
        lo, hi = _chunk(c, nch, n)
        s = np.empty(m)
        for i in range(lo, hi):
            _sqdist_row(X, i, ell, Zt, s)
            _profile_row(kind, s)
            o1 = out[i]
            if two:
                o2 = out2[i]
                for j in range(m):
                    o1[j] = s[j]
                    o2[j] = s[j]
            else:
                for j in range(m):
                    o1[j] = s[j]


@_ChunkLoop
def _kmv(kind, X, ell, Zt, Vt, out, nch, c0, c1):
    n, m, nv = X.shape[0], Zt.shape[1], Vt.shape[0]
    for c in prange(c0, c1):
        lo, hi = _chunk(c, nch, n)
        s0, s1, s2, s3 = np.empty(m), np.empty(m), np.empty(m), np.empty(m)
        for i in range(lo, hi, 4):
            nr = _profile_rows4(kind, X, i, hi, ell, Zt, s0, s1, s2, s3)
            for q in range(0, nv - 1, 2):
                t0, t1, t2, t3, r0, r1, r2, r3 = _dots4x2(Vt, q, s0, s1, s2, s3)
                _store4(out, i, q, nr, t0, t1, t2, t3)
                _store4(out, i, q + 1, nr, r0, r1, r2, r3)
            if nv % 2:
                t0, t1, t2, t3 = _dots4(Vt, nv - 1, s0, s1, s2, s3)
                _store4(out, i, nv - 1, nr, t0, t1, t2, t3)


@_ChunkLoop
def _kmtv(kind, X, ell, Zt, U, acc, nch, c0, c1):
    n, m = X.shape[0], Zt.shape[1]
    for c in prange(c0, c1):
        lo, hi = _chunk(c, nch, n)
        s0, s1, s2, s3 = np.empty(m), np.empty(m), np.empty(m), np.empty(m)
        a = acc[c]
        for i in range(lo, hi, 4):
            nr = _profile_rows4(kind, X, i, hi, ell, Zt, s0, s1, s2, s3)
            _weighted_rows4(a, U, i, nr, s0, s1, s2, s3)


@_ChunkLoop
def _normal(kind, X, ell, Zt, Vt, U, acc, accu, kv, nch, c0, c1):
    n, m, nv = X.shape[0], Zt.shape[1], Vt.shape[0]
    store = kv.shape[0] > 0
    for c in prange(c0, c1):
        lo, hi = _chunk(c, nch, n)
        s0, s1, s2, s3 = np.empty(m), np.empty(m), np.empty(m), np.empty(m)
        a, au = acc[c], accu[c]
        for i in range(lo, hi, 4):
            nr = _profile_rows4(kind, X, i, hi, ell, Zt, s0, s1, s2, s3)
            for q in range(0, nv - 1, 2):  # two columns at a time: each row load feeds 4 FMAs
                t0, t1, t2, t3, r0, r1, r2, r3 = _dots4x2(Vt, q, s0, s1, s2, s3)
                if store:
                    _store4(kv, i, q, nr, t0, t1, t2, t3)
                    _store4(kv, i, q + 1, nr, r0, r1, r2, r3)
                t1, r1 = (t1, r1) if nr > 1 else (0.0, 0.0)
                t2, r2 = (t2, r2) if nr > 2 else (0.0, 0.0)
                t3, r3 = (t3, r3) if nr > 3 else (0.0, 0.0)
                _rank4x2_update(a, q, t0, t1, t2, t3, r0, r1, r2, r3, s0, s1, s2, s3)
            if nv % 2:
                q = nv - 1
                t0, t1, t2, t3 = _dots4(Vt, q, s0, s1, s2, s3)
                if store:
                    _store4(kv, i, q, nr, t0, t1, t2, t3)
                t1 = t1 if nr > 1 else 0.0
                t2 = t2 if nr > 2 else 0.0
                t3 = t3 if nr > 3 else 0.0
                _rank4_update(a, q, t0, t1, t2, t3, s0, s1, s2, s3)
            _weighted_rows4(au, U, i, nr, s0, s1, s2, s3)

@_ChunkLoop
def _adjoint_dense(kind, X, ell, Zt, G, az, ae, gx, need_z, need_x, nch, c0, c1):
    n, m = X.shape[0], Zt.shape[1]
    for c in prange(c0, c1):
        lo, hi = _chunk(c, nch, n)
        w = np.empty(m)
        for i in range(lo, hi):
            _sqdist_row(X, i, ell, Zt, w)
            _derivative_row(kind, w)
            for j in range(m):
                w[j] *= G[i, j]
            _contract_row(X, i, ell, Zt, w, az[c], ae[c], gx, need_z, need_x)

@_ChunkLoop
def _adjoint_lowrank(kind, X, ell, Zt, P, Qt, az, ae, gx, need_z, need_x, nch, c0, c1):
    n, m = X.shape[0], Zt.shape[1]
    for c in prange(c0, c1):
        lo, hi = _chunk(c, nch, n)
        w = np.empty(m)
        g = np.empty(m)
        for i in range(lo, hi):
            _sqdist_row(X, i, ell, Zt, w)
            _derivative_row(kind, w)
            _lowrank_row(P, i, Qt, g)
            for j in range(m):
                w[j] *= g[j]
            _contract_row(X, i, ell, Zt, w, az[c], ae[c], gx, need_z, need_x)



@_ChunkLoop
def _adjoint_residual(kind, X, ell, Zt, P0, Bt, Qt, az, ae, gx, need_z, need_x, nch, c0, c1):
    """The low-rank adjoint of ``(P0 - [K B | 0]) Q^T``: each row's ``K_i B`` from the kernel row it evaluates."""
    n, m, r = X.shape[0], Zt.shape[1], P0.shape[1]
    for c in prange(c0, c1):
        lo, hi = _chunk(c, nch, n)
        w = np.empty(m)
        v = np.empty(m)
        g = np.empty(m)
        p = np.empty(r)
        for i in range(lo, hi):
            _sqdist_row(X, i, ell, Zt, w)
            _value_derivative_row(kind, w, v)
            _residual_row(P0, i, Bt, Qt, v, p, g)
            for j in range(m):
                w[j] *= g[j]
            _contract_row(X, i, ell, Zt, w, az[c], ae[c], gx, need_z, need_x)
