"""The scalable GPU paths hold no n x m array: their device memory grows with n as O(n (d + t)), not O(n m).

Run on the host stand-in for CuPy (``NYHOPT_HOST_CUPY=1``, ``tests/hostcupy``),
which counts the bytes of every live device array and keeps the peak
(``cupy.cuda.memory.peak_bytes``).  A path is measured at ``n`` and ``2 n``
rows with a small block budget; the growth of its peak must stay far below
the ``n x m`` array it must never form.  On a real GPU these tests skip
(CuPy has no peak counter of its own).
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
def memory():
    cp = cupy_or_none()
    if cp is None or not getattr(cp, "_HOST", False):
        pytest.skip("device memory is counted by the host stand-in for CuPy only (NYHOPT_HOST_CUPY=1)")
    return cp, cp.cuda.memory


def _data(cp, n, dtype=np.float32):
    rng = np.random.default_rng(n)
    X = rng.standard_normal((n, D)).astype(dtype)
    y = (np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)).astype(dtype)
    return cp.asarray(X), cp.asarray(y)


def _peak_growth(memory, run):
    """Peak bytes of ``run(n)`` above what was live before it, at 2N rows less at N rows."""
    cp, mem = memory
    peaks = []
    for n in (N, 2 * N):
        X, y = _data(cp, n)
        with nh.memory_budget(BUDGET), nh.cache_budget(0):
            run(X, y)  # first call: caches and workspaces of the objective or model
            base = mem.used_bytes()
            mem.reset_peak()
            run(X, y)
        peaks.append(mem.peak_bytes() - base)
    return peaks[1] - peaks[0]


@pytest.mark.parametrize("gram", [True, False])
def test_stoch_prop_step_holds_no_n_by_m_array(memory, gram):
    made = {}

    def step(X, y):
        if made.get("n") != X.shape[0]:
            made["n"] = X.shape[0]
            made["obj"] = nh.make_objective("stoch-prop", X, y, kernel=nh.GaussianKernel(2.0), n_probes=T, maxiter=10,
                                            random_state=0, gram=gram, kernel_cache=False)
        made["obj"].value_and_grad(nh.Params.from_natural(1.0 / X.shape[0], [2.0], X[:M]))

    growth = _peak_growth(memory, step)
    assert growth < 0.1 * N * M * 4, f"peak grew by {growth / (N * M * 4):.2f} n x m float32 arrays from n to 2n"


def test_falkon_fit_holds_no_n_by_m_array(memory):
    def fit(X, y):
        nh.NystromKRR(kernel=nh.GaussianKernel(2.0), penalty=1e-4, centers=M, solver="falkon", maxiter=10,
                      random_state=0).fit(X, y)

    growth = _peak_growth(memory, fit)
    assert growth < 0.1 * N * M * 4, f"peak grew by {growth / (N * M * 4):.2f} n x m float32 arrays from n to 2n"


def test_the_counter_sees_an_n_by_m_array(memory):
    """The check above can fail: a path that forms K (n x m) is seen."""
    cp, _ = memory

    def dense(X, y):
        K = nh.GaussianKernel(2.0)(X, X[:M])
        return K.sum()

    assert _peak_growth(memory, dense) >= N * M * 4
