"""One ``value_and_grad`` of each exact objective (benchmark P1 and protein).

P1 (shared/design/BENCHMARKS.md): synthetic data, n = 20000, d = 8, m = 200
centers = the first training rows, per-feature lengthscales 1, penalty 1e-4,
float64.  Target for ``prop``: <= 68 ms median (reference library: 274 ms).

``FlopFloorP1`` times the three ``n``-sized BLAS products every exact
objective needs at the P1 size (docs/performance-ops.md, "Flop account of
the exact objectives"): the triangular solve :math:`A = L^{-1}K^T`
(:math:`nm^2` flops), the Gram matrix :math:`AA^T` (:math:`nm^2`, a
symmetric rank-k product) and the cotangent product :math:`W^TA`
(:math:`2nm^2`), single-threaded and on all threads, in NumPy's BLAS, and
the Gaussian kernel matrix :math:`K^T = k(Z, X)` (fused Numba loop; one
thread or Numba's default).  ``ObjectivesP1ConstantMean`` times the
objectives with ``mean="constant"``.

Protein: the training part of CASP (80% of 45730 rows, standardized),
m = 200 first training rows, same hyperparameters; skipped when the data
folder is missing.
"""
import numpy as np

OBJECTIVES = ["holdout", "loocv", "gcv", "creg", "sgpr", "prop"]


def _setup(X, y, name, m=200, mean=None):
    import nyhopt as nh

    obj = nh.make_objective(name, X, y, kernel="gaussian", random_state=0, mean=mean)
    theta = nh.Params.from_natural(penalty=1e-4, lengthscale=np.ones(X.shape[1]), centers=X[:m])
    obj.value_and_grad(theta)  # warm up (imports, Numba compilation)
    return obj, theta


class ObjectivesP1:
    """Benchmark P1: n = 20000, d = 8, m = 200, float64."""

    params = [OBJECTIVES]
    param_names = ["objective"]
    timeout = 300
    number = 1
    repeat = (5, 15, 60.0)

    def setup(self, name):
        from nyhopt.datasets import synthetic

        ds = synthetic(20000, d=8, n_test=10, seed=1234)
        self.obj, self.theta = _setup(ds.X_train, ds.y_train, name)

    def time_value_and_grad(self, name):
        self.obj.value_and_grad(self.theta)

    def time_value(self, name):
        self.obj.value(self.theta)


class ObjectivesP1ConstantMean:
    """Benchmark P1 with ``mean="constant"`` (the profiled intercept)."""

    params = [OBJECTIVES]
    param_names = ["objective"]
    timeout = 300
    number = 1
    repeat = (5, 15, 60.0)

    def setup(self, name):
        from nyhopt.datasets import synthetic

        ds = synthetic(20000, d=8, n_test=10, seed=1234)
        self.obj, self.theta = _setup(ds.X_train, ds.y_train, name, mean="constant")

    def time_value_and_grad(self, name):
        self.obj.value_and_grad(self.theta)


class ObjectivesP1Float32:
    """Benchmark P1 in float32 (prop only)."""

    number = 1
    repeat = (5, 15, 60.0)

    def setup(self):
        from nyhopt.datasets import synthetic

        ds = synthetic(20000, d=8, n_test=10, seed=1234, dtype=np.float32)
        self.obj, self.theta = _setup(ds.X_train, ds.y_train, "prop")

    def time_prop_value_and_grad(self):
        self.obj.value_and_grad(self.theta)


class ObjectivesProtein:
    """Protein (CASP) training split: n = 36584, d = 9, m = 200, float64."""

    params = [OBJECTIVES]
    param_names = ["objective"]
    timeout = 300
    number = 1
    repeat = (3, 10, 60.0)

    def setup(self, name):
        from nyhopt.datasets import load_dataset

        try:
            ds = load_dataset("protein")
        except (FileNotFoundError, OSError) as exc:  # no data folder: skip
            raise NotImplementedError(f"protein data not found: {exc}")
        self.obj, self.theta = _setup(ds.X_train, ds.y_train, name)

    def time_value_and_grad(self, name):
        self.obj.value_and_grad(self.theta)


class FlopFloorP1:
    """The n-sized BLAS products of the exact objectives at the P1 size (n = 20000, m = 200), float64."""

    params = [[1, 0]]
    param_names = ["threads"]  # 1: one BLAS thread; 0: the library's default
    number = 1
    repeat = (5, 15, 30.0)

    def setup(self, threads):
        import numba
        from threadpoolctl import threadpool_limits

        import nyhopt as nh
        from nyhopt.datasets import synthetic

        self._limit = threadpool_limits(limits=threads if threads else None, user_api="blas")
        self._numba_threads = numba.get_num_threads()
        if threads:
            numba.set_num_threads(threads)
        ds = synthetic(20000, d=8, n_test=10, seed=1234)
        self.X, self.Z = ds.X_train, ds.X_train[:200].copy()
        self.kernel = nh.GaussianKernel(np.ones(8))
        self.KT = np.empty((200, 20000))
        self.KT2 = np.empty((200, 20000))
        rng = np.random.default_rng(0)
        n, m = 20000, 200
        X = rng.standard_normal((m + 2 * m, m))
        self.L = np.linalg.cholesky(X.T @ X / (3 * m))
        self.K = rng.uniform(0.0, 1.0, (m, n))
        self.A = np.empty_like(self.K)
        self.W = rng.standard_normal((m, m))
        self.G = np.empty((m, n))

    def teardown(self, threads):
        import numba

        self._limit.restore_original_limits()
        numba.set_num_threads(self._numba_threads)

    def time_kernel_matrix(self, threads):
        """The Gaussian ``k(Z, X)`` (m x n, d = 8) of the exact objectives (fused Numba loop)."""
        from nyhopt import ops

        ops.kernel_matrix(self.kernel, self.Z, self.X, out=self.KT)

    def time_kernel_matrix_with_copy(self, threads):
        """``k(Z, X)`` written twice in one pass (the copy that the triangular solve overwrites)."""
        from nyhopt import ops

        ops.kernel_matrix(self.kernel, self.Z, self.X, out=self.KT, copy=self.KT2)

    def time_triangular_solve(self, threads):
        from nyhopt.backend._blas import trsm

        self.A[...] = self.K
        trsm(self.L, self.A, lower=True, overwrite_b=True)

    def time_gram_syrk(self, threads):
        self.K @ self.K.T

    def time_cotangent_gemm(self, threads):
        np.matmul(self.W.T, self.K, out=self.G)


class SmallAlgebraP1:
    """The ``m x m`` algebra of one ``prop`` step at the P1 size (m = 200), with the fit beside it.

    ``workers``: 1 (in turn on one thread) or 2 (nyhopt's pool phase: the
    matrices on both workers, the fit of the targets as one more task;
    ``objectives/_mm.py``, docs/performance-ops.md, "Third pass").
    """

    params = [[1, 2]]
    param_names = ["workers"]
    number = 1
    repeat = (10, 30, 20.0)

    def setup(self, workers):
        import nyhopt as nh
        from nyhopt.backend._threads import cpu_threads
        from nyhopt.datasets import synthetic
        from nyhopt.objectives import _exact

        ds = synthetic(20000, d=8, n_test=10, seed=1234)
        X, self.Y = ds.X_train, ds.y_train[:, None]
        with cpu_threads("pool"):
            self.fac = _exact.factorize(nh.GaussianKernel(np.ones(8)), X, X[:200].copy(), 1e-4, np,
                                        keep_kernel=True)
        self.time_prefetch_with_fit(workers)  # warm up

    def time_prefetch_with_fit(self, workers):
        from nyhopt.backend._parallel import pool_phase
        from nyhopt.backend._threads import cpu_threads
        from nyhopt.objectives import _exact
        from nyhopt.objectives._mm import SmallAlgebra

        fac = self.fac
        mm = SmallAlgebra(fac.L, fac.C, fac.S, np)
        with cpu_threads("pool"), pool_phase(workers):
            mm.prefetch("M2", "MSM", "SMinv", alongside=lambda: _exact.fit(fac, self.Y, np))


class GrownStageEpoch:
    """One ``sgpr`` epoch at the size a budgeted run's last stage reaches (issue 45).

    The shape of the robot arm in ``docs/tuning.md``, "A time budget", point 8:
    n = 36000 synthetic rows, d = 8, m = 1500 centers (the first rows), P1's
    hyperparameters; on the float64 data and on the float32 copy that a
    budgeted run's grown stages tune on.
    """

    params = [["float64", "float32"]]
    param_names = ["dtype"]
    number = 1
    repeat = (3, 5, 60.0)
    timeout = 240

    def setup(self, dtype):
        from nyhopt.datasets import synthetic

        ds = synthetic(36000, d=8, n_test=10, seed=1234)
        self.obj, self.theta = _setup(ds.X_train.astype(dtype), ds.y_train, "sgpr", m=1500)

    def time_sgpr_value_and_grad(self, dtype):
        self.obj.value_and_grad(self.theta)
