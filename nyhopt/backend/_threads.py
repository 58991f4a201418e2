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
``"numba"`` phase runs are single-threaded too.  Phases that overlap (in
several threads, or nested) share one "BLAS limited" state, counted under a
lock: the first to enter saves the user's setting and the last to leave
restores it, whatever the order of entries and exits.

* ``"blas"``: dense-algebra phases (the exact objectives, the direct
  solver); Numba loops run on the calling thread, BLAS keeps its threads;
* ``"numba"``: streaming phases (Falkon passes, ``stoch-prop``,
  predictions); BLAS calls run single-threaded, Numba keeps its threads;
* ``"pool"``: the exact objectives; BLAS and Numba both run single-threaded
  and the large row-wise operations are split over nyhopt's own worker
  threads (:mod:`nyhopt.backend._parallel`), as many as the smaller of the two
  pools had, so nothing spins while the other works.

Nothing changes for CuPy inputs, nor for the user's own calls made
outside nyhopt's functions.  ``NYHOPT_THREAD_POLICY=0`` turns the policy off.

Examples
--------
>>> from nyhopt.backend._threads import cpu_threads
>>> with cpu_threads("blas"):
...     pass
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading

from ._parallel import active_workers, pool_phase

__all__ = ["cpu_threads"]

_KINDS = ("blas", "numba", "pool")


def _openblas_function(names):
    """The first of ``names`` exported by NumPy's OpenBLAS (``int f(...)``), or None."""
    from ._blas import numpy_openblas

    lib = numpy_openblas()
    for name in names if lib is not None else ():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = ctypes.c_int
            return fn
    return None


@functools.lru_cache(maxsize=None)
def _openblas_local_setter():
    """``openblas_set_num_threads_local`` of NumPy's OpenBLAS, or None."""
    fn = _openblas_function(("openblas_set_num_threads_local",))
    if fn is not None:
        fn.argtypes = [ctypes.c_int]
    return fn


@functools.lru_cache(maxsize=None)
def _openblas_get_num_threads():
    fn = _openblas_function(("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                             "scipy_openblas_get_num_threads", "openblas_get_num_threads"))
    if fn is not None:
        fn.argtypes = []
    return fn


def pool_workers() -> int:
    """Worker threads of a ``"pool"`` phase: min(Numba threads, OpenBLAS threads)."""
    import numba

    getter = _openblas_get_num_threads()
    blas = _blas_limit.user_setting(getter) if getter is not None else numba.get_num_threads()
    return max(1, min(numba.get_num_threads(), blas))


class _BlasLimit:
    """Reference-counted "OpenBLAS runs single-threaded" state of the process."""

    def __init__(self):
        self.lock = threading.Lock()
        self.depth = 0  # phases now holding the limit
        self.saved = None  # the setting seen by the first of them
        self.generation = 0  # bumped in a forked child, whose holders are gone

    def acquire(self, setter) -> int:
        with self.lock:
            if self.depth == 0:
                self.saved = setter(1)
            self.depth += 1
            return self.generation

    def release(self, setter, generation: int) -> None:
        with self.lock:
            if generation != self.generation:
                return  # entered before a fork; the child already restored the setting
            self.depth -= 1
            if self.depth == 0:
                setter(self.saved)

    def user_setting(self, getter) -> int:
        """The user's OpenBLAS thread count, also while phases hold the limit."""
        with self.lock:
            return self.saved if self.depth else getter()

    def after_fork_in_child(self):
        self.lock = threading.Lock()
        if self.depth:
            self.depth = 0
            self.generation += 1
            setter = _openblas_local_setter()
            if setter is not None:
                setter(self.saved)


_blas_limit = _BlasLimit()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_blas_limit.after_fork_in_child)


def _enabled() -> bool:
    return os.environ.get("NYHOPT_THREAD_POLICY", "1") != "0"


@contextlib.contextmanager
def cpu_threads(kind, xp=None):
    """Run the block with one parallel engine (see the module notes).

    Parameters
    ----------
    kind : {"blas", "numba", "pool"}
        The engine that keeps its threads (``"pool"``: nyhopt's own workers).
    xp : module, optional
        Array module of the work; nothing is changed for CuPy.
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")
    if not _enabled() or (xp is not None and getattr(xp, "__name__", "") == "cupy"):
        yield
        return
    import numba

    setter = _openblas_local_setter() if kind in ("numba", "pool") else None
    workers = (active_workers() if active_workers() > 1 else pool_workers()) if kind == "pool" else 1
    old_numba = numba.get_num_threads()
    generation = _blas_limit.acquire(setter) if setter is not None else None
    if kind in ("blas", "pool"):
        numba.set_num_threads(1)
    try:
        if kind == "pool":
            with pool_phase(workers):
                yield
        else:
            yield
    finally:
        numba.set_num_threads(old_numba)
        if setter is not None:
            _blas_limit.release(setter, generation)
