"""Gradients of the exact objectives (finite differences), options and input checks.

Values against dense references are in ``test_objectives_reference.py``.
"""
import numpy as np
import pytest

import nyhopt as nh
from nyhopt.backend import gpu_available
from nyhopt.objectives import Objective, available_objectives, make_objective

EXACT = ["holdout", "loocv", "gcv", "creg", "sgpr", "prop"]
KINDS = ["gaussian", "laplacian", "matern32", "matern52"]


def problem(n=60, d=3, m=8, p=1, seed=0, ard=True):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, size=(n, d))
    Y = np.sin(2 * X[:, :1]) + 0.3 * X[:, 1:2] ** 2 + 0.1 * rng.normal(size=(n, p)) + np.arange(p) * X[:, -1:]
    # centers near (not on) data points: the Laplacian kernel has a cusp at r = 0
    Z = X[rng.choice(n, m, replace=False)] + 0.05 * rng.normal(size=(m, d))
    ell = rng.uniform(0.8, 1.5, size=d) if ard else [1.1]
    return X, (Y[:, 0] if p == 1 else Y), nh.Params.from_natural(3e-3, ell, Z)


def axpy(params, t, direction):
    return params.map(lambda a, b: a + t * b, direction)


def inner(g, v):
    return float(np.sum(g.log_penalty * v.log_penalty) + np.sum(g.log_lengthscale * v.log_lengthscale)
                 + np.sum(g.centers * v.centers))


def random_direction(params, rng):
    return nh.Params(np.asarray(rng.normal()), rng.normal(size=params.log_lengthscale.shape),
                     rng.normal(size=params.centers.shape))


def central_difference(obj, params, direction, h=1e-5):
    return (obj.value(axpy(params, h, direction)) - obj.value(axpy(params, -h, direction))) / (2 * h)


def assert_directional(obj, params, n_dirs=2, seed=0, rtol=1e-6):
    rng = np.random.default_rng(seed)
    _, grad = obj.value_and_grad(params)
    for _ in range(n_dirs):
        v = random_direction(params, rng)
        fd = central_difference(obj, params, v)
        an = inner(grad, v)
        assert abs(fd - an) <= rtol * max(abs(fd), 1e-3), (obj.name, fd, an)


# -- gradients ------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [1, 3])
@pytest.mark.parametrize("ard", [False, True])
@pytest.mark.parametrize("name", EXACT)
def test_gradient_directional_gaussian(name, ard, p):
    X, y, params = problem(p=p, ard=ard, seed=p + 2 * ard)
    obj = make_objective(name, X, y, noise_variance=0.7, random_state=1)
    assert_directional(obj, params, n_dirs=1, seed=p)


@pytest.mark.parametrize("kind", KINDS[1:])
@pytest.mark.parametrize("name", EXACT)
def test_gradient_directional_other_kernels(name, kind):
    X, y, params = problem(p=2, seed=7)
    obj = make_objective(name, X, y, kernel=kind, random_state=1)
    assert_directional(obj, params, n_dirs=1, rtol=2e-6)


def test_gradient_paper_normalization():
    X, y, params = problem(p=2, seed=4)
    assert_directional(make_objective("prop", X, y, normalization="paper"), params)


@pytest.mark.parametrize("name", EXACT)
def test_gradient_every_coordinate_tiny(name):
    X, y, params = problem(n=24, d=2, m=3, p=2, seed=11)
    obj = make_objective(name, X, y, random_state=0, val_fraction=0.5) if name == "holdout" else \
        make_objective(name, X, y, noise_variance=0.5)
    _, grad = obj.value_and_grad(params)
    flat_g = np.concatenate([np.atleast_1d(grad.log_penalty), grad.log_lengthscale, grad.centers.ravel()])
    sizes = [1, params.log_lengthscale.size, params.centers.size]
    fd = []
    for k in range(sum(sizes)):
        e = np.zeros(sum(sizes))
        e[k] = 1.0
        v = nh.Params(np.asarray(e[0]), e[1 : 1 + sizes[1]], e[1 + sizes[1] :].reshape(params.centers.shape))
        fd.append(central_difference(obj, params, v))
    np.testing.assert_allclose(flat_g, fd, rtol=1e-6, atol=1e-9 * np.max(np.abs(fd)))


@pytest.mark.parametrize("name", EXACT)
def test_taylor_remainder_is_second_order(name):
    X, y, params = problem(p=2, seed=5)
    obj = make_objective(name, X, y, random_state=2)
    f0, grad = obj.value_and_grad(params)
    v = random_direction(params, np.random.default_rng(3))
    slope = inner(grad, v)
    hs = [1e-3 / 2**k for k in range(5)]
    values = np.array([obj.value(axpy(params, h, v)) for h in hs])
    rem = np.abs(values - f0 - np.array(hs) * slope)
    orders = np.log2(rem[:-1] / rem[1:])
    assert np.all(orders > 1.8) and abs(orders[-1] - 2) < 0.15, orders
    # and the zeroth-order remainder (no gradient) decays only linearly
    rem0 = np.abs(values - f0)
    assert np.all(np.log2(rem0[:-1] / rem0[1:]) < 1.2)


def test_wrt_subsets_give_zeros_and_the_same_partials():
    X, y, params = problem(p=2)
    obj = make_objective("prop", X, y)
    v, full = obj.value_and_grad(params)
    v2, part = obj.value_and_grad(params, wrt=("penalty",))
    assert v2 == v
    assert part.log_penalty == pytest.approx(float(full.log_penalty), rel=1e-12)
    assert not np.any(part.log_lengthscale) and not np.any(part.centers)
    _, part = obj.value_and_grad(params, wrt=("centers", "lengthscale"))
    assert part.log_penalty == 0
    np.testing.assert_allclose(part.centers, full.centers, rtol=1e-12)
    np.testing.assert_allclose(part.log_lengthscale, full.log_lengthscale, rtol=1e-12)
    with pytest.raises(ValueError, match="wrt"):
        obj.value_and_grad(params, wrt=("noise",))


def test_gradient_types_and_shapes():
    X, y, params = problem(p=1, ard=False)
    _, g = make_objective("gcv", X, y).value_and_grad(params)
    assert isinstance(g, nh.Params)
    assert g.log_penalty.shape == () and g.log_lengthscale.shape == (1,) and g.centers.shape == params.centers.shape
    assert g.centers.dtype == np.float64


# -- dtypes, shapes, blocks -------------------------------------------------------------------------
@pytest.mark.parametrize("name", EXACT)
def test_float32_matches_float64(name):
    X, y, params = problem(n=120, p=2, m=10, seed=8)
    o64 = make_objective(name, X, y, random_state=0)
    o32 = make_objective(name, X.astype(np.float32), y.astype(np.float32), random_state=0)
    v64, g64 = o64.value_and_grad(params)
    v32, g32 = o32.value_and_grad(params)
    assert isinstance(v32, float) and np.isfinite(v32)
    assert v32 == pytest.approx(v64, rel=1e-3)  # float32 jitter is 1e-6, float64 1e-10
    a = np.concatenate([np.atleast_1d(g64.log_penalty), g64.log_lengthscale, g64.centers.ravel()])
    b = np.concatenate([np.atleast_1d(g32.log_penalty), g32.log_lengthscale, g32.centers.ravel()])
    assert np.linalg.norm(a - b) <= 1e-3 * np.linalg.norm(a)


def test_one_dimensional_y_equals_one_column():
    X, y, params = problem(p=1)
    for name in EXACT:
        a = make_objective(name, X, y, random_state=0).value_and_grad(params)
        b = make_objective(name, X, y[:, None], random_state=0).value_and_grad(params)
        assert a[0] == b[0]
        np.testing.assert_array_equal(a[1].centers, b[1].centers)


def test_small_memory_budget_gives_the_same_gradient():
    X, y, params = problem(n=150, p=2)
    obj = make_objective("loocv", X, y)
    v, g = obj.value_and_grad(params)
    with nh.memory_budget(4096):  # many row blocks in the kernel adjoints
        v2, g2 = obj.value_and_grad(params)
    assert v2 == pytest.approx(v, rel=1e-12)
    np.testing.assert_allclose(g2.centers, g.centers, rtol=1e-9, atol=1e-12)


def test_holdout_cotangents_are_low_rank():
    """Hold-out never forms an n x m cotangent: both kernel blocks get thin (P, Q) pairs."""
    X, y, params = problem(n=80, p=2)
    obj = make_objective("holdout", X, y, random_state=0)
    _, ev = obj._run(params, frozenset({"penalty", "lengthscale", "centers"}), need_grad=True, return_ctx=True)
    blocks = ev.cotangents.nm
    assert [b.X.shape[0] for b in blocks] == [obj.n_train, obj.n_val]
    assert all(b.G is None and b.P.shape[1] <= 3 * 2 for b in blocks)


def test_inputs_are_not_modified():
    X, y, params = problem(p=2)
    X0, y0, Z0 = X.copy(), y.copy(), params.centers.copy()
    for name in EXACT:
        obj = make_objective(name, X, y, random_state=0)
        obj.value_and_grad(params)
        obj.terms(params)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(params.centers, Z0)


def test_value_is_deterministic():
    X, y, params = problem(p=2)
    for name in EXACT:
        obj = make_objective(name, X, y, random_state=0)
        assert obj.value(params) == obj.value(params) == obj.value_and_grad(params)[0]


# -- options ----------------------------------------------------------------------------------------
def test_holdout_split_is_seeded_and_sized():
    X, y, params = problem(n=50)
    a = make_objective("holdout", X, y, random_state=0)
    b = make_objective("holdout", X, y, random_state=0)
    c = make_objective("holdout", X, y, random_state=1)
    assert (a.n_val, a.n_train) == (30, 20)  # val_fraction defaults to 0.6
    np.testing.assert_array_equal(a.val_index, b.val_index)
    assert not np.array_equal(a.val_index, c.val_index)
    assert sorted(np.concatenate([a.train_index, a.val_index]).tolist()) == list(range(50))
    assert a.value(params) == b.value(params) != c.value(params)
    assert make_objective("holdout", X, y, val_fraction=0.2, random_state=0).n_val == 10


def test_noise_variance_and_normalization_enter_as_documented():
    X, y, params = problem(p=2)
    t1 = make_objective("prop", X, y).terms(params)
    t2 = make_objective("prop", X, y, noise_variance=0.25).terms(params)
    assert t2["effective_dimension"] == pytest.approx(0.25 * t1["effective_dimension"], rel=1e-12)
    t3 = make_objective("prop", X, y, normalization="paper").terms(params)
    assert t3["trace"] == pytest.approx(X.shape[0] * t1["trace"], rel=1e-12)
    assert t3["data_fit"] == t1["data_fit"]


def test_registry():
    assert available_objectives() == EXACT + ["stoch-prop"]
    X, y, _ = problem()
    for name in EXACT:
        obj = make_objective(name, X, y)
        assert isinstance(obj, Objective) and obj.name == name
        assert obj.X is X and obj.n == 60 and obj.p == 1 and obj.xp is np
    assert make_objective("PROP", X, y).name == "prop"
    assert isinstance(make_objective("prop", X, y, kernel=nh.MaternKernel(2.0, nu=1.5)).kernel, nh.MaternKernel)
    assert nh.make_objective is make_objective


def test_stoch_prop_is_registered_lazily():
    try:
        from nyhopt.objectives.stoch_prop import StochasticProp
    except ImportError:
        pytest.skip("nyhopt.objectives.stoch_prop is not written yet")
    X, y, _ = problem(n=80)
    obj = make_objective("stoch-prop", X, y, random_state=0)
    assert isinstance(obj, StochasticProp) and isinstance(obj, Objective)


# -- bad input ------------------------------------------------------------------------------------
def test_unknown_objective_and_option():
    X, y, _ = problem()
    with pytest.raises(ValueError, match="unknown objective 'cv'.*holdout"):
        make_objective("cv", X, y)
    with pytest.raises(TypeError, match="string"):
        make_objective(3, X, y)
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['val_fraction'\] for objective 'prop'"):
        make_objective("prop", X, y, val_fraction=0.5)
    with pytest.raises(ValueError, match="unknown kernel"):
        make_objective("prop", X, y, kernel="cosine")


@pytest.mark.parametrize("name, options, match", [
    ("prop", {"normalization": "literal"}, "normalization"),
    ("holdout", {"val_fraction": 1.0}, "val_fraction"),
    ("holdout", {"val_fraction": 0.001}, "val_fraction"),
    ("holdout", {"val_fraction": "half"}, "val_fraction"),
    ("gcv", {"noise_variance": -1.0}, "noise_variance"),
])
def test_bad_option_values(name, options, match):
    X, y, _ = problem()
    with pytest.raises((ValueError, TypeError), match=match):
        make_objective(name, X, y, **options)


def test_bad_data():
    X, y, _ = problem()
    with pytest.raises(ValueError, match="y has 59 rows but X has 60"):
        make_objective("prop", X, y[:-1])
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        make_objective("prop", Xn, y)
    yn = y.copy()
    yn[0] = np.inf
    with pytest.raises(ValueError, match="y contains NaN"):
        make_objective("gcv", X, yn)
    with pytest.raises(ValueError, match="X must be 2-D"):
        make_objective("gcv", X[:, 0], y)
    with pytest.raises(TypeError, match="real numbers"):
        make_objective("gcv", X.astype(complex), y)


def test_bad_params():
    X, y, params = problem()
    obj = make_objective("prop", X, y)
    with pytest.raises(ValueError, match="params.centers has 2 features.*X has 3"):
        obj.value(params.replace(centers=params.centers[:, :2]))
    with pytest.raises(ValueError, match="log_lengthscale has 2 entries"):
        obj.value(params.replace(log_lengthscale=np.zeros(2)))
    Z = params.centers.copy()
    Z[0, 0] = np.nan
    with pytest.raises(ValueError, match="centers contains NaN"):
        obj.value(params.replace(centers=Z))
    with pytest.raises(ValueError, match="log_penalty"):
        obj.value(params.replace(log_penalty=np.asarray(np.inf)))
    with pytest.raises(ValueError, match="log_lengthscale contains NaN"):
        obj.value(params.replace(log_lengthscale=np.array([np.nan] * 3)))
    with pytest.raises(ValueError, match="more centers than samples"):
        obj.value(params.replace(centers=np.zeros((61, 3))))
    with pytest.raises(TypeError, match="Params"):
        obj.value({"penalty": 1.0})


# -- GPU --------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU (CuPy)")
@pytest.mark.parametrize("name", EXACT)
def test_cupy_matches_numpy(name):
    import cupy as cp

    X, y, params = problem(n=200, p=2, m=20)
    v, g = make_objective(name, X, y, random_state=0).value_and_grad(params)
    pd = nh.Params(params.log_penalty, params.log_lengthscale, cp.asarray(params.centers))
    obj = make_objective(name, cp.asarray(X), cp.asarray(y), random_state=0)
    assert obj.xp is cp
    vd, gd = obj.value_and_grad(pd)
    assert vd == pytest.approx(v, rel=1e-9)
    assert isinstance(gd.centers, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(gd.centers), g.centers, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(gd.log_lengthscale, g.log_lengthscale, rtol=1e-7)
    assert float(gd.log_penalty) == pytest.approx(float(g.log_penalty), rel=1e-7)


def test_last_terms_are_those_of_the_last_evaluation():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((60, 3))
    y = np.sin(X[:, 0])
    obj = nh.make_objective("prop", X, y, kernel="gaussian")
    assert obj.last_terms is None
    p = nh.Params.from_natural(penalty=1e-3, lengthscale=1.0, centers=X[:10])
    value, _ = obj.value_and_grad(p)
    assert obj.last_terms == obj.terms(p)
    assert abs(sum(obj.last_terms.values()) - value) <= 1e-12 * abs(value)
