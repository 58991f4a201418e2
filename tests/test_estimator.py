"""Tests of NystromKRR and NystromKRRClassifier (scikit-learn's own checks: test_sklearn_checks.py)."""
from __future__ import annotations

import copy
import pickle
import warnings

import numpy as np
import pytest

from conftest import DATA_DIR
import nyhopt as nh
from nyhopt.backend import gpu_available
from nyhopt.estimator import NotFittedError
from nyhopt.solvers import ConvergenceWarning, FalkonResult



def closed_form(kernel, X, Z, Y, lam):
    """alpha = (Knm^T Knm + n lam Kmm)^{-1} Knm^T Y as a stable least-squares solve (float64)."""
    n, m = len(X), len(Z)
    Y = np.asarray(Y, np.float64).reshape(n, -1)
    w, V = np.linalg.eigh(kernel(Z))
    R = (V * np.sqrt(np.clip(w, 0, None))).T
    aug = np.vstack([kernel(X, Z), np.sqrt(n * lam) * R])
    return np.linalg.lstsq(aug, np.vstack([Y, np.zeros((m, Y.shape[1]))]), rcond=None)[0]


def rel_err(a, b):
    return np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b))


@pytest.fixture(scope="module")
def toy():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1.5, 1.5, size=(400, 3))
    y = np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.05 * rng.normal(size=400)
    return X, y


@pytest.fixture(scope="module")
def energy():
    if not (DATA_DIR / "energy").exists():
        pytest.skip(f"real data not found at {DATA_DIR} (set NYHOPT_DATA)")
    from nyhopt.datasets import load_dataset

    return load_dataset("energy", data_dir=DATA_DIR, seed=0)


# ----------------------------------------------------------------------------- regression


@pytest.mark.parametrize("solver", ["direct", "falkon"])
def test_regressor_matches_closed_form_on_real_data(energy, solver):
    X, y = energy.X_train, energy.y_train
    k = nh.GaussianKernel(2.0)
    model = nh.NystromKRR(k, penalty=1e-5, centers=80, solver=solver, tol=1e-11, maxiter=500, random_state=0)
    model.fit(X, y)
    ref = closed_form(k, X, model.centers_, y, 1e-5)
    Xt = energy.X_test
    pred = model.predict(Xt)
    assert pred.shape == (len(Xt),) and model.alpha_.shape == (80,)
    tol = 1e-8 if solver == "direct" else 1e-5
    assert rel_err(pred, k(Xt, model.centers_) @ ref[:, 0]) < tol
    assert model.converged_
    assert (model.solve_ is None) == (solver == "direct")
    if solver == "falkon":
        assert isinstance(model.solve_, FalkonResult) and model.solve_.cg.residual_norms[-1] <= 1e-11
    # a useful model: test NRMSE of the paper's metric well below the constant predictor's
    assert energy.error(pred) < 0.3 * energy.error(np.zeros_like(pred))


def test_multi_output_equals_separate_fits(toy):
    X, y = toy
    Y = np.column_stack([y, np.cos(X[:, 0])])
    kw = dict(kernel=nh.GaussianKernel(0.8), penalty=1e-4, centers=40, random_state=1, tol=1e-10, maxiter=300)
    both = nh.NystromKRR(**kw).fit(X, Y)
    assert both.alpha_.shape == (40, 2) and both.predict(X[:5]).shape == (5, 2)
    for j in range(2):
        one = nh.NystromKRR(**kw).fit(X, Y[:, j])
        np.testing.assert_allclose(both.predict(X)[:, j], one.predict(X), rtol=1e-7, atol=1e-8)
    assert 0.9 < both.score(X, Y) <= 1.0


def test_score_is_r2(toy):
    X, y = toy
    model = nh.NystromKRR(nh.GaussianKernel(0.8), penalty=1e-4, centers=40, random_state=0).fit(X, y)
    pred = model.predict(X)
    r2 = 1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2)
    assert model.score(X, y) == pytest.approx(r2, rel=1e-12)
    w = np.linspace(0.5, 2, len(y))
    mu = np.average(y, weights=w)
    r2w = 1 - np.sum(w * (y - pred) ** 2) / np.sum(w * (y - mu) ** 2)
    assert model.score(X, y, sample_weight=w) == pytest.approx(r2w, rel=1e-12)


def test_score_with_another_number_of_outputs_says_so(toy):
    # it failed with NumPy's "cannot reshape array of size 800 into shape (400,1)"
    X, y = toy
    one = nh.NystromKRR(centers=10, random_state=0).fit(X, y)
    two = nh.NystromKRR(centers=10, random_state=0).fit(X, np.c_[y, -y])
    with pytest.raises(ValueError, match=r"^y has 2 output column\(s\) but the model predicts 1$"):
        one.score(X, np.c_[y, -y])
    with pytest.raises(ValueError, match=r"^y has 1 output column\(s\) but the model predicts 2$"):
        two.score(X, y)
    assert one.score(X, y[:, None]) == one.score(X, y)


def test_centers_int_seeded_and_array(toy):
    X, y = toy
    a = nh.NystromKRR(centers=30, random_state=3).fit(X, y)
    b = nh.NystromKRR(centers=30, random_state=3).fit(X, y)
    c = nh.NystromKRR(centers=30, random_state=4).fit(X, y)
    np.testing.assert_array_equal(a.centers_, b.centers_)
    assert not np.array_equal(a.centers_, c.centers_)
    # the centers are distinct training points
    rows = {tuple(r) for r in X}
    assert all(tuple(r) in rows for r in a.centers_) and len({tuple(r) for r in a.centers_}) == 30
    # an array of centers is used as given, copied, and may come as a list
    Z = np.random.default_rng(0).normal(size=(12, 3))
    given = nh.NystromKRR(centers=Z).fit(X, y)
    np.testing.assert_array_equal(given.centers_, Z)
    assert given.centers_ is not Z
    from_list = nh.NystromKRR(centers=Z.tolist()).fit(X, y)
    np.testing.assert_allclose(from_list.predict(X), given.predict(X), rtol=1e-12)
    gen = nh.NystromKRR(centers=30, random_state=np.random.default_rng(3)).fit(X, y)
    assert gen.centers_.shape == (30, 3)


def test_kernel_param_forms(toy):
    X, y = toy
    default = nh.NystromKRR(centers=20, random_state=0).fit(X, y)
    assert isinstance(default.kernel_, nh.GaussianKernel) and default.kernel_.lengthscale == 1.0
    assert default.kernel is None
    named = nh.NystromKRR(kernel="laplacian", centers=20, random_state=0).fit(X, y)
    assert isinstance(named.kernel_, nh.LaplacianKernel)
    k = nh.MaternKernel(lengthscale=np.array([0.5, 1.0, 2.0]), nu=2.5)
    model = nh.NystromKRR(kernel=k, centers=20, random_state=0).fit(X, y)
    assert model.kernel_ == k and model.kernel_ is not k
    ref = nh.NystromKRR(kernel=nh.GaussianKernel(1.0), centers=20, random_state=0).fit(X, y)
    np.testing.assert_array_equal(default.predict(X), ref.predict(X))


def test_float32_inputs(toy):
    X, y = toy
    kw = dict(kernel=nh.GaussianKernel(0.8), penalty=1e-3, centers=40, random_state=0, tol=1e-6)
    m64 = nh.NystromKRR(**kw).fit(X, y)
    m32 = nh.NystromKRR(**kw).fit(X.astype(np.float32), y.astype(np.float32))
    p32 = m32.predict(X.astype(np.float32))
    assert p32.dtype == np.float32 and m32.centers_.dtype == np.float32
    assert rel_err(p32, m64.predict(X)) < 1e-3
    ints = nh.NystromKRR(centers=10, random_state=0).fit(np.arange(60).reshape(20, 3), np.arange(20))
    assert ints.predict(np.zeros((1, 3), dtype=int)).dtype == np.float64


def test_convergence_warning_and_flag(toy):
    X, y = toy
    model = nh.NystromKRR(nh.GaussianKernel(0.5), penalty=1e-8, centers=100, maxiter=2, tol=1e-12, random_state=0)
    with pytest.warns(ConvergenceWarning, match="maxiter") as rec:
        model.fit(X, y)
    assert rec[0].filename == __file__  # points at the caller's fit()
    assert model.converged_ is False and model.solve_.cg.iterations == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nh.NystromKRR(penalty=1e-3, centers=20, maxiter=200, random_state=0).fit(X, y)


def test_params_clone_pickle(toy):
    X, y = toy
    k = nh.GaussianKernel(0.7)
    model = nh.NystromKRR(kernel=k, penalty=1e-3, centers=20, solver="direct", random_state=5)
    params = model.get_params()
    assert params["kernel__lengthscale"] == 0.7 and params["penalty"] == 1e-3
    assert set(model.get_params(deep=False)) == {"kernel", "penalty", "centers", "solver", "maxiter", "tol",
                                                 "random_state", "normalize_y", "fit_intercept",
                                                 "predictive_variance", "amplitude"}
    model.set_params(kernel__lengthscale=0.9, penalty=1e-2)
    assert k.lengthscale == 0.9 and model.penalty == 1e-2
    with pytest.raises(ValueError, match="invalid parameter 'alpha'"):
        model.set_params(alpha=1.0)
    sk_base = pytest.importorskip("sklearn.base")
    twin = sk_base.clone(model)
    assert twin.get_params(deep=False)["kernel"] is not k and twin.kernel == k
    model.fit(X, y)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(X), model.predict(X))
    deep = copy.deepcopy(model)
    np.testing.assert_array_equal(deep.predict(X), model.predict(X))
    assert "NystromKRR(" in repr(model) and "solver='direct'" in repr(model)
    assert "centers=<array of shape (3, 2)>" in repr(nh.NystromKRR(centers=np.zeros((3, 2))))


def test_inputs_not_modified(toy):
    X, y = toy
    X, y = X.copy(), y.copy()
    Z = X[:10].copy()
    for a in (X, y, Z):
        a.flags.writeable = False
    nh.NystromKRR(centers=Z).fit(X, y).predict(X)
    nh.NystromKRRClassifier(centers=Z).fit(X, y > 0).predict(X)


# ----------------------------------------------------------------------------- bad input


def test_bad_input_errors_name_the_argument(toy):
    X, y = toy
    model = nh.NystromKRR(centers=10)
    Xn = X.copy()
    Xn[2, 1] = np.nan
    with pytest.raises(ValueError, match="X contains NaN or infinity"):
        model.fit(Xn, y)
    Xi = X.copy()
    Xi[0, 0] = np.inf
    with pytest.raises(ValueError, match="X contains NaN or infinity"):
        model.fit(Xi, y)
    yn = y.copy()
    yn[5] = np.nan
    with pytest.raises(ValueError, match="y contains NaN or infinity"):
        model.fit(X, yn)
    with pytest.raises(ValueError, match="y has 399 rows but X has 400"):
        model.fit(X, y[:-1])
    with pytest.warns(UserWarning, match="centers=500 is more than the 400 training rows: using all 400"):
        assert nh.NystromKRR(centers=500, penalty=1e-3).fit(X, y).centers_.shape == (400, X.shape[1])
    with pytest.raises(ValueError, match="centers must be >= 1"):
        nh.NystromKRR(centers=0).fit(X, y)
    for bad in (0.0, -1.0, np.nan):
        with pytest.raises(ValueError, match="penalty"):
            nh.NystromKRR(penalty=bad, centers=10).fit(X, y)
    with pytest.raises(ValueError, match="centers has 2 features, expected 3"):
        nh.NystromKRR(centers=np.zeros((5, 2))).fit(X, y)
    with pytest.raises(ValueError, match="solver"):
        nh.NystromKRR(solver="cholesky", centers=10).fit(X, y)
    with pytest.raises(ValueError, match="maxiter"):
        nh.NystromKRR(maxiter=0, centers=10).fit(X, y)
    with pytest.raises(ValueError, match="tol"):
        nh.NystromKRR(tol=-1.0, centers=10).fit(X, y)
    with pytest.raises(ValueError, match="lengthscale"):
        nh.NystromKRR(kernel=nh.GaussianKernel([1.0, 2.0]), centers=10).fit(X, y)
    with pytest.raises(TypeError, match="kernel"):
        nh.NystromKRR(kernel=3, centers=10).fit(X, y)
    with pytest.raises(TypeError, match="centers"):
        nh.NystromKRR(centers=2.5).fit(X, y)
    with pytest.raises(ValueError, match="requires y"):
        model.fit(X, None)
    with pytest.raises(ValueError, match="X must be 2-D"):
        model.fit(X[:, 0], y)


def test_predict_before_fit_and_feature_mismatch(toy):
    X, y = toy
    for est in (nh.NystromKRR(centers=10), nh.NystromKRRClassifier(centers=10)):
        with pytest.raises(NotFittedError, match="not fitted yet"):
            est.predict(X)
        assert isinstance(NotFittedError("x"), ValueError) and isinstance(NotFittedError("x"), AttributeError)
        est.fit(X, y > 0)
        with pytest.raises(ValueError, match="X has 2 features, but .* is expecting 3 features"):
            est.predict(X[:, :2])
        with pytest.raises(ValueError, match="X contains NaN"):
            est.predict(np.full((2, 3), np.nan))


def test_not_fitted_error_is_sklearns_when_sklearn_is_loaded(toy):
    sk_exc = pytest.importorskip("sklearn.exceptions")
    with pytest.raises(sk_exc.NotFittedError):
        nh.NystromKRR().predict(toy[0])


# ----------------------------------------------------------------------------- classification


def test_binary_classifier_is_regression_on_pm1(toy):
    X, y = toy
    labels = np.where(y > 0, "pos", "neg")
    kw = dict(kernel=nh.GaussianKernel(0.8), penalty=1e-4, centers=40, random_state=0, solver="direct")
    clf = nh.NystromKRRClassifier(**kw).fit(X, labels)
    reg = nh.NystromKRR(**kw).fit(X, np.where(labels == "pos", 1.0, -1.0))  # classes_ = [neg, pos]
    assert clf.classes_.tolist() == ["neg", "pos"]
    np.testing.assert_allclose(clf.decision_function(X), reg.predict(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(clf.predict(X), np.where(reg.predict(X) > 0, "pos", "neg"))
    assert clf.score(X, labels) == pytest.approx(np.mean(clf.predict(X) == labels))
    assert clf.score(X, labels) > 0.9 and clf.alpha_.shape == (40,)


def test_multiclass_classifier_is_regression_on_one_hot(toy):
    X, y = toy
    cls = np.digitize(y, [-0.5, 0.5]) * 10 + 1  # labels 1, 11, 21
    kw = dict(kernel=nh.GaussianKernel(0.8), penalty=1e-4, centers=40, random_state=0, tol=1e-10, maxiter=300)
    clf = nh.NystromKRRClassifier(**kw).fit(X, cls)
    onehot = (cls[:, None] == np.array([1, 11, 21])[None, :]).astype(float)
    reg = nh.NystromKRR(**kw).fit(X, onehot)
    assert clf.classes_.tolist() == [1, 11, 21] and clf.alpha_.shape == (40, 3)
    scores = clf.decision_function(X)
    np.testing.assert_allclose(scores, reg.predict(X), rtol=1e-7, atol=1e-8)
    np.testing.assert_array_equal(clf.predict(X), np.array([1, 11, 21])[np.argmax(scores, axis=1)])
    assert clf.score(X, cls) > 0.8


def test_classifier_bad_targets(toy):
    X, y = toy
    with pytest.raises(ValueError, match="only one class"):
        nh.NystromKRRClassifier(centers=10).fit(X, np.ones(len(X)))
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        nh.NystromKRRClassifier(centers=10).fit(X, y)
    with pytest.raises(ValueError, match="y has 3 rows but X has 400"):
        nh.NystromKRRClassifier(centers=10).fit(X, [0, 1, 0])


# ----------------------------------------------------------------------------- memory


_MEMORY_PROBE = """
import sys
import tracemalloc
import numpy as np
import nyhopt as nh

m, budget = int(sys.argv[1]), int(sys.argv[2])
for n in map(int, sys.argv[3:]):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 4))
    y = np.sin(X[:, 0])
    model = nh.NystromKRR(nh.GaussianKernel(1.0), penalty=1e-4, centers=m, tol=1e-6, random_state=0)
    with nh.memory_budget(budget), nh.cache_budget(0):
        model.fit(X, y).predict(X)  # warm up: lazy imports, Numba's first compilation of the threaded paths
        tracemalloc.start()
        model.fit(X, y)
        model.predict(X)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    print(n, int(model.converged_), peak)
"""


def test_falkon_fit_memory_is_bounded_by_the_block_budget():
    """n x m would be 16 MB (n = 10^4, m = 200); streaming with a 1 MiB block budget, the fit stays far below.

    The bound is what the fit must hold, not what one run printed: the block
    budget, a few ``m x m`` matrices (K_mm, the preconditioner's T, T T^T and A,
    and the factorizations' copies: 8 bound them) and a few length-``n``
    vectors (targets, residual, predictions: 4).  Measured here: the budget plus 5.6 ``m x m`` matrices
    plus 0.9 vectors.  Four times the rows must add only vectors, never
    ``n x m`` (that would be 48 MB more).

    Measured in a fresh interpreter: ``tracemalloc`` counts every thread of
    the process, and threads left by earlier tests (a Dask client's loop)
    would be counted with the fit.  Numba's first compilation in that
    interpreter can take minutes on a loaded machine: the time limit only
    guards against a hang.
    """
    import subprocess
    import sys

    m, budget, sizes = 200, 2**20, (10_000, 40_000)
    proc = subprocess.run([sys.executable, "-c", _MEMORY_PROBE, str(m), str(budget), *map(str, sizes)],
                          capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [tuple(map(int, line.split())) for line in proc.stdout.split("\n") if line.strip()][-2:]
    (n1, conv1, peak1), (n2, conv2, peak2) = rows
    assert (n1, n2) == sizes and conv1 and conv2
    assert peak1 <= budget + 8 * m * m * 8 + 4 * n1 * 8 < 0.25 * n1 * m * 8, f"peak {peak1 / 2**20:.2f} MiB"
    assert peak2 - peak1 <= 4 * (n2 - n1) * 8, f"peaks {peak1 / 2**20:.2f} and {peak2 / 2**20:.2f} MiB"


# ----------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU (CuPy with a device)")
def test_estimators_on_cupy():
    import cupy as cp

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 4))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=2000)
    kw = dict(kernel=nh.GaussianKernel(1.0), penalty=1e-5, centers=100, random_state=0, tol=1e-10, maxiter=300)
    cpu = nh.NystromKRR(**kw).fit(X, y)
    gpu = nh.NystromKRR(**kw).fit(cp.asarray(X), cp.asarray(y))
    pred = gpu.predict(cp.asarray(X))
    assert isinstance(pred, cp.ndarray) and isinstance(gpu.alpha_, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(pred), cpu.predict(X), rtol=1e-6, atol=1e-7)
    assert gpu.score(cp.asarray(X), cp.asarray(y)) == pytest.approx(cpu.score(X, y), rel=1e-6)
    with pytest.raises(TypeError, match="mix"):
        gpu.predict(X)
    # centers given on the host are moved with the data (a hyperparameter, like the lengthscale)
    given = nh.NystromKRR(kernel=nh.GaussianKernel(1.0), centers=X[:50]).fit(cp.asarray(X), cp.asarray(y))
    assert isinstance(given.centers_, cp.ndarray)
    labels = cp.asarray((y > 0).astype(np.int64))
    clf = nh.NystromKRRClassifier(**kw).fit(cp.asarray(X), labels)
    assert isinstance(clf.predict(cp.asarray(X)), cp.ndarray) and clf.score(cp.asarray(X), labels) > 0.8
    m32 = nh.NystromKRR(**{**kw, "tol": 1e-6}).fit(cp.asarray(X, dtype=cp.float32), cp.asarray(y, dtype=cp.float32))
    assert m32.predict(cp.asarray(X, dtype=cp.float32)).dtype == cp.float32



@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU (CuPy with a device)")
def test_scores_of_gpu_models_take_host_targets():
    """score(X, y) of a model on the GPU with host targets: the regressor moved them, the classifier compared
    device predictions with host labels (CuPy's mixing TypeError); now both move them."""
    import cupy as cp

    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)
    Xd = cp.asarray(X)
    reg = nh.NystromKRR(penalty=1e-4, centers=30, random_state=0).fit(Xd, cp.asarray(y))
    assert reg.score(Xd, y) == pytest.approx(reg.score(Xd, cp.asarray(y)), rel=1e-12)
    labels = (y > 0).astype(np.int64)
    clf = nh.NystromKRRClassifier(penalty=1e-4, centers=30, random_state=0).fit(Xd, cp.asarray(labels))
    w = np.linspace(1.0, 2.0, 300)
    assert clf.score(Xd, labels) == clf.score(Xd, cp.asarray(labels)) > 0.8
    assert clf.score(Xd, labels, sample_weight=w) == pytest.approx(
        clf.score(Xd, cp.asarray(labels), sample_weight=cp.asarray(w)), rel=1e-12)
    with pytest.raises(TypeError, match="labels"):
        clf.score(Xd, np.where(labels > 0, "a", "b"))

def test_normalize_y_predicts_in_target_units(toy):
    X, y = toy
    shifted = 1000.0 + 50.0 * y
    kw = dict(kernel=nh.GaussianKernel(0.7), penalty=1e-6, centers=20, solver="direct", random_state=0)
    plain = nh.NystromKRR(**kw).fit(X, y)
    model = nh.NystromKRR(normalize_y=True, **kw).fit(X, shifted)
    assert model.y_mean_.shape == (1,) and model.y_scale_[0] > 0
    # standardizing is an affine map of the targets: predictions follow it exactly
    mu, sd = shifted.mean(), shifted.std()
    expected = mu + sd * nh.NystromKRR(**kw).fit(X, (shifted - mu) / sd).predict(X)
    np.testing.assert_allclose(model.predict(X), expected, rtol=1e-10)
    assert np.array_equal(plain.y_mean_, np.zeros(1)) and np.array_equal(plain.y_scale_, np.ones(1))
