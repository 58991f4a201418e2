"""The transform choice on the paper's sets: the default budgeted call against scaling only, same seed.

Protocol: the split of :func:`nyhopt.datasets.load_dataset` (features and
targets standardized on the training part, as on the accuracy-at-scale
page), then ``tune(X, y, time_budget=T)`` with ``standardize=True`` (the
default: the warp of skewed columns is tuned on held-out rows and kept
where it measures clearly better; ``docs/tuning.md``, "Transforms") and
with ``standardize="scale"`` (no choice).  Test RMSE in standardized units,
95% coverage, wall time and what was chosen.  Writes
``transform_choice_sets.{csv,md}``::

    python examples/transform_choice_sets.py --datasets cpusmall,protein,abalone --budgets 120
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

COLUMNS = ["dataset", "n_train", "method", "budget", "wall_s", "rmse", "coverage", "transform", "centers"]


def main(argv=None):
    import nyhopt as nh
    from nyhopt import metrics
    from nyhopt.datasets import load_dataset

    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=common.csv_list(str), default=["cpusmall", "protein", "abalone"])
    parser.add_argument("--budgets", type=common.csv_list(float), default=[120.0])
    args = parser.parse_args(argv)
    out = common.output_dir(args)
    rows = []
    for name in args.datasets:
        ds = load_dataset(name, seed=0, data_dir=args.data_dir)
        for budget in args.budgets:
            for method, standardize in (("default", True), ("scale", "scale")):
                t0 = time.perf_counter()
                res = nh.tune(ds.X_train, ds.y_train, task="regression", time_budget=budget, random_state=0,
                              progress=False, standardize=standardize)
                wall = time.perf_counter() - t0
                mean, std = res.model.predict(ds.X_test, return_std=True)
                rows.append(dict(dataset=name, n_train=ds.X_train.shape[0], method=method, budget=budget,
                                 wall_s=round(wall, 1), rmse=round(metrics.rmse(ds.y_test, mean), 4),
                                 coverage=round(metrics.coverage(ds.y_test, mean, std, level=0.95), 3),
                                 transform=common.transform_label(res.transform), centers=int(res.params.n_centers)))
                common.log(args, rows[-1])
                common.write_results(rows, COLUMNS, out, "transform_choice_sets", "The transform choice on the paper's sets",
                                     "examples/transform_choice_sets.py")


if __name__ == "__main__":
    main()
