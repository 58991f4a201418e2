"""Fused CPU loops (Numba) for the block-wise kernel products and adjoints: the dispatchers.

Same functions and signatures as :mod:`nyhopt.ops._reference`
(``op(kernel, X, Z, <operands>, ell, xp, ...)``); :data:`nyhopt.ops.CPU_IMPL`
decides per operation which of the two runs on NumPy data.

How the loops are organised
---------------------------
Four modules: :mod:`nyhopt.ops._numba_base` (compile options, the
vectorizable ``exp``, chunking), :mod:`nyhopt.ops._numba_rows` (row
helpers), :mod:`nyhopt.ops._numba_loops` (the chunked loops) and this one
(allocation, chunk counts, dispatch; the names of the other three are
re-exported here).
Rows of ``X`` are split into one contiguous chunk per Numba thread
(``prange``).  Each loop is compiled twice (:class:`_ChunkLoop`): with
``parallel=True``, used normally, and as a plain ``nogil`` loop, used in a
forked child.  Numba's OpenMP threading layer is not fork-safe (a forked
child that enters a ``prange`` loop is killed), so there the chunks run on
nyhopt's own worker threads (:func:`nyhopt.backend._parallel.map_chunks`), which
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

import numba
import numpy as np

from ..backend._config import get_memory_budget
from ..backend._parallel import in_forked_child, map_chunks
from ._grad import KernelGrad
from . import _reference
from ._numba_base import (_EXACT, _LOOP, _PAR, _S_CAP, _SQRT3, _SQRT5, DISK_CACHE, KIND_CODES, _ChunkLoop,  # noqa: F401
                          _chunk, _disk_cache_works, _exp, _int64_bits_as_float64)
from ._numba_loops import _adjoint_dense, _adjoint_lowrank, _adjoint_residual, _kernel_matrix, _kmtv, _kmv, _normal
from ._numba_rows import (_contract_row, _derivative_row, _lowrank_row, _profile_row, _profile_rows4,  # noqa: F401
                          _sqdist_row)

__all__ = [
    "KIND_CODES",
    "kernel_matrix",
    "kmv",
    "kmtv",
    "normal_matvec",
    "adjoint_dense",
    "adjoint_lowrank",
    "adjoint_residual",
]


#: Fewer kernel entries than this per task are not worth a hand-off to nyhopt's workers.
_MIN_CHUNK_ENTRIES = 2**15


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


def kernel_matrix(kernel, X, Z, ell, xp, symmetric=False, out=None, copy=None):
    """Dense ``k(X, Z)`` (n, m) in the dtype of ``X`` (written into ``out`` when given).

    Distances come from coordinate differences, so ``k(X, X)`` is exactly
    symmetric with a unit diagonal without further work (``symmetric`` is
    accepted for signature compatibility).  ``copy`` (C-contiguous, like
    the result) receives the same values in the same pass.
    """
    code, X, ell_full, Zt = _setup(kernel, X, Z, ell)
    if code is None:
        K = _reference.kernel_matrix(kernel, X, Z, ell, xp, symmetric=symmetric)
        if copy is not None:
            copy[...] = K
        if out is None:
            return K
        out[...] = K
        return out
    if out is None or not out.flags.c_contiguous:
        out = np.empty((X.shape[0], Zt.shape[1]), dtype=X.dtype)
    if copy is None:
        copy = np.empty((0, Zt.shape[1]), dtype=X.dtype)
    elif copy.shape != out.shape or copy.dtype != out.dtype or not copy.flags.c_contiguous:
        raise ValueError(f"copy must be C-contiguous, of shape {out.shape} and dtype {out.dtype}")
    nch = _n_chunks(X.shape[0], Zt.shape[1])
    _chunked(_kernel_matrix, out.size, code, X, ell_full, Zt, out, copy, nch)
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


def _adjoint(run, X, Zt, ell, ell_full, flags, buffers=2):
    """Allocate the accumulators, run the fused loop (``buffers`` rows of ``m`` per chunk), finish the gradients."""
    need_z, need_ell, need_x = flags
    n, d = X.shape
    m = Zt.shape[1]
    nch = _n_chunks(n, (d if need_z else 0) * m + buffers * m + d)
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



def adjoint_residual(kernel, X, Z, P0, B, Q, ell, xp, wrt=("lengthscale", "centers")):
    """Gradients of ``<P Q^T, k(X, Z)>``, ``P = P0 - [K B | 0]``, in one pass; float64.

    Per row, one ``exp`` per entry gives both :math:`\\varphi` (for
    :math:`K_i B`) and :math:`\\varphi'` (for the contraction); ``P0`` (n, r),
    ``B`` (m, kb <= r), ``Q`` (m, r).
    """
    flags = _check_wrt(wrt)
    code, X, ell_full, Zt = _setup(kernel, X, Z, ell)
    if code is None:
        return _reference.adjoint_residual(kernel, X, Z, P0, B, Q, ell, xp, wrt=wrt)
    P0 = np.ascontiguousarray(P0)
    Bt, Qt = _t64(B), _t64(Q)

    def run(*acc):
        _chunked(_adjoint_residual, X.shape[0] * Zt.shape[1], code, X, ell_full, Zt, P0, Bt, Qt, *acc)

    return _adjoint(run, X, Zt, ell, ell_full, flags, buffers=3)
