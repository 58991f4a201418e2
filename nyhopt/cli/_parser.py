"""The argument parser of the ``nyhopt`` command line (one subcommand per command module)."""
from __future__ import annotations

import argparse

from ._common import (KERNELS, TASKS, nonneg_int, objective_names, objectives, positive_float, positive_int,
                      validation_arg)
from ._demo import cmd_demo
from ._device import DEVICES
from ._info import cmd_info
from ._predict import cmd_predict
from ._score import cmd_score
from ._tune import cmd_tune


_DESCRIPTION = """\
Nystrom kernel ridge regression that tunes its own hyperparameters.

nyhopt fits a kernel model (Nystrom kernel ridge regression) and learns its
penalty, its kernel lengthscales (one per column) and the Nystrom centers by
gradient descent on a model-selection objective, such as the L_Prop
objective of Meanti et al. (AISTATS 2022).
"""

_EPILOG = """\
examples:
  nyhopt demo                                  # tune on scikit-learn's digits, print the test error
  nyhopt tune data.csv --target price --out model.npz --report report.png
  nyhopt predict model.npz new.csv --out predictions.csv
  nyhopt score model.npz test.csv --std        # RMSE, MAE, R2 and the error bars on rows with targets
  nyhopt info                                  # versions, GPU, threads: paste into bug reports

Run 'nyhopt <command> --help' for the options of a command.
"""


def add_device(parser):
    parser.add_argument("--device", choices=DEVICES, default="auto",
                        help="where to compute: auto (the GPU when CuPy sees one, else the CPU), "
                             "cpu or gpu (default auto)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``nyhopt`` command."""
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="nyhopt", description=_DESCRIPTION, epilog=_EPILOG, formatter_class=fmt)
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"nyhopt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>")

    # demo -------------------------------------------------------------------------
    demo = sub.add_parser(
        "demo", formatter_class=fmt,
        help="tune on scikit-learn's bundled digits and report the test error",
        description="Tune N-KRR with L_Prop on scikit-learn's bundled digits (1797 images of 8x8\n"
                    "pixels, 10 classes): 80/20 train/test split, one-hot targets, 500 centers,\n"
                    "50 Adam epochs at learning rate 0.1. Prints the progress, the test error and\n"
                    "the time. Needs scikit-learn: pip install \"nyhopt[demo]\".",
    )
    demo.add_argument("--seed", type=nonneg_int, default=0, help="seed of the split and of the centers (default 0)")
    demo.add_argument("--objective", choices=objectives(), default="prop", help="objective (default prop)")
    demo.add_argument("--centers", type=positive_int, default=500, help="number of centers (default 500)")
    demo.add_argument("--epochs", type=nonneg_int, default=50, help="Adam epochs (default 50)")
    demo.add_argument("--lr", type=positive_float, default=0.1, help="learning rate (default 0.1)")
    demo.add_argument("--float64", action="store_true", help="compute in float64 (default float32)")
    demo.add_argument("--blas-threads", type=nonneg_int, default=0, metavar="N",
                      help="limit the BLAS thread pools during the demo to N threads (default 0: no limit; "
                           "nyhopt keeps BLAS and Numba threads from competing by itself)")
    demo.add_argument("--report", metavar="PNG", help="also save a picture of the run (needs matplotlib)")
    add_device(demo)
    demo.add_argument("--quiet", action="store_true", help="print only the result")
    demo.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    demo.set_defaults(func=cmd_demo)

    # tune ---------------------------------------------------------------------------
    tune = sub.add_parser(
        "tune", formatter_class=fmt,
        help="tune a model on a CSV file and save it",
        description="Tune a model on a CSV file (with a header row) and save it to a .npz file.\n"
                    "Every column except the target is a feature and must be numeric; the\n"
                    "target holds numbers (regression) or class labels (classification).\n"
                    "Features are standardized with the training statistics (as in the paper)\n"
                    "unless --no-standardize is given.",
        epilog="example:\n  nyhopt tune housing.csv --target price --objective prop --centers 100 \\\n"
               "      --epochs 200 --out model.npz --report report.png --json summary.json",
    )
    tune.add_argument("data", help="CSV file with a header row")
    tune.add_argument("--target", required=True, help="name (or 0-based index) of the target column")
    tune.add_argument("--features", help="comma-separated feature columns (default: all but the target)")
    tune.add_argument("--objective", type=objective_names, default="auto", metavar="NAME[,NAME...]",
                      help="objective to minimize, or a comma-separated list of candidates of which the one "
                           "with the lowest validation error is kept (needs --validation); among "
                           f"{', '.join(objectives())}; auto (the default): prop, or with --time-budget the "
                           "better of prop and sgpr on held-out rows")
    tune.add_argument("--centers", type=positive_int, default=100, help="number of Nystrom centers (default 100)")
    tune.add_argument("--epochs", type=nonneg_int, default=200, help="maximal Adam epochs (default 200)")
    tune.add_argument("--time-budget", type=positive_float, default=None, metavar="SECONDS",
                      help="spend at most this long, the final fit included: the centers start at --centers "
                           "and grow while it pays; --epochs caps each stage (default: no budget)")
    tune.add_argument("--lr", type=positive_float, default=0.05, help="learning rate (default 0.05)")
    tune.add_argument("--kernel", choices=KERNELS, default="gaussian", help="kernel (default gaussian)")
    tune.add_argument("--no-ard", action="store_true", help="one lengthscale for all features (default: one per feature)")
    tune.add_argument("--freeze-amplitude", action="store_true",
                      help="keep the kernel amplitude at 1 (sgpr learns it by default; the other objectives "
                           "ignore it)")
    tune.add_argument("--task", choices=TASKS, default="auto",
                      help="regression or classification (default auto: classification for text labels "
                           "or integers with at most 20 values)")
    tune.add_argument("--validation-fraction", "--validation", type=validation_arg, default=0.0, metavar="F",
                      help="hold out this fraction of the rows to report a validation error, or to choose "
                           "among several --objective candidates; an integer K >= 2 chooses among them by "
                           "K-fold validation (K times the cost; default 0: none)")
    tune.add_argument("--patience", type=nonneg_int, default=10,
                      help="stop after this many epochs without improvement, 0 = never (default 10)")
    tune.add_argument("--seed", type=nonneg_int, default=0, help="random seed (default 0)")
    tune.add_argument("--float32", action="store_true", help="compute in float32 (default float64)")
    tune.add_argument("--no-standardize", action="store_true", help="do not standardize the features")
    tune.add_argument("--delimiter", help="field separator (default: guessed among , ; tab)")
    tune.add_argument("--out", default="model.npz", help="model file to write (default model.npz)")
    tune.add_argument("--report", metavar="PNG", help="save a picture of the run (needs matplotlib)")
    tune.add_argument("--json", metavar="FILE", help="save a JSON summary (settings, results, history)")
    tune.add_argument("--quiet", action="store_true",
                      help="no progress (a bar on a terminal, else a line every 10 s) and no summary")
    add_device(tune)
    tune.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    tune.set_defaults(func=cmd_tune)

    # predict ------------------------------------------------------------------------
    predict = sub.add_parser(
        "predict", formatter_class=fmt,
        help="predict with a saved model",
        description="Predict with a model saved by 'nyhopt tune'. The CSV file needs a header\n"
                    "row with the model's feature columns (other columns, such as the target,\n"
                    "are ignored).",
    )
    predict.add_argument("model", help="model file (.npz) written by 'nyhopt tune'")
    predict.add_argument("data", help="CSV file with a header row")
    predict.add_argument("--out", help="CSV file to write (default: standard output)")
    predict.add_argument("--delimiter", help="field separator (default: guessed)")
    predict.add_argument("--std", action="store_true",
                         help="also write the standard deviation of each prediction (the spread of a new "
                              "observation; regression models), in a column <target>_std")
    add_device(predict)
    predict.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    predict.set_defaults(func=cmd_predict)

    # score --------------------------------------------------------------------------
    score = sub.add_parser(
        "score", formatter_class=fmt,
        help="score a saved model on a CSV file that holds the targets",
        description="Score a saved model on the rows of a CSV file (with a header row) that holds the\n"
                    "model's feature columns and the target. Regression: RMSE, MAE and R2 (with --std\n"
                    "also the 95% interval coverage and the NLPD of the error bars); classification:\n"
                    "the error rate, the log loss of predict_proba and the expected calibration error\n"
                    "over 10 bins.",
        epilog="example:\n  nyhopt score model.npz test.csv --target price --std --json",
    )
    score.add_argument("model", help="model file (.npz) written by 'nyhopt tune' or nyhopt.save_model")
    score.add_argument("data", help="CSV file with a header row")
    score.add_argument("--target", help="name (or 0-based index) of the target column (default: the target "
                                        "the model was tuned on, as 'nyhopt tune' saved it)")
    score.add_argument("--std", action="store_true",
                       help="also score the error bars (regression models): 95%% interval coverage and NLPD")
    score.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    score.add_argument("--delimiter", help="field separator (default: guessed)")
    add_device(score)
    score.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    score.set_defaults(func=cmd_score)

    # info ---------------------------------------------------------------------------
    info = sub.add_parser(
        "info", formatter_class=fmt,
        help="versions, device, CUDA compiler and thread settings (for bug reports)",
        description="Print the versions of Python, nyhopt and its libraries, the GPU (through CuPy),\n"
                    "whether nyhopt's CUDA kernels compile, and the thread settings: paste it into\n"
                    "bug reports.",
    )
    info.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    info.add_argument("--no-compile", action="store_true", help="skip the CUDA compile check")
    info.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    info.set_defaults(func=cmd_info)
    return parser
