"""Where the data live, decided once: the kernel operator for the arrays at hand.

Every pass over the data goes through a kernel operator (the interface of
:class:`nyhopt.ops.operator.KernelOperator`); this module is the one place
that looks at the arrays to pick it:

* NumPy or CuPy arrays: :class:`~nyhopt.ops.operator.KernelOperator`
  (streaming, a held kernel or the Gram route, by the budgets);
* dask arrays (or data already persisted, a
  :class:`~nyhopt.distributed.sharded.ShardedData`):
  :class:`~nyhopt.distributed.sharded.ShardedOperator`, whose passes are
  one task per row block on the workers and a reduction.

Dask is an optional dependency: :mod:`nyhopt.distributed.sharded` is
imported inside the functions, only when dask arrays are given (so
``import nyhopt`` never imports dask).  A new placement (MPI, several GPUs
in one process) is one operator with the same methods and one branch here.
"""
from __future__ import annotations

from ._validation import check_matrix
from .backend import get_namespace
from .distributed._detect import any_dask_array
from .ops.operator import KernelOperator

__all__ = ["on_cluster", "place_data", "kernel_operator"]


def on_cluster(*arrays) -> bool:
    """Whether any of ``arrays`` lives on a Dask cluster (a dask array or persisted ``ShardedData``)."""
    return any_dask_array(*arrays) or any(type(a).__name__ == "ShardedData" for a in arrays)


def place_data(X, y, *, client=None):
    """Persist ``X``, ``y`` on the cluster when they are dask arrays (a ``ShardedData``), else None.

    None means: the arrays stay where they are (NumPy or CuPy, in this process).
    """
    if not on_cluster(X, y):
        return None
    if type(X).__name__ == "ShardedData":
        return X
    from .distributed.sharded import ShardedData  # optional dependency (module notes)

    return ShardedData(X, y, client=client)


def kernel_operator(kernel, X, Z, Y=None, *, cache="auto", gram="auto", others=(), client=None):
    """The kernel operator of ``k(X, Z)`` and the targets ``Y`` as its operand: ``(op, Y)``.

    Parameters
    ----------
    kernel : Kernel
    X : array (n, d), dask array, or ShardedData
    Z : array (m, d)
    Y : array or dask array, optional
        Targets: persisted with ``X`` on a cluster (and returned as
        ``TARGETS``), passed through otherwise.
    cache, gram
        As for :class:`~nyhopt.ops.operator.KernelOperator` (``cache`` does
        not apply on a cluster: the passes stream on the workers).
    others : tuple of arrays
        More operands of the caller, checked to be on the same device.
    client : distributed.Client, optional

    Returns
    -------
    (operator, Y)
        The operator owns data it persisted: call its ``close()`` when done.
    """
    if on_cluster(X, Y):
        from .distributed.sharded import TARGETS, ShardedOperator  # optional dependency (module notes)

        owned = type(X).__name__ != "ShardedData"
        data = place_data(X, Y, client=client)
        op = ShardedOperator(data, kernel, Z, gram=gram, owns_data=owned)
        return op, (TARGETS if data.p else None)
    xp = get_namespace(X, Z, Y, *others)
    X = check_matrix(X, "X", xp)
    Z = check_matrix(Z, "Z", xp, dtype=X.dtype, n_features=X.shape[1])
    return KernelOperator(kernel, X, Z, cache=cache, gram=gram), Y
