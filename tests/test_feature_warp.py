"""The warp of skewed features (nyhopt/models/_warp.py), log y, and their choice under a time budget (optim/budget/_features.py)."""
from __future__ import annotations

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.io import load_model, save_model
from nyhopt.errors import DataError
from nyhopt.models._scaling import apply_standardization, standardization
from nyhopt.models._warp import FeatureWarp, apply_warp, fit_warp, skewed_features, warp_lazily
from nyhopt.optim.budget import _features
from nyhopt.optim.budget._features import choice_splits, log_target_applies


def _skewed_table(n=1500, seed=0):
    """Column 0 log-normal (the target depends on its log), 1 normal, 2 zero-inflated, 3 log-normal, unused."""
    rng = np.random.default_rng(seed)
    X = np.c_[rng.lognormal(0.0, 2.0, n), rng.normal(size=n), np.where(rng.random(n) < 0.8, 0.0, rng.lognormal(0, 1, n)),
              rng.lognormal(0.0, 1.0, n)]
    y = np.sin(1.5 * np.log(X[:, 0])) + 0.3 * X[:, 1] + 0.05 * rng.normal(size=n)
    return X, y


@pytest.fixture
def quick_choice(monkeypatch):
    """The choice at test sizes: any budget, small samples."""
    monkeypatch.setattr(_features, "CHOICE_MIN_BUDGET", 0.0)
    monkeypatch.setattr(_features, "CHOICE_ROWS", 800)
    monkeypatch.setattr(_features, "CHOICE_HELD", 400)
    monkeypatch.setattr(_features, "CHOICE_SHARE", 0.25)


def test_skewed_features_leave_out_symmetric_and_zero_inflated_columns():
    X, _ = _skewed_table()
    Xs = apply_standardization(X, *standardization(X))
    np.testing.assert_array_equal(skewed_features(Xs), [0, 3])
    assert skewed_features(Xs[:, [1]]).size == 0


def test_the_warp_is_its_formula_in_float64_and_keeps_the_other_columns():
    X, _ = _skewed_table()
    Xs = apply_standardization(X, *standardization(X))
    w = fit_warp(Xs, [0, 3])
    u = Xs[:, 0]
    c = np.median(u)
    s = np.median(np.abs(u - c)) / 0.6745
    v = np.arcsinh((u - c) / s)
    W = apply_warp(Xs, w)
    np.testing.assert_allclose(W[:, 0], (v - v.mean()) / v.std(), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(W[:, [1, 2]], Xs[:, [1, 2]])
    assert abs(W[:, 3].mean()) < 1e-12 and abs(W[:, 3].std() - 1) < 1e-12
    before = Xs.copy()
    apply_warp(Xs, w)
    np.testing.assert_array_equal(Xs, before)  # a copy unless inplace
    assert apply_warp(Xs, None) is Xs
    f32 = apply_warp(Xs.astype(np.float32), w)
    assert f32.dtype == np.float32
    np.testing.assert_allclose(f32, W, rtol=1e-6, atol=1e-6)


def test_a_spread_of_zero_falls_back_to_the_mean_deviation_then_one():
    A = np.c_[np.r_[np.zeros(70), np.arange(1.0, 31.0)], np.zeros(100)]
    w = fit_warp(A, [0, 1])
    np.testing.assert_allclose(w.scale[0], np.mean(np.abs(A[:, 0])))
    assert w.scale[1] == 1.0 and w.std[1] == 1.0


def test_the_lazy_warp_equals_the_eager_one():
    da = pytest.importorskip("dask.array")
    X, _ = _skewed_table(600)
    w = fit_warp(X, [0, 3])
    lazy = warp_lazily(da.from_array(X, chunks=(128, 2)), w)
    np.testing.assert_array_equal(lazy.compute(), apply_warp(X, w))


def test_a_budgeted_run_keeps_the_warp_where_it_is_clearly_better(quick_choice):
    X, y = _skewed_table()
    X_given = X.copy()
    res = nh.tune(X, y, time_budget=8.0, random_state=0, progress=False)
    np.testing.assert_array_equal(X, X_given)  # the caller's X is not warped
    choice = res.transform
    assert choice.features == (0, 3)
    assert choice.candidates == ("scale", "warp")  # y takes both signs: no log candidate
    assert choice.chosen == "warp" and choice.warped and not choice.log_target
    assert choice.errors[1] < choice.errors[0]
    w = res.model.input_warp_
    assert isinstance(w, FeatureWarp)
    np.testing.assert_array_equal(w.features, [0, 3])
    assert res.elapsed <= 8.0 * 1.1
    # the model takes raw X: the same as the bare model on X standardized and warped by hand
    X_test, _ = _skewed_table(200, seed=3)
    model = res.model
    by_hand = apply_warp(apply_standardization(X_test, model.input_mean_, model.input_scale_), w)
    expected = model.predict(X_test)
    model.input_mean_ = model.input_scale_ = model.input_warp_ = None
    np.testing.assert_array_equal(model.predict(by_hand), expected)


def test_the_warp_survives_a_model_file_and_a_replay(quick_choice, tmp_path):
    X, y = _skewed_table()
    first = nh.tune(X, y, time_budget=8.0, random_state=0, progress=False)
    assert first.transform.warped
    path = save_model(tmp_path / "m.npz", first.model)
    loaded = load_model(path)
    np.testing.assert_array_equal(loaded.input_warp_.features, [0, 3])
    np.testing.assert_allclose(loaded.predict(X[:50]), first.model.predict(X[:50]), rtol=1e-12, atol=1e-12)
    again = nh.tune(X, y, replay=first, random_state=0, progress=False)
    np.testing.assert_array_equal(again.model.predict(X[:50]), first.model.predict(X[:50]))
    assert again.transform == first.transform  # the record, not a new choice


def test_a_damaged_warp_field_is_named(quick_choice, tmp_path):
    X, y = _skewed_table()
    res = nh.tune(X, y, time_budget=8.0, random_state=0, progress=False)
    path = save_model(tmp_path / "m.npz", res.model)
    state = dict(np.load(path))
    state["x_warp_features"] = np.array([0, 9])
    np.savez(tmp_path / "bad.npz", **state)
    with pytest.raises(DataError, match="x_warp_features"):
        load_model(tmp_path / "bad.npz")
    state["x_warp_features"] = np.array([0, 3])
    state["x_warp_scale"] = np.array([1.0, -1.0])
    np.savez(tmp_path / "bad.npz", **state)
    with pytest.raises(DataError, match="x_warp_scale"):
        load_model(tmp_path / "bad.npz")


@pytest.mark.parametrize("case", ["scale", "classification", "no skew", "short budget", "no budget"])
def test_no_choice_where_the_notes_say_so(case, monkeypatch):
    X, y = _skewed_table(1200)  # enough rows for a choice (CHOICE_MIN_ROWS)
    kw = dict(time_budget=2.0, random_state=0, progress=False)
    if case == "scale":
        monkeypatch.setattr(_features, "CHOICE_MIN_BUDGET", 0.0)
        kw["standardize"] = "scale"
    elif case == "classification":
        monkeypatch.setattr(_features, "CHOICE_MIN_BUDGET", 0.0)
        y = np.where(y > 0, "a", "b")
    elif case == "no skew":
        monkeypatch.setattr(_features, "CHOICE_MIN_BUDGET", 0.0)
        X = X[:, [1]]
    elif case == "no budget":
        kw = dict(centers=10, epochs=3, progress=False)
    res = nh.tune(X, y, **kw)
    assert res.transform is None and res.model.input_warp_ is None


def test_the_estimator_keeps_the_warp_and_its_file_too(quick_choice, tmp_path):
    X, y = _skewed_table()
    est = nh.HyperoptKRR(time_budget=8.0, random_state=0, progress=False).fit(X, y)
    assert isinstance(est.x_warp_, FeatureWarp)
    inner = est.model_
    assert inner.input_mean_ is None and inner.input_warp_ is None  # the estimator applies them
    np.testing.assert_array_equal(est.x_mean_, standardization(X)[0])
    by_hand = apply_warp(apply_standardization(X[:50], est.x_mean_, est.x_scale_), est.x_warp_)
    np.testing.assert_array_equal(est.predict(X[:50]), inner.predict(by_hand))
    loaded = load_model(save_model(tmp_path / "h.npz", est))
    np.testing.assert_array_equal(loaded.x_warp_.features, est.x_warp_.features)
    np.testing.assert_allclose(loaded.predict(X[:50]), est.predict(X[:50]), rtol=1e-12, atol=1e-12)
    assert nh.HyperoptKRR(centers=10, epochs=2, progress=False).fit(X, y).x_warp_ is None


def _priced_table(n=1500, seed=1):
    """Symmetric features; a positive, right-skewed target with multiplicative noise (a price)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = 1e4 * np.exp(1.5 * np.sin(2 * X[:, 0]) + 0.8 * X[:, 1] + 0.3 * rng.normal(size=n))
    return X, y


def test_log_y_is_a_candidate_for_positive_right_skewed_targets_of_one_output():
    X, y = _priced_table()
    assert log_target_applies(y)
    assert not log_target_applies(np.log(y) - np.log(y).mean())  # signs
    assert not log_target_applies(10 + X[:, 0])  # positive, not skewed
    assert not log_target_applies(np.c_[y, y])  # two outputs


def test_a_budgeted_run_tunes_on_log_y_where_it_is_clearly_better(quick_choice, tmp_path):
    X, y = _priced_table()
    y_given = y.copy()
    res = nh.tune(X, y, time_budget=8.0, random_state=0, progress=False)
    np.testing.assert_array_equal(y, y_given)
    choice = res.transform
    assert choice.features == () and choice.candidates == ("scale", "log")
    assert choice.chosen == "log" and choice.log_target and not choice.warped
    model = res.model
    assert model.target_transform_ == "log" and model.input_warp_ is None
    X_test, y_test = _priced_table(300, seed=4)
    mean, std = model.predict(X_test, return_std=True)
    np.testing.assert_array_equal(mean, model.predict(X_test))
    model.target_transform_ = None
    log_mean, log_std = model.predict(X_test, return_std=True)
    model.target_transform_ = "log"
    np.testing.assert_allclose(mean, np.exp(log_mean), rtol=1e-13)
    np.testing.assert_allclose(std, mean * log_std, rtol=1e-13)
    assert np.sqrt(np.mean((mean - y_test) ** 2)) < 0.7 * np.std(y_test)
    with pytest.raises(ValueError, match="return_cov is not available for a model tuned on log y"):
        model.predict(X_test, return_cov=True)
    loaded = load_model(save_model(tmp_path / "m.npz", model))
    assert loaded.target_transform_ == "log"
    np.testing.assert_allclose(loaded.predict(X_test), mean, rtol=1e-12)
    again = nh.tune(X, y, replay=res, random_state=0, progress=False)
    np.testing.assert_array_equal(again.model.predict(X_test), mean)
    est = nh.HyperoptKRR(time_budget=8.0, random_state=0, progress=False).fit(X, y)
    assert est.transform_.chosen == "log"
    assert est.model_.target_transform_ == "log"
    np.testing.assert_array_equal(est.predict(X_test),
                                  est.model_.predict(apply_standardization(X_test, est.x_mean_, est.x_scale_)))
    np.testing.assert_allclose(load_model(save_model(tmp_path / "h.npz", est)).predict(X_test), est.predict(X_test),
                               rtol=1e-12)


def test_the_choice_holds_out_every_row_once_on_small_tables_and_one_split_on_large_ones():
    small = choice_splits(2344, seed=0)
    assert len(small) == _features.CHOICE_FOLDS
    held = np.concatenate([v for _, v in small])
    np.testing.assert_array_equal(np.sort(held), np.arange(2344))
    for tr, val in small:
        assert np.intersect1d(tr, val).size == 0 and tr.size + val.size == 2344
    np.testing.assert_array_equal(choice_splits(2344, seed=0)[1][1], small[1][1])  # seeded
    (tr, val), = choice_splits(50_000, seed=3)
    assert val.size == _features.CHOICE_HELD and tr.size == _features.CHOICE_ROWS
    assert np.intersect1d(tr, val).size == 0


def test_the_command_line_says_what_was_chosen(quick_choice, tmp_path, capsys):
    import json

    from nyhopt.cli import main

    X, y = _priced_table()
    path = tmp_path / "d.csv"
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", header="a,b,c,price", comments="")
    summary, model = tmp_path / "s.json", tmp_path / "m.npz"
    assert main(["tune", str(path), "--target", "price", "--time-budget", "8", "--out", str(model),
                 "--json", str(summary)]) == 0
    out = capsys.readouterr().out
    assert "transform: log (held-out RMSE scale " in out and "in log units" in out
    s = json.loads(summary.read_text())
    assert s["transform"]["chosen"] == "log" and s["transform"]["candidates"] == ["scale", "log"]
    loaded = load_model(model)
    assert loaded.model_.target_transform_ == "log"
    import pandas as pd

    assert np.all(loaded.predict(pd.DataFrame(X[:20], columns=["a", "b", "c"])) > 0)


@pytest.mark.gpu
def test_the_warp_and_log_y_on_the_device(quick_choice):
    from nyhopt.backend import cupy_or_none

    cp = cupy_or_none()
    X, y = _skewed_table()
    Xs = apply_standardization(X, *standardization(X))
    w = fit_warp(cp.asarray(Xs), [0, 3])
    np.testing.assert_allclose(w.center, fit_warp(Xs, [0, 3]).center)
    out = apply_warp(cp.asarray(Xs), w)
    assert isinstance(out, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(out), apply_warp(Xs, w), rtol=1e-12, atol=1e-12)
    Xp, yp = _priced_table()
    res = nh.tune(cp.asarray(Xp), cp.asarray(yp), time_budget=8.0, random_state=0, progress=False)
    assert res.transform is not None and res.transform.candidates == ("scale", "log")
    pred = res.model.predict(cp.asarray(Xp[:20]))
    assert isinstance(pred, cp.ndarray) and np.all(cp.asnumpy(pred) > 0)
