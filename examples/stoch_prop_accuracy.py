"""Accuracy of stoch-prop against the exact L_Prop, as a function of t and of the solver tolerance.

Protocol.  On spacega, cpusmall and a 10000-row subset of protein (training
parts of the paper's splits, standardized), with ``m = 200`` centers and one
lengthscale per feature, the stochastic objective is compared with the exact
``prop`` at two points of the hyperparameter space:

* ``init``: the paper's initialization (penalty 1/n, median-heuristic
  lengthscale in every dimension, a random subset of the rows as centers);
* ``adam50``: after 50 Adam steps (lr 0.05) on the exact L_Prop from there,
  where the gradient is smaller and the competing terms closer to balance.

Every stochastic evaluation is a cold step (``warm_start=False``) with its own
probe seed.  Reported: the relative error of the value, the cosine similarity
of the gradient (all coordinates: log-penalty, log-lengthscales, centers) with
the exact gradient and the relative norm error of the gradient; median and
worst case over the seeds, and the CG iterations.

Sweeps (each at the defaults except for the swept option):

1. ``t`` in 10, 20, 50, 100 (10 seeds);
2. the Falkon tolerance in 1e-1 ... 1e-6, with the whitened (default) and the
   direct gradient formula (5 seeds);
3. the estimator of T: the paper's Hutchinson instead of row sampling (10 seeds),
   and the number q of sampled rows (5 seeds);
4. the estimator of D = Tr H at equal cost (t = 20 columns per solve):
   Hutchinson, Rademacher probes, Hutch++ with 5 and 10 sketch columns (10 seeds).

Writes ``stoch_prop_accuracy.{md,csv,png}`` into ``docs/results`` (``--quick``:
a small version into ``docs/results/quick``).

Run ``OPENBLAS_NUM_THREADS=1 python examples/stoch_prop_accuracy.py``.
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

import nyhopt as nh  # noqa: E402
from nyhopt.datasets import load_dataset  # noqa: E402
from nyhopt.objectives.stoch_prop import DEFAULT_MIN_ROWS, DEFAULT_TOL, StochasticProp  # noqa: E402
from nyhopt.optim import adam  # noqa: E402
from nyhopt.optim._init import initial_centers, median_heuristic  # noqa: E402

STEM = "stoch_prop_accuracy"
COLUMNS = ["dataset", "point", "sweep", "setting", "seeds", "value_err_median", "value_err_max",
           "cos_median", "cos_min", "grad_err_median", "grad_err_max", "D_err_median", "iterations"]


def flat(g):
    return np.concatenate([np.atleast_1d(g.log_penalty), np.ravel(g.log_lengthscale), np.ravel(g.centers)])


def load(name, max_rows, data_dir):
    ds = load_dataset(name, data_dir=data_dir)
    X, y = ds.X_train, ds.y_train
    if X.shape[0] > max_rows:
        idx = np.sort(np.random.default_rng(0).choice(X.shape[0], max_rows, replace=False))
        X, y = X[idx], y[idx]
    return X, y


def points(X, y, m, adam_steps):
    """The two hyperparameter points of the study."""
    n, d = X.shape
    p0 = nh.Params.from_natural(1.0 / n, np.full(d, median_heuristic(X)), initial_centers(X, m, 0))
    exact = nh.make_objective("prop", X, y)
    params, state = p0, adam.init(p0)
    for _ in range(adam_steps):
        _, g = exact.value_and_grad(params)
        params, state = adam.update(g, state, params, lr=0.05)
    return {"init": p0, f"adam{adam_steps}": params}, exact


def evaluate(X, y, params, reference, seeds, **options):
    """Errors of stoch-prop (one cold step per seed) against the exact value and gradient."""
    v0, g0, D0 = reference
    rows = []
    for seed in seeds:
        obj = StochasticProp(X, y, random_state=seed, warm_start=False, **options)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v, g = obj.value_and_grad(params)
        g = flat(g)
        rows.append((abs(v - v0) / abs(v0), g @ g0 / (np.linalg.norm(g) * np.linalg.norm(g0)),
                     np.linalg.norm(g - g0) / np.linalg.norm(g0),
                     abs(obj.last_terms["effective_dimension"] - D0) / D0, obj.last_solve.iterations))
    a = np.array(rows)
    return {"seeds": len(seeds), "value_err_median": float(np.median(a[:, 0])), "value_err_max": float(a[:, 0].max()),
            "cos_median": float(np.median(a[:, 1])), "cos_min": float(a[:, 1].min()),
            "grad_err_median": float(np.median(a[:, 2])), "grad_err_max": float(a[:, 2].max()),
            "D_err_median": float(np.median(a[:, 3])), "iterations": float(np.median(a[:, 4]))}


def sweeps(quick):
    s10 = list(range(3 if quick else 10))
    s5 = list(range(2 if quick else 5))
    s20 = list(range(4 if quick else 10))
    out = []
    for t in ([10, 20] if quick else [10, 20, 50, 100]):
        out.append(("t", f"t={t}", s10, {"n_probes": t}))
    for tol in ([1e-1, 1e-3] if quick else [1e-1, 1e-2, 1e-3, 3e-4, 1e-4, 1e-6]):
        for form in ("whitened", "direct"):
            out.append(("tol", f"tol={tol:g} {form}", s5, {"tol": tol, "gradient": form}))
    out.append(("T", "T by hutchinson", s10, {"trace_estimator": "hutchinson"}))
    for q in ([500] if quick else [1000, 2000, 5000, 10000]):
        out.append(("q", f"rows q={q}", s5, {"n_rows": q}))
    for label, opts in [("hutchinson gaussian", {}), ("hutchinson rademacher", {"probes": "rademacher"}),
                        ("hutch++ k=5", {"effective_dimension_estimator": "hutch++", "sketch_size": 5}),
                        ("hutch++ k=10", {"effective_dimension_estimator": "hutch++", "sketch_size": 10})]:
        out.append(("D", label, s20, opts))
    return out


def figure(rows, path, m):
    plt = common.pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for (ds, pt), style in zip(sorted({(r["dataset"], r["point"]) for r in rows}),
                               ["o-", "s-", "^-", "o--", "s--", "^--"]):
        sel = [r for r in rows if r["dataset"] == ds and r["point"] == pt]
        tt = [r for r in sel if r["sweep"] == "t"]
        x = [int(r["setting"][2:]) for r in tt]
        axes[0].plot(x, [r["value_err_median"] for r in tt], style, label=f"{ds} {pt}")
        axes[1].plot(x, [1 - r["cos_median"] for r in tt], style, label=f"{ds} {pt}")
        tl = [r for r in sel if r["sweep"] == "tol" and r["setting"].endswith("whitened")]
        axes[2].plot([float(r["setting"].split()[0][4:]) for r in tl], [r["grad_err_median"] for r in tl], style,
                     label=f"{ds} {pt}")
    ticks = sorted({int(r["setting"][2:]) for r in rows if r["sweep"] == "t"})
    axes[0].set(xscale="log", yscale="log", xlabel="probes t", ylabel="relative value error (median)")
    axes[1].set(xscale="log", yscale="log", xlabel="probes t", ylabel="1 - gradient cosine (median)")
    for ax in axes[:2]:
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
    axes[2].set(xscale="log", yscale="log", xlabel="Falkon tolerance (t = 20)",
                ylabel="relative gradient error (median)")
    axes[2].invert_xaxis()
    axes[1].legend(fontsize=7)
    fig.suptitle(f"stoch-prop against exact L_Prop (m = {m})")
    common.save_figure(fig, path)


def write_outputs(rows, out, args):
    """The CSV, the markdown table and the figure."""
    common.write_csv(rows, COLUMNS, out / f"{STEM}.csv")
    notes = (f"Defaults: t = 20 Gaussian probes, T by row sampling on q = min(n, max(m, {DEFAULT_MIN_ROWS})) "
             f"rows, Falkon tol = {DEFAULT_TOL:g}, whitened gradient. m = {args.centers} centers, "
             f"at most {args.max_rows} rows. `D_err` is the relative error of the effective-dimension term. "
             "Errors: median and worst over the seeds; cos: median and smallest.")
    common.write_markdown(common.markdown_table(rows, COLUMNS), out / f"{STEM}.md",
                          "stoch-prop accuracy", notes, script="examples/stoch_prop_accuracy.py")
    figure(rows, out / f"{STEM}.png", args.centers)


def main(argv=None):
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=common.csv_list(), default=["spacega", "cpusmall", "protein"])
    parser.add_argument("--centers", type=int, default=200)
    parser.add_argument("--max-rows", type=int, default=10000, help="subset size for large datasets")
    parser.add_argument("--adam-steps", type=int, default=50)
    parser.add_argument("--replot", action="store_true", help="only redraw the figure from the CSV")
    args = parser.parse_args(argv)
    if args.quick:
        args.centers, args.max_rows, args.adam_steps = 50, 1500, 5
    out = common.output_dir(args)
    if args.replot:
        rows = [dict(r) for r in common.read_csv(out / f"{STEM}.csv")]
        for r in rows:
            for key in COLUMNS[5:]:
                r[key] = float(r[key])
        write_outputs(rows, out, args)
        return
    rows = []
    for name in args.datasets:
        X, y = load(name, args.max_rows, args.data_dir)
        pts, exact = points(X, y, args.centers, args.adam_steps)
        for pname, params in pts.items():
            v0, g0 = exact.value_and_grad(params)
            ref = (v0, flat(g0), exact.terms(params)["effective_dimension"])
            for sweep, label, seeds, opts in sweeps(args.quick):
                row = {"dataset": name, "point": pname, "sweep": sweep, "setting": label}
                row.update(evaluate(X, y, params, ref, seeds, **opts))
                rows.append(row)
                common.log(args, f"{name:9s} {pname:7s} {label:24s} value err {row['value_err_median']:.2e} "
                                 f"cos {row['cos_median']:.4f} (min {row['cos_min']:.4f}) its {row['iterations']:.0f}")
    write_outputs(rows, out, args)
    common.log(args, f"wrote {out / STEM}.{{md,csv,png}}")


if __name__ == "__main__":
    main()
