"""What the commands share: exit status, argument types, one-line messages, target columns, JSON."""
from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from ..inputs._missing import Y_ADVICE, is_missing

EXIT_USAGE = 2
KERNELS = ("gaussian", "laplacian", "matern12", "matern32", "matern52")
TASKS = ("auto", "regression", "classification")


class CLIError(Exception):
    """An error to report in one line (exit status 2)."""


def objectives():
    try:
        from ..objectives import available_objectives

        return available_objectives()
    except ImportError:  # pragma: no cover - partial installs only
        return ["holdout", "loocv", "gcv", "creg", "sgpr", "prop", "stoch-prop"]


# ----------------------------------------------------------------------------- argument types


def int_at_least(low):
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


positive_int = int_at_least(1)
nonneg_int = int_at_least(0)


def positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text}")
    return value


def validation_arg(text):
    """``--validation``: a fraction in [0, 1) (0: none) or a number of folds k >= 2."""
    try:
        folds = int(text)
    except ValueError:
        return fraction(text)
    if folds == 0:
        return 0.0
    if folds < 2:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1) or a number of folds >= 2, got {text}")
    return folds


def fraction(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1), got {text}")
    return value


def objective_names(text):
    """An argparse type: one objective name (a str) or a comma-separated list of names."""
    known = objectives()
    names = [part.strip().lower().replace("_", "-") for part in text.split(",")]
    if names == ["auto"]:
        return "auto"
    for name in names:
        if name not in known:
            raise argparse.ArgumentTypeError(f"invalid choice: {name!r} (choose from {', '.join(known)})")
        if names.count(name) > 1:
            raise argparse.ArgumentTypeError(f"objective {name!r} is listed twice")
    return names[0] if len(names) == 1 else names


# ----------------------------------------------------------------------------- helpers


def say(args, *parts, **kw):
    if not getattr(args, "quiet", False):
        print(*parts, **kw, flush=True)


def note(args, text):
    """A warning in one line on stderr (shown even with --quiet)."""
    print(f"nyhopt {args.command}: warning: {text}", file=sys.stderr, flush=True)


def fmt_error(task, value):
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{100 * value:.2f}%" if task == "classification" else f"{value:.6g}"


def require(module, what, extra):
    """Fail now, before any work, when the optional ``module`` that ``what`` needs is not installed."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        package = {"sklearn": "scikit-learn"}.get(module, module)
        raise CLIError(f"{what} needs {package}, which is not installed: pip install \"nyhopt[{extra}]\"")


def split_names(text):
    return [s.strip() for s in text.split(",") if s.strip()]


def _missing_target(table, j, task):
    """The first missing target of column ``j`` as ``(row, cell)``, or None.

    An empty cell is always missing; a marker such as ``NA`` or ``nan`` is
    missing in a regression, or among numeric labels (a text label may be
    spelled ``NA``).
    """
    from ._columns import first_bad_cell, is_number

    cells = table.cells[:, j].tolist()
    if "" in cells:
        return cells.index(""), ""
    bad = first_bad_cell(table, [j])
    if bad is None or not is_missing(cells[bad[0]]):
        return None
    if task != "regression" and not all(is_number(c) for c in cells if not is_missing(c)):
        return None  # text labels: a marker is one of them
    return bad[0], cells[bad[0]]


def target_values(table, j, task, text_hint="for class labels give --task classification"):
    """Targets of column ``j``: floats (or ints for integer labels), or text labels.

    A missing target stops the command with its line (drop those rows); a
    regression's target must be numeric (``text_hint`` closes that message).
    """
    from ..io import DataError, numeric_columns
    from ._columns import first_bad_cell, line_of

    try:
        values = numeric_columns(table, [j])[:, 0]
    except DataError:
        missing = _missing_target(table, j, task)
        if missing is not None:
            row, cell = missing
            what = "empty (a missing value)" if cell == "" else f"{cell!r}, a missing value"
            raise DataError(f"{table.path}, line {line_of(table, row)}, column {table.names[j]!r}: the target is "
                            f"{what}; {Y_ADVICE}") from None
        if task == "regression":
            row, _ = first_bad_cell(table, [j])
            raise DataError(f"{table.path}, line {line_of(table, row)}, column {table.names[j]!r}: "
                            f"{str(table.cells[row, j])!r} is not a finite number; the target of a regression must be "
                            f"numeric ({text_hint})") from None
        return table.cells[:, j].astype(str)
    if task != "regression" and np.all(values == np.round(values)) and np.all(np.abs(values) < 2**53):
        ints = values.astype(np.int64)
        from ..optim._targets import resolve_task

        if task == "classification" or resolve_task(ints, "auto") == "classification":
            return ints
    return values


def json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def clean_floats(obj):
    """NaN/inf -> None so that the JSON is standard."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: clean_floats(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_floats(v) for v in obj]
    return obj
