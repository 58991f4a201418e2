"""The ``nyhopt`` command line: ``demo``, ``tune``, ``predict`` and ``info``.

Run ``nyhopt --help`` or ``nyhopt <command> --help``.  Errors in the input
(missing file, unknown column, text where a number is needed, an unknown
objective...) are reported in one line on stderr with exit status 2; add
``--debug`` to see the Python traceback instead.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
import warnings

import numpy as np

from ._compile_notice import compile_notice

__all__ = ["main", "build_parser", "run_demo", "digits_split", "DEMO_INIT"]

EXIT_USAGE = 2
KERNELS = ("gaussian", "laplacian", "matern12", "matern32", "matern52")
TASKS = ("auto", "regression", "classification")


class CLIError(Exception):
    """An error to report in one line (exit status 2)."""


def _objectives():
    try:
        from .objectives import available_objectives

        return available_objectives()
    except ImportError:  # pragma: no cover - partial installs only
        return ["holdout", "loocv", "gcv", "creg", "sgpr", "prop", "stoch-prop"]


# ----------------------------------------------------------------------------- argument types


def _int_at_least(low):
    """An argparse type: a whole number >= ``low``."""

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected a number >= {low}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1)
_nonneg_int = _int_at_least(0)


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text}")
    return value


def _validation(text):
    """``--validation``: a fraction in [0, 1) (0: none) or a number of folds k >= 2."""
    try:
        folds = int(text)
    except ValueError:
        return _fraction(text)
    if folds == 0:
        return 0.0
    if folds < 2:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1) or a number of folds >= 2, got {text}")
    return folds


def _fraction(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1), got {text}")
    return value


def _objective_names(text):
    """An argparse type: one objective name (a str) or a comma-separated list of names."""
    known = _objectives()
    names = [part.strip().lower().replace("_", "-") for part in text.split(",")]
    for name in names:
        if name not in known:
            raise argparse.ArgumentTypeError(f"invalid choice: {name!r} (choose from {', '.join(known)})")
        if names.count(name) > 1:
            raise argparse.ArgumentTypeError(f"objective {name!r} is listed twice")
    return names[0] if len(names) == 1 else names


# ----------------------------------------------------------------------------- output paths


def _check_output(path, option):
    """Fail now, before any work, when ``path`` cannot be written; create nothing.

    The folder must exist, be a folder and be writable; ``path`` must not be a folder and,
    when it exists, must be writable.
    """
    if not path:
        raise CLIError(f"{option}: empty path")
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise CLIError(f"{option} {path}: is a folder, not a file")
    if not os.path.exists(folder):
        raise CLIError(f"{option} {path}: the folder {folder} does not exist")
    if not os.path.isdir(folder):
        raise CLIError(f"{option} {path}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise CLIError(f"{option} {path}: permission denied")


def _npz_path(path):
    """The file :func:`nyhopt.io.save_model` writes for ``path``."""
    return path if path.endswith(".npz") else path + ".npz"


# ----------------------------------------------------------------------------- device


DEVICES = ("auto", "cpu", "gpu")


def _gpu_module():
    """CuPy when it reports a usable CUDA device, else ``None``.

    The one place that decides whether the GPU path runs: tests replace it with a stand-in
    module (``asarray``/``asnumpy``) to follow that path without a GPU.
    """
    from .backend import cupy_or_none, gpu_available

    return cupy_or_none() if gpu_available() else None


def _array_module(device):
    """``numpy`` for the CPU, the CuPy module for the GPU (``device`` in :data:`DEVICES`)."""
    if device == "cpu":
        return np
    cp = _gpu_module()
    if cp is not None:
        return cp
    if device == "gpu":
        raise CLIError("--device gpu: no usable CUDA GPU (CuPy is not installed or sees no device; "
                       "see 'nyhopt info')")
    return np


def _to_host(a, xp):
    return a if xp is np else np.asarray(xp.asnumpy(a))


def _model_to(model, xp):
    """Move the fitted arrays of ``model`` (and of its inner ``model_``) to ``xp``'s device.

    Class labels stay on the host: CuPy cannot hold text.
    """
    if xp is np:
        return model
    for obj in (model, getattr(model, "model_", None)):
        if obj is None:
            continue
        for name, value in list(vars(obj).items()):
            if name != "classes_" and isinstance(value, np.ndarray) and value.dtype.kind in "fiu":
                setattr(obj, name, xp.asarray(value))
    return model


# ----------------------------------------------------------------------------- parser


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
  nyhopt info                                  # versions, GPU, threads: paste into bug reports

Run 'nyhopt <command> --help' for the options of a command.
"""


def _add_device(parser):
    parser.add_argument("--device", choices=DEVICES, default="auto",
                        help="where to compute: auto (the GPU when CuPy sees one, else the CPU), "
                             "cpu or gpu (default auto)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``nyhopt`` command."""
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="nyhopt", description=_DESCRIPTION, epilog=_EPILOG, formatter_class=fmt)
    from . import __version__

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
    demo.add_argument("--seed", type=_nonneg_int, default=0, help="seed of the split and of the centers (default 0)")
    demo.add_argument("--objective", choices=_objectives(), default="prop", help="objective (default prop)")
    demo.add_argument("--centers", type=_positive_int, default=500, help="number of centers (default 500)")
    demo.add_argument("--epochs", type=_nonneg_int, default=50, help="Adam epochs (default 50)")
    demo.add_argument("--lr", type=_positive_float, default=0.1, help="learning rate (default 0.1)")
    demo.add_argument("--float64", action="store_true", help="compute in float64 (default float32)")
    demo.add_argument("--blas-threads", type=_nonneg_int, default=0, metavar="N",
                      help="limit the BLAS thread pools during the demo to N threads (default 0: no limit; "
                           "nyhopt keeps BLAS and Numba threads from competing by itself)")
    demo.add_argument("--report", metavar="PNG", help="also save a picture of the run (needs matplotlib)")
    _add_device(demo)
    demo.add_argument("--quiet", action="store_true", help="print only the result")
    demo.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    demo.set_defaults(func=_cmd_demo)

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
    tune.add_argument("--objective", type=_objective_names, default="prop", metavar="NAME[,NAME...]",
                      help="objective to minimize, or a comma-separated list of candidates of which the one "
                           "with the lowest validation error is kept (needs --validation); among "
                           f"{', '.join(_objectives())} (default prop)")
    tune.add_argument("--centers", type=_positive_int, default=100, help="number of Nystrom centers (default 100)")
    tune.add_argument("--epochs", type=_nonneg_int, default=200, help="maximal Adam epochs (default 200)")
    tune.add_argument("--lr", type=_positive_float, default=0.05, help="learning rate (default 0.05)")
    tune.add_argument("--kernel", choices=KERNELS, default="gaussian", help="kernel (default gaussian)")
    tune.add_argument("--no-ard", action="store_true", help="one lengthscale for all features (default: one per feature)")
    tune.add_argument("--freeze-amplitude", action="store_true",
                      help="keep the kernel amplitude at 1 (sgpr learns it by default; the other objectives "
                           "ignore it)")
    tune.add_argument("--task", choices=TASKS, default="auto",
                      help="regression or classification (default auto: classification for text labels "
                           "or integers with at most 20 values)")
    tune.add_argument("--validation-fraction", "--validation", type=_validation, default=0.0, metavar="F",
                      help="hold out this fraction of the rows to report a validation error, or to choose "
                           "among several --objective candidates; an integer K >= 2 chooses among them by "
                           "K-fold validation (K times the cost; default 0: none)")
    tune.add_argument("--patience", type=_nonneg_int, default=10,
                      help="stop after this many epochs without improvement, 0 = never (default 10)")
    tune.add_argument("--seed", type=_nonneg_int, default=0, help="random seed (default 0)")
    tune.add_argument("--float32", action="store_true", help="compute in float32 (default float64)")
    tune.add_argument("--no-standardize", action="store_true", help="do not standardize the features")
    tune.add_argument("--delimiter", help="field separator (default: guessed among , ; tab)")
    tune.add_argument("--out", default="model.npz", help="model file to write (default model.npz)")
    tune.add_argument("--report", metavar="PNG", help="save a picture of the run (needs matplotlib)")
    tune.add_argument("--json", metavar="FILE", help="save a JSON summary (settings, results, history)")
    tune.add_argument("--quiet", action="store_true", help="no progress bar and no summary")
    _add_device(tune)
    tune.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    tune.set_defaults(func=_cmd_tune)

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
    _add_device(predict)
    predict.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    predict.set_defaults(func=_cmd_predict)

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
    info.set_defaults(func=_cmd_info)
    return parser


# ----------------------------------------------------------------------------- helpers


def _say(args, *parts, **kw):
    if not getattr(args, "quiet", False):
        print(*parts, **kw, flush=True)


def _note(args, text):
    """A warning in one line on stderr (shown even with --quiet)."""
    print(f"nyhopt {args.command}: warning: {text}", file=sys.stderr, flush=True)


def _fmt_error(task, value):
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{100 * value:.2f}%" if task == "classification" else f"{value:.6g}"


def _require(module, what, extra):
    """Fail now, before any work, when the optional ``module`` that ``what`` needs is not installed."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        package = {"sklearn": "scikit-learn"}.get(module, module)
        raise CLIError(f"{what} needs {package}, which is not installed: pip install \"nyhopt[{extra}]\"")


def _split_names(text):
    return [s.strip() for s in text.split(",") if s.strip()]


def _target_values(table, j, task):
    """Targets of column ``j``: floats (or ints for integer labels), or text labels."""
    from .io import DataError, numeric_columns

    try:
        values = numeric_columns(table, [j])[:, 0]
    except DataError as exc:
        if task == "regression":
            raise DataError(f"{exc} (the target of a regression must be numeric)") from None
        cells = table.cells[:, j]
        if np.any(cells == ""):
            row = int(np.argmax(cells == ""))
            line = table.lines[row] if table.lines else row + 2
            raise DataError(f"{table.path}, line {line}, column {table.names[j]!r}: the target is empty "
                            "(a missing value)") from None
        return cells.astype(str)
    if task != "regression" and np.all(values == np.round(values)) and np.all(np.abs(values) < 2**53):
        ints = values.astype(np.int64)
        from .optim._targets import resolve_task

        if task == "classification" or resolve_task(ints, "auto") == "classification":
            return ints
    return values


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def _clean_floats(obj):
    """NaN/inf -> None so that the JSON is standard."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean_floats(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean_floats(v) for v in obj]
    return obj


# ----------------------------------------------------------------------------- demo


#: Initial hyperparameters of the demo: those of the reference notebook (lengthscale 1 for
#: every pixel, penalty 1e-5). The paper's median heuristic (about 10 here) starts at a test
#: error of 0.8% that L_Prop then drives up to 4-5% in 50 epochs (measured; see docs/cli.md).
DEMO_INIT = {"penalty": 1e-5, "lengthscale": 1.0}


def digits_split(seed=0, test_fraction=0.2, dtype=np.float64):
    """scikit-learn's digits, split at random and scaled as in the reference notebook.

    The pixels share one unit (gray levels 0-16), so they are standardized
    together: minus the mean and over the standard deviation of all training
    pixels (per-pixel scaling would blow up the nearly always blank border
    pixels).

    Parameters
    ----------
    seed : int, default 0
        Seed of the permutation; its first ``round(test_fraction * 1797)`` rows are the test set.
    test_fraction : float, default 0.2
    dtype : numpy dtype, default float64

    Returns
    -------
    X_train, y_train, X_test, y_test : numpy.ndarray
        Scaled pixels (n, 64) and the digits 0-9.

    Raises
    ------
    CLIError
        Without scikit-learn.

    Examples
    --------
    >>> X_tr, y_tr, X_te, y_te = digits_split(0)
    >>> X_tr.shape, X_te.shape, round(float(X_tr.mean()), 12), round(float(X_tr.std()), 12)
    ((1438, 64), (359, 64), 0.0, 1.0)
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise CLIError('the demo uses scikit-learn\'s bundled digits: pip install "nyhopt[demo]"') from None

    X, y = load_digits(return_X_y=True)
    perm = np.random.default_rng(seed).permutation(X.shape[0])
    n_test = int(round(test_fraction * X.shape[0]))
    tr, te = np.sort(perm[n_test:]), np.sort(perm[:n_test])
    X_tr, X_te = X[tr].astype(np.float64), X[te].astype(np.float64)
    mean, std = X_tr.mean(), X_tr.std()
    return ((X_tr - mean) / std).astype(dtype), y[tr], ((X_te - mean) / std).astype(dtype), y[te]


def _blas_threads(n):
    """Context limiting the BLAS thread pools to ``n`` threads (no-op for 0 or without threadpoolctl)."""
    import contextlib

    if not n:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits  # installed with scikit-learn
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext()
    return threadpool_limits(limits=int(n), user_api="blas")


def run_demo(seed=0, objective="prop", centers=500, epochs=50, lr=0.1, dtype=np.float32, report=None,
             quiet=False, stream=None, blas_threads=0, device="cpu") -> dict:
    """Tune on scikit-learn's digits and report the test error (the ``nyhopt demo`` command).

    Parameters
    ----------
    seed : int, default 0
        Seed of the 80/20 split, of the initial centers and of the objective.
    objective : str, default "prop"
    centers : int, default 500
    epochs : int, default 50
    lr : float, default 0.1
    dtype : numpy dtype, default float32
    report : str, optional
        Path of a picture of the run (needs matplotlib).
    quiet : bool, default False
        Print only the final line.
    stream : file-like, default sys.stdout
    blas_threads : int, default 0
        Limit of the BLAS thread pools while tuning (through threadpoolctl,
        which comes with scikit-learn); 0 leaves them alone.
    device : {"cpu", "gpu", "auto"}, default "cpu"
        Where to compute; "auto" takes the GPU when CuPy sees one.

    Returns
    -------
    dict
        ``test_error``, ``wrong`` and ``n_test`` (misclassified and total test
        images), ``seconds`` (tuning and final fit), ``epochs_run``,
        ``penalty`` and ``result`` (the :class:`~nyhopt.optim.TuneResult`).

    Examples
    --------
    >>> import io
    >>> out = run_demo(centers=20, epochs=1, quiet=True, stream=io.StringIO())
    >>> out["n_test"], out["epochs_run"], 0 <= out["test_error"] < 0.5
    (359, 1, True)
    """
    stream = sys.stdout if stream is None else stream
    if report:
        _check_output(report, "--report")
        _require("matplotlib", "--report", "plot")
    _require("sklearn", "the demo (it uses scikit-learn's bundled digits)", "demo")
    xp = _array_module(device)

    def say(text):
        if not quiet:
            print(text, file=stream, flush=True)

    # The first line comes before the slow imports (scikit-learn takes seconds the first time).
    say(f"nyhopt demo: N-KRR tuned with {objective} on scikit-learn's digits (8x8 images of handwritten digits)")
    from .optim import tune

    X_tr, y_tr, X_te, y_te = digits_split(seed, dtype=dtype)
    say(f"digits: {X_tr.shape[0]} training and {X_te.shape[0]} test images, "
        f"{X_tr.shape[1]} pixels, 10 classes (one-hot targets)")
    say(f"tuning penalty, {X_tr.shape[1]} lengthscales and {centers} centers with {objective}: "
        f"{epochs} Adam epochs, lr {lr}, {np.dtype(dtype).name}, starting from penalty "
        f"{DEMO_INIT['penalty']:g} and lengthscale {DEMO_INIT['lengthscale']:g}")

    def show(epoch, record):
        say(f"  epoch {epoch:3d}  objective {record.objective:.5f}  penalty {record.penalty:.3g}  "
            f"lengthscale median {float(np.median(record.lengthscale)):.3g}  {record.time:6.1f} s")

    t0 = time.perf_counter()
    with _blas_threads(blas_threads), compile_notice(enabled=not quiet):
        result = tune(xp.asarray(X_tr), xp.asarray(y_tr), objective=objective, centers=centers, epochs=epochs, lr=lr,
                      task="classification", random_state=seed, progress=False, record_terms=False,
                      patience=None, callback=show, **DEMO_INIT)
        seconds = time.perf_counter() - t0
        pred = _to_host(result.model.predict(xp.asarray(X_te)), xp)
    wrong = int(np.sum(pred != y_te))
    test_error = wrong / y_te.shape[0]
    print(f"test error: {100 * test_error:.2f}% ({wrong} of {y_te.shape[0]} test digits wrong); "
          f"time {seconds:.1f} s (best epoch {result.best_epoch})", file=stream, flush=True)
    if report:
        from .report import save_report

        path = save_report(result.history, report, best_epoch=result.best_epoch,
                           title=f"digits, {objective}: test error {100 * test_error:.2f}%")
        say(f"report saved to {path}")
    return {"test_error": test_error, "wrong": wrong, "n_test": int(y_te.shape[0]), "seconds": seconds,
            "epochs_run": len(result.history) - 1, "penalty": result.params.penalty, "result": result}


def _cmd_demo(args) -> int:
    run_demo(seed=args.seed, objective=args.objective, centers=args.centers, epochs=args.epochs,
             lr=args.lr, dtype=np.float64 if args.float64 else np.float32, report=args.report,
             quiet=args.quiet, blas_threads=args.blas_threads, device=args.device)
    return 0


# ----------------------------------------------------------------------------- tune


def _cmd_tune(args) -> int:
    from .hyperopt import HyperoptKRR, HyperoptKRRClassifier
    from .io import DataError, column_index, numeric_columns, read_csv, save_model
    from .optim._targets import resolve_task

    _check_output(_npz_path(args.out), "--out")
    if args.report:
        _check_output(args.report, "--report")
        _require("matplotlib", "--report", "plot")
    if args.json:
        _check_output(args.json, "--json")
    xp = _array_module(args.device)
    table = read_csv(args.data, delimiter=args.delimiter)
    j = column_index(table, args.target)
    target_name = table.names[j]
    if args.features:
        feat = [column_index(table, name) for name in _split_names(args.features)]
        if j in feat:
            raise DataError(f"the target column {target_name!r} is also listed in --features")
    else:
        feat = [k for k in range(len(table.names)) if k != j]
    if not feat:
        raise DataError(f"{table.path}: no feature columns (only the target {target_name!r})")
    X = numeric_columns(table, feat, dtype=np.float32 if args.float32 else np.float64)
    y = _target_values(table, j, args.task)
    task = resolve_task(y, args.task)
    n, d = X.shape
    folds = isinstance(args.validation_fraction, int)
    n_train = n - (math.ceil(n / args.validation_fraction) if folds else int(round(args.validation_fraction * n)))
    centers = args.centers
    if centers > n_train:  # as scikit-learn's Nystroem: all rows, with a warning
        _note(args, f"--centers {centers} is more than the {n_train} training rows: using all {n_train} rows "
                    f"as centers")
        centers = n_train
    several = not isinstance(args.objective, str)
    if several and not args.validation_fraction:
        raise CLIError("--objective with several names chooses by validation error: give --validation F "
                       "(for instance 0.2, or 5 for 5 folds)")
    if folds and not several:
        raise CLIError(f"--validation {args.validation_fraction} (folds) chooses among several --objective "
                       "names; with one objective give a fraction such as 0.2")

    cls = HyperoptKRRClassifier if task == "classification" else HyperoptKRR
    est = cls(objective=args.objective, centers=centers, epochs=args.epochs, lr=args.lr,
              kernel=args.kernel, ard=not args.no_ard, random_state=args.seed,
              standardize=not args.no_standardize, patience=args.patience or None,
              validation_fraction=args.validation_fraction or None,
              record_terms=bool(args.report or args.json), progress=not args.quiet,
              freeze=("amplitude",) if args.freeze_amplitude else ())
    names = [table.names[k] for k in feat]
    extra = ""
    if task == "classification":
        extra = f", {np.unique(y).size} classes"
    _say(args, f"data: {table.path}: {n} rows, {d} features, target {target_name!r} ({task}{extra})")
    if args.task == "auto" and task == "classification" and y.dtype.kind in "iuf":
        _note(args, f"the target {target_name!r} holds {np.unique(y).size} distinct integers, taken as class "
                    "labels; give --task regression to regress on them (or --task classification)")
    _say(args, f"tuning: objective {','.join(args.objective) + ' (chosen by validation)' if several else args.objective}, "
               f"{centers} centers, up to {args.epochs} epochs, "
               f"lr {args.lr}, kernel {args.kernel}{'' if args.no_ard else ' (one lengthscale per feature)'}")
    # On the GPU, text labels are fitted as their indices in the sorted labels (CuPy holds no
    # text) and the labels are put back before saving.
    text_classes = None
    y_fit = y
    if xp is not np and y.dtype.kind == "U":
        text_classes, y_fit = np.unique(y, return_inverse=True)
    X_fit = xp.asarray(X)
    t0 = time.perf_counter()
    with compile_notice(enabled=not args.quiet):
        est.fit(X_fit, xp.asarray(y_fit))
    elapsed = time.perf_counter() - t0

    hist = est.history_
    best = hist[est.best_epoch_]
    if args.validation_fraction and not several:
        # History errors were tracked at every epoch on the held-out rows; report the best epoch's.
        train_err, val_err = best.train_error, best.validation_error
    else:
        # No held-out rows in the final model's run (none asked for, or the chosen objective was tuned
        # again on all rows): the error on the rows it was fitted on, and the chosen candidate's.
        with compile_notice(enabled=not args.quiet):
            pred = _to_host(est.predict(X_fit), xp)
        if text_classes is not None:
            pred = text_classes[pred]
        from .optim._tracking import prediction_error

        train_err = prediction_error(pred, y, task)
        chosen = [c for c in est.candidates_ if c.objective == est.objective_]
        val_err = chosen[0].validation_error if chosen else float("nan")
    metric = "error rate" if task == "classification" else "RMSE"
    for cand in est.candidates_:
        _say(args, f"candidate {cand.objective}: validation {metric} {_fmt_error(task, cand.validation_error)}, "
                   f"objective {cand.objective_value:.6g}, {cand.epochs} epochs ({cand.stop_reason})")
    if several:
        criterion = "squared error of the scores" if task == "classification" else metric
        over = f", mean of {args.validation_fraction} folds" if folds else ""
        _say(args, f"chosen: {est.objective_} (lowest validation {criterion}{over}); tuned again on all {n} rows")
    ell = est.params_.lengthscale
    _say(args, f"done in {elapsed:.1f} s: {len(hist) - 1} epochs ({est.stop_reason_}), best epoch {est.best_epoch_}, "
               f"objective {best.objective:.6g}")
    _say(args, f"penalty {est.params_.penalty:.4g}; amplitude {est.amplitude_:.4g}; lengthscale "
               + (f"{ell[0]:.4g}" if ell.size == 1 else f"min {ell.min():.4g}, median {np.median(ell):.4g}, max {ell.max():.4g}"))
    if several:
        _say(args, f"{metric} on all {n} rows {_fmt_error(task, train_err)}; validation {metric} of "
                   f"{est.objective_} {_fmt_error(task, val_err)} (tuned on the training part)")
    else:
        _say(args, f"train {metric} {_fmt_error(task, train_err)}"
                   + (f"; validation {metric} {_fmt_error(task, val_err)}" if args.validation_fraction else ""))
    scores = getattr(est, "validation_scores_", None)
    if scores:
        _say(args, f"validation error bars: NLPD {scores['nlpd']:.4g} nats, 95% interval coverage "
                   f"{scores['coverage']:.3f} (final model, {n_train} training rows)")

    meta = {"objective": est.objective_, "epochs": len(hist) - 1, "best_epoch": est.best_epoch_,
            "stop_reason": est.stop_reason_, "train_error": train_err, "validation_error": val_err,
            "task": task, "target_name": target_name, "feature_names": np.array(names, dtype=str),
            "source": os.path.basename(table.path)}
    if text_classes is not None:
        est.classes_ = est.model_.classes_ = text_classes
    est.feature_names_in_ = np.array(names, dtype=object)  # nyhopt predict finds the columns by these names
    out = save_model(args.out, est, meta=meta)
    _say(args, f"model saved to {out}")
    if args.report:
        from .report import save_report

        path = save_report(hist, args.report, best_epoch=est.best_epoch_, error_name=metric,
                           title=f"{os.path.basename(table.path)}: {est.objective_}, target {target_name!r}")
        _say(args, f"report saved to {path}")
    if args.json:
        summary = {
            "data": table.path, "n_rows": n, "n_features": d, "features": names, "target": target_name,
            "task": task, "objective": est.objective_, "centers": args.centers, "epochs": args.epochs,
            "lr": args.lr, "kernel": args.kernel, "ard": not args.no_ard, "seed": args.seed,
            "standardize": not args.no_standardize, "validation_fraction": args.validation_fraction,
            "epochs_run": len(hist) - 1, "best_epoch": est.best_epoch_, "stop_reason": est.stop_reason_,
            "seconds": elapsed, "penalty": est.params_.penalty, "amplitude": est.amplitude_,
            "freeze_amplitude": args.freeze_amplitude, "lengthscale": ell.tolist(),
            "metric": metric, "train_error": train_err, "validation_error": val_err, "model": out,
            "noise_variance": est.noise_variance_, "validation_scores": scores,
            "history": hist.as_dict(),
            "candidates": [{"objective": c.objective, "validation_error": c.validation_error,
                            "validation_score": c.validation_score, "fold_errors": list(c.fold_errors),
                            "objective_value": c.objective_value, "epochs": c.epochs, "best_epoch": c.best_epoch,
                            "stop_reason": c.stop_reason, "seconds": c.elapsed} for c in est.candidates_],
        }
        with open(args.json, "w") as f:
            json.dump(_clean_floats(summary), f, indent=1, default=_json_default)
        _say(args, f"summary saved to {args.json}")
    return 0


# ----------------------------------------------------------------------------- predict


def _cmd_predict(args) -> int:
    from .io import DataError, column_index, load_model, numeric_columns, read_csv

    if args.out:
        _check_output(args.out, "--out")
    xp = _array_module(args.device)
    model = load_model(args.model)
    table = read_csv(args.data, delimiter=args.delimiter)
    meta = getattr(model, "meta_", {})
    names = meta.get("feature_names")
    d = model.n_features_in_
    if names is not None:
        names = [str(s) for s in np.atleast_1d(names)]
        missing = [s for s in names if s not in table.names]
        if missing:
            raise DataError(f"{table.path} lacks the column(s) {missing} that the model was trained on; "
                            f"its columns are {table.names}")
        cols = [column_index(table, s) for s in names]
    elif len(table.names) == d:
        cols = list(range(d))
    else:
        raise DataError(f"the model expects {d} feature columns but {table.path} has {len(table.names)}")
    X = numeric_columns(table, cols, dtype=np.float64)
    if args.std and getattr(model, "classes_", None) is not None:
        raise CLIError("--std is for regression models; this model is a classifier")
    if args.std and getattr(getattr(model, "model_", model), "variance_model_", None) is None:
        raise CLIError(f"{args.model} holds no variance model (saved by an older nyhopt, or fitted with "
                       "predictive_variance=False): run 'nyhopt tune' again to get --std")
    model = _model_to(model, xp)
    std = None
    if args.std:
        pred, std = (_to_host(a, xp) for a in model.predict(xp.asarray(X), return_std=True))
    else:
        pred = _predict_on(model, xp.asarray(X), xp)
    target = str(meta.get("target_name", "prediction")) or "prediction"
    if pred.ndim == 2:
        header = [f"{target}_{k}" for k in range(pred.shape[1])]
        rows = pred.tolist()
        if std is not None:
            header += [f"{name}_std" for name in header]
            rows = [r + s for r, s in zip(rows, std.tolist())]
    else:
        header = [target]
        rows = [[v] for v in pred.tolist()]
        if std is not None:
            header.append(f"{target}_std")
            rows = [r + [s] for r, s in zip(rows, std.tolist())]

    def cell(v):
        return repr(v) if isinstance(v, float) else str(v)

    stream = open(args.out, "w", newline="") if args.out else sys.stdout
    try:
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(header)
        for row in rows:
            writer.writerow([cell(v) for v in row])
    finally:
        if args.out:
            stream.close()
    if args.out:
        print(f"{len(rows)} predictions written to {args.out}", file=sys.stderr)
    return 0


def _predict_on(model, X, xp):
    """``model.predict(X)`` as a NumPy array; classes are looked up on the host.

    ``X`` holds the model's columns in its order (chosen by name by the caller), so the model's
    ``feature_names_in_`` is not checked against an array without names.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="X does not have valid feature names", category=UserWarning)
        with compile_notice():
            return _predict_array(model, X, xp)


def _predict_array(model, X, xp):
    classes = getattr(model, "classes_", None)
    if xp is np or classes is None:
        return _to_host(model.predict(X), xp)
    scores = _to_host(model.decision_function(X), xp)
    index = (scores > 0).astype(np.intp) if scores.ndim == 1 else np.argmax(scores, axis=1)
    return np.asarray(classes)[index]


# ----------------------------------------------------------------------------- info


def _cmd_info(args) -> int:
    from ._info import format_text, gather

    info = gather(compile_cuda=not args.no_compile)
    print(json.dumps(info, indent=1) if args.json else format_text(info))
    return 0


# ----------------------------------------------------------------------------- main


def main(argv=None) -> int:
    """Run the command line; returns the exit status (0 on success, 2 on bad input).

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name (default ``sys.argv[1:]``).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    from .io import DataError

    def one_line(message, category, filename, lineno, file=None, line=None):
        print(f"nyhopt {args.command}: warning: {message}", file=sys.stderr, flush=True)

    try:
        with warnings.catch_warnings():
            warnings.showwarning = one_line  # a warning in one line, not with a file name and source line
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("nyhopt: interrupted", file=sys.stderr)
        return 130
    except (OSError, csv.Error, DataError, CLIError, ValueError, TypeError, ImportError,
            np.linalg.LinAlgError) as exc:
        if getattr(args, "debug", False):
            raise
        msg = str(exc) or type(exc).__name__
        if isinstance(exc, OSError) and exc.filename:
            msg = f"{exc.strerror.lower() if exc.strerror else 'cannot open'}: {exc.filename}"
        print(f"nyhopt {args.command}: error: {msg}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
