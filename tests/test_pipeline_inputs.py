"""Inputs from other libraries: scikit-learn pipelines, pandas DataFrames, DLPack arrays.

The DLPack producer here is a minimal wrapper around a NumPy array (torch and
JAX are never imported); asv_bench/gpu_interop.py checks torch CUDA tensors on a GPU.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.backend import as_native
from nyhopt.inputs._missing import X_ADVICE

pd = pytest.importorskip("pandas")


class DLPackOnly:
    """An array exposing only the DLPack protocol (like a torch or JAX array), backed by NumPy."""

    def __init__(self, array, device=None):
        self._array = array
        self._device = device

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._device if self._device is not None else self._array.__dlpack_device__()


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(120, 3))
    y = np.sin(3 * X[:, 0]) + X[:, 1] + 0.05 * rng.normal(size=120)
    labels = np.where(X[:, 0] * X[:, 1] > 0, "same", "diff")
    return X, y, labels


def _estimators():
    return [
        (nh.NystromKRR(centers=15, penalty=1e-4, random_state=0), "y"),
        (nh.NystromKRRClassifier(centers=15, penalty=1e-4, random_state=0), "labels"),
        (nh.HyperoptKRR(centers=10, epochs=3, random_state=0, standardize=True), "y"),
        (nh.HyperoptKRRClassifier(centers=10, epochs=3, random_state=0), "labels"),
    ]


ESTIMATORS = pytest.mark.parametrize("est,target", _estimators(), ids=[type(e).__name__ for e, _ in _estimators()])


def _target(data, target):
    X, y, labels = data
    return y if target == "y" else labels


# ----------------------------------------------------------------------------- scikit-learn tools


def test_tags_and_sklearn_types():
    sklearn = pytest.importorskip("sklearn")
    from sklearn.base import is_classifier, is_regressor
    from sklearn.utils import get_tags

    assert is_regressor(nh.HyperoptKRR()) and is_classifier(nh.HyperoptKRRClassifier())
    assert get_tags(nh.HyperoptKRR()).target_tags.multi_output
    assert get_tags(nh.HyperoptKRRClassifier()).classifier_tags.multi_class
    assert sklearn.base.clone(nh.HyperoptKRR(epochs=4)).epochs == 4


def test_cross_val_score_with_hyperopt(data):
    pytest.importorskip("sklearn")
    from sklearn.model_selection import cross_val_score

    X, y, labels = data
    scores = cross_val_score(nh.HyperoptKRR(centers=10, epochs=3, random_state=0), X, y, cv=3)
    assert scores.shape == (3,) and np.all(np.isfinite(scores)) and scores.mean() > 0.5
    acc = cross_val_score(nh.HyperoptKRRClassifier(centers=10, epochs=3, random_state=0), X, labels, cv=3)
    assert acc.shape == (3,) and acc.mean() > 0.6


def test_grid_search_over_a_pipeline_with_hyperopt(data):
    pytest.importorskip("sklearn")
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, _ = data
    pipe = make_pipeline(StandardScaler(), nh.HyperoptKRR(centers=10, epochs=3, random_state=0))
    grid = GridSearchCV(pipe, {"hyperoptkrr__objective": ["prop", "gcv"], "hyperoptkrr__lr": [0.05, 0.1]}, cv=3)
    grid.fit(X, y)
    assert set(grid.best_params_) == {"hyperoptkrr__objective", "hyperoptkrr__lr"}
    assert len(grid.cv_results_["mean_test_score"]) == 4
    assert grid.best_estimator_[-1].n_features_in_ == 3
    assert grid.predict(X[:5]).shape == (5,) and grid.score(X, y) > 0.5


# ----------------------------------------------------------------------------- pandas


@ESTIMATORS
def test_dataframe_feature_names_recorded_and_checked(data, est, target):
    X, _, _ = data
    y = _target(data, target)
    names = ["a", "b", "c"]
    df = pd.DataFrame(X, columns=names)
    ys = pd.Series(y, name="target")
    df_before = df.copy()
    est.fit(df, ys)
    pd.testing.assert_frame_equal(df, df_before)
    assert est.n_features_in_ == 3
    assert isinstance(est.feature_names_in_, np.ndarray) and est.feature_names_in_.dtype == object
    assert est.feature_names_in_.tolist() == names
    method = "decision_function" if hasattr(est, "decision_function") else "predict"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out_df = getattr(est, method)(df)
    ref = type(est)(**est.get_params()).fit(X, y)
    # a DataFrame's block is column-major: the same numbers up to the order of floating-point sums
    np.testing.assert_allclose(out_df, getattr(ref, method)(X), rtol=1e-9, atol=1e-12)
    assert not hasattr(ref, "feature_names_in_")

    with pytest.raises(ValueError, match="Feature names must be in the same order"):
        est.predict(df[["c", "a", "b"]])
    with pytest.raises(ValueError, match="Feature names unseen at fit time:\n- z"):
        est.predict(df.rename(columns={"c": "z"}))
    with pytest.raises(ValueError, match="seen at fit time, yet now missing:\n- c"):
        est.predict(df[["a", "b"]])
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        est.predict(X)
    with pytest.warns(UserWarning, match="X has feature names, but"):
        ref.predict(df)
    # refitting on a bare array forgets the names
    est.fit(X, y)
    assert not hasattr(est, "feature_names_in_")


def test_non_string_and_mixed_column_names(data):
    X, y, _ = data
    model = nh.NystromKRR(centers=15).fit(pd.DataFrame(X), y)  # integer names: not recorded
    assert not hasattr(model, "feature_names_in_")
    with pytest.raises(TypeError, match="all column names are strings"):
        nh.HyperoptKRR(centers=10, epochs=2).fit(pd.DataFrame(X, columns=["a", 1, "c"]), y)


@pytest.mark.parametrize("cls,target", [(nh.HyperoptKRR, "y"), (nh.HyperoptKRRClassifier, "labels")])
def test_hyperopt_fit_takes_feature_names_for_bare_arrays(data, cls, target):
    # both self-tuning estimators document fit(..., feature_names=...) (the classifier used to refuse it)
    X = data[0]
    est = cls(centers=10, epochs=1).fit(X, _target(data, target), feature_names=["a", "b", "c"])
    assert est.feature_names_in_.tolist() == ["a", "b", "c"]
    with pytest.raises(ValueError, match="Feature names must be in the same order"):
        est.predict(pd.DataFrame(X, columns=["b", "a", "c"]))


@pytest.mark.parametrize("fit", ["tune", "tune-list", "HyperoptKRR"])
def test_validation_frame_with_other_columns_is_refused(data, fit):
    # validation rows are used by position: a frame with reordered columns was scored on the
    # wrong features (a wrong validation error, and a wrong choice among objectives)
    X, y, _ = data
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    kw = dict(centers=10, epochs=1, random_state=0)

    def run(X_val):
        if fit == "HyperoptKRR":
            return nh.HyperoptKRR(**kw).fit(df, y, validation=(X_val, y[:30])).history_
        objective = ["prop", "gcv"] if fit == "tune-list" else "prop"
        return nh.tune(df, y, objective=objective, validation=(X_val, y[:30]), progress=False, **kw).history

    with pytest.raises(ValueError, match=r"validation X: .*same order.*\n.*another order"):
        run(df[["c", "a", "b"]].iloc[:30])
    with pytest.raises(ValueError, match=r"Names not in X:\n- z\nNames of X that are missing:\n- c"):
        run(df.rename(columns={"c": "z"}).iloc[:30])
    same = run(df.iloc[:30]).validation_error
    np.testing.assert_array_equal(run(X[:30]).validation_error, same)  # a bare array: by position


def _frame_with(column, values):
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"dose": rng.normal(size=8), "age": rng.normal(size=8)}, index=[f"p{i}" for i in range(8)])
    df[column] = values
    return df, rng.normal(size=8)


_FITS = {
    "NystromKRR": lambda X, y: nh.NystromKRR(centers=4).fit(X, y),
    "HyperoptKRR": lambda X, y: nh.HyperoptKRR(centers=4, epochs=1, progress=False).fit(X, y),
    "tune": lambda X, y: nh.tune(X, y, centers=4, epochs=1),
    "tune-several": lambda X, y: nh.tune(X, y, objective=["prop", "gcv"], validation=0.5, centers=2, epochs=1),
    "validation": lambda X, y: nh.HyperoptKRR(centers=4, epochs=1, progress=False).fit(
        pd.DataFrame(np.random.default_rng(0).normal(size=X.shape), columns=X.columns), y, validation=(X, y)),
}


@pytest.mark.parametrize("fit", _FITS.values(), ids=_FITS.keys())
def test_frame_errors_name_the_column_and_the_first_bad_row(fit):
    nan, _ = _frame_with("weight", [1.0, 2.0, np.nan, 4.0, np.inf, 6.0, 7.0, 8.0])
    nan["age"] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, -np.inf]
    y = np.arange(8.0)
    name = "validation X" if fit is _FITS["validation"] else "X"
    with pytest.raises(ValueError) as info:
        fit(nan, y)
    assert str(info.value) == (f"{name} contains NaN or infinity: column 'weight', first at row 2 (index 'p2') "
                               f"(also in column(s) 'age'); a NaN is a missing value: {X_ADVICE}")
    text, _ = _frame_with("color", ["1.5", "2", "red", "blue", "3", "4", "5", "6"])
    with pytest.raises((TypeError, ValueError)) as info:
        fit(text, y)
    assert str(info.value).startswith(f"{name}: column 'color' is not numeric: 'red' at row 2 (index 'p2')")


def test_frame_errors_at_predict_and_for_missing_values():
    df, y = _frame_with("weight", np.ones(8))
    model = nh.NystromKRR(centers=4).fit(df, y)
    nullable = df.assign(weight=pd.array([1, None, 3, 4, 5, 6, 7, 8], dtype="Int64")).reset_index(drop=True)
    with pytest.raises((TypeError, ValueError)) as info:
        model.predict(nullable)
    assert str(info.value) == ("X contains NaN or infinity: column 'weight', first at row 1; a NaN is a missing "
                               f"value: {X_ADVICE}")
    bare = np.where(np.arange(24).reshape(8, 3) == 9, np.nan, 1.0)  # an array: its position
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # fitted with names
        with pytest.raises(ValueError) as info:
            model.predict(bare)
    assert str(info.value) == f"X contains NaN or infinity (first at X[3, 0]); a NaN is a missing value: {X_ADVICE}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(ValueError, match=r"^X contains NaN or infinity \(first at X\[3, 0\]\)$"):
            model.predict(np.where(np.arange(24).reshape(8, 3) == 9, np.inf, 1.0))  # infinity: nothing is missing
    from nyhopt.inputs._frame_errors import frame_problem

    assert frame_problem(df, "X") is None  # a clean frame: other errors pass unchanged


def test_float_dataframe_is_not_copied(data):
    X, _, _ = data
    df = pd.DataFrame(X.copy(), columns=["a", "b", "c"])
    arr = as_native(df)
    assert isinstance(arr, np.ndarray) and np.shares_memory(arr, df.to_numpy())
    assert as_native(X) is X


def test_tune_and_make_objective_accept_pandas(data):
    X, y, _ = data
    rng = np.random.default_rng(1)
    index = rng.permutation(np.arange(1000, 1000 + len(y)))  # not 0..n-1: positions != labels
    df, ys = pd.DataFrame(X, columns=["a", "b", "c"], index=index), pd.Series(y, index=index)
    kw = dict(centers=10, epochs=3, random_state=0, progress=False, validation=0.25)
    res_pd, res_np = nh.tune(df, ys, **kw), nh.tune(X, y, **kw)
    np.testing.assert_array_equal(res_pd.history.objective, res_np.history.objective)
    assert res_pd.model.feature_names_in_.tolist() == ["a", "b", "c"]
    np.testing.assert_array_equal(res_pd.model.predict(df), res_np.model.predict(X))
    params = res_np.params
    assert nh.make_objective("prop", df, ys).value(params) == nh.make_objective("prop", X, y).value(params)


# ----------------------------------------------------------------------------- DLPack


def test_dlpack_cpu_is_zero_copy(data):
    X, _, _ = data
    arr = as_native(DLPackOnly(X))
    assert type(arr) is np.ndarray and np.shares_memory(arr, X)


@ESTIMATORS
def test_dlpack_inputs_match_numpy(data, est, target):
    X, y, labels = data
    if target == "labels":
        y = (labels == "same").astype(np.int64)  # DLPack carries numbers only
    X_test = X[:7] + 0.1
    ref = type(est)(**est.get_params()).fit(X, y)
    est.fit(DLPackOnly(X), DLPackOnly(y))
    pred = est.predict(DLPackOnly(X_test))
    assert type(pred) is np.ndarray
    np.testing.assert_array_equal(pred, ref.predict(X_test))
    assert est.score(DLPackOnly(X), DLPackOnly(y)) == ref.score(X, y)


def test_tune_and_make_objective_accept_dlpack(data):
    X, y, _ = data
    kw = dict(centers=10, epochs=3, random_state=0, progress=False)
    res_dl, res_np = nh.tune(DLPackOnly(X), DLPackOnly(y), **kw), nh.tune(X, y, **kw)
    np.testing.assert_array_equal(res_dl.history.objective, res_np.history.objective)
    params = res_np.params
    assert nh.make_objective("gcv", DLPackOnly(X), DLPackOnly(y)).value(params) == \
        nh.make_objective("gcv", X, y).value(params)


def test_dlpack_unsupported_device_is_a_clear_error(data):
    X, y, _ = data
    with pytest.raises(TypeError, match="X lives on DLPack device type 14"):
        nh.NystromKRR(centers=10).fit(DLPackOnly(X, device=(14, 0)), y)  # kDLOneAPI
    with pytest.raises(TypeError, match="y lives on DLPack device type 14"):
        nh.tune(X, DLPackOnly(y, device=(14, 0)), centers=10, epochs=1, progress=False)


def test_hyperopt_warns_for_centers_in_the_units_of_x():
    """Initial centers are taken in standardized coordinates: rows of X as they are would start far off."""
    import warnings

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 2)) * [10.0, 0.5] + [50.0, -3.0]
    y = np.sin(X[:, 0] / 10)
    Z = X[:8]
    kw = dict(epochs=1, random_state=0, progress=False)
    with pytest.warns(UserWarning, match="taken in standardized coordinates"):
        nh.HyperoptKRR(centers=Z, **kw).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        nh.HyperoptKRR(centers=(Z - X.mean(axis=0)) / X.std(axis=0), **kw).fit(X, y)  # as documented
        nh.HyperoptKRR(centers=Z, standardize=False, **kw).fit(X, y)
        Xn = (X - X.mean(axis=0)) / X.std(axis=0)  # standardized data: both readings agree
        nh.HyperoptKRR(centers=Xn[:8], **kw).fit(Xn, y)
