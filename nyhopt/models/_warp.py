r"""A per-feature warp of skewed inputs: :math:`\operatorname{asinh}` of the standardized column, standardized again.

A model from :func:`nyhopt.tune` may keep one (``input_warp_``, a
:class:`FeatureWarp`): after the input scaling :math:`u = (x - \mu)/\sigma`,
each warped feature :math:`j` becomes

.. math::  w_j = \frac{\operatorname{asinh}\big((u_j - c_j)/s_j\big) - a_j}{b_j} ,

with :math:`c_j` the median of :math:`u_j` over the training rows,
:math:`s_j` a robust spread (the median absolute deviation / 0.6745; the mean
absolute deviation where that is 0; 1 where both are), and :math:`a_j, b_j`
the mean and standard deviation of the asinh values (:math:`b_j = 1` where
they are constant).  :math:`\operatorname{asinh}(t)` is :math:`t` near 0 and
:math:`\operatorname{sign}(t)\log(2|t|)` in the tails: a long tail is pulled in
like a logarithm would, for features of either sign, and the bulk keeps its
shape.  A stationary kernel measures distances in these coordinates, so rows
far out in a tail no longer sit alone (``docs/tuning.md``, "Transforms").  The other features are left as they are.

A feature is a candidate (:func:`skewed_features`) when the sample skewness
of its column is above :data:`SKEW_MIN` in magnitude and at most
:data:`MAX_TIED` of its rows share the median's value: a zero-inflated
column (mostly one value) would become a near-binary indicator whose gap
dominates the distances, which measured worse on the Ames houses
(``docs/results/kernels-and-trees.md``).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..backend import get_namespace, to_numpy

__all__ = ["FeatureWarp", "SKEW_MIN", "MAX_TIED", "column_skewness", "skewed_features", "fit_warp", "apply_warp",
           "warp_lazily"]

#: A column's sample skewness above this in magnitude makes it a candidate for the warp.
SKEW_MIN = 1.0
#: A column with more than this fraction of its rows at the median's value is never warped.
MAX_TIED = 0.3
#: Rows the statistics of :func:`skewed_features` and :func:`fit_warp` are computed from (the first ones).
STAT_ROWS = 200_000


class FeatureWarp(NamedTuple):
    """The warp of :mod:`nyhopt.models._warp`: the warped features and their constants (float64, length k)."""

    features: np.ndarray
    center: np.ndarray
    scale: np.ndarray
    mean: np.ndarray
    std: np.ndarray


def _host_rows(X):
    return to_numpy(X[:STAT_ROWS], dtype=np.float64)


def column_skewness(A) -> np.ndarray:
    r"""Sample skewness :math:`g_1 = \overline{c^3}/(\overline{c^2})^{3/2}` of each column of a float64 NumPy ``A``
    (:math:`c` the centered column; 0 for a constant column)."""
    C = A - A.mean(axis=0)
    var = np.mean(C * C, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(var > 0, np.mean(C * C * C, axis=0) / np.maximum(var, 1e-300) ** 1.5, 0.0)


def skewed_features(X) -> np.ndarray:
    r"""The columns of ``X`` (standardized, NumPy or CuPy) that are candidates for the warp.

    Skewness (:func:`column_skewness`) of each column over its first
    :data:`STAT_ROWS` rows; a column qualifies
    when :math:`|g_1| >` :data:`SKEW_MIN` and at most :data:`MAX_TIED` of
    those rows equal its median.

    Returns
    -------
    numpy.ndarray of int64
        The column indices, increasing (empty when none qualifies).
    """
    A = _host_rows(X)
    tied = np.mean(A == np.median(A, axis=0), axis=0)
    return np.flatnonzero((np.abs(column_skewness(A)) > SKEW_MIN) & (tied <= MAX_TIED)).astype(np.int64)


def _asinh_columns(A, center, scale):
    xp = get_namespace(A)
    return xp.arcsinh((A - xp.asarray(center)) / xp.asarray(scale))


def fit_warp(X, features) -> FeatureWarp:
    """The :class:`FeatureWarp` of the columns ``features`` of ``X`` (standardized), from its first rows."""
    features = np.asarray(features, dtype=np.int64)
    A = _host_rows(X)[:, features]
    center = np.median(A, axis=0)
    dev = np.abs(A - center)
    scale = np.median(dev, axis=0) / 0.6745
    scale = np.where(scale > 0, scale, dev.mean(axis=0))
    scale = np.where(scale > 0, scale, 1.0)
    V = _asinh_columns(A, center, scale)
    mean, std = V.mean(axis=0), V.std(axis=0)
    return FeatureWarp(features, center, scale, mean, np.where(std > 0, std, 1.0))


def apply_warp(X, warp: FeatureWarp, inplace=False):
    """``X`` (standardized; NumPy or CuPy) with the columns of ``warp`` warped, in its dtype.

    ``inplace``: write the columns into ``X`` (an array of the caller's own),
    else into a copy.  ``warp`` None returns ``X`` as it is.
    """
    if warp is None or len(warp.features) == 0:
        return X
    xp = get_namespace(X)
    out = X if inplace else X.copy()
    J = xp.asarray(warp.features)
    V = _asinh_columns(X[:, J].astype(xp.float64), warp.center, warp.scale)
    out[:, J] = ((V - xp.asarray(warp.mean)) / xp.asarray(warp.std)).astype(X.dtype, copy=False)
    return out


def warp_lazily(X, warp: FeatureWarp):
    """:func:`apply_warp` on a dask array, block by block (lazy)."""
    if warp is None or len(warp.features) == 0:
        return X
    if X.numblocks[1] > 1:  # a block must hold whole rows
        X = X.rechunk({1: -1})
    return X.map_blocks(apply_warp, warp, dtype=X.dtype)
