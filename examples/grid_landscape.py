"""Objective landscapes on a (penalty, lengthscale) grid against the test error.

Reproduces the protocol of the paper's Figure 3 ("Effectiveness of test error
proxies on a grid"): on small-HIGGS, with a Gaussian kernel of one lengthscale
and ``m`` fixed random Nystrom centers, every exact objective is evaluated on a
grid of penalties and lengthscales, next to the test error of the model trained
with the same hyperparameters. A good proxy has its minimum where the test
error is low.

Writes ``grid_landscape.{md,csv,png}`` (the table lists, per objective, the
grid point it picks and the test error there) and ``grid_landscape_values.csv``
(every grid point).

Run ``python examples/grid_landscape.py`` (about a minute), or with ``--quick``.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

import nyhopt as nh  # noqa: E402
from nyhopt.datasets import load_dataset  # noqa: E402

OBJECTIVES = ["holdout", "loocv", "gcv", "creg", "sgpr", "prop"]
LABELS = {"holdout": "Hold-out", "loocv": "LOOCV", "gcv": "GCV", "creg": "C-Reg",
          "sgpr": "SGPR", "prop": "L_Prop"}


def parse_args(argv=None):
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="higgs_small")
    parser.add_argument("--centers", type=int, default=None, help="m (default 100; quick 20)")
    parser.add_argument("--n-penalty", type=int, default=None, help="grid size in lambda (default 15)")
    parser.add_argument("--n-lengthscale", type=int, default=None,
                        help="grid size in the lengthscale (default 15)")
    parser.add_argument("--penalty-range", type=common.csv_list(float), default=[1e-8, 1.0],
                        help="lowest,highest penalty (log-spaced)")
    parser.add_argument("--lengthscale-range", type=common.csv_list(float), default=None,
                        help="lowest,highest lengthscale (log-spaced; default: median "
                             "heuristic times 1/8 and 32)")
    parser.add_argument("--max-train", type=int, default=None,
                        help="use only the first rows of the training set (quick: 1000)")
    parser.add_argument("--objectives", type=common.csv_list(), default=OBJECTIVES)
    parser.add_argument("--seed", type=int, default=0, help="seed of the centers and splits")
    args = parser.parse_args(argv)
    quick = args.quick
    args.centers = args.centers or (20 if quick else 100)
    args.n_penalty = args.n_penalty or (4 if quick else 15)
    args.n_lengthscale = args.n_lengthscale or (4 if quick else 15)
    if args.max_train is None and quick:
        args.max_train = 1000
    return args


def safe_value(objective, params):
    """The objective's value, or NaN where it fails (e.g. an ill-conditioned point)."""
    try:
        value = objective.value(params)
    except (np.linalg.LinAlgError, ValueError, FloatingPointError, ArithmeticError):
        return float("nan")
    return value if math.isfinite(value) else float("nan")


def test_error(ds, X, y, Z, penalty, ell):
    """Test error of the N-KRR model with these hyperparameters (direct solver)."""
    try:
        model = nh.NystromKRR(kernel=nh.GaussianKernel(lengthscale=float(ell)), penalty=float(penalty),
                              centers=Z, solver="direct")
        model.fit(X, y)
        return ds.error(model.predict(ds.X_test))
    except (np.linalg.LinAlgError, ValueError, ArithmeticError):
        return float("nan")


def run(args):
    ds = load_dataset(args.dataset, data_dir=args.data_dir, seed=args.seed)
    X, y = ds.X_train, ds.y_train
    if args.max_train:
        X, y = X[: args.max_train], y[: args.max_train]
    rng = np.random.default_rng(args.seed)
    Z = X[np.sort(rng.choice(X.shape[0], size=args.centers, replace=False))]
    if args.lengthscale_range is None:
        from nyhopt.optim._init import median_heuristic

        med = median_heuristic(X, random_state=args.seed)
        args.lengthscale_range = [med / 8, med * 32]
    penalties = np.logspace(*np.log10(args.penalty_range), args.n_penalty)
    lengthscales = np.logspace(*np.log10(args.lengthscale_range), args.n_lengthscale)
    objectives = {name: nh.make_objective(name, X, y, kernel="gaussian", random_state=args.seed)
                  for name in args.objectives}

    rows = []
    with common.Timer() as timer:
        for i, lam in enumerate(penalties):
            for j, ell in enumerate(lengthscales):
                params = nh.Params.from_natural(penalty=lam, lengthscale=ell, centers=Z)
                row = {"penalty": float(lam), "lengthscale": float(ell),
                       "test_error": test_error(ds, X, y, Z, lam, ell)}
                for name, obj in objectives.items():
                    row[name] = safe_value(obj, params)
                rows.append(row)
            common.log(args, f"  penalty {i + 1}/{len(penalties)} done ({timer.elapsed():.0f} s)")
    return ds, X, penalties, lengthscales, rows, timer.seconds


def summarize(rows, objectives):
    """Per objective: the grid point of its minimum and the test error there."""
    errors = np.array([r["test_error"] for r in rows])
    best = int(np.nanargmin(errors))
    table = [{"objective": "test error (oracle)", "penalty": rows[best]["penalty"],
              "lengthscale": rows[best]["lengthscale"], "test_error": errors[best],
              "rank_corr": 1.0}]
    for name in objectives:
        vals = np.array([r[name] for r in rows])
        ok = np.isfinite(vals) & np.isfinite(errors)
        if not ok.any():
            continue
        k = int(np.nanargmin(np.where(ok, vals, np.nan)))
        table.append({"objective": LABELS.get(name, name), "penalty": rows[k]["penalty"],
                      "lengthscale": rows[k]["lengthscale"], "test_error": errors[k],
                      "rank_corr": spearman(vals[ok], errors[ok])})
    return table


def spearman(a, b):
    """Spearman rank correlation (no ties correction needed for continuous values)."""
    if a.size < 3:
        return float("nan")
    ra = np.argsort(np.argsort(a)).astype(float)
    rb = np.argsort(np.argsort(b)).astype(float)
    ra -= ra.mean()
    rb -= rb.mean()
    denom = math.sqrt(float((ra ** 2).sum() * (rb ** 2).sum()))
    return float((ra * rb).sum() / denom) if denom > 0 else float("nan")


def log_shifted(values):
    """log10(v - min(v) + delta), delta = (median(v) - min(v)) / 100: a monotone transform for
    values of any sign that resolves the region near the minimum."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return values
    spread = float(np.median(finite) - finite.min())
    delta = 1e-2 * spread if spread > 0 else 1.0
    return np.log10(values - finite.min() + delta)


def plot_from_csv(values_csv, path, objectives, dataset):
    """Redraw the figure from a saved ``grid_landscape_values.csv``."""
    rows = [{k: float(v) for k, v in r.items()} for r in common.read_csv(values_csv)]
    penalties = np.unique([r["penalty"] for r in rows])
    lengthscales = np.unique([r["lengthscale"] for r in rows])
    plot(path, rows, penalties, lengthscales, objectives, dataset)


def plot(path, rows, penalties, lengthscales, objectives, dataset):
    plt = common.pyplot()
    panels = ["test_error"] + list(objectives)
    ncols = min(4, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols, 3.0 * nrows), squeeze=False)
    P, L = len(penalties), len(lengthscales)
    for ax, key in zip(axes.flat, panels):
        grid = np.array([r[key] for r in rows]).reshape(P, L)
        shown = grid if key == "test_error" else log_shifted(grid)
        finite = shown[np.isfinite(shown)]
        vmax = np.percentile(finite, 95) if finite.size else None
        mesh = ax.pcolormesh(np.log10(lengthscales), np.log10(penalties), shown,
                             shading="nearest", cmap="viridis_r", vmax=vmax)
        fig.colorbar(mesh, ax=ax, shrink=0.85)
        if np.isfinite(grid).any():
            i, j = np.unravel_index(np.nanargmin(grid), grid.shape)
            ax.plot(np.log10(lengthscales[j]), np.log10(penalties[i]), "x", color="red",
                    markersize=11, markeredgewidth=2.5)
        ax.set_title("test error" if key == "test_error" else f"{LABELS.get(key, key)} (log, shifted)",
                     fontsize=9)
        ax.set_xlabel("log10 lengthscale", fontsize=8)
        ax.set_ylabel("log10 penalty", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(f"Objectives on a (penalty, lengthscale) grid, {dataset}; light = small, x = minimum",
                 fontsize=10)
    fig.tight_layout()
    common.save_figure(fig, path)


def main(argv=None):
    args = parse_args(argv)
    out = common.output_dir(args)
    common.log(args, f"grid landscape on {args.dataset}: m={args.centers}, "
                     f"{args.n_penalty}x{args.n_lengthscale} grid")
    ds, X, penalties, lengthscales, rows, seconds = run(args)
    value_cols = ["penalty", "lengthscale", "test_error"] + list(args.objectives)
    common.write_csv(rows, value_cols, out / "grid_landscape_values.csv")
    table = summarize(rows, args.objectives)
    cols = ["objective", "penalty", "lengthscale", "test_error", "rank_corr"]
    common.write_csv(table, cols, out / "grid_landscape.csv")
    md = common.markdown_table(table, cols, headers=["objective", "penalty at min", "lengthscale at min",
                                                     f"test {ds.metric} there",
                                                     "Spearman(objective, test error)"])
    notes = (f"Dataset {ds.name}: {X.shape[0]} training rows, {ds.X_test.shape[0]} test rows, "
             f"d = {X.shape[1]}; Gaussian kernel with one lengthscale; m = {args.centers} fixed "
             f"random centers (seed {args.seed}); grid {args.n_penalty} penalties in "
             f"[{penalties[0]:.1e}, {penalties[-1]:.1e}] x {args.n_lengthscale} lengthscales in "
             f"[{lengthscales[0]:.3g}, {lengthscales[-1]:.3g}], log-spaced; {seconds:.0f} s. "
             "The figure shows log10(value - min + (median - min) / 100) of every objective "
             "(a monotone transform that works for objectives of any sign; colors saturate "
             "at the 95th percentile); the test error is shown as is.")
    common.write_markdown(md, out / "grid_landscape.md", "Objective landscapes on a grid", notes,
                          script=Path(__file__).name)
    plot(out / "grid_landscape.png", rows, penalties, lengthscales, args.objectives, ds.name)
    common.log(args, md)
    return table


if __name__ == "__main__":
    main()
