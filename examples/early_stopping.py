"""Early stopping on the quality-table problems: where each rule stops and what it costs in test error.

Protocol: the problems of ``quality_table.py`` (same split, standardization,
centers and lengthscale per seed), ``sgpr`` with its default mean, Adam lr
0.05, at most 300 steps, ``patience = 10``.  One run without early stopping
gives the objective's trajectory; the two stop rules of :func:`nyhopt.tune`
are replayed on it (the loop is deterministic, so a stopped run is a prefix
of the full one):

* ``classical``: ``rel_delta = 0``, stop after ``patience`` steps without a
  new lowest objective;
* ``relative``: the default ``rel_delta = 1e-3``, which also asks the trend
  to have stalled relative to the progress made (``docs/tuning.md``, "Early
  stopping").

The test error at a rule's stop is that of ``tune(epochs=stop)`` (the same
prefix and its best point); beside it the error after all 300 steps and
after the 100 steps of the quality table.  Writes ``early_stopping.csv``,
``early_stopping.md`` and the full runs' objective per step,
``early_stopping_trajectories.csv`` (so another rule can be replayed on
them without tuning again)::

    python examples/early_stopping.py            # 8 datasets, 3 seeds
    python examples/early_stopping.py --render   # the table from the CSV
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

import nyhopt as nh  # noqa: E402
from nyhopt.datasets import available_datasets, c_error, load_dataset, rmse  # noqa: E402
from nyhopt.optim._init import initial_centers, median_heuristic  # noqa: E402
from nyhopt.optim._stopping import DEFAULT_REL_DELTA, trend_stalled  # noqa: E402

COLUMNS = ["dataset", "seed", "metric", "epochs", "full_best", "full_error", "classical_stop",
           "classical_error", "relative_stop", "relative_error", "e100_error"]
TRAJECTORY_COLUMNS = ["dataset", "seed", "epoch", "objective"]
RULES = (("classical", 0.0), ("relative", DEFAULT_REL_DELTA))


def parse_args(argv=None):
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=common.csv_list(), default=None,
                        help="comma-separated (default: all; quick: mg)")
    parser.add_argument("--seeds", type=common.csv_list(int), default=None, help="default 0,1,2 (quick: 0)")
    parser.add_argument("--epochs", type=int, default=None, help="most Adam steps (default 300; quick 30)")
    parser.add_argument("--patience", type=int, default=10)
    parser.add_argument("--centers", type=int, default=None, help="m (default 100; quick 10)")
    parser.add_argument("--render", action="store_true", help="only write the table from the CSV")
    args = parser.parse_args(argv)
    args.datasets = args.datasets or (["mg"] if args.quick else available_datasets())
    args.seeds = args.seeds if args.seeds is not None else ([0] if args.quick else [0, 1, 2])
    args.epochs = args.epochs or (30 if args.quick else 300)
    args.centers = args.centers or (10 if args.quick else 100)
    if args.patience < 1:
        parser.error(f"--patience must be >= 1, got {args.patience}")
    return args


def stop_epoch(values, patience, rel_delta):
    """The epoch at which :func:`nyhopt.tune` stops on the objective ``values`` (the last one if none)."""
    best, stale = math.inf, 0
    for k, v in enumerate(values):
        stale = 0 if v < best else stale + 1
        best = min(best, v)
        if stale >= patience and trend_stalled(values[:k + 1], patience, rel_delta, 0.0):
            return k
    return len(values) - 1


def _error(ds, model):
    pred = np.asarray(model.predict(ds.X_test), dtype=np.float64).reshape(ds.y_test.shape)
    return rmse(ds.y_test, pred) if ds.task == "regression" else c_error(ds.y_test, pred)


def one_problem(name, seed, args):
    ds = load_dataset(name, data_dir=args.data_dir, seed=seed)
    X, y = ds.X_train, ds.y_train
    rng = np.random.default_rng(seed)  # as quality_table.problem draws them
    ell0 = median_heuristic(X, random_state=rng)
    Z0 = initial_centers(X, args.centers, rng)
    kw = dict(objective="sgpr", centers=Z0, lengthscale=ell0, lr=0.05, kernel="gaussian", ard=True,
              random_state=seed, record_terms=False, track_errors=False, progress=False, patience=None,
              standardize=False,  # the paper's protocol: X standardized once, by load_dataset
              task="regression" if ds.task == "regression" else "classification")
    full = nh.tune(X, y, epochs=args.epochs, **kw)
    values = list(full.history.objective)
    errors = {args.epochs: _error(ds, full.model)}

    def error_at(k):
        if k not in errors:
            errors[k] = _error(ds, nh.tune(X, y, epochs=k, **kw).model)
        return errors[k]

    row = {"dataset": name, "seed": seed, "metric": "rmse" if ds.task == "regression" else "c-error",
           "epochs": args.epochs, "full_best": int(full.best_epoch), "full_error": errors[args.epochs]}
    for label, rel in RULES:
        k = stop_epoch(values, args.patience, rel)
        row[f"{label}_stop"], row[f"{label}_error"] = k, error_at(k)
    row["e100_error"] = error_at(min(100, args.epochs))
    trajectory = [{"dataset": name, "seed": seed, "epoch": k, "objective": repr(float(v))}
                  for k, v in enumerate(values)]
    return row, trajectory


def render(rows, out: Path, args):
    lines = []
    for name in dict.fromkeys(r["dataset"] for r in rows):
        runs = [r for r in rows if r["dataset"] == name]
        line = {"dataset": name, "metric": runs[0]["metric"]}
        for label, _ in RULES:
            line[f"{label} stop"] = ", ".join(str(int(float(r[f"{label}_stop"]))) for r in runs)
        for col in ("full_error", "relative_error", "classical_error", "e100_error"):
            m, s = common.mean_std([float(r[col]) for r in runs])
            line[col] = f"{m:.4f} ± {s:.4f}"
        lines.append(line)
    epochs = int(float(rows[0]["epochs"]))
    headers = {"full_error": f"error, {epochs} steps", "relative_error": "error, relative rule",
               "classical_error": "error, classical rule", "e100_error": "error, 100 steps",
               "classical stop": "stop epoch, classical (per seed)", "relative stop": "stop epoch, relative (per seed)"}
    columns = ["dataset", "metric", "relative stop", "classical stop", "relative_error", "classical_error",
               "full_error", "e100_error"]
    text = ("Stop epochs (per seed; the last epoch: no stop) and test errors (mean ± std over seeds)\n\n"
            + common.markdown_table(lines, columns, headers=[headers.get(c, c) for c in columns]))
    notes = (f"sgpr (default mean), m = {args.centers}, Adam lr 0.05, at most {epochs} steps, patience "
             f"{args.patience}; relative: rel_delta = {DEFAULT_REL_DELTA:g} (the default), classical: "
             "rel_delta = 0; the same initial point per seed as quality_table.py.")
    common.write_markdown(text, out / "early_stopping.md", "early stopping: stop epochs and test error",
                          notes, script="early_stopping.py")


def main(argv=None):
    args = parse_args(argv)
    out = common.output_dir(args)
    raw = out / "early_stopping.csv"
    if args.render:
        rows = common.read_csv(raw)
    else:
        rows, trajectories = [], []
        for name in args.datasets:
            for seed in args.seeds:
                row, trajectory = one_problem(name, seed, args)
                rows.append(row)
                trajectories += trajectory
                common.log(args, f"{name:12s} seed {seed}: stops {row['classical_stop']} / "
                                 f"{row['relative_stop']}")
                common.write_csv(rows, COLUMNS, raw)
                common.write_csv(trajectories, TRAJECTORY_COLUMNS, out / "early_stopping_trajectories.csv")
    if rows:
        render(rows, out, args)
    return rows


if __name__ == "__main__":
    main()
