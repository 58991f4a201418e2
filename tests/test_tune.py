"""The tuning loop (nyhopt.tune) and the self-tuning estimators (HyperoptKRR)."""
from __future__ import annotations

import io
import sys

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.backend import cupy_or_none
from nyhopt.optim import History, TuneRecord, TuneResult, tune
from nyhopt.optim._init import initial_centers, median_heuristic

from conftest import require_data

OBJECTIVES = ["holdout", "loocv", "gcv", "creg", "sgpr", "prop", "stoch-prop"]


@pytest.fixture(scope="module")
def mg():
    """A 300-row subset of the mg training split (standardized, as in the paper)."""
    from nyhopt.datasets import load_dataset

    data_dir = require_data("mg").parent
    ds = load_dataset("mg", data_dir=data_dir, seed=0)
    return ds.X_train[:300], ds.y_train[:300], ds.X_test, ds.y_test


@pytest.fixture(scope="module")
def toy():
    rng = np.random.default_rng(3)
    X = rng.uniform(-1.5, 1.5, size=(200, 3))
    y = 10.0 + 3.0 * (np.sin(3 * X[:, 0]) + 0.5 * X[:, 1] ** 2) + 0.1 * rng.normal(size=200)
    return X, y


def _quick(X, y, **kw):
    kw.setdefault("centers", 15)
    kw.setdefault("epochs", 5)
    kw.setdefault("progress", False)
    return tune(X, y, **kw)


# ----------------------------------------------------------------------------- real data, every objective


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_tuning_decreases_objective_on_real_data(mg, objective):
    X, y, X_te, y_te = mg
    res = tune(X, y, objective=objective, centers=20, epochs=12, lr=0.05, random_state=0,
               progress=False, patience=None, validation=(X_te, y_te))
    obj = res.history.objective
    assert len(res.history) == 13 and res.stop_reason == "epochs"
    assert np.all(np.isfinite(obj))
    assert obj[-1] < obj[0], f"{objective}: {obj[0]} -> {obj[-1]}"
    assert res.history.objective[res.best_epoch] == obj.min()
    assert res.objective.name == objective
    # The final model predicts far better than the mean on held-out data.
    rmse = np.sqrt(np.mean((res.model.predict(X_te) - y_te) ** 2))
    assert rmse < 0.9 * np.std(y_te)
    tracked = set(np.flatnonzero(np.isfinite(res.history.validation_error)).tolist())
    if objective in ("holdout", "stoch-prop"):  # a solve per tracked epoch: every 20th, the last, the best
        assert tracked == {0, 12, res.best_epoch}
    else:  # the objective's own fit, read at every epoch
        assert tracked == set(range(13))


def test_tuning_decreases_objective_on_real_classification():
    from nyhopt.datasets import load_dataset

    ds = load_dataset("svmguide1", data_dir=require_data("svmguide1").parent)
    X, y = ds.X_train[::6], ds.y_train[::6]
    res = tune(X, y, objective="prop", centers=20, epochs=10, progress=False, patience=None)
    assert res.task == "classification"
    assert res.history.objective[-1] < res.history.objective[0]
    assert isinstance(res.model, nh.NystromKRRClassifier)
    assert np.mean(res.model.predict(ds.X_test) != ds.y_test) < 0.2


# ----------------------------------------------------------------------------- the loop


def test_result_fields_and_best_params_model(toy):
    X, y = toy
    res = _quick(X, y, epochs=6, patience=None, standardize=False)  # the references below take X as it is
    assert isinstance(res, TuneResult) and isinstance(res.history, History)
    h = res.history
    assert h.epoch.tolist() == list(range(7))
    assert h.lengthscale.shape == (7, 3) and h.penalty.shape == (7,)
    assert np.all(np.diff(h.time) >= 0) and res.elapsed >= h.time[-1]
    assert set(h[0].terms) and np.isclose(sum(h[0].terms.values()), h[0].objective, rtol=1e-12)
    # Initialization of the paper: 1/n, the median heuristic in every dimension, training rows.
    assert h[0].penalty == pytest.approx(1 / 200, rel=1e-14)
    np.testing.assert_allclose(h.lengthscale[0], median_heuristic(X, random_state=None), rtol=1e-14)
    # params are the best point; the model is NystromKRR fitted with them on standardized targets.
    assert res.best_epoch == int(np.argmin(h.objective))
    assert res.objective.value(res.params) == pytest.approx(h.objective.min(), rel=1e-12)
    ys = (y - y.mean()) / y.std()
    ref = nh.NystromKRR(nh.GaussianKernel(res.params.lengthscale), penalty=res.params.penalty,
                        centers=res.params.centers, solver="direct").fit(X, ys)
    np.testing.assert_allclose(res.model.predict(X), y.mean() + y.std() * ref.predict(X), rtol=1e-12)
    assert isinstance(res.model, nh.NystromKRR)


def test_initial_centers_are_training_rows(toy):
    X, y = toy
    Z = initial_centers(X, 15, random_state=0)
    assert Z.shape == (15, 3) and Z.dtype == np.float64
    rows = {tuple(r) for r in X}
    assert all(tuple(z) in rows for z in Z) and len({tuple(z) for z in Z}) == 15


def test_inputs_not_modified_and_dtype(toy):
    X, y = toy
    X32, y32 = X.astype(np.float32), y.astype(np.float32)
    snap = (X32.copy(), y32.copy())
    res = _quick(X32, y32, epochs=2)
    np.testing.assert_array_equal(X32, snap[0])
    np.testing.assert_array_equal(y32, snap[1])
    assert res.objective.X.dtype == np.float32 and res.params.centers.dtype == np.float64
    res64 = _quick(X32, y32, epochs=1, dtype="float64")
    assert res64.objective.X.dtype == np.float64


def test_freeze_keeps_fields(toy):
    X, y = toy
    Z0 = X[:15].copy()
    res = _quick(X, y, centers=Z0, freeze=("centers", "penalty"), penalty=1e-3, lengthscale=0.7,
                 patience=None, epochs=4)
    np.testing.assert_array_equal(res.params.centers, Z0)
    pen = res.history.penalty
    assert np.all(pen == pen[0]) and pen[0] == pytest.approx(1e-3, rel=1e-15)
    assert not np.allclose(res.history.lengthscale[-1], 0.7)
    res = _quick(X, y, freeze="lengthscale", lengthscale=[0.5, 1.0, 2.0], patience=None)
    np.testing.assert_allclose(res.history.lengthscale, [[0.5, 1.0, 2.0]] * 6, rtol=1e-15)


def test_ard_false_single_lengthscale(toy):
    X, y = toy
    res = _quick(X, y, ard=False)
    assert res.params.log_lengthscale.shape == (1,)
    with pytest.raises(ValueError, match="ard=False"):
        _quick(X, y, ard=False, lengthscale=[1.0, 2.0, 3.0])


def test_patience_and_callback(toy):
    X, y = toy
    res = _quick(X, y, epochs=50, patience=3, min_delta=1e9)  # nothing counts as an improvement
    assert res.stop_reason == "patience" and len(res.history) == 4
    seen = []

    def cb(epoch, record):
        seen.append((epoch, record.objective))
        return epoch == 2

    res = _quick(X, y, epochs=50, callback=cb)
    assert res.stop_reason == "callback" and len(res.history) == 3
    assert [e for e, _ in seen] == [0, 1, 2]
    assert [v for _, v in seen] == res.history.objective.tolist()


def test_validation_fraction_and_tuple(toy):
    X, y = toy
    res = _quick(X, y, validation=0.25)
    assert res.objective.n == 150
    assert np.isfinite(res.history.validation_error).all() and np.isfinite(res.history.train_error).all()
    res2 = _quick(X, y, validation=(X[:40], y[:40]), standardize=False)  # the reference takes X as it is
    v0 = res2.history[0].validation_error
    # Tracked error = RMSE (original units) of the N-KRR model at the initial hyperparameters.
    p = res2.history[0]
    ys = (y - y.mean()) / y.std()
    Z = initial_centers(X, 15, np.random.default_rng(0))
    ref = nh.NystromKRR(nh.GaussianKernel(p.lengthscale), penalty=p.penalty, centers=Z, solver="direct")
    pred = y.mean() + y.std() * ref.fit(X, ys).predict(X[:40])
    assert v0 == pytest.approx(np.sqrt(np.mean((pred - y[:40]) ** 2)), rel=1e-10)
    res3 = _quick(X, y, track_errors=True)
    assert np.isfinite(res3.history.train_error).all() and np.isnan(res3.history.validation_error).all()
    res4 = _quick(X, y)
    assert np.isnan(res4.history.train_error).all()


@pytest.mark.parametrize("objective", ["prop", ["prop", "gcv"]])
def test_validation_targets_with_another_number_of_outputs(toy, objective):
    # it failed after the first epoch with "cannot reshape array of size 40 into shape (40,2)"
    X, y = toy
    Y = np.c_[y, -y]
    with pytest.raises(ValueError, match=r"validation y has 1 output column\(s\) but y has 2"):
        _quick(X, Y, objective=objective, validation=(X[:40], y[:40]))
    with pytest.raises(ValueError, match=r"validation y has 2 output column\(s\) but y has 1"):
        nh.HyperoptKRR(objective=objective, centers=10, epochs=1).fit(X, y, validation=(X[:40], Y[:40]))
    assert np.isfinite(_quick(X, y, epochs=1, validation=(X[:40], y[:40, None])).history.validation_error).all()


def test_classification_auto_and_labels():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(240, 2))
    y3 = np.array(["a", "b", "c"])[(X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5).astype(int)]
    res = _quick(X, y3, centers=30, epochs=8, validation=0.25)
    assert res.task == "classification" and res.objective.p == 3
    assert res.objective.noise_variance == pytest.approx(1 / 3)  # one-hot: s2 = 1/K by default
    assert set(np.unique(res.model.predict(X))) <= {"a", "b", "c"}
    assert res.history.validation_error[-1] < 0.3
    y2 = (X[:, 0] > 0).astype(int)
    res = _quick(X, y2, centers=30)
    assert res.task == "classification" and res.objective.p == 1 and res.objective.noise_variance == 1.0
    np.testing.assert_array_equal(np.unique(res.objective.Y), [-1.0, 1.0])
    res = _quick(X, y2, task="regression")
    assert res.task == "regression"


def test_multi_output_regression(toy):
    X, y = toy
    Y = np.c_[y, -2 * y + 100]
    res = _quick(X, Y, epochs=3)
    assert res.model.predict(X).shape == (200, 2)
    assert res.objective.p == 2


def test_objective_options_passthrough(toy):
    X, y = toy
    opts = {"val_fraction": 0.5, "noise_variance": 0.25}
    res = _quick(X, y, objective="holdout", objective_options=opts, epochs=1)
    assert res.objective.name == "holdout" and res.objective.noise_variance == 0.25
    assert opts == {"val_fraction": 0.5, "noise_variance": 0.25}  # not modified
    with pytest.raises(ValueError, match="unknown option"):
        _quick(X, y, objective_options={"bogus": 1})


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"objective": "nope"}, ValueError, "unknown objective 'nope'"),
        ({"epochs": -1}, ValueError, "epochs"),
        ({"patience": 0}, ValueError, "patience"),
        ({"lr": 0}, ValueError, "lr"),
        ({"freeze": ("centres",)}, ValueError, "freeze"),
        ({"freeze": ("penalty", "lengthscale", "centers")}, ValueError, "nothing to tune"),
        ({"centers": 0}, ValueError, "centers"),
        ({"centers": 2.5}, TypeError, "centers"),
        ({"validation": "yes"}, TypeError, "validation"),
        ({"validation": 1.5}, ValueError, "validation"),
        ({"task": "ranking"}, ValueError, "task"),
        ({"dtype": "int32"}, ValueError, "dtype"),
        ({"callback": 3}, TypeError, "callback"),
        ({"kernel": "cosine"}, ValueError, "kernel"),
        ({"lengthscale": [1.0, 2.0]}, ValueError, "lengthscale"),
        ({"penalty": -1.0}, ValueError, "penalty"),
        ({"min_delta": -1.0}, ValueError, "min_delta"),
    ],
)
def test_bad_arguments(toy, kwargs, exc, match):
    X, y = toy
    with pytest.raises(exc, match=match):
        _quick(X, y, **kwargs)


def test_bad_data():
    X = np.ones((10, 2))
    with pytest.raises(ValueError, match="X"):
        _quick(np.array([1.0, np.nan]).reshape(2, 1), np.ones(2), centers=1)
    with pytest.raises(ValueError, match="y has 3 rows"):
        _quick(X, np.ones(3), task="regression", centers=2)
    with pytest.raises(ValueError, match="two classes"):
        _quick(X, np.zeros(10, dtype=int), task="classification", centers=2)


class _FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_only_on_a_terminal(toy, monkeypatch, capsys):
    X, y = toy
    fake = _FakeTTY()
    monkeypatch.setattr(sys, "stderr", fake)
    _quick(X, y, epochs=2, progress=True)
    assert "3/3 |" in fake.getvalue() and "objective" in fake.getvalue()
    fake2 = _FakeTTY()
    monkeypatch.setattr(sys, "stderr", fake2)
    _quick(X, y, epochs=2, progress=False)
    assert fake2.getvalue() == ""
    monkeypatch.undo()
    _quick(X, y, epochs=2, progress=True)  # stderr captured by pytest: not a terminal
    assert capsys.readouterr().err == ""


def test_history_columns_and_dict():
    recs = [TuneRecord(k, 1.0 / (k + 1), {"a": 0.5, "b": 0.5 / (k + 1)}, 0.1 * k, np.ones(2) * k,
                       np.nan, 0.2, float(k)) for k in range(3)]
    h = History(recs)
    assert h.lengthscale.shape == (3, 2) and h.term("b")[2] == pytest.approx(0.5 / 3)
    d = h.as_dict()
    assert d["epoch"] == [0, 1, 2] and d["terms"]["a"] == [0.5] * 3
    assert isinstance(h[1:], History) and len(h[1:]) == 2
    with pytest.raises(AttributeError):
        h.nope


# ----------------------------------------------------------------------------- estimators


def test_hyperopt_regressor_protocol(toy):
    X, y = toy
    est = nh.HyperoptKRR(centers=15, epochs=5, random_state=0, standardize=True)
    assert est.get_params()["epochs"] == 5 and "HyperoptKRR(" in repr(est)
    est.set_params(epochs=20, lr=0.1)
    with pytest.raises(ValueError, match="invalid parameter"):
        est.set_params(epoch=3)
    with pytest.raises(AttributeError, match="not fitted"):
        est.predict(X)
    est.fit(X, y)
    assert len(est.history_) == 21 and est.n_features_in_ == 3
    assert est.score(X, y) > 0.8
    # Standardization: same result as tuning on standardized inputs by hand.
    Xs = (X - X.mean(0)) / X.std(0)
    res = _quick(Xs, y, epochs=20, lr=0.1, random_state=0)
    np.testing.assert_allclose(est.predict(X), res.model.predict(Xs), rtol=1e-10)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :2])


def test_hyperopt_sklearn_clone(toy):
    sklearn = pytest.importorskip("sklearn")
    from sklearn.base import clone

    est = nh.HyperoptKRR(centers=15, epochs=2, kernel=nh.MaternKernel(1.0, nu=2.5), freeze=("centers",))
    c = clone(est)
    assert c.get_params(deep=False).keys() == est.get_params(deep=False).keys()
    assert c.freeze == ("centers",) and sklearn is not None


def test_hyperopt_classifier(toy):
    X, _ = toy
    y = np.where(X[:, 0] > 0, "pos", "neg")
    clf = nh.HyperoptKRRClassifier(centers=20, epochs=5, random_state=0, validation_fraction=0.2)
    clf.fit(X, y)
    assert clf.classes_.tolist() == ["neg", "pos"]
    assert clf.score(X, y) > 0.9 and clf.decision_function(X[:3]).shape == (3,)
    assert np.isfinite(clf.history_.validation_error).all()


@pytest.mark.gpu
def test_tune_on_cupy_matches_numpy(toy):
    cp = cupy_or_none()
    X, y = toy
    res_h = _quick(X, y, epochs=4)
    res_d = _quick(cp.asarray(X), cp.asarray(y), epochs=4)
    assert type(res_d.params.centers).__module__.startswith("cupy")
    np.testing.assert_allclose(res_d.history.objective, res_h.history.objective, rtol=1e-8)
    np.testing.assert_allclose(cp.asnumpy(res_d.model.predict(cp.asarray(X))), res_h.model.predict(X),
                               rtol=1e-6, atol=1e-8)



@pytest.mark.gpu
def test_tune_refuses_host_targets_for_device_data_before_tuning(toy, monkeypatch):
    """A list y with CuPy X is host data: refused at the start, as a NumPy y is, not after every epoch has run
    (the final model's fit raised the mixing TypeError)."""
    cp = cupy_or_none()
    X, y = toy
    import importlib

    tune_mod = importlib.import_module("nyhopt.optim.tune")

    def no_loop(*args, **kwargs):
        raise AssertionError("the tuning loop ran")

    monkeypatch.setattr(tune_mod, "_loop", no_loop)
    for targets in (y.tolist(), np.where(y > 0, "pos", "neg").tolist(), y, np.where(y > 0, "pos", "neg")):
        with pytest.raises(TypeError, match="CuPy|mix"):
            nh.tune(cp.asarray(X), targets, centers=10, epochs=2, progress=False)

def test_early_stopping_is_relative_to_the_objectives_progress():
    from nyhopt.optim._stopping import trend_stalled

    rng = np.random.default_rng(0)
    base = [10.0] + [5.0 + 0.5 * (-1) ** k for k in range(40)]
    slope = [10.0] + [5.0 - 0.01 * k + 0.5 * (-1) ** k for k in range(40)]
    assert trend_stalled(base, 10, 1e-3) and not trend_stalled(slope, 10, 1e-3)
    assert trend_stalled(slope, 10, 0.0)  # rel_delta=0: the classical rule alone
    assert trend_stalled(slope, 10, 1e-3, min_delta=1.0)  # min_delta still bounds an improvement
    # scale free: an affine change of the objective does not change the decision
    for a, b in ((1e-6, 0.0), (1e6, -3e7), (2.0, 1e9)):
        assert trend_stalled([a * v + b for v in slope], 10, 1e-3) == trend_stalled(slope, 10, 1e-3)
    noisy = [10.0] + list(5.0 - 0.002 * np.arange(40) + 0.05 * rng.standard_normal(40))
    assert not trend_stalled(noisy, 10, 1e-4) or trend_stalled(noisy, 10, 1e-2)

    # in tune: the rule never stops earlier than the classical one, and it stops where the trend stalled
    X = rng.uniform(-1, 1, size=(150, 2))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=150)
    kw = dict(objective="gcv", epochs=60, patience=3, lr=0.3)
    classic, relative = _quick(X, y, rel_delta=0.0, **kw), _quick(X, y, **kw)
    assert len(relative.history) >= len(classic.history)
    if relative.stop_reason == "patience":
        assert trend_stalled(relative.history.objective, 3, 1e-3)
    with pytest.raises(ValueError, match="rel_delta"):
        _quick(X, y, rel_delta=-1.0)
