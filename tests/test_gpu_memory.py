"""The scalable GPU paths hold no n x m array: their device memory grows with n as O(n (d + t)), not O(n m).

The peak of the memory pool's ``used_bytes()`` is followed by a
``cupy.cuda.MemoryHook`` called at every allocation, on a GPU and on the
host stand-in for CuPy (``NYHOPT_HOST_CUPY=1``, ``tests/hostcupy``, which
counts the bytes of every live device array).  A path is measured at ``n``
and ``2 n`` rows with a small block budget and no kernel cache; the growth
of its peak must stay far below the ``n x m`` array it must never form.
"""
from __future__ import annotations

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.backend import cupy_or_none

pytestmark = pytest.mark.gpu

N, D, M, T = 8_000, 8, 600, 4
BUDGET = 4 << 20  # bytes of kernel block per pass: a few hundred rows (n is 8000 or 16000)


@pytest.fixture(scope="module")
def cp():
    return cupy_or_none()


def _peak_use(cp):
    """A memory hook that keeps the most bytes the pool has had in use since it was made."""

    class PeakUse(cp.cuda.MemoryHook):
        name = "nyhopt_test_peak_use"

        def __init__(self):
            self.pool = cp.get_default_memory_pool()
            self.base = self.peak = self.pool.used_bytes()

        def malloc_postprocess(self, **kwargs):
            self.peak = max(self.peak, self.pool.used_bytes())

    return PeakUse()


def _data(cp, n, dtype=np.float32):
    rng = np.random.default_rng(n)
    X = rng.standard_normal((n, D)).astype(dtype)
    y = (np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)).astype(dtype)
    return cp.asarray(X), cp.asarray(y)


def _peak_growth(cp, run):
    """Peak bytes of ``run(n)`` above what was in use before it, at 2N rows less at N rows."""
    peaks = []
    for n in (N, 2 * N):
        X, y = _data(cp, n)
        with nh.memory_budget(BUDGET), nh.cache_budget(0):
            run(X, y)  # first call: caches and workspaces of the objective or model
            with _peak_use(cp) as hook:
                run(X, y)
        peaks.append(hook.peak - hook.base)
    return peaks[1] - peaks[0]


@pytest.mark.parametrize("gram", [True, False])
def test_stoch_prop_step_holds_no_n_by_m_array(cp, gram):
    made = {}

    def step(X, y):
        if made.get("n") != X.shape[0]:
            made["n"] = X.shape[0]
            made["obj"] = nh.make_objective("stoch-prop", X, y, kernel=nh.GaussianKernel(2.0), n_probes=T,
                                            maxiter=10, tol=5e-2, random_state=0, gram=gram, kernel_cache=False)
        made["obj"].value_and_grad(nh.Params.from_natural(1.0 / X.shape[0], [2.0], X[:M]))

    growth = _peak_growth(cp, step)
    assert growth < 0.1 * N * M * 4, f"peak grew by {growth / (N * M * 4):.2f} n x m float32 arrays from n to 2n"


def test_falkon_fit_holds_no_n_by_m_array(cp):
    def fit(X, y):
        nh.NystromKRR(kernel=nh.GaussianKernel(2.0), penalty=1e-4, centers=M, solver="falkon", maxiter=10, tol=5e-2,
                      random_state=0).fit(X, y)

    growth = _peak_growth(cp, fit)
    assert growth < 0.1 * N * M * 4, f"peak grew by {growth / (N * M * 4):.2f} n x m float32 arrays from n to 2n"


def test_the_counter_sees_an_n_by_m_array(cp):
    """The check above can fail: a path that forms K (n x m) is seen."""

    def dense(X, y):
        K = nh.GaussianKernel(2.0)(X, X[:M])
        return K.sum()

    assert _peak_growth(cp, dense) >= N * M * 4
