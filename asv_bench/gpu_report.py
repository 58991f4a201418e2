"""GPU timings of the benchmark problems, for a machine without asv.

Runs the CuPy path on the problems of shared/design/BENCHMARKS.md and prints
one line per case (median of ``repeat`` synchronized runs after one warm-up):

* the block operations at n = 20000 and n = 1,000,000 (m = 1000, d = 8, k = 21);
* ``value_and_grad`` of every exact objective on P1 (float64 and float32);
* one cold ``stoch-prop`` step on P2 and P3 (float64, float32, and float64
  with ``kernel_cache=True``), with the GPU memory pool of the step;
* a Falkon fit of ``NystromKRR`` at n = 1,000,000, m = 1000.

Each case is guarded: a failure prints its traceback and the script goes on.
Usage (on the GPU machine, from the repository root)::

    PYTHONPATH=. python asv_bench/gpu_report.py [quick]
"""
import sys
import time
import traceback

import numpy as np


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


def _case(label, fn):
    try:
        print(f"{label}: {fn()}", flush=True)
    except Exception:
        print(f"{label}: FAILED", flush=True)
        traceback.print_exc()
        sys.stdout.flush()


def main(quick=False):
    import cupy as cp

    import nyhopt as nh
    from nyhopt import ops
    from nyhopt.datasets import synthetic

    dev = cp.cuda.runtime.getDeviceProperties(0)
    print(f"device: {dev['name'].decode()} cupy {cp.__version__} numpy {np.__version__}", flush=True)
    sync = cp.cuda.Device().synchronize
    pool = cp.get_default_memory_pool()
    repeat = 3 if quick else 7

    def fmt(t):
        return f"median {t[0] * 1e3:.2f} ms (min {t[1] * 1e3:.2f} ms)"

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
        for dtype, cache in ((np.float64, False), (np.float32, False), (np.float64, True)):
            def run(n=n, m=m, dtype=dtype, cache=cache):
                ds = synthetic(n, d=8, n_test=10, seed=1234, dtype=dtype)
                X, y = cp.asarray(ds.X_train), cp.asarray(ds.y_train)
                theta = nh.Params.from_natural(penalty=1e-4, lengthscale=np.ones(8), centers=X[:m])
                obj = nh.make_objective("stoch-prop", X, y, kernel="gaussian", random_state=0, kernel_cache=cache)

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
                return (f"{fmt(t)}; {rec.iterations} CG iterations, residual {rec.residual:.2g}, "
                        f"value {float(value):.6g}; {peak_note}")

            label = f"{which} stoch-prop cold step n={n} m={m} t=20 {np.dtype(dtype).name}" + (" kernel_cache" if cache else "")
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


if __name__ == "__main__":
    main(quick=len(sys.argv) > 1 and sys.argv[1] == "quick")
