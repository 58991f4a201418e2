"""The ``nyhopt demo`` over several seeds: mean and spread of the digits test error.

Each seed draws its own 80/20 split of scikit-learn's digits and its own 500
initial centers, then runs exactly what ``nyhopt demo`` runs (L_Prop, 50 Adam
epochs at learning rate 0.1, float32). Writes ``digits_seeds.md`` and
``digits_seeds.csv`` (one row per seed, and the mean and standard deviation)
into ``docs/results/`` (``--quick``: ``docs/results/quick/``).

The reference library's notebook reports 0.83% for one split; the target of
the demo is a test error of at most 1.0%.

```
python examples/digits_seeds.py                 # 5 seeds, about 5 times the demo's time
python examples/digits_seeds.py --quick         # 2 seeds, 100 centers, 5 epochs (seconds)
```
"""
from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import base_parser, csv_list, log, markdown_table, mean_std, output_dir, write_csv, write_markdown  # noqa: E402

COLUMNS = ["seed", "test_error_percent", "wrong", "n_test", "seconds", "penalty", "best_epoch"]


def main(argv=None):
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=csv_list(int), default=[0, 1, 2, 3, 4],
                        help="comma-separated seeds (default 0,1,2,3,4)")
    parser.add_argument("--centers", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--objective", default="prop")
    parser.add_argument("--float64", action="store_true", help="compute in float64 (default float32)")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.centers, args.epochs = args.seeds[:2], 100, 5

    from nyhopt.cli import DEMO_INIT, run_demo

    dtype = np.float64 if args.float64 else np.float32
    rows = []
    for seed in args.seeds:
        out = run_demo(seed=seed, objective=args.objective, centers=args.centers, epochs=args.epochs,
                       lr=args.lr, dtype=dtype, quiet=True, stream=io.StringIO())
        rows.append({"seed": seed, "test_error_percent": 100 * out["test_error"],
                     "wrong": out["wrong"], "n_test": out["n_test"],
                     "seconds": out["seconds"], "penalty": out["penalty"],
                     "best_epoch": out["result"].best_epoch})
        log(args, f"seed {seed}: test error {100 * out['test_error']:.2f}% in {out['seconds']:.1f} s")

    errs = [r["test_error_percent"] for r in rows]
    secs = [r["seconds"] for r in rows]
    (em, es), (tm, ts) = mean_std(errs), mean_std(secs)
    summary = (f"mean test error {em:.2f}% (std {es:.2f}, min {min(errs):.2f}, max {max(errs):.2f}) "
               f"over {len(rows)} seeds; time {tm:.1f} s (std {ts:.1f}) per run")
    log(args, summary)

    out_dir = output_dir(args)
    write_csv(rows, COLUMNS, out_dir / "digits_seeds.csv")
    notes = (f"{summary}.\n\nSetting: {args.objective}, {args.centers} centers, {args.epochs} epochs, "
             f"lr {args.lr}, {np.dtype(dtype).name}, initial penalty {DEMO_INIT['penalty']:g} and "
             f"lengthscale {DEMO_INIT['lengthscale']:g}, noise variance 1/10 (tune's default for one-hot "
             "targets; the `nyhopt demo` settings); the test split is "
             "20% of the 1797 images, drawn per seed. Times are wall-clock seconds of `tune` "
             "(tuning and the final fit), BLAS limited to one thread as in the demo.")
    write_markdown(markdown_table(rows, COLUMNS), out_dir / "digits_seeds.md",
                   "digits demo over seeds", notes=notes, script="examples/digits_seeds.py")
    return rows


if __name__ == "__main__":
    main()
