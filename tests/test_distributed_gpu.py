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
