"""One door for data: a public call checks ``X`` once, and nothing below it checks ``X`` again.

The check that matters is the pass over the values (NaN and infinity: ``O(n d)``,
and a wait for the device on a GPU), :func:`nyhopt.inputs._validation.check_finite`.
It is counted here on every array with more rows than there are centers, as
``"X"`` (``D`` columns: ``X``, its standardized copy, its validation split, the
trace gap's row sample, the row blocks on a cluster) or ``"y"`` (the targets,
their standardized or encoded copies, the probes beside them); the centers
(``M`` rows) are parameters and are checked where they change.
"""
from __future__ import annotations

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.inputs import _door, _validation

N, D, M = 240, 3, 20


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(N, D))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(N)
    return X, y


@pytest.fixture
def checks(monkeypatch):
    """``(kind, rows)`` of the data-sized arrays whose values were checked, in order."""
    seen = []
    real = _validation.check_finite

    def counting(a, name, xp=np):
        if getattr(a, "ndim", 0) in (1, 2) and a.shape[0] > M:
            seen.append(("X" if a.ndim == 2 and a.shape[1] == D else "y", int(a.shape[0])))
        return real(a, name, xp)

    monkeypatch.setattr(_validation, "check_finite", counting)
    return seen


@pytest.mark.parametrize("objective", ["prop", "stoch-prop", "sgpr", "gcv"])
def test_tune_checks_X_once(data, checks, objective):
    X, y = data
    nh.tune(X, y, objective=objective, centers=M, epochs=3, progress=False)
    assert checks == [("X", N), ("y", N)]


def test_tune_with_a_validation_split_checks_X_once(data, checks):
    X, y = data
    nh.tune(X, y, objective="prop", centers=M, epochs=3, progress=False, validation=0.25)
    assert checks == [("X", N), ("y", 180)]  # the targets are checked as the training rows


def test_tune_checks_a_validation_set_once_too(data, checks):
    X, y = data
    nh.tune(X[:200], y[:200], objective="prop", centers=M, epochs=3, progress=False, validation=(X[200:], y[200:]))
    assert sorted(checks) == [("X", 40), ("X", 200), ("y", 200)]


def test_the_estimators_check_X_once_per_call(data, checks):
    X, y = data
    for solver in ("direct", "falkon"):
        model = nh.NystromKRR(centers=M, solver=solver).fit(X, y)
        assert checks == [("X", N), ("y", N)], solver
        checks.clear()
    for call, seen in ((lambda: model.predict(X), [("X", N)]), (lambda: model.predict(X, return_std=True), [("X", N)]),
                       (lambda: model.score(X, y), [("X", N), ("y", N)])):
        call()
        assert checks == seen
        checks.clear()


def test_the_classifier_checks_X_once_per_call(data, checks):
    X, y = data
    labels = np.where(y > 0, "up", "down")
    model = nh.NystromKRRClassifier(centers=M).fit(X, labels)
    assert checks == [("X", N)]  # the labels are encoded, not checked as numbers
    for call in (lambda: model.predict(X), lambda: model.decision_function(X, return_std=True),
                 lambda: model.score(X, labels)):
        checks.clear()
        call()
        assert checks == [("X", N)]


def test_hyperopt_checks_X_once_per_call(data, checks):
    X, y = data
    est = nh.HyperoptKRR(centers=M, epochs=3, progress=False).fit(X, y)
    assert checks == [("X", N), ("y", N)]
    for call, seen in ((lambda: est.predict(X), [("X", N)]), (lambda: est.predict(X, return_std=True), [("X", N)]),
                       (lambda: est.score(X, y), [("X", N), ("y", N)])):
        checks.clear()
        call()
        assert checks == seen


def test_a_dataframe_is_converted_and_checked_once(data, checks):
    pd = pytest.importorskip("pandas")
    X, y = data
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    model = nh.NystromKRR(centers=M).fit(frame, y)
    checks.clear()
    mean, std = model.predict(frame, return_std=True)
    assert checks == [("X", N)] and mean.shape == std.shape == (N,)


def test_an_objective_checks_X_when_made_and_never_in_its_evaluations(data, checks):
    X, y = data
    obj = nh.make_objective("stoch-prop", X, y, n_probes=4, random_state=0)
    assert checks == [("X", N), ("y", N)]
    params = nh.Params.from_natural(1e-3, [1.0] * D, X[:M])
    obj.value_and_grad(params)
    obj.value(params)
    obj.terms(params)
    assert checks == [("X", N), ("y", N)]


def test_trust_ends_with_the_call_so_a_later_call_checks_again(data):
    X, y = data
    model = nh.NystromKRR(centers=M).fit(X, y)
    assert not _door.trusted(X) and _door.recall(X) is None
    bad = X.copy()
    model.predict(bad)
    bad[5, 1] = np.nan  # changed in place between two calls
    with pytest.raises(ValueError, match="NaN or infinity"):
        model.predict(bad)


def test_trust_outside_a_call_does_nothing():
    a = np.ones((3, 2))
    _door.trust(a)
    _door.remember([[1.0, 1.0]], a)
    assert not _door.trusted(a)
    with _door.trusting(a):
        assert _door.trusted(a)
    assert not _door.trusted(a)


def test_a_trusted_array_is_checked_when_asked_for_another_dtype_or_width():
    a = np.ones((4, 2))
    with _door.trusting(a):
        assert _validation.check_matrix(a, "X") is a
        assert _validation.check_matrix(a, "X", dtype=np.float32).dtype == np.float32
        with pytest.raises(ValueError, match="features"):
            _validation.check_matrix(a, "X", n_features=3)


def test_tune_on_dask_checks_each_row_block_where_it_is_placed_and_never_in_a_pass(data, checks):
    pytest.importorskip("distributed")
    import dask.array as da
    from distributed import Client, LocalCluster

    X, y = data
    Xd, yd = da.from_array(X, chunks=(80, D)), da.from_array(y, chunks=80)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        nh.tune(Xd, yd, objective="stoch-prop", centers=M, epochs=2, progress=False, client=client,
                objective_options={"gram": True})
    # three blocks of 80 rows, checked where the objective places them; the final fit places them again
    # (docs/dev/architecture.md, "One door for data") without checking X: its targets are new blocks
    assert sorted(checks) == [("X", 80)] * 3 + [("y", 80)] * 6


def test_warnings_point_at_the_users_line_through_the_door(data):
    X, y = data
    labels = (y > 0).astype(int) + 2 * (X[:, 1] > 0)  # four integer values: task='auto' warns
    with pytest.warns(UserWarning, match="task='auto'") as rec:
        nh.tune(X, labels, objective="prop", centers=M, epochs=2, progress=False)
    assert rec[0].filename == __file__
    with pytest.warns(UserWarning, match="more than the") as rec:  # nested: NystromKRR inside HyperoptKRR's tune
        nh.HyperoptKRR(centers=N + 5, epochs=1, progress=False, standardize=False).fit(X, y)
    assert all(r.filename == __file__ for r in rec)
