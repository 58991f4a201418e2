r"""Falkon: Nystrom KRR by preconditioned conjugate gradient.

Solves the normal equations of Nystrom kernel ridge regression

.. math:: B\,\alpha = K_{nm}^T Y, \qquad B = K_{nm}^T K_{nm} + n\lambda K_{mm},

without ever solving a system in :math:`B` (Rudi, Carratino and Rosasco
2017; Meanti et al. 2020).  With the upper
Cholesky factors

.. math::
    T = \operatorname{chol}(K_{mm} + \epsilon m I), \qquad
    A = \operatorname{chol}(T T^T / m + \lambda I),

(:math:`T^T T = K_{mm} + \epsilon m I`, :math:`\epsilon` = :func:`~nyhopt.solvers.jitter`
of the data dtype) and the preconditioner
:math:`P = n^{-1/2}\, T^{-1} A^{-1}`, conjugate gradient runs on

.. math::
    W \beta = P^T K_{nm}^T Y, \qquad
    W = P^T B P = A^{-T}\big(T^{-T} K_{nm}^T K_{nm} T^{-1} / n + \lambda I\big) A^{-1},

and :math:`\alpha = P\beta`.  As in the references, :math:`K_{mm}` inside
:math:`B` is represented by :math:`T^T T`, i.e. the solver solves the system
with :math:`K_{mm} + \epsilon m I`; the difference is of the order of the
jitter.  Each CG iteration makes one pass over the data
(:func:`nyhopt.ops.normal_matvec`) for all right-hand sides together; every
``m x m`` and ``m x k`` operation is done in float64, and the block products
see the data dtype.

The passes come from a :class:`~nyhopt.ops.operator.KernelOperator`: by
default they use :math:`K_{nm}` held in memory when it fits the cache budget
and stream otherwise, and on the CPU they switch to the Gram matrix :math:`K_{nm}^T K_{nm}`
(formed once in float64, one pass) when the iterations have cost as much as
forming it; CG then runs on :math:`W` formed once
(:func:`preconditioned_gram`).  CG is the same on every route; only the
rounding differs.  ``docs/stochastic.md`` ("Passes per step") has the
cost model and the measurements.
"""
from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np

from ..inputs._validation import check_matrix, check_positive, check_real
from ..backend._threads import cpu_threads
from ..backend import device_memory_advice, get_namespace
from ..ops import kernel_matrix
from ..ops.operator import stream_memory_advice
from ._jitter import jitter
from ._linalg import add_to_diagonal, cholesky_upper, solve_triangular
from .cg import CGResult, conjugate_gradient
from ..errors import warn_user

__all__ = ["FalkonPreconditioner", "FalkonResult", "falkon_solve", "falkon_operator_solve", "falkon_cg",
           "check_iter_args", "is_kernel_operator", "ConvergenceWarning"]


class ConvergenceWarning(UserWarning):
    """The iterative solver stopped at ``maxiter`` above its tolerance.

    The estimators also record it (``converged_ = False``); turn it into an
    error, or silence it, with the :mod:`warnings` filters.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> X = np.random.default_rng(0).uniform(-1, 1, (300, 2)); y = np.sin(3 * X[:, 0])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always", nh.ConvergenceWarning)
    ...     model = nh.NystromKRR(penalty=1e-9, centers=50, maxiter=2, tol=1e-12, random_state=0).fit(X, y)
    >>> model.converged_, caught[0].category is nh.ConvergenceWarning
    (False, True)
    """


class FalkonResult(NamedTuple):
    """Result of :func:`falkon_solve`.

    Attributes
    ----------
    alpha : array, shape (m, k)
        Nystrom coefficients :math:`\\alpha = P\\beta`, float64, on the device of ``X``.
    beta : array, shape (m, k)
        The CG variable; pass it as ``beta0`` to warm-start a nearby solve.
    cg : CGResult
        Iterations, relative residual history and convergence flag.
    passes : int
        Sweeps over the ``n x m`` kernel the solve made (kernel evaluations
        and products with a held kernel; :mod:`nyhopt.ops.operator`).
    """

    alpha: object
    beta: object
    cg: CGResult
    passes: int = 0


class FalkonPreconditioner:
    r"""Falkon's Cholesky preconditioner :math:`P = n^{-1/2} T^{-1} A^{-1}`.

    Parameters
    ----------
    kernel : Kernel
        The kernel (with its lengthscales).
    Z : array, shape (m, d)
        Nystrom centers (NumPy or CuPy).
    penalty : float
        :math:`\lambda > 0`.
    n : int
        Number of training points (the :math:`n` of :math:`n\lambda`).
    dtype : dtype, optional
        dtype of the data, which sets the jitter :math:`\epsilon`
        (:func:`~nyhopt.solvers.jitter`); defaults to the dtype of ``Z``.

    Attributes
    ----------
    T, A : arrays, shape (m, m)
        Upper Cholesky factors, float64:
        :math:`T^T T = K_{mm} + \epsilon m I`, :math:`A^T A = T T^T/m + \lambda I`.
    m, n : int
        Number of centers and of data points.
    penalty, eps : float
        :math:`\lambda` and the jitter :math:`\epsilon`.

    Raises
    ------
    ValueError
        If ``penalty <= 0`` or ``n < 1``.
    nyhopt.errors.IllConditionedError
        If a factorization fails (a non-finite kernel matrix).

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> Z = np.random.default_rng(0).normal(size=(5, 2))
    >>> pc = FalkonPreconditioner(nh.GaussianKernel(1.0), Z, penalty=1e-3, n=100)
    >>> pc.T.shape, pc.eps
    ((5, 5), 1e-10)
    """

    def __init__(self, kernel, Z, penalty, n, dtype=None):
        xp = get_namespace(Z)
        Z = check_matrix(Z, "Z", xp)
        self.penalty = check_positive(penalty, "penalty")
        if isinstance(n, bool) or int(n) != n or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        self.n = int(n)
        self.m = Z.shape[0]
        self.xp = xp
        self.eps = jitter(Z.dtype if dtype is None else dtype)
        # at most two m x m float64 arrays alive at a time (factorizations in place)
        Kmm = kernel_matrix(kernel, Z.astype(np.float64, copy=False))
        add_to_diagonal(Kmm, self.eps * self.m, xp, overwrite=True)
        self.T = cholesky_upper(Kmm, xp, "Kmm + eps*m*I", overwrite=True)
        del Kmm
        TTt = self.T @ self.T.T
        TTt /= self.m
        add_to_diagonal(TTt, self.penalty, xp, overwrite=True)
        self.A = cholesky_upper(TTt, xp, "T T^T/m + penalty*I", overwrite=True)

    def apply(self, V):
        r""":math:`P V = n^{-1/2} T^{-1} A^{-1} V`."""
        xp = self.xp
        out = solve_triangular(self.T, solve_triangular(self.A, V, xp), xp)
        out /= math.sqrt(self.n)
        return out

    def apply_transpose(self, U):
        r""":math:`P^T U = n^{-1/2} A^{-T} T^{-T} U`."""
        xp = self.xp
        out = solve_triangular(self.A, solve_triangular(self.T, U, xp, trans=True), xp, trans=True)
        out /= math.sqrt(self.n)
        return out

    def __repr__(self):
        return f"FalkonPreconditioner(m={self.m}, n={self.n}, penalty={self.penalty!r}, eps={self.eps!r})"


def check_iter_args(tol, maxiter):
    """``(tol, maxiter)`` of an iterative solve, checked (``tol >= 0`` real, ``maxiter >= 0`` integer)."""
    tol = check_real(tol, "tol", low=0.0)
    if isinstance(maxiter, bool) or not isinstance(maxiter, (int, np.integer)) or maxiter < 0:
        raise ValueError(f"maxiter must be an integer >= 0, got {maxiter!r}")
    return tol, int(maxiter)


def falkon_solve(kernel, X, Z, Y, penalty, *, tol=1e-7, maxiter=100, beta0=None, precond=None,
                 rhs=None, warn=True, cache="auto", gram="auto"):
    r"""Solve :math:`(K_{nm}^T K_{nm} + n\lambda K_{mm})\,\alpha = K_{nm}^T Y` by Falkon.

    Parameters
    ----------
    kernel : Kernel
        Kernel with its lengthscales.
    X : array, shape (n, d)
        Training inputs (NumPy or CuPy; float32 or float64).
    Z : array, shape (m, d)
        Nystrom centers (same array module; cast to the dtype of ``X``).
    Y : array, shape (n,) or (n, k), or None
        Targets; several columns are solved together, one data pass per
        iteration.  May be None when ``rhs`` is given.
    penalty : float
        :math:`\lambda > 0`.
    tol : float, default 1e-7
        Relative residual tolerance of CG on the preconditioned system.
    maxiter : int, default 100
        Maximal number of CG iterations.
    beta0 : array, shape (m, k), optional
        Warm start: the ``beta`` of a previous :class:`FalkonResult`.
    precond : FalkonPreconditioner, optional
        A preconditioner built for the same kernel, centers, penalty and ``n``
        (rebuilt when omitted).
    rhs : array, shape (m,) or (m, k), optional
        :math:`K_{nm}^T Y` if the caller already has it.  When omitted it is
        computed in the same pass over the data as the initial residual (warm
        start) or by one :func:`~nyhopt.ops.kmtv` pass (cold start).
    warn : bool, default True
        Emit a :class:`ConvergenceWarning` when CG stops at ``maxiter`` above
        ``tol``.
    cache : {"auto", True, False, None, "float16"}, CachedKernel or KernelOperator, default "auto"
        Hold :math:`K_{nm}` in memory for the solve, so that the passes become
        matrix products: ``"auto"`` when ``n x m`` numbers fit the cache
        budget (:func:`nyhopt.set_cache_budget`; 1 GiB on the host by
        default), ``True``/``False`` (or None) to force it, ``"float16"`` to
        hold it in 16 bits (float32 data; :mod:`nyhopt.ops.half`); or a
        :class:`~nyhopt.ops.cached.CachedKernel` /
        :class:`~nyhopt.ops.operator.KernelOperator` of these ``X``, ``Z`` and
        kernel to reuse.
    gram : {"auto", True, False}, default "auto"
        Form :math:`K_{nm}^T K_{nm}` (one pass, ``O(m^2)`` memory) and run the
        remaining iterations without passes over the data: ``"auto"`` once
        the passes made have cost as much as forming it (CPU only; see
        :mod:`nyhopt.ops.operator`).  Ignored when ``cache`` is a
        ``KernelOperator`` (its own setting applies).

    Returns
    -------
    FalkonResult
        ``alpha`` (m, k) float64, ``beta`` (m, k) and the CG record.

    Raises
    ------
    ValueError
        Bad shapes, non-finite values, ``penalty <= 0``, bad ``tol``/``maxiter``.

    Notes
    -----
    Passes over the data, streaming: one per CG iteration, plus one for the
    right-hand side when ``rhs`` is not given (shared with the initial
    residual on a warm start); with the Gram matrix, one to form it (with the
    right-hand side) and none per iteration after that
    (:attr:`FalkonResult.passes` counts them).  Memory: row blocks sized by
    the memory budget, plus ``O(m^2)`` for the factors, plus ``n x m``
    numbers only when the kernel is held (``cache``).  The iterates are the
    same on every route, up to rounding.  See the module docstring for the
    algebra.

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = np.sin(X[:, 0])
    >>> res = falkon_solve(nh.GaussianKernel(1.0), X, X[:20], y, penalty=1e-4, tol=1e-10)
    >>> res.alpha.shape, res.cg.converged
    ((20, 1), True)
    """
    from ..placement import kernel_operator  # the one place that reads where the data live

    if is_kernel_operator(cache):
        op, owned = cache, False
        if tuple(op.shape) != (X.shape[0], Z.shape[0]):
            raise ValueError(f"cache is an operator for a {tuple(op.shape)} kernel matrix, "
                             f"expected {(X.shape[0], Z.shape[0])}")
        start = op.passes
    else:
        op, Y = kernel_operator(kernel, X, Z, Y, cache=False if cache is None else cache, gram=gram,
                                others=(beta0, rhs))
        owned, start = True, 0  # the kernel evaluation of a cache made here counts
    try:
        res = falkon_operator_solve(op, Y, penalty, tol=tol, maxiter=maxiter, beta0=beta0, precond=precond,
                                    rhs=rhs, warn=warn)
    finally:
        if owned:
            op.close()
    return res._replace(passes=op.passes - start)


def is_kernel_operator(obj) -> bool:
    """Whether ``obj`` serves the passes of a solve (the interface of :class:`~nyhopt.ops.operator.KernelOperator`)."""
    return all(hasattr(obj, name) for name in ("normal_matvec", "kmtv", "form_gram", "passes", "check_targets"))


def falkon_operator_solve(op, Y, penalty, *, tol=1e-7, maxiter=100, beta0=None, precond=None, rhs=None,
                          warn=True):
    r"""Falkon on a kernel operator: :func:`falkon_solve` whatever holds the data.

    Parameters
    ----------
    op : KernelOperator or ShardedOperator
        The products with :math:`K_{nm}` (:func:`nyhopt.placement.kernel_operator`
        picks one from the arrays); it carries the kernel and the centers.
    Y : operand of ``op`` or None
        The targets as ``op`` takes them (:meth:`~nyhopt.ops.operator.KernelOperator.check_targets`):
        an (n, k) array in memory, ``TARGETS`` on a cluster.
    penalty, tol, maxiter, beta0, precond, rhs, warn
        As for :func:`falkon_solve`.

    Returns
    -------
    FalkonResult
        On the driver's array module (``op.xp``); ``passes`` is left 0.

    Notes
    -----
    The CG loop, the preconditioner and every ``m x m`` and ``m x k``
    operation run here, in float64; only the passes (``op.normal_matvec``,
    ``op.kmtv``, ``op.form_gram``) touch the data.
    """
    xp = op.xp
    n, m = op.shape
    advice = device_memory_advice(xp, f"solving with Falkon (n = {n}, m = {m}, {op.dtype})",
                                  lambda: stream_memory_advice(n, m, op.dtype, xp))
    with cpu_threads(op.engine, xp), advice:  # streaming: Numba owns the cores; matrix products: nyhopt's pool
        return _falkon_solve(op, Y, penalty, tol, maxiter, beta0, precond, rhs, warn, xp)


def _falkon_solve(op, Y, penalty, tol, maxiter, beta0, precond, rhs, warn, xp):
    (n, m), kernel, Z = op.shape, op.kernel, op.Z
    penalty = check_positive(penalty, "penalty")
    tol, maxiter = check_iter_args(tol, maxiter)
    if Y is None and rhs is None:
        raise ValueError("give the targets Y or the right-hand side rhs")
    ky = None
    if Y is not None:
        Y, ky = op.check_targets(Y, "Y")
    if rhs is not None:
        rhs = xp.asarray(rhs.get() if xp is np and hasattr(rhs, "get") else rhs, dtype=np.float64)
        rhs = rhs.reshape(m, -1) if rhs.ndim == 1 else rhs
        if rhs.ndim != 2 or rhs.shape[0] != m:
            raise ValueError(f"rhs must have shape ({m}, k), got {tuple(rhs.shape)}")
        if Y is not None and rhs.shape[1] != ky:
            raise ValueError(f"rhs has {rhs.shape[1]} columns but Y has {ky}")
    k = rhs.shape[1] if rhs is not None else ky
    if beta0 is not None:
        beta0 = xp.asarray(beta0.get() if xp is np and hasattr(beta0, "get") else beta0, dtype=np.float64)
        beta0 = beta0.reshape(m, -1) if beta0.ndim == 1 else beta0
        if beta0.shape != (m, k):
            raise ValueError(f"beta0 must have shape {(m, k)}, got {tuple(beta0.shape)}")
    if precond is None:
        precond = FalkonPreconditioner(kernel, Z, penalty, n, dtype=op.dtype)
    elif precond.m != m or precond.n != n or precond.penalty != penalty:
        raise ValueError(
            f"precond was built for m={precond.m}, n={precond.n}, penalty={precond.penalty}, "
            f"not m={m}, n={n}, penalty={penalty}"
        )

    if rhs is None and beta0 is None and op.gram is None and op.gram_policy is True:
        rhs = op.form_gram(Y)  # the right-hand side comes with the Gram pass
    return falkon_cg(op.normal_matvec, op.kmtv, Y, precond, n, op.dtype, penalty, tol, maxiter, beta0, rhs,
                     warn, xp, gram=op.gram)


def preconditioned_gram(precond, gram, n, penalty, xp):
    r"""The CG matrix :math:`W = A^{-T}(T^{-T} G T^{-1}/n + \lambda I)A^{-1}` from :math:`G = K^T K`.

    ``O(m^3)``, float64, symmetrized; each CG iteration is then one ``m x m`` product.
    """
    m = gram.shape[0]
    Ai = solve_triangular(precond.A, xp.eye(m), xp)  # A^{-1}
    M = solve_triangular(precond.T, Ai, xp)  # T^{-1} A^{-1}
    W = (M.T @ gram) @ M
    W /= n
    W += penalty * (Ai.T @ Ai)
    return 0.5 * (W + W.T)


def falkon_cg(normal, kmtv_, Y, precond, n, dt, penalty, tol, maxiter, beta0, rhs, warn, xp, gram=None):
    """Falkon's CG on the driver over the passes ``normal(V, U)`` and ``kmtv_(U)``.

    ``Y`` is only handed to those two (an operand of the operator that
    serves them); the rest runs here, in float64.
    With ``gram`` (:math:`K^T K`, formed before the solve) the CG matrix is
    formed once (:func:`preconditioned_gram`) and the iterations make no pass.
    """
    Wmat = None if gram is None else preconditioned_gram(precond, gram, n, penalty, xp)

    def W_and_rhs(Vw, U=None):
        """W Vw (and K^T U in the same pass), float64; A^{-1} Vw is solved once."""
        if Wmat is not None:
            return Wmat @ Vw, (None if U is None else kmtv_(U).astype(np.float64, copy=False))
        AiV = solve_triangular(precond.A, Vw, xp)
        V = solve_triangular(precond.T, AiV, xp)
        KtKV, KtU = normal(V.astype(dt, copy=False), U)
        inner = solve_triangular(precond.T, KtKV.astype(np.float64, copy=False), xp, trans=True)
        inner /= n
        inner += penalty * AiV
        out = solve_triangular(precond.A, inner, xp, trans=True)
        return out, (None if KtU is None else KtU.astype(np.float64, copy=False))

    def W(Vw):
        return W_and_rhs(Vw)[0]

    r0 = None
    if beta0 is not None:
        need_rhs = rhs is None
        Wb0, KtY = W_and_rhs(beta0, Y if need_rhs else None)
        if need_rhs:
            rhs = KtY
        b = precond.apply_transpose(rhs)
        r0 = b - Wb0
    else:
        if rhs is None:
            rhs = kmtv_(Y).astype(np.float64, copy=False)
        b = precond.apply_transpose(rhs)
    cg = conjugate_gradient(W, b, x0=beta0, tol=tol, maxiter=maxiter, xp=xp, r0=r0)
    if warn and not cg.converged:
        why = "maxiter" if cg.iterations >= maxiter else "a breakdown (W not positive definite in floating point)"
        warn_user(
            f"Falkon CG stopped at {why} after {cg.iterations} iterations (maxiter={maxiter}) with "
            f"relative residual {cg.residual_norms[-1]:.3g} > tol={tol:.3g}; increase maxiter or tol",
            ConvergenceWarning
        )
    alpha = precond.apply(cg.x)
    return FalkonResult(alpha, cg.x, cg)
