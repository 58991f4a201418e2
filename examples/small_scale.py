"""Small-scale comparison of the objectives for hyperparameter tuning (the paper's Figure 4).

Protocol (the paper's appendix, "Small scale experiments"): on every dataset,
tune ``m = 100`` Nystrom centers (initialized to a random subset of the
training rows), one Gaussian lengthscale per feature (median heuristic, the
same in every dimension) and the penalty (initialized at 1/n) with Adam,
learning rate 0.05, for 200 epochs with early stopping, by each of the exact
objectives; then report the test error of the tuned model, mean and standard
deviation over 5 seeds (each seed: another random train/test split, other
initial centers, other hold-out split).

Writes ``small_scale.{md,csv,png}`` (mean/std table, figure) and
``small_scale_runs.csv`` (one row per run; with ``--resume`` runs already in
that file are not repeated).

Run ``python examples/small_scale.py`` (the full study; see
docs/experiments.md for its run time), or with ``--quick``.
"""
from __future__ import annotations

import math
import sys
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

import nyhopt as nh  # noqa: E402
from nyhopt.datasets import available_datasets, load_dataset  # noqa: E402

OBJECTIVES = ["holdout", "loocv", "gcv", "creg", "sgpr", "prop"]
LABELS = {"holdout": "Hold-out", "loocv": "LOOCV", "gcv": "GCV", "creg": "C-Reg",
          "sgpr": "SGPR", "prop": "L_Prop"}
RUN_COLUMNS = ["dataset", "objective", "seed", "test_error", "metric", "n_train", "centers",
               "epochs_run", "best_epoch", "stop_reason", "penalty", "mean_lengthscale", "seconds", "status"]


def parse_args(argv=None):
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=common.csv_list(), default=None,
                        help="comma-separated (default: all; quick: mg,energy)")
    parser.add_argument("--objectives", type=common.csv_list(), default=OBJECTIVES)
    parser.add_argument("--seeds", type=common.csv_list(int), default=None,
                        help="comma-separated seeds (default 0,1,2,3,4; quick: 0)")
    parser.add_argument("--centers", type=int, default=None, help="m (default 100; quick 10)")
    parser.add_argument("--epochs", type=int, default=None, help="default 200; quick 5")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--patience", type=int, default=10,
                        help="early stopping: stop after this many epochs without a lower "
                             "objective (0: never)")
    parser.add_argument("--max-train", type=int, default=None,
                        help="use at most this many training rows (a seeded random subset); "
                             "default: all (quick: 300)")
    parser.add_argument("--resume", action="store_true",
                        help="skip runs already in small_scale_runs.csv")
    args = parser.parse_args(argv)
    quick = args.quick
    args.datasets = args.datasets or (["mg", "energy"] if quick else available_datasets())
    args.seeds = args.seeds if args.seeds is not None else ([0] if quick else [0, 1, 2, 3, 4])
    args.centers = args.centers or (10 if quick else 100)
    args.epochs = args.epochs or (5 if quick else 200)
    if args.max_train is None and quick:
        args.max_train = 300
    args.patience = args.patience or None
    return args


def subsample(X, y, max_rows, seed):
    """A seeded random subset of at most ``max_rows`` rows (all rows if None)."""
    if not max_rows or X.shape[0] <= max_rows:
        return X, y
    idx = np.sort(np.random.default_rng(seed + 10_000).choice(X.shape[0], max_rows, replace=False))
    return X[idx], y[idx]


def one_run(ds, X, y, objective, seed, args):
    with common.Timer() as timer:
        result = nh.tune(X, y, objective=objective, centers=args.centers, epochs=args.epochs,
                         lr=args.lr, kernel="gaussian", ard=True, random_state=seed,
                         task="regression" if ds.task == "regression" else "classification",
                         patience=args.patience, record_terms=False, progress=False,
                         standardize=False)  # the paper's protocol: X standardized once, by load_dataset
    pred = result.model.predict(ds.X_test)
    return {
        "test_error": ds.error(pred),
        "epochs_run": int(result.history.epoch[-1]),
        "best_epoch": int(result.best_epoch),
        "stop_reason": result.stop_reason,
        "penalty": result.params.penalty,
        "mean_lengthscale": float(np.exp(np.mean(np.log(result.params.lengthscale)))),
        "seconds": timer.seconds,
        "status": "ok",
    }


def run(args, runs_path):
    done = {}
    if args.resume and runs_path.exists():
        for row in common.read_csv(runs_path):
            done[(row["dataset"], row["objective"], int(row["seed"]))] = row
    rows = list(done.values())
    if not (args.resume and runs_path.exists()):
        common.write_csv([], RUN_COLUMNS, runs_path)
    for name in args.datasets:
        for seed in args.seeds:
            todo = [o for o in args.objectives if (name, o, seed) not in done]
            if not todo:
                continue
            ds = load_dataset(name, data_dir=args.data_dir, seed=seed)
            X, y = subsample(ds.X_train, ds.y_train, args.max_train, seed)
            for objective in todo:
                base = {"dataset": name, "objective": objective, "seed": seed,
                        "metric": ds.metric, "n_train": X.shape[0], "centers": args.centers}
                try:
                    base.update(one_run(ds, X, y, objective, seed, args))
                except Exception as exc:  # keep the study going; the table shows the failure
                    traceback.print_exc()
                    base.update({"test_error": float("nan"), "status": f"failed: {exc!r}"[:200]})
                rows.append(base)
                common.append_csv(base, RUN_COLUMNS, runs_path)
                common.log(args, f"{name:12s} seed {seed} {objective:8s} "
                                 f"error {float(base['test_error']):.4f} "
                                 f"({float(base.get('seconds') or 0):.1f} s)")
    return rows


def summarize(rows, datasets, objectives):
    """mean/std of the test error per (dataset, objective), in long and wide form."""
    long, wide = [], []
    for name in datasets:
        metric = ""
        line = {"dataset": name}
        for objective in objectives:
            errs = [float(r["test_error"]) for r in rows
                    if r["dataset"] == name and r["objective"] == objective]
            metric = next((r["metric"] for r in rows if r["dataset"] == name), metric)
            mean, std = common.mean_std(errs)
            n_ok = sum(1 for e in errs if not math.isnan(e))
            long.append({"dataset": name, "objective": objective, "metric": metric,
                         "mean": mean, "std": std, "runs": n_ok})
            line[objective] = "-" if math.isnan(mean) else f"{mean:.4f} ± {std:.4f}"
        line["metric"] = metric
        line["seeds"] = min((x["runs"] for x in long if x["dataset"] == name), default=0)
        if any(line[o] != "-" for o in objectives):
            best = min((o for o in objectives if line[o] != "-"),
                       key=lambda o: next(x["mean"] for x in long
                                          if x["dataset"] == name and x["objective"] == o))
            line[best] = f"**{line[best]}**"
        wide.append(line)
    return long, wide


def plot(path, long, datasets, objectives):
    plt = common.pyplot()
    ncols = min(4, len(datasets))
    nrows = math.ceil(len(datasets) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 2.8 * nrows), squeeze=False)
    colors = plt.get_cmap("tab10")(np.arange(len(objectives)))
    for ax, name in zip(axes.flat, datasets):
        stats = [next((x for x in long if x["dataset"] == name and x["objective"] == o), None)
                 for o in objectives]
        means = [s["mean"] if s else np.nan for s in stats]
        stds = [s["std"] if s else np.nan for s in stats]
        ax.bar(np.arange(len(objectives)), means, yerr=stds, color=colors, capsize=3)
        ax.set_xticks(np.arange(len(objectives)))
        ax.set_xticklabels([LABELS.get(o, o) for o in objectives], rotation=45, ha="right",
                           fontsize=8)
        finite = [m for m in means if np.isfinite(m)]
        if finite:
            lo = min(m - (s if np.isfinite(s) else 0) for m, s in zip(means, stds) if np.isfinite(m))
            hi = max(m + (s if np.isfinite(s) else 0) for m, s in zip(means, stds) if np.isfinite(m))
            pad = 0.15 * (hi - lo) if hi > lo else 0.1 * abs(hi) + 1e-3
            ax.set_ylim(max(0.0, lo - pad), hi + pad)
        metric = stats[0]["metric"] if stats and stats[0] else ""
        ax.set_title(f"{name} ({metric})", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
    for ax in list(axes.flat)[len(datasets):]:
        ax.axis("off")
    fig.suptitle("Test error after tuning with each objective (mean ± std over seeds)", fontsize=10)
    fig.tight_layout()
    common.save_figure(fig, path)


def main(argv=None):
    args = parse_args(argv)
    out = common.output_dir(args)
    common.log(args, f"small-scale study: datasets {args.datasets}, seeds {args.seeds}, "
                     f"m={args.centers}, epochs={args.epochs}")
    with common.Timer() as timer:
        rows = run(args, out / "small_scale_runs.csv")
    order = available_datasets()
    present = {r["dataset"] for r in rows}
    datasets = sorted(present, key=lambda d: (order.index(d) if d in order else len(order), d))
    long, wide = summarize(rows, datasets, args.objectives)
    common.write_csv(long, ["dataset", "objective", "metric", "mean", "std", "runs"],
                     out / "small_scale.csv")
    cols = ["dataset", "metric", "seeds"] + list(args.objectives)
    md = common.markdown_table(wide, cols, headers=["dataset", "metric", "seeds"]
                               + [LABELS.get(o, o) for o in args.objectives])
    seconds = sum(float(r.get("seconds") or 0) for r in rows)
    seeds = sorted({int(r["seed"]) for r in rows})
    sub = f" at most {args.max_train} training rows (a seeded random subset);" if args.max_train else ""
    notes = (f"Test error (mean ± std over seeds {seeds}, 'runs' in small_scale.csv; bold: "
             f"lowest mean) after tuning "
             f"m = {args.centers} centers, one Gaussian lengthscale per feature and the penalty "
             f"with Adam (lr {args.lr}, at most {args.epochs} epochs, the early stopping of "
             f"`nyhopt.tune`);{sub} the paper's splits and preprocessing "
             f"(`nyhopt.datasets`). Total tuning time {seconds / 60:.1f} min "
             f"(this invocation: {timer.seconds / 60:.1f} min).")
    common.write_markdown(md, out / "small_scale.md", "Small-scale comparison of the objectives",
                          notes, script=Path(__file__).name)
    plot(out / "small_scale.png", long, datasets, args.objectives)
    common.log(args, md)
    return long


if __name__ == "__main__":
    main()
