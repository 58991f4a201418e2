r"""Stochastic L_Prop on a Dask cluster: passes on the workers, everything small on the driver.

The estimator and its gradient are those of
:class:`~nyhopt.objectives.stoch_prop.StochasticProp` (same code for every
``m x m`` and ``m x k`` step); only the three kinds of pass over the data run
on the workers, each on the blocks it holds:

* the Falkon solve of ``B a = Knm^T [R | Y]`` (the CG loop on the driver,
  :func:`~nyhopt.distributed.falkon.falkon_solve_sharded`);
* ``u = Knm a`` with its column statistics (and ``Knm^T u``, ``Knm^T W`` for
  the whitened gradient) in one pass; ``u`` stays on the workers;
* the low-rank adjoint with ``P = 2 (W - u) diag(beta)``, built on the
  workers from the ``u`` kept there.  A block of ``u`` lost with its worker
  between the two passes is computed again by the first pass's function on
  that block (bitwise the same ``u``) before the adjoint pass uses it.

The probes ``R`` are drawn on the workers, block by block, from the
objective's seed and the global row indices
(:func:`~nyhopt.objectives._trace.probe_rows`): the same ``R`` as the
single-process objective with the same ``random_state``, whatever the
chunking.  The ``q`` rows of the trace gap are sampled on the driver
(``O(q)`` indices) and gathered there (``q x d``).

The driver computes on the host (NumPy) whatever the chunks hold (NumPy or
CuPy): CuPy centers are copied to the host once per evaluation (``m x d``)
and the gradient is returned as NumPy arrays.
"""
from __future__ import annotations

import numpy as np

from .._validation import check_positive, reject_bool
from ..kernels import KernelGrad, make_kernel
from ..kernels._base import check_finite_grad
from ..objectives._base import WRT_ALL, _check_wrt, _total, check_mean, params_gradient
from ..objectives.stoch_prop import (
    DEFAULT_MAXITER,
    DEFAULT_TOL,
    STREAM_PROBES,
    StochasticProp,
    _UPass,
    row_sample,
    trace_rows,
)
from ..objectives._trace import TraceProbes, derive_seed
from .._threads import cpu_threads
from . import _blocks
from .falkon import falkon_solve_sharded
from .sharded import ShardedData

__all__ = ["DaskStochasticProp"]


class DaskStochasticProp(StochasticProp):
    r"""``"stoch-prop"`` for dask arrays: :class:`~nyhopt.objectives.stoch_prop.StochasticProp` on a cluster.

    Parameters
    ----------
    X : dask.array.Array, shape (n, d)
        Inputs chunked by rows only (NumPy or CuPy chunks).
    y : dask.array.Array or array, shape (n,) or (n, p)
        Targets with the row chunks of ``X``.
    kernel, n_probes, probes, n_rows, tol, maxiter, warm_start, normalization, value_form, gradient,
    noise_variance, random_state
        As for :class:`~nyhopt.objectives.stoch_prop.StochasticProp`; the same
        ``random_state`` gives the same probes and rows.
    mean : {None, "zero"}
        Only the zero mean is available on a cluster (``"constant"`` raises
        ``ValueError``).
    client : distributed.Client, optional
        Defaults to the current client; a closed one is refused.

    Attributes
    ----------
    data : ShardedData
        The persisted blocks ``(X_i, [R_i | Y_i])``.
    X : numpy.ndarray, shape (0, d)
        An empty array of the data dtype (the rows are on the workers).

    Raises
    ------
    ValueError
        Options that need ``n``-sized work on the driver
        (``effective_dimension_estimator="hutch++"``,
        ``trace_estimator="hutchinson"``), ``kernel_cache=True`` and
        ``gram=True`` (the passes stream on the workers; ``"auto"`` and
        False are accepted), and the input errors of
        :class:`~nyhopt.distributed.ShardedData`.
    """

    cpu_engine = "pool"  # the driver does m x m work only

    def __init__(self, X, y, kernel="gaussian", *, n_probes=20, probes="gaussian", trace_estimator="rows",
                 effective_dimension_estimator="hutchinson", sketch_size=None, n_rows=None, tol=DEFAULT_TOL,
                 maxiter=DEFAULT_MAXITER, warm_start=True, normalization="released", value_form="energy",
                 gradient="whitened", kernel_cache=False, gram="auto", mean=None, noise_variance=1.0,
                 random_state=None, client=None):
        if check_mean(mean, self.default_mean) != "zero":
            raise ValueError(f"mean={mean!r} is not available on dask arrays yet; use mean='zero'")
        for name, value, ok in (("effective_dimension_estimator", effective_dimension_estimator, "hutchinson"),
                                ("trace_estimator", trace_estimator, "rows")):
            if value != ok:
                raise ValueError(f"{name}={value!r} is not available on dask arrays (it needs n-sized work on "
                                 f"the driver); use {name}={ok!r}")
        for name, value in (("kernel_cache", kernel_cache), ("gram", gram)):
            if value is not False and not (isinstance(value, str) and value == "auto"):
                raise ValueError(f"{name}={value!r} is not available on dask arrays (the passes stream on the "
                                 f"workers); use {name}='auto' or False")
        data = ShardedData(X, y, client=client)
        if data.p == 0:
            raise ValueError("y is None; stoch-prop needs targets")
        self.n, self.p, self._y_was_1d = data.n, data.p, y.ndim == 1
        self.xp = np
        self.X = np.empty((0, data.d), dtype=data.dtype)
        self.kernel = make_kernel(kernel)
        self.noise_variance = check_positive(noise_variance, "noise_variance")
        self.random_state = reject_bool(random_state, "random_state")
        self.mean, self.last_intercept = "zero", None
        self._set_options(n_probes, probes, trace_estimator, effective_dimension_estimator, sketch_size,
                          n_rows, tol, maxiter, warm_start, normalization, value_form, gradient, False, False)
        self.seed = derive_seed(random_state)
        t = self.n_probes
        self.data = data.derive(_blocks.block_with_probes, self.seed, t, self.probe_kind, STREAM_PROBES,
                                per_block=[(s,) for s in data.row_starts])
        data.release()
        self.probes = TraceProbes(None, np.full(t, 1.0 / t), "hutchinson", 0)
        self._W = None
        self._G = None
        self._beta = None
        self._rows_cache = None
        self._shared = None
        self.last_solve = None
        self.last_terms = None

    def __repr__(self):
        return f"{type(self).__name__}(n={self.n}, d={self.X.shape[1]}, p={self.p}, blocks={len(self.data.blocks)})"

    # -- hooks of StochasticProp ------------------------------------------------------------------
    def _ensure_probes(self, kernel, Z, cache):
        return None

    def _operator(self, kernel, Z):
        return None  # the passes run on the workers

    def _cpu_engine(self, params):
        return self.cpu_engine

    def _falkon(self, kernel, Z, lam, W, beta0, precond, rhs, cache):
        return falkon_solve_sharded(kernel, self.data, Z, lam, tol=self.tol, maxiter=self.maxiter, beta0=beta0,
                                    precond=precond, rhs=rhs, warn=False)

    def _u_pass(self, kernel, Z, a, whitened, cache):
        op = self._shared = self.data.broadcast((kernel, np.asarray(Z)))  # kept for the adjoint pass
        sums, u = self.data.reduce(_blocks.block_u_pass, op, self.data.operand(np.asarray(a)), whitened,
                                   self.value_form == "plain", keep=True)
        return _UPass(u, *sums)

    def _data_cotangent(self, st, beta, a, extra=None):
        return _ShardedCotangent(st.u, np.asarray(beta), np.asarray(a))

    def _rows(self, m):
        q = trace_rows(self.n, m, self.n_rows)
        if self._rows_cache is None or self._rows_cache[0] != q:
            idx = row_sample(self.seed, self.n, q)
            starts = np.asarray(self.data.row_starts + (self.n,))
            pieces = []
            for i in range(len(self.data.blocks)):
                lo, hi = np.searchsorted(idx, starts[i]), np.searchsorted(idx, starts[i + 1])
                pieces.append((idx[lo:hi] - starts[i],))
            rows = self.data.collect(_blocks.block_rows, per_block=pieces)
            XQ = np.concatenate(rows, axis=0).astype(self.X.dtype, copy=False)
            self._rows_cache = (q, XQ)
        return self._rows_cache[1]


    def _run(self, params, wrt, need_grad, return_ctx=False):
        # The driver's m x m work is on the host: CuPy centers (m x d) come over once, and the
        # gradient is a NumPy Params whatever the chunks hold.
        if hasattr(params.centers, "get"):
            params = params.replace(centers=params.centers.get())
        return super()._run(params, wrt, need_grad, return_ctx)

    # -- public API -------------------------------------------------------------------------------
    def value_and_grad(self, params, wrt=WRT_ALL):
        """Value and gradient as :meth:`Objective.value_and_grad`; the data term's adjoint runs on the workers."""
        wrt = _check_wrt(wrt)
        with cpu_threads(self.cpu_engine, np):
            ctx, ev = self._run(params, wrt, need_grad=True, return_ctx=True)
            cot = ev.cotangents
            sharded = cot.nm[0]
            grad = params_gradient(ctx.kernel, ctx.Z, cot._replace(nm=cot.nm[1:]), ctx.params, wrt, np)
            kwrt = tuple(f for f in ("lengthscale", "centers") if f in wrt)
            if kwrt:
                g_ell, g_z = self.data.reduce(_blocks.block_adjoint, self._shared, sharded.beta,
                                              self.data.operand(sharded.a), kwrt, sharded.u)
                check_finite_grad(KernelGrad(g_ell, g_z, None), np)
                ell = np.asarray(ctx.params.lengthscale, dtype=np.float64)
                if g_ell is not None:
                    grad = grad.replace(log_lengthscale=grad.log_lengthscale + (ell * g_ell).reshape(ell.shape))
                if g_z is not None:
                    grad = grad.replace(centers=grad.centers + g_z)
        return _total(ev.terms), grad

    def release(self):
        """Drop the persisted blocks (the objective cannot be evaluated afterwards)."""
        self.data.release()


class _ShardedCotangent:
    """The data term's cotangent ``P Q^T`` on ``k(X, Z)`` with ``P`` built on the workers from ``u``."""

    def __init__(self, u, beta, a):
        self.u, self.beta, self.a = u, beta, a
