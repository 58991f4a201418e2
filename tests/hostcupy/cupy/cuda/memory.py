"""Device memory of the host stand-in: every device array's bytes are counted while it lives.

An array made by the stand-in owns its NumPy buffer (views share their
base's); the bytes of each buffer are added when it is first wrapped and
taken off when NumPy frees it.  ``MemoryPool.used_bytes()`` is what is live,
``total_bytes()`` the same (no cached blocks), and the device's free memory
(``Device().mem_info``, ``runtime.memGetInfo``) is :data:`TOTAL_MEMORY` less
what is live.  Going over :data:`TOTAL_MEMORY` raises
:class:`OutOfMemoryError` (after the fact: NumPy has allocated already).

Memory hooks (``cupy.cuda.MemoryHook``, entered with ``with``) are called
after each buffer is counted and freed, as CuPy's pool calls them, so a
test can follow the pool's ``used_bytes()`` the same way on a GPU and here.
Temporaries inside one NumPy call are not seen.
"""
from __future__ import annotations

import weakref

import numpy as np

from .memory_hook import get_memory_hooks

#: What the stand-in reports as the device's memory (bytes); tests may lower it.
TOTAL_MEMORY = 80 * 2**30

_live: dict = {}
_state = {"used": 0}


class OutOfMemoryError(MemoryError):
    def __init__(self, size, total, limit=0):
        super().__init__(f"Out of memory allocating {size:,} bytes (allocated so far: {total:,} bytes, "
                         f"host CuPy device of {TOTAL_MEMORY:,} bytes)")


def _release(key, nbytes, ptr):
    if _live.pop(key, None) is not None:
        _state["used"] -= nbytes
        for hook in list(get_memory_hooks().values()):
            hook.free_postprocess(device_id=0, mem_size=nbytes, mem_ptr=ptr, pmem_id=key)


def track(a):
    """Count the buffer behind NumPy array ``a`` (once), until NumPy frees it."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root.base is not None or id(root) in _live:  # not NumPy's memory (a kernel's view), or counted
        return
    key, nbytes, ptr = id(root), root.nbytes, root.ctypes.data
    _live[key] = nbytes
    weakref.finalize(root, _release, key, nbytes, ptr)
    _state["used"] += nbytes
    if _state["used"] > TOTAL_MEMORY:
        raise OutOfMemoryError(nbytes, _state["used"])
    for hook in list(get_memory_hooks().values()):
        hook.alloc_postprocess(device_id=0, mem_size=nbytes, mem_ptr=ptr)
        hook.malloc_postprocess(device_id=0, size=nbytes, mem_size=nbytes, mem_ptr=ptr, pmem_id=key)


def used_bytes():
    return _state["used"]


class MemoryPool:
    """The live bytes; no cached blocks."""

    def __init__(self):
        self._limit = 0

    def used_bytes(self):
        return used_bytes()

    def total_bytes(self):
        return used_bytes()

    def free_bytes(self):
        return 0

    def free_all_blocks(self, stream=None):
        return None

    def n_free_blocks(self):
        return 0

    def set_limit(self, size=None, fraction=None):
        self._limit = int(size or 0)

    def get_limit(self):
        return self._limit


class PinnedMemoryPool(MemoryPool):
    def used_bytes(self):
        return 0

    total_bytes = used_bytes
