"""Test error of every nyhopt objective next to GPyTorch's SGPR.

Protocol (the paper's small-scale one, with a fixed budget): on every dataset
and seed, ``m = 100`` centers start at a random subset of the training rows,
one Gaussian lengthscale per feature starts at the median heuristic, the
penalty at ``1/n``; Adam, learning rate 0.05, 100 steps, no early stopping;
the point with the lowest objective is kept.  Every method of a seed starts
from the same centers and lengthscale (nyhopt's own initialization,
:func:`nyhopt.optim._init.median_heuristic` and ``initial_centers``, drawn from
one generator seeded by the seed, as :func:`nyhopt.tune` draws them).

The metric is the test RMSE on the standardized labels (regression) or the
classification error of the sign of the prediction (binary, -1/+1 labels) on
the paper's test split.  Beside it, the error bars: the negative log
predictive density (NLPD, nats per test value) and the coverage of the 95%
interval, of ``predict(X_test, return_std=True)`` (the spread of a new
observation, ``docs/uncertainty.md``) against the standardized labels, or of
``decision_function(X_test, return_std=True, include_noise=True)`` against
the -1/+1 labels of the classification sets (the regression model behind the
classifier; GPyTorch's SGPR is fitted to the same labels).

Methods: the nyhopt objectives ``holdout``, ``loocv``, ``gcv``, ``creg``,
``sgpr``, ``prop``, ``stoch-prop``; ``sgpr-noamp`` is ``sgpr`` with the kernel
amplitude frozen at 1; ``validated`` is
``nh.tune(objective=["prop", "sgpr", "gcv"], validation=5)`` (5-fold choice,
then the chosen objective tuned on all the rows; ``--validation 0.2`` gives
the single 20% split of the first table); ``gpytorch``
rows come from ``examples/gpytorch_sgpr_baseline.py``, which runs in its own
virtual environment on the ``.npz`` problems that ``--export`` writes (the
same split, standardization and initial point)::

    python examples/quality_table.py --export /tmp/nyhopt_quality --methods none
    /tmp/gpyt/bin/python examples/gpytorch_sgpr_baseline.py /tmp/nyhopt_quality
    python examples/quality_table.py --gpytorch-csv /tmp/nyhopt_quality/gpytorch.csv

The constant-mean comparison (``--stem quality_mean``) merges GPyTorch with
``ConstantMean`` and ``ZeroMean`` as two columns (``gpytorch_sgpr_baseline.py
--mean constant --csv gp_c.csv``, then ``--gpytorch-csv gp_c.csv
--gpytorch-method gpytorch:constant``, and likewise ``gpytorch:zero``); its
targets compare with ``gpytorch:constant``.

Raw rows (one per dataset, seed and method) are kept in
``quality_vs_gpytorch.csv``; a rerun replaces the rows of the runs it repeats
and keeps the others, so single columns can be rerun (``--methods sgpr``).
``quality_vs_gpytorch.md`` is the table: mean ± std over seeds and the mean
wall time per run.
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
from nyhopt.datasets import available_datasets, c_error, load_dataset, rmse  # noqa: E402
from nyhopt.optim._init import initial_centers, median_heuristic  # noqa: E402

OBJECTIVES = ["holdout", "loocv", "gcv", "creg", "sgpr", "prop", "stoch-prop"]
VALIDATED = ["prop", "sgpr", "gcv"]
#: ``sgpr-noamp``: SGPR with the kernel amplitude frozen at 1 (the objective without an amplitude).
METHODS = OBJECTIVES + ["sgpr-noamp", "validated"]
#: ``<objective>:zero`` / ``<objective>:constant``: the objective with an explicit ``mean`` option (not run
#: unless named in ``--methods``; ``--methods means`` names them all).
MEANS = ("zero", "constant")
MEAN_METHODS = [f"{o}:{m}" for o in OBJECTIVES for m in MEANS]
ALL_METHODS = METHODS + MEAN_METHODS
#: Names of GPyTorch rows (``--gpytorch-method``): ``gpytorch`` as the script was run, or its prior mean named.
GPYTORCH_METHODS = ["gpytorch", "gpytorch:zero", "gpytorch:constant"]
COLUMNS = ["dataset", "seed", "method", "test_error", "metric", "nlpd", "coverage", "seconds", "epochs",
           "n_train", "centers", "penalty", "amplitude", "chosen", "status"]
STEM = "quality_vs_gpytorch"


def parse_args(argv=None):
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=common.csv_list(), default=None,
                        help="comma-separated (default: all; quick: mg,svmguide1)")
    parser.add_argument("--methods", type=common.csv_list(), default=None,
                        help=f"comma-separated among {','.join(METHODS)} (default: all); "
                             "'none' runs nothing (export, merge or render only)")
    parser.add_argument("--seeds", type=common.csv_list(int), default=None,
                        help="comma-separated seeds (default 0,1,2,3,4; quick: 0)")
    parser.add_argument("--centers", type=int, default=None, help="m (default 100; quick 10)")
    parser.add_argument("--epochs", type=int, default=None, help="Adam steps (default 100; quick 3)")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--max-train", type=int, default=None,
                        help="at most this many training rows (seeded subset); default all "
                             "(quick: 300)")
    parser.add_argument("--export", type=Path, default=None,
                        help="write <dataset>_seed<k>.npz problems for the GPyTorch script here")
    parser.add_argument("--validation", type=_validation, default=5,
                        help="validation= of the 'validated' method: an int k >= 2 (k folds, "
                             "default 5) or a fraction in (0, 1)")
    parser.add_argument("--stem", default=STEM,
                        help=f"file names <stem>.csv and <stem>.md (default {STEM}; the constant-mean "
                             "comparison: --methods means --stem quality_mean)")
    parser.add_argument("--gpytorch-csv", type=Path, default=None,
                        help="CSV written by gpytorch_sgpr_baseline.py; its rows replace the "
                             "rows of --gpytorch-method")
    parser.add_argument("--gpytorch-method", choices=GPYTORCH_METHODS, default="gpytorch",
                        help="method name of the merged GPyTorch rows (default gpytorch; gpytorch:zero / "
                             "gpytorch:constant name the script's --mean); the targets compare with "
                             "gpytorch:constant when present, else gpytorch")
    args = parser.parse_args(argv)
    quick = args.quick
    args.datasets = args.datasets or (["mg", "svmguide1"] if quick else available_datasets())
    unknown = set(args.datasets) - set(available_datasets())
    if unknown:
        parser.error(f"--datasets: unknown {sorted(unknown)}; choose among {available_datasets()}")
    if args.methods is None:
        args.methods = list(METHODS)
    elif args.methods == ["none"]:
        args.methods = []
    elif args.methods == ["means"]:
        args.methods = list(MEAN_METHODS)
    unknown = set(args.methods) - set(ALL_METHODS)
    if unknown:
        parser.error(f"--methods: unknown {sorted(unknown)}; choose among {ALL_METHODS}, means or none")
    args.seeds = args.seeds if args.seeds is not None else ([0] if quick else [0, 1, 2, 3, 4])
    args.centers = args.centers or (10 if quick else 100)
    args.epochs = args.epochs or (3 if quick else 100)
    if args.max_train is None and quick:
        args.max_train = 300
    return args


def _validation(text):
    """``--validation``: a number of folds (int) or a fraction (float)."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def problem(name, seed, args):
    """Dataset, training rows and the shared initial point (centers, lengthscale) of one seed."""
    ds = load_dataset(name, data_dir=args.data_dir, seed=seed)
    X, y = ds.X_train, ds.y_train
    if args.max_train and X.shape[0] > args.max_train:
        idx = np.sort(np.random.default_rng(seed + 10_000).choice(X.shape[0], args.max_train,
                                                                   replace=False))
        X, y = X[idx], y[idx]
    rng = np.random.default_rng(seed)  # drawn in the order nh.tune(random_state=seed) draws
    ell0 = median_heuristic(X, random_state=rng)
    Z0 = initial_centers(X, args.centers, rng)
    return ds, X, y, Z0, ell0


def export(path: Path, ds, X, y, Z0, ell0):
    """Write one problem as ``.npz`` for the GPyTorch script."""
    common.write_gpytorch_problem(path, X, y, ds.X_test, ds.y_test, Z0, ell0, ds.task)


def error_on_test(ds, pred):
    """RMSE on the standardized labels, or the error of ``sign(pred)`` against -1/+1 labels."""
    pred = np.asarray(pred, dtype=np.float64).reshape(ds.y_test.shape)
    if ds.task == "regression":
        return rmse(ds.y_test, pred)
    return c_error(ds.y_test, pred)


def error_bars(ds, model):
    """``(NLPD, 95% coverage)`` of the model's predictive distribution on the test split."""
    if ds.task == "regression":
        mean, std = model.predict(ds.X_test, return_std=True)
    else:
        mean, std = model.decision_function(ds.X_test, return_std=True, include_noise=True)
    y = np.asarray(ds.y_test, dtype=np.float64).reshape(np.shape(mean))
    return nh.metrics.nlpd(y, mean, std), nh.metrics.coverage(y, mean, std, level=0.95)


def one_run(ds, X, y, Z0, ell0, method, seed, args):
    objective, validation, freeze, options = method, None, (), None
    if ":" in method:  # an explicit mean
        objective, mean = method.split(":")
        options = {"mean": mean}
    elif method == "validated":
        objective, validation = VALIDATED, args.validation
    elif method == "sgpr-noamp":
        objective, freeze = "sgpr", ("amplitude",)
    with common.Timer() as timer:
        result = nh.tune(X, y, objective=objective, centers=Z0, lengthscale=ell0,
                         epochs=args.epochs, lr=args.lr, kernel="gaussian", ard=True,
                         random_state=seed, validation=validation, freeze=freeze, patience=None,
                         task="regression" if ds.task == "regression" else "classification",
                         record_terms=False, track_errors=False, progress=False, objective_options=options,
                         standardize=False)  # the paper's protocol: X standardized once, by load_dataset
    chosen = result.objective.name if result.candidates else ""  # the validated choice
    nlpd, coverage = error_bars(ds, result.model)
    return {
        "test_error": error_on_test(ds, result.model.predict(ds.X_test)),
        "nlpd": nlpd,
        "coverage": coverage,
        "seconds": timer.seconds,
        "epochs": int(result.history.epoch[-1]),
        "penalty": result.params.penalty,
        "amplitude": getattr(result.params, "amplitude", ""),
        "chosen": chosen,
        "status": "ok",
    }


def run(args, rows):
    """Run the selected methods; ``rows`` (a dict keyed by (dataset, seed, method)) is updated."""
    for name in args.datasets:
        for seed in args.seeds:
            if not args.methods and args.export is None:
                continue
            ds, X, y, Z0, ell0 = problem(name, seed, args)
            if args.export is not None:
                args.export.mkdir(parents=True, exist_ok=True)
                export(args.export / f"{name}_seed{seed}.npz", ds, X, y, Z0, ell0)
            for method in args.methods:
                row = {"dataset": name, "seed": seed, "method": method, "metric": _metric(ds),
                       "n_train": X.shape[0], "centers": Z0.shape[0]}
                try:
                    row.update(one_run(ds, X, y, Z0, ell0, method, seed, args))
                except Exception as exc:  # keep the sweep going; the table shows the failure
                    traceback.print_exc()
                    row.update({"test_error": float("nan"), "status": f"failed: {exc!r}"[:200]})
                rows[(name, str(seed), method)] = row
                common.log(args, f"{name:12s} seed {seed} {method:10s} "
                                 f"error {float(row['test_error']):.4f} "
                                 f"({float(row.get('seconds') or 0):.1f} s)")
                yield row


def _metric(ds):
    return "rmse" if ds.task == "regression" else "c-error"


def _key(row):
    return (row["dataset"], str(row["seed"]), row["method"])


def sorted_rows(rows):
    """Rows in table order: dataset, seed, method."""
    order = available_datasets()
    methods = ALL_METHODS + GPYTORCH_METHODS
    return sorted(rows.values(), key=lambda r: (
        order.index(r["dataset"]) if r["dataset"] in order else len(order), r["dataset"],
        int(r["seed"]), methods.index(r["method"]) if r["method"] in methods else len(methods)))


def load_rows(path: Path):
    """Rows of a raw CSV keyed by (dataset, seed, method); empty when there is none."""
    if not path.is_file():
        return {}
    return {_key(r): r for r in common.read_csv(path)}


def merge_gpytorch(rows, path: Path, method="gpytorch"):
    """Replace the ``method`` rows of ``rows`` by those of the GPyTorch script's CSV."""
    for key in [k for k in rows if k[2] == method]:
        del rows[key]
    for row in common.read_csv(path):
        row = dict(row, method=method)
        rows[_key(row)] = row


def summarize(rows):
    """Wide table: per dataset, ``mean ± std`` of the test error per method, and seconds per run."""
    order = available_datasets()
    datasets = sorted({r["dataset"] for r in rows},
                      key=lambda d: (order.index(d) if d in order else len(order), d))
    methods = [m for m in ALL_METHODS + GPYTORCH_METHODS if any(r["method"] == m for r in rows)]
    errors, seconds, stats = [], [], {}
    bars = {"nlpd": [], "coverage": []}
    for name in datasets:
        metric = next(r["metric"] for r in rows if r["dataset"] == name)
        n_seeds = len({str(r["seed"]) for r in rows if r["dataset"] == name})
        err_line, sec_line = {"dataset": name, "metric": metric}, {"dataset": name}
        bar_lines = {k: {"dataset": name} for k in bars}
        for method in methods:
            runs = [r for r in rows if r["dataset"] == name and r["method"] == method]
            for k in bars:
                m_k, s_k = common.mean_std([_float(r.get(k)) for r in runs])
                stats[(name, method, k)] = m_k
                bar_lines[k][method] = "-" if math.isnan(m_k) else f"{m_k:.3f} ± {s_k:.3f}"
            mean, std = common.mean_std([float(r["test_error"]) for r in runs])
            secs, _ = common.mean_std([float(r["seconds"]) for r in runs if r.get("seconds")])
            ok = sum(1 for r in runs if not math.isnan(float(r["test_error"])))
            stats[(name, method)] = (mean, std, ok)
            err_line[method] = "-" if math.isnan(mean) else f"{mean:.4f} ± {std:.4f}"
            if 0 < ok < n_seeds:
                err_line[method] += f" ({ok} of {n_seeds} seeds)"
            sec_line[method] = "-" if math.isnan(secs) else f"{secs:.1f}"
        finite = [m for m in methods if not math.isnan(stats[(name, m)][0])]
        if finite:
            best = min(finite, key=lambda m: stats[(name, m)][0])
            err_line[best] = f"**{err_line[best]}**"
        errors.append(err_line)
        seconds.append(sec_line)
        for k in bars:
            bars[k].append(bar_lines[k])
    return methods, errors, seconds, stats, bars


def _float(value):
    """A CSV cell as a float (NaN when empty or missing: rows written before the column existed)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def default_mean(objective):
    """The default ``mean`` of an objective (``"constant"`` or ``"zero"``)."""
    from nyhopt.objectives import _lookup

    return _lookup(objective).default_mean


def targets(stats, datasets):
    """Ratios of mean test errors behind the quality targets, per dataset, and a verdict.

    ``sgpr / gpytorch`` (target: at most 1.03 everywhere), ``validated / best single
    objective`` (at most 1.02 everywhere) and ``validated / gpytorch`` (at most 1.03 on at
    least 80% of the datasets).  NaN where a method is missing.  ``gpytorch``
    is GPyTorch with ``ConstantMean`` (``gpytorch:constant``) where those rows
    exist; an objective without its own column is its default mean's column
    (``<objective>:<mean>``).
    """
    def mean(name, method):
        if method == "gpytorch" and (name, "gpytorch:constant") in stats:
            method = "gpytorch:constant"
        if method in OBJECTIVES and (name, method) not in stats:  # the mean table: the default mean's column
            method = f"{method}:{default_mean(method)}"
        return stats.get((name, method), (math.nan,))[0]

    lines = []
    for name in datasets:
        best = min(OBJECTIVES, key=lambda o: (math.isnan(mean(name, o)), mean(name, o)))
        if math.isnan(mean(name, best)):
            best = "-"
        lines.append({"dataset": name,
                      "sgpr / gpytorch": mean(name, "sgpr") / mean(name, "gpytorch"),
                      "best objective": best,
                      "validated / best": mean(name, "validated") / mean(name, best),
                      "validated / gpytorch": mean(name, "validated") / mean(name, "gpytorch")})

    def verdict(column, limit, share):
        ratios = [line[column] for line in lines]
        if not ratios or any(math.isnan(r) for r in ratios):
            return "not run"
        ok = sum(r <= limit for r in ratios)
        return f"{'holds' if ok >= share * len(ratios) else 'fails'} ({ok}/{len(ratios)})"

    summary = (f"sgpr within 3% of GPyTorch on every dataset: {verdict('sgpr / gpytorch', 1.03, 1)}; "
               f"validated within 2% of the best objective on every dataset: "
               f"{verdict('validated / best', 1.02, 1)}; validated at most 3% worse than GPyTorch "
               f"on at least 80%: {verdict('validated / gpytorch', 1.03, 0.8)}.")
    return lines, summary


def bar_targets(stats, datasets):
    """The error-bar targets: sgpr's 95% coverage within 0.04 of 0.95 on every dataset, and its
    NLPD within 0.05 nats of GPyTorch's on at least 6 of 8 datasets."""
    lines, cov_ok, nlpd_ok, nlpd_n = [], 0, 0, 0
    for name in datasets:
        gp = "gpytorch:constant" if (name, "gpytorch:constant", "nlpd") in stats else "gpytorch"
        cov = stats.get((name, "sgpr", "coverage"), math.nan)
        gap = stats.get((name, "sgpr", "nlpd"), math.nan) - stats.get((name, gp, "nlpd"), math.nan)
        cov_ok += abs(cov - 0.95) <= 0.04
        if not math.isnan(gap):
            nlpd_n += 1
            nlpd_ok += gap <= 0.05
        lines.append({"dataset": name, "sgpr coverage": cov, "sgpr NLPD - gpytorch NLPD": gap})
    summary = (f"sgpr 95% coverage within 0.04 of 0.95: {cov_ok}/{len(datasets)} datasets; sgpr NLPD "
               f"within 0.05 nats of GPyTorch's: {nlpd_ok}/{nlpd_n} datasets with both.")
    return lines, summary


def mean_lines(stats, datasets):
    """Per dataset and objective: mean test error with the constant over that with the zero mean."""
    lines = []
    for name in datasets:
        line = {"dataset": name}
        for o in OBJECTIVES:
            z, c = stats.get((name, f"{o}:zero")), stats.get((name, f"{o}:constant"))
            line[o] = "-" if not z or not c or math.isnan(z[0]) or math.isnan(c[0]) else f"{c[0] / z[0]:.4f}"
        z, c = stats.get((name, "gpytorch:zero")), stats.get((name, "gpytorch:constant"))
        line["gpytorch"] = "-" if not z or not c or math.isnan(z[0]) or math.isnan(c[0]) else f"{c[0] / z[0]:.4f}"
        lines.append(line)
    return lines


def render(rows, out: Path, args):
    methods, errors, seconds, stats, bars = summarize(rows)
    mean_text = ""
    if any(m in MEAN_METHODS for m in methods):
        mean_text = ("\nConstant mean against zero mean (ratio of mean test errors, constant / zero; "
                     "below 1: the constant helps)\n\n"
                     + common.markdown_table(mean_lines(stats, [e["dataset"] for e in errors]),
                                             ["dataset"] + OBJECTIVES + ["gpytorch"]))
    lines, summary = targets(stats, [e["dataset"] for e in errors])
    bar_lines, bar_summary = bar_targets(stats, [e["dataset"] for e in errors])
    columns = ["dataset", "sgpr / gpytorch", "best objective", "validated / best",
               "validated / gpytorch"]
    targets_text = ""
    if any(m in METHODS + GPYTORCH_METHODS for m in methods):
        targets_text = ("\nTargets (ratios of mean test errors)\n\n"
                 + common.markdown_table([{c: f"{v:.4f}" if isinstance(v, float) else v for c, v in line.items()}
                                          for line in lines], columns) + "\n" + summary + "\n")
    text = ("Test error (mean ± std over seeds; bold: lowest mean)\n\n"
            + common.markdown_table(errors, ["dataset", "metric"] + methods)
            + "\nWall time per run, seconds (mean over seeds)\n\n"
            + common.markdown_table(seconds, ["dataset"] + methods)
            + targets_text
            + "\nNegative log predictive density on the test split, nats per value (mean ± std over seeds)\n\n"
            + common.markdown_table(bars["nlpd"], ["dataset"] + methods)
            + "\nCoverage of the 95% predictive interval on the test split (mean ± std over seeds)\n\n"
            + common.markdown_table(bars["coverage"], ["dataset"] + methods)
            + "\nError-bar targets\n\n"
            + common.markdown_table([{c: f"{v:.4f}" if isinstance(v, float) else v for c, v in line.items()}
                                     for line in bar_lines],
                                    ["dataset", "sgpr coverage", "sgpr NLPD - gpytorch NLPD"])
            + "\n" + bar_summary + "\n" + mean_text)
    notes = (f"m = {args.centers} centers, Adam lr {args.lr}, {args.epochs} steps, no early "
             "stopping; metric: RMSE on standardized labels (regression), sign error "
             "(classification), on the test split; validated: objective among "
             f"{', '.join(VALIDATED)} chosen with validation={args.validation!r}; gpytorch:zero / "
             "gpytorch:constant: GPyTorch's SGPR with ZeroMean / ConstantMean (gpytorch: as merged). "
             "Missing methods were not run.")
    title = ("nyhopt objectives against GPyTorch SGPR" if targets_text
             else "nyhopt objectives with and without a constant mean")
    common.write_markdown(text, out / f"{args.stem}.md", title,
                          notes, script="quality_table.py")
    return errors


def main(argv=None):
    args = parse_args(argv)
    out = common.output_dir(args)
    raw = out / f"{args.stem}.csv"
    rows = load_rows(raw)
    common.log(args, f"quality table: datasets {args.datasets}, seeds {args.seeds}, "
                     f"methods {args.methods}, m={args.centers}, steps={args.epochs}")
    for _ in run(args, rows):
        common.write_csv(sorted_rows(rows), COLUMNS, raw)  # after every run: survives a kill
    if args.gpytorch_csv is not None:
        merge_gpytorch(rows, args.gpytorch_csv, args.gpytorch_method)
    common.write_csv(sorted_rows(rows), COLUMNS, raw)
    if rows:
        return render(sorted_rows(rows), out, args)
    return []


if __name__ == "__main__":
    main()
