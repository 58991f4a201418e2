"""Fit and predict of NystromKRR (Falkon and direct solvers), and benchmark P4.

Synthetic data (shared/design/BENCHMARKS.md generator, d = 8): n = 20000
training rows, 5000 test rows, Gaussian kernel with lengthscale 1 per feature,
penalty 1e-4, centers = the first m training rows, float64 and float32.
Backends: "numpy" (NumPy/Numba on the CPU) and "cupy" (skipped without a GPU).

P4: protein (CASP; 80/20 split, standardized), m = 1000 and 5000 random
centers.  One fit per m is made in ``setup_cache``; its wall time, test NRMSE,
CG iterations and peak traced memory are reported as ``track_`` figures (a
fit with m = 5000 takes minutes, too long to repeat).  The peak memory is the
largest amount of memory allocated through Python/NumPy during the fit
(``tracemalloc``), to be compared with the ``n x m`` matrix that is never
formed (n = 36584: 279 MiB for m = 1000, 1.36 GiB for m = 5000).
"""
import time
import tracemalloc
import warnings

import numpy as np

# Hyperparameters of P4 (protein, standardized features and labels).
PROTEIN_LENGTHSCALE = 1.0
PROTEIN_PENALTY = 1e-6
PROTEIN_MAXITER = 100
PROTEIN_TOL = 1e-6


def _array_module(backend):
    if backend == "numpy":
        return np
    from nyhopt.backend import gpu_available

    if not gpu_available():
        raise NotImplementedError("no CUDA GPU: cupy benchmarks skipped")
    import cupy

    return cupy


def _sync(xp):
    if xp is not np:
        xp.cuda.Stream.null.synchronize()


class FitSynthetic:
    """``NystromKRR.fit`` on n = 20000 synthetic rows (d = 8)."""

    params = [["falkon", "direct"], [200, 1000], ["float64", "float32"], ["numpy", "cupy"]]
    param_names = ["solver", "m", "dtype", "backend"]
    timeout = 600
    number = 1
    repeat = (3, 10, 60.0)

    def setup(self, solver, m, dtype, backend):
        import nyhopt as nh
        from nyhopt.datasets import synthetic

        xp = _array_module(backend)
        ds = synthetic(20000, d=8, n_test=5000, seed=1234, dtype=np.dtype(dtype))
        self.xp = xp
        self.X, self.y = xp.asarray(ds.X_train), xp.asarray(ds.y_train)
        self.model = nh.NystromKRR(
            nh.GaussianKernel(np.ones(8)), penalty=1e-4, centers=ds.X_train[:m], solver=solver,
            maxiter=100, tol=1e-6 if dtype == "float32" else 1e-7,
            predictive_variance=False,  # the solver alone (the variance pass is PredictStd's business)
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.model.fit(self.X[:2000], self.y[:2000])  # warm up (imports, compilation)

    def time_fit(self, solver, m, dtype, backend):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.model.fit(self.X, self.y)
        _sync(self.xp)

    def track_cg_iterations(self, solver, m, dtype, backend):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.model.fit(self.X, self.y)
        return 0 if self.model.solve_ is None else self.model.solve_.cg.iterations

    track_cg_iterations.unit = "iterations"


class DirectProducts:
    """The direct solver's one pass (``whitened_moments``) with float64 or float32 products (``products_in``).

    n = 24 000 synthetic rows (d = 8, float64 data), m = 1000 and 3000
    centers (the first m rows); the pass is the whole of a budgeted run's
    final fit but its O(m^3) factorizations.
    """

    params = [[1000, 3000], ["float64", "float32"]]
    param_names = ["m", "products"]
    timeout = 600
    number = 1
    repeat = (3, 10, 60.0)

    def setup(self, m, products):
        import nyhopt as nh
        from nyhopt.datasets import synthetic
        from nyhopt.solvers.direct import kmm_upper

        ds = synthetic(24000, d=8, n_test=10, seed=1234)
        self.X, self.Z = ds.X_train, np.ascontiguousarray(ds.X_train[:m])
        self.Y = ds.y_train.reshape(-1, 1)
        self.kernel = nh.GaussianKernel(np.ones(8))
        self.Lt = kmm_upper(self.kernel, self.Z, self.X.dtype, np)
        self.products = None if products == "float64" else np.float32

    def time_pass(self, m, products):
        from nyhopt.solvers.direct import whitened_moments

        whitened_moments(self.kernel, self.X, self.Z, self.Y, self.Lt, np, self.products)


class PredictSynthetic:
    """``NystromKRR.predict`` on 5000 test rows (d = 8)."""

    params = [[200, 1000, 5000], ["float64", "float32"], ["numpy", "cupy"]]
    param_names = ["m", "dtype", "backend"]
    number = 1
    repeat = (5, 20, 30.0)

    def setup(self, m, dtype, backend):
        import nyhopt as nh
        from nyhopt.datasets import synthetic

        xp = _array_module(backend)
        ds = synthetic(20000, d=8, n_test=5000, seed=1234, dtype=np.dtype(dtype))
        self.xp = xp
        rng = np.random.default_rng(0)
        self.model = nh.NystromKRR(nh.GaussianKernel(np.ones(8)), centers=ds.X_train[:m])
        # predict only needs fitted attributes: set them directly (fitting m = 5000 is slow)
        self.model.kernel_ = nh.GaussianKernel(np.ones(8))
        self.model.centers_ = xp.asarray(ds.X_train[:m])
        self.model.alpha_ = xp.asarray(rng.normal(size=m))
        self.model.n_features_in_ = 8
        self.Xt = xp.asarray(ds.X_test)
        self.model.predict(self.Xt[:10])

    def time_predict(self, m, dtype, backend):
        self.model.predict(self.Xt)
        _sync(self.xp)


class PredictStd:
    """``predict(X, return_std=True)`` against the mean alone, 5000 test rows (d = 8).

    The variance model comes from a direct fit on 5000 training rows (in
    ``setup``); the std costs two triangular solves with the ``m x m`` factors
    per row (``2 m^2`` flops) on top of the mean's kernel evaluation, so the
    ratio ``time_std / time_mean`` grows with m (target: at most 2 at
    m = 1000; measured on the 2-core CPU: about 11-14, see docs/uncertainty.md).
    The fit benchmarks above and P4 set ``predictive_variance=False``: they time
    the solvers alone.
    """

    params = [[200, 1000], ["float64", "float32"], ["numpy", "cupy"]]
    param_names = ["m", "dtype", "backend"]
    number = 1
    repeat = (5, 20, 30.0)

    def setup(self, m, dtype, backend):
        import nyhopt as nh
        from nyhopt.datasets import synthetic

        xp = _array_module(backend)
        ds = synthetic(10000, d=8, n_test=5000, seed=1234, dtype=np.dtype(dtype))
        self.xp = xp
        X = xp.asarray(ds.X_train[:5000])
        self.model = nh.NystromKRR(nh.GaussianKernel(np.ones(8)), penalty=1e-4, centers=X[:m],
                                   solver="direct").fit(X, xp.asarray(ds.y_train[:5000]))
        self.Xt = xp.asarray(ds.X_test)
        self.model.predict(self.Xt[:10], return_std=True)

    def time_mean(self, m, dtype, backend):
        self.model.predict(self.Xt)
        _sync(self.xp)

    def time_std(self, m, dtype, backend):
        self.model.predict(self.Xt, return_std=True)
        _sync(self.xp)

    def track_std_over_mean(self, m, dtype, backend):
        """Median of 5 interleaved timings of each: the ratio the target is about."""
        mean_t, std_t = [], []
        for _ in range(5):
            t0 = time.perf_counter()
            self.time_mean(m, dtype, backend)
            t1 = time.perf_counter()
            self.time_std(m, dtype, backend)
            mean_t.append(t1 - t0)
            std_t.append(time.perf_counter() - t1)
        return float(np.median(std_t) / np.median(mean_t))

    track_std_over_mean.unit = "ratio"


class ProteinP4:
    """Benchmark P4: ``NystromKRR.fit`` (Falkon) on protein, m = 1000 and 5000, float64, CPU."""

    params = [[1000, 5000]]
    param_names = ["m"]
    timeout = 3600

    def setup_cache(self):
        import nyhopt as nh
        from nyhopt.datasets import load_dataset

        try:
            ds = load_dataset("protein")
        except (FileNotFoundError, OSError) as exc:
            raise NotImplementedError(f"protein data not found: {exc}")
        nh.NystromKRR(centers=100, random_state=0).fit(ds.X_train[:1000], ds.y_train[:1000])  # warm up
        out = {}
        for m in self.params[0]:
            model = nh.NystromKRR(
                nh.GaussianKernel(PROTEIN_LENGTHSCALE), penalty=PROTEIN_PENALTY, centers=m,
                maxiter=PROTEIN_MAXITER, tol=PROTEIN_TOL, random_state=0, predictive_variance=False,
            )
            tracemalloc.start()
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(ds.X_train, ds.y_train)
            seconds = time.perf_counter() - t0
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            t0 = time.perf_counter()
            pred = model.predict(ds.X_test)
            out[m] = {
                "fit_seconds": seconds,
                "predict_seconds": time.perf_counter() - t0,
                "test_nrmse": ds.error(pred),
                "iterations": model.solve_.cg.iterations,
                "residual": float(model.solve_.cg.residual_norms[-1]),
                "peak_mib": peak / 2**20,
                "nxm_mib": ds.X_train.shape[0] * m * 8 / 2**20,
            }
        return out

    def track_fit_seconds(self, cache, m):
        return cache[m]["fit_seconds"]

    track_fit_seconds.unit = "seconds"

    def track_predict_seconds(self, cache, m):
        return cache[m]["predict_seconds"]

    track_predict_seconds.unit = "seconds"

    def track_test_nrmse(self, cache, m):
        return cache[m]["test_nrmse"]

    track_test_nrmse.unit = "NRMSE"

    def track_cg_iterations(self, cache, m):
        return cache[m]["iterations"]

    track_cg_iterations.unit = "iterations"

    def track_peak_traced_mib(self, cache, m):
        return cache[m]["peak_mib"]

    track_peak_traced_mib.unit = "MiB"


if __name__ == "__main__":  # python asv_bench/benchmarks/bench_solvers.py: print P4 once
    for m, rec in ProteinP4().setup_cache().items():
        print(f"m={m}: " + ", ".join(f"{k}={v:.4g}" for k, v in rec.items()))


class PenaltyPath:
    """The held-out errors of 5 nested sizes at 13 penalties from one pass (``held_out_path``), and one direct fit.

    n = 24 000 synthetic rows (d = 8, float64), 2000 held-out rows, m = 1000
    and 3000 centers (the first m rows).  The path costs the fit's pass plus
    the held-out rows' triangular solve and one :math:`m^3/3` factorization a
    penalty; a budgeted run's final fit makes it once
    (``docs/tuning.md``, "A time budget", point 5).
    """

    params = [[1000, 3000], ["path", "one fit"]]
    param_names = ["m", "what"]
    timeout = 600
    number = 1
    repeat = (3, 10, 60.0)

    def setup(self, m, what):
        import nyhopt as nh
        from nyhopt.datasets import synthetic

        ds = synthetic(26000, d=8, n_test=10, seed=1234)
        X, y = ds.X_train, ds.y_train
        self.X, self.y, self.Xv, self.yv = X[:24000], y[:24000], X[24000:], y[24000:]
        self.Z = np.ascontiguousarray(X[:m])
        self.kernel = nh.GaussianKernel(np.ones(8))
        self.sizes = np.unique(np.geomspace(m // 4, m, 5).astype(int))
        self.penalties = 1e-4 * 2.0 ** -np.arange(13)

    def time_path(self, m, what):
        from nyhopt.solvers.direct import direct_solve
        from nyhopt.solvers.penalty_path import held_out_path

        if what == "path":
            held_out_path(self.kernel, self.X, self.Z, self.y, self.Xv, self.yv, self.penalties, self.sizes)
        else:
            direct_solve(self.kernel, self.X, self.Z, self.y, 1e-4)
