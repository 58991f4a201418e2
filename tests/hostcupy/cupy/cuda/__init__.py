"""``cupy.cuda`` of the host stand-in: one device, one stream, a memory pool that counts nothing."""
from __future__ import annotations

import time

from . import compiler, device, memory, memory_hook, runtime  # noqa: F401
from .memory import MemoryPool, OutOfMemoryError, PinnedMemoryPool  # noqa: F401
from .memory_hook import MemoryHook  # noqa: F401


class Device:
    """Device 0 (the only one); usable as a context manager."""

    def __init__(self, device=None):
        device = 0 if device is None else int(getattr(device, "id", device))
        if device != 0:
            raise RuntimeError(f"cudaErrorInvalidDevice: host CuPy has one device, not {device}")
        self.id = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def use(self):
        return None

    def synchronize(self):
        return None

    @property
    def compute_capability(self):
        return "90"

    @property
    def mem_info(self):
        return runtime.memGetInfo()

    @property
    def attributes(self):
        return {"MultiProcessorCount": 132, "MaxThreadsPerBlock": 1024, "MaxSharedMemoryPerBlock": 48 * 1024,
                "WarpSize": 32}

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(self.id)


class Stream:
    """The null stream (host work is synchronous)."""

    null = None

    def __init__(self, null=False, non_blocking=False, ptds=False):
        self.ptr = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def use(self):
        return self

    def synchronize(self):
        return None

    def record(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def wait_event(self, event):
        return None


Stream.null = Stream(null=True)


def get_current_stream(device_id=-1):
    return Stream.null


class Event:
    """A host clock reading."""

    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        return None

    done = property(lambda self: True)


def get_elapsed_time(start, end):
    """Milliseconds between two recorded events."""
    return 1e3 * (end.t - start.t)


_POOL, _PINNED = MemoryPool(), PinnedMemoryPool()


def get_default_memory_pool():
    return _POOL


def get_default_pinned_memory_pool():
    return _PINNED


def is_available():
    return True
