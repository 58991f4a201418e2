"""Dask ``LocalCluster`` benchmarks: a ``stoch-prop`` step (the Gram route against streaming), ``score``.

Skipped when dask or distributed is not installed.
"""
import numpy as np


def _local_cluster():
    """``(cluster, client)``: 2 worker processes of one thread each (NotImplementedError, a skip, without Dask)."""
    try:
        import distributed
    except ImportError:  # pragma: no cover
        raise NotImplementedError("dask and distributed are needed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                       env={"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    return cluster, distributed.Client(cluster)


class StochPropLocalCluster:
    """One ``stoch-prop`` step, the Gram route against streaming.

    n = 60000, d = 8, m = 400, t = 20 probes, float64, 4 row blocks on 2 worker
    processes of one thread each (docs/scaling-out.md, "The Gram route on a
    cluster").  ``gram="auto"`` (the default) takes the Gram route here: one pass
    of ``m x m`` partials, then CG iterations without passes; ``gram=False``
    makes one pass (a round of tasks) per CG iteration.  Measured on the 2-core
    machine of docs/scaling-out.md with these bodies: 0.75 s (3 passes) against
    3.02 s (23 passes), quiet; 1.12 s against 6.90 s while loaded.
    """

    params = [["auto", False]]
    param_names = ["gram"]
    timeout = 600
    number = 1
    repeat = (3, 7, 120.0)

    def setup(self, gram):
        self.cluster, self.client = _local_cluster()
        import dask.array as da
        import nyhopt as nh

        rng = np.random.default_rng(0)
        n, m = 60000, 400
        X = rng.uniform(-1, 1, (n, 8))
        y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=n)
        Xd, yd = da.from_array(X, chunks=(n // 4, 8)), da.from_array(y, chunks=(n // 4,))
        self.obj = nh.make_objective("stoch-prop", Xd, yd, kernel="gaussian", random_state=0, warm_start=False,
                                     gram=gram, client=self.client)
        self.theta = nh.Params.from_natural(1e-4, np.full(8, 0.7), X[:m])
        self.obj.value_and_grad(self.theta)  # compilation on the workers

    def teardown(self, gram):
        self.obj.release()
        self.client.close()
        self.cluster.close()

    def time_cold_step(self, gram):
        self.obj.reset()
        self.obj.value_and_grad(self.theta)

    def track_passes(self, gram):
        self.obj.reset()
        self.obj.value_and_grad(self.theta)
        return self.obj.last_solve.passes

    track_passes.unit = "passes over K"


class ScoreLocalCluster:
    """``NystromKRR.score`` and ``nyhopt.metrics.rmse`` of dask predictions: one task per row block.

    n = 400000, d = 8, m = 200, float64, 8 row blocks on 2 worker processes
    of one thread each; the model is fitted in memory on the first 20000 rows.
    """

    timeout = 600
    number = 1
    repeat = (3, 7, 120.0)

    def setup(self):
        self.cluster, self.client = _local_cluster()
        import dask.array as da
        import nyhopt as nh

        n = 400_000
        # drawn on the workers: no 25 MB of data in the graph
        rs = da.random.default_rng(0)
        self.X = rs.uniform(-1, 1, (n, 8), chunks=(n // 8, 8)).persist()
        self.y = (da.sin(3 * self.X[:, 0]) + 0.1 * rs.normal(size=n, chunks=n // 8)).persist()
        X, y = self.X[:20000].compute(), self.y[:20000].compute()
        self.model = nh.NystromKRR(nh.GaussianKernel(0.7), penalty=1e-5, centers=200, random_state=0).fit(X, y)
        # + 0.0: other keys than score's own predictions, which would otherwise be found persisted
        self.pred = (self.model.predict(self.X) + 0.0).persist()
        self.model.score(self.X, self.y)  # compilation on the workers

    def teardown(self):
        self.client.close()
        self.cluster.close()

    def time_score(self):
        self.model.score(self.X, self.y)

    def time_rmse_of_persisted_predictions(self):
        from nyhopt import metrics

        metrics.rmse(self.y, self.pred)

    def time_predictions(self):
        """The predictions' own pass, summed on the cluster: what the metrics of lazy predictions cost at least."""
        import dask

        dask.compute(self.model.predict(self.X).sum())

    def time_rmse_of_lazy_predictions(self):
        """One task per row block: the predictions are computed once, inside the metric's tasks."""
        from nyhopt import metrics

        metrics.rmse(self.y, self.model.predict(self.X))
