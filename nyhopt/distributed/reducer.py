r"""The reduction of per-block partials: one small interface, two implementations.

Every distributed product of nyhopt ends the same way: each row block ``i``
produces a *partial*, a tuple of float64 arrays of shape ``(m, k)`` (or
``None`` entries), and the driver needs their elementwise sum

.. math:: S = \sum_i P_i .

:class:`Reducer` is that operation and nothing else, so that a different
transport (an MPI or NCCL all-reduce) can replace the Dask tree without
touching the products or the solvers.  The order of the additions is fixed by
the order of the partials, never by which worker finishes first, so a result
does not depend on the number of workers.
"""
from __future__ import annotations

import numpy as np

__all__ = ["Reducer", "LocalReducer", "DaskTreeReducer", "sum_partials"]


def sum_partials(*parts):
    """Elementwise float64 sum of partials (tuples of arrays or ``None``), left to right.

    Examples
    --------
    >>> import numpy as np
    >>> s = sum_partials((np.ones(2), None), (np.ones(2), None))
    >>> s[0].tolist(), s[1]
    ([2.0, 2.0], None)
    """
    first = parts[0]
    out = []
    for j, a in enumerate(first):
        if a is None:
            out.append(None)
            continue
        acc = np.array(a, dtype=np.float64, copy=True)
        for p in parts[1:]:
            acc += p[j]
        out.append(acc)
    return tuple(out)


class Reducer:
    """Sum of float64 partials, delivered on the driver.

    Subclasses implement :meth:`reduce`.  ``partials`` is the list, in block
    order, of what the per-block tasks returned (or handles to it, as the
    executor defines); each is a tuple of float64 arrays (or ``None``) with
    the same shapes.  The result is the elementwise sum as NumPy arrays on
    the driver, with an order of additions that depends only on
    ``len(partials)``.
    """

    def reduce(self, partials):  # pragma: no cover - interface
        """Return the elementwise sum of ``partials`` (a tuple of NumPy float64 arrays or None)."""
        raise NotImplementedError


class LocalReducer(Reducer):
    """Partials already in driver memory, summed in order (tests, single process)."""

    def reduce(self, partials):
        partials = list(partials)
        if not partials:
            raise ValueError("partials is empty: there is nothing to reduce")
        return sum_partials(*partials)


class DaskTreeReducer(Reducer):
    """Tree reduction of Dask futures on the workers; only the root travels to the driver.

    Parameters
    ----------
    client : distributed.Client
    split_every : int, default 8
        Fan-in of the tree: each internal task adds up to ``split_every`` partials.

    Notes
    -----
    Level ``l`` of the tree adds consecutive groups of ``split_every``
    partials of level ``l - 1``; for ``B`` blocks the driver receives one
    ``m x k`` result and the workers exchange about ``B`` of them, whatever ``n``.
    """

    def __init__(self, client, split_every=8):
        if isinstance(split_every, bool) or not isinstance(split_every, int) or split_every < 2:
            raise ValueError(f"split_every must be an integer >= 2, got {split_every!r}")
        self.client = client
        self.split_every = split_every

    def tree(self, partials):
        """Submit the tree over ``partials`` (futures, in block order) without waiting; the root future.

        :class:`~nyhopt.distributed.sharded.ShardedData` waits for the root
        itself, so that it can run the pass again if a worker holding a
        partial is lost before the sum is complete.
        """
        level = list(partials)
        if not level:
            raise ValueError("partials is empty: there is nothing to reduce")
        s = self.split_every
        while len(level) > 1:
            groups = [level[i:i + s] for i in range(0, len(level), s)]
            level = [g[0] if len(g) == 1 else self.client.submit(sum_partials, *g, pure=False) for g in groups]
        return level[0]

    def reduce(self, partials):
        root = self.tree(partials)
        return root.result() if hasattr(root, "result") else root
