"""GPU timings of the benchmark problems, for a machine without asv.

Runs the CuPy path on the problems of shared/design/BENCHMARKS.md and prints
one line per case (median of ``repeat`` synchronized runs after one warm-up):

* the block operations at n = 20000 and n = 1,000,000 (m = 1000, d = 8, k = 21);
* ``value_and_grad`` of every exact objective on P1 (float64 and float32);
* one cold ``stoch-prop`` step on P2 and P3 (float64, float32, and float64
  with ``kernel_cache=True``), with the GPU memory pool of the step;
* a Falkon fit of ``NystromKRR`` at n = 1,000,000, m = 1000;
* the HIGGS-size passes (mode ``fused``, also in the full run): ``normal_matvec`` at
  n = 10^7 (or the largest that fits in 40% of free GPU memory), m = 5000,
  d = 28, k = 21, float32, data made on the GPU from a seed: the Falkon pass
  (``V`` only) and the stoch-prop pass (20 more columns ``U``, ``kv=True``),
  each with its first call (compilation); and both passes with the kernel
  held in float16 (``CachedKernel(storage="float16")``, where ``2 n m`` bytes
  fit), with the time to build it and the difference to streaming;
* Adam steps of ``stoch-prop`` at the HIGGS size per route (mode ``routes``):
  n = 10^7 or the largest that fits, d = 28, m = 5000, float32, one
  lengthscale 4, lambda0 = 1/n, t = 20, tol 1e-3, maxiter 100, lr 0.05 --
  streaming (with the previous or the extrapolated warm start), the Gram
  matrix on tensor cores and in float64, the kernel held in float16 (where
  it fits), default settings -- each for at most ``budget`` seconds, with
  the projection to 20 steps and each step's objective value;
* the pieces of the GPU route, one by one (modes ``blocks``, ``gram``,
  ``higgs``, from ``gpu_pieces.py``): kernel-block passes (GEMM + one fused
  pass against the previous kernels), the Gram matrix on tensor cores
  against float64 with a sweep of its block length, and the HIGGS run with
  default settings checked against the float64-Gram route at the same
  parameters, with the test error on held-out rows;
* the exact-objective case (mode ``exact28``): one
  ``value_and_grad`` of ``prop`` and ``sgpr`` at n = 10^6, m = 1000, d = 28,
  ARD, float32, and one step of GPyTorch's SGPR on the same data when torch
  and gpytorch are importable (never a dependency of nyhopt).

Each case is guarded: a failure prints its traceback and the script goes on.
Usage (on the GPU machine, from the repository root)::

    PYTHONPATH=. python asv_bench/gpu_report.py [quick | fused | routes [budget] | exact28 | blocks | gram
                                                 | higgs [budget] | budget [seconds]] [--tiny]

``fused`` runs the HIGGS-size passes only; ``--tiny`` (pieces modes) runs toy sizes, also on a CPU.
"""
import sys
import time
import traceback

import numpy as np

from gpu_data import synthetic_gpu


def _median_time(fn, sync, repeat):
    fn()
    sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), float(np.min(times))


def _timed_first(fn, sync):
    """``(result, seconds)`` of one synchronized call (the first one: compilation included)."""
    sync()
    t0 = time.perf_counter()
    res = fn()
    sync()
    return res, time.perf_counter() - t0


def _relative_max(got, want):
    """Largest ``max|a - b| / max|b|`` over matching arrays (None skipped)."""
    import cupy as cp

    return max(float(cp.max(cp.abs(a - b)) / cp.max(cp.abs(b))) for a, b in zip(got, want) if b is not None)


def _case(label, fn):
    try:
        print(f"{label}: {fn()}", flush=True)
    except Exception:
        print(f"{label}: FAILED", flush=True)
        traceback.print_exc()
        sys.stdout.flush()


def _fmt(t):
    return f"median {t[0] * 1e3:.2f} ms (min {t[1] * 1e3:.2f} ms)"


def fused_vs_today(card, repeat=3):
    """``normal_matvec`` at the HIGGS size (cuBLAS blocks, one fused evaluation pass), and with K in float16."""
    import cupy as cp

    import nyhopt as nh
    from nyhopt import ops

    sync = cp.cuda.Device().synchronize
    pool = cp.get_default_memory_pool()
    m, d, k, t = 5000, 28, 21, 20
    free = cp.cuda.Device().mem_info[0]
    n = int(min(10_000_000, 0.4 * free / ((d + 2 * (k + t)) * 4)) // 1000 * 1000)
    rs = cp.random.RandomState(1234)
    X = rs.uniform(-1.5, 1.5, (n, d), dtype=cp.float32)
    Z = X[:m].copy()
    V = rs.standard_normal((m, k), dtype=cp.float32)
    U = rs.standard_normal((n, t), dtype=cp.float32)
    kern = nh.GaussianKernel(4.0)
    passes = {
        "Falkon pass normal_matvec(V)": lambda: ops.normal_matvec(kern, X, Z, V),
        f"stoch-prop pass normal_matvec(V, U with {t} columns, kv=True)":
            lambda: ops.normal_matvec(kern, X, Z, V, U, kv=True),
    }
    for what, fn in passes.items():
        def run(fn=fn):
            _, first = _timed_first(fn, sync)
            return f"{_fmt(_median_time(fn, sync, repeat))}; first call {first:.2f} s"

        _case(f"HIGGS-size {what} n={n} m={m} d={d} k={k} float32 on {card}", run)
        pool.free_all_blocks()
    _case(f"HIGGS-size passes n={n} m={m} d={d} k={k} float32 on {card}, kernel held in float16",
          lambda: _half_cache_passes(kern, X, Z, V, U, sync, repeat))


def _half_cache_passes(kern, X, Z, V, U, sync, repeat):
    """Build time, first call and median of both passes with K held in float16 (when it fits)."""
    import cupy as cp

    from nyhopt import ops
    from nyhopt.ops.cached import CachedKernel

    n, m = X.shape[0], Z.shape[0]
    free = cp.cuda.Device().mem_info[0] + cp.get_default_memory_pool().free_bytes()
    if 2 * n * m > 0.8 * free:
        return f"skipped: n x m float16 ({2 * n * m / 2**30:.1f} GiB) does not fit 80% of free memory"
    ck, built = _timed_first(lambda: CachedKernel(kern, X, Z, storage="float16"), sync)
    out = [f"built in {built:.2f} s ({ck.nbytes / 2**30:.1f} GiB)"]
    for what, fn, ref in (("Falkon pass", lambda: ck.normal_matvec(V), lambda: ops.normal_matvec(kern, X, Z, V)),
                          ("stoch-prop pass", lambda: ck.normal_matvec(V, U, kv=True),
                           lambda: ops.normal_matvec(kern, X, Z, V, U, kv=True))):
        res, first = _timed_first(fn, sync)
        timing = _median_time(fn, sync, repeat)
        out.append(f"{what} {_fmt(timing)}, first call {first:.2f} s, relative difference to streaming "
                   f"{_relative_max(res, ref()):.1e}")
    return "; ".join(out)


def higgs_tuning(card, budget=120.0, steps=20):
    """Adam steps of stoch-prop at the HIGGS size, per route; 20 steps measured or projected."""
    import cupy as cp

    import nyhopt as nh
    from nyhopt.ops import gram as gram_mod
    from nyhopt.optim import adam

    sync = cp.cuda.Device().synchronize
    pool = cp.get_default_memory_pool()
    d, m, t = 28, 5000, 20
    free = cp.cuda.Device().mem_info[0]
    # data (d + 1 columns) and the solve's n x (t + 1) arrays, a few times over, in 60% of free memory
    n = int(min(10_000_000, 0.6 * free / ((d + 1 + 6 * (t + 1)) * 4)) // 1000 * 1000)
    X, y = synthetic_gpu(n, d, 1234, cp.float32)
    # (label, options, Gram matrix on tensor cores)
    routes = (("streaming", dict(kernel_cache=False, gram=False), True),
              ("streaming, extrapolated warm start", dict(kernel_cache=False, gram=False, warm_start="extrapolate"),
               True),
              ("Gram matrix on tensor cores", dict(kernel_cache=False, gram=True), True),
              ("Gram matrix in float64", dict(kernel_cache=False, gram=True), False),
              ("kernel held in float16", dict(kernel_cache="float16", gram=False), True),
              ("default settings", {}, True))
    saved = gram_mod.TENSOR_CORES
    try:
        for label, opts, tensor_cores in routes:
            def run(opts=opts, tensor_cores=tensor_cores):
                if opts.get("kernel_cache") == "float16" and 2 * n * m > 0.8 * free:
                    return f"skipped: n x m float16 ({2 * n * m / 2**30:.1f} GiB) does not fit 80% of free memory"
                gram_mod.TENSOR_CORES = tensor_cores
                obj = nh.make_objective("stoch-prop", X, y, kernel=nh.GaussianKernel(4.0), n_probes=t, tol=1e-3,
                                        maxiter=100, random_state=0, **opts)
                params = nh.Params.from_natural(1.0 / n, [4.0], X[:m])
                state, times, notes = adam.init(params), [], []
                start = time.perf_counter()
                while len(times) < steps and time.perf_counter() - start < budget:
                    sync()
                    t0 = time.perf_counter()
                    value, grad = obj.value_and_grad(params)
                    params, state = adam.update(grad, state, params, lr=0.05)
                    sync()
                    times.append(time.perf_counter() - t0)
                    rec = obj.last_solve
                    notes.append(f"{times[-1]:.2f}s/{rec.iterations}it/{rec.passes}p/{value:.5g}")
                warm = times[1:] or times
                total = sum(times) + (steps - len(times)) * float(np.mean(warm[-3:]))
                kind = "measured" if len(times) == steps else f"projected from {len(times)}"
                return (f"{steps} steps: {total:.1f} s ({kind}); steps {', '.join(notes)}; last value {value:.6g}; "
                        f"pool {pool.total_bytes() / 2**30:.1f} GiB")

            _case(f"HIGGS-size stoch-prop tuning n={n} m={m} d={d} t={t} float32 on {card}, {label}", run)
            pool.free_all_blocks()
    finally:
        gram_mod.TENSOR_CORES = saved


def exact_step_vs_gpytorch(card, repeat=5):
    """One exact ``prop``/``sgpr`` step at n = 1e6, m = 1000, d = 28 (ARD, float32), and GPyTorch's SGPR."""
    import cupy as cp

    import nyhopt as nh

    sync = cp.cuda.Device().synchronize
    n, m, d = 1_000_000, 1000, 28
    X, y = synthetic_gpu(n, d, 1234, cp.float32)
    theta = nh.Params.from_natural(penalty=1.0 / n, lengthscale=np.full(d, 4.0), centers=X[:m])
    for name in ("prop", "sgpr"):
        def run(name=name):
            obj = nh.make_objective(name, X, y, random_state=0)
            return _fmt(_median_time(lambda: obj.value_and_grad(theta), sync, repeat))

        _case(f"exact {name} value_and_grad n={n} m={m} d={d} ARD float32 on {card}", run)
    try:
        import gpytorch
        import torch
    except ImportError as exc:
        print(f"GPyTorch SGPR step: not run ({exc})", flush=True)
        return

    def gpytorch_step():
        tX = torch.from_dlpack(X)
        ty = torch.from_dlpack(y)

        class SGPR(gpytorch.models.ExactGP):
            def __init__(self, likelihood):
                super().__init__(tX, ty, likelihood)
                self.mean_module = gpytorch.means.ZeroMean()
                base = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=d))
                self.covar_module = gpytorch.kernels.InducingPointKernel(base, inducing_points=tX[:m].clone(),
                                                                         likelihood=likelihood)

            def forward(self, x):
                return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

        likelihood = gpytorch.likelihoods.GaussianLikelihood().cuda()
        model = SGPR(likelihood).cuda()
        model.train()
        likelihood.train()
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
        opt = torch.optim.Adam(model.parameters(), lr=0.05)

        def step():
            opt.zero_grad()
            loss = -mll(model(tX), ty)
            loss.backward()
            opt.step()

        return _fmt(_median_time(step, torch.cuda.synchronize, repeat))

    _case(f"GPyTorch {gpytorch.__version__} SGPR step n={n} m={m} d={d} ARD float32 on {card}", gpytorch_step)


def main(quick=False, only_fused=False):
    import cupy as cp

    import nyhopt as nh
    from nyhopt import ops
    from nyhopt.datasets import synthetic

    dev = cp.cuda.runtime.getDeviceProperties(0)
    card = dev['name'].decode()
    print(f"device: {card} cupy {cp.__version__} numpy {np.__version__}", flush=True)
    sync = cp.cuda.Device().synchronize
    pool = cp.get_default_memory_pool()
    repeat = 3 if quick else 7
    fmt = _fmt
    if only_fused:
        fused_vs_today(card)
        return

    for n in (20000, 1_000_000):
        rng = np.random.default_rng(1234)
        X = cp.asarray(rng.uniform(-1.5, 1.5, (n, 8)))
        Z = X[:1000].copy()
        V = cp.asarray(rng.standard_normal((1000, 21)))
        U = cp.asarray(rng.standard_normal((n, 21)))
        kern = nh.GaussianKernel(np.ones(8))
        cases = {
            "kmv": lambda: ops.kmv(kern, X, Z, V),
            "kmtv": lambda: ops.kmtv(kern, X, Z, U),
            "normal_matvec": lambda: ops.normal_matvec(kern, X, Z, V, U),
            "adjoint_lowrank": lambda: ops.adjoint_lowrank(kern, X, Z, U, V),
        }
        for name, fn in cases.items():
            _case(f"ops {name} n={n} m=1000 d=8 k=21 f64", lambda fn=fn: fmt(_median_time(fn, sync, repeat)))
        del X, Z, V, U
        pool.free_all_blocks()

    for dtype in (np.float64, np.float32):
        ds = synthetic(20000, d=8, n_test=10, seed=1234, dtype=dtype)
        X, y = cp.asarray(ds.X_train), cp.asarray(ds.y_train)
        theta = nh.Params.from_natural(penalty=1e-4, lengthscale=np.ones(8), centers=X[:200])
        for name in ("holdout", "loocv", "gcv", "creg", "sgpr", "prop"):
            def run(name=name):
                obj = nh.make_objective(name, X, y, kernel="gaussian", random_state=0)
                return fmt(_median_time(lambda: obj.value_and_grad(theta), sync, repeat))

            _case(f"P1 {name} value_and_grad {np.dtype(dtype).name}", run)

    for which, n, m in (("P2", 20000, 200), ("P3", 1_000_000, 1000)):
        if quick and which == "P3":
            continue
        for dtype, cache, gram in ((np.float64, False, False), (np.float32, False, False), (np.float64, True, False),
                                   (np.float64, False, True), (np.float64, "auto", "auto")):
            def run(n=n, m=m, dtype=dtype, cache=cache, gram=gram):
                ds = synthetic(n, d=8, n_test=10, seed=1234, dtype=dtype)
                X, y = cp.asarray(ds.X_train), cp.asarray(ds.y_train)
                theta = nh.Params.from_natural(penalty=1e-4, lengthscale=np.ones(8), centers=X[:m])
                obj = nh.make_objective("stoch-prop", X, y, kernel="gaussian", random_state=0, kernel_cache=cache,
                                        gram=gram)

                def step():
                    obj.reset()
                    return obj.value_and_grad(theta)

                sync()
                pool.free_all_blocks()
                base = pool.used_bytes()
                t = _median_time(step, sync, 3 if n > 100000 else repeat)
                peak_note = f"pool total {pool.total_bytes() / 2**30:.2f} GiB (data {base / 2**30:.2f} GiB)"
                value, _ = step()
                rec = obj.last_solve
                return (f"{fmt(t)}; {rec.iterations} CG iterations, {rec.passes} passes, residual {rec.residual:.2g}, "
                        f"value {float(value):.6g}; {peak_note}")

            route = {(False, False): "streaming", (True, False): "kernel_cache", (False, True): "gram",
                     ("auto", "auto"): "default settings"}[(cache, gram)]
            label = f"{which} stoch-prop cold step n={n} m={m} t=20 {np.dtype(dtype).name} {route}"
            _case(label, run)
            pool.free_all_blocks()

    if not quick:
        def fit():
            ds = synthetic(1_000_000, d=8, n_test=10000, seed=1234)
            X, y = cp.asarray(ds.X_train), cp.asarray(ds.y_train)
            model = nh.NystromKRR(kernel=nh.GaussianKernel(np.ones(8)), penalty=1e-6, centers=X[:1000],
                                  solver="falkon", tol=1e-6, maxiter=100)
            t0 = time.perf_counter()
            model.fit(X, y)
            sync()
            t1 = time.perf_counter()
            pred = model.predict(cp.asarray(ds.X_test))
            err = float(cp.sqrt(cp.mean((pred - cp.asarray(ds.y_test)) ** 2)) / cp.std(cp.asarray(ds.y_test)))
            return f"fit {t1 - t0:.2f} s, test NRMSE {err:.4f}"

        _case("NystromKRR falkon fit n=1e6 m=1000 f64", fit)
        fused_vs_today(card)


def _card():
    import cupy as cp

    card = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"device: {card} cupy {cp.__version__} numpy {np.__version__}", flush=True)
    return card


if __name__ == "__main__":
    arg = sys.argv[1] if len(sys.argv) > 1 else ""
    if arg in ("blocks", "gram", "higgs", "budget"):
        import os

        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import gpu_pieces

        gpu_pieces.main(sys.argv[1:])
    elif arg == "routes":
        higgs_tuning(_card(), budget=float(sys.argv[2]) if len(sys.argv) > 2 else 120.0)
    elif arg == "exact28":
        exact_step_vs_gpytorch(_card())
    else:
        main(quick=arg == "quick", only_fused=arg == "fused")
