"""Row-range parallelism (nyhopt.backend._parallel) gives the same numbers as one range."""
import threading

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.backend import _parallel
from nyhopt import ops
from nyhopt.backend._parallel import map_ranges, pool_phase

OBJECTIVES = ["holdout", "loocv", "gcv", "creg", "sgpr", "prop"]


@pytest.fixture
def split_everything(monkeypatch):
    """Make every operation of a pool phase split, even on tiny inputs."""
    monkeypatch.setattr(_parallel, "MIN_ENTRIES", 1)
    monkeypatch.setattr(_parallel, "MIN_ROWS", 1)


def test_map_ranges_covers_the_rows_in_order():
    assert map_ranges(lambda lo, hi: (lo, hi), 10) == [(0, 10)]  # no pool phase: one call
    names = set()

    def record(lo, hi):
        names.add(threading.current_thread().name)
        return (lo, hi)

    with pool_phase(3):
        got = map_ranges(record, 10, min_rows=1)
    assert got == [(0, 3), (3, 6), (6, 10)]
    assert len(names) >= 2  # the caller and at least one worker
    with pool_phase(3):
        assert map_ranges(lambda lo, hi: (lo, hi), 10, min_rows=6) == [(0, 10)]


def test_map_ranges_propagates_errors():
    def boom(lo, hi):
        if lo == 0:
            raise ValueError("first range")
        return hi

    with pool_phase(2), pytest.raises(ValueError, match="first range"):
        map_ranges(boom, 10, min_rows=1)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["gaussian", "laplacian", "matern52"])
def test_split_operations_match_one_range(rng, split_everything, kind, dtype):
    X = rng.uniform(-1, 1, (57, 3)).astype(dtype)
    Z = X[:9].copy()
    kernel = nh.make_kernel(kind, np.array([0.8, 1.3, 1.1]))
    V, P, Q = rng.standard_normal((9, 3)), rng.standard_normal((57, 2)), rng.standard_normal((9, 2))
    G = rng.standard_normal((57, 9))
    wrt = ("lengthscale", "centers", "X")

    def run():
        return (ops.kernel_matrix(kernel, X, Z), ops.kernel_matrix(kernel, Z, X), ops.kmv(kernel, X, Z, V),
                ops.adjoint_dense(kernel, X, Z, G, wrt=wrt), ops.adjoint_lowrank(kernel, X, Z, P, Q, wrt=wrt))

    one = run()
    with pool_phase(3):
        split = run()
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for a, b in zip(one[:3], split[:3]):
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol)
    for ga, gb in zip(one[3:], split[3:]):
        for name in wrt:
            np.testing.assert_allclose(getattr(gb, name), getattr(ga, name), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", OBJECTIVES)
def test_exact_objectives_split_match_one_range(rng, split_everything, monkeypatch, name):
    X = rng.uniform(-1, 1, (80, 2))
    y = np.column_stack([np.sin(3 * X[:, 0]), np.cos(2 * X[:, 1])])
    params = nh.Params.from_natural(1e-3, [0.7, 1.2], X[:12])
    obj = nh.make_objective(name, X, y, random_state=0)
    monkeypatch.setenv("NYHOPT_THREAD_POLICY", "0")  # no pool: one range
    v1, g1 = obj.value_and_grad(params)
    monkeypatch.setenv("NYHOPT_THREAD_POLICY", "1")
    monkeypatch.setattr("nyhopt.backend._threads.pool_workers", lambda: 3)
    v2, g2 = obj.value_and_grad(params)
    assert v2 == pytest.approx(v1, rel=1e-12)
    for field in ("log_penalty", "log_lengthscale", "centers"):
        np.testing.assert_allclose(getattr(g2, field), getattr(g1, field), rtol=1e-9, atol=1e-12)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_pool_works_in_a_forked_child():
    import multiprocessing as mp

    with pool_phase(2):
        assert map_ranges(lambda lo, hi: hi - lo, 10, min_rows=1) == [5, 5]  # executor started here
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        assert pool.apply_async(_ranges_in_child).get(timeout=60) == [5, 5]


def _ranges_in_child():
    with pool_phase(2):
        return map_ranges(lambda lo, hi: hi - lo, 10, min_rows=1)


def test_map_chunks_waits_for_every_chunk_before_raising():
    import time

    from nyhopt.backend._parallel import map_chunks

    done = []

    def chunk(c):
        if c == 2:  # the caller's own chunk fails at once
            raise ValueError("caller chunk")
        time.sleep(0.2)
        done.append(c)

    with pytest.raises(ValueError, match="caller chunk"):
        map_chunks(chunk, 3)
    assert sorted(done) == [0, 1]  # no worker still writes after the error


@pytest.mark.parametrize("kind", ["gaussian", "matern32"])
def test_numba_chunks_on_workers_match_prange(rng, monkeypatch, kind):
    """In a forked child the fused loops run their chunks on nyhopt's workers: same numbers as prange."""
    import numba

    from nyhopt.ops import _numba

    if numba.get_num_threads() < 2:
        pytest.skip("needs 2 Numba threads")
    X = rng.uniform(-1, 1, (203, 3))
    Z = X[:11].copy()
    kernel = nh.make_kernel(kind, np.array([0.8, 1.3, 1.1]))
    ell = kernel.lengthscale_array(3)
    V, U = rng.standard_normal((11, 3)), rng.standard_normal((203, 2))
    P, Q, G = rng.standard_normal((203, 2)), rng.standard_normal((11, 2)), rng.standard_normal((203, 11))
    wrt = ("lengthscale", "centers", "X")

    def run():
        return [_numba.kernel_matrix(kernel, X, Z, ell, np), _numba.kmv(kernel, X, Z, V, ell, np),
                _numba.kmtv(kernel, X, Z, U, ell, np), *_numba.normal_matvec(kernel, X, Z, V, ell, np, U=U),
                *_numba.adjoint_dense(kernel, X, Z, G, ell, np, wrt), *_numba.adjoint_lowrank(kernel, X, Z, P, Q, ell,
                                                                                             np, wrt)]

    threaded = run()
    chunks = []
    original = _numba.map_chunks
    monkeypatch.setattr(_numba, "map_chunks", lambda fn, parts: chunks.append(parts) or original(fn, parts))
    monkeypatch.setattr(_numba, "in_forked_child", lambda: True)
    assert run()[0].shape == (203, 11) and chunks == [1] * 6  # too little work to hand off
    monkeypatch.setattr(_numba, "_MIN_CHUNK_ENTRIES", 1)
    chunks.clear()
    split = run()
    assert len(chunks) == 6 and min(chunks) >= 2
    for a, b in zip(threaded, split):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)
