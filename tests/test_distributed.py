"""nyhopt on a Dask cluster: block products, Falkon and the estimator against one process."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import nyhopt as nh  # noqa: E402
from nyhopt import ops  # noqa: E402
from nyhopt.distributed import DaskTreeReducer, LocalReducer, ShardedData, is_dask_array  # noqa: E402
from nyhopt.distributed import _cost  # noqa: E402
from nyhopt.distributed.sharded import TARGETS  # noqa: E402
from nyhopt.estimator import NotFittedError  # noqa: E402
from nyhopt.solvers import falkon_solve  # noqa: E402

N, D, M = 420, 3, 30
# 1, 2, 3 (uneven) and 7 row blocks
CHUNKINGS = {1: (N,), 2: (210, 210), 3: (200, 20, 200), 7: (60,) * 7}
KERNEL = nh.GaussianKernel(np.array([0.8, 1.2, 1.0]))
# CG stops where its residual crosses tol; rounding can move that by an iteration, a change of
# order tol * cond(W) in the solution: a moderate penalty keeps that well below 1e-10
PENALTY = 1e-3


def _cluster(n_workers):
    return distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                    dashboard_address=":0", env={"NUMBA_NUM_THREADS": "1"})


@pytest.fixture(scope="module")
def client():
    with _cluster(2) as cluster, distributed.Client(cluster) as c:
        yield c


CLUSTER_GRAM_PAYS = _cost.cluster_gram_pays  # the cluster's rule, before the fixture below replaces it


@pytest.fixture(autouse=True)
def streaming_reference(monkeypatch):
    """The cluster and the single-process references take one route: streaming passes, no held kernel,
    no K^T K (unless a test asks for ``gram=True`` on both, or restores the cluster's rule).

    The other routes give the same iterates with other rounding, which CG amplifies to about 1e-9
    here (docs/stochastic.md, "Passes per step"), above the 1e-10 these tests hold the cluster to.
    """
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
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.normal(size=N)
    return X, y, X[rng.choice(N, M, replace=False)].copy()


def _dask(X, y, blocks):
    rows = CHUNKINGS[blocks]
    return da.from_array(X, chunks=(rows, D)), da.from_array(y, chunks=(rows,))


def _rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(np.asarray(b))))


def test_import_nyhopt_does_not_import_dask():
    code = ("import sys, numpy as np, nyhopt as nh; "
            "nh.NystromKRR(centers=5).fit(np.random.rand(20, 2), np.ones(20)); "
            "print(any(k.split('.')[0] in ('dask', 'distributed') for k in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


def test_is_dask_array(problem):
    X, y, _ = problem
    assert is_dask_array(da.from_array(X)) and not is_dask_array(X) and not is_dask_array(None)


@pytest.mark.parametrize("blocks", sorted(CHUNKINGS))
def test_block_products_match_one_process(client, problem, blocks):
    X, y, Z = problem
    data = ShardedData(*_dask(X, y, blocks), client=client)
    assert len(data.blocks) == blocks
    op = data.bind(KERNEL, Z)
    V = np.random.default_rng(1).normal(size=(M, 3))
    KtKV, KtY, KV = op.normal_matvec(V, TARGETS, kv=True)
    ref = ops.normal_matvec(KERNEL, X, Z, V, y, kv=True)
    assert KtKV.dtype == np.float64 and KtKV.shape == (M, 3)
    assert _rel(KtKV, ref[0]) <= 1e-10 and _rel(KtY, ref[1]) <= 1e-10
    assert is_dask_array(KV) and _rel(KV.compute(), ref[2]) <= 1e-10
    assert _rel(op.kmtv(), ops.kmtv(KERNEL, X, Z, y)[:, None]) <= 1e-10
    assert _rel(op.kmv(V).compute(), ops.kmv(KERNEL, X, Z, V)) <= 1e-10
    assert op.normal_matvec(V)[1] is None
    data.release()


@pytest.mark.parametrize("blocks", sorted(CHUNKINGS))
def test_falkon_matches_one_process(client, problem, blocks):
    X, y, Z = problem
    Xd, yd = _dask(X, y, blocks)
    ref = falkon_solve(KERNEL, X, Z, y, PENALTY, tol=1e-12, maxiter=400)
    res = falkon_solve(KERNEL, Xd, Z, yd, PENALTY, tol=1e-12, maxiter=400)
    assert ref.cg.converged and res.cg.converged
    assert isinstance(res.alpha, np.ndarray)
    assert _rel(res.alpha, ref.alpha) <= 1e-10


def test_falkon_warm_start_matches_one_process(client, problem):
    X, y, Z = problem
    Xd, yd = _dask(X, y, 3)
    beta0 = falkon_solve(KERNEL, X, Z, y, 1e-4, tol=1e-3).beta
    ref = falkon_solve(KERNEL, X, Z, y, PENALTY, tol=1e-12, maxiter=400, beta0=beta0)
    res = falkon_solve(KERNEL, Xd, Z, yd, PENALTY, tol=1e-12, maxiter=400, beta0=beta0)
    assert _rel(res.alpha, ref.alpha) <= 1e-10


def test_one_and_two_workers_identical(client, problem):
    X, y, Z = problem
    Xd, yd = _dask(X, y, 3)
    two = falkon_solve(KERNEL, Xd, Z, yd, PENALTY, tol=1e-12, maxiter=400)
    with _cluster(1) as cluster, distributed.Client(cluster, set_as_default=False) as one_client:
        data = ShardedData(*_dask(X, y, 3), client=one_client)
        from nyhopt.distributed.falkon import falkon_solve_sharded

        one = falkon_solve_sharded(KERNEL, data, Z, PENALTY, tol=1e-12, maxiter=400)
        one_sp = nh.make_objective("stoch-prop", Xd, yd, client=one_client, **STOCH).value_and_grad(_stoch_params(Z))
    np.testing.assert_array_equal(one.alpha, two.alpha)
    two_sp = nh.make_objective("stoch-prop", Xd, yd, **STOCH).value_and_grad(_stoch_params(Z))
    assert one_sp[0] == two_sp[0]
    np.testing.assert_array_equal(_flat(one_sp[1]), _flat(two_sp[1]))


def _peer_bytes_of_three_passes(client, X, y, Z):
    """Bytes the workers fetched from each other during three passes; asserts no X/y block moved."""
    rows = -(-X.shape[0] // 7)
    data = ShardedData(da.from_array(X, chunks=(rows, D)), da.from_array(y, chunks=rows), client=client)
    block_keys = {b.key for b in data.blocks}
    before = client.run(lambda dask_worker: len(dask_worker.transfer_incoming_log))
    op = data.bind(KERNEL, Z)
    V = np.ones((M, 2))
    for _ in range(3):
        op.normal_matvec(V, TARGETS)
    logs = client.run(lambda dask_worker: list(dask_worker.transfer_incoming_log))
    received = 0
    for worker, log in logs.items():
        for entry in log[before[worker]:]:
            assert not block_keys & set(entry["keys"]), "a persisted X/y block moved between workers"
            received += entry["total"]
    data.release()
    return received


def test_data_stay_on_their_workers(client, problem):
    X, y, Z = problem
    small = _peer_bytes_of_three_passes(client, X, y, Z)
    big = _peer_bytes_of_three_passes(client, np.tile(X, (10, 1)), np.tile(y, 10), Z)
    # what moves is the reduction of m x k partials (7 blocks), whatever n
    bound = 3 * 7 * (M * 2 * 8 + 1024)
    assert small < bound and big < bound


def test_estimator_fit_predict_on_dask(client, problem):
    X, y, _ = problem
    Xd, yd = _dask(X, y, 3)
    kw = dict(kernel=KERNEL, penalty=PENALTY, centers=M, tol=1e-12, maxiter=400, random_state=3, normalize_y=True)
    ref = nh.NystromKRR(**kw).fit(X, y)
    model = nh.NystromKRR(**kw).fit(Xd, yd)
    np.testing.assert_array_equal(model.centers_, ref.centers_)
    assert model.alpha_.shape == (M,) and _rel(model.alpha_, ref.alpha_) <= 1e-10
    assert _rel(model.y_scale_, ref.y_scale_) <= 1e-12
    pred = model.predict(Xd)
    assert is_dask_array(pred) and pred.shape == (N,) and pred.chunks == (CHUNKINGS[3],)
    assert _rel(pred.compute(), ref.predict(X)) <= 1e-10


def test_score_and_metrics_on_dask(client, problem):
    """score of a model fitted on dask arrays, for a dask X and a dask or in-memory y (and weights), and the
    metrics of its dask predictions: the values of one process."""
    from nyhopt import datasets, metrics

    X, y, _ = problem
    Xd, yd = _dask(X, y, 3)
    kw = dict(kernel=KERNEL, penalty=PENALTY, centers=M, tol=1e-12, maxiter=400, random_state=3, normalize_y=True)
    ref = nh.NystromKRR(**kw).fit(X, y)
    model = nh.NystromKRR(**kw).fit(Xd, yd)
    w = np.linspace(0.5, 2.0, N)
    want = ref.score(X, y)
    assert model.score(Xd, yd) == pytest.approx(want, rel=1e-10)
    assert model.score(Xd, y) == pytest.approx(want, rel=1e-10)
    assert model.score(Xd, yd, sample_weight=da.from_array(w, chunks=77)) == pytest.approx(
        ref.score(X, y, sample_weight=w), rel=1e-10)
    mean, std = model.predict(Xd, return_std=True)
    rmean, rstd = ref.predict(X, return_std=True)
    assert metrics.rmse(yd, mean) == pytest.approx(metrics.rmse(y, rmean), rel=1e-9)
    assert metrics.nlpd(y, mean, std) == pytest.approx(metrics.nlpd(y, rmean, rstd), rel=1e-9)
    assert metrics.coverage(yd, mean, std) == metrics.coverage(y, rmean, rstd)
    assert datasets.rmse(yd, mean) == pytest.approx(datasets.rmse(y, rmean), rel=1e-9)
    with pytest.raises(ValueError, match="y has 419 rows"):
        model.score(Xd, yd[:-1])


def test_predictive_std_on_dask(client, problem):
    X, y, _ = problem
    Xd, yd = _dask(X, y, 3)
    kw = dict(kernel=KERNEL, penalty=PENALTY, centers=M, tol=1e-12, maxiter=400, random_state=3, normalize_y=True)
    ref = nh.NystromKRR(**kw).fit(X, y)
    model = nh.NystromKRR(**kw).fit(Xd, yd)  # the variance model: one more pass, reduced over the blocks
    assert model.amplitude_ == pytest.approx(ref.amplitude_, rel=1e-10)
    mean, std = model.predict(Xd, return_std=True)
    assert is_dask_array(std) and std.shape == (N,) and std.chunks == (CHUNKINGS[3],)
    ref_mean, ref_std = ref.predict(X, return_std=True)
    assert _rel(std.compute(), ref_std) <= 1e-10 and _rel(mean.compute(), ref_mean) <= 1e-10
    latent = model.predict(Xd, return_std=True, include_noise=False)[1].compute()
    assert _rel(latent, ref.predict(X, return_std=True, include_noise=False)[1]) <= 1e-10
    # an in-memory model predicts dask arrays too; two outputs give (n, 2); no n x n covariance
    Y = np.stack([y, 3 * y], axis=1)
    two = nh.NystromKRR(kernel=KERNEL, penalty=PENALTY, centers=M, solver="direct", random_state=0,
                        normalize_y=True).fit(X, Y)
    std2 = two.predict(da.from_array(X, chunks=(77, D)), return_std=True)[1]
    assert std2.shape == (N, 2) and _rel(std2.compute(), two.predict(X, return_std=True)[1]) <= 1e-12
    with pytest.raises(ValueError, match="return_cov"):
        two.predict(Xd, return_cov=True)
    no_var = nh.NystromKRR(kernel=KERNEL, penalty=PENALTY, centers=M, random_state=3,
                           predictive_variance=False).fit(Xd, yd)
    assert no_var.variance_model_ is None
    with pytest.raises(ValueError, match="no variance model"):
        no_var.predict(Xd, return_std=True)


def test_estimator_two_outputs_on_dask(client, problem):
    # each column stops when its residual crosses tol; rounding may move that by one iteration,
    # a difference of order tol * cond(W): a well conditioned problem keeps it below 1e-10
    X, y, _ = problem
    Y = np.stack([y, np.cos(X[:, 2])], axis=1)
    Xd = da.from_array(X, chunks=(CHUNKINGS[2], D))
    kw = dict(kernel=KERNEL, penalty=1e-3, centers=M, tol=1e-12, maxiter=400, random_state=0)
    ref = nh.NystromKRR(**kw).fit(X, Y)
    model = nh.NystromKRR(**kw).fit(Xd, da.from_array(Y, chunks=(CHUNKINGS[2], 2)))
    assert _rel(model.alpha_, ref.alpha_) <= 1e-10
    assert _rel(model.predict(Xd).compute(), ref.predict(X)) <= 1e-10


@pytest.mark.parametrize("normalize_y", [False, True])
def test_estimator_intercept_on_dask(client, problem, normalize_y):
    X, y, _ = problem
    Y = np.stack([y + 3.0, np.cos(X[:, 2]) - 1.0], axis=1)
    Xd = da.from_array(X, chunks=(CHUNKINGS[3], D))
    kw = dict(kernel=KERNEL, penalty=PENALTY, centers=M, tol=1e-12, maxiter=400, random_state=0,
              fit_intercept=True, normalize_y=normalize_y)
    ref = nh.NystromKRR(**kw).fit(X, Y)
    model = nh.NystromKRR(**kw).fit(Xd, da.from_array(Y, chunks=(CHUNKINGS[3], 2)))
    assert _rel(model.intercept_, ref.intercept_) <= 1e-9 and abs(model.intercept_[0] - 3.0) < 1.0
    assert _rel(model.alpha_, ref.alpha_) <= 1e-9
    assert _rel(model.predict(Xd).compute(), ref.predict(X)) <= 1e-9


def test_direct_solver_refuses_dask(client, problem):
    X, y, _ = problem
    with pytest.raises(ValueError, match="falkon"):
        nh.NystromKRR(solver="direct", centers=M).fit(*_dask(X, y, 2))


def test_bad_input_errors(client, problem):
    X, y, _ = problem
    with pytest.raises(ValueError, match="chunked along its columns"):
        ShardedData(da.from_array(X, chunks=(100, 2)), da.from_array(y, chunks=100), client=client)
    with pytest.raises(ValueError, match="row chunks of y"):
        ShardedData(da.from_array(X, chunks=(100, D)), da.from_array(y, chunks=150), client=client)
    with pytest.raises(ValueError, match="y has 10 rows"):
        ShardedData(da.from_array(X, chunks=(100, D)), da.from_array(y[:10]), client=client)
    Xbad = X.copy()
    Xbad[300, 1] = np.nan
    with pytest.raises(ValueError, match=r"X \(row block 3\) contains NaN"):
        ShardedData(da.from_array(Xbad, chunks=(100, D)), da.from_array(y, chunks=100), client=client)
    with pytest.raises(TypeError, match="client must be"):
        ShardedData(da.from_array(X), client="tcp://nowhere")
    with pytest.raises(TypeError, match="TARGETS"):
        ShardedData(da.from_array(X), client=client).bind(KERNEL, X[:5]).normal_matvec(np.ones(5), y)


def test_closed_client_is_refused(problem):
    X, y, _ = problem
    with _cluster(1) as cluster:
        closed = distributed.Client(cluster, set_as_default=False)
        closed.close()
    with pytest.raises(ValueError, match="closed"):
        ShardedData(da.from_array(X), da.from_array(y), client=closed)
    with pytest.raises(ValueError, match="closed"):
        nh.make_objective("stoch-prop", da.from_array(X), da.from_array(y), client=closed)


def test_predict_checks(client, problem):
    X, y, _ = problem
    with pytest.raises(NotFittedError):
        nh.NystromKRR().predict(da.from_array(X))
    model = nh.NystromKRR(centers=M, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.predict(da.from_array(X[:, :2]))
    np.testing.assert_allclose(model.predict(da.from_array(X, chunks=(77, D))).compute(), model.predict(X),
                               rtol=1e-12)


def test_reducers_agree_and_are_ordered(client):
    rng = np.random.default_rng(0)
    parts = [(rng.normal(size=(4, 2)), None) for _ in range(11)]
    local = LocalReducer().reduce(parts)
    tree = DaskTreeReducer(client, split_every=3).reduce([client.scatter(p) for p in parts])
    assert tree[1] is None and _rel(tree[0], local[0]) <= 1e-14
    with pytest.raises(ValueError, match="split_every"):
        DaskTreeReducer(client, split_every=1)
    with pytest.raises(ValueError, match="empty"):
        LocalReducer().reduce([])


@pytest.mark.parametrize("name", ["prop", "gcv", "sgpr", "holdout"])
def test_exact_objectives_refuse_dask(problem, name):
    X, y, _ = problem
    with pytest.raises(ValueError, match="stoch-prop"):
        nh.make_objective(name, da.from_array(X), da.from_array(y))
    with pytest.raises(ValueError, match="stoch-prop"):
        nh.tune(da.from_array(X), y, objective=name, centers=5, epochs=1, progress=False)


STOCH = dict(n_probes=4, n_rows=100, tol=1e-12, maxiter=400, warm_start=False, random_state=3)


def _stoch_params(Z):
    return nh.Params.from_natural(PENALTY, [0.8, 1.2, 1.0], Z)


def _flat(g):
    return np.concatenate([np.atleast_1d(g.log_penalty), np.ravel(g.log_lengthscale), np.ravel(g.centers)])


@pytest.fixture(scope="module")
def stoch_reference(problem):
    X, y, Z = problem
    return nh.make_objective("stoch-prop", X, y, kernel_cache=False, gram=False,
                             **STOCH).value_and_grad(_stoch_params(Z))


@pytest.mark.parametrize("blocks", sorted(CHUNKINGS))
def test_stoch_prop_matches_one_process(client, problem, stoch_reference, blocks):
    X, y, Z = problem
    v0, g0 = stoch_reference
    obj = nh.make_objective("stoch-prop", *_dask(X, y, blocks), **STOCH)
    v, g = obj.value_and_grad(_stoch_params(Z))
    assert abs(v - v0) <= 1e-10 * abs(v0)
    assert np.linalg.norm(_flat(g) - _flat(g0)) <= 1e-10 * np.linalg.norm(_flat(g0))
    assert obj.last_solve.converged and obj.last_solve.n_rhs == 5
    assert obj.value(_stoch_params(Z)) == pytest.approx(v, rel=1e-12)
    obj.release()


def test_stoch_prop_probes_are_drawn_on_the_workers(client, problem):
    from nyhopt.objectives._trace import probe_rows

    X, y, _ = problem
    obj = nh.make_objective("stoch-prop", *_dask(X, y, 3), n_probes=4, random_state=3)
    W = np.concatenate(client.gather(obj.data.map_blocks(lambda b: b[1])), axis=0)
    np.testing.assert_array_equal(W[:, :4], probe_rows(obj.seed, 4, 0, N))
    np.testing.assert_array_equal(W[:, 4], y)
    obj.release()


def test_stoch_prop_on_dask_bad_options(client, problem):
    X, y, _ = problem
    Xd, yd = _dask(X, y, 2)
    for opts, match in (({"effective_dimension_estimator": "hutch++"}, "effective_dimension_estimator"),
                        ({"trace_estimator": "hutchinson"}, "trace_estimator"),
                        ({"kernel_cache": True}, "kernel_cache"),
                        ({"mean": "constant", "value_form": "plain"}, "value_form"),
                        ({"folds": 3}, "unknown option")):
        with pytest.raises(ValueError, match=match):
            nh.make_objective("stoch-prop", Xd, yd, **opts)
    # the single-machine defaults are accepted: no held kernel (the passes stream on the workers), and
    # the Gram route left to the cluster's cost model (test_gram_auto_on_dask_follows_the_cost_model)
    obj = nh.make_objective("stoch-prop", Xd, yd, kernel_cache="auto", gram="auto", mean="zero")
    assert obj.kernel_cache is False and obj.gram == "auto" and obj.mean == "zero"
    obj.release()


def _count_reductions(monkeypatch):
    """Record ``(task function, blocks, shapes of the reduced sums)`` of every reduction on the driver."""
    calls = []
    orig = ShardedData.reduce

    def spy(self, func, *args, **kwargs):
        out = orig(self, func, *args, **kwargs)
        sums = out[0] if kwargs.get("keep") else out
        shapes = tuple(None if s is None else np.shape(s) for s in sums)
        calls.append((func.__name__, len(self.blocks), shapes))
        return out

    monkeypatch.setattr(ShardedData, "reduce", spy)
    return calls


GRAM_TOL = 2e-9


def test_gram_route_step_on_dask(client, problem, monkeypatch):
    """A Gram-route stoch-prop step on a cluster: the Gram pass (one task per row block, each returning
    an m x m partial, summed once), then no pass in the CG iterations; the value and gradient of the
    one-process Gram route.  The m x m partials are summed in another order than one process sums its
    row blocks, a rounding change that CG and the energy form amplify as any change of route does in one
    process (the streaming_reference fixture): measured 4e-10 here, held to GRAM_TOL."""
    X, y, Z = problem
    ref = nh.make_objective("stoch-prop", X, y, kernel_cache=False, gram=True, **STOCH)
    v0, g0 = ref.value_and_grad(_stoch_params(Z))
    obj = nh.make_objective("stoch-prop", *_dask(X, y, 3), gram=True, **STOCH)
    calls = _count_reductions(monkeypatch)
    v, g = obj.value_and_grad(_stoch_params(Z))
    assert abs(v - v0) <= GRAM_TOL * abs(v0)
    assert np.linalg.norm(_flat(g) - _flat(g0)) <= GRAM_TOL * np.linalg.norm(_flat(g0))
    names = [c[0] for c in calls]
    # no pass per CG iteration, and none for u = K a: its sums come from G and the Gram pass's target sums
    assert names == ["block_gram", "block_adjoint"], names
    gram_call = calls[0]
    assert gram_call[1] == len(obj.data.blocks) == 3  # one task per row block
    assert gram_call[2][0] == (M, M) and gram_call[2][1] == (M, 5)  # one m x m (and m x k) reduction
    assert gram_call[2][2:] == ((5,), (5,))  # and the targets' sums, W.W and W^T w_last
    assert obj.last_solve.passes == ref.last_solve.passes == 2
    assert obj.last_solve.iterations > 3
    obj.release()


@pytest.mark.parametrize("route", ["int8", "float16"])
def test_gram_route_on_dask_with_tensor_cores_set(client, problem, monkeypatch, route):
    """float32 NumPy chunks with tensor cores set on the driver: the workers (other processes, whose own
    setting is the default) are told the route of the data, None on the CPU, and form G in float64
    products; the driver trusts its sums as such (no u pass, also for "float16").  The CuPy chunks'
    case: tests/test_distributed_gpu.py."""
    from nyhopt.ops import gram as gram_module

    monkeypatch.setattr(gram_module, "TENSOR_CORES", route)
    X, y, Z = problem
    obj = nh.make_objective("stoch-prop", *_dask(X.astype(np.float32), y.astype(np.float32), 3), gram=True,
                            **dict(STOCH, tol=1e-5))
    assert not obj.data.gpu and obj.data.gram_route() is None
    told = []
    orig = ShardedData.reduce
    monkeypatch.setattr(ShardedData, "reduce", lambda self, func, *args, **kw: (
        told.append(args[-1]) if func.__name__ == "block_gram" else None) or orig(self, func, *args, **kw))
    calls = _count_reductions(monkeypatch)
    v, _ = obj.value_and_grad(_stoch_params(Z.astype(np.float32)))
    assert np.isfinite(v)
    assert [c[0] for c in calls] == ["block_gram", "block_adjoint"]
    assert told == [False]
    obj.release()


def test_cluster_gram_cost_model():
    """The Gram pass pays once the rounds of tasks it saves cost more than it; never for huge partials."""
    # a stoch-prop step at n = 6e4, m = 400 (20 expected CG iterations, 5 columns): the Gram route
    # (measured 1.2 s a step on a 2-worker LocalCluster against 9.3 s streaming)
    assert CLUSTER_GRAM_PAYS(60_000, 400, 5, 20, blocks=4, slots=2)
    # the first normal product never forms G (it costs more than one streaming product)
    assert not CLUSTER_GRAM_PAYS(60_000, 400, 5, 1, blocks=4, slots=2)
    # the per-pass overhead weighs on the streaming side: on small data G pays sooner than by compute alone
    small = [p for p in range(1, 50) if CLUSTER_GRAM_PAYS(N, M, 5, p, blocks=3, slots=2)][0]
    assert small == 2
    # m = 5000 at n = 2e6: the m^2 rank update outweighs 20 streamed products
    assert not CLUSTER_GRAM_PAYS(2_000_000, 5000, 5, 20, blocks=4, slots=2)
    # partials over GRAM_PARTIAL_BYTES never, whatever the products saved
    m_big = int((_cost.GRAM_PARTIAL_BYTES / 8) ** 0.5) + 1
    assert not CLUSTER_GRAM_PAYS(10**9, m_big, 100, 10**6, blocks=1000, slots=1000)
    # more workers shorten both passes alike; more products only ever favour G
    for p in (3, 10, 40):
        assert CLUSTER_GRAM_PAYS(10**6, 1000, 5, p + 1, 8, 8) >= CLUSTER_GRAM_PAYS(10**6, 1000, 5, p, 8, 8)


def test_cluster_gram_cost_model_on_gpus_prices_the_route():
    """On CuPy chunks the model takes a GPU's constants, and the Gram pass the constant of the route the
    workers are told: int8 tensor cores pay sooner than float64 products, which pay sooner than nothing."""
    from nyhopt.ops import operator

    n, m, k, blocks, slots = 10**7, 5000, 21, 4, 4

    def first(**kw):
        return next(p for p in range(1, 10**4) if CLUSTER_GRAM_PAYS(n, m, k, p, blocks, slots, gpu=True, **kw))

    p64, p16, p8 = first(route=None), first(route="float16"), first(route="int8")
    assert p8 < p16 < p64
    e, c = operator.GPU_EVAL_S, operator.GPU_PRODUCT_S
    per = n / slots * m  # rows of a GPU times m
    want = (_cost.PASS_S + per * (e + operator.GPU_GRAM8_S * m) + 8.0 * m * m * blocks / _cost.NET_BYTES_S) / (
        _cost.PASS_S + per * (e + c * k) + 8.0 * m * k * blocks / _cost.NET_BYTES_S)
    assert p8 == int(np.ceil(want))
    # the CPU constants are unchanged by a route (no tensor cores there)
    assert CLUSTER_GRAM_PAYS(60_000, 400, 5, 20, 4, 2, route="int8") == CLUSTER_GRAM_PAYS(60_000, 400, 5, 20, 4, 2)


def test_cluster_gram_pays_is_asked_with_the_operators_route(client, problem, monkeypatch):
    """The cost model of the sharded operator and of the placement is given the data's chunk type and the
    tensor-core route the workers would be told (None on NumPy chunks, whatever the driver's setting)."""
    from nyhopt import placement
    from nyhopt.ops import gram as gram_module

    monkeypatch.setattr(gram_module, "TENSOR_CORES", "int8")
    X, y, Z = problem
    asked = []
    monkeypatch.setattr(_cost, "cluster_gram_pays", lambda *a, **kw: asked.append(kw) or False)
    data = ShardedData(*_dask(X.astype(np.float32), y.astype(np.float32), 2), client=client)
    op = data.bind(KERNEL, Z)
    op.normal_matvec(np.ones((M, 1)))
    placement.gram_pays(data, M, 5, 3, np, dtype=data.dtype)
    assert asked == [dict(gpu=False, route=None)] * 2
    data.release()


def test_gram_auto_on_dask_follows_the_cost_model(client, problem, monkeypatch):
    """gram="auto" on a cluster: stoch-prop asks the cluster's cost model with the expected iterations
    and forms G at its first normal product where the model says it pays (here: small blocks, where a
    round of tasks costs more than its compute), matching the one-process Gram route to GRAM_TOL (the
    rounding of another route, test_gram_route_step_on_dask)."""
    monkeypatch.setattr(_cost, "cluster_gram_pays", CLUSTER_GRAM_PAYS)
    X, y, Z = problem
    ref = nh.make_objective("stoch-prop", X, y, kernel_cache=False, gram=True, **STOCH)
    v0, g0 = ref.value_and_grad(_stoch_params(Z))
    obj = nh.make_objective("stoch-prop", *_dask(X, y, 3), gram="auto", **STOCH)
    calls = _count_reductions(monkeypatch)
    v, g = obj.value_and_grad(_stoch_params(Z))
    assert [c[0] for c in calls] == ["block_gram", "block_adjoint"]
    assert abs(v - v0) <= GRAM_TOL * abs(v0)
    assert np.linalg.norm(_flat(g) - _flat(g0)) <= GRAM_TOL * np.linalg.norm(_flat(g0))
    obj.release()
    # where the model says it does not pay, the step streams: one pass per CG iteration
    monkeypatch.setattr(_cost, "cluster_gram_pays", lambda *args, **kwargs: False)
    obj = nh.make_objective("stoch-prop", *_dask(X, y, 3), gram="auto", **STOCH)
    del calls[:]
    obj.value_and_grad(_stoch_params(Z))
    assert "block_gram" not in [c[0] for c in calls] and len(calls) > 5
    obj.release()


def test_falkon_gram_auto_on_dask_forms_g_after_streaming(client, problem, monkeypatch):
    """falkon_solve(gram="auto") on a cluster: the ski-rental rule of one process, priced by the
    cluster's model: stream while the products so far cost less than the Gram pass, then form G."""
    from nyhopt.ops import operator

    monkeypatch.setattr(_cost, "cluster_gram_pays", CLUSTER_GRAM_PAYS)
    X, y, Z = problem
    calls = _count_reductions(monkeypatch)
    Xd, yd = _dask(X, y, 3)
    res = falkon_solve(KERNEL, Xd, Z, yd, PENALTY, tol=1e-12, maxiter=400)
    names = [c[0] for c in calls]
    streamed = names.count("block_normal")
    assert names.count("block_gram") == 1 and streamed >= 1 and names[-1] == "block_gram"
    # the same route in one process: stream as many products, then G (the rounding of the m x m
    # partials' sum order, held to GRAM_TOL as in test_gram_route_step_on_dask)
    monkeypatch.setattr(operator, "gram_pays", lambda m, k, products, *args, **kwargs: products >= streamed)
    ref = falkon_solve(KERNEL, X, Z, y, PENALTY, tol=1e-12, maxiter=400, cache=False)
    assert ref.passes == res.passes == streamed + 2  # K^T y, the streamed products, the Gram pass
    # CG amplifies the rounding of the two sums in alpha (2.5e-9 seen, 2.1e-9 before the exact
    # objectives' workspace changed the products' rounding), not in the fitted values K alpha, what a
    # model predicts (2.8e-11 seen): those are held to GRAM_TOL, alpha to 5x it
    fitted, fitted_ref = ops.kmv(KERNEL, X, Z, res.alpha), ops.kmv(KERNEL, X, Z, ref.alpha)
    assert _rel(fitted, fitted_ref) <= GRAM_TOL
    assert _rel(res.alpha, ref.alpha) <= 5 * GRAM_TOL
    assert res.cg.iterations > len(names)


def test_falkon_gram_route_on_dask(client, problem, monkeypatch):
    X, y, Z = problem
    ref = falkon_solve(KERNEL, X, Z, y, PENALTY, tol=1e-12, maxiter=400, gram=True, cache=False)
    calls = _count_reductions(monkeypatch)
    Xd, yd = _dask(X, y, 2)
    res = falkon_solve(KERNEL, Xd, Z, yd, PENALTY, tol=1e-12, maxiter=400, gram=True)
    assert _rel(res.alpha, ref.alpha) <= GRAM_TOL
    assert [c[0] for c in calls] == ["block_gram"] and calls[0][2][0] == (M, M)
    assert res.passes == ref.passes == 1


async def _die():
    os._exit(1)


def _kill(c, victim, wait=True):
    """Kill the process of worker ``victim`` (its nanny starts a fresh, empty one); with ``wait``,
    return once the scheduler has dropped it, so that what it held is certainly lost."""
    c.run(_die, workers=[victim], wait=False)
    deadline = time.monotonic() + 30
    while wait and victim in c.scheduler_info(n_workers=-1)["workers"]:
        assert time.monotonic() < deadline, "the killed worker was not dropped by the scheduler"
        time.sleep(0.02)


def _holder(c, future):
    distributed.wait([future])
    return c.who_has([future])[future.key][0]


class _KillingReducer(DaskTreeReducer):
    """The Dask tree reduction, which at its ``at``-th call kills the worker holding the first
    partial once the partials are computed and before they are summed (a CG iteration cut short)."""

    def __init__(self, client, at):
        super().__init__(client)
        self.at, self.calls, self.killed = at, 0, None

    def tree(self, partials):
        self.calls += 1
        if self.calls == self.at:
            with self.client.as_current():
                self.killed = _holder(self.client, partials[0])
            _kill(self.client, self.killed)
        return super().tree(partials)


def test_lost_worker_does_not_change_the_result(problem):
    X, y, Z = problem
    with _cluster(2) as cluster, distributed.Client(cluster, set_as_default=False) as c:
        data = ShardedData(*_dask(X, y, 7), client=c)
        op = data.bind(KERNEL, Z)
        V = np.random.default_rng(2).normal(size=(M, 2))
        before = op.normal_matvec(V, TARGETS)
        victim = next(iter(c.who_has(data.blocks[0:1]).values()))[0]
        _kill(c, victim, wait=False)  # between passes, racing the next one
        after = op.normal_matvec(V, TARGETS)
        assert victim not in c.scheduler_info(n_workers=-1)["workers"]
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1], before[1])


@pytest.mark.parametrize("n_workers", [1, 2])
def test_worker_lost_in_the_middle_of_a_falkon_solve(problem, n_workers):
    # one worker: every copy of the broadcast (kernel, Z) goes with it and is sent again
    from nyhopt.distributed.falkon import falkon_solve_sharded

    X, y, Z = problem
    with _cluster(n_workers) as cluster, distributed.Client(cluster, set_as_default=False) as c:
        Xd, yd = _dask(X, y, 7)
        kw = dict(tol=1e-12, maxiter=8, warn=False)  # the iterates must agree, converged or not
        ref = falkon_solve_sharded(KERNEL, ShardedData(Xd, yd, client=c), Z, PENALTY, **kw)
        killer = _KillingReducer(c, at=4)  # reduction 1 is K^T y, 2.. are CG iterations: cut the third
        res = falkon_solve_sharded(KERNEL, ShardedData(Xd, yd, client=c, reducer=killer), Z, PENALTY, **kw)
        assert killer.killed is not None and killer.killed not in c.scheduler_info(n_workers=-1)["workers"]
        assert killer.calls > 4  # the cut iteration was run again, and the solve went on
    assert res.cg.iterations == ref.cg.iterations
    np.testing.assert_array_equal(res.alpha, ref.alpha)


@pytest.mark.filterwarnings("ignore:stoch-prop. the Falkon solve stopped at maxiter")
def test_worker_lost_between_the_two_gradient_passes(problem):
    # the victim holds a block of u = K a (and the block itself, with its probes): the adjoint pass
    # needs both, rebuilt from the input's graph, the seeded probes and the u pass's function
    X, y, Z = problem
    params = _stoch_params(Z)
    with _cluster(2) as cluster, distributed.Client(cluster, set_as_default=False) as c:
        obj = nh.make_objective("stoch-prop", *_dask(X, y, 7), client=c, **dict(STOCH, maxiter=8))
        v0, g0 = obj.value_and_grad(params)
        u_pass, killed = obj._u_pass, []

        def u_pass_then_kill(*args):
            st = u_pass(*args)
            with c.as_current():
                killed.append(_holder(c, st.u.futures[0]))
            _kill(c, killed[0])
            return st

        obj._u_pass = u_pass_then_kill
        v, g = obj.value_and_grad(params)
        assert killed and killed[0] not in c.scheduler_info(n_workers=-1)["workers"]
    assert v == v0
    np.testing.assert_array_equal(_flat(g), _flat(g0))


def test_float32_data_keep_their_dtype(client, problem):
    X, y, _ = problem
    X32, y32 = X.astype(np.float32), y.astype(np.float32)
    kw = dict(kernel=KERNEL, penalty=1e-3, centers=M, tol=1e-6, random_state=0)
    ref = nh.NystromKRR(**kw).fit(X32, y32)
    model = nh.NystromKRR(**kw).fit(*_dask(X32, y32, 3))
    assert model.centers_.dtype == np.float32 and model.alpha_.dtype == np.float64
    pred = model.predict(da.from_array(X32, chunks=(100, D)))
    assert pred.dtype == np.float32 and pred.compute().dtype == np.float32
    # float32 partials are rounded per block here, once over all rows in one process
    assert _rel(pred.compute(), ref.predict(X32)) <= 1e-4


def test_user_arrays_are_not_modified(client, problem):
    X, y, _ = problem
    X0, y0 = X.copy(), y.copy()
    nh.NystromKRR(centers=M, normalize_y=True, random_state=0).fit(*_dask(X, y, 2))
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)


TUNE = dict(objective="stoch-prop", centers=15, epochs=3, random_state=5, progress=False, patience=None,
            objective_options=dict(n_probes=4, n_rows=100, tol=1e-12, maxiter=400))


def _same_run(a, b, rtol):
    for field in ("objective", "penalty"):
        assert _rel(getattr(a.history, field), getattr(b.history, field)) <= rtol, field
    assert _rel(np.stack(a.history.lengthscale), np.stack(b.history.lengthscale)) <= rtol
    assert _rel(a.params.centers, b.params.centers) <= rtol
    assert a.best_epoch == b.best_epoch and len(a.history) == len(b.history)


@pytest.mark.parametrize("blocks", [1, 3])
def test_tune_on_dask_matches_one_process(client, problem, blocks):
    X, y, _ = problem
    ref = nh.tune(X, y, **TUNE)
    res = nh.tune(*_dask(X, y, blocks), **TUNE)
    _same_run(res, ref, 1e-8)
    assert res.task == "regression" and res.model.solver == "falkon"
    pred = res.model.predict(da.from_array(X, chunks=(100, D))).compute()
    assert _rel(pred, ref.model.predict(X)) <= 1e-5  # the reference's final model is a direct solve


def test_dask_initialization_gathers_the_same_rows(client):
    from nyhopt.optim._init import initial_centers, median_heuristic

    X = np.random.default_rng(4).normal(size=(1500, 2))  # more rows than the median's subsample
    Xd = da.from_array(X, chunks=(400, 2))
    assert median_heuristic(Xd, random_state=np.random.default_rng(1), client=client) == \
        median_heuristic(X, random_state=np.random.default_rng(1))
    np.testing.assert_array_equal(initial_centers(Xd, 9, np.random.default_rng(2), client=client),
                                  initial_centers(X, 9, np.random.default_rng(2)))


def test_tune_on_dask_tracks_validation_errors(client, problem):
    X, y, _ = problem
    kw = dict(TUNE, epochs=1)
    ref = nh.tune(X[:300], y[:300], validation=(X[300:], y[300:]), solver="falkon", **kw)
    res = nh.tune(da.from_array(X[:300], chunks=(150, D)), da.from_array(y[:300], chunks=150),
                  validation=(da.from_array(X[300:]), da.from_array(y[300:])), **kw)
    assert _rel(res.history.train_error, ref.history.train_error) <= 1e-5
    assert _rel(res.history.validation_error, ref.history.validation_error) <= 1e-5


def test_tune_on_dask_refusals(client, problem):
    X, y, _ = problem
    Xd, yd = _dask(X, y, 2)
    with pytest.raises(ValueError, match="validation as a fraction"):
        nh.tune(Xd, yd, validation=0.2, **TUNE)
    with pytest.raises(ValueError, match="task='regression'"):
        nh.tune(Xd, da.from_array(np.arange(N) % 3, chunks=(CHUNKINGS[2],)), **TUNE)
    with pytest.raises(ValueError, match="solver='direct'"):
        nh.tune(Xd, yd, solver="direct", **TUNE)
    with pytest.raises(ValueError, match="client is only used with dask"):
        nh.tune(X, y, client=client, **TUNE)
    with pytest.raises(ValueError, match="client is only used with dask"):
        nh.NystromKRR(centers=5).fit(X, y, client=client)


def test_client_argument_is_used_and_checked(problem):
    X, y, _ = problem
    Xd, yd = _dask(X, y, 2)
    with _cluster(1) as cluster, distributed.Client(cluster, set_as_default=False) as other:
        res = nh.tune(Xd, yd, client=other, **dict(TUNE, epochs=1))
        assert res.objective.data.client is other
        model = nh.NystromKRR(solver="falkon", centers=M, random_state=0).fit(Xd, yd, client=other)
        assert model.alpha_.shape == (M,)
        closed = distributed.Client(cluster, set_as_default=False)
        closed.close()
    for call in (lambda: nh.tune(Xd, yd, client=closed, **TUNE),
                 lambda: nh.NystromKRR(solver="falkon", centers=M).fit(Xd, yd, client=closed),
                 lambda: nh.make_objective("stoch-prop", Xd, yd, client=closed)):
        with pytest.raises(ValueError, match="client is closed"):
            call()


def test_hyperopt_krr_on_dask(client, problem):
    X, y, _ = problem
    kw = dict(objective="stoch-prop", centers=15, epochs=2, random_state=1, progress=False,
              objective_options=dict(n_probes=4, tol=1e-10, maxiter=400))
    ref = nh.HyperoptKRR(**kw).fit(X, y)
    est = nh.HyperoptKRR(**kw).fit(*_dask(X, y, 3))
    assert _rel(est.x_scale_, ref.x_scale_) <= 1e-12
    assert _rel(est.history_.objective, ref.history_.objective) <= 1e-7
    pred = est.predict(da.from_array(X, chunks=(100, D)))
    assert is_dask_array(pred) and _rel(pred.compute(), ref.predict(X)) <= 1e-4


def test_tune_on_dask_resumes_from_a_checkpoint(client, problem, tmp_path):
    X, y, _ = problem
    kw = dict(TUNE, objective_options=dict(n_probes=3, n_rows=100, tol=1e-6, maxiter=50))  # warm start on
    Xd, yd = _dask(X, y, 3)
    full = nh.tune(Xd, yd, **dict(kw, epochs=4))
    path = tmp_path / "dask.npz"
    nh.tune(Xd, yd, checkpoint=path, **dict(kw, epochs=2))
    resumed = nh.tune(Xd, yd, checkpoint=path, **dict(kw, epochs=4))
    for f in ("log_penalty", "log_lengthscale", "centers"):
        np.testing.assert_array_equal(getattr(resumed.params, f), getattr(full.params, f))
    np.testing.assert_array_equal(resumed.history.objective, full.history.objective)


def test_block_passes_do_not_check_the_block_again(problem, monkeypatch):
    """A block was checked when placed and ``Z`` by the operator: each pass evaluates, validates nothing.

    On CuPy chunks every check is a host synchronization of the worker.
    """
    from nyhopt.distributed import _blocks

    X, y = problem[0][:60], problem[1][:60]
    Z, alpha = X[:7], np.random.default_rng(1).normal(size=(7, 2))
    block = _blocks.prepare_block(X, np.c_[y, -y], 0, np.float64)
    shared = (KERNEL, Z)
    K = ops.kernel_matrix(KERNEL, X, Z)
    R = block[1] - K @ alpha
    ones = _blocks.block_with_ones(block)

    def refuse(*a, **k):
        raise AssertionError("a block pass validated its inputs again")

    monkeypatch.setattr(ops, "check_matrix", refuse)
    np.testing.assert_allclose(_blocks.block_kmtv(block, shared)[0], K.T @ block[1], rtol=1e-13)
    np.testing.assert_allclose(_blocks.block_kmv(block, shared, alpha), K @ alpha, rtol=1e-13)
    np.testing.assert_allclose(_blocks.block_sq_residuals(block, shared, alpha)[0], (R * R).sum(axis=0),
                               rtol=1e-12)
    alpha1 = np.random.default_rng(2).normal(size=(7, 3))
    R1 = ones[1] - K @ alpha1
    np.testing.assert_allclose(_blocks.block_intercept_stats(ones, shared, alpha1)[0], R1.T @ R1[:, -1],
                               rtol=1e-12)


def test_score_on_dask_is_a_reduction_on_the_cluster(client, problem, monkeypatch):
    """R^2 of dask predictions: two reductions, no predictions on the driver; every input checked as in memory."""
    from nyhopt import estimator

    def to_host(a):
        return a.compute() if is_dask_array(a) else a

    X, y, _ = problem
    Y2 = np.c_[y, np.cos(3 * X[:, 2])]
    kw = dict(kernel=KERNEL, penalty=PENALTY, centers=M, tol=1e-12, maxiter=400, random_state=3)
    ref = nh.NystromKRR(**kw).fit(X, Y2)
    model = nh.NystromKRR(**kw).fit(da.from_array(X, chunks=(CHUNKINGS[3], D)),
                                    da.from_array(Y2, chunks=(CHUNKINGS[3], 2)))

    def refuse(a, name="array"):
        if is_dask_array(a):
            raise AssertionError(f"{name}: a dask array was computed to the driver")
        return a

    monkeypatch.setattr(estimator, "as_native", refuse)
    Xd = da.from_array(X, chunks=(CHUNKINGS[7], D))
    w = np.linspace(0.5, 2.0, N)
    Yd = da.from_array(Y2, chunks=(100, 2))  # other row chunks than X's
    cases = [(Yd, None), (Y2, 3.0), (Yd, da.from_array(w, chunks=50)),
             (Y2 * 1e200, w)]  # squares past float64's range: scaled first
    for yy, sw in cases:
        want = ref.score(X, to_host(yy), sample_weight=to_host(sw))
        assert np.isfinite(want)
        assert model.score(Xd, yy, sample_weight=sw) == pytest.approx(want, rel=1e-10)
    bad_y = Y2.copy()
    bad_y[5, 1] = np.nan
    with pytest.raises(ValueError, match="y contains NaN"):
        model.score(Xd, da.from_array(bad_y, chunks=(70, 2)))
    with pytest.raises(ValueError, match=r"y has 1 output column\(s\) but the model predicts 2"):
        model.score(Xd, y)
    with pytest.raises(ValueError, match="y has 419 rows"):
        model.score(Xd, Yd[:-1])
    with pytest.raises(ValueError, match="sample_weight contains NaN"):
        model.score(Xd, Yd, sample_weight=da.from_array(np.r_[w[:-1], np.inf], chunks=70))
    with pytest.raises(ValueError, match="sample_weight must have a sum > 0"):
        model.score(Xd, Yd, sample_weight=da.zeros(N, chunks=70))
    with pytest.raises(ValueError, match=r"sample_weight has shape \(3,\)"):
        model.score(Xd, Yd, sample_weight=np.ones(3))
    with pytest.raises(TypeError, match="y must hold real numbers"):
        model.score(Xd, da.from_array(np.array(["a"] * N), chunks=70))


def _no_driver_copies(monkeypatch):
    """Refuse every road of a dask array into this process but ``dask.compute`` of a few numbers;
    return the list, one entry per ``dask.compute``, of the counts of numbers in what it brought back
    (one entry per output: a row block's partials, or a flag)."""
    import dask

    from nyhopt.metrics import _error_metrics
    from nyhopt import backend, metrics
    from nyhopt.metrics._metric_sums import Partials
    from nyhopt.distributed import _rows

    def refuse(a, name="array"):
        if is_dask_array(a):
            raise AssertionError(f"{name}: a dask array was computed to the driver")
        return a

    def no_array(self, *args, **kwargs):
        raise AssertionError("a dask array was converted to a NumPy array on the driver")

    for module in (backend, metrics, _error_metrics, _rows):
        monkeypatch.setattr(module, "as_native", refuse)
    monkeypatch.setattr(da.Array, "__array__", no_array)
    computed, compute = [], dask.compute

    def counted(*args, **kwargs):
        out = compute(*args, **kwargs)
        computed.append([len(v.ok) + len(v.values) if isinstance(v, Partials) else int(np.size(v)) for v in out])
        return out

    monkeypatch.setattr(dask, "compute", counted)
    return computed


def _metric_inputs(seed=5):
    rng = np.random.default_rng(seed)
    y, mean = rng.normal(size=(2, N))
    std = rng.uniform(0.2, 1.5, size=N)
    return y, mean, std


def _host(a):
    return a.compute() if is_dask_array(a) else a


def _blocks_of(*arrays):
    """The number of row blocks of the first dask array."""
    return len(next(a for a in arrays if is_dask_array(a)).chunks[0])


def test_metrics_on_dask_are_reductions_on_the_cluster(client, monkeypatch):
    """nyhopt.metrics and the errors of nyhopt.datasets on dask arrays (and in-memory ones beside them):
    the in-memory values, by one compute of a few numbers per row block of the first dask input
    (the predictions' blocks, else the targets')."""
    from nyhopt import datasets, metrics

    y, mean, std = _metric_inputs()
    Y2, M2, S2 = np.c_[y, 2 * y], np.c_[mean, mean + 0.1], np.c_[std, 0.5 * std]
    labels = (y > 0).astype(np.int64)
    onehot = np.eye(3)[np.digitize(y, [-0.4, 0.4])]
    scores = np.c_[mean, -mean, 0.3 * std]
    d = da.from_array
    cases = [  # (y, mean, std): other row chunks than the first dask input's, in-memory beside dask
        (d(y, chunks=70), d(mean, chunks=CHUNKINGS[3]), d(std, chunks=33)),
        (y, d(mean, chunks=60), std),
        (d(y, chunks=100), mean, list(std)),
        (d(y[:, None], chunks=(70, 1)), d(mean, chunks=70), d(std, chunks=70)),  # a column of targets
        (d(Y2, chunks=(100, 1)), d(M2, chunks=(70, 2)), S2),  # two outputs, blocks across columns too
        (d(1e200 * Y2, chunks=(70, 2)), 1e200 * M2, d(1e200 * S2, chunks=(70, 2))),  # squares past float64
        (y, d(mean, chunks=((100, 0, 320),)), d(std, chunks=70)),  # an empty row block
    ]
    computed = _no_driver_copies(monkeypatch)
    for yy, mm, ss in cases:
        want_args = [_host(a) for a in (yy, mm, ss)]
        for metric in (metrics.nlpd, metrics.coverage, lambda a, m, s: metrics.coverage(a, m, s, level=0.5),
                       lambda a, m, s: metrics.rmse(a, m), lambda a, m, s: datasets.rmse(a, m),
                       lambda a, m, s: datasets.nrmse(a + 3, m)):
            computed.clear()
            got = metric(yy, mm, ss)
            want = metric(*want_args)
            assert type(got) is float and np.isfinite(want)
            assert got == pytest.approx(want, rel=1e-12, abs=0)
            assert len(computed) == 1 and len(computed[0]) == _blocks_of(mm, yy, ss) and max(computed[0]) <= 8
    for truth, pred in [(labels, mean), (2 * labels - 1, mean), (onehot, scores), (labels[:, None], mean)]:
        computed.clear()
        got = datasets.c_error(d(truth, chunks=(70,) + truth.shape[1:]), d(pred, chunks=(50,) + pred.shape[1:]))
        numbers = 3 if truth.ndim == 2 and truth.shape[1] > 1 else 6  # flags, counts (and the label stats)
        assert got == datasets.c_error(truth, pred) and computed == [[numbers] * 9]
    assert datasets.rmse(d(np.array([1.7e307, -1.7e307]), chunks=1), [-1.7e307, 1.7e307]) == pytest.approx(
        3.4e307, rel=1e-15)
    assert datasets.rmse(d(np.array([3e-310, 0.0]), chunks=1), [0.0, 4e-310]) == datasets.rmse(
        [3e-310, 0.0], [0.0, 4e-310])
    part = d(y, chunks=70)
    part = part[part > 0]  # unknown block sizes
    assert metrics.rmse(part, 0.5 * part) == pytest.approx(metrics.rmse(y[y > 0], 0.5 * y[y > 0]), rel=1e-12)


def test_metrics_compute_lazy_predictions_once(problem, monkeypatch):
    """The metrics of a model's lazy dask predictions (and standard deviations): one ``dask.compute`` per
    metric, in which every row block of the predictions is computed once (the synchronous scheduler runs
    the block functions here, where they are counted); the values of the computed predictions."""
    import dask

    from nyhopt import datasets, metrics
    from nyhopt.distributed import estimator as dist_estimator

    X, y, _ = problem
    model = nh.NystromKRR(KERNEL, penalty=PENALTY, centers=M, random_state=0, normalize_y=True).fit(X, y)
    Xd, yd = _dask(X, y, 3)
    calls, computes = [], []
    for name in ("_predict_block", "_std_block"):
        def counted_block(*args, _f=getattr(dist_estimator, name), _name=name, **kwargs):
            calls.append(_name)
            return _f(*args, **kwargs)

        monkeypatch.setattr(dist_estimator, name, counted_block)
    compute = dask.compute

    def counted(*args, **kwargs):
        computes.append(len(args))
        return compute(*args, **kwargs)

    monkeypatch.setattr(dask, "compute", counted)
    with dask.config.set(scheduler="synchronous"):
        mean, std = model.predict(Xd, return_std=True)
        want_mean, want_std = mean.compute(), std.compute()
        for metric, args, blocks in [
            (metrics.rmse, (yd, mean), ["_predict_block"] * 3),
            (metrics.rmse, (y, model.predict(Xd)), ["_predict_block"] * 3),
            (metrics.nlpd, (yd, mean, std), ["_predict_block", "_std_block"] * 3),
            (metrics.coverage, (y, mean, std), ["_predict_block", "_std_block"] * 3),
            (datasets.nrmse, (yd, mean), ["_predict_block"] * 3),
            (datasets.c_error, (np.sign(y), mean), ["_predict_block"] * 3),
        ]:
            calls.clear(), computes.clear()
            got = metric(*args)
            assert sorted(calls) == sorted(blocks) and computes == [3], metric
            want = metric(*(want_mean if a is mean else want_std if a is std else _host(a) for a in args))
            assert got == pytest.approx(want, rel=1e-12, abs=0)


def test_metrics_on_dask_raise_the_in_memory_errors(client, monkeypatch):
    """Every check of the metrics, on dask arrays: the error (type and message) of the same arrays in memory."""
    from nyhopt import datasets, metrics

    y, mean, std = _metric_inputs()

    def with_nan(a, value=np.nan, at=-1):
        a = a.copy()
        a[at] = value
        return a

    text = np.array(["a"] * N)
    metric_cases = [  # (metric, y, mean, std); the first dask (by position) gets its own row blocks
        (metrics.nlpd, with_nan(y), mean, std),
        (metrics.nlpd, y, with_nan(mean, np.inf), std),
        (metrics.nlpd, y, mean, with_nan(std, np.inf)),
        (metrics.nlpd, y, mean, with_nan(std, 0.0)),
        (metrics.nlpd, y, mean, with_nan(std)),  # NaN is not > 0: the first check to fail
        (metrics.coverage, with_nan(y), mean, with_nan(std, -1.0)),  # std > 0 is checked first
        (metrics.coverage, y, mean, std[:-1]),
        (metrics.coverage, y, mean, np.c_[std, std]),
        (metrics.nlpd, y[:-1], mean, std),
        (metrics.nlpd, y[:0], mean[:0], std[:0]),
        (metrics.nlpd, text, mean, std),
        (metrics.nlpd, y, text, std),
        (metrics.nlpd, y, mean, text),
        (metrics.nlpd, y, mean, y.astype(complex)),
        (lambda a, m, s: metrics.rmse(a, m), y, with_nan(mean), None),
    ]
    ragged = [[1.0, 2.0], [3.0]]
    error_cases = [  # (metric, y_true, y_pred)
        (datasets.rmse, with_nan(y), mean),
        (datasets.rmse, y, with_nan(mean, -np.inf)),
        (datasets.nrmse, with_nan(y), text),  # y_true's values are checked before y_pred's dtype
        (datasets.nrmse, with_nan(y), mean[:-1]),
        (datasets.nrmse, y, text),
        (datasets.nrmse, y.astype(complex), mean),
        (datasets.c_error, y, mean[:-1]),
        (datasets.c_error, np.ones((N, 2, 2)), mean),
        (datasets.c_error, y[:0], mean[:0]),
        (datasets.nrmse, np.tile([1.5, -1.5], N // 2), mean),  # a zero mean
        (datasets.rmse, y, ragged),
    ]

    def outcome(metric, *args):
        computed.clear()
        with pytest.raises((TypeError, ValueError)) as info:
            metric(*args)
        assert len(computed) <= 1 and max(computed[0] if computed else [0]) <= 8  # one compute at most
        return type(info.value), str(info.value)

    def chunked(a, rows):
        if a is None or isinstance(a, list) or a.ndim == 0:
            return a
        rows = min(rows, max(a.shape[0], 1))
        return da.from_array(a, chunks=(rows,) + a.shape[1:])

    computed = _no_driver_copies(monkeypatch)
    for metric, *args in metric_cases + error_cases:
        want = outcome(metric, *args)
        for which in range(len(args)):  # each one dask in turn, then all of them
            mixed = [chunked(a, 70) if i == which else a for i, a in enumerate(args)]
            if not any(is_dask_array(a) for a in mixed):
                continue
            assert outcome(metric, *mixed) == want, (metric, which)
        assert outcome(metric, *[chunked(a, 50 + 20 * i) for i, a in enumerate(args)]) == want
    with pytest.raises(ValueError, match="level must be a probability"):
        metrics.coverage(da.from_array(y), mean, std, level=1.5)
