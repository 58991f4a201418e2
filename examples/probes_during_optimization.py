"""Effect of the number of probe vectors of stoch-prop during optimization (the paper's Figure 2).

Protocol: on four datasets, tune ``m = 200`` Nystrom centers, the penalty and
one Gaussian lengthscale (shared by all features) with Adam (lr 0.05) on the
exact L_Prop ("exact") and on its stochastic estimate ``stoch-prop`` with
``t = 10, 20, 100`` probe vectors, all from the same initialization (the
paper's: penalty 1/n, median-heuristic lengthscale, a random subset of the
training rows as centers). Every run is scored along the way by the **exact**
L_Prop at its current hyperparameters, and every few epochs by the test error
of the model trained with them; so the curves say whether the stochastic
estimate leads the optimization where the exact objective would.

The loop is written here with the library's pieces (``nyhopt.make_objective``,
``nyhopt.optim.adam``, ``nyhopt.NystromKRR``) instead of ``nyhopt.tune``, which
does not expose the centers at every epoch. There is no early stopping: every
run does the same number of epochs.

Writes ``probes_during_optimization.{md,csv,png}`` (final values per run;
figure: exact L_Prop and test error against the epoch) and
``probes_during_optimization_curves.csv`` (every epoch).

Run ``python examples/probes_during_optimization.py``, or with ``--quick``.
"""
from __future__ import annotations

import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

import nyhopt as nh  # noqa: E402
from nyhopt.datasets import load_dataset  # noqa: E402
from nyhopt.optim import adam  # noqa: E402
from nyhopt.optim._init import initial_centers, median_heuristic  # noqa: E402

DATASETS = ["spacega", "abalone", "cpusmall", "higgs_small"]
CURVE_COLUMNS = ["dataset", "method", "epoch", "objective", "exact_prop", "test_error",
                 "penalty", "lengthscale", "seconds", "cg_iterations"]


def parse_args(argv=None):
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=common.csv_list(), default=None,
                        help=f"comma-separated (default {','.join(DATASETS)}; quick: mg)")
    parser.add_argument("--probes", type=common.csv_list(int), default=None,
                        help="numbers of probe vectors t (default 10,20,100; quick 2,5)")
    parser.add_argument("--trace-estimator", default="rows", choices=["rows", "hutchinson"],
                        help="stoch-prop's estimator of Tr(K - K~): sampled rows (the library's "
                             "default) or the paper's Hutchinson estimate reusing the probes")
    parser.add_argument("--centers", type=int, default=None, help="m (default 200; quick 10)")
    parser.add_argument("--epochs", type=int, default=None, help="default 100; quick 3")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--eval-every", type=int, default=None,
                        help="test error every this many epochs (default 5; quick 1)")
    parser.add_argument("--max-train", type=int, default=None,
                        help="at most this many training rows (quick: 300)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-exact", action="store_true",
                        help="skip the exact objective (and the exact scoring) for large data")
    args = parser.parse_args(argv)
    quick = args.quick
    args.datasets = args.datasets or (["mg"] if quick else DATASETS)
    args.probes = args.probes or ([2, 5] if quick else [10, 20, 100])
    args.centers = args.centers or (10 if quick else 200)
    args.epochs = args.epochs if args.epochs is not None else (3 if quick else 100)
    args.eval_every = args.eval_every or (1 if quick else 5)
    if args.max_train is None and quick:
        args.max_train = 300
    return args


def test_error(ds, X, y, params):
    """Test error of the N-KRR model with these hyperparameters (direct solver)."""
    kernel = nh.GaussianKernel(lengthscale=params.lengthscale.copy())
    model = nh.NystromKRR(kernel=kernel, penalty=params.penalty, centers=params.centers.copy(),
                          solver="direct")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
    return ds.error(model.predict(ds.X_test))


def fresh_estimate(objective, params, seed):
    """stoch-prop at ``params`` with the same options but new random draws."""
    fresh = nh.make_objective("stoch-prop", objective.X, objective.Y, kernel="gaussian",
                              n_probes=objective.n_probes, trace_estimator=objective.trace_estimator,
                              random_state=seed)
    try:
        return fresh.value(params)
    except (np.linalg.LinAlgError, ValueError, FloatingPointError):
        return math.nan


def optimize(name, method, objective, exact, ds, X, y, params0, args, log_prefix):
    """Adam on ``objective``; every epoch scored by the exact L_Prop."""
    params, state = params0, adam.init(params0)
    rows, spent = [], 0.0
    for epoch in range(args.epochs + 1):
        t0 = time.perf_counter()
        try:
            if epoch < args.epochs:
                value, grad = objective.value_and_grad(params)
            else:
                value, grad = objective.value(params), None
        except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
            common.log(args, f"{log_prefix} stopped at epoch {epoch}: {exc}")
            break
        spent += time.perf_counter() - t0
        solve = getattr(objective, "last_solve", None)
        cg = getattr(getattr(solve, "cg", solve), "iterations", "") if solve is not None else ""
        row = {"dataset": name, "method": method, "epoch": epoch, "objective": value,
               "exact_prop": value if objective is exact else (exact.value(params) if exact else math.nan),
               "test_error": math.nan, "penalty": params.penalty,
               "lengthscale": float(params.lengthscale[0]), "seconds": spent, "cg_iterations": cg}
        if epoch % args.eval_every == 0 or epoch == args.epochs:
            row["test_error"] = test_error(ds, X, y, params)
        rows.append(row)
        if not math.isfinite(value):
            common.log(args, f"{log_prefix} diverged at epoch {epoch}")
            break
        if grad is None:
            break
        t0 = time.perf_counter()
        params, state = adam.update(grad, state, params, lr=args.lr)
        spent += time.perf_counter() - t0
    if rows and objective is not exact:
        # the estimate at the final point with fresh probes and rows: tells bias from
        # adaptation of the optimization to the fixed draws
        rows[-1]["fresh_estimate"] = fresh_estimate(objective, params, args.seed + 7919)
    last = rows[-1] if rows else {}
    common.log(args, f"{log_prefix} epoch {last.get('epoch')}: objective {last.get('objective', math.nan):.5g}, "
                     f"exact {last.get('exact_prop', math.nan):.5g}, test {last.get('test_error', math.nan):.4f}, "
                     f"{spent:.1f} s")
    return rows


def run_dataset(name, args):
    ds = load_dataset(name, data_dir=args.data_dir, seed=args.seed)
    X, y = ds.X_train, ds.y_train
    if args.max_train and X.shape[0] > args.max_train:
        X, y = X[: args.max_train], y[: args.max_train]
    rng = np.random.default_rng(args.seed)
    ell0 = median_heuristic(X, random_state=rng)
    Z0 = initial_centers(X, args.centers, rng)
    params0 = nh.Params.from_natural(penalty=1.0 / X.shape[0], lengthscale=ell0, centers=Z0)
    exact = None if args.no_exact else nh.make_objective("prop", X, y, kernel="gaussian")
    runs = [] if exact is None else [("exact", exact)]
    for t in args.probes:
        runs.append((f"t={t}", nh.make_objective("stoch-prop", X, y, kernel="gaussian", n_probes=t,
                                                 trace_estimator=args.trace_estimator,
                                                 random_state=args.seed)))
    rows = []
    for method, objective in runs:
        rows += optimize(name, method, objective, exact, ds, X, y, params0, args,
                         f"{name:12s} {method:6s}")
    return ds, rows


def summarize(rows, datasets):
    table = []
    for name in datasets:
        methods = []
        for r in rows:
            if r["dataset"] == name and r["method"] not in methods:
                methods.append(r["method"])
        for method in methods:
            rs = [r for r in rows if r["dataset"] == name and r["method"] == method]
            last = rs[-1]
            errs = [r for r in rs if not math.isnan(r["test_error"])]
            table.append({"dataset": name, "method": method, "epochs": last["epoch"],
                          "final_objective": last["objective"], "final_exact_prop": last["exact_prop"],
                          "final_test_error": errs[-1]["test_error"] if errs else math.nan,
                          "fresh_estimate": last.get("fresh_estimate", math.nan),
                          "final_penalty": last["penalty"], "final_lengthscale": last["lengthscale"],
                          "seconds_per_epoch": last["seconds"] / max(1, last["epoch"] + 1)})
    return table


def plot(path, rows, datasets, metrics):
    plt = common.pyplot()
    fig, axes = plt.subplots(2, len(datasets), figsize=(3.6 * len(datasets), 5.6), squeeze=False)
    for col, name in enumerate(datasets):
        methods = []
        for r in rows:
            if r["dataset"] == name and r["method"] not in methods:
                methods.append(r["method"])
        for k, method in enumerate(methods):
            rs = [r for r in rows if r["dataset"] == name and r["method"] == method]
            style = dict(color="black", lw=2.0) if method == "exact" else dict(color=f"C{k}", lw=1.2)
            ep = [r["epoch"] for r in rs]
            axes[0, col].plot(ep, [r["exact_prop"] for r in rs], label=method, **style)
            if method != "exact":
                axes[0, col].plot(ep, [r["objective"] for r in rs], ls=":", **style)
            pts = [(r["epoch"], r["test_error"]) for r in rs if not math.isnan(r["test_error"])]
            if pts:
                axes[1, col].plot(*zip(*pts), marker=".", label=method, **style)
        axes[0, col].set_title(name, fontsize=10)
        axes[0, col].set_ylabel("L_Prop (solid: exact; dotted: estimate)", fontsize=7)
        axes[1, col].set_ylabel(f"test {metrics.get(name, '')}", fontsize=8)
        axes[1, col].set_xlabel("epoch", fontsize=8)
        for ax in axes[:, col]:
            ax.tick_params(labelsize=7)
        axes[0, col].legend(fontsize=7)
    fig.suptitle("stoch-prop with t probes against the exact L_Prop during optimization", fontsize=10)
    fig.tight_layout()
    common.save_figure(fig, path)


def main(argv=None):
    args = parse_args(argv)
    out = common.output_dir(args)
    common.log(args, f"probes during optimization: {args.datasets}, t = {args.probes}, "
                     f"m = {args.centers}, {args.epochs} epochs")
    rows, metrics, sizes = [], {}, {}
    for name in args.datasets:
        ds, r = run_dataset(name, args)
        rows += r
        metrics[name] = ds.metric
        sizes[name] = min(ds.X_train.shape[0], args.max_train or ds.X_train.shape[0])
    common.write_csv(rows, CURVE_COLUMNS, out / "probes_during_optimization_curves.csv")
    table = summarize(rows, args.datasets)
    cols = ["dataset", "method", "epochs", "final_objective", "fresh_estimate", "final_exact_prop",
            "final_test_error",
            "final_penalty", "final_lengthscale", "seconds_per_epoch"]
    common.write_csv(table, cols, out / "probes_during_optimization.csv")
    md = common.markdown_table(table, cols, digits=4, headers=["dataset", "objective", "epochs", "own value",
                                                     "fresh draws", "exact L_Prop", "test error", "penalty",
                                                     "lengthscale", "s / epoch"])
    notes = (f"m = {args.centers} centers, one lengthscale, penalty; Adam lr {args.lr}, "
             f"{args.epochs} epochs, no early stopping; stoch-prop trace estimator "
             f"'{args.trace_estimator}'; training rows: "
             + ", ".join(f"{k} {v}" for k, v in sizes.items())
             + ". 'own value' is the objective the run minimized (the estimate for t = ...), "
               "'fresh draws' the same estimator with new probes (and rows) at the final point, "
               "'exact L_Prop' the exact objective at the same hyperparameters; the test error "
               "is the dataset's metric (NRMSE or c-error). s / epoch: time of the objective, "
               "gradient and Adam step only (not the scoring).")
    common.write_markdown(md, out / "probes_during_optimization.md",
                          "Number of probes of stoch-prop during optimization", notes,
                          script=Path(__file__).name)
    plot(out / "probes_during_optimization.png", rows, args.datasets, metrics)
    common.log(args, md)
    return table


if __name__ == "__main__":
    main()
