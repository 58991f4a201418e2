"""The columns of a table for a command: features as numbers, and a saved model's feature columns.

A cell that is not a number stops the command with its line and column
(:func:`nyhopt.io.numeric_columns`); a missing cell (empty, or a marker such
as ``NA`` or ``nan``) is not a category to encode but a value to impute, so
its message says that instead (docs/cli.md, "Errors").
"""
from __future__ import annotations

import math

import numpy as np

from ..inputs._missing import is_missing

__all__ = ["feature_matrix", "model_columns", "first_bad_cell", "is_number", "line_of"]

#: What to do with missing features on the command line.
IMPUTE = ("every feature needs a value: impute the missing values first (for instance with each column's mean, "
          "or scikit-learn's SimpleImputer) or drop the rows that hold them")


def line_of(table, row: int) -> int:
    """The file's line number of data row ``row`` (the header is line 1)."""
    return table.lines[row] if table.lines and row < len(table.lines) else row + 2


def is_number(cell: str) -> bool:
    """Whether the text ``cell`` is a finite number."""
    try:
        return math.isfinite(float(cell))
    except ValueError:
        return False


def first_bad_cell(table, columns):
    """``(row, column)`` of the first cell of ``columns`` that is not a finite number, column by column; or None.

    The cell :func:`nyhopt.io.numeric_columns` reports, in the same order.
    """
    for j in columns:
        for i, cell in enumerate(table.cells[:, j].tolist()):
            if not is_number(cell):
                return i, j
    return None


def _missing_error(table, columns, exc):
    """``exc`` (a refused cell), or, when that cell is missing, the error that says to impute it."""
    from ..io import DataError

    bad = first_bad_cell(table, columns)
    if bad is None or not is_missing(str(table.cells[bad])):
        return exc
    i, j = bad
    cell = str(table.cells[bad])
    what = "an empty (missing) value" if cell == "" else f"{cell!r}, a missing value"
    return DataError(f"{table.path}, line {line_of(table, i)}, column {table.names[j]!r}: {what}; {IMPUTE}")


def feature_matrix(table, columns, dtype=np.float64):
    """The ``columns`` of ``table`` as a float array (:func:`nyhopt.io.numeric_columns`).

    Raises
    ------
    DataError
        A cell that is not a finite number, with its line and column: text
        is a category to encode, a missing cell a value to impute.
    """
    from ..io import DataError, numeric_columns

    try:
        return numeric_columns(table, columns, dtype=dtype)
    except DataError as exc:
        raise _missing_error(table, columns, exc) from None


def model_columns(model, table, exclude=()):
    """The indices in ``table`` of ``model``'s feature columns, in the model's order.

    By name when the model has them (``feature_names_in_``, or the names an
    older ``nyhopt tune`` kept in its summary): other columns are ignored.
    Without names, every column but those in ``exclude`` (the target), which
    must be as many as the model's features.

    Raises
    ------
    DataError
        A feature column is missing, or the number of columns differs.
    """
    from ..io import DataError, column_index

    names = getattr(model, "feature_names_in_", None)
    if names is None:
        names = getattr(model, "meta_", {}).get("feature_names")
    d = model.n_features_in_
    if names is not None:
        names = [str(s) for s in np.atleast_1d(names)]
        missing = [s for s in names if s not in table.names]
        if missing:
            raise DataError(f"{table.path} lacks the column(s) {missing} that the model was trained on; "
                            f"its columns are {table.names}")
        return [column_index(table, s) for s in names]
    cols = [k for k in range(len(table.names)) if k not in exclude]
    if len(cols) != d:
        besides = " besides the target" if exclude else ""
        raise DataError(f"the model expects {d} feature columns but {table.path} has {len(cols)}{besides}")
    return cols
