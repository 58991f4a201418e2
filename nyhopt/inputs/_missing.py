"""Missing values: how they are recognized in text and objects, and what their messages advise.

A missing value is not a category: the advice for a NaN, an empty cell, ``None``
or a marker such as ``NA`` is to impute it or to drop its rows, while text that
is not a number is a category to encode (docs/pipelines.md, docs/cli.md).

Examples
--------
>>> is_missing(""), is_missing("NA"), is_missing(float("nan")), is_missing("red")
(True, True, True, False)
"""
from __future__ import annotations

import math

__all__ = ["MISSING_TEXT", "X_ADVICE", "Y_ADVICE", "is_missing", "advice_for"]

#: Text that stands for a missing value: an empty cell and the markers pandas' ``read_csv`` reads as NaN.
MISSING_TEXT = frozenset({
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A",
    "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
})

#: What to do with missing features.
X_ADVICE = ("impute the missing values first (for instance with scikit-learn's SimpleImputer in a Pipeline) "
            "or drop the rows that hold them")
#: What to do with missing targets.
Y_ADVICE = "drop the rows whose target is missing"

# The names under which entry points check data rows (``X``, ``validation X``, ``X (row block 3)``) and targets.
_FEATURE_NAMES = ("X", "validation X", "X_val")
_TARGET_NAMES = ("y", "Y", "validation y", "y_val")


def is_missing(value) -> bool:
    """Whether a cell or an element stands for a missing value: None, NaN, pandas' NA or NaT, :data:`MISSING_TEXT`."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    if isinstance(value, str):
        return value.strip() in MISSING_TEXT
    if isinstance(value, float):
        return math.isnan(value)
    try:
        return bool(value != value)  # NumPy floating NaN
    except (TypeError, ValueError):
        return False


def advice_for(name: str) -> str:
    """The advice for a missing value in the argument ``name``: :data:`X_ADVICE`, :data:`Y_ADVICE` or ``""``.

    Examples
    --------
    >>> advice_for("X (row block 2)") == X_ADVICE, advice_for("y") == Y_ADVICE, advice_for("centers")
    (True, True, '')
    """
    base = name.split(" (")[0]
    if base in _FEATURE_NAMES:
        return X_ADVICE
    if base in _TARGET_NAMES:
        return Y_ADVICE
    return ""
