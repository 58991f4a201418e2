"""Error tracking in the tuning loop: the exact objectives' own fit is read, other objectives every k-th epoch."""
from __future__ import annotations

import io
import math

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.objectives import make_objective
from nyhopt.optim import _tracking
from nyhopt.optim._progress import ProgressLines, make_progress
from nyhopt.optim._targets import encode_targets
from nyhopt.optim._tracking import TRACK_EVERY, ErrorTracker, track

EXACT = ["prop", "gcv", "loocv", "creg", "sgpr"]


def _data(n=240, seed=0, d=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d))
    return X, np.sin(3 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=n)


def _trackers(objective, X, y, X_val, y_val, task="regression", options=None):
    """An objective at a point, a tracker attached to it and one that solves on its own."""
    enc = encode_targets(y, task, X.shape[0], np, X.dtype)
    obj = make_objective(objective, X, enc.Y, **(options or {}))
    kernel = nh.GaussianKernel(np.ones(X.shape[1]))
    intercept = getattr(obj, "mean", "zero") == "constant"
    own = ErrorTracker(X, enc, y, X_val, y_val, kernel, X.dtype, "direct", fit_intercept=intercept)
    reused = ErrorTracker(X, enc, y, X_val, y_val, kernel, X.dtype, "direct", fit_intercept=intercept)
    rng = np.random.default_rng(1)
    params = nh.Params.from_natural(3e-3, rng.uniform(0.6, 1.4, X.shape[1]), X[rng.choice(len(X), 12, False)])
    for t in (own, reused):
        t.use_amplitude = obj.uses_amplitude
    return obj, params, own, reused


@pytest.mark.parametrize("objective,options", [(name, None) for name in EXACT] + [("prop", {"mean": "constant"})])
def test_the_objectives_fit_gives_the_errors_of_a_solve_of_its_own(objective, options, monkeypatch):
    X, y = _data()
    X_val, y_val = _data(80, seed=5)
    obj, params, own, reused = _trackers(objective, X, y, X_val, y_val, options=options)
    expected, expected_scores = own(params), own.last_scores
    assert reused.attach(obj) and reused.period == 1
    obj.value_and_grad(params)

    def no_solve(*args, **kwargs):
        raise AssertionError("the tracker solved on its own")

    monkeypatch.setattr(_tracking, "solve_alpha", no_solve)
    monkeypatch.setattr("nyhopt.posterior.direct_fit", no_solve)
    got = reused(params)
    # the same N-KRR model from two factorizations of one well-conditioned system (m = 12, lambda = 3e-3)
    assert got == pytest.approx(expected, rel=1e-7)
    assert reused.last_scores == pytest.approx(expected_scores, rel=1e-7)
    assert obj.last_fit is None  # read once: no n-sized array kept
    with pytest.raises(AssertionError, match="on its own"):  # the fit is gone: a solve would be needed
        reused(params)


def test_a_fit_at_other_params_is_not_read():
    X, y = _data()
    obj, params, own, reused = _trackers("gcv", X, y, X[:50] + 0.01, y[:50])
    reused.attach(obj)
    obj.value(params)
    other = params.replace(log_penalty=params.log_penalty + 0.5)
    assert reused(other) == pytest.approx(own(other), rel=1e-12)  # its own solve, at the other point


def test_classification_errors_from_the_objectives_fit():
    X, y = _data()
    labels = np.where(y > 0, "up", "down")
    X_val, y_val = X[:60] + 0.05, labels[:60]
    obj, params, own, reused = _trackers("prop", X, labels, X_val, y_val, task="classification")
    expected = own(params)
    reused.attach(obj)
    obj.value_and_grad(params)
    assert reused(params) == expected  # fractions of 240 and 60 rows: far from any rounding


def test_keeping_the_fit_changes_no_value_or_gradient():
    X, y = _data()
    plain = make_objective("sgpr", X, y)
    kept = make_objective("sgpr", X, y)
    kept.keep_fit = True
    params = nh.Params.from_natural(1e-2, np.full(3, 0.8), X[:10])
    v0, g0 = plain.value_and_grad(params)
    v1, g1 = kept.value_and_grad(params)
    assert v0 == v1 and kept.last_fit is not None and getattr(plain, "last_fit", None) is None
    for a, b in zip(g0, g1):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("objective", ["prop", "holdout"])
def test_tracking_leaves_the_tuning_bit_for_bit(objective):
    X, y = _data()
    kw = dict(objective=objective, centers=12, epochs=12, patience=None, progress=False, validation=0.25)
    a = nh.tune(X, y, track_errors=False, **kw)
    b = nh.tune(X, y, **kw)
    assert np.isnan(a.history.validation_error).all() and np.isfinite(b.history.validation_error).any()
    np.testing.assert_array_equal(a.history.objective, b.history.objective)
    np.testing.assert_array_equal(a.params.centers, b.params.centers)
    np.testing.assert_array_equal(a.model.alpha_, b.model.alpha_)


def test_other_objectives_track_every_kth_epoch_the_last_and_the_best():
    X, y = _data()
    epochs = 2 * TRACK_EVERY + 5
    res = nh.tune(X, y, objective="holdout", centers=12, epochs=epochs, patience=None, progress=False,
                  validation=0.25, lr=0.5, standardize=False)  # a run whose best epoch is not tracked in the loop
    assert res.best_epoch % TRACK_EVERY and res.best_epoch != epochs  # tracked after the loop
    tracked = set(np.flatnonzero(np.isfinite(res.history.validation_error)).tolist())
    assert tracked == {0, TRACK_EVERY, 2 * TRACK_EVERY, epochs, res.best_epoch}
    assert tracked == set(np.flatnonzero(np.isfinite(res.history.train_error)).tolist())
    # the best epoch, tracked after the loop, holds the final model's validation error
    X_tr = res.objective.X
    assert res.validation_scores["rmse"] == pytest.approx(res.history[res.best_epoch].validation_error, rel=1e-6)
    assert X_tr.shape[0] == 180


def test_track_skips_epochs_that_are_not_due():
    X, y = _data()
    obj, params, own, _ = _trackers("holdout", X, y, X[:40], y[:40])
    own.attach(obj)  # holdout fits a part of the rows: nothing to read
    assert own.source is None and own.period == TRACK_EVERY
    assert all(math.isnan(e) for e in track(own, params, 3))
    assert math.isnan(own.last_scores[0])
    assert all(math.isfinite(e) for e in track(own, params, 3, last=True))
    assert all(math.isfinite(e) for e in track(own, params, 2 * TRACK_EVERY))
    assert track(None, params, 0) == pytest.approx((math.nan, math.nan), nan_ok=True)
    own.every = 3
    assert all(math.isfinite(e) for e in track(own, params, 3))


class _FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_lines_only_when_asked_and_not_a_terminal():
    log = io.StringIO()
    assert make_progress(False, 10, stream=log) is None
    assert make_progress(True, 10, stream=log) is None  # a bar only on a terminal
    lines = make_progress("log", 3, tracked=True, has_val=True, stream=log)
    lines.update(0, 1.5, 0.01, 0.9, 1.1)
    lines.update(1, 1.2, 0.01, math.nan, math.nan)  # untracked: the last errors are shown
    lines.update(2, 1.1, 0.01, 0.8, 1.0)
    lines.close()
    out = log.getvalue().splitlines()
    assert out[0].startswith("tune: epoch 0/2,") and "val err 1.1" in out[0]
    assert out[-1].startswith("tune: epoch 2/2,") and "val err 1" in out[-1] and "left" not in out[-1]
    assert "\r" not in log.getvalue()
    tty = _FakeTTY()
    bar = make_progress("log", 3, stream=tty)
    bar.update(0, 1.5, 0.01, math.nan, math.nan)
    bar.close()
    assert "\r" in tty.getvalue() and "tune: epoch" not in tty.getvalue()


def test_progress_lines_at_most_every_interval():
    out = io.StringIO()
    now = [0.0]
    lines = ProgressLines(101, stream=out, interval=10.0, clock=lambda: now[0])
    for k in range(1, 101):  # one evaluation per second
        now[0] = float(k)
        lines.update(k, "")
    lines.close()
    epochs = [int(line.split()[2].split("/")[0]) for line in out.getvalue().splitlines()]
    assert epochs == list(range(0, 100, 10)) + [99]  # the first, one per 10 s, the last


def test_tune_accepts_progress_log_and_refuses_other_words(capsys):
    X, y = _data(60)
    nh.tune(X, y, centers=5, epochs=2, progress="log")
    err = capsys.readouterr().err  # pytest's capture is not a terminal
    assert err.startswith("tune prop: epoch 0/2,") and "tune prop: epoch 2/2," in err
    with pytest.raises(TypeError, match="progress must be True, False or 'log'"):
        nh.tune(X, y, centers=5, epochs=2, progress="yes")
