"""A one-line progress bar for the tuning loop (no dependency).

It draws only when asked *and* the stream is a terminal, so logs, pipes and
notebooks' captured output stay clean.  The line is redrawn in place with a
carriage return and at most ``max_rate`` times per second.
"""
from __future__ import annotations

import shutil
import sys
import time

__all__ = ["ProgressBar", "wants_progress"]


def wants_progress(progress, stream=None) -> bool:
    """True when ``progress`` is truthy and ``stream`` (default stderr) is a TTY."""
    if not progress:
        return False
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def _fmt_seconds(s: float) -> str:
    s = max(0.0, float(s))
    if s < 60:
        return f"{s:4.1f}s"
    m, s = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m:d}:{s:02d}"
    h, m = divmod(m, 60)
    return f"{h:d}:{m:02d}:{s:02d}"


class ProgressBar:
    """Progress of ``total`` steps, drawn on ``stream``.

    Parameters
    ----------
    total : int
        Number of steps.
    stream : file-like, default sys.stderr
    width : int, default 24
        Characters of the bar itself.
    max_rate : float, default 10
        Redraws per second at most (the last step is always drawn).

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> bar = ProgressBar(4, stream=out, width=4, max_rate=0)
    >>> bar.update(2, "objective 0.5")
    >>> bar.close()
    >>> out.getvalue().split("\\r")[-1].split("|")[1]
    '##  '
    """

    def __init__(self, total: int, stream=None, width: int = 24, max_rate: float = 10.0):
        self.total = max(int(total), 1)
        self.stream = sys.stderr if stream is None else stream
        self.width = int(width)
        self.min_interval = 0.0 if max_rate <= 0 else 1.0 / max_rate
        self.start = time.perf_counter()
        self._last_draw = -float("inf")
        self._last_len = 0
        self._closed = False

    def update(self, done: int, message: str = "") -> None:
        """Show ``done`` of ``total`` steps, with a short message."""
        now = time.perf_counter()
        if done < self.total and now - self._last_draw < self.min_interval:
            return
        self._last_draw = now
        frac = min(max(done / self.total, 0.0), 1.0)
        filled = int(round(frac * self.width))
        elapsed = now - self.start
        eta = elapsed / done * (self.total - done) if done > 0 else float("nan")
        eta_s = _fmt_seconds(eta) if eta == eta else "  ?  "
        line = (f"{done:>{len(str(self.total))}d}/{self.total} |{'#' * filled}{' ' * (self.width - filled)}| "
                f"{_fmt_seconds(elapsed)} < {eta_s}  {message}")
        width = shutil.get_terminal_size((100, 20)).columns - 1
        line = line[:max(width, 20)]  # a wrapped line could not be redrawn in place
        pad = " " * max(0, self._last_len - len(line))
        self._last_len = len(line)
        self.stream.write("\r" + line + pad)
        self.stream.flush()

    def close(self) -> None:
        """End the line (once)."""
        if not self._closed:
            self._closed = True
            self.stream.write("\n")
            self.stream.flush()
