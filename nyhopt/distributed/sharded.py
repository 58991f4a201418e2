r"""Row-sharded training data on a Dask cluster and the block products over it.

:class:`ShardedData` persists ``X`` (and ``y``) once on the workers, one
future per row block holding the validated pair ``(X_i, Y_i)``.  Every later
task that reads a block is pinned to the worker holding it, so the data never
move again; only the small operands travel:

* ``(kernel, Z)`` (``m x d``) is broadcast once to every worker per
  :meth:`ShardedData.bind`; ``V`` (``m x k``) travels once per pass, inside
  each task when small (:data:`INLINE_BYTES`), else broadcast;
* each block returns a float64 ``m x k`` partial, summed by a
  :class:`~nyhopt.distributed.reducer.Reducer` (a Dask tree by default);
* ``n``-sized results (``K V``) stay on the workers as a dask array.

If a worker is lost during a pass (the reduction included), its blocks are
built again from the graph of the input (and the functions that derived
them) and the pass is run again (at most ``retries`` times); per-block
results kept between passes are computed again where they were lost
(:mod:`nyhopt.distributed._handles`).  Every step is a pure function of the
data and the operands, so the result is the same.
"""
from __future__ import annotations

import math
from concurrent.futures import CancelledError

import dask
import dask.array as da
import distributed
import numpy as np

from ..inputs._door import trusted
from ..inputs._validation import check_matrix
from ..backend import get_namespace, is_cupy_namespace
from ..ops import gram as _gram
from ..ops.operator import FitPass, check_policy, gram_now, gram_stats, gram_stats_trusted
from ..backend import to_numpy
from ..kernels import Kernel, KernelGrad
from ..kernels._base import check_finite_grad
from . import _blocks, _cost
from ._detect import is_dask_array
from ._handles import Broadcast, KeptBlocks, who_has
from .reducer import DaskTreeReducer, Reducer

__all__ = ["ShardedData", "ShardedOperator", "ShardedKernel", "ShardedCotangent", "TARGETS", "resolve_client"]

#: Operands up to this size travel inside each task (one round trip less than a broadcast).
INLINE_BYTES = 256 * 1024


class _Targets:
    """Marker for "the targets persisted with the data" where an ``n``-sized operand is expected."""

    def __repr__(self):
        return "TARGETS"


#: Pass as ``U`` to the products of :class:`ShardedKernel` to mean the persisted targets.
TARGETS = _Targets()


def resolve_client(client=None):
    """The given client, or the current one, checked to be running.

    Raises
    ------
    TypeError
        ``client`` is not a ``distributed.Client``.
    ValueError
        No client exists, or the client is closed.
    """
    if client is None:
        try:
            client = distributed.default_client()
        except ValueError:
            raise ValueError(
                "dask arrays need a Dask client: start one (distributed.Client(...)) or pass client="
            ) from None
    if not isinstance(client, distributed.Client):
        raise TypeError(f"client must be a distributed.Client, got {type(client).__name__}")
    if client.status != "running":
        raise ValueError(f"the Dask client is closed (status {client.status!r}); pass a running client")
    return client


def _check_dask_matrix(X):
    if not is_dask_array(X):
        raise TypeError(f"X must be a dask array (y is one, or data are sharded), got {type(X).__name__}")
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
    if any(math.isnan(s) for s in X.shape) or any(math.isnan(c) for c in X.chunks[0]):
        raise ValueError("X has unknown chunk sizes; call X.compute_chunk_sizes() first")
    if X.numblocks[1] != 1:
        raise ValueError(
            f"X is chunked along its columns (column chunks {X.chunks[1]}); nyhopt shards by rows only: "
            "use X.rechunk({1: -1})"
        )
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must have at least one row and one column, got shape {X.shape}")
    if X.dtype.kind not in "biuf":
        raise TypeError(f"X must hold real numbers, got dtype {X.dtype}")


def _chunks_on_gpu(X):
    """Whether the chunks of dask array ``X`` are CuPy arrays (its ``_meta``)."""
    meta = getattr(X, "_meta", None)
    return meta is not None and is_cupy_namespace(get_namespace(meta))


def _chunk_namespace(gpu):
    """The array module of the chunks, for :func:`nyhopt.ops.gram.tensor_core_route` (None: a GPU's)."""
    return None if gpu else np


def _check_dask_targets(y, X):
    if not is_dask_array(y):
        y = np.asarray(y)
        if y.ndim not in (1, 2) or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must have shape ({X.shape[0]},) or ({X.shape[0]}, p), got {y.shape}")
        return da.from_array(y, chunks=(X.chunks[0],) + ((y.shape[1],) if y.ndim == 2 else ()))
    if y.ndim not in (1, 2):
        raise ValueError(f"y must be 1-D (n,) or 2-D (n, p), got shape {y.shape}")
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y has {y.shape[0]} rows but X has {X.shape[0]}")
    if y.chunks[0] != X.chunks[0]:
        raise ValueError(
            f"the row chunks of y {y.chunks[0]} differ from those of X {X.chunks[0]}; "
            "use y.rechunk({0: X.chunks[0]})"
        )
    if y.ndim == 2 and y.numblocks[1] != 1:
        raise ValueError("y is chunked along its columns; use y.rechunk({1: -1})")
    if y.dtype.kind not in "biuf":
        raise TypeError(f"y must hold real numbers, got dtype {y.dtype}")
    return y


class ShardedData:
    """``X`` (and ``y``) persisted by row blocks on the workers of a Dask cluster.

    Parameters
    ----------
    X : dask.array.Array, shape (n, d)
        Training inputs with NumPy or CuPy chunks, chunked by rows only.
    y : dask.array.Array or array, shape (n,) or (n, p), optional
        Targets with the same row chunks as ``X`` (a NumPy ``y`` is chunked like ``X``).
    client : distributed.Client, optional
        Defaults to the current client.
    reducer : Reducer, optional
        Defaults to :class:`~nyhopt.distributed.reducer.DaskTreeReducer`.
    retries : int, default 2
        Times a pass is run again after a worker was lost during it.

    Attributes
    ----------
    n, d, p : int
        Rows, features and target columns (``p = 0`` without targets).
    dtype : numpy.dtype
        float32 or float64 (integers become float64), as in the single-process path.
    gpu : bool
        The chunks are CuPy arrays (read from the dask array's ``_meta``).
    row_chunks : tuple of int
    blocks : list of distributed.Future
        One per row block, each holding ``(X_i, Y_i)`` on one worker.

    Raises
    ------
    TypeError, ValueError
        Bad input (column chunks, mismatched row chunks, unknown chunk sizes,
        NaN/inf in a block, no or a closed client), with the argument named.
    """

    #: The driver does ``m x m`` work only (:mod:`nyhopt.backend._threads`).
    driver_engine = "pool"

    def __init__(self, X, y=None, *, client=None, reducer=None, retries=2):
        self.client = resolve_client(client)
        _check_dask_matrix(X)
        if y is not None:
            y = _check_dask_targets(y, X)
        if reducer is None:
            reducer = DaskTreeReducer(self.client)
        elif not isinstance(reducer, Reducer):
            raise TypeError(f"reducer must be a nyhopt.distributed.Reducer, got {type(reducer).__name__}")
        self.reducer = reducer
        if isinstance(retries, bool) or not isinstance(retries, (int, np.integer)) or retries < 0:
            raise ValueError(f"retries must be an integer >= 0, got {retries!r}")
        self.retries = int(retries)
        self.n, self.d = int(X.shape[0]), int(X.shape[1])
        self.p = 0 if y is None else (1 if y.ndim == 1 else int(y.shape[1]))
        self.dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float64)
        self.gpu = _chunks_on_gpu(X)
        self.row_chunks = tuple(int(c) for c in X.chunks[0])
        xb = X.to_delayed().ravel()
        yb = [None] * len(xb) if y is None else y.to_delayed().ravel()
        prepare = dask.delayed(_blocks.prepare_block, pure=False)
        checked = trusted(X)  # placed and checked before in this call (tune's objective, then its final fit)
        # how to build each block again from the input's graph if its worker is lost
        self._recipes = [prepare(a, b, i, self.dtype, checked) for i, (a, b) in enumerate(zip(xb, yb))]
        self.blocks = self.client.compute(self._recipes)
        self._wait_ok(self.blocks)

    # -- execution ------------------------------------------------------------------------------
    def _wait(self, futures, timeout=None):
        """Wait for ``futures`` on this client (``distributed.wait`` alone uses the default one)."""
        with self.client.as_current():
            distributed.wait(futures, timeout=timeout)

    def _wait_ok(self, futures):
        """Wait for ``futures``; re-raise the first task error (with its message) if any."""
        self._wait(futures)
        for f in futures:
            if f.status == "error":
                f.result()

    def _holders(self, handles=()):
        """The workers holding each block, and ``who_has`` of the blocks and of the handles' futures.

        A block whose worker was lost is built again from its recipe (the
        input's graph, then the functions that derived it), wherever the
        scheduler places it; later passes are pinned there.
        """
        extra = [f for h in handles for f in h.futures]
        who = who_has(self.client, self.blocks + extra)
        lost = [i for i, b in enumerate(self.blocks) if not who.get(b.key)]
        if lost:
            for i in lost:
                self.blocks[i] = self.client.compute(self._recipes[i])
            self._wait_ok([self.blocks[i] for i in lost])
            who = who_has(self.client, self.blocks + extra)
        return [list(who[b.key]) for b in self.blocks], who

    def _submit(self, func, i, workers, *args):
        """``func(block_i, *args)`` pinned to ``workers`` (the holders of block ``i``)."""
        return self.client.submit(func, self.blocks[i], *args, workers=workers, allow_other_workers=False,
                                  pure=False)

    def submit_kept(self, func, i, workers, args):
        """Item 1 of ``func(block_i, *args)``, computed and kept on ``workers``."""
        fut = self._submit(func, i, workers, *args)
        return self.client.submit(_blocks.take, fut, 1, workers=workers, allow_other_workers=False, pure=False)

    def _run_pass(self, func, args, per_block, finish):
        """Submit ``func`` on every block, then ``finish(futures, holders) -> (to_wait, result)``.

        The attempt is run again, from the holders of the blocks on, if a
        worker it uses is lost before ``to_wait`` are all done; ``result()``
        is returned after they are.
        """
        nb = len(self.blocks)
        per_block = [()] * nb if per_block is None else per_block
        handles = [a for a in args if isinstance(a, (Broadcast, KeptBlocks))]
        for _ in range(self.retries + 1):
            holders, who = self._holders(handles)
            used = {a for w in holders for a in w}
            columns = []
            for a in args:
                if isinstance(a, KeptBlocks):
                    kept = a.resolve(self, holders, who)
                    used |= {w for f in kept for w in who.get(f.key, ())}
                    columns.append(kept)
                else:
                    columns.append([a.resolve(who) if isinstance(a, Broadcast) else a] * nb)
            futs = [self._submit(func, i, holders[i], *(c[i] for c in columns), *per_block[i]) for i in range(nb)]
            to_wait, result = finish(futs, holders)
            if self._settle(to_wait, used):
                self._wait_ok(to_wait)
                return result()
        raise RuntimeError(f"workers were lost during each of {self.retries + 1} attempts of a pass; "
                           "check the cluster, or raise retries")

    def _settle(self, futs, used):
        """Wait for ``futs``; False if a worker in ``used`` left before they finished.

        Also False when the scheduler cancelled one of them for lost
        dependencies (every copy of a broadcast operand left with its
        workers): the next attempt sends the operand again.
        """
        while True:
            try:
                self._wait(futs, timeout=1.0)
                return True
            except CancelledError:
                return False
            except TimeoutError:
                if not used <= set(self.client.scheduler_info(n_workers=-1)["workers"]):
                    return False

    def map_blocks(self, func, *args, per_block=None):
        """Run ``func(block_i, *args, *per_block[i])`` on the worker holding each block; the futures in order.

        ``args`` are small values, :class:`~nyhopt.distributed._handles.Broadcast`
        (see :meth:`broadcast`) or :class:`~nyhopt.distributed._handles.KeptBlocks`
        (block ``i`` gets its own result); ``per_block`` (a list of tuples, one
        per block) adds arguments of each block (e.g. its row offset).  A pass
        interrupted by the loss of a worker is run again.
        """
        return self._run_pass(func, args, per_block, lambda futs, holders: (futs, lambda: futs))

    def collect(self, func, *args, per_block=None):
        """:meth:`map_blocks`, with the results brought to the driver (a list in block order)."""
        return self._run_pass(func, args, per_block,
                              lambda futs, holders: (futs, lambda: self.client.gather(futs)))

    def reduce(self, func, *args, per_block=None, keep=False):
        """One pass and the reducer's sum of its float64 partials, run again as a whole if a worker is lost.

        With ``keep``, ``func`` returns ``(partial, kept_i)``; ``kept_i`` stays on
        the worker and the result is ``(sum, KeptBlocks)``, for a later pass.
        """
        tree = isinstance(self.reducer, DaskTreeReducer)

        def finish(futs, holders):
            parts, kept = futs, []
            if keep:
                pin = dict(allow_other_workers=False, pure=False)
                parts = [self.client.submit(_blocks.take, f, 0, workers=w, **pin) for f, w in zip(futs, holders)]
                kept = [self.client.submit(_blocks.take, f, 1, workers=w, **pin) for f, w in zip(futs, holders)]
            root = self.reducer.tree(parts) if tree else None
            to_wait = ([root] if tree else parts) + kept
            total = (lambda: root.result()) if tree else (lambda: self.reducer.reduce(parts))
            if not keep:
                return to_wait, total
            return to_wait, lambda: (total(), KeptBlocks(func, args, kept))

        return self._run_pass(func, args, per_block, finish)

    def broadcast(self, obj):
        """Send ``obj`` once to every worker; a handle that sends it again if all copies are lost."""
        return Broadcast(self.client, obj)

    def operand(self, V):
        """``V`` for the tasks of one pass: inline in each task when small, else broadcast once."""
        return V if V.nbytes <= INLINE_BYTES else self.broadcast(V)

    @property
    def row_starts(self):
        """Global index of the first row of each block."""
        return tuple(int(v) for v in np.cumsum((0,) + self.row_chunks[:-1]))

    def _copy(self, blocks, func, args, per_block):
        """A :class:`ShardedData` sharing these settings whose blocks are ``func(block_i, *args, *per_block[i])``."""
        if any(isinstance(a, (Broadcast, KeptBlocks)) for a in args):
            raise TypeError("derived blocks take plain arguments (their recipe is replayed after a loss)")
        per_block = [()] * len(self.blocks) if per_block is None else per_block
        step = dask.delayed(func, pure=False)
        other = object.__new__(ShardedData)
        other.__dict__.update(self.__dict__)
        other.blocks = blocks
        other._recipes = [step(r, *args, *extra) for r, extra in zip(self._recipes, per_block)]
        return other

    def derive(self, func, *args, per_block=None):
        """New :class:`ShardedData` whose blocks are ``func(block_i, ...)``, computed where the blocks are.

        ``func`` returns ``(X_i, Y_i)``; ``p`` is read from the first block.
        ``args`` and ``per_block`` are plain values: a derived block lost with
        its worker is built again by replaying them on its rebuilt parent.
        """
        other = self._copy(self.map_blocks(func, *args, per_block=per_block), func, args, per_block)
        other.p = int(self.client.submit(_blocks.target_columns, other.blocks[0]).result())
        return other

    def as_dask_array(self, futures, ncols, dtype):
        """A dask array (n, ncols) over per-block futures, without moving them."""
        parts = [da.from_delayed(f, shape=(r, ncols), dtype=dtype) for f, r in zip(futures, self.row_chunks)]
        return da.concatenate(parts, axis=0)

    # -- targets --------------------------------------------------------------------------------
    def target_moments(self):
        """Mean and standard deviation of each target column (float64, two passes)."""
        if self.p == 0:
            raise ValueError("these data have no targets y")
        mean = self.reduce(_blocks.block_moments, np.zeros(self.p))[0] / self.n
        var = self.reduce(_blocks.block_moments, mean)[1] / self.n
        return mean, np.sqrt(var)

    def scale_targets(self, mean, scale):
        """New :class:`ShardedData` whose targets are ``(y - mean) / scale`` (``X`` is shared)."""
        args = (np.asarray(mean, dtype=np.float64), np.asarray(scale, dtype=np.float64))
        return self._copy(self.map_blocks(_blocks.block_scale_targets, *args), _blocks.block_scale_targets,
                          args, None)

    def gram_route(self, setting=None):
        """The tensor-core route of a Gram pass on these data (``"int8"``, ``"float16"`` or None).

        ``setting``: as :data:`nyhopt.ops.gram.TENSOR_CORES` (None: that global
        of this process, read now).  A route needs float32 data in CuPy
        chunks; the workers are told it with each Gram task
        (:meth:`ShardedOperator.form_gram`), whatever their own setting.
        """
        return _gram.tensor_core_route(self.dtype, _chunk_namespace(self.gpu), setting)

    def bind(self, kernel, Z, *, gram="auto"):
        """The operator ``K = k(X, Z)`` on these data (``kernel`` and ``Z`` broadcast once)."""
        return ShardedOperator(self, kernel, Z, gram=gram)

    def rows(self, idx):
        """Rows ``idx`` (sorted int64 global indices) of ``X``, gathered on the driver (NumPy)."""
        starts = np.asarray(self.row_starts + (self.n,))
        pieces = []
        for i in range(len(self.blocks)):
            lo, hi = np.searchsorted(idx, starts[i]), np.searchsorted(idx, starts[i + 1])
            pieces.append((idx[lo:hi] - starts[i],))
        rows = self.collect(_blocks.block_rows, per_block=pieces)
        return np.concatenate(rows, axis=0).astype(self.dtype, copy=False)

    def release(self):
        """Drop this object's references to the persisted blocks (Dask frees them when unused)."""
        self.blocks = []
        self._recipes = []


class ShardedOperator:
    """``K = k(X, Z)`` over :class:`ShardedData`: the kernel operator of data on a cluster.

    The interface of :class:`nyhopt.ops.operator.KernelOperator` (see there),
    so that :func:`~nyhopt.solvers.falkon.falkon_operator_solve` and
    :class:`~nyhopt.objectives.stoch_prop.StochasticProp` run on it
    unchanged; every pass is one task per row block on the worker holding it,
    and one reduction of float64 partials.  ``n``-sized operands are
    :data:`TARGETS` (the persisted targets) or the kept ``u`` of
    :meth:`fit_pass`; ``m``-sized ones are NumPy arrays on the driver.
    Results of shape ``(m, k)`` are float64 NumPy arrays on the driver; ``K V``
    is a dask array whose blocks stay on the workers.

    Parameters
    ----------
    data : ShardedData
    kernel : Kernel
    Z : array (m, d)
        Centers (CuPy ones are copied to the host), cast to the data dtype.
    gram : {"auto", True, False}, default "auto"
        The Gram route: :meth:`form_gram` makes one pass in which every
        block returns its ``m x m`` partial of :math:`K^T K` (and of
        :math:`K^T Y`), summed by the reducer; later normal products are
        :math:`G V` on the driver, with no pass.  ``True`` forms it at the
        first normal product; ``"auto"`` streams until the normal products
        streamed so far cost as much as the Gram pass by the cluster's cost
        model (:func:`nyhopt.distributed._cost.cluster_gram_pays`: the
        rounds of tasks saved against the ``m x m`` partials' reduction),
        then forms it; ``False`` always streams.
    owns_data : bool, default False
        :meth:`close` releases ``data``.
    """

    xp = np
    engine = "pool"  # the driver does m x m work only

    def __init__(self, data, kernel, Z, *, gram="auto", owns_data=False):
        if not isinstance(kernel, Kernel):
            raise TypeError(f"kernel must be a Kernel, got {type(kernel).__name__}")
        Z = to_numpy(Z)
        if Z.ndim != 2 or Z.shape[1] != data.d:
            raise ValueError(f"Z must have shape (m, {data.d}), got {Z.shape}")
        self.data, self.kernel = data, kernel
        self.Z = check_matrix(Z, "Z", np, dtype=data.dtype, n_features=data.d)
        self.shape = (data.n, Z.shape[0])
        self.dtype = data.dtype
        self.passes = 0
        self.gram = self.gram_rhs = None
        self._target_sums = None
        self.gram_policy = check_policy(gram, "gram")
        # read once: the route the workers are told to take is the route this process trusts and prices
        self._tensor_cores = _gram.tensor_core_setting()
        self._gram_route = data.gram_route(self._tensor_cores)
        self._streamed, self._slots = 0, None
        self._owns = owns_data
        self._shared = data.broadcast((kernel, self.Z))

    def close(self):
        """Release the data if this operator owns them (built from dask arrays for one solve)."""
        if self._owns:
            self.data.release()

    def _check_u(self, U):
        if U is None:
            return False
        if U is not TARGETS:
            raise TypeError("an n-sized operand of a sharded product must be TARGETS (the persisted y)")
        if self.data.p == 0:
            raise ValueError("these data have no targets y")
        return True

    def check_targets(self, Y, name="Y"):
        """``(TARGETS, p)``: the only ``n``-sized operand of this placement is the persisted targets."""
        self._check_u(Y)
        return Y, self.data.p

    def _v(self, V, name="V"):
        V = to_numpy(V)
        V2 = V[:, None] if V.ndim == 1 else V
        if V2.ndim != 2 or V2.shape[0] != self.shape[1]:
            raise ValueError(f"{name} must have {self.shape[1]} rows, got shape {V.shape}")
        return V2

    def form_gram(self, U=None):
        """Form :math:`G = K^T K` now: one pass, one ``m x m`` partial per block; returns ``K^T U`` or None.

        Each block is told the operator's tensor-core route (read from
        :data:`nyhopt.ops.gram.TENSOR_CORES` of this process when the
        operator was made): a worker in another process takes it, not its own
        setting, so that :meth:`fit_pass` trusts the sums of the ``G`` formed.
        """
        use_y = self._check_u(U)
        self.gram, KtU, ww, wlast = self.data.reduce(_blocks.block_gram, self._shared, use_y,
                                                     self._gram_route or False)
        self.passes += 1
        self.gram_rhs = KtU
        self._target_sums = (ww, wlast) if use_y else None
        return KtU

    def _wants_gram(self, k):
        return gram_now(self, lambda: _cost.cluster_gram_pays(self.data.n, self.shape[1], k, self._streamed,
                                                              len(self.data.blocks), self._worker_slots(),
                                                              gpu=self.data.gpu, route=self._gram_route))

    def _worker_slots(self):
        if self._slots is None:
            self._slots = _cost.worker_slots(self.data.client, self.data.gpu)
        return self._slots

    def normal_matvec(self, V, U=None, kv=False):
        """``(K^T K V, K^T U or None)`` (float64, m x k), plus ``K V`` as a dask array when ``kv``."""
        V2 = self._v(V)
        KtU = None
        if self._wants_gram(V2.shape[1]):
            KtU = self.form_gram(U)
            U = None
        if self.gram is not None:
            KtKV = self.gram @ V2.astype(np.float64, copy=False)
            if U is not None:
                KtU = self.kmtv(U)
            return (KtKV, KtU, self.kmv(V2)) if kv else (KtKV, KtU)
        use_y = self._check_u(U)
        self.passes += 1
        self._streamed += 1
        out = self.data.reduce(_blocks.block_normal, self._shared, self.data.operand(V2), use_y, kv, keep=kv)
        if not kv:
            return out
        (KtKV, KtU), kvs = out
        return KtKV, KtU, self.data.as_dask_array(kvs.futures, V2.shape[1], self.data.dtype)

    def kmtv(self, U=TARGETS):
        """``K^T U`` (float64, m x p) for ``U = TARGETS``."""
        self._check_u(U)
        self.passes += 1
        return self.data.reduce(_blocks.block_kmtv, self._shared)[0]

    def kmv(self, V):
        """``K V`` as a dask array (n, k) whose blocks stay on the workers."""
        V2 = self._v(V)
        self.passes += 1
        futs = self.data.map_blocks(_blocks.block_kmv, self._shared, self.data.operand(V2))
        return self.data.as_dask_array(futs, V2.shape[1], self.data.dtype)

    def rows(self, idx):
        """Rows ``idx`` (sorted int64 host indices) of ``X``, gathered on the driver."""
        return self.data.rows(idx)

    def fit_pass(self, a, W, normal, plain=False, cross=False, memo=None):
        """:meth:`KernelOperator.fit_pass <nyhopt.ops.operator.KernelOperator.fit_pass>` on the workers.

        ``W`` is :data:`TARGETS`; ``u`` stays on the workers (a kept result
        for :meth:`residual_cotangent`).  With the Gram matrix, ``K^T W``
        and the targets' sums from its pass (:meth:`stats_from_gram`) the
        sums come from :func:`~nyhopt.ops.operator.gram_stats` on the driver,
        with no pass, and ``u`` is None (``memo`` is not used: the Gram pass
        sums the targets); with tensor cores set for float32 data
        (:data:`nyhopt.ops.gram.TENSOR_CORES`, CuPy chunks) under the same rule as the
        in-memory operator (the route the workers were told, :meth:`form_gram`).
        """
        self._check_u(W)
        a = np.asarray(a)
        route = self._gram_route
        if self.stats_from_gram(W) and route != "float16":
            f64 = np.float64
            ww, wlast = self._target_sums
            KtKa, wu, uu, rr, ww, cr = gram_stats(self.gram, self.gram_rhs.astype(f64, copy=False),
                                                  a.astype(f64, copy=False), ww, wlast)
            if gram_stats_trusted(route, rr, ww, uu):
                return FitPass(None, KtKa if normal else None, self.gram_rhs if normal else None, wu, uu, rr,
                               ww if plain else None, cr if cross else None)
        from_gram = normal and self.gram is not None and self.gram_rhs is not None
        sums, u = self.data.reduce(_blocks.block_u_pass, self._shared, self.data.operand(a),
                                   normal and not from_gram, plain, cross, keep=True)
        self.passes += 1
        if from_gram:
            sums = (self.gram @ a.astype(np.float64, copy=False), self.gram_rhs) + tuple(sums[2:])
        return FitPass(u, *sums)

    def stats_from_gram(self, W):
        """Whether :meth:`fit_pass` reads its sums from the Gram matrix: ``G``, ``K^T W`` and the targets' sums held."""
        return (self.gram is not None and self.gram_rhs is not None and self._target_sums is not None
                and W is TARGETS)

    def residual_cotangent(self, W, fit, beta, a, extra=None):
        """The cotangent ``P Q^T``, ``P = 2 (W - u) diag(beta)``, ``Q = a``, contracted on the workers.

        A symmetric matrix ``beta`` gives ``P = 2 (W - u) beta`` (the constant mean of ``stoch-prop``).
        Without ``u`` (``fit.u`` None: sums from the Gram matrix) each block
        forms ``P = 2 W beta - K (2 a beta)`` inside its adjoint pass.
        """
        if extra is not None:
            raise ValueError("the Hutchinson trace gap needs n-sized work on the driver; use trace_estimator='rows'")
        return ShardedCotangent(self, fit.u, np.asarray(beta), np.asarray(a))


#: The name of :class:`ShardedOperator` before it served every pass of a solve.
ShardedKernel = ShardedOperator


class ShardedCotangent:
    """A cotangent ``P Q^T`` on ``k(X, Z)`` whose ``P`` is built on the workers from the kept ``u``.

    :meth:`contract` is the low-rank adjoint pass (one task per block, one
    reduction); :func:`nyhopt.objectives._base.params_gradient` calls it.
    """

    def __init__(self, op, u, beta, a):
        self.op, self.u, self.beta, self.a = op, u, beta, a

    def contract(self, kernel, Z, wrt):
        """``KernelGrad`` (lengthscale, centers; NumPy float64) of ``<P Q^T, k(X, Z)>``."""
        data = self.op.data
        g_ell, g_z = data.reduce(_blocks.block_adjoint, self.op._shared, self.beta, data.operand(self.a),
                                 tuple(wrt), self.u)
        kg = KernelGrad(g_ell, g_z, None)
        check_finite_grad(kg, np)
        return kg
