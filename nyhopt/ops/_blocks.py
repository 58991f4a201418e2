"""Kernel blocks for loops over row ranges: the inputs checked once, not per block.

:func:`nyhopt.ops.kernel_matrix` checks its inputs at every call; on a GPU
each check is a host synchronization.  The internal loops over row blocks
(the direct solver's pass, the Gram matrix, the predictive variance, the
float16 kernel cache) check once through :class:`KernelBlocks` and evaluate
each block with :func:`nyhopt.ops._kernel_block`, the implementation
:func:`~nyhopt.ops.kernel_matrix` dispatches to (same numbers).  Its
products (:meth:`KernelBlocks.kmv`, ``kmtv``, ``normal_matvec``, the
low-rank adjoints) do the same for the callers that run many of them on the
same ``X`` and ``Z``: the streaming passes of a solve
(:class:`nyhopt.ops.operator.KernelOperator`) and the row blocks of a
cluster (:mod:`nyhopt.distributed._blocks`).
"""
from __future__ import annotations

import numpy as np

from ..backend import is_cupy_namespace
from . import (_adjoint_lowrank, _adjoint_residual, _kernel_block, _kmtv, _kmv, _module, _normal_matvec,
               _prepare)

__all__ = ["KernelBlocks", "dot_safe"]


def dot_safe(kernel, X, Z, ell, xp):
    r"""True when the GPU may form the squared distances of any rows of ``X`` and ``Z`` by a GEMM; else None.

    The GEMM form :math:`|x|^2 + |z|^2 - 2x\cdot z` gives NaN when a squared
    norm overflows, so each GPU kernel block checks its norms (a host
    synchronization).  Every coordinate of the block's centered scaled
    points is at most :math:`2M_j` with :math:`M_j` the largest
    :math:`|x_j|/\ell_j` over both arrays, so all the norms of ``r`` rows
    add up to at most :math:`4r\sum_j M_j^2`: when that is far below the
    dtype's largest number every block would pass its check, and this one
    read decides for all.  None otherwise (each block checks its own norms), and
    on the CPU, whose blocks do not synchronize.
    """
    if not is_cupy_namespace(xp) or not _module("kernel_matrix", xp, "_uses_dot")(kernel):
        return None
    if not (X.shape[0] and Z.shape[0]):
        return None
    big = xp.stack([X.max(axis=0), -X.min(axis=0), Z.max(axis=0), -Z.min(axis=0)]).max(axis=0)
    M = xp.asnumpy(big).astype(np.float64) / np.asarray(ell, dtype=np.float64)  # the one host read
    with np.errstate(over="ignore", invalid="ignore"):
        bound = 4.0 * (X.shape[0] + Z.shape[0]) * float(np.sum(M * M))
    # A wide margin for rounding (in the scaling and in the device's sums of the norms).
    return True if bound < float(np.finfo(X.dtype).max) * 2.0 ** -32 else None


class KernelBlocks:
    """Kernel blocks of ``X`` row ranges against ``Z``, validated once for a loop over the rows.

    :func:`kernel_matrix` on each block would check the whole block and the
    centers again (on a GPU, about three host synchronizations per block,
    which stall the queue of launches); this object checks ``X`` and ``Z``
    once (or trusts its caller's checks with ``checked=True``) and then
    evaluates blocks with the same implementation and the same numbers.

    Parameters
    ----------
    kernel : Kernel
    X : array (n, d)
    Z : array (m, d)
    checked : bool, default False
        ``X`` and ``Z`` are validated already (:func:`nyhopt.inputs._validation.check_matrix`,
        ``Z`` in the dtype of ``X``): only the lengthscales are checked.

    Attributes
    ----------
    X, Z : arrays
        The validated arrays (``Z`` in the dtype of ``X``).
    xp : module

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> from nyhopt import ops
    >>> from nyhopt.ops._blocks import KernelBlocks
    >>> X = np.random.default_rng(0).normal(size=(100, 2))
    >>> kb = KernelBlocks(nh.GaussianKernel(1.0), X, X[:5])
    >>> bool((kb.rows(10, 20) == ops.kernel_matrix(nh.GaussianKernel(1.0), X[10:20], X[:5])).all())
    True
    """

    def __init__(self, kernel, X, Z, *, checked=False):
        xp, X, Z, ell = _prepare(kernel, X, Z, checked=checked)
        self.kernel, self.X, self.Z, self.ell, self.xp = kernel, X, Z, ell, xp
        self._dot = dot_safe(kernel, X, Z, ell, xp)

    def rows(self, lo, hi, out=None):
        """``k(X[lo:hi], Z)`` (hi - lo, m), as :func:`kernel_matrix` (``out`` too)."""
        return _kernel_block(self.kernel, self.X[lo:hi], self.Z, self.ell, self.xp, out=out, dot=self._dot)

    def rows_t(self, lo, hi):
        """``k(Z, X[lo:hi])`` (m, hi - lo), as :func:`kernel_matrix` with the arguments swapped."""
        return _kernel_block(self.kernel, self.Z, self.X[lo:hi], self.ell, self.xp, dot=self._dot)

    def kmv(self, V):
        """:math:`k(X, Z) V`, as :func:`nyhopt.ops.kmv` (same numbers, no checks of ``X``, ``Z``)."""
        return _kmv(self.kernel, self.X, self.Z, V, self.ell, self.xp, self._dot)

    def kmtv(self, U):
        """:math:`k(X, Z)^T U`, as :func:`nyhopt.ops.kmtv`."""
        return _kmtv(self.kernel, self.X, self.Z, U, self.ell, self.xp, self._dot)

    def normal_matvec(self, V, U=None, *, kv=False):
        """:math:`K^T K V` (and :math:`K^T U`, :math:`K V`), as :func:`nyhopt.ops.normal_matvec`."""
        return _normal_matvec(self.kernel, self.X, self.Z, V, self.ell, self.xp, U, kv=kv, dot=self._dot)

    def adjoint_lowrank(self, P, Q, wrt=("lengthscale", "centers")):
        """Gradients of :math:`\\langle P Q^T, K\\rangle`, as :func:`nyhopt.ops.adjoint_lowrank`."""
        return _adjoint_lowrank(self.kernel, self.X, self.Z, P, Q, self.ell, self.xp, wrt)

    def adjoint_residual(self, P0, B, Q, wrt=("lengthscale", "centers")):
        """Gradients of :math:`\\langle (P_0 - [K B \\mid 0]) Q^T, K\\rangle`, as :func:`nyhopt.ops.adjoint_residual`."""
        return _adjoint_residual(self.kernel, self.X, self.Z, P0, B, Q, self.ell, self.xp, wrt, dot=self._dot)
