"""``NystromKRR.score`` for a dask ``X``: the partial sums of :mod:`nyhopt.metrics._r2`, one task per row block.

Every block of the predictions (``predict`` of the dask ``X``, never
computed as a whole) meets the same rows of ``y`` and of the weights in one
task, which returns a few numbers per output column; the driver checks the
blocks' flags and combines their sums.  One round of tasks: no pass over the
data beyond the predictions' own, and nothing of size ``n`` reaches this process.
"""
from __future__ import annotations

import numpy as np

from ..metrics._r2 import r2_combine, r2_partials
from ..inputs._validation import check_sample_weight, check_target_layout
from ..backend import as_native, get_namespace, to_namespace, to_numpy
from ._detect import is_dask_array
from ._rows import on_rows, per_row_block
from .estimator import predict_dask

__all__ = ["r2_sums_dask"]


def _rows_like(a, name, n, rows):
    """``a`` (dask or in-memory, ``n`` rows, checked) as a dask array on the row blocks ``rows``, one column block."""
    if not is_dask_array(a):
        a = as_native(a, name)
        if get_namespace(a) is np:
            a = np.asarray(a)
    check_target_layout(a, name, n)
    return on_rows(a, rows)


def _block_partials(P, Y, w):
    """:func:`nyhopt.metrics._r2.r2_partials` of one row block, in the array module of the predictions."""
    xp = get_namespace(P)

    def here(a):  # host targets or weights for device predictions, or the reverse
        return to_namespace(a, xp, np.float64)

    r = P.shape[0]
    return r2_partials(here(Y).reshape(r, -1), here(P).reshape(r, -1), None if w is None else here(w))


def r2_sums_dask(est, X, y, sample_weight=None):
    """``(ss_res, ss_tot)`` (float64 (p,), in a common power-of-two unit) of ``est`` on a dask ``X`` and ``y``."""
    pred = predict_dask(est, X)
    n, rows = pred.shape[0], X.chunks[0]
    Y = _rows_like(y, "y", n, rows)
    p_pred = 1 if pred.ndim == 1 else pred.shape[1]
    p_y = 1 if Y.ndim == 1 else Y.shape[1]
    if p_y != p_pred:
        raise ValueError(f"y has {p_y} output column(s) but the model predicts {p_pred}")
    w = None
    if sample_weight is not None:
        if not is_dask_array(sample_weight):  # checked here as in memory (a scalar weighs every row)
            sample_weight = check_sample_weight(to_numpy(as_native(sample_weight, "sample_weight")), n)
        elif sample_weight.shape != (n,):
            raise ValueError(f"sample_weight has shape {sample_weight.shape}, expected ({n},)")
        w = _rows_like(sample_weight, "sample_weight", n, rows)
    parts = per_row_block(_block_partials, pred, Y, w)
    if not all(p.finite_y for p in parts):
        raise ValueError("y contains NaN or infinity")
    if not all(p.finite_w for p in parts):
        raise ValueError("sample_weight contains NaN or infinity")
    ss_res, ss_tot, weight = r2_combine(parts)
    if not weight > 0:
        raise ValueError("sample_weight must have a sum > 0")
    return ss_res, ss_tot

