"""Property-based tests of the public entry points (issue #15).

For small random problems in every memory layout: nothing the caller passes
is modified, results from finite input are finite, results do not depend on
the layout (C, Fortran, strided views, read-only arrays, nested lists, pandas
DataFrames), and bad input raises only the documented errors (ValueError,
TypeError, DataError; ConvergenceWarning is a warning, never an exception).

The data come from a seeded NumPy generator (a drawn seed and scale): the
values stay in the range the kernels and solvers are meant for, while the
kernel/numerics limits (cases 02, 05, 06, 08, 15 of the issue) are tested
where they are fixed.  Example counts are bounded so the module runs in
well under a minute on two cores.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import nyhopt as nh  # noqa: E402
from nyhopt.datasets import c_error, nrmse, rmse  # noqa: E402
from nyhopt.io import DataError, load_model, save_model  # noqa: E402

pd = pytest.importorskip("pandas")

FEW = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SOME = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
LAYOUTS = ("C", "F", "strided", "readonly", "list", "dataframe")
DOCUMENTED = (ValueError, TypeError, DataError)


@st.composite
def problems(draw, max_n=60, max_d=4):
    """A regression problem: X (n, d), y (n,), a number of centers m <= 10."""
    n = draw(st.integers(12, max_n))
    d = draw(st.integers(1, max_d))
    m = draw(st.integers(1, 10))
    seed = draw(st.integers(0, 2**32 - 1))
    scale = draw(st.sampled_from([1e-2, 1.0, 30.0]))
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * scale
    y = np.sin(X[:, 0] / scale) + 0.1 * rng.normal(size=n)
    return X, y, m


def layout(a, how):
    """``a`` (1-D or 2-D float64) in the memory layout / container ``how``."""
    if how == "C":
        return np.ascontiguousarray(a)
    if how == "F":
        return np.asfortranarray(a)
    if how == "strided":
        big = np.zeros((a.shape[0] * 2,) + a.shape[1:] if a.ndim == 1 else (a.shape[0] * 2, a.shape[1] * 3))
        view = big[::2] if a.ndim == 1 else big[::2, ::3]
        view[...] = a
        return view
    if how == "readonly":
        b = a.copy()
        b.flags.writeable = False
        return b
    if how == "list":
        return a.tolist()
    if a.ndim == 1:
        return pd.Series(a)
    return pd.DataFrame(a, columns=[f"x{j}" for j in range(a.shape[1])])


def snapshot(a):
    return np.array(a, dtype=object if isinstance(a, list) else None, copy=True)


def assert_unchanged(before, after):
    np.testing.assert_array_equal(np.asarray(after), np.asarray(before))


def quiet():
    """ConvergenceWarning is allowed (as a warning); other warnings are left to pytest."""
    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.simplefilter("ignore", nh.ConvergenceWarning)
    return ctx


# ----------------------------------------------------------------------------- estimators


@SOME
@given(problems(), st.sampled_from(LAYOUTS), st.sampled_from(["direct", "falkon"]))
def test_nystrom_krr_layout_independent_finite_and_pure(problem, how, solver):
    X, y, m = problem
    Xl, yl = layout(X, how), layout(y, how)
    X0, y0 = snapshot(Xl), snapshot(yl)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nh.ConvergenceWarning)
        ref = nh.NystromKRR(penalty=1e-3, centers=m, solver=solver, random_state=0).fit(X, y)
        model = nh.NystromKRR(penalty=1e-3, centers=m, solver=solver, random_state=0).fit(Xl, yl)
        pred = model.predict(Xl)
    assert_unchanged(X0, Xl)
    assert_unchanged(y0, yl)
    assert np.all(np.isfinite(pred)) and pred.shape == (X.shape[0],)
    np.testing.assert_allclose(pred, ref.predict(X), rtol=1e-7, atol=1e-9)


@SOME
@given(problems(), st.sampled_from(LAYOUTS), st.sampled_from(["ints", "strings", "objects"]),
       st.integers(2, 4))
def test_classifier_layout_independent_and_pure(problem, how, kind, k):
    X, _, m = problem
    codes = np.arange(X.shape[0]) % k
    labels = {"ints": codes * 7 - 3, "strings": np.array(["c%d" % c for c in codes]),
              "objects": np.array(["c%d" % c for c in codes], dtype=object)}[kind]
    Xl = layout(X, how)
    yl = labels.tolist() if how == "list" else (pd.Series(labels) if how == "dataframe" else labels)
    X0, y0 = snapshot(Xl), np.array(labels, copy=True)
    ref = nh.NystromKRRClassifier(penalty=1e-3, centers=m, solver="direct", random_state=0).fit(X, labels)
    clf = nh.NystromKRRClassifier(penalty=1e-3, centers=m, solver="direct", random_state=0).fit(Xl, yl)
    assert_unchanged(X0, Xl)
    assert_unchanged(y0, yl)
    pred = clf.predict(Xl)
    assert set(np.asarray(pred).tolist()) <= set(labels.tolist())
    assert np.all(np.isfinite(clf.decision_function(Xl)))
    np.testing.assert_allclose(clf.decision_function(Xl), ref.decision_function(X), rtol=1e-7, atol=1e-9)


# ----------------------------------------------------------------------------- objectives and tuning


@SOME
@given(problems(), st.sampled_from(["gcv", "sgpr", "prop", "holdout"]), st.sampled_from(LAYOUTS),
       st.floats(1e-6, 1.0), st.floats(0.1, 10.0))
def test_objective_value_and_grad_finite_pure_layout_independent(problem, name, how, lam, ell):
    X, y, m = problem
    Xl, yl = layout(X, how), layout(y, how)
    X0, y0 = snapshot(Xl), snapshot(yl)
    scale = float(np.std(X)) or 1.0
    Z = X[:m].copy()
    params = nh.Params.from_natural(lam, ell * scale * np.ones(X.shape[1]), Z)
    p0 = [np.array(f, copy=True) for f in params]
    value, grad = nh.make_objective(name, Xl, yl, random_state=0).value_and_grad(params)
    ref_value, ref_grad = nh.make_objective(name, X, y, random_state=0).value_and_grad(params)
    assert_unchanged(X0, Xl)
    assert_unchanged(y0, yl)
    for before, after in zip(p0, params):
        np.testing.assert_array_equal(after, before)
    assert np.isfinite(value) and all(np.all(np.isfinite(g)) for g in grad)
    np.testing.assert_allclose(value, ref_value, rtol=1e-8, atol=1e-12)
    for g, r in zip(grad, ref_grad):
        np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-9 * (1 + np.max(np.abs(r))))


@FEW
@given(problems(max_n=40, max_d=3), st.sampled_from(LAYOUTS), st.sampled_from(["prop", "gcv"]))
def test_tune_two_epochs_finite_and_pure(problem, how, objective):
    X, y, m = problem
    Xl, yl = layout(X, how), layout(y, how)
    X0, y0 = snapshot(Xl), snapshot(yl)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nh.ConvergenceWarning)
        res = nh.tune(Xl, yl, objective=objective, centers=m, epochs=2, progress=False)
    assert_unchanged(X0, Xl)
    assert_unchanged(y0, yl)
    assert np.all(np.isfinite(res.history.objective))
    assert np.isfinite(res.params.penalty) and np.all(np.isfinite(res.params.lengthscale))
    assert np.all(np.isfinite(res.model.predict(X)))


# ----------------------------------------------------------------------------- model files


@FEW
@given(problems(max_n=40), st.booleans())
def test_save_load_round_trip_predicts_the_same(tmp_path, problem, classifier):
    X, y, m = problem
    if classifier:
        model = nh.NystromKRRClassifier(centers=m, solver="direct", random_state=0).fit(X, y > np.median(y))
    else:
        model = nh.NystromKRR(centers=m, solver="direct", random_state=0, normalize_y=True).fit(X, y)
    loaded = load_model(save_model(tmp_path / "model", model))
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


@SOME
@given(st.binary(min_size=0, max_size=400), st.integers(0, 10**6))
def test_load_model_of_random_bytes_raises_data_error(tmp_path, junk, salt):
    path = tmp_path / f"junk{salt}.npz"
    path.write_bytes(b"PK\x03\x04" + junk if salt % 2 else junk)
    with pytest.raises(DataError):
        load_model(path)


# ----------------------------------------------------------------------------- metrics


@SOME
@given(problems(), st.sampled_from(LAYOUTS))
def test_metrics_finite_pure_and_layout_independent(problem, how):
    _, y, _ = problem
    pred = y + 0.5
    yl, pl = layout(y, how), layout(pred, how)
    y0, p0 = snapshot(yl), snapshot(pl)
    out = [rmse(yl, pl), c_error(yl, pl)]
    if abs(np.mean(y)) > 1e-3:
        out.append(nrmse(yl, pl))
        assert out[-1] == pytest.approx(nrmse(y, pred), rel=1e-12)
    assert_unchanged(y0, yl)
    assert_unchanged(p0, pl)
    assert all(np.isfinite(v) for v in out)
    assert out[0] == pytest.approx(rmse(y, pred), rel=1e-12) and out[1] == c_error(y, pred)


# ----------------------------------------------------------------------------- bad input


JUNK = st.one_of(
    st.none(), st.booleans(), st.just(np.True_), st.text(max_size=3), st.integers(-3, 3),
    st.floats(allow_nan=True, allow_infinity=True), st.just(np.array([[np.nan, 1.0]])),
    st.just(np.ones((3, 2), dtype=complex)), st.just([[1, "a"], [2, "b"]]), st.just(np.empty((0, 2))),
    st.just(np.ones(5)), st.just(np.array([1, "a", 2.0], dtype=object)),
)


@SOME
@given(problems(max_n=30, max_d=2), st.sampled_from(["X", "y", "penalty", "centers", "tol", "lengthscale"]),
       JUNK)
def test_bad_input_raises_only_documented_errors(problem, slot, junk):
    X, y, m = problem
    args = {"X": X, "y": y, "penalty": 1e-3, "centers": m, "tol": 1e-7, "lengthscale": 1.0}
    args[slot] = junk
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nh.ConvergenceWarning)
        try:
            nh.NystromKRR(nh.GaussianKernel(args["lengthscale"]), penalty=args["penalty"], centers=args["centers"],
                          tol=args["tol"], random_state=0).fit(args["X"], args["y"])
        except DOCUMENTED:
            pass
