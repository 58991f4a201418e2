r"""Preconditioned conjugate gradient for several right-hand sides at once.

The columns of ``b`` are independent systems :math:`A x_j = b_j` that share
the operator :math:`A` (symmetric positive definite).  Each iteration applies
``matvec`` once to a block holding the search directions of all columns that
have not converged yet, so an operator whose cost is dominated by a pass over
data (Falkon's :math:`K_{nm}^T K_{nm} v`) pays that pass once per iteration,
whatever the number of columns.

The code uses only array methods and the operators ``@``, ``*``, ``+``, so it
runs unchanged on NumPy and CuPy arrays.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..inputs._validation import check_real
from ..backend import get_namespace, to_numpy

__all__ = ["CGResult", "conjugate_gradient"]


class CGResult(NamedTuple):
    r"""Record of one (multi right-hand side) conjugate gradient run.

    Attributes
    ----------
    x : array, shape (m, k)
        The solution, one column per right-hand side (NumPy or CuPy, like ``b``).
    iterations : int
        Number of iterations, i.e. number of calls of ``matvec`` made by the
        iteration itself (the optional initial-residual product is not counted).
    residual_norms : numpy.ndarray, shape (iterations + 1,)
        Relative residual :math:`\max_j \|b_j - A x_j\| / \|b_j\|` before the
        first iteration and after each one (float64, on the host).  The
        residuals are the ones the recurrence updates, the standard CG
        stopping quantity.
    converged : bool
        True when every column reached ``residual <= tol``.
    """

    x: object
    iterations: int
    residual_norms: np.ndarray
    converged: bool


def _col_norms(a, xp):
    return xp.sqrt(xp.sum(a * a, axis=0))


def conjugate_gradient(matvec, b, x0=None, precond=None, tol=1e-7, maxiter=100, xp=None, r0=None):
    r"""Solve :math:`A X = B` column by column with preconditioned CG.

    Parameters
    ----------
    matvec : callable
        ``matvec(V)`` returns :math:`A V` for a block ``V`` of shape (m, j),
        ``1 <= j <= k``; :math:`A` must be symmetric positive definite.
    b : array, shape (m,) or (m, k)
        Right-hand sides.  A 1-D ``b`` is treated as one column (the solution
        is then returned as shape (m, 1)).
    x0 : array, shape like ``b``, optional
        Starting point (warm start); zero when omitted.
    precond : callable, optional
        ``precond(R)`` applies :math:`M^{-1}` (an SPD approximation of
        :math:`A^{-1}`) to a block of residuals.  Identity when omitted.
    tol : float, default 1e-7
        Relative residual tolerance: column ``j`` stops once
        :math:`\|b_j - A x_j\| \le \mathrm{tol}\, \|b_j\|`.
    maxiter : int, default 100
        Maximal number of iterations (``0`` returns the starting point).
    xp : module, optional
        Array module; taken from ``b`` when omitted.
    r0 : array, shape like ``b``, optional
        The initial residual :math:`b - A x_0` when the caller already has it
        (saves one ``matvec``).  Ignored when ``x0`` is omitted.

    Returns
    -------
    CGResult
        Solution, number of iterations, relative residual history and
        convergence flag.

    Raises
    ------
    ValueError
        If ``tol`` is negative, ``maxiter`` is negative or shapes disagree.

    Notes
    -----
    For every column the recurrences are the textbook ones (Hestenes and
    Stiefel 1952):

    .. math::
        z = M^{-1} r,\quad \alpha = \frac{r^T z}{p^T A p},\quad
        x \leftarrow x + \alpha p,\quad r \leftarrow r - \alpha A p,\quad
        \beta = \frac{r_{+}^T z_{+}}{r^T z},\quad p \leftarrow z_{+} + \beta p .

    A column whose right-hand side is zero is solved by ``x = 0`` at once.
    A column is frozen once it has converged, or if it breaks down
    (:math:`p^T A p \le 0`, which happens only when :math:`A` is not
    positive definite in floating point); a broken-down column counts as
    not converged.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> b = np.array([[1.0, 0.0], [2.0, 1.0]])
    >>> res = conjugate_gradient(lambda V: A @ V, b, tol=1e-12)
    >>> res.converged, res.iterations
    (True, 2)
    >>> np.allclose(A @ res.x, b)
    True
    """
    if xp is None:
        xp = get_namespace(b)
    tol = check_real(tol, "tol", low=0.0)
    if isinstance(maxiter, (bool, np.bool_)) or int(maxiter) != maxiter or maxiter < 0:
        raise ValueError(f"maxiter must be an integer >= 0, got {maxiter!r}")
    maxiter = int(maxiter)

    b = xp.asarray(b)
    if b.ndim == 1:
        b = b[:, None]
    if b.ndim != 2:
        raise ValueError(f"b must be 1-D or 2-D, got shape {tuple(b.shape)}")
    k = b.shape[1]
    if x0 is None:
        x = xp.zeros_like(b)
        r = b.copy()
    else:
        x = xp.array(x0, dtype=b.dtype, copy=True).reshape(b.shape[0], -1)
        if x.shape != b.shape:
            raise ValueError(f"x0 must have shape {tuple(b.shape)}, got {tuple(xp.asarray(x0).shape)}")
        if r0 is not None:
            r = xp.array(r0, dtype=b.dtype, copy=True).reshape(b.shape[0], -1)
            if r.shape != b.shape:
                raise ValueError(f"r0 must have shape {tuple(b.shape)}, got {tuple(xp.asarray(r0).shape)}")
        else:
            r = b - matvec(x)

    bnorm = to_numpy(_col_norms(b, xp), dtype=np.float64)
    zero_rhs = bnorm == 0
    if zero_rhs.any():  # the exact solution is 0
        x[:, xp.asarray(np.flatnonzero(zero_rhs))] = 0
        r[:, xp.asarray(np.flatnonzero(zero_rhs))] = 0
    scale = np.where(zero_rhs, 1.0, bnorm)

    def rel_residual(res):
        return to_numpy(_col_norms(res, xp)) / scale

    rel = rel_residual(r)
    history = [float(rel.max()) if k else 0.0]
    active = rel > tol
    broken = np.zeros(k, dtype=bool)

    z = r if precond is None else precond(r)
    p = z.copy()
    rz = xp.sum(r * z, axis=0)
    it = 0
    while it < maxiter and active.any():
        idx = np.flatnonzero(active)
        all_active = idx.size == k
        sel = slice(None) if all_active else xp.asarray(idx)
        p_a = p if all_active else p[:, sel]
        Ap = matvec(p_a)
        it += 1
        pAp = xp.sum(p_a * Ap, axis=0)
        pAp_h = to_numpy(pAp)
        bad = ~(pAp_h > 0)
        if bad.any():  # breakdown: A is not positive definite along p
            broken[idx[bad]] = True
            pAp = xp.where(xp.asarray(bad), 1.0, pAp)
        rz_a = rz if all_active else rz[sel]
        step = xp.where(xp.asarray(bad), 0.0, rz_a / pAp)
        if all_active:
            x += step * p_a
            r -= step * Ap
        else:
            x[:, sel] += step * p_a
            r[:, sel] -= step * Ap
        rel = rel_residual(r)
        history.append(float(rel.max()))
        active = (rel > tol) & ~broken
        if not active.any():
            break
        r_a = r if all_active else r[:, sel]
        z_a = r_a if precond is None else precond(r_a)
        rz_new = xp.sum(r_a * z_a, axis=0)
        beta = rz_new / xp.where(rz_a == 0, 1.0, rz_a)
        if all_active:
            p = z_a + beta * p
            rz = rz_new
        else:
            p[:, sel] = z_a + beta * p_a
            rz[sel] = rz_new
    converged = bool(np.all(rel <= tol)) and not broken.any()
    return CGResult(x, it, np.asarray(history, dtype=np.float64), converged)
