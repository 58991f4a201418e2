"""Operands of a pass that outlive the loss of a worker.

A pass of :class:`~nyhopt.distributed.sharded.ShardedData` takes two kinds of
arguments besides plain (small) values:

* :class:`Broadcast`: an object sent once to every worker (the kernel and
  centers, a large ``V``).  The driver keeps the object, so if every copy is
  lost with its workers it is sent again (Dask's active memory manager may
  trim the copies to one, so a single lost worker can take the last one).
* :class:`KeptBlocks`: one result per row block left on the workers by an
  earlier pass (``u = K a`` between the two passes of the stoch-prop
  gradient).  A result lost with its worker is computed again, by the same
  function on the same inputs (so to the same values), on the worker that
  holds its block when it is next needed.

Both are resolved to Dask futures at the start of every attempt of a pass
(see ``docs/scaling-out.md``, "Failures").
"""
from __future__ import annotations

from concurrent.futures import CancelledError

__all__ = ["Broadcast", "KeptBlocks", "who_has"]


def who_has(client, futures):
    """``client.who_has(futures)``, where a future the scheduler has forgotten has no holder.

    The scheduler forgets a broadcast object when its last copy is lost (its
    replicas are also trimmed by Dask's active memory manager), and the tasks
    that depended on it; ``Client.who_has`` raises for those.
    """
    while True:
        live = [f for f in futures if not f.cancelled()]
        try:
            return client.who_has(live) if live else {}
        except CancelledError:  # one was forgotten meanwhile: ask again without it
            continue


class Broadcast:
    """``obj`` sent once to every worker; sent again when no worker holds it any more.

    Parameters
    ----------
    client : distributed.Client
    obj : object
        Kept on the driver (it is small: ``m x d`` or ``m x k``).
    """

    def __init__(self, client, obj):
        self.client, self.obj = client, obj
        self.future = self._send()

    def _send(self):
        return self.client.scatter([self.obj], broadcast=True, hash=False)[0]  # one future, even for a tuple

    @property
    def futures(self):
        """The futures whose holders a pass must know (as :attr:`KeptBlocks.futures`)."""
        return [self.future]

    def resolve(self, who=None):
        """A future of ``obj`` held by a live worker; ``who`` is a ``who_has`` answer that may cover it."""
        if who is None or self.future.key not in who:
            who = who_has(self.client, [self.future])
        if not who.get(self.future.key):
            self.future = self._send()
        return self.future


class KeptBlocks:
    """Item 1 of ``func(block_i, *args)`` for every row block ``i``, kept on the workers.

    Made by :meth:`~nyhopt.distributed.sharded.ShardedData.reduce` with
    ``keep=True``; pass it as an argument of a later pass to give each block
    task its own result.

    Parameters
    ----------
    func : callable
        The block function of the pass that produced the results; it returns
        ``(partial, kept)``.
    args : tuple
        Its arguments after the block (plain values or :class:`Broadcast`).
    futures : list of distributed.Future
        One per block, in block order.
    """

    def __init__(self, func, args, futures):
        if any(isinstance(a, KeptBlocks) for a in args):
            raise TypeError("a kept result cannot be rebuilt from another kept result")
        self.func, self.args, self.futures = func, tuple(args), list(futures)

    def resolve(self, data, holders, who):
        """The per-block futures, those lost with a worker computed again on ``holders[i]``.

        ``who`` is a ``who_has`` answer covering :attr:`futures`.
        """
        lost = [i for i, f in enumerate(self.futures) if not who.get(f.key)]
        if lost:
            args = tuple(a.resolve() if isinstance(a, Broadcast) else a for a in self.args)
            for i in lost:
                self.futures[i] = data.submit_kept(self.func, i, holders[i], args)
        return self.futures
