"""Input handling of the public API: errors that name the argument, and inputs left unchanged.

Regression tests of an audit of the public surface (estimators, ``tune``,
kernels, ``ops``, ``metrics``, model files); the broad layout and purity
properties are in ``tests/test_properties.py``.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import nyhopt as nh
from nyhopt import io, metrics, ops

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

N, D = 40, 3


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (N, D))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=N)
    return X, y


@pytest.fixture(scope="module")
def fitted(data):
    X, y = data
    reg = nh.NystromKRR(centers=8, penalty=1e-3, random_state=0).fit(X, y)
    clf = nh.NystromKRRClassifier(centers=8, penalty=1e-3, random_state=0).fit(X, np.where(y > 0, "p", "n"))
    return reg, clf


@pytest.mark.parametrize("w, err, match", [
    (np.ones(N - 1), ValueError, r"sample_weight has shape \(39,\), expected \(40,\)"),
    (np.ones((N, 2)), ValueError, r"sample_weight has shape \(40, 2\)"),
    (np.r_[np.nan, np.ones(N - 1)], ValueError, "sample_weight contains NaN"),
    (-np.ones(N), ValueError, "sample_weight must have a sum > 0"),
    (np.zeros(N), ValueError, "sample_weight must have a sum > 0"),
    (np.array(["a"] * N), TypeError, "sample_weight must hold real numbers"),
])
def test_score_checks_sample_weight(data, fitted, w, err, match):
    """A bad sample_weight is refused by name (it gave a broadcasting error, or NaN for NaN weights)."""
    X, y = data
    labels = np.where(y > 0, "p", "n")
    for model, target in zip(fitted, (y, labels)):
        with pytest.raises(err, match=match):
            model.score(X, target, sample_weight=w)


def test_score_sample_weight_scalar_list_and_unchanged(data, fitted):
    X, y = data
    reg, clf = fitted
    w = np.linspace(0.5, 2.0, N)
    w.flags.writeable = False
    w0 = w.copy()
    assert reg.score(X, y, sample_weight=2.0) == pytest.approx(reg.score(X, y), rel=1e-12)
    assert reg.score(X, y, sample_weight=w.tolist()) == reg.score(X, y, sample_weight=w)
    assert clf.score(X, np.where(y > 0, "p", "n"), sample_weight=w) <= 1.0
    np.testing.assert_array_equal(w, w0)


def test_object_arrays_of_non_numbers_name_the_argument(data):
    """NumPy's conversion error, with the argument's name (its type kept: scikit-learn's checks match it)."""
    X, y = data
    Xs = X.astype(object)
    Xs[0, 0] = "a"
    with pytest.raises(ValueError, match="^X: could not convert string to float"):
        nh.NystromKRR(centers=5).fit(Xs, y)
    Xd = X.astype(object)
    Xd[0, 0] = {"a": 1}
    with pytest.raises(TypeError, match="^X: .*argument must be a string.* number"):
        nh.NystromKRR(centers=5).fit(Xd, y)
    assert Xd[0, 0] == {"a": 1} and Xs[0, 0] == "a"


@pytest.mark.parametrize("ls", ["a", ["1.0", "x"], {"a": 1}])
def test_lengthscale_that_is_not_numbers_is_a_type_error(data, ls):
    with pytest.raises(TypeError, match="^lengthscale must be a positive number"):
        ops.kernel_matrix(nh.GaussianKernel(ls), data[0], data[0][:3])


@pytest.mark.parametrize("nu", ["1.5", True, b"2.5"])
def test_matern_nu_of_another_type_is_refused(data, nu):
    """A string or a bool nu passed float() (``"1.5"``, ``True`` as 1.0 is refused already, but not by type)."""
    with pytest.raises(ValueError, match="nu must be one of 0.5, 1.5, 2.5"):
        ops.kernel_matrix(nh.MaternKernel(1.0, nu=nu), data[0], data[0][:3])


@pytest.mark.parametrize("name, value", [("ard", "no"), ("progress", 1), ("record_terms", "yes"),
                                         ("track_errors", "x")])
def test_tune_switches_must_be_bools(data, name, value):
    """A truthy string or number passed for True (``ard="no"`` tuned with ARD)."""
    X, y = data
    kw = dict(centers=5, epochs=1, progress=False)
    kw[name] = value
    with pytest.raises(TypeError, match=f"^{name} must be True"):
        nh.tune(X, y, **kw)


def test_hyperopt_options_name_themselves(data):
    X, y = data
    with pytest.raises(TypeError, match="standardize must be True or False"):
        nh.HyperoptKRR(centers=5, epochs=1, standardize="no").fit(X, y)
    with pytest.raises(TypeError, match="ard must be True or False"):
        nh.HyperoptKRR(centers=5, epochs=1, ard="no").fit(X, y)
    for vf in (2.0, 0.0, "0.2", True):
        with pytest.raises(ValueError, match="validation_fraction must be"):
            nh.HyperoptKRR(centers=5, epochs=1, validation_fraction=vf).fit(X, y)
    # a number of folds is tune's to check (it chooses among a list of objectives)
    with pytest.raises(ValueError, match="number of folds"):
        nh.HyperoptKRR(centers=5, epochs=1, validation_fraction=3).fit(X, y)
    est = nh.HyperoptKRR(centers=5, epochs=1, validation_fraction=0.25, standardize=np.bool_(True)).fit(X, y)
    assert np.isfinite(est.score(X, y))


def test_ops_name_the_kernel_and_non_numeric_operands(data):
    X, _ = data
    Z = X[:4]
    with pytest.raises(TypeError, match="kernel must be a nyhopt Kernel"):
        ops.kmv("gaussian", X, Z, np.ones(4))
    with pytest.raises(TypeError, match="kernel must be a nyhopt Kernel"):
        ops.kernel_matrix(None, X, Z)
    with pytest.raises(TypeError, match="V must hold real numbers"):
        ops.kmv(nh.GaussianKernel(1.0), X, Z, np.array(["a"] * 4))
    with pytest.raises(TypeError, match="U must hold real numbers"):
        ops.kmtv(nh.GaussianKernel(1.0), X, Z, np.array(["a"] * N, dtype=object))
    V = np.ones(4, dtype=object)
    np.testing.assert_allclose(ops.kmv(nh.GaussianKernel(1.0), X, Z, V), ops.kmv(nh.GaussianKernel(1.0), X, Z, np.ones(4)))


@pytest.mark.parametrize("est,classifier", [(nh.NystromKRR(centers=5), "NystromKRRClassifier"),
                                            (nh.HyperoptKRR(centers=5, epochs=1), "HyperoptKRRClassifier")])
def test_regressor_given_text_labels_names_the_classifier(data, est, classifier):
    X, y = data
    labels = np.where(y > 0, "yes", "no")
    with pytest.raises(TypeError, match=f"^y must hold real numbers, got dtype <U3 .*use {classifier}"):
        est.fit(X, labels)
    with pytest.raises((TypeError, ValueError), match=f"use {classifier}"):
        est.fit(X, labels.astype(object))
    assert est.fit(X, labels == "yes").predict(X[:2]).shape == (2,)  # booleans are numbers


def test_labels_of_another_kind_than_the_classes_are_refused(data):
    # text labels scored against numeric classes (or the reverse) counted as all wrong, silently
    X, y = data
    words = np.where(y > 0, "yes", "no")
    clf = nh.NystromKRRClassifier(centers=5).fit(X, words)
    with pytest.raises(TypeError, match=r"^y holds numbers but the classes are strings \['no', 'yes'\]"):
        clf.score(X, (y > 0).astype(int))
    assert clf.score(X, words.astype(object).tolist()) == clf.score(X, words)
    flags = nh.NystromKRRClassifier(centers=5).fit(X, y > 0)
    assert flags.score(X, (y > 0).astype(int)) == flags.score(X, y > 0)  # booleans are numbers
    with pytest.raises(TypeError, match="validation y holds numbers but the classes are strings"):
        nh.tune(X, words, centers=5, epochs=1, progress=False, validation=(X[:10], np.zeros(10)))
    with pytest.raises(TypeError, match="validation y holds strings but the classes are numbers"):
        nh.HyperoptKRRClassifier(centers=5, epochs=1).fit(X, y > 0, validation=(X[:10], words[:10]))


@pytest.mark.parametrize("func", [metrics.rmse, lambda y, m: metrics.nlpd(y, m, np.ones(len(m))),
                                  lambda y, m: metrics.coverage(y, m, np.ones(len(m)))])
def test_metrics_name_non_numeric_arguments(func):
    y = np.arange(4.0)
    with pytest.raises(TypeError, match="^y must hold real numbers"):
        func(np.array(list("abcd")), y)
    with pytest.raises(TypeError, match="^mean must hold real numbers"):
        func(y, [None] * 4)
    with pytest.raises(TypeError, match="^std must hold real numbers"):
        metrics.nlpd(y, y, np.array(list("abcd")))


def test_model_files_name_the_path_and_meta(tmp_path, fitted):
    reg, _ = fitted
    with pytest.raises(TypeError, match="path must be a str or os.PathLike, got int"):
        io.save_model(3, reg)
    with pytest.raises(TypeError, match="path must be a str or os.PathLike, got int"):
        io.load_model(3)
    with pytest.raises(TypeError, match="path must be a str or os.PathLike, got NoneType"):
        io.read_csv(None)
    with pytest.raises(TypeError, match="meta must be a dict"):
        io.save_model(tmp_path / "m", reg, meta=3)
    path = io.save_model(str(tmp_path / "m").encode(), reg)  # bytes paths as os.fspath takes them
    assert isinstance(path, str) and path.endswith(".npz")


# ----------------------------------------------------------------------------- purity, by property

FEW = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _variant(a, how):
    if how == "F":
        return np.asfortranarray(a)
    if how == "readonly":
        b = a.copy()
        b.flags.writeable = False
        return b
    if how == "strided":
        big = np.zeros((2 * a.shape[0],) + a.shape[1:])
        big[::2] = a
        return big[::2]
    if how == "float32":
        return a.astype(np.float32)
    return a.copy()


@FEW
@given(st.integers(0, 2**31 - 1), st.sampled_from(["C", "F", "readonly", "strided", "float32"]),
       st.integers(8, 30), st.integers(1, 3))
def test_ops_score_and_metrics_leave_inputs_unchanged(seed, how, n, d):
    """ops products and adjoints, estimator score with weights, and the metrics on random valid inputs:
    every array given is unchanged afterwards (values and writeable flag)."""
    rng = np.random.default_rng(seed)
    X = _variant(rng.normal(size=(n, d)), how)
    Z = _variant(rng.normal(size=(4, d)), how)
    V = _variant(rng.normal(size=(4, 2)), how)
    U = _variant(rng.normal(size=(n, 2)), how)
    y = _variant(rng.normal(size=n), how)
    w = _variant(rng.uniform(0.5, 2.0, size=n), how)
    given_arrays = (X, Z, V, U, y, w)
    before = [(a.copy(), a.flags.writeable) for a in given_arrays]
    k = nh.GaussianKernel(_variant(np.full(d, 1.5), how))
    ell0 = np.array(k.lengthscale, copy=True)
    ops.kernel_matrix(k, X, Z)
    ops.kmv(k, X, Z, V)
    ops.kmtv(k, X, Z, U)
    ops.normal_matvec(k, X, Z, V, U)
    ops.adjoint_lowrank(k, X, Z, U, V)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nh.ConvergenceWarning)
        model = nh.NystromKRR(kernel=k, centers=Z, penalty=1e-2, normalize_y=True).fit(X, y)
    mean, std = model.predict(X, return_std=True)
    model.score(X, y, sample_weight=w)
    metrics.rmse(y, mean), metrics.nlpd(y, mean, std), metrics.coverage(y, mean, std)
    for a, (b, flag) in zip(given_arrays, before):
        np.testing.assert_array_equal(a, b)
        assert a.flags.writeable == flag
    np.testing.assert_array_equal(k.lengthscale, ell0)


def test_more_options_name_themselves(data):
    X, y = data
    params = nh.Params.from_natural(1e-3, np.ones(D), X[:5])
    with pytest.raises(TypeError, match="^tol must be a real number"):
        nh.make_objective("stoch-prop", X, y, tol="a").value(params)
    with pytest.raises(TypeError, match="^centers must hold real numbers"):
        nh.Params.from_natural(1e-3, np.ones(D), np.array([["a"] * D] * 3))
    with pytest.raises(TypeError, match="^centers must hold real numbers"):
        nh.Params.from_natural(1e-3, np.ones(D), np.array([["a"] * D] * 3, dtype=object))
    Zi = np.ones((3, D), dtype=int)
    assert nh.Params.from_natural(1e-3, np.ones(D), Zi).centers.dtype == np.float64
    with pytest.raises(TypeError, match="normalize_y must be True or False"):
        nh.NystromKRR(centers=5, normalize_y="no").fit(X, y)


def test_classifier_predict_errors_name_the_public_class():
    """predict of a classifier takes no ``return_std``; the TypeError names the class the user called."""
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(60, 2))
    y = (X[:, 0] > 0.5).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = nh.HyperoptKRRClassifier(epochs=2, centers=10, random_state=0).fit(X, y)
    with pytest.raises(TypeError, match=r"^HyperoptKRRClassifier\.predict\(\)"):
        model.predict(X, return_std=True)
    assert model.decision_function(X, return_std=True)[1].shape == (60,)
