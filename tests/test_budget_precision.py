"""A budgeted run's grown stages tune in float32 on the CPU; what chooses among them stays in float64."""
from __future__ import annotations

import math

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.objectives import make_objective
from nyhopt.errors import IllConditionedError
from nyhopt.optim.budget import _clock as _budget, _finish, _precision, _schedule as _budgeted
from nyhopt.optim.budget._precision import FLOAT32_FROM, EpochRows, grown_in_float32
from nyhopt.params import Params
from nyhopt.solvers import jitter

from _bounds import sum_error
from conftest import TickClock


def _problem(n=800, d=3, seed=0, noise=0.1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] + noise * rng.normal(size=n)
    return X, y


def _recorder(monkeypatch):
    """The dtype of the rows of every objective a budgeted run builds after its setup, in order; a simulated clock."""
    monkeypatch.setattr(_budget, "CLOCK", TickClock())
    seen = []
    inner = _budgeted.build_objective

    def build(name, X, *args, **kwargs):
        seen.append((name, np.dtype(X.dtype).name))
        return inner(name, X, *args, **kwargs)

    monkeypatch.setattr(_budgeted, "build_objective", build)
    monkeypatch.setattr(_finish, "build_objective", build)  # the last stage on all the rows
    return seen


@pytest.fixture
def built(monkeypatch):
    """:func:`_recorder`, with float32 from n m^2 = 10^6 on (every grown stage of the small problems here)."""
    monkeypatch.setattr(_precision, "FLOAT32_FROM", 1e6)
    return _recorder(monkeypatch)


def test_the_switch():
    X = np.zeros((4, 2))
    assert grown_in_float32(None, X)
    assert not grown_in_float32(np.dtype(np.float64), X)
    assert not grown_in_float32(np.dtype(np.float32), X.astype(np.float32))
    assert not grown_in_float32(None, X.astype(np.float32))


def test_epoch_rows_copies_once_per_row_set_and_leaves_the_input_alone():
    X = np.arange(12.0).reshape(6, 2)
    before = X.copy()
    rows = EpochRows(True)
    big = int(np.ceil(np.sqrt(FLOAT32_FROM / X.shape[0])))  # the smallest size that tunes in float32
    assert rows(X, big - 1, "sgpr") is X
    a = rows(X, big, "sgpr")
    assert a.dtype == np.float32 and a.flags.c_contiguous and rows(X, 2 * big, "prop") is a
    np.testing.assert_array_equal(a, X.astype(np.float32))
    np.testing.assert_array_equal(X, before)
    assert rows(X[:3], 10 * big, "sgpr") is not a  # another row set: another copy
    assert rows(X, big, "stoch-prop") is X  # not measured in float32: the data's dtype
    assert EpochRows(False)(X, big, "sgpr") is X


def test_grown_stages_tune_in_float32_and_the_model_stays_float64(built):
    X, y = _problem()
    res = nh.tune(X, y, time_budget=20, random_state=0, progress=False)
    grown = [s for s in res.stages if s.centers > 100]
    assert grown, "the run grew no stage"
    assert built[0] == ("sgpr", "float64")  # stage 0's second candidate: the data's dtype
    assert ("sgpr", "float32") in built[1:]
    if res.stages[-1].rows > res.stages[0].rows:  # the last stage on all the rows: no held-out check, float64
        assert built[-1] == ("sgpr", "float64")
    assert res.model.centers_.dtype == np.float64
    assert res.model.predict(X[:5]).dtype == np.float64
    assert all(not math.isnan(s.validation_error) for s in grown if not s.stop_reason.startswith("failed")
               and s.rows == res.stages[0].rows)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_given_dtype_is_kept_in_every_stage(built, dtype):
    X, y = _problem()
    res = nh.tune(X, y, time_budget=20, random_state=0, progress=False, dtype=dtype)
    assert any(s.centers > 100 for s in res.stages)
    assert {dt for _, dt in built} <= {dtype}
    assert res.model.centers_.dtype == np.dtype(dtype)


def test_small_stages_keep_the_data_dtype(monkeypatch):
    seen = _recorder(monkeypatch)
    X, y = _problem()
    res = nh.tune(X, y, time_budget=20, random_state=0, progress=False)
    assert max(s.centers for s in res.stages) ** 2 * X.shape[0] < FLOAT32_FROM
    assert {dt for _, dt in seen} == {"float64"}


def test_float32_data_is_unchanged(built):
    X, y = _problem()
    nh.tune(X.astype(np.float32), y, time_budget=20, random_state=0, progress=False)
    assert {dt for _, dt in built} <= {"float32"}


def test_a_failed_float32_stage_runs_again_in_float64(built, monkeypatch):
    X, y = _problem()
    inner = _budgeted._Run.stage
    failed = []

    def stage(self, name, obj, *args, **kwargs):
        if obj.X.dtype == np.float32 and not failed:
            real = obj.value_and_grad

            def broken(params, *a, **k):  # the second epoch fails as a factorization does
                if broken.calls:
                    raise IllConditionedError("A A^T + n*lam*I is not numerically positive definite")
                broken.calls += 1
                return real(params, *a, **k)

            broken.calls = 0
            obj.value_and_grad = broken
            failed.append(name)
        return inner(self, name, obj, *args, **kwargs)

    monkeypatch.setattr(_budgeted._Run, "stage", stage)
    with pytest.warns(RuntimeWarning, match="failed"):
        res = nh.tune(X, y, time_budget=20, random_state=0, progress=False)
    reasons = [s.stop_reason for s in res.stages]
    k = next(i for i, r in enumerate(reasons) if r.startswith("failed"))
    assert res.stages[k + 1].centers == res.stages[k].centers  # the same stage again
    assert [dt for _, dt in built].count("float32") == 1  # in float64 from then on
    assert not res.stages[-1].stop_reason.startswith("failed")
    assert np.isfinite(res.model.predict(X[:5])).all()


def test_a_float32_stage_that_fails_at_its_first_epoch_runs_again_in_float64(built, monkeypatch):
    X, y = _problem()
    inner = _budgeted._Run.stage
    failed = []

    def stage(self, name, obj, *args, **kwargs):
        if obj.X.dtype == np.float32 and not failed:
            def broken(params, *a, **k):  # K_mm of many centers, not positive definite in float32
                raise IllConditionedError("K_mm + jitter*I is not numerically positive definite")

            obj.value_and_grad = broken
            failed.append(self.stages[-1].centers)
        return inner(self, name, obj, *args, **kwargs)

    monkeypatch.setattr(_budgeted._Run, "stage", stage)
    res = nh.tune(X, y, time_budget=20, random_state=0, progress=False)
    assert failed and [dt for _, dt in built].count("float32") == 1  # in float64 from then on
    assert max(s.centers for s in res.stages) > failed[0]  # the grown stage ran, in float64
    assert not any(s.stop_reason.startswith("failed") for s in res.stages)
    assert np.isfinite(res.model.predict(X[:5])).all()


def test_without_a_budget_nothing_is_cast(monkeypatch):
    X, y = _problem(300)
    a = nh.tune(X, y, epochs=5, random_state=0, progress=False)
    monkeypatch.setattr("nyhopt.optim.budget._precision.GROWN_FLOAT32", False)
    b = nh.tune(X, y, epochs=5, random_state=0, progress=False)
    assert [r.objective for r in a.history] == [r.objective for r in b.history]


def test_the_float32_objective_agrees_with_float64_within_the_rounding_bound(monkeypatch):
    """A grown stage's float32 value and gradient against float64 on the same rows and jitter.

    Bound: the sums over the n rows (the Gram product, :math:`A\\,Y`, the
    gradient's contraction) in float32, relative error
    ``sum_error(n, float32)`` (tests/_bounds.py), amplified by the triangular
    solve with :math:`L`, whose inverse is at most :math:`1/\\sqrt{\\epsilon}`
    in norm (:math:`\\epsilon` the float32 jitter).
    """
    X, y = _problem(n=3000, d=4, noise=0.1)
    rng = np.random.default_rng(1)
    Z = X[rng.choice(X.shape[0], 400, replace=False)]
    params = Params.from_natural(penalty=1e-4, lengthscale=np.full(4, 1.2), centers=Z)
    X32 = X.astype(np.float32)
    bound = sum_error(X.shape[0], np.float32) / math.sqrt(jitter(np.float32))
    for name in ("sgpr", "prop"):
        v32, g32 = make_objective(name, X32, y, random_state=0).value_and_grad(params)
        monkeypatch.setattr("nyhopt.objectives._exact.jitter", lambda dtype: jitter(np.float32))
        v64, g64 = make_objective(name, X32.astype(np.float64), y, random_state=0).value_and_grad(params)
        monkeypatch.undo()
        assert abs(v32 - v64) <= bound * max(abs(v64), 1.0), name
        flat = [np.concatenate([np.ravel(np.asarray(f)) for f in g]) for g in (g32, g64)]
        assert np.linalg.norm(flat[0] - flat[1]) <= bound * np.linalg.norm(flat[1]), name
