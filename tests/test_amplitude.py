"""The kernel amplitude (signal variance) of issue #13: Params, sgpr, the other objectives, tune,
HyperoptKRR, persistence and the command line."""
import json

import numpy as np
import pytest
from scipy.stats import multivariate_normal

import nyhopt as nh
from nyhopt.errors import DataError
from nyhopt.io import load_model, save_model
from nyhopt.objectives import make_objective
from nyhopt.optim import adam

EPS64 = 1e-10  # jitter of float64 data on Kmm


def gauss(X, Z, ell):
    diff = (X[:, None, :] - Z[None, :, :]) / np.asarray(ell, dtype=float)
    return np.exp(-0.5 * np.sum(diff**2, axis=-1))


def problem(n=80, d=3, m=10, p=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, size=(n, d))
    Y = np.sin(2 * X[:, :1]) + 0.1 * rng.normal(size=(n, p)) + np.arange(p)[None, :] * X[:, -1:]
    Z = X[rng.choice(n, m, replace=False)] + 0.05 * rng.normal(size=(m, d))
    ell = rng.uniform(0.8, 1.6, size=d)
    return X, Y, Z, ell


def params(Z, ell, lam, amplitude=1.0):
    return nh.Params.from_natural(lam, ell, Z, amplitude=amplitude)


# -- Params -------------------------------------------------------------------------------------
def test_params_amplitude_defaults_and_validation():
    X, Y, Z, ell = problem()
    old_style = nh.Params(np.asarray(np.log(1e-2)), np.log(ell), Z.copy())
    assert old_style.amplitude == 1.0 and float(old_style.log_amplitude) == 0.0
    p = params(Z, ell, 1e-2, amplitude=3.0)
    assert np.isclose(p.amplitude, 3.0) and len(list(p)) == 4
    assert np.isclose(p.map(lambda a: a * 2).amplitude, 9.0)
    assert p.replace(log_amplitude=np.asarray(0.0)).amplitude == 1.0
    for bad in (0.0, -1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="amplitude"):
            params(Z, ell, 1e-2, amplitude=bad)
    obj = make_objective("sgpr", X, Y)
    with pytest.raises(ValueError, match="log_amplitude"):
        obj.value(p.replace(log_amplitude=np.asarray(np.nan)))


# -- sgpr against the standard Titsias bound --------------------------------------------------------
def titsias(X, Y, Z, ell, lam, a):
    """-2/(np) [sum_c log N(y_c | 0, a Qnn + s2 I) - p Tr(a Knn - a Qnn) / (2 s2)] - log(2 pi)."""
    n, p = Y.shape
    Knm = gauss(X, Z, ell)
    Kmm = gauss(Z, Z, ell) + EPS64 * np.eye(Z.shape[0])
    Qnn = Knm @ np.linalg.solve(Kmm, Knm.T)
    Knn = gauss(X, X, ell)
    s2 = a * n * lam
    cov = a * Qnn + s2 * np.eye(n)
    loglik = sum(multivariate_normal(mean=np.zeros(n), cov=cov).logpdf(Y[:, c]) for c in range(p))
    bound = loglik - p * np.trace(a * Knn - a * Qnn) / (2 * s2)
    return -2.0 / (n * p) * bound - np.log(2 * np.pi)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("a", [1.0, 0.3, 4.0])
@pytest.mark.parametrize("lam", [1e-2, 1e-4])
def test_sgpr_matches_the_titsias_bound(p, a, lam):
    X, Y, Z, ell = problem(p=p)
    obj = make_objective("sgpr", X, Y, amplitude="learn", mean="zero")
    value = obj.value(params(Z, ell, lam, a))
    ref = titsias(X, Y, Z, ell, lam, a)
    assert abs(value - ref) <= 1e-10 * max(1.0, abs(ref))


def test_sgpr_at_unit_amplitude_is_the_objective_without_it():
    X, Y, Z, ell = problem(p=2)
    obj = make_objective("sgpr", X, Y, amplitude="learn", mean="zero")
    without = nh.Params(np.asarray(np.log(1e-3)), np.log(ell), Z.copy())
    v0, g0 = obj.value_and_grad(without)
    terms0 = obj.terms(without)
    v1, g1 = obj.value_and_grad(without, wrt=("penalty", "lengthscale", "centers"))
    assert v0 == v1 and terms0 == obj.terms(without)
    for f0, f1 in zip(list(g0)[:3], list(g1)[:3]):
        assert np.array_equal(f0, f1)
    # at a = 1 the terms are the amplitude-free definitions (MATH.md objective 5)
    n = X.shape[0]
    Knm = gauss(X, Z, ell)
    Qnn = Knm @ np.linalg.solve(gauss(Z, Z, ell) + EPS64 * np.eye(len(Z)), Knm.T)
    S = Qnn + n * 1e-3 * np.eye(n)
    assert np.isclose(terms0["log_det"], np.linalg.slogdet(S)[1] / n, rtol=1e-10)
    assert np.isclose(terms0["data_fit"], np.trace(Y.T @ np.linalg.solve(S, Y)) / (n * 2), rtol=1e-10)
    # d/dlog a = 1 - data_fit: the amplitude is learned from the data fit
    assert np.isclose(float(g0.log_amplitude), 1.0 - terms0["data_fit"], rtol=1e-12)


def test_sgpr_amplitude_gradient_vanishes_at_the_optimal_amplitude():
    X, Y, Z, ell = problem(p=2)
    obj = make_objective("sgpr", X, Y, amplitude="learn", mean="zero")
    lam = 1e-3
    a_star = obj.terms(params(Z, ell, lam))["data_fit"]  # F / (n^2 p lam) = Tr(Y^T S^-1 Y) / (n p)
    _, g = obj.value_and_grad(params(Z, ell, lam, a_star))
    assert abs(float(g.log_amplitude)) < 1e-12
    values = [obj.value(params(Z, ell, lam, a_star * f)) for f in (0.9, 1.0, 1.1)]
    assert values[1] < values[0] and values[1] < values[2]


def _fd(obj, p, field, index=(), h=1e-5):
    def shifted(s):
        arr = np.array(getattr(p, field), dtype=np.float64, copy=True)
        arr[index] += s
        return obj.value(p.replace(**{field: arr}))
    return (shifted(h) - shifted(-h)) / (2 * h)


@pytest.mark.parametrize("p_out", [1, 2])
def test_sgpr_gradient_matches_finite_differences(p_out):
    X, Y, Z, ell = problem(p=p_out, seed=3)
    obj = make_objective("sgpr", X, Y, amplitude="learn", mean="zero")
    p = params(Z, ell, 3e-3, amplitude=0.4)
    _, g = obj.value_and_grad(p)
    checks = [("log_amplitude", ()), ("log_penalty", ())]
    checks += [("log_lengthscale", (j,)) for j in range(len(ell))]
    checks += [("centers", (i, j)) for i in (0, 4, 9) for j in range(Z.shape[1])]
    for field, index in checks:
        analytic = float(np.asarray(getattr(g, field))[index])
        numeric = _fd(obj, p, field, index)
        assert abs(analytic - numeric) <= 1e-6 * max(1.0, abs(numeric)), (field, index, analytic, numeric)


def test_sgpr_wrt_without_amplitude_returns_zero():
    X, Y, Z, ell = problem()
    obj = make_objective("sgpr", X, Y, amplitude="learn", mean="zero")
    _, g = obj.value_and_grad(params(Z, ell, 1e-2, 2.0), wrt=("penalty",))
    assert float(g.log_amplitude) == 0.0
    with pytest.raises(ValueError, match="wrt"):
        obj.value_and_grad(params(Z, ell, 1e-2), wrt=("amplitudes",))


# -- the other objectives do not depend on the amplitude ----------------------------------------------
OTHERS = ["holdout", "loocv", "gcv", "creg", "prop", "stoch-prop"]


@pytest.mark.parametrize("name", OTHERS)
def test_other_objectives_ignore_the_amplitude(name):
    X, Y, Z, ell = problem(n=120, m=12)
    obj = make_objective(name, X, Y, random_state=0)
    assert not obj.uses_amplitude and make_objective("sgpr", X, Y).uses_amplitude
    v1, g1 = obj.value_and_grad(params(Z, ell, 1e-3))
    v2, g2 = obj.value_and_grad(params(Z, ell, 1e-3, amplitude=7.5))
    assert v1 == v2 and float(g1.log_amplitude) == 0.0 and float(g2.log_amplitude) == 0.0
    for f1, f2 in zip(g1, g2):
        assert np.array_equal(f1, f2)


def dense_values(Knm, Kmm, knn_diag, lam, Y, s2=1.0):
    """loocv, gcv, creg and prop (released normalization) from the kernel matrices, plainly."""
    n, p = Y.shape
    B = Knm.T @ Knm + n * lam * Kmm
    H = Knm @ np.linalg.solve(B, Knm.T)
    R = Y - H @ Y
    h = np.diag(H)
    F = np.trace(Y.T @ R)
    T = np.sum(knn_diag) - np.trace(Knm @ np.linalg.solve(Kmm, Knm.T))
    return {
        "loocv": np.sum((R / (1 - h)[:, None]) ** 2) / (n * p),
        "gcv": np.sum(R**2) / (n * p) / (np.trace(np.eye(n) - H) / n) ** 2,
        "creg": np.sum(R**2) / (n * p) + 2 * s2 / n * np.trace(H),
        "prop": 2 / (n * p) * (p * s2 * np.trace(H) + F * (1 + T / (n**2 * lam))),
    }


def dense_holdout(Xtr, Ytr, Xva, Yva, Z, ell, lam, a):
    Ktr, Kva, Kmm = a * gauss(Xtr, Z, ell), a * gauss(Xva, Z, ell), a * gauss(Z, Z, ell)
    alpha = np.linalg.solve(Ktr.T @ Ktr + len(Xtr) * lam * Kmm, Ktr.T @ Ytr)
    return np.sum((Yva - Kva @ alpha) ** 2) / Yva.size


@pytest.mark.parametrize("a", [0.2, 5.0])
def test_scaled_kernel_invariance_at_fixed_penalty_over_amplitude(a):
    """Kernel a k with penalty a lam gives the values of k with lam (dense references)."""
    X, Y, Z, ell = problem(n=60, m=8, p=2, seed=1)
    lam = 1e-2  # not tiny: the dense normal equations stay well conditioned
    Knm, Kmm, knn = gauss(X, Z, ell), gauss(Z, Z, ell) + EPS64 * np.eye(len(Z)), np.ones(len(X))
    base = dense_values(Knm, Kmm, knn, lam, Y)
    scaled = dense_values(a * Knm, a * Kmm, a * knn, a * lam, Y)
    p = params(Z, ell, lam, amplitude=a)
    for name in base:
        assert np.isclose(scaled[name], base[name], rtol=1e-9), name
        assert np.isclose(make_objective(name, X, Y).value(p), base[name], rtol=1e-8), name
    obj = make_objective("holdout", X, Y, random_state=0)
    tr, va = obj.train_index, obj.val_index
    ref = dense_holdout(X[tr], Y[tr], X[va], Y[va], Z, ell, lam, 1.0)
    assert np.isclose(dense_holdout(X[tr], Y[tr], X[va], Y[va], Z, ell, a * lam, a), ref, rtol=1e-9)
    assert np.isclose(obj.value(p), ref, rtol=1e-8)


# -- Adam -------------------------------------------------------------------------------------------
def test_adam_moves_the_amplitude_unless_masked():
    p = nh.Params(np.asarray(0.0), np.zeros(1), np.zeros((1, 1)), np.asarray(0.0))
    g = nh.Params(np.asarray(1.0), np.ones(1), np.zeros((1, 1)), np.asarray(-2.0))
    p1, s1 = adam.update(g, adam.init(p), p, lr=0.1)
    assert np.isclose(float(p1.log_amplitude), 0.1)
    p2, s2 = adam.update(g, adam.init(p), p, lr=0.1, mask={"log_amplitude": False})
    assert float(p2.log_amplitude) == 0.0 and float(s2.m.log_amplitude) == 0.0
    assert np.isclose(float(p2.log_penalty), -0.1) and p2.log_amplitude is not p.log_amplitude
    with pytest.raises(ValueError, match="shape mismatch"):
        adam.update(g.replace(log_amplitude=np.zeros(2)), adam.init(p), p, mask={"log_amplitude": False})


# -- tune, HyperoptKRR, persistence, CLI -------------------------------------------------------------
@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(150, 2))
    y = 3.0 * np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=150)
    return X, y


def test_tune_sgpr_learns_the_amplitude_and_freeze_keeps_it(data):
    X, y = data
    kw = dict(objective="sgpr", centers=15, epochs=8, patience=None, progress=False,
              objective_options={"amplitude": "learn"})
    res = nh.tune(X, y, **kw)
    amps = res.history.amplitude
    assert amps[0] == 1.0 and np.all(amps[1:] != 1.0) and res.params.amplitude != 1.0
    assert np.isclose(res.params.amplitude, res.history[res.best_epoch].amplitude)
    frozen = nh.tune(X, y, freeze="amplitude", **kw)
    assert np.all(frozen.history.amplitude == 1.0) and frozen.params.amplitude == 1.0
    assert "amplitude" in res.history.as_dict()


def test_tune_other_objectives_keep_unit_amplitude(data):
    X, y = data
    kw = dict(objective="gcv", centers=15, epochs=4, patience=None, progress=False)
    res = nh.tune(X, y, **kw)
    frozen = nh.tune(X, y, freeze=("amplitude",), **kw)
    assert np.all(res.history.amplitude == 1.0)
    assert np.array_equal(res.history.objective, frozen.history.objective)
    with pytest.raises(ValueError, match="nothing to tune"):
        nh.tune(X, y, freeze=("penalty", "lengthscale", "centers"), **kw)
    with pytest.raises(ValueError, match="freeze"):
        nh.tune(X, y, freeze=("amplitudes",), **kw)


def test_hyperopt_amplitude_is_saved_and_loaded(data, tmp_path):
    X, y = data
    est = nh.HyperoptKRR(objective="sgpr", centers=15, epochs=5, patience=None).fit(X, y)
    assert est.amplitude_ == est.params_.amplitude != 1.0
    path = save_model(tmp_path / "m.npz", est)
    loaded = load_model(path)
    assert loaded.amplitude_ == est.amplitude_
    assert np.allclose(loaded.predict(X), est.predict(X))
    # a file written before the amplitude existed loads with 1.0
    with np.load(path) as f:
        state = {k: f[k] for k in f.files}
    old = dict(state)
    del old["amplitude"]
    np.savez(tmp_path / "old.npz", **old)
    assert load_model(tmp_path / "old.npz").amplitude_ == 1.0
    for bad in (np.array(-1.0), np.array(np.nan), np.array([1.0, 2.0]), np.array("x")):
        np.savez(tmp_path / "bad.npz", **dict(state, amplitude=bad))
        with pytest.raises(DataError, match="amplitude"):
            load_model(tmp_path / "bad.npz")


def test_cli_tune_reports_and_freezes_the_amplitude(data, tmp_path):
    from nyhopt.cli import main

    X, y = data
    csv = tmp_path / "d.csv"
    np.savetxt(csv, np.column_stack([X, y]), delimiter=",", header="a,b,t", comments="")
    amps = {}
    for flag in ([], ["--freeze-amplitude"]):
        js = tmp_path / f"s{len(flag)}.json"
        args = ["tune", str(csv), "--target", "t", "--objective", "sgpr", "--centers", "10", "--epochs", "4",
                "--out", str(tmp_path / "m.npz"), "--json", str(js), "--quiet"] + flag
        assert main(args) == 0
        s = json.loads(js.read_text())
        amps[bool(flag)] = s["amplitude"]
        assert s["freeze_amplitude"] is bool(flag)
        assert load_model(tmp_path / "m.npz").amplitude_ == s["amplitude"]
    assert amps[True] == 1.0 and amps[False] != 1.0


# -- the profiled amplitude (amplitude="profile", the concentrated bound) -----------------------------
@pytest.mark.parametrize("p_out", [1, 2])
@pytest.mark.parametrize("lam", [1e-2, 1e-4])
def test_profiled_sgpr_is_the_minimum_over_the_amplitude(p_out, lam):
    from scipy.optimize import minimize_scalar

    X, Y, Z, ell = problem(p=p_out, seed=2)
    prof = make_objective("sgpr", X, Y, amplitude="profile")
    learn = make_objective("sgpr", X, Y, amplitude="learn")
    value = prof.value(params(Z, ell, lam, amplitude=7.0))  # params.amplitude is ignored
    assert value == prof.value(params(Z, ell, lam))
    a_star = prof.last_amplitude
    res = minimize_scalar(lambda t: learn.value(params(Z, ell, lam, np.exp(t))), bounds=(-12.0, 12.0),
                          method="bounded", options={"xatol": 1e-10})
    assert abs(value - res.fun) <= 1e-12 * max(1.0, abs(value))
    assert value <= res.fun + 1e-14 and abs(np.log(a_star) - res.x) < 1e-5
    assert abs(value - learn.value(params(Z, ell, lam, a_star))) <= 1e-13
    assert abs(prof.terms(params(Z, ell, lam))["data_fit"] - 1.0) <= 1e-13


@pytest.mark.parametrize("p_out", [1, 2])
def test_profiled_sgpr_gradient_matches_finite_differences(p_out):
    X, Y, Z, ell = problem(p=p_out, seed=3)
    obj = make_objective("sgpr", X, Y, amplitude="profile")
    p = params(Z, ell, 3e-3, amplitude=0.4)
    _, g = obj.value_and_grad(p)
    a_star = obj.last_amplitude
    assert float(g.log_amplitude) == 0.0
    checks = [("log_penalty", ())] + [("log_lengthscale", (j,)) for j in range(len(ell))]
    checks += [("centers", (i, j)) for i in (0, 4, 9) for j in range(Z.shape[1])]
    for field, index in checks:
        analytic = float(np.asarray(getattr(g, field))[index])
        numeric = _fd(obj, p, field, index)
        assert abs(analytic - numeric) <= 1e-6 * max(1.0, abs(numeric)), (field, index, analytic, numeric)
    # envelope theorem: the partial gradient of the learned form at a = a*
    _, g_learn = make_objective("sgpr", X, Y, amplitude="learn").value_and_grad(
        p.replace(log_amplitude=np.asarray(np.log(a_star))))
    assert abs(float(g_learn.log_amplitude)) < 1e-12
    for f1, f2 in zip(list(g)[:3], list(g_learn)[:3]):
        assert np.allclose(f1, f2, rtol=1e-10, atol=1e-14)


def test_sgpr_amplitude_option_is_validated():
    X, Y, _, _ = problem()
    assert make_objective("sgpr", X, Y).amplitude == "profile"
    assert make_objective("sgpr", X, Y).last_amplitude is None
    for bad, exc in (("Profile", ValueError), ("fixed", ValueError), (1.0, TypeError), (None, TypeError)):
        with pytest.raises(exc, match="amplitude"):
            make_objective("sgpr", X, Y, amplitude=bad)
    with pytest.raises(ValueError, match="amplitude"):
        make_objective("gcv", X, Y, amplitude="learn")
    with pytest.raises(ValueError, match="profiled amplitude"):
        make_objective("sgpr", X, np.zeros(len(X))).value(params(X[:5], np.ones(3), 1e-2))


def test_tune_sgpr_records_the_profiled_amplitude(data):
    X, y = data
    kw = dict(objective="sgpr", centers=15, epochs=6, patience=None, progress=False)
    res = nh.tune(X, y, **kw)
    assert res.objective.amplitude == "profile"
    check = make_objective("sgpr", res.objective.X, res.objective.Y, amplitude="profile")
    for record in res.history:
        assert record.amplitude != 1.0
    check.value(res.params)
    assert res.params.amplitude == res.history[res.best_epoch].amplitude
    assert np.isclose(res.params.amplitude, check.last_amplitude, rtol=1e-12)
    est = nh.HyperoptKRR(objective="sgpr", centers=15, epochs=3, patience=None).fit(X, y)
    assert est.amplitude_ == est.params_.amplitude != 1.0


def test_tune_sgpr_profile_frozen_is_the_objective_without_amplitude(data):
    X, y = data
    kw = dict(objective="sgpr", centers=15, epochs=6, patience=None, progress=False, freeze="amplitude")
    frozen = nh.tune(X, y, **kw)
    learned_frozen = nh.tune(X, y, objective_options={"amplitude": "learn"}, **kw)
    assert np.all(frozen.history.amplitude == 1.0) and frozen.params.amplitude == 1.0
    assert np.array_equal(frozen.history.objective, learned_frozen.history.objective)
    assert frozen.objective.amplitude == "learn"
