"""Work that tests/test_process_safety.py runs in child processes.

A module of its own so that spawn, forkserver and loky children can import
the functions by name (the tests put this folder on ``sys.path``, which the
children inherit).
"""
from __future__ import annotations

import contextlib

import numpy as np


@contextlib.contextmanager
def split_everything():
    """Make nyhopt cut even tiny operations into chunks on its worker threads."""
    from nyhopt.backend import _parallel
    from nyhopt.ops import _numba

    saved = _numba._MIN_CHUNK_ENTRIES, _parallel.MIN_ENTRIES, _parallel.MIN_ROWS
    _numba._MIN_CHUNK_ENTRIES = _parallel.MIN_ENTRIES = _parallel.MIN_ROWS = 1
    try:
        yield
    finally:
        _numba._MIN_CHUNK_ENTRIES, _parallel.MIN_ENTRIES, _parallel.MIN_ROWS = saved


def nyhopt_work(seed: int) -> list[float]:
    """A fit, a chunked Numba product and an exact objective (pool phase); the numbers as a list."""
    import nyhopt as nh
    from nyhopt.backend._parallel import pool_phase

    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (240, 2))
    y = np.sin(3 * X[:, 0]) + X[:, 1]
    with split_everything():
        pred = nh.NystromKRR(centers=20, random_state=0).fit(X, y).predict(X[:4])
        kv = nh.ops.kmv(nh.GaussianKernel(0.7), X, X[:30], np.ones(30))
        obj = nh.make_objective("loocv", X[:60], y[:60, None], random_state=0)
        with pool_phase(2):
            value, grad = obj.value_and_grad(nh.Params.from_natural(1e-3, [0.7, 1.2], X[:10]))
    return [*map(float, pred), float(kv.sum()), float(value), float(np.sum(grad.centers))]
