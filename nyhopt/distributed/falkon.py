r"""Falkon on a Dask cluster: the passes on the workers, everything else on the driver.

The conjugate gradient loop, the preconditioner (two ``m x m`` Cholesky
factors) and every ``m x m`` and ``m x k`` operation run on the driver, in
float64, with the code of :mod:`nyhopt.solvers.falkon`; only the pass over
the data (``K^T K V``, with ``K^T Y`` in the same pass on a warm start) runs on
the workers, through :class:`~nyhopt.distributed.sharded.ShardedKernel`.
Per CG iteration each worker receives ``V`` (``m x k``) and returns one
float64 ``m x k`` partial per row block it holds.
"""
from __future__ import annotations

import numpy as np

from .._validation import check_matrix, check_positive
from ..solvers.falkon import FalkonPreconditioner, _check_iter_args, _falkon_cg
from .sharded import TARGETS, ShardedData

__all__ = ["falkon_solve_sharded", "falkon_solve_dask"]


def _host_matrix(a, name, shape):
    a = np.asarray(a.get() if hasattr(a, "get") else a, dtype=np.float64)
    a = a.reshape(shape[0], -1) if a.ndim == 1 else a
    if a.shape[0] != shape[0] or (shape[1] is not None and a.shape[1] != shape[1]):
        raise ValueError(f"{name} must have shape ({shape[0]}, {shape[1] or 'k'}), got {a.shape}")
    return a


def falkon_solve_sharded(kernel, data, Z, penalty, *, tol=1e-7, maxiter=100, beta0=None, precond=None,
                         rhs=None, warn=True):
    """:func:`nyhopt.solvers.falkon_solve` for data persisted on a cluster.

    Parameters
    ----------
    kernel : Kernel
    data : ShardedData
        ``X`` and the targets (the targets are the right-hand sides unless ``rhs`` is given).
    Z : array, shape (m, d)
        Centers (NumPy, or CuPy copied to the host: the driver works in NumPy).
    penalty, tol, maxiter, beta0, precond, rhs, warn
        As for :func:`~nyhopt.solvers.falkon_solve`.

    Returns
    -------
    FalkonResult
        NumPy arrays on the driver.
    """
    if not isinstance(data, ShardedData):
        raise TypeError(f"data must be a ShardedData, got {type(data).__name__}")
    Z = check_matrix(Z.get() if hasattr(Z, "get") else Z, "Z", np, dtype=data.dtype, n_features=data.d)
    m = Z.shape[0]
    penalty = check_positive(penalty, "penalty")
    tol, maxiter = _check_iter_args(tol, maxiter)
    if data.p == 0 and rhs is None:
        raise ValueError("give the targets Y or the right-hand side rhs")
    if rhs is not None:
        rhs = _host_matrix(rhs, "rhs", (m, data.p or None))
    k = rhs.shape[1] if rhs is not None else data.p
    if beta0 is not None:
        beta0 = _host_matrix(beta0, "beta0", (m, k))
    if precond is None:
        precond = FalkonPreconditioner(kernel, Z, penalty, data.n, dtype=data.dtype)
    elif precond.m != m or precond.n != data.n or precond.penalty != penalty:
        raise ValueError(
            f"precond was built for m={precond.m}, n={precond.n}, penalty={precond.penalty}, "
            f"not m={m}, n={data.n}, penalty={penalty}"
        )
    op = data.bind(kernel, Z)
    Y = TARGETS if data.p else None
    return _falkon_cg(lambda V, U: op.normal_matvec(V, U), op.kmtv, Y, precond, data.n, data.dtype,
                      penalty, tol, maxiter, beta0, rhs, warn, np)


def falkon_solve_dask(kernel, X, Z, Y, penalty, *, tol=1e-7, maxiter=100, beta0=None, precond=None,
                      rhs=None, warn=True, client=None):
    """:func:`nyhopt.solvers.falkon_solve` for dask arrays ``X``, ``Y`` (persisted for the solve)."""
    data = ShardedData(X, Y, client=client)
    try:
        return falkon_solve_sharded(kernel, data, Z, penalty, tol=tol, maxiter=maxiter, beta0=beta0,
                                    precond=precond, rhs=rhs, warn=warn)
    finally:
        data.release()
