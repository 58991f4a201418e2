"""nyhopt.metrics, tune's validation scores and ``nyhopt predict --std``."""
from __future__ import annotations

import csv
import math
import warnings

import numpy as np
import pytest
from scipy import stats

import nyhopt as nh
from nyhopt import metrics


def test_metrics_against_scipy():
    rng = np.random.default_rng(0)
    y, mean, std = rng.normal(size=(3, 500))
    std = np.abs(std) + 0.1
    assert metrics.nlpd(y, mean, std) == pytest.approx(-np.mean(stats.norm.logpdf(y, mean, std)), rel=1e-13)
    lo, hi = stats.norm.interval(0.9, mean, std)
    assert metrics.coverage(y, mean, std, level=0.9) == np.mean((y >= lo) & (y <= hi))
    assert metrics.rmse(y, mean) == pytest.approx(np.sqrt(np.mean((y - mean) ** 2)), rel=1e-14)
    # calibrated draws: coverage near the level
    draws = mean + std * rng.normal(size=500)
    assert abs(metrics.coverage(draws, mean, std) - 0.95) < 0.03
    # a column vector y against 1-D predictions; two outputs averaged over all values
    assert metrics.rmse(y[:, None], mean) == metrics.rmse(y, mean)
    Y = np.stack([y, y], 1)
    M = np.stack([mean, mean], 1)
    S = np.stack([std, std], 1)
    assert metrics.nlpd(Y, M, S) == pytest.approx(metrics.nlpd(y, mean, std), rel=1e-14)
    # the differences are scaled by a power of two first: finite values near the float64 limit do not overflow
    assert metrics.rmse([1e200, -1.7e308], [-1e200, -1.6e308]) == pytest.approx(np.sqrt(0.5) * 1e307, rel=1e-14)
    assert metrics.rmse([3e-310, 0.0], [0.0, 4e-310]) == pytest.approx(np.sqrt(12.5) * 1e-310, rel=1e-12)


def test_metrics_bad_input():
    y = np.zeros(3)
    with pytest.raises(ValueError, match="std must be > 0"):
        metrics.nlpd(y, y, np.array([1.0, 0.0, 1.0]))
    with pytest.raises(ValueError, match="std has shape"):
        metrics.coverage(y, y, np.ones(4))
    with pytest.raises(ValueError, match="y has shape"):
        metrics.rmse(np.zeros(4), y)
    with pytest.raises(ValueError, match="level"):
        metrics.coverage(y, y, np.ones(3), level=95)
    with pytest.raises(ValueError, match="mean contains NaN"):
        metrics.rmse(y, np.array([0.0, np.nan, 0.0]))


def test_block_partials_combine_to_the_one_block_values():
    """The partial sums of row blocks (one task each on a cluster) combine to the metrics of the whole
    arrays (one block, the in-memory path): blocks of very different magnitudes (their own powers of
    two), an empty block, 2-D blocks; the value checks raise in order whichever block fails them."""
    from nyhopt.metrics._metric_sums import block_partials, combine

    rng = np.random.default_rng(3)
    y, mean = rng.normal(size=(2, 300))
    std = rng.uniform(0.2, 1.5, 300)
    y[:100] *= 1e300
    mean[:100] *= 1e300
    y[100:150] *= 1e-300
    labels = (y > 0).astype(float)
    cuts = [0, 100, 100, 150, 299, 300]

    def blocks(kind, names, *arrays, z=None):
        parts = [block_partials(kind, *(a[i:j] for a in arrays), z=z) for i, j in zip(cuts, cuts[1:])]
        return combine(kind, parts, names, arrays[0].size), combine(kind, [block_partials(kind, *arrays, z=z)],
                                                                    names, arrays[0].size)

    two, three = ("y", "mean"), ("y", "mean", "std")
    for kind, args, names in [("rmse", (y, mean), two), ("rmse+mean", (y + 3, mean), two),
                              ("rmse", (y[100:150], mean[100:150]), two),
                              ("nlpd", (y[150:], mean[150:], std[150:]), three),
                              ("coverage", (y, mean, 1e300 * std), three), ("labels", (labels, mean), two),
                              ("labels", (np.sign(y), mean), two), ("argmax", (np.c_[y, -y], np.c_[mean, std]), two)]:
        got, want = blocks(kind, names, *args, z=1.5)
        assert got == pytest.approx(want, rel=1e-13, abs=0), kind
    bad_std, nan_y = std.copy(), y.copy()
    bad_std[200], nan_y[20] = 0.0, np.nan
    with pytest.raises(ValueError, match="std must be > 0"):  # checked before y's NaN, in another block
        blocks("nlpd", three, nan_y, mean, bad_std)
    with pytest.raises(ValueError, match="y_pred contains NaN"):
        blocks("rmse", ("y_true", "y_pred"), y, nan_y)


def data(n=240, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 2))
    return X, np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=n)


def test_tune_reports_validation_scores():
    X, y = data()
    res = nh.tune(X, y, objective="sgpr", centers=15, epochs=5, validation=0.25, progress=False, random_state=0)
    s = res.validation_scores
    assert set(s) == {"rmse", "nlpd", "coverage"} and 0 <= s["coverage"] <= 1 and math.isfinite(s["nlpd"])
    assert s["rmse"] == pytest.approx(res.history[res.best_epoch].validation_error, rel=1e-6)
    # per epoch in the history (the direct solver's tracker), the best epoch's being the final model's
    best = res.history[res.best_epoch]
    assert np.all(np.isfinite(res.history.validation_nlpd)) and np.all(res.history.validation_coverage <= 1)
    assert best.validation_nlpd == pytest.approx(s["nlpd"], rel=1e-9, abs=1e-12)
    assert best.validation_coverage == s["coverage"]
    assert "validation_nlpd" in res.history.as_dict()
    est = nh.HyperoptKRR(objective="gcv", centers=15, epochs=5, validation_fraction=0.25, random_state=0).fit(X, y)
    assert est.history_[est.best_epoch_].validation_nlpd == pytest.approx(est.validation_scores_["nlpd"], rel=1e-9)
    assert set(est.validation_scores_) == {"rmse", "nlpd", "coverage"}
    assert nh.tune(X, y, centers=15, epochs=2, progress=False).validation_scores is None
    assert nh.tune(X, y > 0, centers=15, epochs=2, validation=0.25, progress=False).validation_scores is None


def test_cli_predict_std(tmp_path, capsys):
    from nyhopt.cli import main

    X, y = data()
    path = tmp_path / "d.csv"
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", header="a,b,t", comments="")
    model = tmp_path / "m.npz"
    assert main(["tune", str(path), "--target", "t", "--objective", "sgpr", "--centers", "10", "--epochs", "3",
                 "--validation", "0.25", "--out", str(model), "--quiet"]) == 0
    out = tmp_path / "p.csv"
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # a warning already shown at this line in the run is shown again
        assert main(["predict", str(model), str(path), "--out", str(out), "--std"]) == 0
    assert "feature names" not in capsys.readouterr().err  # columns are matched by name, as without --std
    with open(out) as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["t", "t_std"] and len(rows) == 241
    values = np.array(rows[1:], dtype=float)
    mean, std = nh.load_model(model).predict(X, return_std=True)
    np.testing.assert_allclose(values[:, 0], mean, rtol=1e-15)
    np.testing.assert_allclose(values[:, 1], std, rtol=1e-15)
    labels = tmp_path / "c.csv"
    np.savetxt(labels, np.column_stack([X, y > 0]), delimiter=",", header="a,b,t", comments="")
    assert main(["tune", str(labels), "--target", "t", "--centers", "10", "--epochs", "2", "--out",
                 str(tmp_path / "c.npz"), "--quiet"]) == 0
    assert main(["predict", str(tmp_path / "c.npz"), str(labels), "--std"]) != 0


@pytest.mark.gpu
def test_metrics_take_host_and_device_arrays_together():
    """y and std follow mean's device (an estimator's CuPy mean with host targets or error bars)."""
    import cupy as cp

    rng = np.random.default_rng(3)
    y, mean, std = rng.normal(size=40), rng.normal(size=40), rng.uniform(0.5, 2.0, size=40)
    ref = (metrics.rmse(y, mean), metrics.nlpd(y, mean, std), metrics.coverage(y, mean, std))
    for yy, mm, ss in [(cp.asarray(y), cp.asarray(mean), cp.asarray(std)), (y, cp.asarray(mean), std),
                       (cp.asarray(y), mean, cp.asarray(std)), (y, mean, cp.asarray(std))]:
        got = (metrics.rmse(yy, mm), metrics.nlpd(yy, mm, ss), metrics.coverage(yy, mm, ss))
        assert all(type(v) is float for v in got)
        np.testing.assert_allclose(got, ref, rtol=1e-12)
