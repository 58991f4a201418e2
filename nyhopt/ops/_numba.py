"""Fused CPU loops (Numba) for the block-wise kernel products and adjoints.

Same functions and signatures as :mod:`nyhopt.ops._reference`
(``op(kernel, X, Z, <operands>, ell, xp, ...)``); :data:`nyhopt.ops.CPU_IMPL`
decides per operation which of the two runs on NumPy data.

How the loops are organised
---------------------------
Rows of ``X`` are split into one contiguous chunk per Numba thread
(``prange``).  Each loop is compiled twice (:class:`_ChunkLoop`): with
``parallel=True``, used normally, and as a plain ``nogil`` loop, used in a
forked child.  Numba's OpenMP threading layer is not fork-safe (a forked
child that enters a ``prange`` loop is killed), so there the chunks run on
nyhopt's own worker threads (:func:`nyhopt._parallel.map_chunks`), which
are rebuilt after a fork.  A thread walks its rows and, for row ``i``,
computes the whole row of scaled squared distances from coordinate
differences,

.. math:: s_{ij} = \\sum_k (X_{ik}/\\ell_k - Z_{jk}/\\ell_k)^2 ,

in a buffer of length ``m`` (``Z`` is stored transposed and scaled, so the
innermost loop runs over the centers ``j`` with unit stride and vectorizes),
applies the profile :math:`\\varphi` or its derivative :math:`\\varphi'` in
place, and immediately contracts the row with the operands.  The products
with ``k`` columns take four rows at a time (one pass over a column of the
operand serves four dot products, one update of an accumulator row serves
four rank-one updates).  Per thread the temporaries are ``O(m (d + k))``
numbers whatever ``n`` is: no ``n x m`` (or ``b x m``) array exists except
the dense outputs of :func:`kernel_matrix` and the dense cotangent the caller
passes to :func:`adjoint_dense`.  The per-thread buffers count against the
memory budget (:func:`nyhopt.get_memory_budget`): when the buffers of all
threads would not fit, fewer row chunks (threads) are used.

Adjoints contract :math:`W_{ij} = G_{ij}\\,\\varphi'(s_{ij})` (with
:math:`G_{ij} = P_i \\cdot Q_j` in the low-rank form) directly in the
difference form

.. math::
    \\partial_{Z_{jk}} = \\tfrac{2}{\\ell_k} \\sum_i W_{ij} (\\tilde Z_{jk} - \\tilde X_{ik}),\\quad
    \\partial_{X_{ik}} = \\tfrac{2}{\\ell_k} \\sum_j W_{ij} (\\tilde X_{ik} - \\tilde Z_{jk}),\\quad
    \\partial_{\\ell_k} = -\\tfrac{2}{\\ell_k} \\sum_{ij} W_{ij} (\\tilde X_{ik} - \\tilde Z_{jk})^2,

which avoids the cancellation of the expanded form used by the BLAS path.

Precision
---------
Arithmetic runs in float64 for float32 and float64 data alike; adjoint sums
and the ``K^T`` accumulators are float64 per thread and summed at the end.
Products are returned in the data dtype, gradients in float64.

Numba's ``exp`` is a scalar libm call on this platform (no SVML), which stops
LLVM from vectorizing the loops.  :func:`_exp` is therefore a small
branch-free ``exp`` (Cody-Waite reduction by ``ln 2``, degree-13 Taylor
polynomial on ``|r| <= ln(2)/2``, exponent built by a bit cast) that LLVM
vectorizes; its error is within 1 ulp of ``numpy.exp`` for the arguments the
kernels use (``x <= 0``), and it returns 0 below ``-708`` where ``numpy.exp``
returns subnormals smaller than ``3.3e-308``.

Examples
--------
>>> import numpy as np
>>> import nyhopt as nh
>>> from nyhopt.ops import _numba, _reference
>>> rng = np.random.default_rng(0)
>>> X, Z, V = rng.normal(size=(50, 3)), rng.normal(size=(7, 3)), rng.normal(size=(7, 2))
>>> k = nh.MaternKernel(lengthscale=1.5, nu=2.5)
>>> ell = k.lengthscale_array(3)
>>> fast = _numba.kmv(k, X, Z, V, ell, np)
>>> bool(np.allclose(fast, _reference.kmv(k, X, Z, V, ell, np), rtol=1e-13))
True
"""
from __future__ import annotations

import math
import types as pytypes

import numba
import numpy as np
from llvmlite import ir
from numba import prange
from numba.core import types
from numba.extending import intrinsic

from .._config import get_memory_budget
from .._parallel import in_forked_child, map_chunks
from ._grad import KernelGrad
from . import _reference

__all__ = [
    "KIND_CODES",
    "kernel_matrix",
    "kmv",
    "kmtv",
    "normal_matvec",
    "adjoint_dense",
    "adjoint_lowrank",
]

#: Integer code of each kernel ``kind`` inside the compiled loops.
KIND_CODES = {"gaussian": 0, "laplacian": 1, "matern32": 2, "matern52": 3}

# 'reassoc' lets LLVM vectorize the reductions over centers, 'contract' fuses
# multiply-adds.  _exp sets fastmath=False *explicitly*: Numba passes a
# caller's fast-math flags on to callees that leave the option unset, and a
# reassociated range reduction loses ~7 bits near exp(-700).  (LLVM keeps
# fast-math flags per instruction, so inlining does not mix them.)
_LOOP = dict(cache=True, nogil=True, error_model="numpy", fastmath={"contract", "reassoc", "nsz"})
_PAR = dict(_LOOP, parallel=True)
_EXACT = dict(cache=True, nogil=True, error_model="numpy", fastmath=False)


def _disk_cache_works() -> bool:
    """Whether Numba finds a writable place for the compiled loops of this file.

    Next to the source when the install is writable, else ``NUMBA_CACHE_DIR``
    or the user's cache folder.  Without any, ``cache=True`` would make the
    decorators below raise at import: the loops are then compiled in every
    process instead (:data:`DISK_CACHE` is False).
    """
    try:
        from numba.core.caching import FunctionCache

        FunctionCache(_disk_cache_works)
        return True
    except Exception:  # RuntimeError: no locator; anything else: do not let caching break the import
        return False


#: Whether the compiled loops are kept on disk across processes (see :func:`_disk_cache_works`).
DISK_CACHE = _disk_cache_works()
if not DISK_CACHE:
    _LOOP["cache"] = _PAR["cache"] = _EXACT["cache"] = False

#: Fewer kernel entries than this per task are not worth a hand-off to nyhopt's workers.
_MIN_CHUNK_ENTRIES = 2**15

_SQRT3 = math.sqrt(3.0)
_SQRT5 = math.sqrt(5.0)
_S_CAP = 1e6  # Matern: s clipped here (exp(-sqrt(3 s)) is 0 already), no inf * 0 (nyhopt.kernels.matern.S_CAP)


# --------------------------------------------------------------------------- exp
@intrinsic
def _int64_bits_as_float64(typingctx, bits):
    """Reinterpret the bits of an int64 as a float64 (a vectorizable no-op)."""
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return sig, codegen


_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 split so that t * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10
_UNDERFLOW = -708.0  # below: result < 3.3e-308, returned as 0


@numba.njit(**_EXACT)
def _exp(x):
    """``exp(x)`` for ``x <= 0`` (branch-free, vectorizable; see module notes)."""
    xc = max(x, _UNDERFLOW)
    t = np.floor(xc * _LOG2E + 0.5)
    r = (xc - t * _LN2_HI) - t * _LN2_LO
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    e = p * _int64_bits_as_float64((np.int64(t) + 1023) << 52)
    return e if x >= _UNDERFLOW else 0.0


# ------------------------------------------------------------------ row helpers
@numba.njit(**_LOOP)
def _sqdist_row(X, i, ell, Zt, s):
    """``s[j] = sum_k (X[i, k] / ell[k] - Zt[k, j])**2`` (float64).

    Features are taken two at a time to halve the loads and stores of ``s``.
    """
    d, m = X.shape[1], s.shape[0]
    k0 = 0
    if d % 2:
        x0 = X[i, 0] / ell[0]
        for j in range(m):
            t0 = x0 - Zt[0, j]
            s[j] = t0 * t0
        k0 = 1
    else:
        for j in range(m):
            s[j] = 0.0
    for k in range(k0, d, 2):
        x0 = X[i, k] / ell[k]
        x1 = X[i, k + 1] / ell[k + 1]
        for j in range(m):
            t0 = x0 - Zt[k, j]
            t1 = x1 - Zt[k + 1, j]
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
def _chunk(c, nch, n):
    return c * n // nch, (c + 1) * n // nch


# --------------------------------------- chunked kernels: chunks c0 <= c < c1 of nch
class _ChunkLoop:
    """A chunked loop compiled with ``prange`` on Numba's threading layer and as a plain loop."""

    def __init__(self, fn):
        plain = pytypes.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + "_plain", fn.__defaults__,
                                     fn.__closure__)
        plain.__qualname__ = fn.__qualname__ + "_plain"  # its own on-disk cache entry
        self.threaded = numba.njit(**_PAR)(fn)
        self.plain = numba.njit(**_LOOP)(plain)


@_ChunkLoop
def _kernel_matrix(kind, X, ell, Zt, out, nch, c0, c1):
    n, m = X.shape[0], Zt.shape[1]
    for c in prange(c0, c1):
        lo, hi = _chunk(c, nch, n)
        s = np.empty(m)
        for i in range(lo, hi):
            _sqdist_row(X, i, ell, Zt, s)
            _profile_row(kind, s)
            for j in range(m):
                out[i, j] = s[j]


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
    n, m, nu = X.shape[0], Zt.shape[1], U.shape[1]
    for c in prange(c0, c1):
        lo, hi = _chunk(c, nch, n)
        s0, s1, s2, s3 = np.empty(m), np.empty(m), np.empty(m), np.empty(m)
        a = acc[c]
        for i in range(lo, hi, 4):
            nr = _profile_rows4(kind, X, i, hi, ell, Zt, s0, s1, s2, s3)
            _weighted_rows4(a, U, i, nr, s0, s1, s2, s3)


@_ChunkLoop
def _normal(kind, X, ell, Zt, Vt, U, acc, accu, kv, nch, c0, c1):
    n, m, nv, nu = X.shape[0], Zt.shape[1], Vt.shape[0], U.shape[1]
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


@_ChunkLoop
def _adjoint_lowrank(kind, X, ell, Zt, P, Qt, az, ae, gx, need_z, need_x, nch, c0, c1):
    n, m, r = X.shape[0], Zt.shape[1], P.shape[1]
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


# ------------------------------------------------------------------ dispatchers
def _setup(kernel, X, Z, ell):
    """Kind code, C-contiguous X, full float64 lengthscales (d,), scaled Z^T."""
    code = KIND_CODES.get(kernel.kind)
    d = X.shape[1]
    ell_full = np.ascontiguousarray(np.broadcast_to(np.asarray(ell, dtype=np.float64), (d,)))
    Zt = np.ascontiguousarray((np.asarray(Z, dtype=np.float64) / ell_full).T)
    return code, np.ascontiguousarray(X), ell_full, Zt


def _n_chunks(n, per_chunk):
    """Number of row chunks: one per thread, fewer if the per-chunk buffers
    (``per_chunk`` float64 numbers: row buffers and private accumulators)
    would not fit the memory budget together."""
    fit = get_memory_budget() // max(8 * per_chunk, 1)
    return int(max(1, min(n, numba.get_num_threads(), fit)))


def _chunked(loop, entries, *args):
    """Run the :class:`_ChunkLoop` ``loop`` over all ``nch`` chunks (the last of ``args``).

    ``entries`` is the number of kernel entries of the whole pass.  In a
    forked child the chunks go to nyhopt's worker threads in groups of at
    least ``_MIN_CHUNK_ENTRIES`` entries (the results do not depend on the
    grouping: each chunk owns its rows and accumulators).
    """
    nch = args[-1]
    if not in_forked_child():
        loop.threaded(*args, 0, nch)
        return
    parts = int(max(1, min(nch, entries // _MIN_CHUNK_ENTRIES)))
    map_chunks(lambda g: loop.plain(*args, nch * g // parts, nch * (g + 1) // parts), parts)


def _t64(A):
    """``A.T`` as a C-contiguous float64 array."""
    return np.ascontiguousarray(np.asarray(A, dtype=np.float64).T)


def kernel_matrix(kernel, X, Z, ell, xp, symmetric=False, out=None):
    """Dense ``k(X, Z)`` (n, m) in the dtype of ``X`` (written into ``out`` when given).

    Distances come from coordinate differences, so ``k(X, X)`` is exactly
    symmetric with a unit diagonal without further work (``symmetric`` is
    accepted for signature compatibility).
    """
    code, X, ell_full, Zt = _setup(kernel, X, Z, ell)
    if code is None:
        K = _reference.kernel_matrix(kernel, X, Z, ell, xp, symmetric=symmetric)
        if out is None:
            return K
        out[...] = K
        return out
    if out is None or not out.flags.c_contiguous:
        out = np.empty((X.shape[0], Zt.shape[1]), dtype=X.dtype)
    nch = _n_chunks(X.shape[0], Zt.shape[1])
    _chunked(_kernel_matrix, out.size, code, X, ell_full, Zt, out, nch)
    return out


def kmv(kernel, X, Z, V, ell, xp):
    """``k(X, Z) @ V`` for V (m, k); result (n, k) in the dtype of ``X``."""
    code, X, ell_full, Zt = _setup(kernel, X, Z, ell)
    if code is None:
        return _reference.kmv(kernel, X, Z, V, ell, xp)
    out = np.empty((X.shape[0], V.shape[1]), dtype=X.dtype)
    nch = _n_chunks(X.shape[0], 4 * Zt.shape[1])
    _chunked(_kmv, X.shape[0] * Zt.shape[1], code, X, ell_full, Zt, _t64(V), out, nch)
    return out


def kmtv(kernel, X, Z, U, ell, xp):
    """``k(X, Z).T @ U`` for U (n, k); result (m, k), accumulated in float64."""
    code, X, ell_full, Zt = _setup(kernel, X, Z, ell)
    if code is None:
        return _reference.kmtv(kernel, X, Z, U, ell, xp)
    nch = _n_chunks(X.shape[0], (U.shape[1] + 4) * Zt.shape[1])
    acc = np.zeros((nch, U.shape[1], Zt.shape[1]))
    _chunked(_kmtv, X.shape[0] * Zt.shape[1], code, X, ell_full, Zt, np.ascontiguousarray(U), acc, nch)
    return acc.sum(axis=0).T.astype(X.dtype)


def normal_matvec(kernel, X, Z, V, ell, xp, U=None, kv=False):
    """``(K^T K V, K^T U or None)`` in one pass over ``X``; both (m, k).

    With ``kv=True`` the product ``K V`` (n, k) of the same pass is returned third.
    """
    code, X, ell_full, Zt = _setup(kernel, X, Z, ell)
    if code is None:
        return _reference.normal_matvec(kernel, X, Z, V, ell, xp, U=U, kv=kv)
    m = Zt.shape[1]
    Uc = np.zeros((X.shape[0], 0), dtype=X.dtype) if U is None else np.ascontiguousarray(U)
    nch = _n_chunks(X.shape[0], (V.shape[1] + Uc.shape[1] + 4) * m)
    acc = np.zeros((nch, V.shape[1], m))
    accu = np.zeros((nch, Uc.shape[1], m))
    KV = np.empty((X.shape[0] if kv else 0, V.shape[1]), dtype=X.dtype)
    _chunked(_normal, X.shape[0] * m, code, X, ell_full, Zt, _t64(V), Uc, acc, accu, KV, nch)
    out = acc.sum(axis=0).T.astype(X.dtype)
    res = (out, None if U is None else accu.sum(axis=0).T.astype(X.dtype))
    return res + (KV,) if kv else res


def _check_wrt(wrt):
    wrt = set(wrt)
    unknown = wrt - {"lengthscale", "centers", "X"}
    if unknown:
        raise ValueError(f"wrt must name 'lengthscale', 'centers' or 'X', got {sorted(unknown)}")
    return "centers" in wrt, "lengthscale" in wrt, "X" in wrt


def _adjoint(run, X, Zt, ell, ell_full, flags):
    """Allocate the accumulators, run the fused loop, finish the gradients."""
    need_z, need_ell, need_x = flags
    n, d = X.shape
    m = Zt.shape[1]
    nch = _n_chunks(n, (d if need_z else 0) * m + 2 * m + d)
    az = np.zeros((nch, d, m) if need_z else (nch, 0, 0))
    ae = np.zeros((nch, d))
    gx = np.empty((n, d) if need_x else (0, 0))
    run(az, ae, gx, need_z, need_x, nch)
    g_ell = g_z = g_x = None
    if need_ell:
        g = -2.0 * ae.sum(axis=0) / ell_full
        g_ell = (g.sum(keepdims=True) if np.size(ell) == 1 else g).reshape(np.shape(ell))
    if need_z:
        g_z = (2.0 * az.sum(axis=0) / ell_full[:, None]).T.copy()
    if need_x:
        g_x = gx
        g_x *= 2.0 / ell_full
    return KernelGrad(g_ell, g_z, g_x)


def adjoint_dense(kernel, X, Z, G, ell, xp, wrt=("lengthscale", "centers")):
    """Gradients of ``<G, k(X, Z)>`` for a dense cotangent ``G`` (n, m); float64."""
    flags = _check_wrt(wrt)
    code, X, ell_full, Zt = _setup(kernel, X, Z, ell)
    if code is None:
        return _reference.adjoint_dense(kernel, X, Z, G, ell, xp, wrt=wrt)
    G = np.ascontiguousarray(G)

    def run(*acc):
        _chunked(_adjoint_dense, G.size, code, X, ell_full, Zt, G, *acc)

    return _adjoint(run, X, Zt, ell, ell_full, flags)


def adjoint_lowrank(kernel, X, Z, P, Q, ell, xp, wrt=("lengthscale", "centers")):
    """Gradients of ``<P Q^T, k(X, Z)>``; ``P`` (n, k), ``Q`` (m, k); float64.

    ``W_ij = (P_i . Q_j) phi'(s_ij)`` is formed one row at a time and reduced
    on the spot into the center, lengthscale and ``X`` gradients.
    """
    flags = _check_wrt(wrt)
    code, X, ell_full, Zt = _setup(kernel, X, Z, ell)
    if code is None:
        return _reference.adjoint_lowrank(kernel, X, Z, P, Q, ell, xp, wrt=wrt)
    P = np.ascontiguousarray(P)
    Qt = _t64(Q)

    def run(*acc):
        _chunked(_adjoint_lowrank, X.shape[0] * Zt.shape[1], code, X, ell_full, Zt, P, Qt, *acc)

    return _adjoint(run, X, Zt, ell, ell_full, flags)

