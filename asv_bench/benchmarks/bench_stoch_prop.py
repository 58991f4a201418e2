"""One ``value_and_grad`` step of ``stoch-prop`` (benchmarks P2 and P3).

P2 (shared/design/BENCHMARKS.md): synthetic data, n = 20000, d = 8, m = 200
centers = the first training rows, per-feature lengthscales 1, penalty 1e-4,
t = 20 probes, float64.  Target: <= 140 ms median (reference library: 1129 ms).

Two kinds of step are timed:

* ``cold``: :meth:`reset` first, so the Falkon solve starts from zero (the
  cost of an isolated evaluation);
* ``warm``: the next point of an Adam trajectory (lr 0.05, computed once in
  ``setup_cache``) after the previous point was evaluated, so the solve is
  warm-started as in an optimization loop;
* ``cold ... streaming``: a cold step with ``kernel_cache=False, gram=False``,
  the default before the kernel cache and the Gram route (every CG iteration
  a pass over the data that evaluates the kernel again);
* ``cold ... kernel_cache``: ``kernel_cache=True, gram=False`` (K_nm held,
  32 MB here; every CG iteration two matrix products with it);
* ``cold ... gram``: ``kernel_cache=False, gram=True`` (the Gram route
  streaming: two passes a step, the Gram pass and the adjoint;
  ``track_cold_passes_gram`` counts them).

``StochPropGramLarge`` (opt-in, ``NYHOPT_BENCH_LARGE=1``): a cold Gram-route
step at n = 2e5, m = 1000, d = 28 in float32 and float64, where the passes
over the kernel dominate.

``StochPropP2WarmStart`` counts the CG iterations along that trajectory
with the previous solution (the default) or the extrapolated one as start.

The default (``time_cold_step``) holds K_nm when it fits the cache budget and
forms K_nm^T K_nm when that beats the CG passes (``nyhopt.ops.operator``);
``track_cold_passes`` counts its passes over the n x m kernel.

P3: n = 1,000,000, d = 8, m = 1000, t = 20 (target <= 60 s and <= 3 GB peak
memory).  It takes minutes, so it only runs when the environment variable
``NYHOPT_BENCH_P3=1`` is set; the figure reported in docs/stochastic.md was
measured once with this file as a script::

    OPENBLAS_NUM_THREADS=1 /usr/bin/time -v python asv_bench/benchmarks/bench_stoch_prop.py p3 [tol]
"""
import os
import sys
import time

import numpy as np


def _problem(n, m, dtype=np.float64, seed=1234, d=8):
    import nyhopt as nh
    from nyhopt.datasets import synthetic

    ds = synthetic(n, d=d, n_test=10, seed=seed, dtype=dtype)
    theta = nh.Params.from_natural(penalty=1e-4, lengthscale=np.full(d, np.sqrt(d / 8)), centers=ds.X_train[:m])
    return ds.X_train, ds.y_train, theta


def _objective(X, y, **options):
    import nyhopt as nh

    return nh.make_objective("stoch-prop", X, y, kernel="gaussian", random_state=0, **options)


def _trajectory(X, y, theta, steps=12, lr=0.05):
    """Params along an Adam run on stoch-prop (the points a warm step visits)."""
    from nyhopt.optim import adam

    obj = _objective(X, y)
    out, state = [theta], adam.init(theta)
    for _ in range(steps):
        _, g = obj.value_and_grad(out[-1])
        nxt, state = adam.update(g, state, out[-1], lr=lr)
        out.append(nxt)
    return out


class StochPropP2:
    """Benchmark P2: n = 20000, d = 8, m = 200, t = 20, float64."""

    timeout = 600
    number = 1
    repeat = (5, 15, 90.0)

    def setup_cache(self):
        X, y, theta = _problem(20000, 200)
        return _trajectory(X, y, theta)

    def setup(self, trajectory):
        X, y, _ = _problem(20000, 200)
        self.obj = _objective(X, y)
        self.path = trajectory
        self.obj.value_and_grad(self.path[0])  # imports, compilation, warm start at point 0
        self.cached = _objective(X, y, kernel_cache=True, gram=False)
        self.cached.value_and_grad(self.path[0])
        self.streaming = _objective(X, y, kernel_cache=False, gram=False)
        self.streaming.value_and_grad(self.path[0])
        self.gram = _objective(X, y, kernel_cache=False, gram=True)
        self.gram.value_and_grad(self.path[0])
        self.i = 1

    def time_cold_step(self, trajectory):
        self.obj.reset()
        self.obj.value_and_grad(self.path[0])

    def time_cold_step_kernel_cache(self, trajectory):
        self.cached.reset()
        self.cached.value_and_grad(self.path[0])

    def time_cold_step_streaming(self, trajectory):
        self.streaming.reset()
        self.streaming.value_and_grad(self.path[0])

    def time_cold_step_gram(self, trajectory):
        self.gram.reset()
        self.gram.value_and_grad(self.path[0])

    def track_cold_passes_gram(self, trajectory):
        self.gram.reset()
        self.gram.value_and_grad(self.path[0])
        return self.gram.last_solve.passes

    track_cold_passes_gram.unit = "passes over K"

    def track_cold_passes(self, trajectory):
        self.obj.reset()
        self.obj.value_and_grad(self.path[0])
        return self.obj.last_solve.passes

    track_cold_passes.unit = "passes over K"

    def time_warm_step(self, trajectory):
        self.obj.value_and_grad(self.path[self.i])
        self.i = self.i + 1 if self.i + 1 < len(self.path) else 1

    def time_cold_value(self, trajectory):
        self.obj.reset()
        self.obj.value(self.path[0])

    def track_cold_iterations(self, trajectory):
        self.obj.reset()
        self.obj.value_and_grad(self.path[0])
        return self.obj.last_solve.iterations

    track_cold_iterations.unit = "CG iterations"


class StochPropP2WarmStart:
    """CG iterations along the P2 Adam trajectory, per warm start (``warm_start=True`` / ``"extrapolate"``)."""

    timeout = 600
    params = [True, "extrapolate"]
    param_names = ["warm_start"]

    def setup_cache(self):
        X, y, theta = _problem(20000, 200)
        return _trajectory(X, y, theta)

    def setup(self, trajectory, warm_start):
        X, y, _ = _problem(20000, 200)
        self.obj = _objective(X, y, warm_start=warm_start)
        self.obj.value_and_grad(trajectory[0])  # imports, compilation

    def track_trajectory_iterations(self, trajectory, warm_start):
        self.obj.reset()
        total = 0
        for params in trajectory:
            self.obj.value_and_grad(params)
            total += self.obj.last_solve.iterations
        return total

    track_trajectory_iterations.unit = "CG iterations"


class StochPropP2Float32:
    """Benchmark P2 in float32 (cold step)."""

    timeout = 600
    number = 1
    repeat = (5, 15, 90.0)

    def setup(self):
        X, y, self.theta = _problem(20000, 200, dtype=np.float32)
        self.obj = _objective(X, y)
        self.obj.value_and_grad(self.theta)

    def time_cold_step(self):
        self.obj.reset()
        self.obj.value_and_grad(self.theta)


class StochPropGramLarge:
    """A cold Gram-route step (``kernel_cache=False, gram=True``) at n = 2e5, m = 1000, d = 28 (opt-in)."""

    timeout = 1800
    number = 1
    repeat = (1, 3, 300.0)
    warmup_time = 0
    params = ["float32", "float64"]
    param_names = ["dtype"]

    def setup(self, dtype):
        if os.environ.get("NYHOPT_BENCH_LARGE") != "1":
            raise NotImplementedError("runs only with NYHOPT_BENCH_LARGE=1 (tens of seconds per step)")
        X, y, self.theta = _problem(200_000, 1000, dtype=np.dtype(dtype), d=28)
        self.obj = _objective(X, y, kernel_cache=False, gram=True)
        self.obj.value_and_grad(self.theta)

    def time_cold_step(self, dtype):
        self.obj.reset()
        self.obj.value_and_grad(self.theta)

    def track_cold_passes(self, dtype):
        self.obj.reset()
        self.obj.value_and_grad(self.theta)
        return self.obj.last_solve.passes

    track_cold_passes.unit = "passes over K"


class StochPropP3:
    """Benchmark P3: n = 1e6, d = 8, m = 1000, t = 20, float64 (opt-in: NYHOPT_BENCH_P3=1)."""

    timeout = 1800
    number = 1
    repeat = (1, 2, 600.0)
    warmup_time = 0

    def setup(self):
        if os.environ.get("NYHOPT_BENCH_P3") != "1":
            raise NotImplementedError("P3 runs only with NYHOPT_BENCH_P3=1 (minutes per step)")
        X, y, self.theta = _problem(1_000_000, 1000)
        self.obj = _objective(X, y)

    def time_cold_step(self):
        self.obj.reset()
        self.obj.value_and_grad(self.theta)

    def peakmem_cold_step(self):
        self.obj.reset()
        self.obj.value_and_grad(self.theta)


def _run_once(which, tol=None):
    """Time one cold step and report the peak resident memory of the process."""
    import resource

    n, m = {"p2": (20000, 200), "p3": (1_000_000, 1000)}[which]
    t0 = time.perf_counter()
    X, y, theta = _problem(n, m)
    obj = _objective(X, y) if tol is None else _objective(X, y, tol=tol)
    t1 = time.perf_counter()
    value, _ = obj.value_and_grad(theta)
    t2 = time.perf_counter()
    rec = obj.last_solve
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    print(f"{which}: n={n} m={m} t=20 float64 tol={obj.tol:g}: data+setup {t1 - t0:.1f} s, one cold value_and_grad "
          f"{t2 - t1:.1f} s ({rec.iterations} CG iterations, residual {rec.residual:.2g}, {rec.passes} passes), "
          f"value {value:.6g}, peak RSS {peak:.2f} GiB")


if __name__ == "__main__":
    _run_once(sys.argv[1] if len(sys.argv) > 1 else "p2", float(sys.argv[2]) if len(sys.argv) > 2 else None)
