"""Stochastic L_Prop and the trace estimators behind it.

References are written plainly with dense float64 algebra: the exact
objective (``prop``), the stochastic estimator itself for fixed probes with
exact solves, and central finite differences of the (fixed-probe) value.
"""
from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.objectives import _trace as tr
from nyhopt.objectives.stoch_prop import StochasticProp, cholesky_adjoint
from nyhopt.solvers import jitter
from nyhopt.solvers.falkon import ConvergenceWarning

from conftest import require_data

EXACT = dict(tol=1e-11, maxiter=1000, warm_start=False)


# -- helpers ---------------------------------------------------------------------------------
def problem(rng, n=120, d=3, m=12, p=1, dtype=np.float64):
    X = rng.uniform(-1.0, 1.0, size=(n, d))
    F = np.sin(3 * X[:, :1]) + X[:, 1:2] ** 2
    Y = F + 0.1 * rng.standard_normal((n, p))
    Z = X[rng.choice(n, m, replace=False)] + 0.01 * rng.standard_normal((m, d))
    params = nh.Params.from_natural(2e-3, rng.uniform(0.6, 1.4, d), Z)
    return X.astype(dtype), (Y[:, 0] if p == 1 else Y).astype(dtype), params


def dense_parts(X, Y, params, eps_B, eps_L=1e-10):
    """Exact H (with K_mm + eps_B I in B), L (K_mm + eps_L I), as dense float64 arrays."""
    k = nh.GaussianKernel(params.lengthscale)
    Z = np.asarray(params.centers)
    n, m = X.shape[0], Z.shape[0]
    Knm, Kmm = k(X, Z), k(Z)
    B = Knm.T @ Knm + n * params.penalty * (Kmm + eps_B * np.eye(m))
    H = Knm @ np.linalg.solve(B, Knm.T)
    L = np.linalg.cholesky(Kmm + eps_L * np.eye(m))
    return k, Knm, H, L


def estimator_reference(obj, params):
    """The stochastic estimate for the object's fixed probes, with exact dense solves."""
    X, Y, n, p = obj.X, obj.Y, obj.n, obj.p
    m = params.centers.shape[0]
    k, Knm, H, L = dense_parts(X, Y, params, eps_B=jitter(X.dtype) * m)
    V, w = obj.probes.vectors, obj.probes.weights
    D = float(np.sum(w * np.sum(V * (H @ V), axis=0)))
    F = float(np.sum(Y * (Y - H @ Y)))
    if obj.trace_estimator == "rows":
        XQ = obj._rows(m)
        AQ = np.linalg.solve(L, k(XQ, params.centers).T)
        T = (XQ.shape[0] - np.sum(AQ * AQ)) * n / XQ.shape[0]
    else:
        Ab = np.linalg.solve(L, Knm.T @ V)
        T = n - float(np.sum(w * np.sum(Ab * Ab, axis=0)))
    lam = params.penalty
    kappa = n * n * lam if obj.normalization == "released" else n * lam
    s2 = obj.noise_variance
    return {
        "effective_dimension": 2 * s2 * D / n,
        "data_fit": 2 * F / (n * p),
        "trace": 2 * F * T / (n * p * kappa),
    }


def directional_fd(obj, params, rng, h=1e-6):
    """(analytic, central-difference) derivatives along one random direction."""
    _, g = obj.value_and_grad(params)
    dl = rng.standard_normal()
    de = rng.standard_normal(params.log_lengthscale.shape)
    dZ = rng.standard_normal(params.centers.shape)

    def at(s):
        return obj.value(params.replace(
            log_penalty=params.log_penalty + s * dl,
            log_lengthscale=params.log_lengthscale + s * de,
            centers=params.centers + s * dZ,
        ))

    fd = (at(h) - at(-h)) / (2 * h)
    an = float(g.log_penalty * dl + g.log_lengthscale @ de + np.sum(g.centers * dZ))
    return an, fd


def flat(g):
    return np.concatenate([np.atleast_1d(g.log_penalty), np.ravel(g.log_lengthscale), np.ravel(g.centers)])


# -- probes and trace estimators ---------------------------------------------------------------------
def test_probes_shapes_kinds_and_seeds():
    R = tr.draw_probes(50, 7, "rademacher", np.random.default_rng(3))
    assert R.shape == (50, 7) and R.dtype == np.float64
    assert set(np.unique(R)) == {-1.0, 1.0}
    G1 = tr.draw_probes(50, 7, "gaussian", np.random.default_rng(3), dtype=np.float32)
    G2 = tr.draw_probes(50, 7, "gaussian", np.random.default_rng(3), dtype=np.float32)
    assert G1.dtype == np.float32 and np.array_equal(G1, G2)
    with pytest.raises(ValueError, match="probes"):
        tr.draw_probes(5, 2, "uniform")
    with pytest.raises(ValueError, match="n_probes"):
        tr.draw_probes(5, 0)
    with pytest.raises(TypeError, match="n_probes"):
        tr.draw_probes(5, 2.5)


def test_as_generator_accepts_seed_likes():
    assert isinstance(tr.as_generator(None), np.random.Generator)
    g = np.random.default_rng(1)
    assert tr.as_generator(g) is g
    a = tr.as_generator(5).standard_normal(3)
    assert np.array_equal(a, np.random.default_rng(5).standard_normal(3))
    assert isinstance(tr.as_generator(np.random.RandomState(0)), np.random.Generator)
    with pytest.raises(TypeError, match="random_state"):
        tr.as_generator("seed")
    with pytest.raises(ValueError, match="random_state"):
        tr.as_generator(-1)


def _spd(rng, n, eig):
    U = np.linalg.qr(rng.standard_normal((n, n)))[0]
    return (U * eig) @ U.T


def test_hutchinson_unbiased_with_the_right_variance(rng):
    A = _spd(rng, 40, rng.uniform(0, 1, 40))
    t, reps = 10, 400
    est = np.array([tr.hutchinson(lambda V: A @ V, tr.draw_probes(40, t, "gaussian", rng)) for _ in range(reps)])
    sd = np.sqrt(2 * np.sum(A * A) / t)  # exact standard deviation for Gaussian probes
    assert abs(est.mean() - np.trace(A)) < 4 * sd / np.sqrt(reps)
    assert 0.8 * sd < est.std() < 1.2 * sd
    # Rademacher probes trace a diagonal matrix exactly.
    Dg = np.diag(rng.uniform(0, 1, 40))
    est = tr.hutchinson(lambda V: Dg @ V, tr.draw_probes(40, 3, "rademacher", rng))
    assert est == pytest.approx(np.trace(Dg), rel=1e-14)


def test_hutchpp_probes_exact_on_the_sketched_range_and_unbiased(rng):
    n, r = 60, 4
    U = np.linalg.qr(rng.standard_normal((n, r)))[0]
    A = (U * np.array([5.0, 3.0, 2.0, 1.0])) @ U.T  # rank 4
    p = tr.hutchpp_probes(A @ rng.standard_normal((n, r)), rng.standard_normal((n, 3)))
    assert p.method == "hutch++" and p.n_exact == r and p.n_vectors == r + 3
    Q, Gp = p.vectors[:, :r], p.vectors[:, r:]
    np.testing.assert_allclose(Q.T @ Q, np.eye(r), atol=1e-12)
    np.testing.assert_allclose(Q.T @ Gp, 0, atol=1e-12)
    assert tr.weighted_quadratic_trace(p, A @ p.vectors) == pytest.approx(np.trace(A), rel=1e-12)
    # For any fixed sketch (here a poor one) the estimate is unbiased.
    B = _spd(rng, n, rng.uniform(0, 1, n))
    S = rng.standard_normal((n, 2))
    est = [tr.weighted_quadratic_trace(p, B @ p.vectors)
           for p in (tr.hutchpp_probes(S, rng.standard_normal((n, 4))) for _ in range(400))]
    sd = np.std(est)
    assert abs(np.mean(est) - np.trace(B)) < 4 * sd / np.sqrt(len(est))
    with pytest.raises(ValueError, match="same rows"):
        tr.hutchpp_probes(S[:10], rng.standard_normal((n, 2)))
    with pytest.raises(ValueError, match="AV"):
        tr.weighted_quadratic_trace(p, np.zeros((3, 3)))


def test_hutchpp_beats_hutchinson_on_a_decaying_spectrum(rng):
    n = 150
    A = _spd(rng, n, 1.0 / np.arange(1, n + 1) ** 2)
    exact = np.trace(A)
    e_h = [abs(tr.hutchinson(lambda V: A @ V, tr.draw_probes(n, 24, "gaussian", rng)) - exact) for _ in range(60)]
    e_pp = [abs(tr.hutchpp(lambda V: A @ V, n, 24, rng=rng) - exact) for _ in range(60)]
    assert np.median(e_pp) < 0.2 * np.median(e_h)
    with pytest.raises(ValueError, match="n_matvecs"):
        tr.hutchpp(lambda V: V, n, 2)


def test_row_sampling():
    d = np.arange(20.0)
    rows = tr.sample_rows(20, 8, np.random.default_rng(0))
    assert rows.dtype == np.int64 and len(np.unique(rows)) == 8 and np.all(np.diff(rows) > 0)
    assert np.array_equal(tr.sample_rows(5, 9), np.arange(5))
    assert tr.row_sampling(d[tr.sample_rows(20, 20)], 20) == d.sum()
    est = [tr.row_sampling(d[tr.sample_rows(20, 5, np.random.default_rng(s))], 20) for s in range(2000)]
    assert abs(np.mean(est) - d.sum()) < 0.02 * d.sum()
    with pytest.raises(ValueError, match="n_rows"):
        tr.sample_rows(5, 0)


@pytest.mark.parametrize("kind", ["gaussian", "rademacher"])
def test_probe_rows_do_not_depend_on_the_chunking(kind):
    n, B = 2 * tr.PROBE_BLOCK_ROWS + 123, tr.PROBE_BLOCK_ROWS
    R = tr.probe_rows(11, 3, 0, n, kind)
    for cuts in ([0, n], [0, 1, 7, B - 1, B + 1, 2 * B, n], [0, n // 3, 2 * n // 3, n]):
        parts = [tr.probe_rows(11, 3, a, b, kind) for a, b in zip(cuts[:-1], cuts[1:])]
        assert np.array_equal(np.vstack(parts), R)
    assert np.array_equal(tr.probe_rows(11, 3, 0, 500, kind), R[:500])  # n does not enter: a prefix
    assert not np.array_equal(tr.probe_rows(11, 3, 0, 50, kind, stream=1), R[:50])
    assert not np.array_equal(tr.probe_rows(12, 3, 0, 50, kind), R[:50])
    assert tr.probe_rows(11, 3, 5, 5, kind).shape == (0, 3)
    assert abs(R.mean()) < 0.01 and abs(R.std() - 1.0) < 0.01
    if kind == "rademacher":
        assert set(np.unique(R)) == {-1.0, 1.0}
    with pytest.raises(ValueError, match="start"):
        tr.probe_rows(11, 3, 5, 4)
    with pytest.raises(ValueError, match="seed"):
        tr.probe_rows(-1, 3, 0, 4)


def test_sample_rows_is_uniform_without_a_permutation_of_n():
    for q in (3, 13):  # rejection of repeats, and the complement when q > n / 2
        counts = np.zeros(20)
        for s in range(3000):
            rows = tr.sample_rows(20, q, np.random.default_rng(s))
            assert len(np.unique(rows)) == q and np.all(np.diff(rows) > 0) and 0 <= rows[0] and rows[-1] < 20
            counts[rows] += 1
        assert np.abs(counts / (3000 * q / 20) - 1).max() < 0.2  # about 4.5 standard deviations
    tracemalloc.start()
    rows = tr.sample_rows(10**10, 1000, np.random.default_rng(0))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(np.unique(rows)) == 1000 and peak < 10**6


def test_objective_probes_and_rows_come_from_its_seed(rng):
    from nyhopt.objectives.stoch_prop import STREAM_PROBES, row_sample, trace_rows

    X, y, params = problem(rng, n=300)
    obj = StochasticProp(X, y, n_probes=4, n_rows=50, random_state=9)
    assert obj.seed == tr.derive_seed(9)
    assert np.array_equal(obj.probes.vectors, tr.probe_rows(obj.seed, 4, 0, 300, stream=STREAM_PROBES))
    assert np.array_equal(obj._rows(12), X[row_sample(obj.seed, 300, trace_rows(300, 12, 50))])
    # a leading subset of the rows gets the leading rows of the same probes
    sub = StochasticProp(X[:100], y[:100], n_probes=4, random_state=9)
    assert np.array_equal(sub.probes.vectors, obj.probes.vectors[:100])


# -- the estimator against its dense definition and against prop ----------------------------------------
@pytest.mark.parametrize("opts", [
    {},
    {"trace_estimator": "hutchinson", "probes": "rademacher"},
    {"normalization": "paper", "noise_variance": 0.3, "value_form": "plain"},
])
def test_terms_equal_the_dense_estimator_with_exact_solves(rng, opts):
    X, y, params = problem(rng, p=2 if opts.get("value_form") == "plain" else 1)
    obj = StochasticProp(X, y, n_probes=6, n_rows=40, random_state=1, **EXACT, **opts)
    got = obj.terms(params)
    ref = estimator_reference(obj, params)
    for key in ref:
        assert got[key] == pytest.approx(ref[key], rel=1e-8), key
    assert obj.value(params) == pytest.approx(sum(ref.values()), rel=1e-8)


def test_hutchpp_is_exact_when_the_sketch_covers_the_centers(rng):
    X, y, params = problem(rng, m=5)
    obj = StochasticProp(X, y, effective_dimension_estimator="hutch++", n_probes=8, sketch_size=5,
                         n_rows=X.shape[0], random_state=0, **EXACT)
    got = obj.terms(params)
    _, _, H, _ = dense_parts(X, y[:, None], params, eps_B=jitter(X.dtype) * 5)
    assert got["effective_dimension"] == pytest.approx(2 * np.trace(H) / X.shape[0], rel=1e-8)
    obj.reset()
    assert obj.probes is None  # the sketch is state: rebuilt at the next evaluation
    obj.value(params)
    assert obj.probes.n_exact == 5


def test_many_probes_and_all_rows_converge_to_prop(rng):
    X, y, params = problem(rng, n=150)
    exact = nh.make_objective("prop", X, y).terms(params)
    obj = StochasticProp(X, y, n_probes=3000, n_rows=150, random_state=0, **EXACT)
    got = obj.terms(params)
    assert got["data_fit"] == pytest.approx(exact["data_fit"], rel=1e-6)
    assert got["trace"] == pytest.approx(exact["trace"], rel=1e-5)
    assert got["effective_dimension"] == pytest.approx(exact["effective_dimension"], rel=0.05)


def _spacega(m, seed=0):
    path = require_data("spacega")
    from nyhopt.datasets import load_dataset
    from nyhopt.optim._init import initial_centers, median_heuristic

    ds = load_dataset("spacega", data_dir=path.parent)
    X, y = ds.X_train, ds.y_train
    n, d = X.shape
    return X, y, nh.Params.from_natural(1.0 / n, np.full(d, median_heuristic(X)), initial_centers(X, m, seed))


def test_defaults_are_accurate_against_prop_on_spacega():
    """Issue target at the defaults: value within 10%, gradient cosine >= 0.95."""
    X, y, params = _spacega(m=100)
    v0, g0 = nh.make_objective("prop", X, y).value_and_grad(params)
    g0 = flat(g0)
    for seed in (0, 1):
        obj = nh.make_objective("stoch-prop", X, y, random_state=seed)
        v, g = obj.value_and_grad(params)
        g = flat(g)
        assert abs(v - v0) / abs(v0) < 0.10
        assert g @ g0 / (np.linalg.norm(g) * np.linalg.norm(g0)) >= 0.95
        assert obj.last_solve.converged


# -- gradients ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("opts", [
    {},
    {"gradient": "direct"},
    {"trace_estimator": "hutchinson", "normalization": "paper"},
    {"effective_dimension_estimator": "hutch++", "value_form": "plain", "noise_variance": 2.0},
])
def test_gradient_matches_finite_differences(rng, opts):
    X, y, params = problem(rng, p=2 if "noise_variance" in opts else 1)
    obj = StochasticProp(X, y, n_probes=30, n_rows=50, random_state=2, **EXACT, **opts)
    for _ in range(2):
        an, fd = directional_fd(obj, params, rng)
        assert an == pytest.approx(fd, rel=1e-5, abs=1e-9)


def test_every_coordinate_on_a_tiny_problem(rng):
    X, y, params = problem(rng, n=40, d=2, m=4)
    obj = StochasticProp(X, y, n_probes=5, random_state=0, **EXACT)
    _, g = obj.value_and_grad(params)
    # h = 1e-5: on the Gram route (the default here) the value's sums are differences of float64 sums
    # of size |W|^2 (docs/stochastic.md, "Passes per step"): rounding of ~1e-13 of the value, which
    # h = 1e-6 would turn into 1e-7 of a derivative.
    h = 1e-5
    fields = {"log_penalty": params.log_penalty, "log_lengthscale": params.log_lengthscale,
              "centers": params.centers}
    for name, val in fields.items():
        val = np.asarray(val, dtype=float)
        grad = np.asarray(getattr(g, name))
        for idx in np.ndindex(val.shape):
            e = np.zeros_like(val)
            e[idx] = h
            up, down = params.replace(**{name: val + e}), params.replace(**{name: val - e})
            fd = (obj.value(up) - obj.value(down)) / (2 * h)
            assert grad[idx] == pytest.approx(fd, rel=1e-5, abs=1e-8), (name, idx)


def test_gradient_forms_agree_at_exact_solves(rng):
    X, y, params = problem(rng)
    gw = flat(StochasticProp(X, y, n_probes=8, random_state=0, **EXACT).value_and_grad(params)[1])
    gd = flat(StochasticProp(X, y, n_probes=8, random_state=0, gradient="direct", **EXACT)
              .value_and_grad(params)[1])
    np.testing.assert_allclose(gw, gd, rtol=1e-7, atol=1e-9 * np.abs(gd).max())


def test_whitened_gradient_is_more_accurate_at_loose_tolerance():
    X, y, params = _spacega(m=100)
    ref = flat(StochasticProp(X, y, random_state=0, **EXACT).value_and_grad(params)[1])
    err = {}
    for form in ("whitened", "direct"):
        g = flat(StochasticProp(X, y, random_state=0, tol=1e-2, gradient=form).value_and_grad(params)[1])
        err[form] = np.linalg.norm(g - ref) / np.linalg.norm(ref)
    assert err["whitened"] < 0.3 * err["direct"]


def test_cholesky_adjoint_matches_finite_differences(rng):
    m = 6
    A = _spd(rng, m, rng.uniform(0.5, 2.0, m))
    C = rng.standard_normal((m, m))
    dA = rng.standard_normal((m, m))
    dA = dA + dA.T

    def f(M):
        return float(np.sum(C * np.linalg.cholesky(M).T))

    h = 1e-6
    fd = (f(A + h * dA) - f(A - h * dA)) / (2 * h)
    G = cholesky_adjoint(np.linalg.cholesky(A).T, C, np)
    np.testing.assert_allclose(G, G.T)
    assert np.sum(G * dA) == pytest.approx(fd, rel=1e-7)


# -- state, robustness, validation ------------------------------------------------------------------------
def test_warm_start_state_is_explicit(rng):
    X, y, params = problem(rng)
    obj = StochasticProp(X, y, n_probes=5, random_state=0, tol=1e-8)
    v1 = obj.value(params)
    assert not obj.last_solve.warm_started and obj.last_solve.iterations > 2
    v2 = obj.value(params)
    assert obj.last_solve.warm_started and obj.last_solve.iterations <= 1
    assert v2 == pytest.approx(v1, rel=1e-10)
    obj.reset()
    assert obj.last_solve is None
    obj.value(params)
    assert not obj.last_solve.warm_started
    cold = StochasticProp(X, y, n_probes=5, random_state=0, tol=1e-8, warm_start=False)
    cold.value(params)
    cold.value(params)
    assert not cold.last_solve.warm_started
    # Two instances never share state.
    other = StochasticProp(X, y, n_probes=5, random_state=0, tol=1e-8)
    other.value(params)
    assert not other.last_solve.warm_started


def test_extrapolated_warm_start(rng, monkeypatch):
    """``warm_start="extrapolate"`` starts from 2 beta_k - beta_(k-1); the previous beta alone after a reset."""
    X, y, params = problem(rng)
    obj = StochasticProp(X, y, n_probes=5, random_state=0, tol=1e-8, warm_start="extrapolate")
    starts, ends = [], []
    solve = StochasticProp._falkon

    def spy(self, kernel, Z, lam, W, beta0, *args):
        res = solve(self, kernel, Z, lam, W, beta0, *args)
        starts.append(None if beta0 is None else beta0.copy())
        ends.append(res.beta.copy())
        return res

    monkeypatch.setattr(StochasticProp, "_falkon", spy)
    for step in range(3):
        obj.value(params.replace(log_penalty=params.log_penalty + 0.2 * step))
    assert starts[0] is None
    np.testing.assert_array_equal(starts[1], ends[0])
    np.testing.assert_array_equal(starts[2], 2.0 * ends[1] - ends[0])
    assert obj.last_solve.warm_started
    obj.reset()
    obj.value(params)
    obj.value(params)
    assert starts[3] is None
    np.testing.assert_array_equal(starts[4], ends[3])  # the state before the reset is not used


def test_seeded_and_deterministic(rng):
    X, y, params = problem(rng)
    a = StochasticProp(X, y, random_state=4, warm_start=False).value(params)
    b = StochasticProp(X, y, random_state=4, warm_start=False).value(params)
    c = StochasticProp(X, y, random_state=5, warm_start=False).value(params)
    assert a == b and a != c


def test_maxiter_stops_with_a_finite_value_and_a_warning(rng):
    X, y, params = problem(rng)
    obj = StochasticProp(X, y, tol=1e-14, maxiter=2, random_state=0)
    with pytest.warns(ConvergenceWarning, match="maxiter=2"):
        value, grad = obj.value_and_grad(params)
    assert np.isfinite(value) and np.all(np.isfinite(flat(grad)))
    assert obj.last_solve.iterations == 2 and not obj.last_solve.converged


@pytest.mark.parametrize("n, m, estimator", [(8, 3, "hutchinson"), (8, 3, "hutch++"), (30, 30, "hutchinson"),
                                             (25, 24, "hutch++")])
def test_tiny_data_and_m_close_to_n(rng, n, m, estimator):
    X, y, params = problem(rng, n=n, m=m)
    obj = StochasticProp(X, y, random_state=0, maxiter=30, effective_dimension_estimator=estimator)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        value, grad = obj.value_and_grad(params)
    assert np.isfinite(value) and np.all(np.isfinite(flat(grad)))
    assert obj.last_solve.iterations <= 30


def test_inputs_are_not_modified(rng):
    X, y, params = problem(rng)
    X0, y0, Z0 = X.copy(), y.copy(), np.array(params.centers)
    obj = StochasticProp(X, y, random_state=0)
    obj.value_and_grad(params)
    assert np.array_equal(X, X0) and np.array_equal(y, y0) and np.array_equal(params.centers, Z0)


def test_float32_data(rng):
    X, y, params = problem(rng)
    v64 = StochasticProp(X, y, random_state=0, tol=1e-6).value(params)
    v32, g32 = StochasticProp(X.astype(np.float32), y.astype(np.float32), random_state=0,
                              tol=1e-4).value_and_grad(params)
    assert v32 == pytest.approx(v64, rel=1e-3)
    assert g32.centers.dtype == np.float64


def test_memory_stays_below_one_n_by_m_matrix(rng):
    n, m = 20000, 200  # n x m is 32 MB; m x m work (0.3 MB a matrix) is allowed
    X = rng.uniform(-1, 1, size=(n, 3))
    y = np.sin(3 * X[:, 0])
    params = nh.Params.from_natural(1e-3, [1.0, 1.0, 1.0], X[:m])
    # q x m row-sample work is by design; keep it small next to n x m here.
    obj = StochasticProp(X, y, n_probes=2, n_rows=300, random_state=0, maxiter=15)
    peaks = []
    for budget in (0, None):  # streaming (with or without K^T K), then the kernel held by default
        with nh.memory_budget(2**20), nh.cache_budget(budget), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            obj.value_and_grad(params)  # imports modules lazily: not part of the measure
            obj.reset()
            tracemalloc.start()
            obj.value_and_grad(params)
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
    assert peaks[0] < n * m * 8 / 4, peaks
    assert peaks[1] < 1.25 * n * m * 8, peaks  # one n x m matrix, nothing else of that size


@pytest.mark.parametrize("kwargs, match", [
    ({"n_probes": 0}, "n_probes"),
    ({"probes": "uniform"}, "probes"),
    ({"trace_estimator": "exact"}, "trace_estimator"),
    ({"effective_dimension_estimator": "xtrace"}, "effective_dimension_estimator"),
    ({"effective_dimension_estimator": "hutch++", "n_probes": 4, "sketch_size": 4}, "sketch_size"),
    ({"tol": -1.0}, "tol"),
    ({"maxiter": -1}, "maxiter"),
    ({"n_rows": 0}, "n_rows"),
    ({"normalization": "literal"}, "normalization"),
    ({"value_form": "x"}, "value_form"),
    ({"gradient": "autodiff"}, "gradient"),
])
def test_bad_options_are_named(rng, kwargs, match):
    X, y, _ = problem(rng)
    with pytest.raises(ValueError, match=match):
        StochasticProp(X, y, **kwargs)
    with pytest.raises(ValueError, match="warm_start"):
        StochasticProp(X, y, warm_start="yes")
    with pytest.raises(TypeError, match="warm_start"):
        StochasticProp(X, y, warm_start=None)


def test_registry_builds_it_with_options(rng):
    X, y, params = problem(rng)
    obj = nh.make_objective("stoch-prop", X, y, kernel="matern52", n_probes=7, probes="rademacher",
                            n_rows=30, random_state=0)
    assert isinstance(obj, StochasticProp) and obj.name == "stoch-prop"
    assert obj.probes.n_vectors == 7 and obj.kernel.kind == "matern52"
    terms = obj.terms(params)
    assert set(terms) == {"effective_dimension", "data_fit", "trace"}
    value, _ = obj.value_and_grad(params)
    assert obj.last_terms.keys() == terms.keys()
    assert sum(obj.last_terms.values()) == pytest.approx(value, rel=1e-14)


@pytest.mark.gpu
def test_cupy_matches_numpy(rng):
    import cupy as cp

    X, y, params = problem(rng)
    v_np, g_np = StochasticProp(X, y, random_state=0, **EXACT).value_and_grad(params)
    pc = nh.Params(params.log_penalty, params.log_lengthscale, cp.asarray(params.centers))
    v_cp, g_cp = StochasticProp(cp.asarray(X), cp.asarray(y), random_state=0, **EXACT).value_and_grad(pc)
    assert v_cp == pytest.approx(v_np, rel=1e-8)
    np.testing.assert_allclose(cp.asnumpy(g_cp.centers), g_np.centers, rtol=1e-6, atol=1e-10)


@pytest.mark.parametrize("gradient", ["whitened", "direct"])
def test_passes_over_the_data_per_step(rng, monkeypatch, gradient):
    """Cold step: one pass for the right-hand side, one per CG iteration, two for the gradient."""
    from nyhopt import ops
    from nyhopt.ops import _numba, _reference

    X, y, params = problem(rng, n=150)
    obj = nh.make_objective("stoch-prop", X, y, n_rows=40, gradient=gradient, random_state=0,
                            kernel_cache=False, gram=False)  # streaming: each pass evaluates the kernel
    calls = []
    for mod in (_numba, _reference):
        for op in ("kernel_matrix", "kmv", "kmtv", "normal_matvec", "adjoint_dense", "adjoint_lowrank"):
            original = getattr(mod, op)

            def spy(kernel, A, *args, _op=op, _original=original, **kwargs):
                if A.shape[0] == X.shape[0]:
                    calls.append(_op)
                return _original(kernel, A, *args, **kwargs)

            monkeypatch.setattr(mod, op, spy)
    assert ops.CPU_IMPL["normal_matvec"] in ("numba", "numpy")
    obj.value_and_grad(params)
    iterations = obj.last_solve.iterations
    assert len(calls) == 1 + iterations + 2, calls
    assert obj.last_solve.passes == len(calls)
    assert calls[-1] == "adjoint_lowrank"
    calls.clear()
    obj.reset()
    obj.value(params)
    assert len(calls) == 1 + obj.last_solve.iterations + 1  # the value needs only u = Knm a


# -- the constant mean ---------------------------------------------------------------------------------
def _mean_reference(obj, params):
    """The estimator with mean="constant" for the object's probes, with exact dense solves."""
    X, Y, n, p = obj.X, obj.Y, obj.n, obj.p
    m = params.centers.shape[0]
    k, Knm, H, L = dense_parts(X, Y, params, eps_B=jitter(X.dtype) * m)
    one = np.ones(n)
    v = one - H @ one
    gamma = one @ v
    c = (v @ Y) / gamma
    Yt = Y - c[None, :]
    V, w = obj.probes.vectors, obj.probes.weights
    D = float(np.sum(w * (np.sum(V * (H @ V), axis=0) + (V.T @ v) ** 2 / gamma)))
    F = float(np.sum(Yt * (Yt - H @ Yt)))
    XQ = obj._rows(m)
    AQ = np.linalg.solve(L, k(XQ, params.centers).T)
    T = (XQ.shape[0] - np.sum(AQ * AQ)) * n / XQ.shape[0]
    kappa = n * n * params.penalty
    s2 = obj.noise_variance
    return {"effective_dimension": 2 * s2 * D / n, "data_fit": 2 * F / (n * p),
            "trace": 2 * F * T / (n * p * kappa)}, c


@pytest.mark.parametrize("p", [1, 2])
def test_constant_mean_terms_equal_the_dense_estimator(rng, p):
    X, y, params = problem(rng, p=p)
    y = y + 3.0
    obj = StochasticProp(X, y, n_probes=6, n_rows=40, random_state=1, mean="constant", **EXACT)
    got = obj.terms(params)
    ref, c = _mean_reference(obj, params)
    for key in ref:
        assert got[key] == pytest.approx(ref[key], rel=1e-8), key
    np.testing.assert_allclose(obj.last_intercept, c, rtol=1e-8)


@pytest.mark.parametrize("opts", [{}, {"gradient": "direct", "noise_variance": 0.4},
                                  {"trace_estimator": "hutchinson"},
                                  {"effective_dimension_estimator": "hutch++"}])
def test_constant_mean_gradient_matches_finite_differences(rng, opts):
    X, y, params = problem(rng, p=2)
    obj = StochasticProp(X, y + 1.5, n_probes=30, n_rows=50, random_state=2, mean="constant", **EXACT, **opts)
    for _ in range(2):
        an, fd = directional_fd(obj, params, rng)
        assert an == pytest.approx(fd, rel=1e-5, abs=1e-9)


def test_constant_mean_converges_to_prop_with_the_constant(rng):
    X, y, params = problem(rng, n=150)
    y = y - 2.0
    prop = nh.make_objective("prop", X, y, mean="constant")
    exact = prop.terms(params)
    _, g0 = prop.value_and_grad(params)
    obj = StochasticProp(X, y, n_probes=3000, n_rows=150, random_state=0, mean="constant", **EXACT)
    got = obj.terms(params)
    assert got["data_fit"] == pytest.approx(exact["data_fit"], rel=1e-6)
    assert got["trace"] == pytest.approx(exact["trace"], rel=1e-5)
    assert got["effective_dimension"] == pytest.approx(exact["effective_dimension"], rel=0.05)
    np.testing.assert_allclose(obj.last_intercept, prop.last_intercept, rtol=1e-6)
    g = flat(obj.value_and_grad(params)[1])
    assert g @ flat(g0) / (np.linalg.norm(g) * np.linalg.norm(flat(g0))) > 0.99
    with pytest.raises(ValueError, match="value_form"):
        StochasticProp(X, y, mean="constant", value_form="plain")
