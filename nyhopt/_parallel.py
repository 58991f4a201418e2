"""Row-range parallelism on nyhopt's own worker threads.

Inside a ``cpu_threads("pool")`` phase (:mod:`nyhopt._threads`), OpenBLAS
and Numba run single-threaded and the large operations of the exact
objectives are cut into contiguous row ranges that run concurrently on a
small pool of Python threads (NumPy, the ctypes BLAS calls and the Numba
kernels all release the GIL).  Idle workers sleep on a queue instead of
spinning, so the BLAS-heavy and Numba-heavy steps of one evaluation no
longer slow each other down.  Outside such a phase :func:`map_ranges`
calls the function once on the whole range.

Examples
--------
>>> from nyhopt._parallel import map_ranges
>>> map_ranges(lambda lo, hi: hi - lo, 10)
[10]
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import os
import threading

__all__ = ["map_ranges", "active_workers", "pool_phase", "min_rows"]

_state = threading.local()
_lock = threading.Lock()
_executors: dict[tuple[int, int], concurrent.futures.ThreadPoolExecutor] = {}

#: Fewer rows than this per range are not worth a thread hand-off.
MIN_ROWS = 2048
#: Fewer matrix entries than this per range are not worth a thread hand-off.
MIN_ENTRIES = 2**18


def min_rows(width: int) -> int:
    """Rows per range so that a range of a ``(rows, width)`` operation holds ``MIN_ENTRIES`` entries."""
    return max(1, MIN_ENTRIES // max(int(width), 1))


def _worker_init():
    import numba

    numba.set_num_threads(1)


def _executor(workers: int) -> concurrent.futures.ThreadPoolExecutor:
    with _lock:
        # A forked child inherits the executors but not their threads: start afresh there.
        ex = _executors.get((os.getpid(), workers))
        if ex is None:
            ex = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nyhopt",
                                                       initializer=_worker_init)
            _executors[(os.getpid(), workers)] = ex
        return ex


def active_workers() -> int:
    """Threads that :func:`map_ranges` uses now (1 outside a pool phase)."""
    return getattr(_state, "workers", 1)


@contextlib.contextmanager
def pool_phase(workers: int):
    """Let :func:`map_ranges` use ``workers`` threads (the caller's included) in this block."""
    old = active_workers()
    _state.workers = max(1, int(workers))
    try:
        yield
    finally:
        _state.workers = old


def map_ranges(fn, n: int, min_rows: int = MIN_ROWS):
    """``[fn(lo, hi) for each range]`` over contiguous ranges covering ``range(n)``.

    Parameters
    ----------
    fn : callable ``(lo, hi) -> result``
        Must only write to the rows ``lo:hi`` of shared outputs.
    n : int
        Number of rows.
    min_rows : int
        Smallest range worth its own thread.

    Returns
    -------
    list
        Results in row order; one element when the work is not split.
    """
    parts = min(active_workers(), max(1, n // max(min_rows, 1)))
    if parts <= 1:
        return [fn(0, n)]
    bounds = [n * i // parts for i in range(parts + 1)]
    ex = _executor(parts - 1)
    futures = [ex.submit(fn, bounds[i], bounds[i + 1]) for i in range(parts - 1)]
    last = fn(bounds[-2], bounds[-1])  # the calling thread takes the last range
    return [f.result() for f in futures] + [last]
