r"""The coefficient of determination from its two sums, for in-memory and dask arrays alike.

.. math::
    R^2_c = 1 - \frac{\sum_i w_i (y_{ic} - \hat y_{ic})^2}{\sum_i w_i (y_{ic} - \bar y_c)^2},
    \qquad \bar y_c = \frac{\sum_i w_i y_{ic}}{\sum_i w_i},

averaged over the columns ``c``, as scikit-learn's ``r2_score``.  The callers
divide ``y`` and :math:`\hat y` by a power of two near :math:`\max_i |y_{ic}|`
first (an exact scaling: :math:`R^2` is scale-free, and no square overflows).
"""
from __future__ import annotations

import numpy as np

__all__ = ["r2_sums", "r2_from_sums"]


def r2_sums(Y, P, w=None):
    """``(ss_res, ss_tot)`` per column of ``Y`` (n, p) against ``P`` (n, p), with weights ``w`` (n, 1) or none.

    ``Y`` and ``P`` come scaled by the caller.  Only array arithmetic and
    reductions: lazy for dask arrays (one graph), eager otherwise.
    """
    if w is None:
        return ((Y - P) ** 2).sum(axis=0), ((Y - Y.mean(axis=0)) ** 2).sum(axis=0)
    mean = (w * Y).sum(axis=0) / w.sum()
    return (w * (Y - P) ** 2).sum(axis=0), (w * (Y - mean) ** 2).sum(axis=0)


def r2_from_sums(ss_res, ss_tot) -> float:
    """Mean over columns of ``1 - ss_res / ss_tot`` (host arrays); a constant column scores 1 if fitted exactly, else 0."""
    ss_res, ss_tot = np.asarray(ss_res, dtype=np.float64), np.asarray(ss_tot, dtype=np.float64)
    r2 = np.where(ss_tot > 0, 1 - ss_res / np.where(ss_tot > 0, ss_tot, 1), np.where(ss_res == 0, 1.0, 0.0))
    return float(r2.mean())
