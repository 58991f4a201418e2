"""Arrays on the row blocks of another, and one task per row block computed in one round.

The reductions of :mod:`nyhopt.distributed._score` and
:mod:`nyhopt.distributed._metrics` place every input on the row blocks of one
dask array (:func:`on_rows`), then run one function per row block on the
blocks of all inputs together (:func:`per_row_block`): a single
``dask.compute`` whose tasks return a few host numbers each.  Lazy inputs
(``predict`` of a dask ``X``) are computed once, inside those tasks.
"""
from __future__ import annotations

import math

import numpy as np

from ..backend import as_native, get_namespace
from ._detect import is_dask_array

__all__ = ["known_rows", "on_rows", "per_row_block"]


def known_rows(a):
    """``a``, or a new array of its graph with its row counts computed where dask does not know them."""
    import dask.array as da

    if not any(math.isnan(c) for c in a.shape):
        return a
    return da.Array(a.dask, a.name, a.chunks, meta=a._meta).compute_chunk_sizes()


def on_rows(a, rows):
    """``a`` (dask or in-memory, ``sum(rows)`` rows) as a dask array on the row blocks ``rows``, one column block.

    ``rows=None`` makes one block of the whole array (a 0-d one included).
    In-memory NumPy and CuPy arrays are sliced, not copied; anything else
    (a list) becomes a NumPy array first.
    """
    import dask.array as da

    if not is_dask_array(a):
        a = as_native(a)
        if get_namespace(a) is np:
            a = np.asarray(a)
        return da.from_array(a, chunks=-1 if rows is None else (rows,) + tuple(a.shape[1:]), asarray=False)
    a = known_rows(a)
    if rows is None or a.ndim == 0:
        return a.rechunk(-1)
    return a.rechunk({0: rows, 1: -1} if a.ndim == 2 else {0: rows})


def per_row_block(func, *arrays):
    """``[func(*blocks) for each row block]``: one task per block, all computed by one ``dask.compute``.

    Parameters
    ----------
    func : callable
        Runs on a worker with the row block of every array (``None`` where
        the array is ``None``); returns a few host numbers.
    *arrays : dask arrays or None
        On the same row blocks, one column block (:func:`on_rows`).  Their
        graphs are optimized together, so a part they share (one ``X``
        behind the predictions and their standard deviations) runs once.

    Returns
    -------
    list
        ``func``'s results, in row order.
    """
    import dask

    present = [a for a in arrays if a is not None]
    present = iter(dask.optimize(*present))
    blocks = [None if a is None else next(present).to_delayed(optimize_graph=False).ravel() for a in arrays]
    count = len(next(b for b in blocks if b is not None))
    tasks = [dask.delayed(func)(*(None if b is None else b[i] for b in blocks)) for i in range(count)]
    return list(dask.compute(*tasks))
