"""The constant mean (``mean="constant"``) of the objectives: dense references, gradients, invariances.

The references form the smoother of ridge regression with an unpenalized
intercept directly, from the QR factorization of the augmented design
``[[K, 1], [sqrt(n lam) L^T, 0]]`` (no use of the ``v v^T / gamma`` update
that the implementation relies on), and the constant by generalized least
squares, ``c* = 1^T S^-1 Y / 1^T S^-1 1`` with ``S = K_ny + n lam I``.
"""
import numpy as np
import pytest

import nyhopt as nh
from nyhopt.objectives import make_objective
from test_objectives import assert_directional
from test_objectives import problem as grad_problem
from test_objectives_reference import Dense, plain_kernel, problem, rel

EXACT = ["holdout", "loocv", "gcv", "creg", "sgpr", "prop"]


class DenseMean(Dense):
    """Dense N-KRR with an unpenalized intercept, formed from the definitions."""

    def __init__(self, kind, X, Y, Z, ell, lam):
        super().__init__(kind, X, Y, Z, ell, lam)
        n = self.n
        Lk = np.linalg.cholesky(self.Kt)
        G = np.block([[self.K, np.ones((n, 1))], [np.sqrt(n * lam) * Lk.T, np.zeros((self.m, 1))]])
        Q, R = np.linalg.qr(G)
        self.Hc = Q[:n] @ Q[:n].T
        coef = np.linalg.solve(R, Q[:n].T @ Y)
        self.alpha_c, self.c = coef[:-1], coef[-1]
        S = self.Knys + n * lam * self.I
        one = np.ones(n)
        self.c_gls = (one @ np.linalg.solve(S, Y)) / (one @ np.linalg.solve(S, one))
        self.Yt = Y - self.c_gls[None, :]

    def Fc(self):
        return np.trace(self.Yt.T @ (self.I - self.H) @ self.Yt)

    def Rc(self):
        return (self.I - self.Hc) @ self.Y


def refs(d, s2):
    n, p = d.n, d.p
    Rc, h = d.Rc(), np.diag(d.Hc)
    S = d.Knys + n * d.lam * d.I
    _, logdet = np.linalg.slogdet(S)
    quad = np.trace(d.Yt.T @ np.linalg.solve(S, d.Yt))
    return {
        "loocv": np.sum((Rc / (1 - h)[:, None]) ** 2) / (n * p),
        "gcv": np.sum(Rc**2) / (n * p) / (np.trace(d.I - d.Hc) / n) ** 2,
        "creg": np.sum(Rc**2) / (n * p) + 2 * s2 / n * np.trace(d.Hc),
        "sgpr": (p * logdet + quad + p * d.T() / (n * d.lam)) / (n * p),
        "prop": 2 / (n * p) * (p * s2 * np.trace(d.Hc) + d.Fc() * (1 + d.T() / (n * n * d.lam))),
    }


def test_dense_reference_is_consistent():
    """The two references of the constant agree: QR intercept = GLS c*, H_c = H + v v^T / 1^T v."""
    X, Y, Z, ell = problem(n=80, p=2, seed=4)
    d = DenseMean("gaussian", X, Y + 2.0, Z, ell, 1e-2)
    np.testing.assert_allclose(d.c, d.c_gls, rtol=1e-10)
    v = (d.I - d.H) @ np.ones(d.n)
    np.testing.assert_allclose(d.Hc, d.H + np.outer(v, v) / v.sum(), atol=1e-12)


@pytest.mark.parametrize("p", [1, 3])
@pytest.mark.parametrize("kind", ["gaussian", "matern32"])
def test_values_match_dense_references(kind, p):
    X, Y, Z, ell = problem(n=150, p=p, seed=1)
    Y = Y + np.array([3.0, -1.0, 0.5])[:p]
    lam, s2 = 3e-3, 0.7
    y = Y[:, 0] if p == 1 else Y
    params = nh.Params.from_natural(lam, ell, Z)
    d = DenseMean(kind, X, Y, Z, ell, lam)
    for name, ref in refs(d, s2).items():
        amp = {"amplitude": "learn"} if name == "sgpr" else {}
        obj = make_objective(name, X, y, kernel=kind, noise_variance=s2, mean="constant", **amp)
        assert rel(obj.value(params), ref) < 1e-9, name
        np.testing.assert_allclose(obj.last_intercept, d.c_gls, rtol=1e-9)
    ho = make_objective("holdout", X, y, kernel=kind, random_state=3, mean="constant")
    tr, va = ho.train_index, ho.val_index
    dt = DenseMean(kind, X[tr], Y[tr], Z, ell, lam)
    Rv = Y[va] - plain_kernel(kind, X[va], Z, ell) @ dt.alpha_c - dt.c[None, :]
    assert rel(ho.value(params), np.sum(Rv**2) / (len(va) * p)) < 1e-9
    np.testing.assert_allclose(ho.last_intercept, dt.c, rtol=1e-9)


def test_sgpr_profiled_amplitude_with_the_constant():
    """Joint optimum: c* does not depend on a, and a* = F_c / (n^2 p lam)."""
    X, Y, Z, ell = problem(n=100, p=2, seed=5)
    lam = 1e-2
    d = DenseMean("gaussian", X, Y + 1.5, Z, ell, lam)
    params = nh.Params.from_natural(lam, ell, Z)
    obj = make_objective("sgpr", X, Y + 1.5)  # mean="constant" is sgpr's default
    assert obj.mean == "constant"
    value = obj.value(params)
    a = d.Fc() / (d.n**2 * d.p * lam)
    assert rel(obj.last_amplitude, a) < 1e-9
    learn = make_objective("sgpr", X, Y + 1.5, amplitude="learn")
    assert rel(learn.value(params.replace(log_amplitude=np.log(a))), value) < 1e-10
    for f in (0.7, 1.4):  # a* is the minimizer
        assert learn.value(params.replace(log_amplitude=np.log(a * f))) > value


@pytest.mark.parametrize("p", [1, 3])
@pytest.mark.parametrize("name", EXACT)
def test_gradients_by_finite_differences(name, p):
    X, y, params = grad_problem(p=p, seed=7 + p)
    y = y + 2.5
    obj = make_objective(name, X, y, noise_variance=0.7, random_state=1, mean="constant")
    assert_directional(obj, params, n_dirs=3, seed=p)


@pytest.mark.parametrize("name", ["sgpr", "gcv", "loocv"])
def test_gradients_other_kernel_and_penalties(name):
    X, y, params = grad_problem(p=2, seed=11)
    for lam in (1e-4, 0.3):
        obj = make_objective(name, X, y, kernel="matern52", mean="constant", amplitude="learn") if name == "sgpr" \
            else make_objective(name, X, y, kernel="matern52", mean="constant")
        pr = params.replace(log_penalty=np.log(lam), log_amplitude=0.3)
        assert_directional(obj, pr, n_dirs=2, seed=3)
        if name == "sgpr":  # the amplitude coordinate too
            _, g = obj.value_and_grad(pr)
            h = 1e-5
            fd = (obj.value(pr.replace(log_amplitude=0.3 + h)) - obj.value(pr.replace(log_amplitude=0.3 - h))) / (2 * h)
            assert abs(fd - g.log_amplitude) < 1e-6 * max(1.0, abs(fd))


@pytest.mark.parametrize("name", EXACT)
def test_value_is_invariant_to_a_constant_shift_of_y(name):
    X, y, params = grad_problem(p=2, seed=3)
    a = make_objective(name, X, y, mean="constant", random_state=2)
    b = make_objective(name, X, y + np.array([4.0, -7.0]), mean="constant", random_state=2)
    va, (vb, gb) = a.value(params), b.value_and_grad(params)
    _, ga = a.value_and_grad(params)
    assert rel(vb, va) < 1e-9
    np.testing.assert_allclose(gb.centers, ga.centers, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(b.last_intercept - a.last_intercept, [4.0, -7.0], rtol=1e-9)
    zero = make_objective(name, X, y + 4.0, mean="zero", random_state=2)
    assert abs(zero.value(params) - va) > 1e-6 * abs(va)  # the zero mean is not shift invariant


def test_multi_output_has_one_constant_per_column():
    X, y, params = grad_problem(p=3, seed=2)
    y = y + np.array([1.0, 2.0, 3.0])
    obj = make_objective("gcv", X, y, mean="constant")
    obj.value(params)
    for j in range(3):
        single = make_objective("gcv", X, y[:, j], mean="constant")
        single.value(params)
        assert rel(single.last_intercept[0], obj.last_intercept[j]) < 1e-10


def test_mean_option_is_checked_and_defaults():
    X, y, _ = grad_problem()
    assert make_objective("sgpr", X, y).mean == "constant"
    for name in ["holdout", "loocv", "gcv", "creg", "prop"]:
        assert make_objective(name, X, y).mean == "zero"
        assert make_objective(name, X, y).last_intercept is None
    with pytest.raises(ValueError, match="mean must be one of"):
        make_objective("prop", X, y, mean="linear")
    with pytest.raises(TypeError, match="mean must be one of"):
        make_objective("gcv", X, y, mean=0)


def test_sgpr_is_the_titsias_bound_at_the_gls_constant():
    """-2/(np) (Titsias' bound of GP(c, a k)) - log 2 pi at c = c*; any other c gives a larger value."""
    from scipy.stats import multivariate_normal

    X, Y, Z, ell = problem(n=70, p=2, seed=6)
    Y = Y + np.array([2.0, -1.0])
    lam, a = 1e-2, 0.8
    d = DenseMean("gaussian", X, Y, Z, ell, lam)
    n, p = Y.shape

    def bound(c):
        cov = a * d.Knys + a * n * lam * np.eye(n)
        ll = sum(multivariate_normal(mean=np.full(n, c[j]), cov=cov).logpdf(Y[:, j]) for j in range(p))
        return -2.0 / (n * p) * (ll - p * d.T() / (2 * n * lam)) - np.log(2 * np.pi)

    obj = make_objective("sgpr", X, Y, amplitude="learn", mean="constant")
    value = obj.value(nh.Params.from_natural(lam, ell, Z, amplitude=a))
    assert abs(value - bound(d.c_gls)) < 1e-10 * max(1.0, abs(value))
    for dc in ([0.05, 0.0], [0.0, -0.05]):
        assert bound(d.c_gls + np.array(dc)) > value


# -- the fitted models ------------------------------------------------------------------------------
def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    y = np.where(X[:, 0] > 0.2, 2.0, -0.7) + 0.3 * np.sin(3 * X[:, 1]) + 0.05 * rng.normal(size=n) + 4.0
    return X, y


@pytest.mark.parametrize("solver", ["direct", "falkon"])
@pytest.mark.parametrize("normalize_y", [False, True])
def test_nystrom_krr_fits_the_gls_constant(solver, normalize_y):
    X, y = _data()
    Z, lam = X[:25] + 0.01, 1e-3
    kern = nh.GaussianKernel(np.array([0.6, 0.9]))
    model = nh.NystromKRR(kern, penalty=lam, centers=Z, solver=solver, tol=1e-10, maxiter=500,
                          fit_intercept=True, normalize_y=normalize_y).fit(X, y)
    d = DenseMean("gaussian", X, y[:, None], Z, kern.lengthscale, lam)
    tol = 1e-8 if solver == "direct" else 1e-5  # Falkon's K_mm carries a larger jitter (eps m)
    assert isinstance(model.intercept_, float)
    assert abs(model.intercept_ - d.c_gls[0]) < tol * abs(d.c_gls[0])
    if solver == "direct":
        pred = d.c_gls[0] + plain_kernel("gaussian", X, Z, kern.lengthscale) @ d.alpha_c[:, 0]
    else:  # the solver's own fit of y - c*
        c = model.intercept_
        pred = c + nh.NystromKRR(kern, penalty=lam, centers=Z, solver=solver, tol=1e-10,
                                 maxiter=500).fit(X, y - c).predict(X)
    np.testing.assert_allclose(model.predict(X), pred, rtol=1e-7, atol=1e-7)
    shifted = nh.NystromKRR(kern, penalty=lam, centers=Z, solver=solver, tol=1e-10, maxiter=500,
                            fit_intercept=True, normalize_y=normalize_y).fit(X, y + 10.0)
    np.testing.assert_allclose(shifted.predict(X), model.predict(X) + 10.0, rtol=tol)
    plain = nh.NystromKRR(kern, penalty=lam, centers=Z, solver=solver).fit(X, y)
    assert plain.intercept_ == 0.0
    normed = nh.NystromKRR(kern, penalty=lam, centers=Z, solver=solver, normalize_y=True).fit(X, y)
    assert normed.intercept_ == normed.y_mean_[0]


def test_intercept_multi_output_classifier_and_checks():
    X, y = _data()
    Y = np.stack([y, -2.0 * y + 1.0], axis=1)
    kw = dict(kernel=nh.GaussianKernel(0.7), penalty=1e-3, centers=20, random_state=0, solver="direct")
    m = nh.NystromKRR(fit_intercept=True, **kw).fit(X, Y)
    assert m.intercept_.shape == (2,)
    m1 = nh.NystromKRR(fit_intercept=True, **kw).fit(X, Y[:, 1])
    assert abs(m1.intercept_ - m.intercept_[1]) < 1e-10 * abs(m.intercept_[1])
    labels = np.where(y > 4.5, "hi", "lo")
    clf = nh.NystromKRRClassifier(fit_intercept=True, **kw).fit(X, labels)
    ref = nh.NystromKRRClassifier(**kw).fit(X, labels)
    assert isinstance(clf.intercept_, float) and ref.intercept_ == 0.0
    np.testing.assert_allclose(clf.decision_function(X), clf.intercept_ + ref.decision_function(X) * 0
                               + (clf.decision_function(X) - clf.intercept_), rtol=1e-12)
    assert clf.score(X, labels) > 0.9
    with pytest.raises(TypeError, match="fit_intercept"):
        nh.NystromKRR(fit_intercept="yes", **kw).fit(X, y)


def test_save_load_keeps_the_intercept(tmp_path):
    from nyhopt.io import load_model, save_model

    X, y = _data()
    m = nh.NystromKRR(nh.GaussianKernel(0.7), penalty=1e-3, centers=20, random_state=0, solver="direct",
                      fit_intercept=True, normalize_y=True).fit(X, y)
    save_model(tmp_path / "m.npz", m)
    back = load_model(tmp_path / "m.npz")
    assert back.intercept_ == m.intercept_ and back.fit_intercept
    np.testing.assert_array_equal(back.predict(X), m.predict(X))
    # a file written before intercept_ existed loads with y_mean (normalize_y) as its constant
    state = dict(np.load(tmp_path / "m.npz"))
    state.pop("intercept"), state.pop("fit_intercept"), state.pop("params")  # params came later still
    np.savez(tmp_path / "old.npz", **state)
    old = load_model(tmp_path / "old.npz")
    assert old.intercept_ == m.y_mean_[0] and not old.fit_intercept


@pytest.mark.parametrize("objective", ["sgpr", "gcv"])
def test_tune_keeps_the_tuned_constant(objective, tmp_path):
    """The final model's constant is the objective's c* at the best params (in y's units)."""
    from nyhopt.io import load_model, save_model

    X, y = _data(400, seed=1)
    opts = None if objective == "sgpr" else {"mean": "constant"}
    res = nh.tune(X, y, objective=objective, centers=15, epochs=8, progress=False, objective_options=opts,
                  validation=0.25)
    assert res.objective.mean == "constant" and res.model.fit_intercept
    res.objective.value(res.params)
    mu, sigma = res.model.y_mean_[0], res.model.y_scale_[0]
    c_std = res.objective.last_intercept[0]
    assert abs(res.model.intercept_ - (mu + sigma * c_std)) < 1e-8 * abs(res.model.intercept_)
    assert abs(c_std) > 1e-3  # not the sample mean: normalize_y's centring did not cancel it
    assert np.all(np.isfinite(res.history.validation_error))
    est = nh.HyperoptKRR(objective=objective, centers=15, epochs=4, objective_options=opts).fit(X, y)
    assert est.intercept_ == est.model_.intercept_
    save_model(tmp_path / "h.npz", est)
    back = load_model(tmp_path / "h.npz")
    assert back.intercept_ == est.intercept_
    np.testing.assert_allclose(back.predict(X), est.predict(X), rtol=1e-12)
    zero = nh.tune(X, y, objective="gcv", centers=15, epochs=2, progress=False)
    assert not zero.model.fit_intercept and zero.model.intercept_ == zero.model.y_mean_[0]


# -- GPU (skipped without one) ---------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not __import__("nyhopt.backend", fromlist=["gpu_available"]).gpu_available(),
                    reason="needs a CUDA GPU (CuPy)")
@pytest.mark.parametrize("name", EXACT + ["stoch-prop"])
def test_cupy_matches_numpy_with_the_constant(name):
    import cupy as cp

    X, y, params = grad_problem(n=200, p=2, m=20)
    y = y + 2.0
    opts = dict(mean="constant", random_state=0)
    if name == "stoch-prop":
        opts.update(tol=1e-10, maxiter=500, warm_start=False)
    ref = make_objective(name, X, y, **opts)
    v, g = ref.value_and_grad(params)
    obj = make_objective(name, cp.asarray(X), cp.asarray(y), **opts)
    vd, gd = obj.value_and_grad(nh.Params(params.log_penalty, params.log_lengthscale, cp.asarray(params.centers)))
    assert vd == pytest.approx(v, rel=1e-8)
    np.testing.assert_allclose(cp.asnumpy(gd.centers), g.centers, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(np.asarray(obj.last_intercept), ref.last_intercept, rtol=1e-8)


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("nyhopt.backend", fromlist=["gpu_available"]).gpu_available(),
                    reason="needs a CUDA GPU (CuPy)")
@pytest.mark.parametrize("solver", ["direct", "falkon"])
def test_cupy_model_keeps_the_intercept(solver):
    import cupy as cp

    X, y = _data()
    kw = dict(kernel=nh.GaussianKernel(0.7), penalty=1e-3, solver=solver, tol=1e-10, maxiter=500,
              fit_intercept=True, normalize_y=True)
    ref = nh.NystromKRR(centers=X[:20] + 0.01, **kw).fit(X, y)
    gpu = nh.NystromKRR(centers=cp.asarray(X[:20] + 0.01), **kw).fit(cp.asarray(X), cp.asarray(y))
    assert abs(gpu.intercept_ - ref.intercept_) < 1e-7 * abs(ref.intercept_)
    pred = gpu.predict(cp.asarray(X))
    assert isinstance(pred, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(pred), ref.predict(X), rtol=1e-7)
