"""Shared fixtures and helpers for the test suite."""
from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

from nyhopt.backend import gpu_available

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA_DIR = pathlib.Path(os.environ.get("NYHOPT_DATA", ROOT.parent / "shared" / "data"))


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
    """Path of a dataset folder of ../shared/data, or skip the test."""
    path = DATA_DIR / name
    if not path.exists():
        pytest.skip(f"dataset folder {path} not found (set NYHOPT_DATA)")
    return path
