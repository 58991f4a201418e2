"""The metrics of dask arrays: the partial sums of :mod:`nyhopt.metrics._metric_sums`, one task per row block.

:mod:`nyhopt.metrics` and :mod:`nyhopt.datasets` come here when an input is a
dask array.  Every input is placed on the row blocks of the first dask one
(in-memory inputs are sliced, dask ones rechunked where their blocks
differ); each task meets the same rows of all inputs, takes them to the
array module of the predictions' block (host targets move to the device or
the reverse) and returns the block's value checks, maxima and sums.  One
``dask.compute`` for all blocks: lazy predictions (``predict`` of a dask
``X``) are computed once, and a few numbers per block reach this process.
"""
from __future__ import annotations

import functools

from ..metrics._metric_sums import block_partials
from ._detect import is_dask_array
from ._rows import known_rows, on_rows, per_row_block

__all__ = ["known_shapes", "partials_dask", "all_finite"]


def known_shapes(*arrays):
    """The arrays, dask ones with their row counts computed where dask does not know them."""
    return [known_rows(a) if is_dask_array(a) else a for a in arrays]


def partials_dask(kind, like, *others, z=None):
    """:func:`~nyhopt.metrics._metric_sums.block_partials` of every row block (a list, in row order), one compute.

    Parameters
    ----------
    kind : str
    like : array
        The predictions (dask or in-memory), of the final shape: each block's
        sums are taken in the array module of its block of ``like``.
    *others : array or None
        The targets (then the standard deviations) of the same shape.  The
        first dask array of ``like, *others`` gives the row blocks.
    z : float, optional
    """
    arrays = (like, *others)
    ref = next(a for a in arrays if is_dask_array(a))
    rows = ref.chunks[0] if ref.ndim else None
    placed = [None if a is None else on_rows(a, rows) for a in arrays]
    M, Y, *S = placed
    return per_row_block(functools.partial(_block, kind, z), M, Y, *S)


def _block(kind, z, M, Y, S=None):
    return block_partials(kind, Y, M, S, z=z)


def all_finite(*arrays):
    """Whether each array (dask or in-memory) holds no NaN or infinity: a list of bools, one compute."""
    import dask
    import dask.array as da

    from ..backend import get_namespace

    flags = [da.isfinite(a).all() if is_dask_array(a) else get_namespace(a).isfinite(a).all() for a in arrays]
    return [bool(ok) for ok in dask.compute(*flags)]
