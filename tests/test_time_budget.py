"""tune(..., time_budget=T): the budget holds, centers grow with a warm start, the stages are reported."""
from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.optim import adam
from nyhopt.optim.budget import _choice as _stage_choice, _clock as _budget, _finish, _schedule as _budgeted
from nyhopt.optim.budget import Budget, SizeCost, check_time_budget
from nyhopt.optim.budget._grow import add_centers, grow_state, next_size
from nyhopt.params import Params


def _problem(n=600, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n)
    return X, y


# -- the pieces -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, True, "60"])
def test_time_budget_is_checked_with_its_name(bad):
    with pytest.raises(ValueError, match="time_budget"):
        check_time_budget(bad)
    X, y = _problem(50)
    with pytest.raises(ValueError, match="time_budget"):
        nh.tune(X, y, time_budget=bad, progress=False)


def test_budget_and_size_cost():
    ticks = iter([10.0, 12.0, 19.0])
    b = Budget(8.0, clock=lambda: next(ticks))
    assert b.now() == 2.0 and b.left() == -1.0
    c = SizeCost()
    assert c.predict(100) == math.inf and c.predict(100, default=0.0) == 0.0
    c.add(100, 1.0)
    assert c.predict(200) == pytest.approx(4.0)  # one size: quadratic in m
    c.add(200, 8.0)
    assert c.predict(400) == pytest.approx(64.0)  # the measured exponent, 3 (the cap)
    c.add(400, 16.0)
    assert c.predict(800) == pytest.approx(32.0)  # exponent 1 between the two largest sizes


def test_next_size():
    assert next_size(100, 10_000) == 200
    assert next_size(700, 1000) == 1000 and next_size(1000, 1000) == 1000
    assert next_size(100, 10_000, max_size=150) == 150


def test_add_centers_keeps_the_old_ones_and_adds_distinct_rows():
    X = _problem(400)[0][:, :2].copy()
    Z = X[:10].copy()
    for how in ("kmeans++", "random"):
        Z2 = add_centers(X, Z, np.ones(2), 30, np.random.default_rng(1), how=how)
        assert Z2.shape == (40, 2)
        np.testing.assert_array_equal(Z2[:10], Z)  # the tuned centers, first and unchanged
        new = Z2[10:]
        assert len({tuple(r) for r in new}) == 30  # distinct rows of X
        assert all(np.any(np.all(X == r, axis=1)) for r in new)
    np.testing.assert_array_equal(Z, X[:10])  # the input is not modified


def test_add_centers_covers_what_the_centers_leave_out():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 0.1, (500, 1)), rng.normal(20, 0.1, (20, 1))])
    Z = add_centers(X, np.zeros((1, 1)), np.ones(1), 1, np.random.default_rng(0))
    assert Z[1, 0] > 10  # D^2 sampling: the far cluster (4% of the rows) is all but certain


def test_grow_state_keeps_moments_and_fills_new_rows():
    p = Params.from_natural(1e-3, [1.0, 2.0], np.zeros((3, 2)))
    s = adam.init(p)
    g = Params(np.asarray(0.5), np.array([1.0, -1.0]), np.arange(6.0).reshape(3, 2), np.asarray(0.0))
    p1, s1 = adam.update(g, s, p)
    s0 = grow_state(s1, 5)  # the default: new rows start with zero moments
    np.testing.assert_array_equal(s0.v.centers[:3], s1.v.centers)
    np.testing.assert_array_equal(s0.m.centers[3:], 0.0)
    np.testing.assert_array_equal(s0.v.centers[3:], 0.0)
    s2 = grow_state(s1, 5, fill="mean")
    assert s2.step == s1.step
    np.testing.assert_array_equal(s2.m.centers[:3], s1.m.centers)
    np.testing.assert_array_equal(s2.v.centers[:3], s1.v.centers)
    np.testing.assert_array_equal(s2.m.centers[3:], 0.0)
    np.testing.assert_allclose(s2.v.centers[3:], np.broadcast_to(s1.v.centers.mean(axis=0), (2, 2)))
    assert float(s2.m.log_penalty) == float(s1.m.log_penalty)
    # an Adam step at the grown size runs
    p2 = p1.replace(centers=np.vstack([p1.centers, np.ones((2, 2))]))
    g2 = g.replace(centers=np.ones((5, 2)))
    adam.update(g2, s2, p2)


# -- the budgeted run ------------------------------------------------------------------------------------
def test_simulated_budget_holds_and_stages_are_reported(tick_clock):
    X, y = _problem(600)
    budget = 4.0
    res = nh.tune(X, y, objective="prop", time_budget=budget, progress=False)
    assert res.elapsed <= 1.1 * budget  # read from the same (simulated) clock, the final fit included
    assert res.elapsed >= 0.5 * budget  # and the run used it
    stages = res.stages
    assert len(stages) >= 2 and stages[0].centers == 100
    assert [s.centers for s in stages] == sorted(s.centers for s in stages)
    assert stages[1].centers > 100
    assert sum(s.epochs + 1 for s in stages) == len(res.history)
    assert [s.first_epoch for s in stages] == list(np.cumsum([0] + [s.epochs + 1 for s in stages[:-1]]))
    assert [r.epoch for r in res.history] == list(range(len(res.history)))
    grown = [s for s in stages if np.isfinite(s.validation_error)]  # 60 rows held out (10%)
    assert len(grown) >= len(stages) - 1
    lowest = min(grown, key=lambda s: s.validation_error)
    # the stage with the lowest held-out error, or a larger one within its noise
    best = next(s for s in grown if s.centers == res.params.n_centers)
    assert best.centers >= lowest.centers and res.params.n_centers == res.model.centers_.shape[0]
    chosen = stages[-1] if math.isnan(stages[-1].validation_error) else best
    assert chosen.first_epoch <= res.best_epoch <= chosen.first_epoch + chosen.epochs
    assert res.validation_scores is None  # the final model saw the held-out rows
    assert f"stages={[s.centers for s in stages]}" in repr(res)


def test_last_stage_tunes_the_best_on_all_rows(tick_clock):
    X, y = _problem(600)
    res = nh.tune(X, y, objective="prop", time_budget=4.0, epochs=30, progress=False)  # time is left
    *grown, last = res.stages
    assert len(grown) >= 2 and all(np.isfinite(s.validation_error) for s in grown)
    assert math.isnan(last.validation_error)  # tuned on all the rows, held-out ones included
    lowest = min(grown, key=lambda s: s.validation_error)
    best = next(s for s in grown if s.centers == last.centers)  # the lowest error, or larger within its noise
    assert best.centers >= lowest.centers
    assert last.centers == res.params.n_centers == res.model.centers_.shape[0]
    assert last.objective == best.objective
    assert last.first_epoch <= res.best_epoch <= last.first_epoch + last.epochs
    # it starts at the best stage's best point
    recs = [res.history[i] for i in range(best.first_epoch, best.first_epoch + best.epochs + 1)]
    start = res.history[last.first_epoch]
    assert start.penalty == min(recs, key=lambda r: r.objective).penalty
    assert res.elapsed <= 1.1 * 4.0


def test_growth_is_warm_started(tick_clock):
    X, y = _problem(600)
    res = nh.tune(X, y, objective="prop", time_budget=4.0, progress=False)
    s0, s1 = res.stages[:2]
    recs0 = [res.history[i] for i in range(s0.first_epoch, s0.first_epoch + s0.epochs + 1)]
    best0 = min(recs0, key=lambda r: r.objective)
    start1 = res.history[s1.first_epoch]
    assert start1.penalty == best0.penalty
    np.testing.assert_array_equal(start1.lengthscale, best0.lengthscale)
    assert best0.objective == s0.objective_value


def test_fixed_schedule_and_user_validation(tick_clock):
    X, y = _problem(600)
    Xv, yv = _problem(200, seed=1)
    res = nh.tune(X, y, objective="prop", centers=(50, 150), time_budget=8.0, validation=(Xv, yv),
                  progress=False)
    assert [s.centers for s in res.stages][:2] == [50, 150]
    assert set(s.centers for s in res.stages) <= {50, 150}
    assert res.validation_scores is not None and res.validation_scores["rmse"] > 0
    assert res.model.centers_.shape[0] == res.params.n_centers
    # the error on the given rows chose the stage; no stage on all the rows (they are the user's)
    assert all(np.isfinite(s.validation_error) for s in res.stages)
    best = min(res.stages, key=lambda s: s.validation_error)
    assert res.params.n_centers == best.centers


def test_list_objective_is_chosen_at_the_first_stage(tick_clock):
    X, y = _problem(600)
    res = nh.tune(X, y, objective=["prop", "gcv"], time_budget=4.0, progress=False)
    assert [s.objective for s in res.stages[:2]] == ["prop", "gcv"]
    assert res.stages[0].centers == res.stages[1].centers == 100
    first = res.stages[:2]
    chosen = min(first, key=lambda s: s.validation_error).objective
    assert all(s.objective == chosen for s in res.stages[2:])
    assert res.objective.name == chosen


def test_auto_objective_grows_sgpr_and_keeps_prop_as_a_fallback(tick_clock):
    X, y = _problem(600)
    res = nh.tune(X, y, time_budget=4.0, progress=False)  # objective="auto", the default
    assert [s.objective for s in res.stages[:2]] == list(_budgeted.AUTO_OBJECTIVES) == ["prop", "sgpr"]
    assert all(s.objective == "sgpr" for s in res.stages[2:])
    if res.objective.name == "prop":  # the fallback, only when clearly better than every sgpr stage
        assert res.stages[0].validation_error < min(s.validation_error for s in res.stages[1:]
                                                    if not math.isnan(s.validation_error))


class _Stages:
    """The parts of a run that :func:`_budgeted._choose_candidate` reads."""

    def __init__(self, losses):
        self.losses = [np.asarray(v, dtype=float) for v in losses]
        self.stages = [_budget.Stage(100, "x", 0, 1, 1.0, 0.0, math.sqrt(float(np.mean(v))), "epochs")
                       for v in self.losses]


def test_auto_grows_sgpr_and_falls_back_only_on_clearly_lower_losses():
    rng = np.random.default_rng(0)
    base = rng.exponential(size=2000)
    z = rng.normal(size=2000)
    close = base - 0.005 + 0.5 * (z - z.mean())  # lower on average by 0.005, paired noise 0.5: z-score 0.45
    clearly = 0.8 * base  # z-score over 40
    assert not _budgeted._clearly_better(close, base)
    assert _budgeted._clearly_better(clearly, base) and not _budgeted._clearly_better(base, clearly)
    names = ["prop", "sgpr"]
    run = _Stages([close, base])
    assert run.stages[0].validation_error < run.stages[1].validation_error
    assert _budgeted._choose_candidate(run, names, auto=True) == (1, [0])  # sgpr grows, prop is kept
    assert _budgeted._choose_candidate(run, names, auto=False) == (0, [])  # a list: the lowest error
    assert _budgeted._with_fallback(run, 1, [0]) == 1  # within the noise: the grown objective
    assert _budgeted._with_fallback(_Stages([clearly, base]), 1, [0]) == 0
    assert _budgeted._with_fallback(_Stages([base, clearly]), 1, [0]) == 1
    failed = _Stages([base, base])
    failed.stages[1] = failed.stages[1]._replace(validation_error=math.nan)  # sgpr failed: prop grows
    assert _budgeted._choose_candidate(failed, names, auto=True) == (0, [])


def test_the_largest_stage_within_the_noise_of_the_best_is_chosen():
    rng = np.random.default_rng(1)
    base = rng.exponential(size=2000)
    z = rng.normal(size=2000)
    run = _Stages([1.2 * base, base, base + 0.005 + 0.5 * (z - z.mean()), 1.5 * base, base])
    run.stages = [s._replace(centers=c) for s, c in zip(run.stages, [100, 200, 400, 800, 800])]
    run.stages[4] = run.stages[4]._replace(validation_error=math.nan)  # a failed stage is never chosen
    # 400 is above 200 within the noise (z-score 0.45), 800 clearly above: 400 is chosen
    assert _budgeted._largest_within_noise(run, 1, [0, 1, 2, 3, 4]) == 2
    assert _budgeted._largest_within_noise(run, 1, [0, 1]) == 1  # only the pool counts
    assert _budgeted._largest_within_noise(run, 1, [1, 3]) == 1


def test_sgpr_grows_from_props_point_where_prop_is_clearly_better(tick_clock, monkeypatch):
    monkeypatch.setattr(_stage_choice, "PREFER_Z", -math.inf)  # prop's stage 0 is taken as clearly better
    X, y = _problem(600)
    res = nh.tune(X, y, time_budget=8.0, progress=False)
    s0, s1, s2 = res.stages[:3]
    assert (s0.objective, s1.objective, s2.objective) == ("prop", "sgpr", "sgpr") and s2.centers > s0.centers
    recs0 = [res.history[i] for i in range(s0.first_epoch, s0.first_epoch + s0.epochs + 1)]
    best0 = min(recs0, key=lambda r: r.objective)
    start = res.history[s2.first_epoch]
    assert start.penalty == best0.penalty
    np.testing.assert_array_equal(start.lengthscale, best0.lengthscale)


@pytest.mark.parametrize("how", ["few rows", "options"])
def test_auto_objective_is_prop_where_rows_cannot_choose(tick_clock, how):
    X, y = _problem(150 if how == "few rows" else 600)
    options = {"noise_variance": 1.0} if how == "options" else None
    res = nh.tune(X, y, time_budget=2.0, objective_options=options, progress=False)
    assert {s.objective for s in res.stages} <= {"prop", "stoch-prop"}


def test_auto_objective_without_a_budget_is_prop():
    X, y = _problem(300)
    a = nh.tune(X, y, centers=20, epochs=6, progress=False)
    b = nh.tune(X, y, objective="prop", centers=20, epochs=6, progress=False)
    assert a.objective.name == "prop"
    np.testing.assert_array_equal(a.history.objective, b.history.objective)
    np.testing.assert_array_equal(a.params.centers, b.params.centers)
    assert nh.HyperoptKRR().get_params()["objective"] == "auto"


def test_sgpr_grows_with_its_amplitude_and_constant_warm_started(tick_clock, monkeypatch):
    monkeypatch.setattr(_budgeted, "AUTO_OBJECTIVES", ("sgpr",))
    X, y = _problem(600)
    y = y + 5.0  # a constant for the mean to take
    res = nh.tune(X, y, time_budget=4.0, progress=False)
    assert len(res.stages) >= 2 and {s.objective for s in res.stages} == {"sgpr"}
    s0, s1 = res.stages[:2]
    assert s1.centers > s0.centers
    recs0 = [res.history[i] for i in range(s0.first_epoch, s0.first_epoch + s0.epochs + 1)]
    best0 = min(recs0, key=lambda r: r.objective)
    assert res.history[s1.first_epoch].penalty == best0.penalty
    assert res.params.amplitude != 1.0  # learned, and kept by the final model
    assert res.model.amplitude_ == pytest.approx(res.params.amplitude)
    assert abs(float(np.mean(res.model.predict(X))) - 5.0) < 0.5


def test_switch_to_stoch_prop_keeps_what_was_tuned(tick_clock, monkeypatch):
    monkeypatch.setattr(_budgeted, "SWITCH_SECONDS", 0.0)
    monkeypatch.setattr(_budgeted, "SWITCH_FACTOR", 1e9)  # measured faster, whatever the timing
    X, y = _problem(800)
    res = nh.tune(X, y, objective="prop", time_budget=6.0, progress=False)
    names = [s.objective for s in res.stages]
    assert names[0] == "prop" and "stoch-prop" in names
    k = names.index("stoch-prop")
    prev = res.stages[k - 1]
    recs = [res.history[i] for i in range(prev.first_epoch, prev.first_epoch + prev.epochs + 1)]
    best = min(recs, key=lambda r: r.objective)
    assert res.history[res.stages[k].first_epoch].penalty == best.penalty
    assert res.stages[k].centers > prev.centers


def test_switch_to_stoch_prop_compares_measured_steps(tick_clock, monkeypatch):
    # every timed step is one tick of the simulated clock, so stoch-prop is never faster than prop's
    # own step at the grown size (its projection from the smaller sizes would be 4 ticks or more)
    monkeypatch.setattr(_budgeted, "SWITCH_SECONDS", 0.0)
    X, y = _problem(800)
    res = nh.tune(X, y, objective="prop", time_budget=6.0, progress=False)
    assert len(res.stages) >= 2 and {s.objective for s in res.stages} == {"prop"}


@pytest.mark.parametrize("device, seconds", [("cpu", 3.0), pytest.param("gpu", 4.0, marks=pytest.mark.gpu)])
def test_real_clock_budget_holds_loosely(device, seconds):
    X, y = _problem(800)
    if device == "gpu":
        cp = pytest.importorskip("cupy")
        X, y = cp.asarray(X), cp.asarray(y)
    t0 = time.perf_counter()
    res = nh.tune(X, y, time_budget=seconds, progress=False)
    wall = time.perf_counter() - t0
    assert wall < seconds * 1.1 + 3.0  # loose: a loaded machine and a first compilation may add a few seconds
    assert res.elapsed <= wall and len(res.stages) >= 1


def test_without_a_budget_nothing_changes():
    X, y = _problem(300)
    a = nh.tune(X, y, centers=20, epochs=6, progress=False)
    b = nh.tune(X, y, centers=20, epochs=6, progress=False, time_budget=None)
    c = nh.tune(X, y, centers="auto", epochs=6, progress=False)
    d = nh.tune(X, y, centers=100, epochs=6, progress=False)
    np.testing.assert_array_equal(a.history.objective, b.history.objective)
    np.testing.assert_array_equal(a.params.centers, b.params.centers)
    np.testing.assert_array_equal(c.history.objective, d.history.objective)
    assert a.stages == () and c.stages == ()


def test_schedule_arguments_are_checked():
    X, y = _problem(300)
    with pytest.raises(ValueError, match="time_budget"):
        nh.tune(X, y, centers=(50, 100), progress=False)
    with pytest.raises(ValueError, match="increase"):
        nh.tune(X, y, centers=(100, 50), time_budget=1.0, progress=False)
    with pytest.raises(ValueError, match="checkpoint"):
        nh.tune(X, y, time_budget=1.0, checkpoint="x.npz", progress=False)
    with pytest.raises(ValueError, match="centers"):
        nh.tune(X, y, centers="many", time_budget=1.0, progress=False)


# -- the estimator and the command line -----------------------------------------------------------------
def test_estimator_time_budget_clones_and_fits(tick_clock):
    from sklearn.base import clone

    est = nh.HyperoptKRR(time_budget=2.5, epochs=50)
    assert est.get_params()["time_budget"] == 2.5
    twin = clone(est)
    assert twin.get_params()["time_budget"] == 2.5 and twin is not est
    X, y = _problem(600)
    twin.fit(X * 3 + 1, y)
    assert len(twin.stages_) >= 1 and twin.stages_[0].centers == 100
    assert twin.model_.centers_.shape[0] == twin.params_.n_centers
    assert nh.HyperoptKRR().get_params()["time_budget"] is None


def test_cli_time_budget(tmp_path, tick_clock, capsys):
    from nyhopt.cli import main

    X, y = _problem(400)
    path = tmp_path / "d.csv"
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", header="a,b,c,y", comments="")
    summary = tmp_path / "s.json"
    assert main(["tune", str(path), "--target", "y", "--time-budget", "3", "--epochs", "40",
                 "--out", str(tmp_path / "m.npz"), "--json", str(summary)]) == 0
    out = capsys.readouterr().out
    assert "3 s budget" in out and "stage: 100 centers" in out
    s = json.loads(summary.read_text())
    assert s["time_budget"] == 3.0 and s["stages"][0]["centers"] == 100
    with pytest.raises(SystemExit):
        main(["tune", str(path), "--target", "y", "--time-budget", "-1"])


# -- how much to grow, and the error bars at the end ------------------------------------------------------
def _planning_run(seconds=100.0, n=100_000):
    run = _budgeted._Run({}, None, Budget(seconds, clock=lambda: 0.0))
    run.internal, run.n_tr, run.n_all, run.max_size = False, n, n, 20_000
    run.epoch_cost.add(100, 0.01)
    run.epoch_cost.add(200, 0.04)  # O(m^2)
    run.fit_cost.add(100, 0.01)
    return run


def test_plan_doubles_while_a_larger_last_stage_fits_then_jumps_to_the_largest():
    run = _planning_run()
    last = run.largest_size(100, _budgeted.FINAL_EPOCHS)
    room = run.usable()
    assert run.stage_cost(last, _budgeted.FINAL_EPOCHS) <= room < run.stage_cost(last + 1, _budgeted.FINAL_EPOCHS)
    assert 1000 < last < 3000  # FINAL_EPOCHS epochs at 0.04 (m/200)^2 s, and the fits, in 97 s
    assert run.plan(200) == (400, True)  # 800 fits: doubling, an intermediate stage
    assert run.plan(last // 2 + 1) == (last, False)  # doubling twice would not fit: the largest size
    m, intermediate = run.plan(int(last / 1.1))
    assert (m, intermediate) == (int(last / 1.1), False)  # under 1.25 m, and 20 epochs at 2 m do not fit
    small = _planning_run(n=500)
    assert small.plan(100) == (200, True) and small.plan(200) == (500, False) and small.plan(500) == (500, False)


def test_projected_cost_is_at_least_quadratic_beyond_the_measured_sizes():
    c = SizeCost()
    c.add(100, 0.1)
    c.add(200, 0.2)  # exponent 1 measured (overheads)
    assert c.predict(400) == pytest.approx(0.4)
    assert c.predict(400, min_exponent=2.0) == pytest.approx(0.8)
    assert c.predict(150, min_exponent=2.0) == pytest.approx(0.15)  # within the measured sizes: as measured


def test_intermediate_stage_is_capped():
    run = _planning_run()
    room = run.usable() - run.reserve(400)
    capped = run.allot(400, True, intermediate=True)
    assert capped == pytest.approx(max(_budgeted.STAGE_EPOCHS * run.epoch_seconds(400), _budgeted.MID_FRACTION * room))
    assert capped < run.allot(400, True)


def test_variance_factor_makes_95_intervals_cover_held_out_rows():
    X, y = _problem(1500)
    y = np.sin(3 * X[:, 0]) + 0.01 * np.random.default_rng(1).normal(size=1500)  # low noise: wide bars
    Z = X[:60]
    model = nh.NystromKRR(kernel=nh.GaussianKernel(1.0), centers=Z, penalty=1e-3, solver="direct").fit(X[:1000], y[:1000])
    X_val, y_val = X[1000:], y[1000:]
    mu0, sd0 = model.predict(X_val, return_std=True)
    factor = _budgeted._variance_factor(model, X_val, y_val)
    z = np.abs(y_val - mu0) / sd0
    assert np.mean(z <= 1.96 * math.sqrt(factor)) >= 0.95
    assert np.mean(z < 1.96 * math.sqrt(factor) * (1 - 1e-9)) < 0.95 + 2.0 / 500
    amp = model.amplitude_
    from nyhopt.posterior._predictive import scale_variance
    scale_variance(model, factor)
    mu1, sd1 = model.predict(X_val, return_std=True)
    np.testing.assert_array_equal(mu1, mu0)
    np.testing.assert_allclose(sd1, sd0 * math.sqrt(factor), rtol=1e-10)
    assert model.amplitude_ == pytest.approx(amp * factor)
    assert model.noise_variance_ == pytest.approx(model.amplitude_ * 1000 * 1e-3, rel=1e-9)


def test_budgeted_run_calibrates_its_error_bars_on_its_held_out_rows(tick_clock, monkeypatch):
    X, y = _problem(800)
    monkeypatch.setattr(_finish, "CALIBRATE_MIN_ROWS", 10**9)
    plain = nh.tune(X, y, time_budget=3.0, progress=False, random_state=0)
    monkeypatch.setattr(_finish, "CALIBRATE_MIN_ROWS", 10)
    tick_clock.t = 0.0
    calibrated = nh.tune(X, y, time_budget=3.0, progress=False, random_state=0)
    assert [s.centers for s in calibrated.stages] == [s.centers for s in plain.stages]
    np.testing.assert_allclose(calibrated.model.predict(X), plain.model.predict(X), rtol=1e-12, atol=1e-12)
    assert calibrated.model.amplitude_ != pytest.approx(plain.model.amplitude_, rel=1e-6)


@pytest.mark.gpu
def test_budget_holds_on_the_gpu_and_the_model_stays_there(tick_clock):
    cp = pytest.importorskip("cupy")
    X, y = _problem(300)
    res = nh.tune(cp.asarray(X), cp.asarray(y), objective="prop", centers=30, time_budget=6.0, epochs=40,
                  progress=False)
    assert res.elapsed <= 1.1 * 6.0  # the simulated clock, the final fit included
    assert len(res.stages) >= 2 and res.stages[1].centers > res.stages[0].centers  # grown on the device
    assert isinstance(res.model.predict(cp.asarray(X[:5])), cp.ndarray)
    assert isinstance(res.model.centers_, cp.ndarray)
