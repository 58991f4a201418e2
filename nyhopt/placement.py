"""Where the data live, decided once: the kernel operator for the arrays at hand.

Every pass over the data goes through a kernel operator (the interface of
:class:`nyhopt.ops.operator.KernelOperator`); this module is the one place
that looks at the arrays to pick it, and the one module outside
:mod:`nyhopt.distributed` that asks what kind of array it holds:

* NumPy or CuPy arrays: :class:`~nyhopt.ops.operator.KernelOperator`
  (streaming, a held kernel or the Gram route, by the budgets);
* dask arrays (or data already persisted, a
  :class:`~nyhopt.distributed.sharded.ShardedData`):
  :class:`~nyhopt.distributed.sharded.ShardedOperator`, whose passes are
  one task per row block on the workers and a reduction.

Dask is an optional dependency: :mod:`nyhopt.distributed.sharded` is
imported inside the functions, only when dask arrays are given (so
``import nyhopt`` never imports dask).  A new placement (MPI, several GPUs
in one process) is one operator with the same methods and one branch here
(docs/dev/architecture.md, "Adding a placement").

Besides the operator, the entry points ask this module the few things that
differ by placement before any pass is made:

* :func:`on_cluster`: which route an entry point takes (``fit``, ``predict``,
  ``tune``: the cluster's are in :mod:`nyhopt.distributed.estimator` and
  :mod:`nyhopt.distributed.tune`, above this module in the import order);
* :func:`check_objective`: the exact objectives need the rows on one machine;
* :func:`as_placed`: the arrays an objective is built on (in-memory inputs
  converted to NumPy/CuPy, data on a cluster as they are);
* :func:`take_rows`, :func:`driver_array`: a row sample and the centers, as
  the driver holds them (gathered from the workers for data on a cluster);
* :func:`gram_pays`: whether the Gram route pays for ``products`` normal
  products, by the cost model of the placement.
"""
from __future__ import annotations

from .inputs._validation import check_matrix
from .backend import as_native, get_namespace, to_numpy
from .distributed._detect import any_dask_array, refuse_dask_objective
from .ops import operator as _operator
from .ops.operator import KernelOperator

__all__ = ["on_cluster", "check_objective", "as_placed", "take_rows", "driver_array", "gram_pays", "place_data",
           "kernel_operator"]


def on_cluster(*arrays) -> bool:
    """Whether any of ``arrays`` lives on a Dask cluster (a dask array or persisted ``ShardedData``)."""
    return any_dask_array(*arrays) or any(type(a).__name__ == "ShardedData" for a in arrays)


def check_objective(name, *arrays):
    """Raise the ``ValueError`` for an exact objective given data on a cluster (naming "stoch-prop").

    The exact objectives do ``O(n m^2)`` work on one machine; "stoch-prop",
    and every objective given in-memory arrays, pass.
    """
    if on_cluster(*arrays):
        refuse_dask_objective(name)


def as_placed(X, y):
    """``(X, y)`` as a computation takes them: as they are when either is on a cluster, else as NumPy/CuPy.

    In memory, :func:`~nyhopt.backend.as_native` turns DataFrames and other
    array-likes into arrays (its errors name ``X`` and ``y``).
    """
    if on_cluster(X, y):
        return X, y
    return as_native(X, "X"), as_native(y, "y")


def take_rows(X, idx, client=None):
    """Rows ``idx`` of ``X`` on the driver (all rows for None): indexed in place, or gathered from a cluster.

    ``idx``: sorted NumPy integer indices.  For a dask ``X`` only the
    ``len(idx) x d`` rows are computed (on ``client``, default the current
    scheduler) and come back with the chunks' array type.
    """
    if not on_cluster(X):
        return X if idx is None else X[get_namespace(X).asarray(idx)]
    rows = X if idx is None else X[idx]
    return client.compute(rows).result() if client is not None else rows.compute()


def driver_array(X, A):
    """``A`` (an ``m``-sized operand such as the centers) where the driver's work on data ``X`` runs.

    NumPy when ``X`` is on a cluster (the driver's ``m x m`` work is on the
    host); otherwise ``A`` as it is, after checking it is on the device of
    ``X`` (a ``TypeError`` when host and device are mixed).
    """
    if on_cluster(X):
        return to_numpy(A)
    get_namespace(X, A)
    return A


def gram_pays(source, m, k, products, xp, *, dtype, held=False) -> bool:
    """Whether forming :math:`K^T K` beats ``products`` normal products with ``k`` columns, for data ``source``.

    In memory: :func:`nyhopt.ops.operator.gram_pays` (a measured constant on
    the CPU, a cost model on a GPU).  On a cluster
    (``source`` a :class:`~nyhopt.distributed.sharded.ShardedData`): the
    cluster's cost model, :func:`nyhopt.distributed._cost.cluster_gram_pays`
    (the passes saved, each a round of tasks, against the ``m x m`` partials'
    reduction; on CuPy chunks priced for the tensor-core route the workers
    would be told, :meth:`~nyhopt.distributed.ShardedData.gram_route`).
    """
    if on_cluster(source):
        from .distributed import _cost  # optional dependency (module notes)

        return _cost.cluster_gram_pays(source.n, m, k, products, len(source.blocks),
                                       _cost.worker_slots(source.client, source.gpu), gpu=source.gpu,
                                       route=source.gram_route())
    return _operator.gram_pays(m, k, products, xp, dtype=dtype, held=held)


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
    return KernelOperator(kernel, X, Z, cache=cache, gram=gram, checked=True), Y
