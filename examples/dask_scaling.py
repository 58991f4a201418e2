"""Time Falkon's pass over the data and a Falkon solve: one process vs a Dask LocalCluster.

For each configuration -- the single-process path and
``LocalCluster(n_workers=w, threads_per_worker=1, processes=True)`` for each
``w`` of ``--workers`` -- the script times

* one pass ``K^T K V`` with ``K^T y`` (the product of one CG iteration),
* one Falkon solve of exactly ``--iters`` CG iterations (tol=0, streaming:
  ``gram=False``, so that every iteration is a pass), whose
  per-iteration time is reported too, with the Dask overhead per CG iteration
  (the cluster's time per iteration minus the single process's);
* one tuning step of ``stoch-prop`` (value and gradient, ``--probes`` probes,
  ``--iters`` CG iterations, no warm start), with the defaults: the Gram route
  where the placement's cost model says it pays,

and writes ``dask_scaling.md`` and ``dask_scaling.csv`` under ``--out``.
The data of the cluster runs are generated on the workers (``dask.array.random``),
so the driver never holds an ``n``-sized array for them.

Usage::

    python examples/dask_scaling.py                       # n=2e6, m=1000, d=8 (minutes)
    python examples/dask_scaling.py --n 20000 --m 100     # a quick check
"""
from __future__ import annotations

import argparse
import csv
import os
import pathlib
import time
import warnings

import numpy as np


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=2_000_000)
    p.add_argument("--m", type=int, default=1000)
    p.add_argument("--d", type=int, default=8)
    p.add_argument("--iters", type=int, default=10, help="CG iterations per solve")
    p.add_argument("--repeats", type=int, default=3, help="passes timed (the median is reported)")
    p.add_argument("--probes", type=int, default=4, help="probe vectors of the timed stoch-prop step")
    p.add_argument("--workers", default="1,2", help="comma-separated numbers of worker processes")
    p.add_argument("--chunk", type=int, default=0, help="rows per block (default n / (2 * max workers))")
    p.add_argument("--threads", type=int, default=1, help="Numba threads of the single process and of each worker")
    p.add_argument("--out", default="examples/output")
    return p.parse_args(argv)


def _median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def _solve_time(solve, iters):
    import nyhopt as nh

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nh.ConvergenceWarning)
        t = time.perf_counter()
        res = solve()
        total = time.perf_counter() - t
    assert res.cg.iterations == iters, res.cg.iterations
    return total


def _step_time(a, X, y, Z, **client):
    import nyhopt as nh

    opts = dict(n_probes=a.probes, tol=0.0, maxiter=a.iters, warm_start=False, random_state=0)
    obj = nh.make_objective("stoch-prop", X, y, kernel="gaussian", **opts, **client)
    params = nh.Params.from_natural(1e-6, np.ones(1), Z)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nh.ConvergenceWarning)
        t = time.perf_counter()
        obj.value_and_grad(params)
        return time.perf_counter() - t


def single_process(a, kernel, Z, V):
    import numba

    from nyhopt import ops
    from nyhopt.solvers import falkon_solve

    numba.set_num_threads(min(a.threads, numba.config.NUMBA_NUM_THREADS))
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(a.n, a.d))
    y = np.sin(3 * X[:, 0])
    ops.normal_matvec(kernel, X[:1000], Z, V, y[:1000])  # compile
    per_pass = _median_time(lambda: ops.normal_matvec(kernel, X, Z, V, y), a.repeats)
    solve = _solve_time(lambda: falkon_solve(kernel, X, Z, y, 1e-6, tol=0.0, maxiter=a.iters, gram=False), a.iters)
    return per_pass, solve, _step_time(a, X, y, Z)


def cluster(a, workers, kernel, Z, V):
    import dask.array as da
    import distributed

    from nyhopt.distributed import ShardedData
    from nyhopt.distributed.falkon import falkon_solve_sharded
    from nyhopt.distributed.sharded import TARGETS

    chunk = a.chunk or -(-a.n // (2 * max(int(w) for w in a.workers.split(","))))
    env = {"NUMBA_NUM_THREADS": str(a.threads), "OMP_NUM_THREADS": "1"}
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", env=env) as lc, distributed.Client(lc) as client:
        X = da.random.RandomState(0).uniform(-1, 1, size=(a.n, a.d), chunks=(chunk, a.d))
        y = da.sin(3 * X[:, 0])
        data = ShardedData(X, y, client=client)
        op = data.bind(kernel, Z, gram=False)  # the pass and the solve stream (the step takes "auto")
        op.normal_matvec(V, TARGETS)  # compile on the workers
        per_pass = _median_time(lambda: op.normal_matvec(V, TARGETS), a.repeats)
        solve = _solve_time(lambda: falkon_solve_sharded(kernel, data, Z, 1e-6, tol=0.0, maxiter=a.iters,
                                                         gram=False), a.iters)
        data.release()
        return per_pass, solve, _step_time(a, X, y, Z, client=client), -(-a.n // chunk)


def main(argv=None):
    import nyhopt as nh

    a = _args(argv)
    kernel = nh.GaussianKernel(1.0)
    rng = np.random.default_rng(1)
    Z = rng.uniform(-1, 1, size=(a.m, a.d))
    V = rng.normal(size=(a.m, 1))
    rows = []
    p, s, st = single_process(a, kernel, Z, V)
    rows.append(("single process", 1, p, s, st))
    for w in (int(x) for x in a.workers.split(",")):
        p, s, st, blocks = cluster(a, w, kernel, Z, V)
        rows.append((f"LocalCluster, {w} worker(s), {blocks} blocks", w, p, s, st))
    base = rows[0][3] / a.iters
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    header = ["configuration", "workers", "pass_s", "solve_s", "per_cg_iteration_s", "cg_overhead_s", "step_s"]
    with open(out / "dask_scaling.csv", "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(header)
        for name, w, p, s, st in rows:
            wr.writerow([name, w, f"{p:.4f}", f"{s:.4f}", f"{s / a.iters:.4f}", f"{s / a.iters - base:.4f}",
                         f"{st:.4f}"])
    lines = [f"<!-- n={a.n} m={a.m} d={a.d} iters={a.iters} probes={a.probes} threads={a.threads} "
             f"cpus={os.cpu_count()} -->",
             "| configuration | pass (s) | solve (s) | per CG iteration (s) | overhead per CG iteration (s) "
             "| stoch-prop step (s) |", "|---|---|---|---|---|---|"]
    lines += [f"| {name} | {p:.3f} | {s:.3f} | {s / a.iters:.3f} | {s / a.iters - base:+.3f} | {st:.3f} |"
              for name, _, p, s, st in rows]
    lines.append(f"\n_Generated by `examples/dask_scaling.py` (n={a.n}, m={a.m}, d={a.d}, {a.iters} CG iterations)._")
    (out / "dask_scaling.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return rows


if __name__ == "__main__":
    main()
