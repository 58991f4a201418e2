"""CachedKernel products equal the streaming operations; the kernel_cache option of stoch-prop."""
import numpy as np
import pytest

import nyhopt as nh
from nyhopt import ops
from nyhopt.backend._parallel import pool_phase
from nyhopt.ops.cached import CachedKernel
from nyhopt.solvers import falkon_solve

from test_half_cache import _cache_products_within_bounds

TOL = {np.float64: 1e-12}  # float64 routes; float32 ones are bounded against float64 (docs/dev/testing.md)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("workers", [1, 3])
def test_products_match_streaming(rng, dtype, workers, monkeypatch):
    monkeypatch.setattr("nyhopt.backend._parallel.MIN_ENTRIES", 1)
    X = rng.uniform(-1, 1, (97, 3)).astype(dtype)
    Z = X[:11].copy()
    kernel = nh.GaussianKernel(np.array([0.7, 1.1, 1.5]))
    V, U = rng.standard_normal((11, 4)).astype(dtype), rng.standard_normal((97, 2)).astype(dtype)
    with pool_phase(workers):
        ck = CachedKernel(kernel, X, Z)
        got = [ck.kmv(V), ck.kmtv(U), *ck.normal_matvec(V, U, kv=True)]
        assert ck.normal_matvec(V)[1] is None
    want = [ops.kmv(kernel, X, Z, V), ops.kmtv(kernel, X, Z, U), *ops.normal_matvec(kernel, X, Z, V, U, kv=True)]
    assert ck.shape == (97, 11) and ck.nbytes == 97 * 11 * np.dtype(dtype).itemsize
    if dtype == np.float32:  # float32 products of the held matrix: against float64, not the streaming route
        _cache_products_within_bounds(got, ops.kernel_matrix(kernel, X, Z).astype(np.float64), V, U)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        if dtype == np.float64:
            np.testing.assert_allclose(g, w, rtol=TOL[dtype], atol=TOL[dtype])
    with pytest.raises(ValueError, match="rows"):
        ck.kmtv(U[:5])


def test_falkon_with_cache_matches_streaming(rng):
    X = rng.uniform(-1, 1, (150, 2))
    y = np.sin(3 * X[:, 0])
    kernel = nh.GaussianKernel(0.8)
    a = falkon_solve(kernel, X, X[:20], y, 1e-4, tol=1e-12, maxiter=200).alpha
    b = falkon_solve(kernel, X, X[:20], y, 1e-4, tol=1e-12, maxiter=200, cache=CachedKernel(kernel, X, X[:20])).alpha
    np.testing.assert_allclose(b, a, rtol=1e-7, atol=1e-8 * np.abs(a).max())  # same CG, other roundings
    with pytest.raises(ValueError, match="cache"):
        falkon_solve(kernel, X, X[:20], y, 1e-4, cache=CachedKernel(kernel, X[:50], X[:20]))


@pytest.mark.parametrize("estimator", ["rows", "hutchinson"])
@pytest.mark.parametrize("route", [(True, False), (False, True), (True, True)], ids=["cache", "gram", "cache+gram"])
def test_stoch_prop_routes_give_the_same_numbers(rng, estimator, route):
    """Held kernel, Gram matrix or both: the streaming numbers, up to rounding."""
    X = rng.uniform(-1, 1, (160, 3))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(160)
    params = nh.Params.from_natural(1e-3, [0.8, 1.0, 1.2], X[:15])
    opts = dict(trace_estimator=estimator, n_rows=60, tol=1e-10, random_state=0)
    plain = nh.make_objective("stoch-prop", X, y, kernel_cache=False, gram=False, **opts)
    other = nh.make_objective("stoch-prop", X, y, kernel_cache=route[0], gram=route[1], **opts)
    assert other._cpu_engine(params) == "pool" and plain._cpu_engine(params) == "numba"
    v1, g1 = plain.value_and_grad(params)
    v2, g2 = other.value_and_grad(params)
    assert v2 == pytest.approx(v1, rel=1e-9)
    for field in ("log_penalty", "log_lengthscale", "centers"):
        np.testing.assert_allclose(getattr(g2, field), getattr(g1, field), rtol=1e-7, atol=1e-10)
    assert other.value(params) == pytest.approx(v2, rel=1e-6)
    assert other.last_solve.passes < plain.last_solve.passes
    with pytest.raises(ValueError, match="kernel_cache"):
        nh.make_objective("stoch-prop", X, y, kernel_cache="yes")
    with pytest.raises(TypeError, match="kernel_cache"):
        nh.make_objective("stoch-prop", X, y, kernel_cache=None)
    with pytest.raises(TypeError, match="gram"):
        nh.make_objective("stoch-prop", X, y, gram=None)


def test_stoch_prop_defaults_hold_the_kernel_when_it_fits(rng):
    X = rng.uniform(-1, 1, (3000, 3))
    y = np.sin(3 * X[:, 0])
    params = nh.Params.from_natural(1e-3, [1.0, 1.0, 1.0], X[:40])
    obj = nh.make_objective("stoch-prop", X, y, n_rows=100, random_state=0)
    assert obj._routes(40) == (np.float64, True)  # 3000 x 40 fits 1 GiB; m = 40 <= GRAM_GAIN * 21 * 20
    with nh.cache_budget(3000 * 40 * 8 - 1):
        assert obj._routes(40) == (None, True)  # on the CPU "auto" never holds it in float16
    assert obj._routes(20000)[1] is False  # many centers: K^T K costs more than the passes it saves
    obj.value_and_grad(params)
    # kernel evaluation, Gram pass with the right-hand sides, adjoint: no pass per CG iteration, and the
    # sums of u = K a from the Gram matrix
    assert obj.last_solve.passes == 3 and obj.last_solve.iterations > 4


@pytest.mark.gpu
def test_cached_products_on_cupy(rng):
    cp = pytest.importorskip("cupy")
    X = rng.uniform(-1, 1, (300, 3))
    Z, V, U = X[:17].copy(), rng.standard_normal((17, 5)), rng.standard_normal((300, 2))
    kernel = nh.GaussianKernel(0.9)
    ck = CachedKernel(kernel, cp.asarray(X), cp.asarray(Z))
    got = [ck.kmv(cp.asarray(V)), ck.kmtv(cp.asarray(U)), *ck.normal_matvec(cp.asarray(V), cp.asarray(U), kv=True)]
    want = [ops.kmv(kernel, X, Z, V), ops.kmtv(kernel, X, Z, U), *ops.normal_matvec(kernel, X, Z, V, U, kv=True)]
    for g, w in zip(got, want):
        assert isinstance(g, cp.ndarray)
        np.testing.assert_allclose(cp.asnumpy(g), w, rtol=1e-11, atol=1e-11)
    obj = nh.make_objective("stoch-prop", cp.asarray(X), cp.asarray(np.sin(X[:, 0])), kernel_cache=True, n_rows=100,
                            random_state=0)
    ref = nh.make_objective("stoch-prop", X, np.sin(X[:, 0]), kernel_cache=True, n_rows=100, random_state=0)
    params = nh.Params.from_natural(1e-3, 1.0, Z)
    v_gpu, _ = obj.value_and_grad(nh.Params.from_natural(1e-3, 1.0, cp.asarray(Z)))
    v_cpu, _ = ref.value_and_grad(params)
    assert v_gpu == pytest.approx(v_cpu, rel=1e-6)
