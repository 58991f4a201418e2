"""A budgeted run on large data: nested row samples grown with the centers (nyhopt/optim/budget/_rows.py).

The threshold (40 000 training rows) is lowered here so that small problems
take the same path; the clock is simulated where a schedule is compared.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import nyhopt as nh
from nyhopt import Params
from nyhopt.optim.budget import _clock as _budget, _finish, _rows, _schedule as _budgeted
from nyhopt.optim.budget._rows import RowPlan, final_rows, final_size, rescale_penalty
from nyhopt.solvers.penalty_path import held_out_path

from conftest import TickClock


@pytest.fixture
def small_sample(monkeypatch):
    """Runs of more than 300 training rows tune on row samples; a simulated clock."""
    monkeypatch.setattr(_budgeted, "START_ROWS", 300)
    monkeypatch.setattr(_rows, "START_ROWS", 300)
    monkeypatch.setattr(_rows, "SAMPLE_FROM", 300)
    monkeypatch.setattr(_budget, "CLOCK", TickClock())


def _problem(n=1500, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n)
    return X, y


# -- the pieces -------------------------------------------------------------------------------------------
def test_row_plan_samples_are_nested_and_never_hold_held_out_rows():
    plan = RowPlan(1000, 100, np.random.default_rng(0))
    held = plan.held_out()
    small, large = plan.sample(200), plan.sample(800)
    assert plan.n_train == 900 and held.size == 100 and small.size == 200 and large.size == 800
    assert set(small) <= set(large) and not set(large) & set(held)
    assert np.all(np.diff(large) > 0)  # sorted, distinct
    assert plan.sample(10**6).size == 900  # at most the training rows
    assert plan.rows_for(10, 300) == 300 and plan.rows_for(50, 300) == _rows.ROWS_PER_CENTER * 50
    assert plan.rows_for(10**6, 300) == 900


def test_penalty_carries_n_lambda():
    p = Params.from_natural(penalty=2e-3, lengthscale=np.ones(2), centers=np.zeros((4, 2)))
    q = rescale_penalty(p, 500, 2000)
    assert float(q.penalty) * 2000 == pytest.approx(float(p.penalty) * 500, rel=1e-14)
    np.testing.assert_array_equal(q.centers, p.centers)
    np.testing.assert_array_equal(q.log_lengthscale, p.log_lengthscale)
    assert rescale_penalty(p, 500, 500) is p


def test_final_rows_are_what_the_time_buys():
    plan = RowPlan(10_000, 1000, np.random.default_rng(0))
    assert final_rows(plan, 1.0, 1000, 100.0) == 9000  # all the training rows fit
    assert final_rows(plan, 1.0, 1000, 2.5) == 2000  # 1.25 s a thousand rows
    assert final_rows(plan, 1.0, 1000, 0.1) == 1000  # never fewer than were tuned on


def test_final_size_widens_the_centers_as_far_as_the_time_left_buys():
    plan = RowPlan(10**6, 5000, np.random.default_rng(0))

    def cost(m, rows):
        return 1e-11 * rows * m * m

    per_center = _rows.FINAL_ROWS_PER_CENTER
    top = _rows.FINAL_CENTERS * 1000
    margin = _rows.FINAL_MARGIN
    assert final_size(plan, cost, 1000, 12000, 1e4) == (top, _rows.FINAL_MAX_ROWS)  # FINAL_CENTERS times, then rows
    m, rows = final_size(plan, cost, 1000, 12000, 100.0)  # centers at their cap: the time left buys rows
    assert m == top and per_center * m < rows and margin * cost(m, rows) <= 100.0 < margin * cost(m, rows + 1)
    m, rows = final_size(plan, cost, 1000, 12000, 10.0)
    assert _rows.FINAL_MIN_FACTOR * 1000 <= m < top and per_center * m <= rows < per_center * (m + 1)
    assert margin * cost(m, rows) <= 10.0 < margin * cost(m + 1, per_center * (m + 1))  # the most that fits
    assert final_size(plan, cost, 2000, 24000, 1e9)[0] == _rows.FINAL_MAX_CENTERS
    small = RowPlan(20_000, 1000, np.random.default_rng(0))
    assert final_size(small, cost, 1000, 12000, 1e9) == (top, small.n_train)  # never more rows than there are
    assert final_size(plan, cost, 1000, 12000, 0.2) == (1000, final_rows(plan, cost(1000, 12000), 12000, 0.2))


# -- the run ----------------------------------------------------------------------------------------------
def test_a_large_run_tunes_on_samples_and_fits_on_more_rows(small_sample):
    X, y = _problem()
    X0, y0 = X.copy(), y.copy()
    res = nh.tune(X, y, time_budget=30.0, progress=False, standardize=False)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    rows = [s.rows for s in res.stages]
    assert rows[0] == 300 and all(b >= a for a, b in zip(rows, rows[1:]))
    assert all(s.rows >= min(_rows.ROWS_PER_CENTER * s.centers, 1350) or s.rows == 300 for s in res.stages)
    assert res.model.penalty == pytest.approx(float(res.params.penalty), rel=1e-12)
    np.testing.assert_array_equal(res.model.centers_, res.params.centers)
    mean, std = res.model.predict(X[:50], return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std > 0)
    assert math.sqrt(np.mean((mean - y[:50]) ** 2)) < 0.5


def test_the_final_fit_takes_more_centers_where_the_held_out_rows_say_so(small_sample, monkeypatch):
    # on 150 held-out rows the comparison can go either way (the next test takes the other): here the wide fit wins
    monkeypatch.setattr(_finish, "holdout_losses", lambda model, task, X, y: np.zeros(X.shape[0]))
    X, y = _problem()
    budget = 30.0
    res = nh.tune(X, y, time_budget=budget, progress=False, standardize=False, random_state=0)
    tuned = max(s.centers for s in res.stages)
    assert res.params.n_centers > tuned and res.final_rows >= res.stages[-1].rows
    assert res.model.centers_.shape[0] == res.params.n_centers
    # the stages end where the share kept for the final fit begins
    assert sum(s.seconds for s in res.stages) <= (1.0 - _rows.FINAL_SHARE) * budget
    Xt, yt = _problem(500, seed=1)
    assert math.sqrt(np.mean((res.model.predict(Xt) - yt) ** 2)) < 0.3


def test_with_enough_held_out_rows_the_wide_fit_takes_the_lowest_point_of_the_path(small_sample, monkeypatch):
    from nyhopt.optim.budget import _refit

    seen = []

    def spy(kernel, X, Z, Y, X_val, Y_val, penalties, sizes, fit_intercept=False):
        errors = held_out_path(kernel, X, Z, Y, X_val, Y_val, penalties, sizes, fit_intercept=fit_intercept)
        seen.append((list(penalties), list(sizes), errors, X.shape[0], X_val.shape[0]))
        return errors

    monkeypatch.setattr(_refit, "held_out_path", spy)
    monkeypatch.setattr(_refit, "MIN_HELD_OUT", 150)
    monkeypatch.setattr(_budgeted, "MAX_CENTERS", 600)  # no stage takes nearly every row: a wide fit follows
    X, y = _problem()  # 150 rows held out
    res = nh.tune(X, y, time_budget=30.0, progress=False, standardize=False, random_state=0)
    assert len(seen) == 1
    penalties, sizes, errors, n_rows, n_val = seen[0]
    assert n_val == 150 and n_rows == res.final_rows and sizes[0] in {s.centers for s in res.stages}
    assert len(penalties) == len(_refit.PENALTY_FACTORS)
    i, j = np.unravel_index(np.nanargmin(errors), errors.shape)
    assert res.params.n_centers == sizes[i]
    assert float(res.params.penalty) == pytest.approx(penalties[j], rel=1e-12)
    assert res.model.penalty == pytest.approx(penalties[j], rel=1e-12)
    assert errors[i, j] <= errors[-1, list(_refit.PENALTY_FACTORS).index(1.0)]  # the wide fit at the tuned penalty


def test_a_wider_final_fit_with_a_higher_held_out_error_is_not_kept(small_sample, monkeypatch):
    X, y = _problem()
    kw = dict(time_budget=30.0, progress=False, standardize=False, random_state=0)
    monkeypatch.setattr(_finish, "holdout_losses", lambda *a: np.full(a[2].shape[0], np.inf))
    res = nh.tune(X, y, **kw)
    winners = [s for s in res.stages if s.centers == res.params.n_centers]  # a stage's own model
    assert winners and res.final_rows in {s.rows for s in winners}


def test_growing_rows_keeps_n_lambda_between_stages(small_sample):
    X, y = _problem()
    res = nh.tune(X, y, time_budget=30.0, progress=False, standardize=False, objective="sgpr", centers=(100,))
    for prev, nxt in zip(res.stages, res.stages[1:]):
        if nxt.rows > prev.rows and nxt.centers == prev.centers:  # a growth of the rows alone
            start = res.history[nxt.first_epoch]
            best = min((res.history[i] for i in range(prev.first_epoch, prev.first_epoch + prev.epochs + 1)),
                       key=lambda r: r.objective)
            assert start.penalty * nxt.rows == pytest.approx(best.penalty * prev.rows, rel=1e-12)
            break
    else:
        pytest.fail(f"no growth of the rows alone: {res.stages}")


def test_small_data_never_samples(monkeypatch):
    monkeypatch.setattr(_budget, "CLOCK", TickClock())
    X, y = _problem(600)
    res = nh.tune(X, y, time_budget=4.0, progress=False, standardize=False)
    n_tr = 600 - int(round(0.1 * 600))
    assert {s.rows for s in res.stages[:-1]} == {n_tr}


# -- dask -------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        yield client


def test_dask_runs_the_stages_of_the_in_memory_run(small_sample, dask_client, monkeypatch):
    da = pytest.importorskip("dask.array")
    X, y = _problem()
    kw = dict(time_budget=20.0, progress=False, standardize=False, task="regression", random_state=3)
    res_mem = nh.tune(X, y, **kw)
    monkeypatch.setattr(_budget, "CLOCK", TickClock())
    Xd, yd = da.from_array(X, chunks=(400, 3)), da.from_array(y, chunks=400)
    res_dask = nh.tune(Xd, yd, **kw)
    key = [(s.centers, s.objective, s.rows, s.epochs) for s in res_mem.stages]
    assert [(s.centers, s.objective, s.rows, s.epochs) for s in res_dask.stages] == key
    Xt, yt = _problem(500, seed=1)
    err_mem = math.sqrt(np.mean((res_mem.model.predict(Xt) - yt) ** 2))
    err_dask = math.sqrt(np.mean((np.asarray(res_dask.model.predict(Xt)) - yt) ** 2))
    assert err_dask <= 1.1 * err_mem


def test_dask_inputs_that_cannot_be_sampled_get_clear_errors(dask_client):
    da = pytest.importorskip("dask.array")
    X, y = _problem(600)
    Xd, yd = da.from_array(X, chunks=(200, 3)), da.from_array(y, chunks=200)
    unknown = Xd[Xd[:, 0] > -100]  # a boolean mask: row chunks of unknown size
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        nh.tune(unknown, yd[Xd[:, 0] > -100], time_budget=5.0, progress=False, standardize=False,
                task="regression")
    with pytest.raises(ValueError, match="validation"):
        nh.tune(Xd, yd, time_budget=5.0, progress=False, standardize=False, validation=0.2, task="regression")


@pytest.mark.gpu
def test_row_samples_on_the_gpu_take_the_same_schedule(small_sample, monkeypatch):
    cp = pytest.importorskip("cupy")
    X, y = _problem(1200)
    kw = dict(time_budget=12.0, progress=False, standardize=False, objective="prop", epochs=40, random_state=1)
    res = nh.tune(cp.asarray(X), cp.asarray(y), **kw)
    assert res.stages[0].rows == 300 and res.final_rows >= res.stages[-1].rows
    assert isinstance(res.model.centers_, cp.ndarray) and isinstance(res.model.predict(cp.asarray(X[:5])), cp.ndarray)
    monkeypatch.setattr(_budget, "CLOCK", TickClock())
    host = nh.tune(X, y, **kw)
    assert [(s.centers, s.rows) for s in res.stages][:2] == [(s.centers, s.rows) for s in host.stages][:2]


def test_a_budget_too_short_for_one_stage_still_returns_a_model(small_sample):
    X, y = _problem()
    res = nh.tune(X, y, time_budget=0.05, progress=False, standardize=False)  # a few clock reads
    assert res.stages[0].rows == 300 and res.stages[0].epochs <= 1
    assert np.all(np.isfinite(res.model.predict(X[:5])))


# -- the final fit's float32 products (nyhopt/optim/budget/_precision.py) ---------------------------------
def _products_recorder(monkeypatch, fail_float32=False):
    """The ``products`` of every fit of a budgeted run, in order (a float32 one raises with ``fail_float32``)."""
    from contextlib import contextmanager

    from nyhopt.errors import IllConditionedError
    from nyhopt.optim.budget import _precision
    from nyhopt.solvers.direct import products_in

    monkeypatch.setattr(_precision, "FLOAT32_FROM", 1e6)
    monkeypatch.setattr(_budgeted, "MAX_CENTERS", 600)  # no stage takes nearly every row: a wide fit follows
    seen = []

    @contextmanager
    def recorded(dtype):
        seen.append(None if dtype is None else np.dtype(dtype).name)
        if fail_float32 and dtype is not None:
            raise IllConditionedError("A A^T + n*penalty*I is not numerically positive definite")
        with products_in(dtype):
            yield

    monkeypatch.setattr(_budgeted, "products_in", recorded)
    return seen


def test_the_wide_final_fit_takes_float32_products(small_sample, monkeypatch):
    seen = _products_recorder(monkeypatch)
    X, y = _problem()
    res = nh.tune(X, y, time_budget=30.0, progress=False, standardize=False, random_state=0)
    assert seen[-1] == "float32" and set(seen[:-1]) == {None}  # the stages' validation fits stay float64
    # here every training row is a center of the wide fit: kept or not, the held-out rows decided
    assert res.params.n_centers in {max(s.centers for s in res.stages), res.final_rows}
    assert res.model.alpha_.dtype == np.float64 and np.isfinite(res.model.predict(X[:5])).all()


def test_a_given_dtype_keeps_the_final_fit_in_it(small_sample, monkeypatch):
    seen = _products_recorder(monkeypatch)
    X, y = _problem()
    nh.tune(X, y, time_budget=30.0, progress=False, standardize=False, random_state=0, dtype="float64")
    assert seen and set(seen) == {None}


def test_a_wide_fit_that_fails_in_float32_leaves_the_stage_model(small_sample, monkeypatch):
    seen = _products_recorder(monkeypatch, fail_float32=True)
    X, y = _problem()
    res = nh.tune(X, y, time_budget=30.0, progress=False, standardize=False, random_state=0)
    assert seen[-1] == "float32"
    winners = [s for s in res.stages if s.centers == res.params.n_centers]  # a stage's own model
    assert winners and res.final_rows in {s.rows for s in winners}
    assert np.isfinite(res.model.predict(X[:5])).all()
