"""Out of GPU memory: a problem that does not fit stops with a MemoryError naming the setting to change.

CuPy's own ``OutOfMemoryError`` names a byte count; nyhopt's message says what
was being done and which setting makes it fit (the memory budget of the row
blocks, the cache budget, ``gram=False``, float32, fewer centers), and the
device stays usable: following the advice runs.  The device is squeezed by
leaving only ``room`` bytes free: on the host stand-in for CuPy
(``NYHOPT_HOST_CUPY=1``) by lowering the memory it reports, on a card by
holding the rest in one array.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.backend import cupy_or_none, device_memory_advice
from nyhopt.ops.operator import GPU_GRAM_BYTES, KernelOperator

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cp():
    return cupy_or_none()


@contextlib.contextmanager
def _squeezed(cp, monkeypatch, room):
    """Leave about ``room`` bytes of the device free inside the block."""
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    memory = cp.cuda.memory
    if hasattr(memory, "TOTAL_MEMORY"):  # the host stand-in: it reports what is left of TOTAL_MEMORY
        monkeypatch.setattr(memory, "TOTAL_MEMORY", pool.used_bytes() + room)
        yield
        return
    free = cp.cuda.Device().mem_info[0]
    filler = cp.empty(max(free - room, 0), dtype=cp.uint8)
    try:
        yield
    finally:
        del filler
        pool.free_all_blocks()


def _data(cp, n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    y = (np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)).astype(np.float32)
    return cp.asarray(X), cp.asarray(y)


def test_numpy_passes_through_the_advice():
    with pytest.raises(MemoryError, match="^plain$"):
        with device_memory_advice(np, "anything", lambda: ["never shown"]):
            raise MemoryError("plain")


def test_cupys_error_becomes_one_that_names_the_setting(cp):
    with pytest.raises(MemoryError, match=r"(?s)out of GPU memory while testing .*set_memory_budget") as info:
        with device_memory_advice(cp, "testing", lambda: ["lower it with nyhopt.set_memory_budget(nbytes)"]):
            raise cp.cuda.memory.OutOfMemoryError(1 << 40, 0, 0)
    assert isinstance(info.value.__cause__, cp.cuda.memory.OutOfMemoryError)


def test_a_gram_matrix_that_cannot_fit_is_refused_before_any_allocation(cp, monkeypatch):
    room = 16 << 20
    m = math.isqrt(2 * room // GPU_GRAM_BYTES) + 64  # G and its parts need more than all that is free
    X, _ = _data(cp, m + 10, 3)
    with _squeezed(cp, monkeypatch, room):
        op = KernelOperator(nh.GaussianKernel(1.0), X, X[:m], cache=False, gram=True)
        used = cp.get_default_memory_pool().used_bytes()
        with pytest.raises(MemoryError, match=r"(?s)Gram route does not fit.*gram=False.*fewer centers"):
            op.form_gram()
        assert cp.get_default_memory_pool().used_bytes() == used


def test_a_stoch_prop_step_that_does_not_fit_names_the_budgets_and_runs_when_they_are_followed(cp, monkeypatch):
    n, d, m = 4000, 8, 200
    X, y = _data(cp, n, d)
    params = nh.Params.from_natural(1e-3, [2.0], X[:m])

    def step():
        obj = nh.make_objective("stoch-prop", X, y, kernel=nh.GaussianKernel(2.0), n_probes=4, maxiter=5, tol=1e-1,
                                random_state=0, gram=False, n_rows=400)
        return obj.value_and_grad(params)

    with _squeezed(cp, monkeypatch, 6 << 20):
        with pytest.raises(MemoryError, match=r"(?s)out of GPU memory while evaluating the objective 'stoch-prop'"
                                              r".*set_memory_budget.*set_cache_budget\(0\).*gram=False"):
            step()
        with nh.memory_budget(128 << 10), nh.cache_budget(0):
            value, _ = step()
    assert np.isfinite(value)


def test_a_falkon_fit_that_does_not_fit_names_the_memory_budget(cp, monkeypatch):
    n, d, m = 4000, 8, 200
    X, y = _data(cp, n, d, seed=1)
    model = nh.NystromKRR(kernel=nh.GaussianKernel(2.0), penalty=1e-3, centers=m, solver="falkon", maxiter=5,
                          random_state=0)
    with _squeezed(cp, monkeypatch, 2 << 20):
        with pytest.raises(MemoryError, match=r"(?s)while solving with Falkon.*set_memory_budget"):
            model.fit(X, y)
        with nh.memory_budget(128 << 10), nh.cache_budget(0):
            model.fit(X, y)
    assert np.isfinite(float(model.predict(X[:5]).sum()))


def test_an_exact_objective_that_does_not_fit_points_to_stoch_prop(cp, monkeypatch):
    n, d, m = 4000, 8, 200
    X, y = _data(cp, n, d, seed=2)
    obj = nh.make_objective("prop", X, y, kernel=nh.GaussianKernel(2.0))
    with _squeezed(cp, monkeypatch, 1 << 20):
        with pytest.raises(MemoryError, match=r"(?s)while evaluating the objective 'prop'.*n x m matrices.*'stoch-prop'"):
            obj.value_and_grad(nh.Params.from_natural(1e-3, [2.0], X[:m]))
