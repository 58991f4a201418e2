"""Progress of the tuning loop on stderr (no dependency): a bar on a terminal, plain lines in a log.

The bar draws only when asked *and* the stream is a terminal, so logs, pipes
and notebooks' captured output stay clean.  It is redrawn in place with a
carriage return and at most ``max_rate`` times per second.

``progress="log"`` (what the command line passes unless ``--quiet``) also
writes plain lines when the stream is not a terminal (a log file, a pipe):
one after the first epoch, then at most one every :data:`LOG_INTERVAL`
seconds, and one at the end, each a whole line (:class:`ProgressLines`).

A budgeted run (``tune(..., time_budget=T)``, docs/tuning.md) passes a
*status* with each update: its own text, which names the stage and the time
the budget leaves.  The epochs cap a stage but the budget stops it first, so
with a status neither the bar nor the lines count epochs out of the cap or
project a time of their own: they show the status, the epoch within the
stage, the stage's seconds and the objective (one clock of time left, the
budget's).
"""
from __future__ import annotations

import shutil
import sys
import time

__all__ = ["ProgressBar", "ProgressLines", "EpochProgress", "wants_progress", "make_progress", "announce",
           "LOG_INTERVAL", "PROGRESS_VALUES"]

#: Seconds between two lines of :class:`ProgressLines` (the first and the last are always written).
LOG_INTERVAL = 10.0
#: Accepted values of ``progress``: off, a bar on a terminal, and also lines elsewhere.
PROGRESS_VALUES = (False, True, "log")


def _is_tty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def wants_progress(progress, stream=None) -> bool:
    """True when ``progress`` is truthy and ``stream`` (default stderr) is a TTY."""
    if not progress:
        return False
    return _is_tty(sys.stderr if stream is None else stream)


def announce(progress, text: str, stream=None) -> None:
    """Write ``text`` as a line where ``progress`` shows anything: a terminal, or any stream with ``"log"``."""
    stream = sys.stderr if stream is None else stream
    if progress == "log" or wants_progress(progress, stream):
        stream.write(text + "\n")
        stream.flush()


def _fmt_seconds(s: float) -> str:
    s = max(0.0, float(s))
    if s < 60:
        return f"{s:4.1f}s"
    m, s = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m:d}:{s:02d}"
    h, m = divmod(m, 60)
    return f"{h:d}:{m:02d}:{s:02d}"


def _stage_step(done: int, elapsed: float) -> str:
    """Evaluation ``done`` (counted from 1) of a stage that has run ``elapsed`` seconds."""
    return f"epoch {done - 1} of this stage, {_fmt_seconds(elapsed).strip()} into it"


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

    def update(self, done: int, message: str = "", status: str | None = None) -> None:
        """Show ``done`` of ``total`` steps, with a short message.

        With a ``status`` (a budgeted run) the line is the status, the step
        within the stage and its seconds, and the message: no count out of
        ``total``, no bar, no time left of its own (module notes).
        """
        now = time.perf_counter()
        if done < self.total and now - self._last_draw < self.min_interval:
            return
        self._last_draw = now
        elapsed = now - self.start
        if status is not None:
            line = f"{status} | {_stage_step(done, elapsed)} | {message}"
        else:
            frac = min(max(done / self.total, 0.0), 1.0)
            filled = int(round(frac * self.width))
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


class ProgressLines:
    """Progress of ``total`` evaluations as whole lines on ``stream``, for logs (no carriage returns).

    A line after the first evaluation, then at most one every ``interval``
    seconds, and the last state at :meth:`close` when it was not written yet.
    Evaluation ``k`` (counted from 1, as :class:`ProgressBar` does) is epoch
    ``k - 1`` of ``total - 1``: the initialization is epoch 0.

    Parameters
    ----------
    total : int
        Evaluations (epochs + 1).
    stream : file-like, default sys.stderr
    interval : float, default LOG_INTERVAL
    clock : callable, default time.perf_counter
        Seconds (a test passes its own).
    label : str, default "tune"
        What each line starts with.

    Examples
    --------
    >>> import io
    >>> out = io.StringIO(); ticks = iter([0.0, 1.0, 2.0, 30.0])
    >>> lines = ProgressLines(201, stream=out, interval=10, clock=lambda: next(ticks))
    >>> lines.update(1, "objective 0.9")     # the first: written
    >>> lines.update(2, "objective 0.8")     # 2 s later: kept for later
    >>> lines.update(61, "objective 0.5")    # 30 s: written
    >>> lines.close()                        # the last state was written: nothing more
    >>> print(out.getvalue(), end="")
    tune: epoch 0/200, 1.0s, at most 3:20 left; objective 0.9
    tune: epoch 60/200, 30.0s, at most 1:09 left; objective 0.5

    With a status (a budgeted run), the status's own clock is the only one:

    >>> out = io.StringIO(); ticks = iter([0.0, 31.0])
    >>> lines = ProgressLines(201, stream=out, clock=lambda: next(ticks))
    >>> lines.update(3, "objective 0.7", status="stage 2: 2356 centers, 152s left")
    >>> print(out.getvalue(), end="")
    tune: stage 2: 2356 centers, 152s left; epoch 2 of this stage, 31.0s into it; objective 0.7
    """

    def __init__(self, total: int, stream=None, interval: float = LOG_INTERVAL, clock=time.perf_counter,
                 label: str = "tune"):
        self.total = max(int(total), 1)
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.interval = float(interval)
        self.clock = clock
        self.start = clock()
        self._last_write = None
        self._pending = None
        self._closed = False

    def update(self, done: int, message: str = "", status: str | None = None) -> None:
        """Record ``done`` of ``total`` steps; write a line when the first, the last, or ``interval`` has passed.

        With a ``status`` (a budgeted run) the line is the status, the step
        within the stage and its seconds, and the message (module notes).
        """
        now = self.clock()
        self._pending = (done, message, now, status)
        if self._last_write is None or done >= self.total or now - self._last_write >= self.interval:
            self._write()

    def _write(self):
        done, message, now, status = self._pending
        self._pending = None
        self._last_write = now
        elapsed = now - self.start
        if status is not None:
            head = f"{status}; {_stage_step(done, elapsed)}"
        else:
            left = ""
            if 0 < done < self.total:
                left = f", at most {_fmt_seconds(elapsed / done * (self.total - done)).strip()} left"
            head = f"epoch {done - 1}/{self.total - 1}, {_fmt_seconds(elapsed).strip()}{left}"
        self.stream.write(f"{self.label}: {head}" + (f"; {message}" if message else "") + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Write the last state if it is not written yet (once)."""
        if not self._closed:
            self._closed = True
            if self._pending is not None:
                self._write()


class EpochProgress:
    """What the tuning loop shows per epoch, on a :class:`ProgressBar` or :class:`ProgressLines`.

    Errors of untracked epochs (NaN) show the last tracked ones.  With a
    status (a budgeted run) only the objective follows it: the status names
    the stage's held-out error and the time left (module notes).
    """

    def __init__(self, out, tracked: bool, has_val: bool):
        self.out, self.tracked, self.has_val = out, tracked, has_val
        self.errors = (float("nan"), float("nan"))

    def update(self, epoch, value, penalty, train_err, val_err, status=None) -> None:
        """Show epoch ``epoch``; ``status``: a budgeted run's own text (its stage and time left), or None."""
        if train_err == train_err or val_err == val_err:
            self.errors = (train_err, val_err)
        if status is not None:
            self.out.update(epoch + 1, f"objective {value:.6g}", status=str(status))
            return
        msg = f"objective {value:.6g}  penalty {penalty:.3g}"
        if self.tracked:
            msg += f"  train err {self.errors[0]:.4g}"
            if self.has_val:
                msg += f"  val err {self.errors[1]:.4g}"
        self.out.update(epoch + 1, msg)

    def close(self) -> None:
        self.out.close()


def make_progress(progress, total, tracked=False, has_val=False, stream=None, name=None):
    """An :class:`EpochProgress` for ``total`` evaluations, or None when nothing is shown.

    ``progress``: False (nothing), True (a bar when ``stream``, default
    stderr, is a terminal) or ``"log"`` (the bar on a terminal, otherwise
    :class:`ProgressLines`, whose lines start with ``tune <name>:``).
    """
    if not progress:
        return None
    stream = sys.stderr if stream is None else stream
    if _is_tty(stream):
        return EpochProgress(ProgressBar(total, stream=stream), tracked, has_val)
    if progress == "log":
        label = "tune" if not name else f"tune {name}"
        return EpochProgress(ProgressLines(total, stream=stream, label=label), tracked, has_val)
    return None
