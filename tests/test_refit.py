"""The final fit of an in-memory budgeted run chosen on its held-out rows (nyhopt/optim/budget/_refit.py)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.optim.budget import _refit
from nyhopt.optim.budget._grow import add_centers
from nyhopt.optim.budget._rows import FINAL_MAX_CENTERS


@pytest.fixture
def few_held_out(monkeypatch):
    monkeypatch.setattr(_refit, "MIN_HELD_OUT", 100)  # a small table's 10% held out is enough here


def _problem(n=2000, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.3 * X[:, 2] ** 2 + 0.02 * rng.normal(size=n)
    return X, y


def _run(seconds_left, n_tr=32400, n_all=36000, fit64=lambda m: 1e-10 * m * m * 32400, f32=True):
    rows = SimpleNamespace(fit_factor=lambda n, m: 0.55 if f32 else 1.0)
    return SimpleNamespace(n_tr=n_tr, n_all=n_all, fit_seconds=fit64, epoch_rows=rows,
                           usable=lambda final=False: seconds_left)


def test_widest_buys_three_fits_within_its_caps():
    m = 1000
    top = _refit.widest(_run(20.0), m)
    cost = lambda k: _refit.FITS * 1e-10 * k * k * 32400 * 0.55 * 36000 / 32400
    assert cost(top) <= 20.0 < cost(top + 1)
    assert _refit.widest(_run(1e9), m) == _refit.WIDE_FACTOR * m  # the factor caps it
    assert _refit.widest(_run(1e9, n_tr=3000, n_all=3300), 200) == 3000 // _refit.MIN_ROWS_PER_CENTER
    assert _refit.widest(_run(1e9, n_tr=90000, n_all=95000), 4000) == FINAL_MAX_CENTERS
    assert _refit.widest(_run(0.0), m) == m  # no time: the tuned centers


def test_new_centers_in_draw_order_are_the_same_rows():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 2))
    Z0 = X[:5]
    a = add_centers(X, Z0, np.ones(2), 40, np.random.default_rng(1))
    b = add_centers(X, Z0, np.ones(2), 40, np.random.default_rng(1), in_draw_order=True)
    np.testing.assert_array_equal(a[:5], b[:5])
    key = lambda Z: sorted(map(tuple, Z[5:]))
    assert key(a) == key(b)
    assert not np.array_equal(a[5:], b[5:])  # the rows of X in their order, against the draw's


def test_budgeted_run_chooses_its_final_fit_on_held_out_rows(tick_clock, few_held_out, monkeypatch):
    monkeypatch.setattr(_refit, "REFIT_Z", -math.inf)  # whatever lowers the mean error wins here
    X, y = _problem()
    X0, y0 = X.copy(), y.copy()
    res = nh.tune(X, y, objective="sgpr", centers=(40, 80), time_budget=6.0, progress=False)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    last = res.stages[-1]
    assert np.isfinite(last.validation_error)  # no last stage on all the rows: the choice replaced it
    assert res.final_centers >= res.stages[-1].centers
    tuned = [s for s in res.stages if s.centers <= res.params.n_centers]
    assert res.params.n_centers <= res.final_centers
    assert res.model.centers_.shape[0] == res.params.n_centers and tuned
    assert res.elapsed <= 1.1 * 6.0
    mu, sd = res.model.predict(X[:5], return_std=True)
    assert np.all(np.isfinite(mu)) and np.all(sd > 0)
    again = nh.tune(X, y, objective="sgpr", centers=(40, 80), replay=res, progress=False)  # the choice replays bit for bit
    np.testing.assert_array_equal(again.params.centers, res.params.centers)
    assert again.params.penalty == res.params.penalty and again.final_centers == res.final_centers


def test_without_a_clear_gain_the_run_ends_as_before(tick_clock, few_held_out, monkeypatch):
    monkeypatch.setattr(_refit, "REFIT_Z", math.inf)
    X, y = _problem()
    res = nh.tune(X, y, objective="sgpr", centers=(40, 80), time_budget=6.0, epochs=30, progress=False)
    assert res.final_centers == 0
    assert math.isnan(res.stages[-1].validation_error)  # the last stage on all the rows, as before


def test_few_held_out_rows_or_classification_leave_the_fit_alone(tick_clock):
    X, y = _problem(600)
    res = nh.tune(X, y, objective="sgpr", time_budget=3.0, progress=False)  # 60 rows held out
    assert res.final_centers == 0
    labels = np.where(y > np.median(y), "hi", "lo")
    res = nh.tune(X, labels, time_budget=3.0, progress=False)
    assert res.final_centers == 0
