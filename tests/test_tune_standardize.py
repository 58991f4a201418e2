"""nh.tune standardizes X by default (issue 46, item 1): the door, every path, the model that takes raw X."""
from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.backend import cupy_or_none
from nyhopt.io import load_model, save_model
from nyhopt.models._scaling import apply_standardization, standardization

KW = dict(centers=40, epochs=15, progress=False, random_state=0)


def _mixed_scales(n, seed=0):
    """One feature of std 6e4 next to three of std 0.1, a smooth function of all of them."""
    rng = np.random.default_rng(seed)
    X = np.c_[2e5 + 6e4 * rng.normal(size=n), 0.1 * rng.normal(size=(n, 3))]
    y = np.sin(X[:, 0] / 4e4) + np.cos(12 * X[:, 1]) + 4 * X[:, 2] + 0.05 * rng.normal(size=n)
    return X, y


@pytest.fixture(scope="module")
def table():
    X, y = _mixed_scales(4000)
    return X[:3000], y[:3000], X[3000:], y[3000:]


def _rmse(a, b):
    return float(np.sqrt(np.mean((a - b) ** 2)))


def _by_hand(X):
    mean, scale = standardization(X)
    return mean, scale, apply_standardization(X, mean, scale)


def test_mixed_scales_reach_hyperopt_and_beat_raw_coordinates(table):
    X, y, X_te, y_te = table
    kw = dict(centers=100, epochs=60, random_state=0)
    tuned = nh.tune(X, y, progress=False, **kw)
    est = nh.HyperoptKRR(**kw).fit(X, y)
    raw = nh.tune(X, y, progress=False, standardize=False, **kw)
    err, ref, err_raw = (_rmse(m.predict(X_te), y_te) for m in (tuned.model, est, raw.model))
    assert err <= 1.03 * ref  # measured: equal (the same statistics, then the same run)
    assert err_raw > 2 * err  # measured: 0.66 against 0.060 (the targets' std is 0.92)
    np.testing.assert_array_equal(est.x_mean_, tuned.model.input_mean_)
    assert est.model_.input_mean_ is None  # HyperoptKRR standardizes once, itself


def test_raw_predictions_equal_a_run_on_data_standardized_by_hand(table):
    X, y, X_te, y_te = table
    X0 = X.copy()
    res = nh.tune(X, y, **KW)
    np.testing.assert_array_equal(X, X0)  # the user's X is not modified
    mean, scale, Xs = _by_hand(X)
    ref = nh.tune(Xs, y, standardize=False, **KW)
    assert ref.model.input_mean_ is None and ref.model.input_scale_ is None
    np.testing.assert_array_equal(res.model.input_mean_, mean)
    np.testing.assert_array_equal(res.model.input_scale_, scale)
    np.testing.assert_array_equal(res.history.objective, ref.history.objective)
    np.testing.assert_array_equal(res.params.centers, ref.params.centers)  # in standardized coordinates
    Xs_te = apply_standardization(X_te, mean, scale)
    mu, sd = res.model.predict(X_te, return_std=True)
    mu_ref, sd_ref = ref.model.predict(Xs_te, return_std=True)
    np.testing.assert_allclose(mu, mu_ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sd, sd_ref, rtol=1e-10)
    assert res.model.score(X_te, y_te) == pytest.approx(ref.model.score(Xs_te, y_te), rel=1e-10)


def test_lengthscales_map_back_to_the_units_of_x(table):
    """A lengthscale l~ in standardized units is sigma * l~ in the units of X (docs/tuning.md, "Inputs")."""
    X, y, X_te, _ = table
    res = nh.tune(X, y, **dict(KW, epochs=3))
    mean, scale = res.model.input_mean_, res.model.input_scale_
    p = res.params
    raw = nh.NystromKRR(nh.GaussianKernel(scale * p.lengthscale), penalty=p.penalty,
                        centers=mean + scale * p.centers, solver="direct", normalize_y=True).fit(X, y)
    np.testing.assert_allclose(raw.predict(X_te), res.model.predict(X_te), rtol=1e-6, atol=1e-8)


def test_validation_rows_are_standardized_with_the_training_statistics(table):
    X, y, X_te, y_te = table
    X_val0 = X_te.copy()
    res = nh.tune(X, y, validation=(X_te, y_te), **KW)
    np.testing.assert_array_equal(X_te, X_val0)
    mean, scale, Xs = _by_hand(X)
    ref = nh.tune(Xs, y, validation=(apply_standardization(X_te, mean, scale), y_te), standardize=False, **KW)
    np.testing.assert_array_equal(res.history.validation_error, ref.history.validation_error)
    assert res.validation_scores == ref.validation_scores
    frac = nh.tune(X, y, validation=0.2, **KW)  # statistics of all the rows, then the split
    np.testing.assert_array_equal(frac.model.input_mean_, mean)


def test_a_list_of_objectives_standardizes_once(table):
    X, y, X_te, _ = table
    kw = dict(KW, objective=["prop", "gcv"], validation=0.25, epochs=4)
    res = nh.tune(X, y, **kw)
    mean, scale, Xs = _by_hand(X)
    ref = nh.tune(Xs, y, standardize=False, **kw)
    assert [c.validation_error for c in res.candidates] == [c.validation_error for c in ref.candidates]
    np.testing.assert_allclose(res.model.predict(X_te), ref.model.predict(apply_standardization(X_te, mean, scale)),
                               rtol=1e-10, atol=1e-12)


def test_a_time_budget_gets_the_scaling_too(table):
    X, y, X_te, _ = table
    res = nh.tune(X[:600], y[:600], time_budget=30, centers=(20, 40), epochs=4, progress=False)
    mean, scale, _ = _by_hand(X[:600])
    np.testing.assert_array_equal(res.model.input_mean_, mean)
    bare = pickle.loads(pickle.dumps(res.model))
    bare.input_mean_ = bare.input_scale_ = None  # the same model, in the coordinates it was tuned in
    np.testing.assert_allclose(res.model.predict(X_te), bare.predict(apply_standardization(X_te, mean, scale)),
                               rtol=1e-12)
    assert np.abs(res.params.centers).max() < 10  # standardized coordinates


def test_classifiers_take_raw_x():
    X, y = _mixed_scales(600, seed=1)
    labels = np.where(y > np.median(y), "high", "low")
    res = nh.tune(X, labels, **KW)
    mean, scale, Xs = _by_hand(X)
    ref = nh.tune(Xs, labels, standardize=False, **KW)
    np.testing.assert_allclose(res.model.predict_proba(X[:50]), ref.model.predict_proba(Xs[:50]), rtol=1e-10)
    np.testing.assert_array_equal(res.model.predict(X), ref.model.predict(Xs))
    assert res.model.score(X, labels) == ref.model.score(Xs, labels) > 0.8


def test_the_model_keeps_its_scaling_in_files_and_pickles(table, tmp_path):
    X, y, X_te, _ = table
    model = nh.tune(X, y, **KW).model
    mu, sd = model.predict(X_te, return_std=True)
    for loaded in (load_model(save_model(tmp_path / "m.npz", model)), pickle.loads(pickle.dumps(model))):
        np.testing.assert_array_equal(loaded.input_mean_, model.input_mean_)
        np.testing.assert_array_equal(loaded.input_scale_, model.input_scale_)
        mu2, sd2 = loaded.predict(X_te, return_std=True)
        np.testing.assert_allclose(mu2, mu, rtol=1e-12)
        np.testing.assert_allclose(sd2, sd, rtol=1e-12)
    plain = nh.NystromKRR(centers=20, random_state=0).fit(X[:500], y[:500])
    assert plain.input_mean_ is None and load_model(save_model(tmp_path / "p.npz", plain)).input_mean_ is None


def test_initial_centers_are_in_standardized_coordinates(table):
    X, y, _, _ = table
    with pytest.warns(UserWarning, match="standardized coordinates"):
        nh.tune(X, y, **dict(KW, centers=X[:10], epochs=1))
    mean, scale, Xs = _by_hand(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = nh.tune(X, y, **dict(KW, centers=Xs[:10], epochs=0))
    np.testing.assert_array_equal(res.params.centers, Xs[:10])


def test_standardize_must_be_a_bool_or_scale(table):
    X, y, _, _ = table
    with pytest.raises(TypeError, match="standardize must be True, False or \"scale\""):
        nh.tune(X, y, standardize="yes", **KW)


def test_dask_statistics_and_lazy_standardization():
    """The dask door's pieces on the synchronous scheduler (tune itself on dask: tests/test_distributed.py)."""
    da = pytest.importorskip("dask.array")
    import dask

    from nyhopt.models._scaling import standardize_lazily
    from nyhopt.optim._standardize import dask_statistics

    X, y = _mixed_scales(900, seed=2)
    X[:, 3] = 1e300 * np.linspace(0.5, 1.0, 900)  # squares overflow float64: the statistics do not
    X = np.c_[X, np.full(900, 5.0)]  # a constant column: only centered
    Xd = da.from_array(X, chunks=(250, 5))
    with dask.config.set(scheduler="synchronous"):
        mean, scale = dask_statistics(Xd, lambda arrays: dask.compute(*arrays))
        ref_mean, ref_scale = standardization(X)
        np.testing.assert_allclose(mean, ref_mean, rtol=1e-14)
        np.testing.assert_allclose(scale, ref_scale, rtol=1e-12)
        assert np.all(np.isfinite(scale)) and scale[4] == 1.0 and mean[4] == 5.0
        lazy = standardize_lazily(Xd, ref_mean, ref_scale)
        np.testing.assert_array_equal(lazy.compute(), apply_standardization(X, ref_mean, ref_scale))
        model = nh.tune(X[:, :3], y, **KW).model  # in memory; predictions for dask rows, raw
        Xd3 = Xd[:, :3]
        mu, sd = model.predict(Xd3, return_std=True)
        want_mu, want_sd = model.predict(X[:, :3], return_std=True)
        np.testing.assert_allclose(mu.compute(), want_mu, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(sd.compute(), want_sd, rtol=1e-12)
        assert model.score(Xd3, da.from_array(y, chunks=250)) == pytest.approx(model.score(X[:, :3], y), rel=1e-12)
        bad = np.array(X)
        bad[5, 0] = np.nan
        with pytest.raises(ValueError, match="NaN or infinity"):
            dask_statistics(da.from_array(bad, chunks=(250, 5)), lambda arrays: dask.compute(*arrays))


@pytest.mark.gpu
def test_cupy_inputs_are_standardized_on_the_device():
    cp = cupy_or_none()
    X, y = _mixed_scales(500, seed=3)
    res = nh.tune(cp.asarray(X), cp.asarray(y), **KW)
    host = nh.tune(X, y, **KW)
    np.testing.assert_allclose(res.model.input_mean_, host.model.input_mean_, rtol=1e-12)
    np.testing.assert_allclose(res.model.input_scale_, host.model.input_scale_, rtol=1e-12)
    pred = res.model.predict(cp.asarray(X[:50]))
    assert isinstance(pred, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(pred), host.model.predict(X[:50]), rtol=1e-6, atol=1e-8)
