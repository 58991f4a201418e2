"""held_out_path: every (size, penalty) against a NystromKRR fit at those centers and that penalty (float64)."""
import numpy as np
import pytest

import nyhopt as nh
from nyhopt.errors import IllConditionedError
from nyhopt.solvers.direct import products_in
from nyhopt.solvers.penalty_path import held_out_path


def _data(n=260, n_val=90, d=3, p=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, size=(n + n_val, d))
    F = np.stack([np.sin(2 * X[:, 0] + k) + X[:, 1] ** 2 for k in range(p)], axis=1)
    Y = 3.0 + F + 0.1 * rng.normal(size=F.shape)
    return X[:n], Y[:n], X[n:], Y[n:]


def _reference(kernel, X, Z, Y, X_val, Y_val, penalty, fit_intercept):
    model = nh.NystromKRR(kernel=kernel, penalty=penalty, centers=Z, solver="direct", normalize_y=True,
                          fit_intercept=fit_intercept, predictive_variance=False).fit(X, Y)
    pred = np.asarray(model.predict(X_val)).reshape(Y_val.shape)
    return float(np.mean((Y_val - pred) ** 2))


@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("p", [1, 2])
def test_every_size_and_penalty_matches_a_fit(fit_intercept, p):
    X, Y, Xv, Yv = _data(p=p)
    Z = X[:30]
    kernel = nh.GaussianKernel(np.array([0.7, 0.9, 1.3]))
    penalties, sizes = [3e-2, 1e-3, 1e-5], [4, 17, 30]
    y, yv = (Y[:, 0], Yv[:, 0]) if p == 1 else (Y, Yv)
    got = held_out_path(kernel, X, Z, y, Xv, yv, penalties, sizes, fit_intercept=fit_intercept)
    assert got.shape == (3, 3)
    for i, s in enumerate(sizes):
        for j, lam in enumerate(penalties):
            want = _reference(kernel, X, Z[:s], Y, Xv, Yv, lam, fit_intercept)
            assert got[i, j] == pytest.approx(want, rel=1e-9, abs=1e-13)


def test_float32_products_stay_close():
    X, Y, Xv, Yv = _data(n=600, seed=1)
    Z = X[:50]
    kernel = nh.GaussianKernel(0.8)
    exact = held_out_path(kernel, X, Z, Y, Xv, Yv, [1e-2, 1e-4], [20, 50])
    with products_in(np.float32):
        rounded = held_out_path(kernel, X, Z, Y, Xv, Yv, [1e-2, 1e-4], [20, 50])
    np.testing.assert_allclose(rounded, exact, rtol=1e-3)


def test_inputs_are_not_modified():
    X, Y, Xv, Yv = _data()
    Z = X[:20].copy()
    copies = [a.copy() for a in (X, Y, Xv, Yv, Z)]
    held_out_path(nh.GaussianKernel(1.0), X, Z, Y, Xv, Yv, [1e-3], [20], fit_intercept=True)
    for a, b in zip((X, Y, Xv, Yv, Z), copies):
        np.testing.assert_array_equal(a, b)


def test_a_failed_factorization_gives_nan(monkeypatch):
    import nyhopt.solvers.penalty_path as path

    calls = []

    def fails_second(M, xp, name="matrix", overwrite=False):
        calls.append(name)
        if len(calls) == 2:
            raise IllConditionedError("not positive definite")
        return real(M, xp, name, overwrite)

    real = path.cholesky_upper
    monkeypatch.setattr(path, "cholesky_upper", fails_second)
    X, Y, Xv, Yv = _data()
    err = held_out_path(nh.GaussianKernel(1.0), X, X[:10], Y, Xv, Yv, [1e-2, 1e-3, 1e-4], [5, 10])
    assert np.isfinite(err[:, 0]).all() and np.isnan(err[:, 1]).all() and np.isfinite(err[:, 2]).all()


@pytest.mark.parametrize("kw, match", [
    (dict(penalties=[]), "penalties must not be empty"),
    (dict(penalties=[0.0]), "penalties must be finite and > 0"),
    (dict(sizes=[0]), "sizes must be in 1..20"),
    (dict(sizes=[21]), "sizes must be in 1..20"),
    (dict(Y_val=np.zeros((90, 2))), "Y_val has 2 output"),
    (dict(X_val=np.zeros((90, 2))), "X_val"),
])
def test_bad_input_names_the_argument(kw, match):
    X, Y, Xv, Yv = _data()
    args = dict(X=X, Z=X[:20], Y=Y, X_val=Xv, Y_val=Yv, penalties=[1e-3], sizes=[20])
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        held_out_path(nh.GaussianKernel(1.0), **args)


def test_centers_that_cannot_be_factorized_raise():
    X, Y, Xv, Yv = _data()
    Z = np.full((4, 3), np.inf)
    with pytest.raises(ValueError):
        held_out_path(nh.GaussianKernel(1.0), X, Z, Y, Xv, Yv, [1e-3], [4])
