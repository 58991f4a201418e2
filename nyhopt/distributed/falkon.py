r"""Falkon on a Dask cluster: the passes on the workers, everything else on the driver.

The conjugate gradient loop, the preconditioner (two ``m x m`` Cholesky
factors) and every ``m x m`` and ``m x k`` operation run on the driver, in
float64, with the code of :mod:`nyhopt.solvers.falkon`
(:func:`~nyhopt.solvers.falkon.falkon_operator_solve`); only the passes over
the data run on the workers, through
:class:`~nyhopt.distributed.sharded.ShardedOperator`.  Per CG iteration each
worker receives ``V`` (``m x k``) and returns one float64 ``m x k`` partial
per row block it holds; with ``gram=True`` one pass returns the ``m x m``
partials of :math:`K^T K` and the iterations make no pass.
"""
from __future__ import annotations

from ..solvers.falkon import falkon_operator_solve
from .sharded import TARGETS, ShardedData, ShardedOperator

__all__ = ["falkon_solve_sharded"]


def falkon_solve_sharded(kernel, data, Z, penalty, *, tol=1e-7, maxiter=100, beta0=None, precond=None,
                         rhs=None, warn=True, gram="auto"):
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
    gram : {"auto", True, False}, default "auto"
        The Gram route (:class:`~nyhopt.distributed.sharded.ShardedOperator`):
        ``True`` forms :math:`K^T K` in one pass; ``"auto"`` streams.

    Returns
    -------
    FalkonResult
        NumPy arrays on the driver, with the passes made.
    """
    if not isinstance(data, ShardedData):
        raise TypeError(f"data must be a ShardedData, got {type(data).__name__}")
    op = ShardedOperator(data, kernel, Z, gram=gram)
    res = falkon_operator_solve(op, TARGETS if data.p else None, penalty, tol=tol, maxiter=maxiter,
                                beta0=beta0, precond=precond, rhs=rhs, warn=warn)
    return res._replace(passes=op.passes)
