"""nyhopt on a Dask cluster with CuPy chunks, against the single-process CuPy path (GPU only)."""
from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import nyhopt as nh  # noqa: E402
from nyhopt.backend import cupy_or_none, to_numpy  # noqa: E402
from nyhopt.distributed import is_dask_array  # noqa: E402

pytestmark = pytest.mark.gpu

N, D, M = 420, 3, 30
ROWS = (200, 20, 200)  # uneven row blocks
KERNEL = nh.GaussianKernel(np.array([0.8, 1.2, 1.0]))
STOCH = dict(n_probes=4, n_rows=100, tol=1e-12, maxiter=400, warm_start=False, random_state=3)


@pytest.fixture(autouse=True)
def cluster_streams(monkeypatch):
    """The cluster and the single-process CuPy references take one route: streaming passes, no held
    kernel, no K^T K.  Another route gives the same iterates with other rounding, which CG amplifies
    (docs/stochastic.md, "Passes per step"): on the GPU the single-process Gram rule
    (nyhopt.ops.operator.gram_pays) takes K^T K for this problem where the cluster streams (Falkon's
    alpha 2.1e-10 apart on the stand-in; 1.4e-11 on one route)."""
    from nyhopt.distributed import _cost
    from nyhopt.objectives import stoch_prop
    from nyhopt.ops import operator

    monkeypatch.setattr(operator, "gram_pays", lambda *args, **kwargs: False)
    monkeypatch.setattr(stoch_prop, "gram_pays", lambda *args, **kwargs: False)
    monkeypatch.setattr(_cost, "cluster_gram_pays", lambda *args, **kwargs: False)
    with nh.cache_budget(0):
        yield


@pytest.fixture(scope="module")
def client():
    # one process holding the GPU: worker threads share its CUDA context
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def problem():
    cp = cupy_or_none()
    rng = np.random.default_rng(7)
    X = rng.uniform(-1, 1, size=(N, D))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.normal(size=N)
    Z = X[rng.choice(N, M, replace=False)].copy()
    return cp.asarray(X), cp.asarray(y), cp.asarray(Z)


def _dask(X, y):
    return da.from_array(X, chunks=(ROWS, D), asarray=False), da.from_array(y, chunks=(ROWS,), asarray=False)


def _rel(a, b):
    a, b = to_numpy(a), to_numpy(b)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def _flat(g):
    parts = (g.log_penalty, g.log_lengthscale, g.centers)
    return np.concatenate([np.ravel(to_numpy(p)) for p in parts])


def test_falkon_fit_predict_with_cupy_chunks(client, problem):
    cp = cupy_or_none()
    X, y, _ = problem
    kw = dict(kernel=KERNEL, penalty=1e-3, centers=M, tol=1e-12, maxiter=400, random_state=3, normalize_y=True)
    ref = nh.NystromKRR(**kw).fit(X, y)
    Xd, yd = _dask(X, y)
    model = nh.NystromKRR(**kw).fit(Xd, yd)
    assert _rel(model.alpha_, ref.alpha_) <= 1e-10
    pred = model.predict(Xd)
    assert is_dask_array(pred)
    out = pred.compute()
    assert isinstance(out, cp.ndarray)
    assert _rel(out, ref.predict(X)) <= 1e-10


def test_stoch_prop_with_cupy_chunks_matches_one_process(client, problem):
    X, y, Z = problem
    theta = nh.Params.from_natural(1e-3, [0.8, 1.2, 1.0], Z)
    v0, g0 = nh.make_objective("stoch-prop", X, y, **STOCH).value_and_grad(theta)
    obj = nh.make_objective("stoch-prop", *_dask(X, y), **STOCH)
    v, g = obj.value_and_grad(theta)
    # Kernel blocks come from a distance GEMM on the GPU, and cuBLAS may tile a chunk's product
    # differently from the whole array's: agreement to rounding, not bit for bit (9.6e-10 seen).
    assert abs(v - v0) <= 1e-9 * abs(v0)
    assert np.linalg.norm(_flat(g) - _flat(g0)) <= 1e-9 * np.linalg.norm(_flat(g0))
    obj.release()


def test_tune_and_hyperopt_with_cupy_chunks(client, problem):
    """The target and feature standardization of tune / HyperoptKRR on the cluster read their moments as
    NumPy and apply them on the chunks' device (np.asarray of CuPy moments raised, and host moments
    subtracted from CuPy chunks would mix host and device)."""
    cp = cupy_or_none()
    X, y, _ = problem
    opts = dict(objective="stoch-prop", centers=M, epochs=3, progress=False, objective_options=STOCH)
    ref = nh.tune(*_dask(to_numpy(X), to_numpy(y)), **opts)
    res = nh.tune(*_dask(X, y), **opts)
    np.testing.assert_allclose(res.history.objective, ref.history.objective, rtol=1e-9)
    np.testing.assert_allclose(res.model.y_scale_, ref.model.y_scale_, rtol=1e-12)
    assert isinstance(res.model.predict(_dask(X, y)[0]).compute(), cp.ndarray)
    est = nh.HyperoptKRR(objective="stoch-prop", centers=M, epochs=2, objective_options=STOCH).fit(*_dask(X, y))
    mean, std = est.predict(_dask(X, y)[0], return_std=True)
    host = nh.HyperoptKRR(objective="stoch-prop", centers=M, epochs=2, objective_options=STOCH).fit(
        *_dask(to_numpy(X), to_numpy(y)))
    np.testing.assert_allclose(est.x_scale_, host.x_scale_, rtol=1e-12)
    out = mean.compute()
    assert isinstance(out, cp.ndarray) and isinstance(std.compute(), cp.ndarray)
    assert _rel(out, host.predict(_dask(to_numpy(X), to_numpy(y))[0]).compute()) <= 1e-8


@pytest.fixture(scope="module")
def process_client():
    """A worker in another process: its module globals are its own (the default settings).  One worker:
    the stand-in's arrays do not travel between workers (Dask's CuPy serializer needs device memory)."""
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  env={"NUMBA_NUM_THREADS": "1"}) as cluster, \
            distributed.Client(cluster, set_as_default=False) as c:  # the other tests use `client`
        yield c


def _worker_setting():
    from nyhopt.ops import gram

    return gram.TENSOR_CORES


@pytest.mark.parametrize("route, other, names", [
    (False, "int8", ["block_gram", "block_adjoint"]),
    ("int8", False, ["block_gram", "block_adjoint"]),
    ("float16", False, ["block_gram", "block_u_pass", "block_adjoint"]),
])
def test_workers_in_other_processes_take_the_drivers_tensor_core_route(process_client, problem, monkeypatch,
                                                                       route, other, names):
    """TENSOR_CORES set on the driver only (the worker keeps the library's default): each Gram task carries
    the route, so the workers' G is the route's G (the blocks' G of that route in this process, summed in
    block order; not the G of ``other``), and the driver's trust in its sums follows the same route
    (float64 products and int8: no u pass; float16: the u pass)."""
    from nyhopt.distributed import ShardedData
    from nyhopt.distributed.sharded import TARGETS
    from nyhopt.ops import gram as gram_module

    cp = cupy_or_none()
    default = gram_module.TENSOR_CORES
    monkeypatch.setattr(gram_module, "TENSOR_CORES", route)
    assert set(process_client.run(_worker_setting).values()) == {default}  # the workers' own setting
    X, y, Z = (a.astype(cp.float32) for a in problem)
    data = ShardedData(*_dask(X, y), client=process_client)
    assert data.gpu and data.gram_route() == (route or None)
    op = data.bind(KERNEL, Z, gram=True)
    op.form_gram(TARGETS)
    starts = np.cumsum((0,) + ROWS)
    Zh = to_numpy(Z)

    def blocks_sum(setting):
        G = 0
        for lo, hi in zip(starts[:-1], starts[1:]):
            G = G + to_numpy(gram_module.gram_matrix(KERNEL, X[lo:hi], cp.asarray(Zh), y[lo:hi, None],
                                                     tensor_cores=setting)[0])
        return G

    want, not_this = blocks_sum(route), blocks_sum(other)
    assert _rel(op.gram, want) <= 1e-13
    assert _rel(want, not_this) > 1e-10  # the two routes are told apart
    data.release()

    calls = []
    orig = ShardedData.reduce
    monkeypatch.setattr(ShardedData, "reduce", lambda self, func, *a, **kw: calls.append(func.__name__)
                        or orig(self, func, *a, **kw))
    obj = nh.make_objective("stoch-prop", *_dask(X, y), gram=True, client=process_client, **dict(STOCH, tol=1e-5))
    v, _ = obj.value_and_grad(nh.Params.from_natural(1e-3, [0.8, 1.2, 1.0], Z))
    assert np.isfinite(v) and calls == names
    obj.release()


def test_score_predict_and_metrics_with_cupy_chunks(client, problem):
    """score on dask arrays of CuPy chunks (NystromKRR, HyperoptKRR, NystromKRRClassifier) wherever predict
    works, and the metrics of dask predictions: the values of the same models on NumPy chunks."""
    from nyhopt import datasets, metrics

    cp = cupy_or_none()
    X, y, _ = problem
    Xh, yh = to_numpy(X), to_numpy(y)
    Xd, yd = _dask(X, y)
    Xn, yn = _dask(Xh, yh)
    kw = dict(kernel=KERNEL, penalty=1e-3, centers=M, tol=1e-12, maxiter=400, random_state=3, normalize_y=True)
    hyp = dict(objective="stoch-prop", centers=M, epochs=2, objective_options=STOCH)
    for make in (lambda: nh.NystromKRR(**kw), lambda: nh.HyperoptKRR(**hyp)):
        gpu, host = make().fit(Xd, yd), make().fit(Xn, yn)
        want = host.score(Xn, yn)
        assert gpu.score(Xd, yd) == pytest.approx(want, rel=1e-8)
        assert gpu.score(Xd, yh) == pytest.approx(want, rel=1e-8)  # host y, device predictions
        mean, std = gpu.predict(Xd, return_std=True)
        hmean, hstd = host.predict(Xn, return_std=True)
        for metric in (lambda a, m, s: metrics.rmse(a, m), metrics.nlpd, metrics.coverage,
                       lambda a, m, s: datasets.nrmse(a, m)):
            assert metric(yd, mean, std) == pytest.approx(metric(yh, hmean, hstd), rel=1e-8)
    labels = (yh > 0).astype(np.int64)
    ld = da.from_array(cp.asarray(labels), chunks=(ROWS,), asarray=False)
    ckw = dict(kernel=KERNEL, penalty=1e-3, centers=M, random_state=3)
    clf = nh.NystromKRRClassifier(**ckw).fit(Xd, ld)  # computed to the device: a CuPy model
    ref = nh.NystromKRRClassifier(**ckw).fit(Xh, labels)
    pred = clf.predict(Xd)
    assert isinstance(pred, cp.ndarray)
    np.testing.assert_array_equal(to_numpy(pred), ref.predict(Xh))
    assert clf.score(Xd, ld) == pytest.approx(ref.score(Xh, labels), rel=1e-12)
    assert clf.score(Xd, labels) == pytest.approx(ref.score(Xh, labels), rel=1e-12)


def test_metrics_of_cupy_chunks_are_reductions_on_the_device(client, monkeypatch):
    """nyhopt.metrics and the errors of nyhopt.datasets on dask arrays of CuPy chunks (host arrays beside them
    move to the device block by block): the in-memory values, from sums computed on the device, and the
    in-memory errors."""
    import dask

    from nyhopt import datasets, metrics

    cp = cupy_or_none()
    rng = np.random.default_rng(5)
    y, mean = rng.normal(size=(2, N))
    std = rng.uniform(0.2, 1.5, size=N)

    def dev(a, rows=ROWS):
        return da.from_array(cp.asarray(a), chunks=(rows,) + a.shape[1:], asarray=False)

    computed, compute = [], dask.compute

    def counted(*args, **kwargs):
        out = compute(*args, **kwargs)
        computed.append([type(v).__module__.split(".")[0] for v in out])
        return out

    monkeypatch.setattr(dask, "compute", counted)
    cases = [(dev(y), dev(mean, 70), dev(std, 33)), (y, dev(mean), std), (dev(y), dev(mean), cp.asarray(std)),
             (da.from_array(y, chunks=100), dev(mean), dev(std)),  # NumPy chunks of y for CuPy predictions
             (dev(np.c_[y, y]), dev(np.c_[mean, -mean], 70), np.c_[std, std])]
    for yy, mm, ss in cases:
        want = [to_numpy(a.compute()) if is_dask_array(a) else to_numpy(a) for a in (yy, mm, ss)]
        for metric in (metrics.nlpd, metrics.coverage, lambda a, m, s: metrics.rmse(a, m),
                       lambda a, m, s: datasets.rmse(a, m), lambda a, m, s: datasets.nrmse(a + 3, m)):
            computed.clear()
            got = metric(yy, mm, ss)
            assert type(got) is float and got == pytest.approx(metric(*want), rel=1e-12, abs=0)
            assert len(computed) == 2 and set(computed[1]) == {"cupy"}  # the sums were taken on the device
    labels = (y > 0).astype(np.int64)
    assert datasets.c_error(dev(labels), dev(mean, 70)) == datasets.c_error(labels, mean)
    # host predictions and CuPy chunks of y: the device blocks come to the host, block by block
    assert metrics.rmse(dev(y), mean) == pytest.approx(metrics.rmse(y, mean), rel=1e-12)
    assert set(computed[-1]) == {"numpy"}
    bad_std, nan_y = std.copy(), y.copy()
    bad_std[7], nan_y[-1] = 0.0, np.nan
    for metric, args in [(metrics.nlpd, (y, mean, bad_std)), (metrics.coverage, (nan_y, mean, std)),
                         (metrics.nlpd, (y, mean, std[:-1])), (datasets.rmse, (nan_y, mean)),
                         (datasets.nrmse, (y, mean[:-1]))]:
        with pytest.raises(ValueError) as info:
            metric(*(cp.asarray(a) for a in args))
        with pytest.raises(ValueError) as got:
            metric(*(dev(a, 70) for a in args))
        assert str(got.value) == str(info.value)
