"""Saying so, once, while Numba compiles nyhopt's CPU loops (the command line's first run).

nyhopt's fused CPU loops (:mod:`nyhopt.ops._numba`) are compiled by Numba the
first time they run and kept in Numba's on-disk cache, so later processes
load them in a fraction of a second.  The first run of a fresh install spends
several seconds compiling; :func:`compile_notice` prints one line on stderr
when that starts, so that the wait is not silent.  It listens to Numba's
``"numba:compile"`` event, which Numba sends only when a function is really
compiled (not when it is loaded from the cache).
"""
from __future__ import annotations

import contextlib
import sys
import threading

__all__ = ["compile_notice", "notice_text"]


def notice_text() -> str:
    """The line printed when compiling starts (it says whether the result is cached).

    Examples
    --------
    >>> notice_text().startswith("nyhopt: compiling")
    True
    """
    try:
        from ..ops._numba import DISK_CACHE
    except ImportError:  # pragma: no cover - a broken Numba install fails later, with its own message
        DISK_CACHE = True
    if DISK_CACHE:
        return "nyhopt: compiling (first run only)..."
    return ("nyhopt: compiling (every run: Numba finds no writable cache folder; "
            "set NUMBA_CACHE_DIR to keep the compiled code)...")


def _ours(event) -> bool:
    """Whether a compile event is for one of nyhopt's functions."""
    data = event.data if isinstance(event.data, dict) else {}
    func = getattr(data.get("dispatcher"), "py_func", None)
    module = getattr(func, "__module__", None) or ""
    return func is None or module.split(".")[0] == "nyhopt"


@contextlib.contextmanager
def compile_notice(stream=None, enabled=True):
    """Within the block, print :func:`notice_text` once on ``stream`` when Numba starts compiling.

    Parameters
    ----------
    stream : file-like, default sys.stderr
    enabled : bool, default True
        False: do nothing (quiet mode).

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> with compile_notice(out):
    ...     pass
    >>> out.getvalue()
    ''
    """
    if not enabled:
        yield
        return
    try:
        from numba.core import event
    except ImportError:  # pragma: no cover - Numba is a dependency; an old one without events says nothing
        yield
        return
    stream = sys.stderr if stream is None else stream
    lock = threading.Lock()
    said = []

    class _Notice(event.Listener):
        def on_start(self, ev):
            if not _ours(ev):
                return
            with lock:
                if said:
                    return
                said.append(True)
            try:
                print(notice_text(), file=stream, flush=True)
            except (OSError, ValueError):  # a closed stream must not fail the computation
                pass

        def on_end(self, ev):
            pass

    with event.install_listener("numba:compile", _Notice()):
        yield
