"""The metrics of dask arrays as reductions on the cluster (the sums of :mod:`nyhopt._metric_sums`).

:mod:`nyhopt.metrics` and :mod:`nyhopt.datasets` come here when an input is a
dask array.  :class:`DaskRows` places every input on the row blocks of the
first dask one, in the array module of the predictions' chunks (in-memory
inputs become dask arrays of those blocks, host ones move to the device or
the reverse block by block); the metric then states its checks and sums on
those arrays as it does in memory, and :meth:`DaskRows.evaluate` computes them:
once for the checks (with the maxima the scale needs), once for the sums.  Only
these numbers reach the driver.
"""
from __future__ import annotations

import math

import numpy as np

from .._metric_sums import host_values
from ..backend import as_native, get_namespace, to_numpy
from ._detect import is_dask_array

__all__ = ["DaskRows"]


def _to_host(block):
    return to_numpy(block)


def _to_device(block):
    import cupy

    return cupy.asarray(block)


def _known(a):
    """``a``, or a new array of its graph with its row counts computed where dask does not know them."""
    import dask.array as da

    if not any(math.isnan(c) for c in a.shape):
        return a
    return da.Array(a.dask, a.name, a.chunks, meta=a._meta).compute_chunk_sizes()


class DaskRows:
    """Dask arrays on the row blocks of the first dask input, in the array module of ``like``'s chunks.

    Parameters
    ----------
    like : array
        The predictions (dask or in-memory): their array module (NumPy or
        CuPy) is the one every input is placed in.
    *others : array or None
        The other inputs; the first dask array of ``like, *others`` gives the
        row blocks.
    """

    def __init__(self, like, *others):
        import dask.array as da

        self.fm = da
        ref = _known(next(a for a in (like, *others) if is_dask_array(a)))
        self.n, self.rows = (ref.shape[0], ref.chunks[0]) if ref.ndim else (None, None)
        self.xp = get_namespace(like._meta if is_dask_array(like) else as_native(like, "like"))

    def place(self, a, name):
        """``a`` (dask or in-memory) as a dask array of the row blocks, in :attr:`xp` (real numbers only)."""
        import dask.array as da

        if is_dask_array(a):
            a = _known(a)
        else:
            a = as_native(a, name)
            if get_namespace(a) is not self.xp or not hasattr(a, "shape"):
                a = to_numpy(a)  # lists and host data; device data for host predictions
            chunks = (self.rows,) + tuple(a.shape[1:]) if a.ndim and a.shape[0] == self.n else -1
            a = da.from_array(a, chunks=chunks, asarray=False)
        if a.dtype.kind in "biuf" and get_namespace(a._meta) is not self.xp:
            move = _to_host if self.xp is np else _to_device
            a = a.map_blocks(move, dtype=a.dtype, meta=self.xp.empty((0,) * a.ndim, dtype=a.dtype))
        if a.ndim and a.shape[0] == self.n and a.chunks[0] != self.rows:
            a = a.rechunk({0: self.rows})
        return a

    def evaluate(self, values):
        """The values (dask arrays of one number, or numbers), computed on the cluster in one pass."""
        import dask

        return host_values(dask.compute(*values))
