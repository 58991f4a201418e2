"""Overflow-proof numerics (issue #15, cases 02, 05, 06, 08, 15): one regression test per case."""
import math

import numpy as np
import pytest

import nyhopt as nh
from nyhopt import ops
from nyhopt.hyperopt import standardization
from nyhopt.optim._init import median_heuristic

BIG = 2.0**600  # a power of two: scaling by it is exact, so results must scale exactly


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (120, 3))
    return X, np.sin(3 * X[:, 0]) + 0.1 * X[:, 1]


@pytest.fixture(params=["numpy", "numba"])
def cpu_impl(request):
    saved = dict(ops.CPU_IMPL)
    ops.set_cpu_impl(None, request.param)
    yield request.param
    ops.CPU_IMPL.update(saved)


# -- case 02: huge finite targets -----------------------------------------------------------------
@pytest.mark.parametrize("solver", ["direct", "falkon"])
def test_02_normalize_y_huge_targets_scale_exactly(data, solver):
    X, y = data
    kw = dict(centers=15, random_state=0, solver=solver, normalize_y=True)
    small = nh.NystromKRR(**kw).fit(X, y)
    big = nh.NystromKRR(**kw).fit(X, y * BIG)
    assert np.all(np.isfinite(big.y_scale_)) and big.y_scale_[0] == small.y_scale_[0] * BIG
    np.testing.assert_array_equal(big.predict(X[:5]), small.predict(X[:5]) * BIG)


def test_02_unnormalized_huge_targets_and_score(data):
    X, y = data
    kw = dict(centers=15, random_state=0, solver="falkon")
    small, big = nh.NystromKRR(**kw).fit(X, y), nh.NystromKRR(**kw).fit(X, y * BIG)
    np.testing.assert_allclose(big.alpha_, small.alpha_ * BIG, rtol=1e-12)
    assert big.score(X, y * BIG) == pytest.approx(small.score(X, y), rel=1e-12)


def test_02_tune_and_hyperopt_huge_targets(data):
    X, y = data
    res = nh.tune(X, y * 1e200, centers=10, epochs=2, progress=False)
    assert res.stop_reason == "epochs" and np.all(np.isfinite(res.model.predict(X[:5])))
    pred = nh.HyperoptKRR(centers=10, epochs=2, random_state=0).fit(X, y * 1e300).predict(X[:5])
    assert np.all(np.isfinite(pred)) and np.max(np.abs(pred)) > 1e299


def test_02_non_finite_predictions_raise(data):
    X, y = data
    model = nh.NystromKRR(centers=10, random_state=0, normalize_y=True).fit(X, y)
    model.y_mean_, model.y_scale_ = np.array([1.7e308]), np.array([1e308])  # mapped predictions overflow
    model.intercept_ = 1.7e308
    with pytest.raises(ValueError, match="overflow"):
        model.predict(X)


# -- case 05: tiny initial penalty --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["prop", "sgpr", "stoch-prop"])
def test_05_tiny_penalty_gradient_is_finite(data, name):
    X, y = data
    obj = nh.make_objective(name, X, y, random_state=0)
    value, grad = obj.value_and_grad(nh.Params.from_natural(1e-200, 1.0, X[:10]))
    assert math.isfinite(value) and np.isfinite(float(grad.log_penalty))
    # the 1/lam terms dominate: d value / d log(lam) ~ -value, not 0 or inf
    assert float(grad.log_penalty) < -0.1 * abs(value)
    nh.tune(X, y, objective=name, centers=10, epochs=2, penalty=1e-200, progress=False)


@pytest.mark.parametrize("name", ["prop", "sgpr"])
def test_05_log_penalty_gradient_matches_finite_differences(data, name):
    X, y = data
    obj = nh.make_objective(name, X, y)
    p = nh.Params.from_natural(1e-3, [0.7, 1.1, 0.9], X[:10])
    _, grad = obj.value_and_grad(p, wrt=("penalty",))
    h = 1e-5

    def at(dl):
        return obj.value(nh.Params(p.log_penalty + dl, p.log_lengthscale, p.centers))

    fd = (at(h) - at(-h)) / (2 * h)
    assert float(grad.log_penalty) == pytest.approx(fd, rel=1e-5, abs=1e-9)


# -- case 06: Matern at overflowing distances -------------------------------------------------------
def _old_matern(s, nu):
    """The formula before the fix (NaN where r overflows)."""
    r = np.sqrt(s)
    with np.errstate(all="ignore"):
        if nu == 1.5:
            return (1 + math.sqrt(3) * r) * np.exp(-math.sqrt(3) * r)
        return (1 + math.sqrt(5) * r + 5.0 / 3.0 * s) * np.exp(-math.sqrt(5) * r)


@pytest.mark.parametrize("nu", [1.5, 2.5])
def test_06_matern_zero_where_distance_overflows(cpu_impl, nu):
    A = np.array([[0.0], [1e160], [1.0]])
    K = nh.MaternKernel(1.0, nu=nu)(A, A)
    assert np.all(np.isfinite(K)) and K[0, 1] == 0.0 and K[1, 2] == 0.0
    K2 = nh.MaternKernel(1e-300, nu=nu)(np.array([[0.0], [1.0]]))
    np.testing.assert_array_equal(K2, np.eye(2))
    nh.NystromKRR(nh.MaternKernel(1.0, nu=nu), centers=3, solver="direct").fit(A, [1.0, 2.0, 3.0])


@pytest.mark.parametrize("nu", [1.5, 2.5])
def test_06_matern_values_unchanged_where_finite(nu):
    from nyhopt.ops import _numba

    rng = np.random.default_rng(1)
    s = np.concatenate([10.0 ** rng.uniform(-8, 7, 400), [0.0, 2e5, 1e6, 1e7, 1e300, 1e308, np.inf, np.nan]])
    old = _old_matern(s, nu)
    fin = np.isfinite(old)
    k, dk = nh.MaternKernel(1.0, nu=nu).profile_and_derivative(s.copy())
    kn = s.copy()
    _numba._profile_row(_numba.KIND_CODES[nh.MaternKernel(1.0, nu=nu).kind], kn)
    normal = fin & (old > 1e-290)  # Numba's own exp flushes to 0 slightly earlier, near 1e-306
    for kk in (k, kn):
        np.testing.assert_allclose(kk[normal], old[normal], rtol=1e-15, atol=0)
        assert np.all(kk[~np.isnan(s)] >= 0) and np.all(kk[-4:-1] == 0) and np.isnan(kk[-1])
    np.testing.assert_array_equal(k[fin], old[fin])  # the NumPy reference: bit for bit
    assert np.all(np.isfinite(dk[:-1]))


@pytest.mark.parametrize("nu", [1.5, 2.5])
def test_06_matern_gradients_match_finite_differences(cpu_impl, nu):
    rng = np.random.default_rng(2)
    X, Z, G = rng.normal(size=(30, 2)), rng.normal(size=(7, 2)), rng.normal(size=(30, 7))
    ell = np.array([0.8, 1.3])
    g = nh.MaternKernel(ell, nu=nu).adjoint(X, Z, G)
    assert np.all(np.isfinite(g.lengthscale)) and np.all(np.isfinite(g.centers))
    h = 1e-6
    for k in range(2):
        e = np.zeros(2)
        e[k] = h
        fd = (np.sum(G * nh.MaternKernel(ell + e, nu=nu)(X, Z)) - np.sum(G * nh.MaternKernel(ell - e, nu=nu)(X, Z)))
        assert g.lengthscale[k] == pytest.approx(fd / (2 * h), rel=1e-6)


def test_06_overflowing_gradient_is_a_clear_error(cpu_impl):
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match="lengthscale"):
        nh.GaussianKernel(1e-300).adjoint(X * 1e12, X[:5] * 1e12 + 1e6, np.ones((20, 5)))
    obj = nh.make_objective("gcv", X, X[:, 0])
    try:  # finite gradients, or a clear error: never NaN
        _, grad = obj.value_and_grad(nh.Params.from_natural(1e-3, 1e-300, X[:5]))
    except ValueError as exc:
        assert "lengthscale" in str(exc)
    else:
        assert np.all(np.isfinite(grad.log_lengthscale)) and np.all(np.isfinite(grad.centers))


# -- case 08: huge finite features ------------------------------------------------------------------
def test_08_standardization_and_median_heuristic_scale_exactly(data):
    X, _ = data
    mean, scale = standardization(X)
    bmean, bscale = standardization(X * BIG)
    np.testing.assert_array_equal(bmean, mean * BIG)
    np.testing.assert_array_equal(bscale, scale * BIG)
    np.testing.assert_array_equal(standardization(X * 1e308)[1] > 0, True)
    assert median_heuristic(X * BIG) == median_heuristic(X) * BIG
    with pytest.raises(ValueError, match="median"):
        median_heuristic(np.array([[-1.7e308, 1.7e308], [1.7e308, -1.7e308], [0.0, 1.0]]))


def test_08_tune_and_standardize_with_huge_features(data):
    X, y = data
    nh.tune(X * 1e160, y, centers=10, epochs=2, progress=False)
    s = np.array([-1.0, 0.0, 1.0] * 40)
    Xs = np.c_[s * 1e308, X[:, 1:]]
    ys = s + 0.1 * X[:, 1]
    est = nh.HyperoptKRR(centers=20, epochs=5, standardize=True, random_state=0).fit(Xs, ys)
    assert np.isfinite(est.x_scale_[0]) and est.score(Xs, ys) > 0.9
    nh.HyperoptKRR(centers=10, epochs=2, standardize=True).fit(np.abs(X) * 1e308, y)


# -- case 15: degenerate but valid problems ------------------------------------------------------------
def test_15_degenerate_problem_raises_documented_error():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    with pytest.raises(ValueError, match="larger penalty") as exc:
        nh.NystromKRR(penalty=1e-300, centers=np.repeat(X[:1], 5, 0), solver="direct").fit(X, X[:, 0])
    assert isinstance(exc.value, nh.IllConditionedError)
    assert isinstance(exc.value, np.linalg.LinAlgError)  # what callers caught before
    with pytest.raises(nh.IllConditionedError, match="distinct centers"):
        nh.tune(np.ones((6, 5), np.float32), rng.normal(size=6), objective="holdout", penalty=1e-300,
                lengthscale=1e300, centers=np.ones((5, 5)), epochs=3, progress=False)
