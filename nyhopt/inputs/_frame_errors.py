"""Errors about a pandas DataFrame that name its column and its first bad row, as the command line does.

The conversion of a frame to an array loses the column names; when it (or the
finiteness check after it) fails, :func:`frame_errors` looks at the frame
again and says which column holds text or NaN, and where first.  Only the
failure path pays for this.  A missing cell (NaN, ``None``, pandas' NA, an
empty string or a marker such as ``"NA"``) is reported as NaN, with the
advice to impute it; only other text is a category to encode.
"""
from __future__ import annotations

import contextlib

import numpy as np

from ._missing import X_ADVICE, is_missing

__all__ = ["frame_errors", "frame_problem"]


def _is_frame(X) -> bool:
    return type(X).__module__.split(".")[0] == "pandas" and getattr(X, "ndim", 0) == 2 and hasattr(X, "iloc")


def _row(frame, i) -> str:
    label = frame.index[i]
    return f"row {i}" if (isinstance(label, (int, np.integer)) and label == i) else f"row {i} (index {label!r})"


def _as_floats(values):
    """``values`` as float64 (missing cells as NaN), or the position and value of the first text cell."""
    if values.dtype.kind in "biuf":
        return values.astype(np.float64, copy=False), None
    out = np.empty(values.shape[0])
    for i, v in enumerate(values):
        if is_missing(v):
            out[i] = np.nan
            continue
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            return None, (i, v)
    return out, None


def frame_problem(frame, name: str):
    """The message for the first text cell, else the NaN/infinity of ``frame``, or None when it has neither.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"dose": [1.0, 2.0, 3.0], "color": ["red", "2", "blue"]})
    >>> frame_problem(df, "X")
    "X: column 'color' is not numeric: 'red' at row 0; features must be numbers (encode text columns first)"
    >>> frame_problem(df.assign(color=[0.0, float("inf"), 1.0]), "X")
    "X contains NaN or infinity: column 'color', first at row 1"
    >>> print(frame_problem(df.assign(color=["1", "", "2"]), "X"))  # doctest: +ELLIPSIS
    X contains NaN or infinity: column 'color', first at row 1; a NaN is a missing value: impute ... rows that hold them
    """
    columns, bad, missing = [], [], False
    for j, col in enumerate(frame.columns):
        values, text = _as_floats(np.asarray(frame.iloc[:, j]))
        if text is not None:
            i, v = text
            return (f"{name}: column {col!r} is not numeric: {v!r} at {_row(frame, i)}; features must be "
                    f"numbers (encode text columns first)")
        nonfinite = ~np.isfinite(values)
        if nonfinite.any():
            columns.append(col)
            bad.append(int(np.argmax(nonfinite)))
            missing = missing or bool(np.isnan(values).any())
    if not columns:
        return None
    first = int(np.argmin(bad))
    msg = f"{name} contains NaN or infinity: column {columns[first]!r}, first at {_row(frame, bad[first])}"
    if len(columns) > 1:
        others = ", ".join(repr(c) for k, c in enumerate(columns) if k != first)
        msg += f" (also in column(s) {others})"
    if missing:
        msg += f"; a NaN is a missing value: {X_ADVICE}"
    return msg


@contextlib.contextmanager
def frame_errors(X, name: str):
    """Re-raise a ``TypeError``/``ValueError`` of the block as :func:`frame_problem`'s message when ``X``
    is a DataFrame with text or NaN cells (the same exception type); other errors pass unchanged."""
    try:
        yield
    except (TypeError, ValueError) as exc:
        msg = frame_problem(X, name) if _is_frame(X) else None
        if msg is None:
            raise
        raise type(exc)(msg) from None
