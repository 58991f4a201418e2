"""One parallel engine at a time on the CPU: BLAS threads or Numba threads.

nyhopt's CPU work runs on two thread pools: OpenBLAS (NumPy's products and
factorizations) and Numba (the fused kernel loops of :mod:`nyhopt.ops`).
Both keep their idle workers spinning for a while after a call, so when a
Numba loop follows a threaded BLAS call (or the reverse) the two pools fight
for the cores.  On the 2-core CI machine this made ``prop`` on benchmark P1
1.3x slower and a ``stoch-prop`` step 2.2x slower than keeping one pool
idle (measured: 132 -> 99 ms and 606 -> 275 ms).

:func:`cpu_threads` picks the engine for a phase of work and restores the
settings on exit.  The Numba setting is thread-local; the OpenBLAS one
(``openblas_set_num_threads_local``) is process-wide in the pthreads builds
of the NumPy wheels, so BLAS calls that *other* threads make while a
``"numba"`` phase runs are single-threaded too.

* ``"blas"``: dense-algebra phases (the exact objectives, the direct
  solver); Numba loops run on the calling thread, BLAS keeps its threads;
* ``"numba"``: streaming phases (Falkon passes, ``stoch-prop``,
  predictions); BLAS calls run single-threaded, Numba keeps its threads.

Nothing changes for CuPy inputs, nor for the user's own calls made
outside nyhopt's functions.  ``NYHOPT_THREAD_POLICY=0`` turns the policy off.

Examples
--------
>>> from nyhopt._threads import cpu_threads
>>> with cpu_threads("blas"):
...     pass
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import os

__all__ = ["cpu_threads"]

_KINDS = ("blas", "numba")


@functools.lru_cache(maxsize=None)
def _openblas_local_setter():
    """``openblas_set_num_threads_local`` of NumPy's OpenBLAS, or None."""
    from ._blas import _candidate_paths

    for path in _candidate_paths():
        try:
            fn = ctypes.CDLL(path).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_int]
        return fn
    return None


def _enabled() -> bool:
    return os.environ.get("NYHOPT_THREAD_POLICY", "1") != "0"


@contextlib.contextmanager
def cpu_threads(kind, xp=None):
    """Run the block with one parallel engine (see the module notes).

    Parameters
    ----------
    kind : {"blas", "numba"}
        The engine that keeps its threads.
    xp : module, optional
        Array module of the work; nothing is changed for CuPy.
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")
    if not _enabled() or (xp is not None and getattr(xp, "__name__", "") == "cupy"):
        yield
        return
    if kind == "blas":
        import numba

        old = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            yield
        finally:
            numba.set_num_threads(old)
    else:
        setter = _openblas_local_setter()
        if setter is None:
            yield
            return
        old = setter(1)
        try:
            yield
        finally:
            setter(old)
