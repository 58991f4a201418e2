"""``tune(X, y, replay=result)``: a budgeted run again, bit for bit, whatever the clock (nyhopt/optim/budget/_replay.py)."""
from __future__ import annotations

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.optim.budget import _refit, _rows, _schedule as _budgeted


def _problem(n=900, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.array([1.0, 50.0, 0.1])
    y = np.sin(2 * X[:, 0]) + 0.01 * X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n)
    return X, y


def _same_run(a, b):
    assert [(s.centers, s.objective, s.epochs, s.rows) for s in a.stages] == \
        [(s.centers, s.objective, s.epochs, s.rows) for s in b.stages]
    np.testing.assert_array_equal([s.validation_error for s in a.stages], [s.validation_error for s in b.stages])
    np.testing.assert_array_equal(a.history.objective, b.history.objective)
    np.testing.assert_array_equal(a.params.centers, b.params.centers)
    np.testing.assert_array_equal(a.params.log_lengthscale, b.params.log_lengthscale)
    assert float(a.params.log_penalty) == float(b.params.log_penalty)
    assert a.final_rows == b.final_rows


def test_replay_reproduces_a_budgeted_run_bit_for_bit():
    X, y = _problem()
    first = nh.tune(X, y, time_budget=6.0, progress=False, random_state=2)
    assert len(first.stages) >= 3
    again = nh.tune(X, y, replay=first, progress=False, random_state=2)
    _same_run(first, again)
    Xt = _problem(200, seed=5)[0]
    m1, s1 = first.model.predict(Xt, return_std=True)
    m2, s2 = again.model.predict(Xt, return_std=True)
    np.testing.assert_array_equal(m1, m2)
    np.testing.assert_array_equal(s1, s2)
    np.testing.assert_array_equal(nh.tune(X, y, replay=first.stages, progress=False, random_state=2).params.centers,
                                  first.params.centers)  # the stages alone replay too


@pytest.mark.parametrize("choose", [False, True], ids=["tuned-penalty", "chosen-on-held-out-rows"])
def test_replay_on_row_samples(monkeypatch, choose):
    monkeypatch.setattr(_budgeted, "START_ROWS", 300)
    monkeypatch.setattr(_rows, "START_ROWS", 300)
    monkeypatch.setattr(_rows, "SAMPLE_FROM", 300)
    if choose:  # the wide fit's centers and penalty chosen on the 150 held-out rows
        monkeypatch.setattr(_refit, "MIN_HELD_OUT", 150)
    X, y = _problem(1500)
    first = nh.tune(X, y, time_budget=8.0, progress=False, standardize=False)
    assert first.final_rows > 0 and first.stages[0].rows == 300
    assert first.final_centers >= first.params.n_centers if choose else first.final_centers == 0
    again = nh.tune(X, y, replay=first, progress=False, standardize=False)
    _same_run(first, again)
    np.testing.assert_array_equal(first.model.predict(X[:20]), again.model.predict(X[:20]))


def test_replay_is_checked():
    X, y = _problem(400)
    first = nh.tune(X, y, time_budget=2.0, progress=False)
    with pytest.raises(ValueError, match="not both"):
        nh.tune(X, y, replay=first, time_budget=2.0, progress=False)
    with pytest.raises(ValueError, match="replay must be"):
        nh.tune(X, y, replay=[1, 2], progress=False)
    with pytest.raises(ValueError, match="diverged"):
        nh.tune(X, y, replay=first, progress=False, lr=0.2)  # another call: other stages
