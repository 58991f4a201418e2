"""Row-range parallelism on nyhopt's own worker threads.

Inside a ``cpu_threads("pool")`` phase (:mod:`nyhopt.backend._threads`), OpenBLAS
and Numba run single-threaded and the large operations of the exact
objectives are cut into contiguous row ranges that run concurrently on a
small pool of Python threads (NumPy, the ctypes BLAS calls and the Numba
kernels all release the GIL).  Idle workers sleep on a queue instead of
spinning, so the BLAS-heavy and Numba-heavy steps of one evaluation no
longer slow each other down.  Outside such a phase :func:`map_ranges`
calls the function once on the whole range.

In a forked child the same workers also run the row chunks of the fused
Numba loops (:func:`map_chunks`, used by :mod:`nyhopt.ops._numba`) in place
of Numba's ``prange``: Numba's OpenMP threading layer is not fork-safe (a
forked child that runs a ``prange`` loop is killed), whereas these
executors are rebuilt in a forked child.  Tasks run in a copy of the
submitting thread's :mod:`contextvars` context, so the caller's settings
(the memory budget of :mod:`nyhopt.backend._config`) hold inside the workers.

Examples
--------
>>> from nyhopt.backend._parallel import map_ranges
>>> map_ranges(lambda lo, hi: hi - lo, 10)
[10]
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import os
import threading

__all__ = ["map_ranges", "map_chunks", "sum_ranges", "active_workers", "pool_phase", "min_rows", "in_worker", "in_forked_child"]

_state = threading.local()
_lock = threading.Lock()
_executors: dict[tuple[int, int], concurrent.futures.ThreadPoolExecutor] = {}
_forked = False

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
    _state.worker = True


def in_worker() -> bool:
    """True on one of nyhopt's worker threads (whose tasks must not submit more tasks)."""
    return getattr(_state, "worker", False)


def _executor(workers: int) -> concurrent.futures.ThreadPoolExecutor:
    with _lock:
        # Keyed by pid as well: a child forked without the handler below must not reuse them.
        ex = _executors.get((os.getpid(), workers))
        if ex is None:
            ex = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nyhopt",
                                                       initializer=_worker_init)
            _executors[(os.getpid(), workers)] = ex
        return ex


def in_forked_child() -> bool:
    """True in a process made by ``fork()`` from one that had imported nyhopt."""
    return _forked


def _after_fork_in_child():
    """A forked child has none of the parent's worker threads, and ``_lock`` may have been held."""
    global _lock, _forked
    _lock = threading.Lock()
    _executors.clear()
    _forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


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
    return map_chunks(lambda c: fn(bounds[c], bounds[c + 1]), parts)


def map_chunks(fn, parts: int):
    """``[fn(c) for c in range(parts)]``, the calls running concurrently on nyhopt's workers.

    The calling thread runs the last chunk itself; the others run on
    ``parts - 1`` worker threads, each in a copy of the caller's
    :mod:`contextvars` context.  On a worker thread (nested use) or with
    ``parts <= 1`` the calls run one after the other on the calling thread.

    Parameters
    ----------
    fn : callable ``(c) -> result``
        Must only write to the memory owned by chunk ``c`` of shared outputs.
    parts : int
        Number of chunks.

    Returns
    -------
    list
        Results in chunk order.  All chunks have finished when this returns
        or raises (the first error, in chunk order, is raised).
    """
    if parts <= 1 or in_worker():
        return [fn(c) for c in range(parts)]
    ex = _executor(parts - 1)
    futures = [ex.submit(contextvars.copy_context().run, fn, c) for c in range(parts - 1)]
    try:
        last = fn(parts - 1)
    finally:
        concurrent.futures.wait(futures)  # no worker may still write when the caller moves on
    return [f.result() for f in futures] + [last]


def sum_ranges(fn, n: int, rows: int):
    """``sum(fn(lo, hi))`` over fixed ranges of ``rows`` rows, added in row order.

    The ranges run concurrently on nyhopt's workers, as many at a time as
    :func:`active_workers`, and their results are added one after the other
    in row order, so the rounding of the sum does not depend on the number
    of threads (only on ``rows``).

    Parameters
    ----------
    fn : callable ``(lo, hi) -> tuple of arrays``
        Returns new arrays (the first range's become the accumulators) or None entries.
    n : int
        Number of rows (at least 1).
    rows : int
        Rows per range.

    Returns
    -------
    tuple
        The element-wise sums.
    """
    starts = list(range(0, max(n, 1), max(int(rows), 1)))
    acc = None
    workers = active_workers()
    for w in range(0, len(starts), workers):
        wave = starts[w:w + workers]
        parts = map_chunks(lambda c: fn(wave[c], min(wave[c] + rows, n)), len(wave))
        for part in parts:
            if acc is None:
                acc = list(part)
            else:
                for i, a in enumerate(part):
                    if a is not None:
                        acc[i] += a
    return tuple(acc)
