"""nyhopt in child processes and concurrent threads (issue #15, cases 01, 03, 04).

* After nyhopt ran in the parent (chunked Numba products on the worker
  threads, an exact objective in a pool phase), pools of every start method
  and joblib's backends run nyhopt in their children.
* Overlapping thread phases leave NumPy's OpenBLAS thread count as it was.
* The caller's memory budget holds inside nyhopt's worker threads.
"""
import multiprocessing as mp
import os
import sys
import threading

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.backend import _blas, _parallel
from nyhopt.backend._parallel import map_chunks, pool_phase
from nyhopt.backend._threads import _openblas_get_num_threads, _openblas_local_setter, cpu_threads
from nyhopt.ops import _numba

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # spawn, forkserver and loky children inherit sys.path
    sys.path.insert(0, HERE)

import _process_workers  # noqa: E402

SEEDS = [1, 2]
TIMEOUT = 60  # a hung pool fails the test instead of blocking the run
# Children may run other thread counts (loky limits them): other rounding in the iterative fit.
TOL = dict(rtol=1e-6, atol=1e-6)


@pytest.fixture(scope="module")
def expected():
    """Results computed in this process; the worker pools and Numba chunks have run here afterwards."""
    import numba

    got = [_process_workers.nyhopt_work(s) for s in SEEDS]
    assert any(pid == os.getpid() for pid, _ in _parallel._executors), "the worker pool did not run"
    assert numba.threading_layer()  # raises unless a Numba parallel loop ran here
    return got


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_pool_children_run_nyhopt(expected, method):
    if method not in mp.get_all_start_methods():
        pytest.skip(f"start method {method!r} not available")
    with mp.get_context(method).Pool(2) as pool:
        got = pool.map_async(_process_workers.nyhopt_work, SEEDS).get(timeout=TIMEOUT)
    np.testing.assert_allclose(got, expected, **TOL)


@pytest.mark.parametrize("backend", ["loky", "multiprocessing"])
def test_joblib_children_run_nyhopt(expected, backend):
    joblib = pytest.importorskip("joblib")
    got = joblib.Parallel(n_jobs=2, backend=backend, timeout=TIMEOUT)(
        joblib.delayed(_process_workers.nyhopt_work)(s) for s in SEEDS)
    np.testing.assert_allclose(got, expected, **TOL)


def _in_fork_child(fn):
    """``fn()`` in a forked child; returns its exit code (fails the test if it hangs)."""
    proc = mp.get_context("fork").Process(target=fn)
    proc.start()
    proc.join(TIMEOUT)
    if proc.is_alive():
        proc.kill()
        proc.join()
        pytest.fail("the forked child hung")
    return proc.exitcode


def _chunks_then_exit():
    os._exit(0 if map_chunks(lambda c: c * c, 3) == [0, 1, 4] else 1)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_worker_pool_usable_after_fork_while_its_lock_is_held():
    map_chunks(lambda c: c, 3)  # executor started in the parent
    with _parallel._lock:  # as if another thread were creating an executor at fork time
        code = _in_fork_child(_chunks_then_exit)
    assert code == 0


# ------------------------------------------------------------ BLAS threads
def _numpy_blas_threads():
    """NumPy's OpenBLAS thread count as threadpoolctl reports it."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    lib = _blas.numpy_openblas()
    path = os.path.realpath(lib._name)
    for info in threadpoolctl.threadpool_info():
        if os.path.realpath(info["filepath"]) == path:
            return info["num_threads"]
    pytest.skip("threadpoolctl does not see NumPy's OpenBLAS")


@pytest.fixture
def blas_two_threads():
    """NumPy's OpenBLAS at 2 threads during the test, the user's setting afterwards."""
    setter, getter = _openblas_local_setter(), _openblas_get_num_threads()
    if setter is None or getter is None:
        pytest.skip("NumPy's OpenBLAS thread controls not found")
    old = setter(2)
    if getter() != 2 or _numpy_blas_threads() != 2:
        setter(old)
        pytest.skip("OpenBLAS does not run 2 threads here")
    yield getter
    setter(old)


def test_interleaved_phases_restore_blas_threads(blas_two_threads):
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    inside = []

    def first():
        with cpu_threads("numba"):
            a_in.set()
            b_in.wait(TIMEOUT)
            inside.append(blas_two_threads())
        a_out.set()

    def second():
        a_in.wait(TIMEOUT)
        with cpu_threads("pool"):
            b_in.set()
            a_out.wait(TIMEOUT)  # A enters, B enters, A leaves, B leaves
            inside.append(blas_two_threads())

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert inside == [1, 1]
    assert blas_two_threads() == 2 and _numpy_blas_threads() == 2


def test_concurrent_fits_restore_blas_threads(blas_two_threads, rng):
    X = rng.uniform(-1, 1, (200, 3))
    y = X[:, 0]
    errors = []

    def fits():
        try:
            for _ in range(10):
                nh.NystromKRR(centers=20, random_state=0).fit(X, y).predict(X)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    for _ in range(3):
        threads = [threading.Thread(target=fits) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        assert not errors
        assert blas_two_threads() == 2 and _numpy_blas_threads() == 2


def _report_blas_threads():
    os._exit(_openblas_get_num_threads()())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_during_a_phase_gives_the_child_the_user_setting(blas_two_threads):
    entered, leave = threading.Event(), threading.Event()

    def hold():
        with cpu_threads("numba"):
            entered.set()
            leave.wait(TIMEOUT)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert entered.wait(TIMEOUT) and blas_two_threads() == 1
        code = _in_fork_child(_report_blas_threads)
    finally:
        leave.set()
        t.join(TIMEOUT)
    assert code == 2
    assert blas_two_threads() == 2


# ------------------------------------------------------------ memory budget
def test_memory_budget_holds_in_worker_threads(monkeypatch):
    seen = set()
    original = _numba.get_memory_budget

    def spy():
        budget = original()
        seen.add((threading.current_thread().name, budget))
        return budget

    monkeypatch.setattr(_numba, "get_memory_budget", spy)
    X = np.random.default_rng(0).normal(size=(3000, 3))
    with nh.memory_budget(8192), pool_phase(2):
        nh.ops.kmv(nh.GaussianKernel(1.0), X, X[:300], np.ones(300))
    assert any(name.startswith("nyhopt") for name, _ in seen)  # the work did run on a worker
    assert {budget for _, budget in seen} == {8192}


def test_map_chunks_runs_tasks_with_the_callers_budget():
    with nh.memory_budget(4096):
        assert map_chunks(lambda c: nh.get_memory_budget(), 3) == [4096] * 3
    assert map_chunks(lambda c: nh.get_memory_budget(), 3) == [256 * 2**20] * 3  # not kept by the workers
