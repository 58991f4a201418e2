"""Library-wide settings: the memory budget that sizes row blocks, and the kernel-cache budget.

Every block-wise product works on ``b`` rows of ``X`` at a time, with ``b``
chosen so that the temporaries of one block (``b x m`` kernel block and its
companions) fit in the memory budget.  The default is 256 MiB; change it
globally with :func:`set_memory_budget` or locally with :func:`memory_budget`.

A second setting, the *cache budget*, decides when a whole kernel matrix
``k(X, Z)`` (``n x m``) may be held in memory for the duration of one solve
or objective evaluation (:class:`nyhopt.ops.cached.CachedKernel`): by default
1 GiB on the host and half of the free memory of the current GPU; change it
with :func:`set_cache_budget` or :func:`cache_budget` (0 turns caching off).

Both settings belong to the calling thread (a :mod:`contextvars` variable):
other threads of the user keep theirs, while nyhopt's own worker threads run
each task with the setting of the thread that submitted it.

Examples
--------
>>> import nyhopt as nh
>>> with nh.memory_budget(16 * 2**20):       # 16 MiB blocks inside this block
...     pass
>>> nh.get_memory_budget() == 256 * 2**20
True
"""
from __future__ import annotations

import contextlib
import contextvars

__all__ = ["get_memory_budget", "set_memory_budget", "memory_budget", "block_rows",
           "get_cache_budget", "set_cache_budget", "cache_budget", "cache_fits"]

_DEFAULT_BUDGET = 256 * 2**20
_budget = contextvars.ContextVar("nyhopt_memory_budget", default=_DEFAULT_BUDGET)
#: Host cache budget when none is set (bytes).
DEFAULT_HOST_CACHE = 2**30
#: Fraction of the GPU's free memory (counting what CuPy's memory pool holds free) that
#: the cache may take when no budget is set.
DEFAULT_DEVICE_CACHE_FRACTION = 0.5
_cache = contextvars.ContextVar("nyhopt_cache_budget", default=None)  # None: the defaults above


def get_memory_budget() -> int:
    """Memory budget in bytes for the temporaries of one row block.

    Examples
    --------
    >>> import nyhopt as nh
    >>> nh.get_memory_budget() // 2**20
    256
    """
    return _budget.get()


def set_memory_budget(nbytes: int) -> None:
    """Set the memory budget (bytes) for block temporaries in this thread.

    Parameters
    ----------
    nbytes : int
        Positive number of bytes; ``None`` restores the default (256 MiB).

    Raises
    ------
    ValueError
        If ``nbytes`` is not a positive integer.

    Examples
    --------
    >>> import nyhopt as nh
    >>> nh.set_memory_budget(64 * 2**20)
    >>> nh.get_memory_budget() // 2**20
    64
    >>> nh.set_memory_budget(None)        # back to the default
    """
    if nbytes is None:
        nbytes = _DEFAULT_BUDGET
    if not isinstance(nbytes, (int,)) or isinstance(nbytes, bool) or nbytes <= 0:
        raise ValueError(f"memory budget must be a positive integer number of bytes, got {nbytes!r}")
    _budget.set(int(nbytes))


@contextlib.contextmanager
def memory_budget(nbytes: int):
    """Context manager that sets the memory budget temporarily.

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> X = np.random.default_rng(0).standard_normal((1000, 3))
    >>> with nh.memory_budget(2**16):     # 64 KiB: many small row blocks
    ...     v = nh.ops.kmv(nh.GaussianKernel(1.0), X, X[:10], np.ones(10))
    >>> v.shape
    (1000,)
    """
    old = get_memory_budget()
    set_memory_budget(nbytes)
    try:
        yield
    finally:
        _budget.set(old)


def block_rows(n: int, m: int, itemsize: int, n_temps: int = 3, per_row: int = 0) -> int:
    """Number of rows per block so that one block's temporaries fit the budget.

    A block of ``b`` rows holds ``n_temps`` arrays of ``b x m`` items plus
    ``per_row`` further items per row (right-hand sides, outputs).

    Returns an integer in ``[1, max(n, 1)]``.
    """
    per_row_bytes = itemsize * (n_temps * max(m, 1) + per_row)
    b = get_memory_budget() // max(per_row_bytes, 1)
    return int(max(1, min(b, max(n, 1))))


def _check_bytes(nbytes, what, allow_zero=False):
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < (0 if allow_zero else 1):
        low = "a non-negative" if allow_zero else "a positive"
        raise ValueError(f"{what} must be {low} integer number of bytes, got {nbytes!r}")
    return int(nbytes)


def get_cache_budget(xp=None) -> int:
    """Bytes that one kernel matrix held in memory may take (see the module notes).

    Parameters
    ----------
    xp : module, optional
        Array module of the data: for CuPy, the default is a fraction
        (:data:`DEFAULT_DEVICE_CACHE_FRACTION`) of the current device's free
        memory; otherwise :data:`DEFAULT_HOST_CACHE`.  A budget set with
        :func:`set_cache_budget` applies to both.

    Examples
    --------
    >>> import nyhopt as nh
    >>> nh.get_cache_budget() == 2**30
    True
    """
    budget = _cache.get()
    if budget is not None:
        return budget
    if xp is not None and getattr(xp, "__name__", "") == "cupy":
        # Blocks freed to CuPy's pool (the previous step's cache) are free for this one.
        free = xp.cuda.Device().mem_info[0] + xp.get_default_memory_pool().free_bytes()
        return int(DEFAULT_DEVICE_CACHE_FRACTION * free)
    return DEFAULT_HOST_CACHE


def set_cache_budget(nbytes) -> None:
    """Set the kernel-cache budget (bytes; 0 never caches) in this thread; None restores the defaults.

    Raises
    ------
    ValueError
        If ``nbytes`` is not None or a non-negative integer.

    Examples
    --------
    >>> import nyhopt as nh
    >>> nh.set_cache_budget(0)            # always stream: nothing n x m is held
    >>> nh.get_cache_budget()
    0
    >>> nh.set_cache_budget(None)
    """
    _cache.set(None if nbytes is None else _check_bytes(nbytes, "cache budget", allow_zero=True))


@contextlib.contextmanager
def cache_budget(nbytes):
    """Context manager that sets the kernel-cache budget temporarily (see :func:`set_cache_budget`).

    Examples
    --------
    >>> import nyhopt as nh
    >>> with nh.cache_budget(0):
    ...     nh.get_cache_budget()
    0
    """
    token = _cache.set(None if nbytes is None else _check_bytes(nbytes, "cache budget", allow_zero=True))
    try:
        yield
    finally:
        _cache.reset(token)


def cache_fits(n: int, m: int, itemsize: int, xp=None) -> bool:
    """Whether an ``n x m`` kernel matrix of ``itemsize``-byte numbers fits the cache budget."""
    return n * m * itemsize <= get_cache_budget(xp)
