"""Shared fixtures and helpers for the test suite."""
from __future__ import annotations

import os
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
collect_ignore = ["hostcupy"]  # a stand-in for the cupy package, never collected (doctests import modules)
HOST_CUPY = bool(os.environ.get("NYHOPT_HOST_CUPY"))
if HOST_CUPY:  # the GPU code paths on the host stand-in for CuPy (tests/hostcupy), child processes included
    _stand_in = str(ROOT / "tests" / "hostcupy")
    sys.path.insert(0, _stand_in)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_stand_in, os.environ.get("PYTHONPATH")) if p)
    for _name in [m for m in sys.modules if m.split(".")[0] in ("cupy", "cupyx", "cupy_backends")]:
        del sys.modules[_name]

from nyhopt.backend import gpu_available  # noqa: E402
#: The datasets as nyhopt.datasets finds them: $NYHOPT_DATA when set (not empty), else ../shared/data.
DATA_DIR = (pathlib.Path(os.environ["NYHOPT_DATA"]).expanduser() if os.environ.get("NYHOPT_DATA")
            else ROOT.parent / "shared" / "data")


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (cupy.is_available() is False)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture
def rng():
    return np.random.default_rng(20261125)


def require_data(name: str) -> pathlib.Path:
    """Path of a dataset folder of :data:`DATA_DIR` ($NYHOPT_DATA, else ../shared/data), or skip the test."""
    path = DATA_DIR / name
    if not path.exists():
        pytest.skip(f"dataset folder {path} not found (set NYHOPT_DATA)")
    return path


class TickClock:
    """A simulated clock for budgeted runs: every read advances it by ``tick`` seconds."""

    def __init__(self, tick=0.01):
        self.t, self.tick, self.reads = 0.0, tick, 0

    def __call__(self):
        self.reads += 1
        self.t += self.tick
        return self.t


@pytest.fixture
def tick_clock(monkeypatch):
    """The budget's clock replaced by a :class:`TickClock`."""
    from nyhopt.optim.budget import _clock

    clock = TickClock()
    monkeypatch.setattr(_clock, "CLOCK", clock)
    return clock
