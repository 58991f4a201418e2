"""Block-wise kernel products and adjoints (``nyhopt.ops``), per implementation.

``impl`` is "numpy" (the BLAS reference, ``nyhopt.ops._reference``), "numba"
(the fused CPU loops, ``nyhopt.ops._numba``) or "cupy" (cuBLAS + CUDA
kernels; skipped without a GPU).  The CPU choice is made through
``nyhopt.ops.set_cpu_impl`` so that the public entry points (with their input
checks) are what is timed.

Data: the BENCHMARKS.md generator (``X ~ Uniform(-1.5, 1.5)``, seed 1234),
centers = the first m rows, Gaussian kernel with lengthscale 1 per feature,
operands standard normal with k columns, default memory budget (256 MiB).
``TimeOps`` covers n = 20000 and the grid m in {200, 1000}, d in {3, 28},
k in {1, 21} in float64, ``TimeOpsFloat32`` the float32 cases where the
choice between NumPy and Numba is closest (m = 1000, k = 21),
``TimeOpsDense`` the dense kernel matrix and dense adjoint, ``TimeOpsLarge``
the hot products of the stochastic objective at n = 100000, ``MemOps`` the
peak memory at n = 100000, m = 1000 (an n x m float64 array would be
800 MB).  The grids are kept small enough for a quick run
(``asv run --quick``) of this file to take about two minutes on two cores.
"""
import numpy as np

IMPLS = ["numpy", "numba", "cupy"]
DTYPES = ["float64", "float32"]


def _namespace(impl):
    if impl != "cupy":
        return np
    from nyhopt.backend import gpu_available

    if not gpu_available():
        raise NotImplementedError("no CUDA GPU: cupy benchmarks skipped")
    import cupy

    return cupy


def _sync(xp):
    if xp is not np:
        xp.cuda.Stream.null.synchronize()


def _data(n, m, d, k, dtype, xp, dense=False):
    rng = np.random.default_rng(1234)
    X = rng.uniform(-1.5, 1.5, (n, d)).astype(dtype)
    out = {
        "X": X,
        "Z": X[:m].copy(),
        "V": rng.standard_normal((m, k)).astype(dtype),
        "U": rng.standard_normal((n, k)).astype(dtype),
    }
    if dense:
        out["G"] = rng.standard_normal((n, m)).astype(dtype)
    return {name: xp.asarray(a) for name, a in out.items()}


class _OpsBase:
    """Sets the CPU implementation for the benchmark and restores it after."""

    def _setup(self, impl, n, m, d, k, dtype, dense=False):
        import nyhopt as nh
        from nyhopt import ops

        self.ops = ops
        self.xp = _namespace(impl)
        self.saved = dict(ops.CPU_IMPL)
        if impl != "cupy":
            ops.set_cpu_impl(None, impl)
        self.a = _data(n, m, d, k, dtype, self.xp, dense)
        self.kernel = nh.GaussianKernel(np.ones(d))
        # Warm up on a small slice: imports, Numba cache load / compilation,
        # CUDA module build.
        small = {name: a[:50] for name, a in self.a.items()}
        small["Z"], small["V"] = self.a["Z"][:10], self.a["V"][:10]
        if dense:
            small["G"] = self.a["G"][:50, :10]
        self._run_all(small)

    def _run_all(self, a):
        kernel, ops = self.kernel, self.ops
        ops.kernel_matrix(kernel, a["X"], a["Z"])
        ops.kmv(kernel, a["X"], a["Z"], a["V"])
        ops.kmtv(kernel, a["X"], a["Z"], a["U"])
        ops.normal_matvec(kernel, a["X"], a["Z"], a["V"], a["U"])
        ops.adjoint_lowrank(kernel, a["X"], a["Z"], a["U"], a["V"])
        if "G" in a:
            ops.adjoint_dense(kernel, a["X"], a["Z"], a["G"])
        _sync(self.xp)

    def teardown(self, *args):
        if hasattr(self, "saved"):
            self.ops.CPU_IMPL.update(self.saved)


class TimeOps(_OpsBase):
    """n = 20000 rows; products with k columns and the low-rank adjoint."""

    params = [IMPLS, [200, 1000], [3, 28], [1, 21]]
    param_names = ["impl", "m", "d", "k"]
    number = 1
    repeat = (3, 7, 20.0)
    timeout = 600
    n = 20000

    def setup(self, impl, m, d, k):
        self._setup(impl, self.n, m, d, k, "float64")

    def time_kmv(self, *params):
        self.ops.kmv(self.kernel, self.a["X"], self.a["Z"], self.a["V"])
        _sync(self.xp)

    def time_kmtv(self, *params):
        self.ops.kmtv(self.kernel, self.a["X"], self.a["Z"], self.a["U"])
        _sync(self.xp)

    def time_normal_matvec(self, *params):
        self.ops.normal_matvec(self.kernel, self.a["X"], self.a["Z"], self.a["V"], self.a["U"])
        _sync(self.xp)

    def time_adjoint_lowrank(self, *params):
        self.ops.adjoint_lowrank(self.kernel, self.a["X"], self.a["Z"], self.a["U"], self.a["V"])
        _sync(self.xp)


class TimeOpsFloat32(TimeOps):
    """float32, n = 20000, m = 1000, k = 21 columns (see TimeOps)."""

    params = [IMPLS, [3, 28]]
    param_names = ["impl", "d"]

    def setup(self, impl, d):
        self._setup(impl, self.n, 1000, d, 21, "float32")


class TimeOpsDense(_OpsBase):
    """n = 20000 rows; the dense kernel matrix and the dense-cotangent adjoint."""

    params = [IMPLS, [200, 1000], [3, 28], DTYPES]
    param_names = ["impl", "m", "d", "dtype"]
    number = 1
    repeat = (3, 7, 20.0)
    timeout = 600
    n = 20000

    def setup(self, impl, m, d, dtype):
        self._setup(impl, self.n, m, d, 1, dtype, dense=True)

    def time_kernel_matrix(self, *params):
        self.ops.kernel_matrix(self.kernel, self.a["X"], self.a["Z"])
        _sync(self.xp)

    def time_adjoint_dense(self, *params):
        self.ops.adjoint_dense(self.kernel, self.a["X"], self.a["Z"], self.a["G"])
        _sync(self.xp)


class TimeOpsLarge(_OpsBase):
    """n = 100000, m = 1000, d = 8, k = 21, float64: one CG product and one
    adjoint of the stochastic objective (t = 20 probes + 1 target column)."""

    params = [IMPLS, ["float64"]]
    param_names = ["impl", "dtype"]
    number = 1
    repeat = (2, 5, 30.0)
    timeout = 900

    def setup(self, impl, dtype):
        self._setup(impl, 100000, 1000, 8, 21, dtype)

    def time_normal_matvec(self, *params):
        self.ops.normal_matvec(self.kernel, self.a["X"], self.a["Z"], self.a["V"])
        _sync(self.xp)

    def time_adjoint_lowrank(self, *params):
        self.ops.adjoint_lowrank(self.kernel, self.a["X"], self.a["Z"], self.a["U"], self.a["V"])
        _sync(self.xp)


class MemOps:
    """Peak memory (process RSS) of one low-rank adjoint and one normal product
    at n = 100000, m = 1000, d = 8, k = 21, float64: the data take 6.4 MB
    (X) + 17 MB (P); an n x m array would take 800 MB."""

    params = [["numpy", "numba"]]
    param_names = ["impl"]
    timeout = 600

    def setup(self, impl):
        from nyhopt import ops

        self.ops = ops
        self.saved = dict(ops.CPU_IMPL)
        ops.set_cpu_impl(None, impl)

    def teardown(self, impl):
        self.ops.CPU_IMPL.update(self.saved)

    def peakmem_adjoint_lowrank(self, impl):
        import nyhopt as nh

        a = _data(100000, 1000, 8, 21, "float64", np)
        kernel = nh.GaussianKernel(np.ones(8))
        self.ops.adjoint_lowrank(kernel, a["X"], a["Z"], a["U"], a["V"])

    def peakmem_normal_matvec(self, impl):
        import nyhopt as nh

        a = _data(100000, 1000, 8, 21, "float64", np)
        kernel = nh.GaussianKernel(np.ones(8))
        self.ops.normal_matvec(kernel, a["X"], a["Z"], a["V"])
