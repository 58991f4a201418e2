"""Calibration of the classifiers' predict_proba against scikit-learn's CalibratedClassifierCV.

On the binary datasets with a fixed split (svmguide1, higgs_small), tunes a
``HyperoptKRRClassifier`` and compares on the test rows the probabilities of

* ``nyhopt``: ``predict_proba`` (probit of the score with the fitted noise),
* ``nyhopt latent``: ``predict_proba(include_latent=True)`` (the latent
  variance added at each point),
* ``sigmoid CV`` and ``isotonic CV``: ``CalibratedClassifierCV`` wrapped
  around the same classifier (3 folds, so three fits),
* ``gradient boosting``: scikit-learn's ``HistGradientBoostingClassifier``
  with its defaults, for reference,

by test error, log loss, Brier score and expected calibration error (10
equal-width bins of the probability of the positive class), with the fit
time.  Writes ``calibration.{md,csv,png}`` (the reliability diagrams) into
``docs/results/`` (``--quick``: ``docs/results/quick/``).

```
python examples/calibration.py            # both datasets, 200 centers, 100 epochs (a few minutes)
python examples/calibration.py --quick    # 10 centers, 2 epochs, 300 training rows (seconds)
```
"""
from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import base_parser, csv_list, log, markdown_table, output_dir, pyplot, save_figure  # noqa: E402
from _common import write_csv, write_markdown  # noqa: E402

COLUMNS = ["dataset", "method", "test_error_percent", "log_loss", "brier", "ece", "fit_seconds", "n_train",
           "n_test"]
BINS = 10


def expected_calibration_error(y01, p1, bins=BINS):
    """Sum over equal-width bins of the share of rows times |observed rate - mean probability|."""
    idx = np.minimum((p1 * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        sel = idx == b
        if sel.any():
            total += sel.mean() * abs(y01[sel].mean() - p1[sel].mean())
    return float(total)


def reliability(y01, p1, bins=BINS):
    """Mean probability and observed rate of each non-empty bin."""
    idx = np.minimum((p1 * bins).astype(int), bins - 1)
    keep = [b for b in range(bins) if (idx == b).any()]
    return (np.array([p1[idx == b].mean() for b in keep]), np.array([y01[idx == b].mean() for b in keep]))


def scores(y01, proba, classes):
    """Test error, log loss, Brier score and ECE of the probabilities of class +1."""
    p1 = np.clip(proba[:, list(classes).index(1)], 1e-15, 1 - 1e-15)
    return {
        "test_error_percent": 100 * float(np.mean((p1 > 0.5) != (y01 == 1))),
        "log_loss": float(-np.mean(y01 * np.log(p1) + (1 - y01) * np.log1p(-p1))),
        "brier": float(np.mean((p1 - y01) ** 2)),
        "ece": expected_calibration_error(y01, p1),
    }, p1


def run_dataset(ds, args):
    import nyhopt as nh
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.ensemble import HistGradientBoostingClassifier

    keep = np.random.default_rng(0).permutation(ds.X_train.shape[0])[: args.max_train]  # files sorted by class
    X, y, Xt = ds.X_train[keep], ds.y_train[keep], ds.X_test
    y01 = (ds.y_test > 0).astype(float)
    base = nh.HyperoptKRRClassifier(centers=args.centers, epochs=args.epochs, random_state=0, progress=False)
    rows, curves = [], {}

    def record(method, seconds, proba, classes):
        row, p1 = scores(y01, proba, classes)
        row.update(dataset=ds.name, method=method, fit_seconds=seconds, n_train=X.shape[0], n_test=Xt.shape[0])
        rows.append(row)
        curves[method] = reliability(y01, p1)
        log(args, f"{ds.name:12s} {method:18s} error {row['test_error_percent']:.2f}%  log loss "
                  f"{row['log_loss']:.4f}  ECE {row['ece']:.4f}  {seconds:.1f} s")

    t0 = time.perf_counter()
    clf = type(base)(**base.get_params()).fit(X, y)
    seconds = time.perf_counter() - t0
    record("nyhopt", seconds, clf.predict_proba(Xt), clf.classes_)
    record("nyhopt latent", seconds, clf.predict_proba(Xt, include_latent=True), clf.classes_)
    for method in ("sigmoid", "isotonic"):
        cal = CalibratedClassifierCV(type(base)(**base.get_params()), method=method, cv=3)
        t0 = time.perf_counter()
        cal.fit(X, y)
        record(f"{method} CV", time.perf_counter() - t0, cal.predict_proba(Xt), cal.classes_)
    gb = HistGradientBoostingClassifier(random_state=0)
    t0 = time.perf_counter()
    gb.fit(X, y)
    record("gradient boosting", time.perf_counter() - t0, gb.predict_proba(Xt), gb.classes_)
    return rows, curves


def plot(curves_by_dataset, path):
    plt = pyplot()
    fig, axes = plt.subplots(1, len(curves_by_dataset), figsize=(5 * len(curves_by_dataset), 4.6), squeeze=False)
    for ax, (name, curves) in zip(axes[0], curves_by_dataset.items()):
        ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls=":", label="perfect")
        for method, (mean_p, rate) in curves.items():
            ax.plot(mean_p, rate, marker="o", ms=3.5, lw=1.3, label=method)
        ax.set(title=f"{name}: reliability ({BINS} bins)", xlabel="mean predicted P(class +1)",
               ylabel="observed rate of class +1", xlim=(0, 1), ylim=(0, 1))
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return save_figure(fig, path)


def main(argv=None):
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=csv_list(), default=["svmguide1", "higgs_small"])
    parser.add_argument("--centers", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--max-train", type=int, default=None, help="use at most this many training rows (drawn at random, seed 0)")
    args = parser.parse_args(argv)
    if args.quick:
        args.centers, args.epochs, args.max_train = 10, 2, args.max_train or 300

    from nyhopt.datasets import load_dataset

    out = output_dir(args)
    rows, curves = [], {}
    for name in args.datasets:
        ds = load_dataset(name, data_dir=args.data_dir)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # more centers than rows in --quick
            r, c = run_dataset(ds, args)
        rows += r
        curves[name] = c
    write_csv(rows, COLUMNS, out / "calibration.csv")
    notes = (f"HyperoptKRRClassifier(centers={args.centers}, epochs={args.epochs}, random_state=0); "
             "CalibratedClassifierCV(cv=3) refits it on two thirds of the rows three times; "
             "HistGradientBoostingClassifier with its defaults. ECE: 10 equal-width bins of P(class +1).")
    write_markdown(markdown_table(rows, COLUMNS, digits=4), out / "calibration.md",
                   "calibration of predict_proba", notes=notes, script="examples/calibration.py")
    plot(curves, out / "calibration.png")
    return rows


if __name__ == "__main__":
    main()
