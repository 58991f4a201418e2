"""Functions that run on the workers, one row block at a time.

Each calls nyhopt's single-machine :mod:`nyhopt.ops` on its block (the same
Numba or CuPy code as one process) and returns float64 host partials.
"""
from __future__ import annotations

import numpy as np

from ..ops import gram as _gram
from ..ops._blocks import KernelBlocks
from ..ops.operator import column_stats, target_sums
from ..inputs._validation import check_matrix, check_targets
from ..backend import get_namespace, to_numpy

__all__ = ["prepare_block", "block_normal", "block_gram", "block_kmtv", "block_kmv", "block_moments",
           "block_scale_targets", "block_with_probes", "block_u_pass", "block_adjoint", "block_sq_residuals",
           "block_rows", "block_with_ones", "block_intercept_stats", "target_columns",
           "standardize_columns", "take"]


def _local(block, shared):
    """The block's ``X``, ``Y``, its array module, and the shared ``(kernel, Z)`` in X's dtype/module."""
    X, Y = block
    kernel, Z = shared
    xp = get_namespace(X)
    return X, Y, xp, kernel, xp.asarray(Z, dtype=X.dtype)


def _checked(kernel, X, Z):
    """The products of a block of the operator's passes (a :class:`KernelBlocks`) with no checks again.

    ``X`` was checked when the block was placed (:func:`prepare_block`), ``Z``
    by :class:`~nyhopt.distributed.sharded.ShardedOperator` in the data
    dtype: on CuPy chunks each check is a host synchronization of the worker.
    """
    return KernelBlocks(kernel, X, Z, checked=True)


def prepare_block(X, y, index, dtype, checked=False):
    """Validate one row block and hold it as ``(X, Y)``; ``Y`` is (rows, p) in ``dtype`` or None.

    ``checked``: the blocks of ``X`` were checked by an earlier placement in the
    same public call (:class:`~nyhopt.distributed.sharded.ShardedData`): only
    the dtype is made.
    """
    xp = get_namespace(X, y)
    if checked:
        X = xp.asarray(X)
        X = X if X.dtype == dtype else X.astype(dtype)
    else:
        X = check_matrix(X, f"X (row block {index})", xp, dtype=dtype)
    Y = None
    if y is not None:
        Y, _ = check_targets(y, f"y (row block {index})", X.shape[0], xp, dtype=dtype)
    return (X, Y)


def block_normal(block, shared, V, use_y, kv):
    """Partial ``(K^T K V, K^T Y or None)`` of one block, plus ``K V`` (kept on the worker) when ``kv``."""
    X, Y, xp, kernel, Z = _local(block, shared)
    res = _checked(kernel, X, Z).normal_matvec(xp.asarray(V, dtype=X.dtype), Y if use_y else None, kv=kv)
    partial = (to_numpy(res[0], dtype=np.float64), to_numpy(res[1], dtype=np.float64) if use_y else None)
    return (partial, res[2]) if kv else partial


def block_gram(block, shared, use_y, tensor_cores):
    """Partial ``(K^T K, K^T Y, Y.Y, Y^T y_last)`` of one block (float64; the last three None unless ``use_y``).

    The Gram pass; the targets' sums (per column, and with the last column)
    let the fit sums come from the Gram matrix later (:func:`nyhopt.ops.operator.gram_stats`).
    ``tensor_cores``: the driver's route (``False``, ``"int8"``, ``"float16"``),
    taken instead of this worker's :data:`nyhopt.ops.gram.TENSOR_CORES`.
    """
    X, Y, xp, kernel, Z = _local(block, shared)
    G, KtY = _gram.gram_matrix(kernel, X, Z, Y if use_y else None, tensor_cores=tensor_cores, checked=True)
    if not use_y:
        return (to_numpy(G, dtype=np.float64), None, None, None)
    ww, wlast = target_sums(Y, xp, cross=True)
    return tuple(to_numpy(a, dtype=np.float64) for a in (G, KtY, ww, wlast))


def block_kmtv(block, shared, U=None):
    """Partial ``(K^T U,)`` of one block; ``U`` is the block's targets when None."""
    X, Y, xp, kernel, Z = _local(block, shared)
    return (to_numpy(_checked(kernel, X, Z).kmtv(Y if U is None else U), dtype=np.float64),)


def block_kmv(block, shared, V):
    """``K V`` of one block (stays on the worker)."""
    X, _, xp, kernel, Z = _local(block, shared)
    return _checked(kernel, X, Z).kmv(xp.asarray(V, dtype=X.dtype))


def block_moments(block, center):
    """Partial ``(sum (Y - center), sum (Y - center)^2)`` per target column, float64."""
    Y = block[1].astype(np.float64) - get_namespace(block[1]).asarray(center)
    return (to_numpy(Y.sum(axis=0), dtype=np.float64), to_numpy((Y * Y).sum(axis=0), dtype=np.float64))


def block_scale_targets(block, mean, scale):
    """The block with targets ``(Y - mean) / scale`` (same dtype); ``X`` is not copied."""
    X, Y = block
    xp = get_namespace(Y)
    Y64 = Y.astype(np.float64)
    return (X, ((Y64 - xp.asarray(mean)) / xp.asarray(scale)).astype(Y.dtype))


def standardize_columns(A, mean, scale, dtype):
    """``(A - mean) / scale`` of a chunk in float64, in ``dtype``; host ``mean``, ``scale`` move to its device."""
    xp = get_namespace(A)
    return ((A.astype(np.float64) - xp.asarray(mean)) / xp.asarray(scale)).astype(dtype)


def target_columns(block):
    """Number of target columns of a block (0 without targets)."""
    return 0 if block[1] is None else int(block[1].shape[1])


def block_with_probes(block, seed, t, kind, stream, start):
    """The block with targets ``[R_i | Y_i]``: its rows of the seeded probes, drawn here (never sent)."""
    from ..objectives._trace import probe_rows

    X, Y = block
    xp = get_namespace(X)
    R = probe_rows(seed, t, start, start + X.shape[0], kind, stream=stream, dtype=X.dtype, xp=xp)
    return (X, xp.concatenate([R, Y], axis=1))


def block_u_pass(block, shared, a, normal, plain, cross=False):
    """``u = K a`` of one block (kept on the worker) and the partial ``(K^T u, K^T W, W.u, u.u, r.r, W.W, r^T r_last)``.

    ``W`` are the block's targets (probes and ``Y``, and the ones of a
    constant mean), ``r = W - u``; the normal products only when ``normal``,
    ``W.W`` only when ``plain``, ``r^T r[:, -1]`` only when ``cross``.
    """
    X, W, xp, kernel, Z = _local(block, shared)
    V = xp.asarray(a, dtype=X.dtype)
    KtKa = KtW = None
    if normal:
        KtKa, KtW, u = _checked(kernel, X, Z).normal_matvec(V, W, kv=True)
        KtKa, KtW = to_numpy(KtKa, dtype=np.float64), to_numpy(KtW, dtype=np.float64)
    else:
        u = _checked(kernel, X, Z).kmv(V)
    stats = tuple(None if s is None else to_numpy(s, dtype=np.float64) for s in column_stats(W, u, xp, plain, cross))
    return (KtKa, KtW) + stats, u


def block_adjoint(block, shared, beta, a, wrt, u):
    """Partial ``(d/d ell, d/d Z)`` of ``<P Q^T, K>`` on one block, ``P = 2 (W - u) diag(beta)``, ``Q = a``.

    A symmetric matrix ``beta`` (the constant mean's bilinear forms) gives ``P = 2 (W - u) beta``.
    Without ``u`` (None: the fit sums came from the Gram matrix) ``P = 2 W beta - K (2 a beta)``,
    formed inside the adjoint pass (:func:`nyhopt.ops.adjoint_residual`).
    """
    X, W, xp, kernel, Z = _local(block, shared)
    beta = xp.asarray(beta)
    scale = (lambda A: A @ beta) if beta.ndim == 2 else (lambda A: A * beta[None, :])  # noqa: E731
    if u is None:
        a64 = xp.asarray(a, dtype=np.float64)
        kg = _checked(kernel, X, Z).adjoint_residual((2.0 * scale(W.astype(np.float64))).astype(X.dtype),
                                                     (2.0 * scale(a64)).astype(X.dtype), xp.asarray(a, dtype=X.dtype),
                                                     wrt=wrt)
        return (None if kg.lengthscale is None else to_numpy(kg.lengthscale, dtype=np.float64),
                None if kg.centers is None else to_numpy(kg.centers, dtype=np.float64))
    R2 = 2.0 * (W.astype(np.float64) - u.astype(np.float64))
    P = scale(R2)
    kg = _checked(kernel, X, Z).adjoint_lowrank(P.astype(X.dtype), xp.asarray(a, dtype=X.dtype), wrt=wrt)
    return (None if kg.lengthscale is None else to_numpy(kg.lengthscale, dtype=np.float64),
            None if kg.centers is None else to_numpy(kg.centers, dtype=np.float64))


def block_sq_residuals(block, shared, alpha):
    """Partial ``(sum_rows (K alpha - Y)^2,)`` per column, float64, ``Y`` the last ``k`` target columns."""
    X, W, xp, kernel, Z = _local(block, shared)
    k = alpha.shape[1]
    F = _checked(kernel, X, Z).kmv(xp.asarray(alpha, dtype=X.dtype))
    R = (F - W[:, W.shape[1] - k:]).astype(np.float64)
    return (to_numpy((R * R).sum(axis=0), dtype=np.float64),)


def block_with_ones(block):
    """The block with a column of ones after its targets, ``(X, [Y | 1])`` (the intercept's right-hand side)."""
    X, Y = block
    xp = get_namespace(Y)
    return (X, xp.concatenate([Y, xp.ones((Y.shape[0], 1), dtype=Y.dtype)], axis=1))


def block_intercept_stats(block, shared, alpha):
    """Partial ``(R^T r_1,)`` float64 (p + 1,) with ``R = [Y | 1] - K alpha`` (the last column is ``r_1``)."""
    X, W, xp, kernel, Z = _local(block, shared)
    R = (W - _checked(kernel, X, Z).kmv(xp.asarray(alpha, dtype=X.dtype))).astype(np.float64)
    return (to_numpy(R.T @ R[:, -1], dtype=np.float64),)


def block_rows(block, local):
    """Rows ``local`` (indices within the block) of the block's ``X``, on the host."""
    return to_numpy(block[0][get_namespace(block[0]).asarray(local)])


def take(pair, i):
    """Item ``i`` of a task's tuple result (runs where the result is)."""
    return pair[i]
