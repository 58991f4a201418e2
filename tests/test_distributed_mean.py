"""stoch-prop with a constant mean (``mean="constant"``) on a Dask cluster against one process."""
from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import nyhopt as nh  # noqa: E402

N, D, M = 420, 3, 30
CHUNKINGS = {1: (N,), 2: (210, 210), 3: (200, 20, 200), 7: (60,) * 7}
# The single-process reference and the cluster sum in other orders (threads, row blocks); CG amplifies
# that rounding by the conditioning of the solve.  The ones column of the constant is the worst-conditioned
# right-hand side (the kernel nearly reproduces a constant): at the penalty 1e-3 of tests/test_distributed.py
# the gradients measured 0.7-1.9e-10 apart (3.5-5.8e-11 with the zero mean); at 1e-2, 1.3-2.2e-11.
PENALTY = 1e-2
STOCH = dict(n_probes=4, n_rows=100, tol=1e-12, maxiter=400, warm_start=False, random_state=3, mean="constant")
#: Agreement of the Gram route on the cluster with the one-process Gram route (tests/test_distributed.py).
GRAM_TOL = 2e-9


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  env={"NUMBA_NUM_THREADS": "1"}) as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(autouse=True)
def streaming_reference(monkeypatch):
    """The cluster and the one-process references stream (see tests/test_distributed.py)."""
    from nyhopt.distributed import _cost
    from nyhopt.objectives import stoch_prop
    from nyhopt.ops import operator

    monkeypatch.setattr(operator, "gram_pays", lambda *args, **kwargs: False)
    monkeypatch.setattr(stoch_prop, "gram_pays", lambda *args, **kwargs: False)
    monkeypatch.setattr(_cost, "cluster_gram_pays", lambda *args, **kwargs: False)
    with nh.cache_budget(0):
        yield


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(7)
    X = rng.uniform(-1, 1, size=(N, D))
    # an offset the constant has to carry, and a skewed target
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.normal(size=N) + 2.0 + 0.5 * (X[:, 2] > 0.4)
    return X, y, X[rng.choice(N, M, replace=False)].copy()


def _dask(X, y, blocks):
    rows = CHUNKINGS[blocks]
    chunks_y = (rows,) if y.ndim == 1 else (rows, y.shape[1])
    return da.from_array(X, chunks=(rows, D)), da.from_array(y, chunks=chunks_y)


def _params(Z):
    return nh.Params.from_natural(PENALTY, [0.8, 1.2, 1.0], Z)


def _flat(g):
    return np.concatenate([np.atleast_1d(g.log_penalty), np.ravel(g.log_lengthscale), np.ravel(g.centers)])


def _rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(np.asarray(b))))


def _two_targets(X, y):
    return np.stack([y, np.cos(2 * X[:, 2]) - 1.5], axis=1)


@pytest.mark.parametrize("blocks", sorted(CHUNKINGS))
@pytest.mark.parametrize("targets", [1, 2])
def test_constant_mean_matches_one_process(client, problem, blocks, targets):
    X, y, Z = problem
    Y = y if targets == 1 else _two_targets(X, y)
    ref = nh.make_objective("stoch-prop", X, Y, kernel_cache=False, gram=False, **STOCH)
    v0, g0 = ref.value_and_grad(_params(Z))
    obj = nh.make_objective("stoch-prop", *_dask(X, Y, blocks), **STOCH)
    assert obj.mean == "constant"
    v, g = obj.value_and_grad(_params(Z))
    assert abs(v - v0) <= 1e-10 * abs(v0)
    assert np.linalg.norm(_flat(g) - _flat(g0)) <= 1e-10 * np.linalg.norm(_flat(g0))
    assert _rel(obj.last_intercept, ref.last_intercept) <= 1e-10
    assert obj.last_solve.converged and obj.last_solve.n_rhs == 4 + targets + 1  # [R | Y | 1]
    assert obj.terms(_params(Z)) == pytest.approx(ref.terms(_params(Z)), rel=1e-10)
    obj.release()


def test_constant_mean_changes_the_value_on_dask(client, problem):
    """The constant is used (not the zero mean), and the value does not move with a shift of y."""
    X, y, Z = problem
    Xd, yd = _dask(X, y, 3)
    zero = nh.make_objective("stoch-prop", Xd, yd, **dict(STOCH, mean="zero"))
    const = nh.make_objective("stoch-prop", Xd, yd, **STOCH)
    shifted = nh.make_objective("stoch-prop", Xd, yd + 5.0, **STOCH)
    vz, vc, vs = (o.value(_params(Z)) for o in (zero, const, shifted))
    assert vc < vz
    assert vs == pytest.approx(vc, rel=1e-8)
    assert shifted.last_intercept[0] == pytest.approx(const.last_intercept[0] + 5.0, rel=1e-8)
    for o in (zero, const, shifted):
        o.release()


def test_constant_mean_gram_route_on_dask(client, problem):
    X, y, Z = problem
    ref = nh.make_objective("stoch-prop", X, y, kernel_cache=False, gram=True, **STOCH)
    v0, g0 = ref.value_and_grad(_params(Z))
    obj = nh.make_objective("stoch-prop", *_dask(X, y, 3), gram=True, **STOCH)
    v, g = obj.value_and_grad(_params(Z))
    assert abs(v - v0) <= GRAM_TOL * abs(v0)
    assert np.linalg.norm(_flat(g) - _flat(g0)) <= GRAM_TOL * np.linalg.norm(_flat(g0))
    assert obj.last_solve.passes == ref.last_solve.passes
    obj.release()


def test_constant_mean_plain_value_form_refused_on_dask(client, problem):
    X, y, _ = problem
    with pytest.raises(ValueError, match="value_form"):
        nh.make_objective("stoch-prop", *_dask(X, y, 2), value_form="plain", mean="constant")


TUNE = dict(objective="stoch-prop", centers=15, epochs=3, random_state=5, progress=False, patience=None,
            objective_options=dict(n_probes=4, n_rows=100, tol=1e-12, maxiter=400, mean="constant"))


def test_tune_with_constant_mean_on_dask_matches_one_process(client, problem):
    """The run, the tracked errors (of the model with its intercept) and the final model's constant."""
    X, y, _ = problem
    ref = nh.tune(X[:300], y[:300], validation=(X[300:], y[300:]), solver="falkon", **TUNE)
    res = nh.tune(da.from_array(X[:300], chunks=(150, D)), da.from_array(y[:300], chunks=150),
                  validation=(da.from_array(X[300:]), da.from_array(y[300:])), **TUNE)
    for field in ("objective", "penalty"):
        assert _rel(getattr(res.history, field), getattr(ref.history, field)) <= 1e-8, field
    for field in ("train_error", "validation_error"):  # the same epochs tracked (every 20th, the last, the best)
        a, b = getattr(res.history, field), getattr(ref.history, field)
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        assert _rel(a[np.isfinite(a)], b[np.isfinite(b)]) <= 1e-8, field
    assert _rel(res.params.centers, ref.params.centers) <= 1e-8
    assert res.model.fit_intercept and ref.model.fit_intercept
    assert _rel(res.model.intercept_, ref.model.intercept_) <= 1e-8
    pred = res.model.predict(da.from_array(X[300:], chunks=(60, D))).compute()
    assert _rel(pred, ref.model.predict(X[300:])) <= 1e-8
    # the tracked training error is that of the model with the intercept, fitted at the recorded point
    assert np.all(np.isfinite(res.history.train_error[[0, -1, res.best_epoch]]))


def test_hyperopt_krr_with_constant_mean_on_dask(client, problem):
    X, y, _ = problem
    kw = dict(objective="stoch-prop", centers=15, epochs=2, random_state=1, progress=False, solver="falkon",
              objective_options=dict(n_probes=4, tol=1e-10, maxiter=400, mean="constant"))
    ref = nh.HyperoptKRR(**kw).fit(X, y)
    est = nh.HyperoptKRR(**kw).fit(*_dask(X, y, 3))
    assert _rel(est.history_.objective, ref.history_.objective) <= 1e-7
    assert _rel(est.intercept_, ref.intercept_) <= 1e-6 and abs(float(np.ravel(ref.intercept_)[0]) - y.mean()) < 1.0
    pred = est.predict(da.from_array(X, chunks=(100, D)))
    assert _rel(pred.compute(), ref.predict(X)) <= 1e-6
