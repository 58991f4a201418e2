"""The predictive variance (nyhopt.posterior) against the exact SGPR/DTC formulas with n x n algebra."""
from __future__ import annotations

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.estimator import NotFittedError
from nyhopt.io import load_model, save_model
from nyhopt.posterior import direct_fit, latent_variance
from nyhopt.solvers import jitter

KERNELS = [
    nh.GaussianKernel(0.8),
    nh.LaplacianKernel(1.5),
    nh.MaternKernel(1.2, nu=1.5),
    nh.MaternKernel(1.0, nu=2.5),
]


def problem(n=120, d=2, m=15, p=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d))
    Y = np.sin(2 * X[:, :1]) + X[:, 1:2] ** 2 + 0.1 * rng.normal(size=(n, p))
    Xt = rng.uniform(-1.2, 1.2, (30, d))
    return X, (Y[:, 0] if p == 1 else Y), X[:m].copy(), Xt


def dense_reference(kernel, X, Y, Z, Xt, lam):
    """Exact DTC/SGPR predictive with n x n algebra: mean, latent variance, amplitude a* (p = 1)."""
    n = X.shape[0]
    Kmm = nh.ops.kernel_matrix(kernel, Z) + jitter(np.float64) * np.eye(Z.shape[0])
    Knm = nh.ops.kernel_matrix(kernel, X, Z)
    Ktm = nh.ops.kernel_matrix(kernel, Xt, Z)
    Qnn = Knm @ np.linalg.solve(Kmm, Knm.T)
    Qtn = Ktm @ np.linalg.solve(Kmm, Knm.T)
    Sn = Qnn + n * lam * np.eye(n)
    Y2 = Y.reshape(n, -1)
    mean = Qtn @ np.linalg.solve(Sn, Y2)
    a = float(np.sum(Y2 * np.linalg.solve(Sn, Y2))) / Y2.size  # Tr(Y^T S_n^-1 Y) / (n p)
    var = 1.0 - np.einsum("ij,ji->i", Qtn, np.linalg.solve(Sn, Qtn.T))
    cov = nh.ops.kernel_matrix(kernel, Xt, Xt) - Qtn @ np.linalg.solve(Sn, Qtn.T)
    return mean, a * var, a, a * cov


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: repr(k))
def test_mean_and_std_match_the_dense_reference(kernel):
    X, y, Z, Xt = problem()
    lam = 1e-3
    mean_ref, var_ref, a_ref, cov_ref = dense_reference(kernel, X, y, Z, Xt, lam)
    model = nh.NystromKRR(kernel, penalty=lam, centers=Z, solver="direct").fit(X, y)
    assert model.amplitude_ == pytest.approx(a_ref, rel=1e-10)
    assert model.noise_variance_ == pytest.approx(a_ref * len(X) * lam, rel=1e-10)
    mean, std = model.predict(Xt, return_std=True, include_noise=False)
    np.testing.assert_allclose(mean, mean_ref[:, 0], rtol=0, atol=1e-8)
    np.testing.assert_allclose(std, np.sqrt(var_ref), rtol=0, atol=1e-8)
    _, std_y = model.predict(Xt, return_std=True)
    np.testing.assert_allclose(std_y, np.sqrt(var_ref + a_ref * len(X) * lam), rtol=0, atol=1e-8)
    _, cov = model.predict(Xt, return_cov=True, include_noise=False)
    np.testing.assert_allclose(cov, cov_ref, rtol=0, atol=1e-8)
    _, cov_y = model.predict(Xt, return_cov=True)
    np.testing.assert_allclose(cov_y, cov_ref + a_ref * len(X) * lam * np.eye(len(Xt)), rtol=0, atol=1e-8)


def test_falkon_and_direct_give_the_same_variance_model():
    X, y, Z, Xt = problem(n=300, seed=1)
    kw = dict(kernel=nh.GaussianKernel(0.7), penalty=1e-4, centers=Z)
    d = nh.NystromKRR(solver="direct", **kw).fit(X, y)
    f = nh.NystromKRR(solver="falkon", tol=1e-12, maxiter=500, **kw).fit(X, y)
    np.testing.assert_allclose(f.predict(Xt, return_std=True)[1], d.predict(Xt, return_std=True)[1], rtol=1e-10)
    assert f.amplitude_ == pytest.approx(d.amplitude_, rel=1e-10)


def test_normalize_y_multi_output_and_given_amplitude():
    X, Y, Z, Xt = problem(p=2, seed=2)
    Y = Y * np.array([1.0, 50.0]) + np.array([3.0, -7.0])
    k = nh.MaternKernel(1.0, nu=2.5)
    model = nh.NystromKRR(k, penalty=1e-3, centers=Z, solver="direct", normalize_y=True).fit(X, Y)
    mean, std = model.predict(Xt, return_std=True)
    assert mean.shape == std.shape == (30, 2)
    # the columns share the amplitude: std scales with each column's y_scale_
    np.testing.assert_allclose(std[:, 1] / std[:, 0], model.y_scale_[1] / model.y_scale_[0], rtol=1e-12)
    Ys = (Y - model.y_mean_) / model.y_scale_
    _, var_ref, a_ref, _ = dense_reference(k, X, Ys, Z, Xt, 1e-3)
    assert model.amplitude_ == pytest.approx(a_ref, rel=1e-10)
    np.testing.assert_allclose(std[:, 0], model.y_scale_[0] * np.sqrt(var_ref + model.noise_variance_), atol=1e-8)
    _, cov = model.predict(Xt, return_cov=True)
    assert cov.shape == (30, 30, 2)
    np.testing.assert_allclose(np.sqrt(np.diagonal(cov, axis1=0, axis2=1).T), std, rtol=1e-10)
    fixed = nh.NystromKRR(k, penalty=1e-3, centers=Z, solver="direct", normalize_y=True, amplitude=2.0).fit(X, Y)
    assert fixed.amplitude_ == 2.0 and fixed.noise_variance_ == pytest.approx(2.0 * len(X) * 1e-3)
    np.testing.assert_array_equal(fixed.predict(Xt), model.predict(Xt))


def test_huge_targets_keep_their_amplitude():
    X, y, Z, Xt = problem(seed=3)
    kw = dict(kernel=nh.GaussianKernel(0.8), penalty=1e-3, centers=Z, solver="direct")
    small = nh.NystromKRR(**kw).fit(X, y)
    big = nh.NystromKRR(**kw).fit(X, y * 1e150)  # solved on y / 2^e, the amplitude scaled back
    assert big.amplitude_ == pytest.approx(small.amplitude_ * 1e300, rel=1e-10)
    np.testing.assert_allclose(big.predict(Xt, return_std=True)[1], small.predict(Xt, return_std=True)[1] * 1e150,
                               rtol=1e-10)
    huge = nh.NystromKRR(**kw).fit(X, y * 1e200)  # a variance of 1e400: no error bars, the mean as before
    assert huge.variance_model_ is None and np.all(np.isfinite(huge.predict(Xt)))
    with pytest.raises(ValueError, match="overflows float64; scale y"):
        huge.predict(Xt, return_std=True)


def test_float32_is_close_to_float64():
    X, y, Z, Xt = problem(n=200, seed=4)
    kw = dict(kernel=nh.GaussianKernel(0.8), penalty=1e-3, solver="direct")
    m64 = nh.NystromKRR(centers=Z, **kw).fit(X, y)
    m32 = nh.NystromKRR(centers=Z.astype(np.float32), **kw).fit(X.astype(np.float32), y.astype(np.float32))
    mean, std = m32.predict(Xt.astype(np.float32), return_std=True)
    assert mean.dtype == std.dtype == np.float32
    np.testing.assert_allclose(std, m64.predict(Xt, return_std=True)[1], rtol=2e-3)


def test_variance_is_largest_far_from_the_data_and_the_prior_there():
    X, y, Z, _ = problem(seed=5)
    model = nh.NystromKRR(nh.GaussianKernel(0.3), penalty=1e-3, centers=Z, solver="direct").fit(X, y)
    far = np.full((1, 2), 50.0)
    _, std = model.predict(far, return_std=True, include_noise=False)
    assert std[0] == pytest.approx(np.sqrt(model.amplitude_), rel=1e-12)  # k(x, Z) = 0: the prior
    _, near = model.predict(X[:20], return_std=True, include_noise=False)
    assert np.all(near < std[0])


def test_classifier_decision_std():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(200, 2))
    y2 = np.where(X[:, 0] > 0, "a", "b")
    y3 = np.digitize(X[:, 0], [-0.5, 0.5])
    for y, shape in ((y2, (7,)), (y3, (7, 3))):
        clf = nh.NystromKRRClassifier(penalty=1e-3, centers=20, solver="direct", random_state=0).fit(X, y)
        scores, std = clf.decision_function(X[:7], return_std=True)
        assert scores.shape == std.shape == shape and np.all(std > 0)
        np.testing.assert_array_equal(scores, clf.decision_function(X[:7]))
        _, std_y = clf.decision_function(X[:7], return_std=True, include_noise=True)
        assert np.all(std_y > std)
    h = nh.HyperoptKRRClassifier(centers=15, epochs=3, random_state=0).fit(X, y2)
    assert h.decision_function(X[:4], return_std=True)[1].shape == (4,)


def test_hyperopt_amplitude_sgpr_and_closed_form():
    X, y, _, Xt = problem(n=150, seed=7)
    sg = nh.HyperoptKRR(objective="sgpr", centers=15, epochs=5, patience=None, random_state=0).fit(X, y)
    assert sg.amplitude_ == sg.params_.amplitude == sg.model_.amplitude_
    assert sg.noise_variance_ == pytest.approx(sg.amplitude_ * len(X) * sg.params_.penalty)
    mean, std = sg.predict(Xt, return_std=True)
    assert mean.shape == std.shape == (30,)
    gcv = nh.HyperoptKRR(objective="gcv", centers=15, epochs=5, patience=None, random_state=0).fit(X, y)
    assert gcv.params_.amplitude == 1.0 and gcv.amplitude_ != 1.0  # SGPR's closed form at the tuned point
    Xs = (X - gcv.x_mean_) / gcv.x_scale_  # the model's coordinates (standardize=True by default)
    ref = nh.NystromKRR(gcv.model_.kernel_, penalty=gcv.params_.penalty, centers=gcv.model_.centers_,
                        solver="direct", normalize_y=True).fit(Xs, y)
    assert gcv.amplitude_ == pytest.approx(ref.amplitude_, rel=1e-12)


def test_save_and_load_keep_the_variance(tmp_path):
    X, y, Z, Xt = problem(seed=8)
    model = nh.NystromKRR(nh.LaplacianKernel(1.0), penalty=1e-3, centers=Z, normalize_y=True).fit(X, y)
    loaded = load_model(save_model(tmp_path / "m.npz", model))
    assert loaded.amplitude_ == model.amplitude_ and loaded.noise_variance_ == model.noise_variance_
    np.testing.assert_array_equal(loaded.predict(Xt, return_std=True)[1], model.predict(Xt, return_std=True)[1])
    no_var = nh.NystromKRR(nh.LaplacianKernel(1.0), penalty=1e-3, centers=Z, predictive_variance=False).fit(X, y)
    assert no_var.amplitude_ is None and no_var.variance_model_ is None
    path = save_model(tmp_path / "n.npz", no_var)
    with pytest.raises(ValueError, match="no variance model"):
        load_model(path).predict(Xt, return_std=True)
    with np.load(tmp_path / "m.npz") as f:
        state = {k: f[k] for k in f.files}
    from nyhopt.errors import DataError

    for key, bad in (("var_chol", np.ones((15, 15))), ("var_chol", np.eye(3)), ("var_n_lam", np.array(-1.0)),
                     ("var_amplitude", np.array(np.nan))):
        np.savez(tmp_path / "bad.npz", **dict(state, **{key: bad}))
        with pytest.raises(DataError, match=key):
            load_model(tmp_path / "bad.npz")


def test_bad_input():
    X, y, Z, Xt = problem(seed=9)
    model = nh.NystromKRR(nh.GaussianKernel(1.0), penalty=1e-3, centers=Z).fit(X, y)
    with pytest.raises(TypeError, match="return_std"):
        model.predict(Xt, return_std="yes")
    with pytest.raises(TypeError, match="return_cov"):
        model.predict(Xt, return_cov=1)
    with pytest.raises(TypeError, match="include_noise"):
        model.predict(Xt, return_std=True, include_noise=None)
    with pytest.raises(ValueError, match="at most one"):
        model.predict(Xt, return_std=True, return_cov=True)
    with pytest.raises(ValueError, match="features"):
        model.predict(Xt[:, :1], return_std=True)
    no_var = nh.NystromKRR(nh.GaussianKernel(1.0), penalty=1e-3, centers=Z, predictive_variance=False).fit(X, y)
    with pytest.raises(ValueError, match="predictive_variance=True"):
        no_var.predict(Xt, return_std=True)
    assert no_var.predict(Xt).shape == (30,)
    with pytest.raises(TypeError, match="predictive_variance"):
        nh.NystromKRR(predictive_variance="yes").fit(X, y)
    with pytest.raises(ValueError, match="amplitude"):
        nh.NystromKRR(amplitude=-1.0).fit(X, y)
    with pytest.raises(NotFittedError):
        nh.NystromKRR().predict(Xt, return_std=True)
    Xc = Xt.copy()
    model.predict(Xc, return_std=True)
    np.testing.assert_array_equal(Xc, Xt)  # the input is not modified


def test_latent_variance_blocks_do_not_change_it():
    X, y, Z, Xt = problem(seed=10)
    alpha, vm = direct_fit(nh.GaussianKernel(0.8), X, Z, y, 1e-3)
    whole = latent_variance(nh.GaussianKernel(0.8), Xt, Z, vm)
    with nh.memory_budget(4096):  # a few rows per block
        np.testing.assert_allclose(latent_variance(nh.GaussianKernel(0.8), Xt, Z, vm), whole, rtol=1e-13)


@pytest.mark.parametrize("solver", ["direct", "falkon"])
def test_error_bars_with_an_intercept_are_those_of_the_centred_targets(solver):
    """fit_intercept: the amplitude is that of y - c* (the constant profiled), not of [y | 1]."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 3))
    y = 5.0 + np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)
    kw = dict(kernel=nh.GaussianKernel(1.0), penalty=1e-3, centers=X[:40], solver=solver, tol=1e-12,
              maxiter=500)
    with_c = nh.NystromKRR(fit_intercept=True, **kw).fit(X, y)
    centred = nh.NystromKRR(**kw).fit(X, y - with_c.intercept_)
    assert with_c.amplitude_ == pytest.approx(centred.amplitude_, rel=1e-8)
    Xt = rng.normal(size=(50, 3))
    mean, std = with_c.predict(Xt, return_std=True)
    mean0, std0 = centred.predict(Xt, return_std=True)
    np.testing.assert_allclose(mean, mean0 + with_c.intercept_, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(std, std0, rtol=1e-8)
