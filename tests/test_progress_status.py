"""The progress of a budgeted run shows one clock: its status's time left, no projection of its own."""
from __future__ import annotations

import io
import math
import re

import numpy as np

import nyhopt as nh
from nyhopt.optim.budget import _clock as _budget
from nyhopt.optim._progress import announce, make_progress

STATUS = "stage 2: 2356 centers, 9000 rows, held-out RMSE 0.31, 152s left"


class _FakeTTY(io.StringIO):
    def isatty(self):
        return True


def _time_left_clocks(text):
    return re.findall(r"left", text)


def test_a_line_with_a_status_has_one_time_left_clock_and_no_epoch_count():
    log = io.StringIO()
    lines = make_progress("log", 201, tracked=True, has_val=True, stream=log, name="prop")
    lines.update(2, 0.512, 1e-3, 0.2, 0.3, status=STATUS)
    lines.close()
    (line,) = log.getvalue().splitlines()
    assert line == f"tune prop: {STATUS}; epoch 2 of this stage, " + line.split("stage, ")[1]
    assert len(_time_left_clocks(line)) == 1 and "at most" not in line and "/200" not in line
    assert "objective 0.512" in line and "penalty" not in line and "val err" not in line


def test_the_bar_with_a_status_has_one_time_left_clock_and_no_epoch_count():
    tty = _FakeTTY()
    bar = make_progress("log", 201, stream=tty)
    bar.update(2, 0.512, 1e-3, math.nan, math.nan, status=STATUS)
    bar.close()
    drawn = tty.getvalue().split("\r")[-1]
    assert drawn.startswith(STATUS) and "epoch 2 of this stage" in drawn
    assert len(_time_left_clocks(drawn)) == 1 and "/201" not in drawn and "#" not in drawn and " < " not in drawn


def test_without_a_status_nothing_changes():
    log = io.StringIO()
    lines = make_progress("log", 201, stream=log)
    lines.update(2, 0.512, 1e-3, math.nan, math.nan)
    lines.close()
    line = log.getvalue()
    assert line.startswith("tune: epoch 2/200, ") and "at most" in line and "penalty 0.001" in line


def test_a_budgeted_tune_logs_no_epoch_count_and_no_projection(monkeypatch, capsys):
    clock = iter(np.arange(1, 10**6) * 0.01)  # a simulated budget clock (as tests/test_time_budget.py)
    monkeypatch.setattr(_budget, "CLOCK", lambda: float(next(clock)))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=300)
    nh.tune(X, y, objective="prop", time_budget=4.0, epochs=30, progress="log")
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("tune")]
    assert lines
    for line in lines:
        assert "at most" not in line and "/30" not in line and "epoch " in line, line
        assert len(_time_left_clocks(line)) <= 1, line  # the status's clock only (its words are its own)


def test_an_announced_line_goes_where_progress_shows_anything():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    log, quiet, pipe, tty = io.StringIO(), io.StringIO(), io.StringIO(), Tty()
    announce("log", "final fit: 1000 rows, 200 centers", stream=log)
    announce(False, "nothing", stream=quiet)
    announce(True, "a bar only on a terminal", stream=pipe)
    announce(True, "on a terminal", stream=tty)
    assert log.getvalue() == "final fit: 1000 rows, 200 centers\n"
    assert quiet.getvalue() == "" and pipe.getvalue() == "" and tty.getvalue() == "on a terminal\n"
