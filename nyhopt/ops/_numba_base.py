"""Compile options, the vectorizable ``exp`` and the chunking of the fused CPU loops.

Shared by :mod:`nyhopt.ops._numba_rows` (row helpers),
:mod:`nyhopt.ops._numba_loops` (the chunked loops) and
:mod:`nyhopt.ops._numba` (the dispatchers); the module notes of
:mod:`nyhopt.ops._numba` describe the design.

Numba's ``exp`` is a scalar libm call on this platform (no SVML), which stops
LLVM from vectorizing the loops.  :func:`_exp` is therefore a small
branch-free ``exp`` (Cody-Waite reduction by ``ln 2``, degree-13 Taylor
polynomial on ``|r| <= ln(2)/2`` in fused multiply-adds, exponent built by
integer operations on bit casts) that LLVM vectorizes, AVX2 included; its
error is within 1 ulp of ``numpy.exp`` for the arguments the kernels use (``x <= 0``), and it returns 0 below ``-708`` where ``numpy.exp``
returns subnormals smaller than ``3.3e-308``.
"""
from __future__ import annotations

import math
import os
import types as pytypes

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

__all__ = ["KIND_CODES", "DISK_CACHE"]

#: Integer code of each kernel ``kind`` inside the compiled loops.
KIND_CODES = {"gaussian": 0, "laplacian": 1, "matern32": 2, "matern52": 3}

# 'reassoc' lets LLVM vectorize the reductions over centers, 'contract' fuses
# multiply-adds.  _exp sets its flags *explicitly* to 'contract' alone: Numba
# passes a caller's fast-math flags on to callees that leave the option unset,
# and a reassociated range reduction loses ~7 bits near exp(-700); fused
# multiply-adds only round less (t * ln2_hi is exact anyway).  (LLVM keeps
# fast-math flags per instruction, so inlining does not mix them.)
_LOOP = dict(cache=True, nogil=True, error_model="numpy", fastmath={"contract", "reassoc", "nsz"})
_PAR = dict(_LOOP, parallel=True)
_EXACT = dict(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})


#: The modules whose compiled loops call each other: the on-disk cache of each is keyed by all of them.
CACHE_SOURCES = ("_numba_base.py", "_numba_rows.py", "_numba_loops.py", "_numba.py", "_factored.py")


def _install_joint_stamp():
    """Key the on-disk cache of the :data:`CACHE_SOURCES` loops by the contents of all of them.

    Numba checks only the file that defines a function before loading its
    compiled code, so an edit of a helper in another file (``_exp`` here)
    would leave the cached loops that inline it stale.  Each of Numba's
    file-backed cache locators is replaced by a subclass that, for these
    files only, stamps the cache with the hashes of all of them.  Without
    these Numba internals (another Numba version) nothing is changed.
    """
    try:
        from numba.core import caching

        impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl
        hash_file = caching._hash_source_file
        bases = (caching.UserProvidedCacheLocator, caching.InTreeCacheLocator, caching.UserWideCacheLocator)
    except (ImportError, AttributeError):  # pragma: no cover - another Numba
        return
    here = os.path.dirname(os.path.abspath(__file__))
    paths = tuple(os.path.join(here, f) for f in CACHE_SOURCES)

    def stamp():
        return tuple(hash_file(p, os.stat(p).st_mtime, os.stat(p).st_size) for p in paths if os.path.exists(p))

    def joint(base):
        if getattr(base, "_nyhopt_joint", False):
            return base
        return type(base.__name__, (base,), {
            "_nyhopt_joint": True, "__module__": __name__,
            "get_source_stamp": lambda self: (stamp() if os.path.abspath(self._py_file) in paths
                                              else base.get_source_stamp(self)),
        })

    impl._locator_classes = [joint(c) if c in bases else c for c in impl._locator_classes]


_install_joint_stamp()


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


@intrinsic
def _float64_bits_as_int64(typingctx, x):
    """Reinterpret the bits of a float64 as an int64 (a vectorizable no-op)."""
    sig = types.int64(types.float64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return sig, codegen


_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 split so that t * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10
_UNDERFLOW = -708.0  # below: result < 3.3e-308, returned as 0
# t + 1.5 * 2**52 holds the integer t (|t| < 2**51) in its low mantissa bits: the float -> int
# conversion without cvttsd2si, which AVX2 has no vector form of (it stopped vectorization there)
_ROUND = 6755399441055744.0
_ROUND_BITS = int(np.float64(_ROUND).view(np.int64))


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
    ti = _float64_bits_as_int64(t + _ROUND) - _ROUND_BITS  # == int(t)
    e = p * _int64_bits_as_float64((ti + 1023) << 52)
    return e if x >= _UNDERFLOW else 0.0


# ------------------------------------------------------------------ chunks
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

