"""K^T K in one pass (nyhopt.ops.gram), the kernel operator's routes and its pass count (issue #11)."""
import numpy as np
import pytest

import nyhopt as nh
from nyhopt import ops
from nyhopt.backend._parallel import pool_phase, sum_ranges
from nyhopt.ops.cached import CachedKernel
from nyhopt.ops.gram import gram_matrix
from nyhopt.ops import gram as gram_mod
from nyhopt.ops.operator import GRAM_GAIN, KernelOperator, gram_pays

KERNELS = [nh.GaussianKernel([0.7, 1.1, 0.9]), nh.LaplacianKernel(0.8), nh.MaternKernel(1.0, nu=1.5),
           nh.MaternKernel(1.3, nu=2.5)]


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    return rng.uniform(-1, 1, (1037, 3)), rng.normal(size=(1037, 4))


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: type(k).__name__ + str(getattr(k, "nu", "")))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gram_matrix_matches_dense(data, kernel, dtype):
    X, U = (a.astype(dtype) for a in data)
    Z = X[:45]
    K = ops.kernel_matrix(kernel, X, Z).astype(np.float64)
    with nh.memory_budget(2**14):  # many row blocks
        G, KtU = gram_matrix(kernel, X, Z, U)
    tol = 1e-13 if dtype == np.float64 else 1e-6  # float32: the kernel values' own rounding
    assert G.dtype == np.float64 and np.array_equal(G, G.T)
    np.testing.assert_allclose(G, K.T @ K, rtol=0, atol=tol * np.abs(K.T @ K).max())
    np.testing.assert_allclose(KtU, K.T @ U.astype(np.float64), rtol=0, atol=tol * np.abs(K).sum(0).max() * 4)
    Gc, KtUc = CachedKernel(kernel, X, Z).gram(U)
    np.testing.assert_allclose(Gc, G, rtol=0, atol=tol * np.abs(G).max())
    np.testing.assert_allclose(KtUc, KtU, rtol=0, atol=tol * np.abs(KtU).max())
    assert gram_matrix(kernel, X, Z)[1] is None and gram_matrix(kernel, X, Z, U[:, 0])[1].shape == (45,)


def test_sums_do_not_depend_on_the_thread_count(data):
    X, U = data
    k = nh.GaussianKernel(0.6)
    X = np.tile(X, (10, 1))  # several fixed ranges
    U = np.tile(U, (10, 1))
    results = []
    for workers in (1, 2, 3):
        with pool_phase(workers):
            ck = CachedKernel(k, X, X[:50])
            results.append((gram_matrix(k, X, X[:50], U), ck.gram(U), ck.normal_matvec(U[:50], U), ck.kmtv(U)))
    for other in results[1:]:
        for a, b in zip(results[0], other):
            for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
                assert np.array_equal(x, y)
    assert sum_ranges(lambda lo, hi: (np.array([hi - lo]), None), 10, 3) == (np.array([10]), None)


def test_operator_counts_passes_and_switches_to_gram(data):
    X, U = data
    k, Z = nh.GaussianKernel(0.9), X[:40]
    V = U[:40, :2]
    stream = KernelOperator(k, X, Z, cache=False, gram=False)
    ref = stream.normal_matvec(V, U)
    assert stream.passes == 1 and stream.gram is None and stream.engine == "numba"
    # ski rental: with k = 2 columns, K^T K (m = 40) pays after m / (GRAM_GAIN k) passes
    auto = KernelOperator(k, X, Z, cache=False, gram="auto")
    threshold = int(np.ceil(40 / (GRAM_GAIN * 2)))
    for _ in range(threshold):
        auto.normal_matvec(V)
    assert auto.gram is None and auto.passes == threshold
    KtKV, KtU = auto.normal_matvec(V, U)  # forms K^T K with K^T U in the same pass
    assert auto.gram is not None and auto.passes == threshold + 1
    np.testing.assert_allclose(KtKV, ref[0], rtol=1e-12)
    np.testing.assert_allclose(KtU, ref[1], rtol=1e-12)
    auto.normal_matvec(V)
    assert auto.passes == threshold + 1  # G V: no pass
    held = KernelOperator(k, X, Z, cache=True, gram=False)
    assert held.passes == 1 and held.engine == "pool"
    np.testing.assert_allclose(held.normal_matvec(V, U, kv=True)[2], ops.kmv(k, X, Z, V), rtol=1e-12)
    assert held.passes == 2
    with nh.cache_budget(X.shape[0] * 40 * 8 - 1):
        assert KernelOperator(k, X, Z).cache is None
    assert KernelOperator(k, X, Z).cache is not None
    with pytest.raises(ValueError, match="cache holds"):
        KernelOperator(k, X, Z, cache=CachedKernel(k, X[:10], Z))
    assert gram_pays(100, 1, 13) and not gram_pays(100, 1, 12)


def test_cache_budget_setting():
    assert nh.get_cache_budget() == 2**30
    with nh.cache_budget(123):
        assert nh.get_cache_budget() == 123
        nh.set_cache_budget(None)
        assert nh.get_cache_budget() == 2**30
    for bad in (-1, 1.5, True, "1GB"):
        with pytest.raises(ValueError, match="cache budget"):
            nh.set_cache_budget(bad)


def test_device_cache_budget_counts_the_memory_pool():
    """On a GPU the default is half of the free memory, with the blocks CuPy's pool holds free."""
    import types

    fake = types.SimpleNamespace(
        __name__="cupy",
        cuda=types.SimpleNamespace(Device=lambda: types.SimpleNamespace(mem_info=(6 * 2**30, 80 * 2**30))),
        get_default_memory_pool=lambda: types.SimpleNamespace(free_bytes=lambda: 10 * 2**30))
    assert nh.get_cache_budget(fake) == 8 * 2**30  # the previous step's cache, freed to the pool, counts
    with nh.cache_budget(5):
        assert nh.get_cache_budget(fake) == 5


class _FakeCupy:
    """Stands for the ``cupy`` module in the GPU choice of the Gram route: a device with ``free`` bytes."""

    __name__ = "cupy"

    def __init__(self, free, pool_free=0):
        import types

        self.cuda = types.SimpleNamespace(Device=lambda: types.SimpleNamespace(mem_info=(free, 2 * free)))
        self.get_default_memory_pool = lambda: types.SimpleNamespace(free_bytes=lambda: pool_free)


def _break_even(a, m=5000, k=21, e=None):
    from nyhopt.ops import operator as op_mod

    e = op_mod.GPU_EVAL_S if e is None else e
    return (e + a * m) / (e + op_mod.GPU_PRODUCT_S * k)


@pytest.mark.parametrize("route,const", [("float16", "GPU_GRAM_S"), ("int8", "GPU_GRAM8_S")])
def test_gram_pays_on_a_gpu_follows_the_cost_model(monkeypatch, route, const):
    from nyhopt.ops import operator as op_mod

    monkeypatch.setattr(gram_mod, "TENSOR_CORES", route)
    xp = _FakeCupy(free=80 * 2**30)
    # HIGGS: m = 5000, k = 21: G on tensor cores costs a few streaming products.
    p_star = _break_even(getattr(op_mod, const))
    assert 3 < p_star < 6
    below, above = int(np.floor(p_star)), int(np.ceil(p_star))
    assert not gram_pays(5000, 21, below, xp) and gram_pays(5000, 21, above, xp) and gram_pays(5000, 21, 28, xp)
    # the CPU rule is different: m <= 8 k p
    assert not gram_pays(5000, 21, 4) and gram_pays(5000, 21, 30)
    # more centers: more products before it pays; fewer columns: more products too
    p_one = _break_even(getattr(op_mod, const), k=1)
    assert p_one > p_star
    assert not gram_pays(50_000, 21, 25, xp) and not gram_pays(5000, 1, int(p_one), xp)
    assert gram_pays(5000, 1, int(p_one) + 1, xp)


def test_gram_on_a_gpu_needs_room_for_g():
    from nyhopt.ops import operator as op_mod

    m = 20_000
    need = op_mod.GPU_GRAM_BYTES * m * m
    assert not op_mod.gram_fits_device(m, _FakeCupy(free=2 * need - 2))
    assert op_mod.gram_fits_device(m, _FakeCupy(free=need, pool_free=need))  # CuPy's free blocks count
    assert not gram_pays(m, 21, 10_000, _FakeCupy(free=need))  # does not fit: stream, whatever the passes
    assert gram_pays(m, 21, 10_000, _FakeCupy(free=4 * need))
    assert gram_pays(m, 21, 10_000, _FakeCupy(free=0), free_bytes=2 * need)


def test_operator_on_a_gpu_switches_to_g_by_the_cost_model(monkeypatch):
    """The ski-rental rule with the GPU model: streaming until the passes cost as much as G."""
    from nyhopt.ops import operator as op_mod

    rng = np.random.default_rng(1)
    X, Z = rng.normal(size=(300, 2)), rng.normal(size=(5000, 2))[:40]
    op = KernelOperator(nh.GaussianKernel(1.0), X, Z, cache=False)
    calls = []
    monkeypatch.setattr(op_mod, "gram_pays", lambda m, k, p, xp, **kw: calls.append((m, k, p, kw)) or p >= 3)
    V = rng.normal(size=(40, 2))
    for _ in range(5):
        op.normal_matvec(V)
    kw = {"dtype": np.float64, "held": False}
    assert calls[:4] == [(40, 2, 0, kw), (40, 2, 1, kw), (40, 2, 2, kw), (40, 2, 3, kw)]
    assert op.gram is not None and op.passes == 4  # 3 streamed, 1 Gram pass, then G V


def test_gram_pays_on_a_gpu_with_float64_products(monkeypatch):
    """Float64 data, a held kernel or tensor cores off: G costs float64 products (4 to 5 times more)."""
    from nyhopt.ops import operator as op_mod

    xp = _FakeCupy(free=80 * 2**30)
    monkeypatch.setattr(gram_mod, "TENSOR_CORES", "int8")
    assert gram_pays(5000, 21, 5, xp)
    p64 = _break_even(op_mod.GPU_GRAM64_S)
    assert 15 < p64 < 25  # HIGGS with float64 products: G pays from about the 18th product
    assert not gram_pays(5000, 21, int(p64), xp, dtype=np.float64)
    assert gram_pays(5000, 21, int(p64) + 1, xp, dtype=np.float64)
    # held: a pass is its products alone (no evaluation), G the float64 products of the held matrix
    p_held = _break_even(op_mod.GPU_GRAM64_S, m=1000, e=0.0)
    assert 5 < p_held < 15
    assert not gram_pays(1000, 21, int(p_held), xp, held=True) and gram_pays(1000, 21, int(p_held) + 1, xp, held=True)
    monkeypatch.setattr(gram_mod, "TENSOR_CORES", False)
    assert not gram_pays(5000, 21, 5, xp) and gram_pays(5000, 21, int(p64) + 1, xp)
