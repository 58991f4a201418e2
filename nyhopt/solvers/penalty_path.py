r"""Held-out errors of N-KRR along a path of penalties and nested sets of centers, from one pass.

The direct solver (:mod:`nyhopt.solvers.direct`) forms, in one pass over the
rows, :math:`G = A A^\top` and :math:`A Y` with :math:`A = L^{-1} K_{mn}`,
:math:`L L^\top = K_{mm} + \epsilon I`.  Two facts make a whole grid of fits
cost little more than that pass:

* **Nested centers.**  :math:`L` is lower triangular, so the first :math:`s`
  rows of :math:`A` depend only on the first :math:`s` centers, and the
  leading :math:`s \times s` block of :math:`G` (of :math:`A Y`) is the
  whitened Gram matrix (moments) of the centers :math:`z_1, \dots, z_s`.
* **Leading blocks of a Cholesky factor.**  With
  :math:`G + n\lambda I = U^\top U` (:math:`U` upper), the leading block
  :math:`U_s` is the factor of the leading block, and the forward solve
  :math:`U^\top V = A Y` gives :math:`V_s` for every prefix at once.

So one factorization per penalty gives every size: the coefficients
:math:`W_s = U_s^{-1} V_s` (:math:`\alpha = L_s^{-\top} W_s`), and the
held-out predictions :math:`A_{val,s}^\top W_s` with
:math:`A_{val} = L^{-1} K(Z, X_{val})`.  The targets are centered by their
column means, as :class:`~nyhopt.NystromKRR` does with ``normalize_y``;
with ``fit_intercept`` the unpenalized constant is profiled
(:mod:`nyhopt.models._intercept`) from the right-hand side :math:`[Y \mid 1]`:
:math:`c^* = Q_{1Y} / Q_{11}` with
:math:`Q = [Y \mid 1]^\top [Y \mid 1] - V_s^\top V_s`, which is the
penalized residual form :math:`r^\top r + n\lambda\,\alpha^\top \tilde K \alpha`
of that module (because :math:`(G_s + n\lambda I) W_s = (AY)_s`).

Each fit is the one :func:`~nyhopt.solvers.direct.direct_solve` makes at
those centers and that penalty (the same jitter; under
:func:`~nyhopt.solvers.direct.products_in` the same float32 products).
"""
from __future__ import annotations

import numpy as np

from ..backend import get_namespace, to_numpy
from ..backend._config import block_rows
from ..backend._threads import cpu_threads
from ..errors import IllConditionedError
from ..inputs._validation import check_matrix, check_targets
from ..ops._blocks import KernelBlocks
from ._linalg import add_to_diagonal, cholesky_upper, solve_triangular
from .direct import _PRODUCTS, kmm_upper, whitened_moments

__all__ = ["held_out_path"]


def _check_grid(values, name, kind):
    a = np.asarray(values, dtype=kind).ravel()
    if a.size == 0:
        raise ValueError(f"{name} must not be empty")
    return a


def held_out_path(kernel, X, Z, Y, X_val, Y_val, penalties, sizes, fit_intercept=False):
    r"""Held-out mean squared errors of the fits at every penalty and every leading set of centers.

    Parameters
    ----------
    kernel : Kernel
        The kernel with its lengthscales.
    X, Y : arrays (n, d) and (n,) or (n, p)
        Training rows and targets.
    Z : array (m, d)
        Centers; a size ``s`` uses the first ``s`` of them.
    X_val, Y_val : arrays (n_val, d) and (n_val,) or (n_val, p)
        Held-out rows and targets.
    penalties : sequence of float
        :math:`\lambda > 0`.
    sizes : sequence of int
        Numbers of leading centers, each in ``1..m``.
    fit_intercept : bool, default False
        An unpenalized constant per output (else the targets' column means,
        as ``normalize_y``).

    Returns
    -------
    errors : ndarray (len(sizes), len(penalties)), float64
        The held-out mean squared error over all outputs; NaN where
        :math:`G + n\lambda I` is not numerically positive definite.

    Raises
    ------
    ValueError
        Bad shapes, non-finite values, a penalty that is not positive or a
        size outside ``1..m``.
    nyhopt.errors.IllConditionedError
        If :math:`K_{mm} + \epsilon I` cannot be factorized.

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, size=(400, 1)); y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=400)
    >>> err = held_out_path(nh.GaussianKernel(0.5), X[:300], X[:40], y[:300], X[300:], y[300:],
    ...                     penalties=[1e-1, 1e-4], sizes=[5, 40])
    >>> err.shape, bool(err[1, 1] < err[0, 0])
    ((2, 2), True)
    """
    xp = get_namespace(X, Z, Y)
    with cpu_threads("blas", xp):
        X = check_matrix(X, "X", xp)
        Z = check_matrix(Z, "Z", xp, dtype=X.dtype, n_features=X.shape[1])
        X_val = check_matrix(X_val, "X_val", xp, dtype=X.dtype, n_features=X.shape[1])
        n, m, n_val = X.shape[0], Z.shape[0], X_val.shape[0]
        Y, _ = check_targets(Y, "Y", n, xp, dtype=xp.float64)
        Y_val, _ = check_targets(Y_val, "Y_val", n_val, xp, dtype=xp.float64)
        if Y_val.shape[1] != Y.shape[1]:
            raise ValueError(f"Y_val has {Y_val.shape[1]} output column(s) but Y has {Y.shape[1]}")
        penalties = _check_grid(penalties, "penalties", np.float64)
        if not np.all(np.isfinite(penalties) & (penalties > 0)):
            raise ValueError(f"penalties must be finite and > 0, got {penalties.tolist()}")
        sizes = _check_grid(sizes, "sizes", np.int64)
        if sizes.min() < 1 or sizes.max() > m:
            raise ValueError(f"sizes must be in 1..{m} (the number of centers), got {sizes.tolist()}")
        p = Y.shape[1]
        shift = Y.mean(axis=0)
        Yc = Y - shift[None, :]
        rhs = xp.concatenate([Yc, xp.ones((n, 1), dtype=xp.float64)], axis=1) if fit_intercept else Yc
        Lt = kmm_upper(kernel, Z, X.dtype, xp)
        G, AY, _ = whitened_moments(kernel, X, Z, rhs.astype(X.dtype, copy=False), Lt, xp, _PRODUCTS.get())
        YtY = to_numpy(rhs.T @ rhs, dtype=np.float64)
        A_val = _whitened_rows(kernel, X_val, Z, Lt, xp)  # (m, n_val)
        target = Y_val - shift[None, :]
        errors = np.full((sizes.size, penalties.size), np.nan)
        for j, lam in enumerate(penalties):
            M = add_to_diagonal(G, n * float(lam), xp)
            try:
                U = cholesky_upper(M, xp, "A A^T + n*penalty*I", overwrite=True)
            except IllConditionedError:
                continue
            V = solve_triangular(U, AY, xp, trans=True)
            for i, s in enumerate(sizes):
                s = int(s)
                W = solve_triangular(xp.ascontiguousarray(U[:s, :s]), V[:s], xp)
                if fit_intercept:
                    Vs = to_numpy(V[:s], dtype=np.float64)
                    Q = YtY - Vs.T @ Vs
                    if not Q[p, p] > 0:
                        continue
                    c = Q[:p, p] / Q[p, p]
                    W = W[:, :p] - W[:, p:] @ xp.asarray(c[None, :])
                    pred = A_val[:s].T @ W + xp.asarray(c[None, :])
                else:
                    pred = A_val[:s].T @ W
                errors[i, j] = float(xp.mean((target - pred) ** 2))
        return errors


def _whitened_rows(kernel, X, Z, Lt, xp):
    """:math:`L^{-1} K(Z, X)` (m, n) in float64, one row block of ``X`` at a time."""
    n, m = X.shape[0], Z.shape[0]
    out = xp.empty((m, n), dtype=xp.float64)
    blocks = KernelBlocks(kernel, X, Z, checked=True)
    b = block_rows(n, m, 8, n_temps=3)
    for start in range(0, n, b):
        stop = min(start + b, n)
        Kb = blocks.rows(start, stop).astype(xp.float64, copy=False)
        out[:, start:stop] = solve_triangular(Lt, Kb.T, xp, trans=True)
    return out
