"""Accuracy against wall time: today's default run against ``tune(..., time_budget=T)``.

Protocol: each dataset's split of :func:`nyhopt.datasets.load_dataset` (X and
y standardized on the training part), or the synthetic problem of
``docs/benchmarks.md`` (``--synthetic N``, standardized the same way here),
or the kin40k-like robot arm of ``examples/_robot_arm.py`` (``--robot-arm N``:
N training rows, 4000 test rows), or a single-index sine (``--sine N``:
``y = sin(x @ w) + 0.1 * noise``, 6 standard normal features, ``w`` standard
normal, N training rows, 2000 test rows), where ``sgpr`` at 100
centers takes the signal for noise (``docs/tuning.md``, "A time budget").
Methods:

* ``default``: ``tune(X, y)`` as it is today (``prop``, 100 centers, at most
  200 epochs, ``patience=10``);
* ``budget-T``: ``tune(X, y, time_budget=T)`` for each ``T`` of ``--budgets``
  (centers grown from 100, ``docs/tuning.md``, "A time budget");
* ``exact-gp`` (``--exact-max N``: sets of at most N training rows): the
  exact GP, i.e. ``sgpr`` with every training row a center, the centers
  frozen (the Titsias bound is then the exact log marginal likelihood),
  its lengthscales, noise and amplitude tuned by Adam as above.

``--export DIR --export-centers 512,1024`` also writes each problem as
``DIR/<dataset>-m<M>_seed<k>.npz`` (M random training rows as the starting
inducing points, the median-heuristic lengthscale) for
``examples/gpytorch_sgpr_baseline.py``, GPyTorch's SGPR in its own
environment.

Each run reports the test RMSE (standardized units), the NLPD and the 95%
coverage of ``predict(X_test, return_std=True)``, its wall time (the call
only; prediction timed apart) and, for budgeted runs, the sizes it went
through.  Writes ``accuracy_at_scale.{csv,md,png}``::

    python examples/accuracy_at_scale.py --datasets protein,cpusmall --budgets 30,60
    python examples/accuracy_at_scale.py --quick
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402
from _robot_arm import robot_arm_split  # noqa: E402

import nyhopt as nh  # noqa: E402
from nyhopt import metrics  # noqa: E402
from nyhopt.datasets import load_dataset, synthetic  # noqa: E402
from nyhopt.optim._init import initial_centers, median_heuristic  # noqa: E402

COLUMNS = ["dataset", "n_train", "d", "seed", "method", "budget", "wall_s", "rmse", "nlpd", "coverage",
           "predict_s", "centers", "sizes", "epochs", "stop_reason"]


def parse_args(argv=None):
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=common.csv_list(), default=None,
                        help="comma-separated (default protein,cpusmall; quick: energy)")
    parser.add_argument("--budgets", type=common.csv_list(float), default=None,
                        help="seconds (default 60,300,600; quick: 5)")
    parser.add_argument("--seeds", type=common.csv_list(int), default=None, help="default 0")
    parser.add_argument("--synthetic", type=int, default=0, metavar="N",
                        help="also the synthetic problem with N training rows (0: not run)")
    parser.add_argument("--robot-arm", type=int, default=0, metavar="N",
                        help="also the kin40k-like robot arm with N training rows (0: not run)")
    parser.add_argument("--sine", type=int, default=0, metavar="N",
                        help="also the single-index sine with N training rows (0: not run)")
    parser.add_argument("--no-default", action="store_true", help="skip the default run")
    parser.add_argument("--export", type=Path, default=None, metavar="DIR",
                        help="also write the problems for examples/gpytorch_sgpr_baseline.py")
    parser.add_argument("--export-centers", type=common.csv_list(int), default=[512, 1024],
                        help="inducing points of the exported problems (default 512,1024)")
    parser.add_argument("--exact-max", type=int, default=0, metavar="N",
                        help="also the exact GP on sets of at most N training rows (0: not run)")
    parser.add_argument("--replot", action="store_true", help="only redraw the figure from the CSV")
    args = parser.parse_args(argv)
    args.datasets = args.datasets if args.datasets is not None else (
        ["energy"] if args.quick else ["protein", "cpusmall"])
    args.budgets = args.budgets or ([5.0] if args.quick else [60.0, 300.0, 600.0])
    args.seeds = args.seeds if args.seeds is not None else [0]
    return args


def _problem(name, seed, args):
    if name == "synthetic":
        ds = synthetic(args.synthetic, n_test=10000, seed=1234 + seed)
        mu, sd = ds.X_train.mean(axis=0), ds.X_train.std(axis=0)
        ym, ys = ds.y_train.mean(), ds.y_train.std()
        return ((ds.X_train - mu) / sd, (ds.y_train - ym) / ys, (ds.X_test - mu) / sd, (ds.y_test - ym) / ys)
    if name == "robot-arm":
        return robot_arm_split(args.robot_arm, 4000, seed=seed)
    if name == "sine":
        return _sine_split(args.sine, 2000, seed)
    ds = load_dataset(name, data_dir=args.data_dir, seed=seed)
    return ds.X_train, ds.y_train, ds.X_test, ds.y_test


def _sine_split(n_train, n_test, seed, d=6, noise=0.1):
    """The single-index sine of ``--sine``, standardized on the training part."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_train + n_test, d))
    y = np.sin(X @ rng.normal(size=d)) + noise * rng.normal(size=n_train + n_test)
    Xtr, ytr, Xte, yte = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    mu, sd, ym, ys = Xtr.mean(axis=0), Xtr.std(axis=0), ytr.mean(), ytr.std()
    return (Xtr - mu) / sd, (ytr - ym) / ys, (Xte - mu) / sd, (yte - ym) / ys


def export(folder, name, seed, problem, sizes):
    """The problem as ``.npz`` files for the GPyTorch baseline, one per number of inducing points."""
    X, y, Xt, yt = problem
    folder.mkdir(parents=True, exist_ok=True)
    for m in sizes:
        rng = np.random.default_rng(seed)
        ell0 = median_heuristic(X, random_state=rng)
        Z0 = initial_centers(X, min(m, X.shape[0]), rng)
        common.write_gpytorch_problem(folder / f"{name}-m{m}_seed{seed}.npz", X, y, Xt, yt, Z0, ell0,
                                      "regression")


def run_one(name, seed, method, budget, problem):
    """One run: the row of the table."""
    X, y, Xt, yt = problem
    t0 = time.perf_counter()
    if method == "exact-gp":
        res = nh.tune(X, y, objective="sgpr", centers=X, freeze=("centers",), task="regression", progress=False,
                      random_state=seed, standardize=False)
    elif budget is None:  # X standardized already (load_dataset, synthetic problem): as in the page's runs
        res = nh.tune(X, y, task="regression", progress=False, random_state=seed, standardize=False)
    else:
        res = nh.tune(X, y, task="regression", progress=False, random_state=seed, time_budget=budget,
                      standardize=False)
    wall = time.perf_counter() - t0
    t1 = time.perf_counter()
    mean, std = res.model.predict(Xt, return_std=True)
    pred_s = time.perf_counter() - t1
    sizes = "/".join(f"{s.centers}{'' if s.objective == 'prop' else ':' + s.objective}" for s in res.stages)
    return {"dataset": name, "n_train": X.shape[0], "d": X.shape[1], "seed": seed, "method": method,
            "budget": "" if budget is None else budget, "wall_s": wall, "rmse": metrics.rmse(yt, mean),
            "nlpd": metrics.nlpd(yt, mean, std), "coverage": metrics.coverage(yt, mean, std, level=0.95),
            "predict_s": pred_s, "centers": int(res.params.n_centers), "sizes": sizes or str(res.params.n_centers),
            "epochs": max(len(res.history) - 1, 0), "stop_reason": res.stop_reason}


def plot(rows, path):
    plt = common.pyplot()
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    names = list(dict.fromkeys(r["dataset"] for r in rows))
    cols = min(3, len(names))
    nrows = -(-len(names) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.6 * cols, 3.6 * nrows), squeeze=False)
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    for ax, name in zip(axes.flat, names):
        sub = [r for r in rows if r["dataset"] == name]
        first_seed = min(int(r["seed"]) for r in sub)
        sub = [r for r in sub if int(r["seed"]) == first_seed]  # a line per method joins budgets, not seeds
        styles = (("default", "s", "C0"), ("budget", "o", "C1"), ("exact-gp", "*", "C2"),
                  ("gpytorch-m512", "^", "C3"), ("gpytorch-m1024", "v", "C4"))
        for method, marker, color in styles:
            pts = sorted((float(r["wall_s"]), float(r["rmse"])) for r in sub
                         if r["method"] == method or (method == "budget" and r["method"].startswith("budget")))
            if pts:
                ax.plot(*zip(*pts), marker=marker, color=color, label=method,
                        linestyle="-" if method == "budget" else "")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(f"{name} (n = {sub[0]['n_train']}, seed {first_seed})")
        ax.set_xlabel("wall time of the call (s)")
        ax.set_ylabel("test RMSE (standardized)")
        ax.legend()
    fig.tight_layout()
    common.save_figure(fig, path)


def main(argv=None):
    args = parse_args(argv)
    out = common.output_dir(args)
    if args.replot:
        rows = common.read_csv(out / "accuracy_at_scale.csv")
        plot(rows, out / "accuracy_at_scale.png")
        return rows
    rows = []
    names = list(args.datasets) + (["synthetic"] if args.synthetic else []) + (
        ["robot-arm"] if args.robot_arm else []) + (["sine"] if args.sine else [])
    for name in names:
        for seed in args.seeds:
            problem = _problem(name, seed, args)
            if args.export is not None:
                export(args.export, name, seed, problem, args.export_centers)
            runs = ([] if args.no_default else [("default", None)]) + [(f"budget-{b:g}", b) for b in args.budgets]
            if problem[0].shape[0] <= args.exact_max:
                runs.append(("exact-gp", None))
            for method, budget in runs:
                row = run_one(name, seed, method, budget, problem)
                rows.append(row)
                common.log(args, f"{name} seed {seed} {method}: rmse {row['rmse']:.4f} nlpd {row['nlpd']:.3f} "
                                 f"coverage {row['coverage']:.3f} in {row['wall_s']:.1f} s (sizes {row['sizes']})")
                common.write_csv(rows, COLUMNS, out / "accuracy_at_scale.csv")
    text = common.markdown_table(rows, COLUMNS, digits=4)
    common.write_markdown(text, out / "accuracy_at_scale.md", "accuracy against wall time",
                          script="examples/accuracy_at_scale.py")
    try:
        plot(rows, out / "accuracy_at_scale.png")
    except ImportError:  # matplotlib is optional
        pass
    return rows


if __name__ == "__main__":
    main()
