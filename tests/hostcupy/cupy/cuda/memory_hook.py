"""``cupy.cuda.memory_hook`` of the host stand-in: hooks called as CuPy's memory pool calls them.

A hook entered with ``with hook:`` is called after each device buffer is
counted (``alloc_postprocess``, then ``malloc_postprocess``) and after it is
freed (``free_postprocess``), with CuPy's keyword arguments; the pre-process
methods are not called (NumPy has allocated already).
"""
from __future__ import annotations

import threading

_local = threading.local()


def get_memory_hooks():
    """The hooks entered in this thread, by name (as CuPy keeps them)."""
    if not hasattr(_local, "hooks"):
        _local.hooks = {}
    return _local.hooks


class MemoryHook:
    """Base class of memory hooks; every method does nothing."""

    name = "MemoryHook"

    def __enter__(self):
        hooks = get_memory_hooks()
        if self.name in hooks:
            raise KeyError(f"memory hook {self.name!r} already exists")
        hooks[self.name] = self
        return self

    def __exit__(self, *exc):
        del get_memory_hooks()[self.name]

    def alloc_preprocess(self, **kwargs):
        pass

    def alloc_postprocess(self, **kwargs):
        pass

    def malloc_preprocess(self, **kwargs):
        pass

    def malloc_postprocess(self, **kwargs):
        pass

    def free_preprocess(self, **kwargs):
        pass

    def free_postprocess(self, **kwargs):
        pass
