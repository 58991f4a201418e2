r"""Direct (Cholesky) solver for Nystrom KRR on problems of moderate size.

Computes :math:`\alpha = (K_{nm}^T K_{nm} + n\lambda K_{mm})^{-1} K_{nm}^T Y`
through the stable factorization of ``MATH.md`` rather than the normal
equations (forming :math:`B` and solving with it loses about six digits when
:math:`K_{mm}` is ill conditioned):

.. math::
    L = \operatorname{chol}(K_{mm} + \epsilon I), \quad
    A = L^{-1} K_{mn}, \quad
    C = \operatorname{chol}(A A^T + n\lambda I), \quad
    \alpha = L^{-T} C^{-T} C^{-1} A Y,

with the lower factors :math:`L L^T = K_{mm} + \epsilon I`,
:math:`C C^T = A A^T + n\lambda I` and :math:`\epsilon` =
:func:`~nyhopt.solvers.jitter` of the data dtype.  Indeed
:math:`L^{-T}(A A^T + n\lambda I)^{-1} L^{-1} K_{mn}
= (K_{mn} K_{nm} + n\lambda L L^T)^{-1} K_{mn}`.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import NamedTuple

import numpy as np

from ..backend._config import block_rows
from ..inputs._validation import check_matrix, check_positive, check_targets
from ..backend._threads import cpu_threads
from ..backend import get_namespace, is_cupy_namespace
from ..backend._blas import syrk_update
from ..ops import kernel_matrix
from ..ops._blocks import KernelBlocks
from ._jitter import jitter
from ._linalg import add_to_diagonal, cholesky_upper, solve_triangular

__all__ = ["direct_solve", "direct_factors", "DirectFactors", "kmm_upper", "whitened_moments", "products_in"]

_PRODUCTS = ContextVar("nyhopt_direct_products", default=None)
#: With float32 products, the Gram products of the row blocks are summed in float32 over at most this many
#: rows before they are added into the float64 sum (one ``m x m`` addition per this many rows).
FLOAT32_SUM_ROWS = 8192


@contextmanager
def products_in(dtype):
    r"""Within the block, the direct solver's :math:`n \times m` products run in ``dtype`` (None: float64).

    The one pass of :func:`direct_factors` (and so of every direct fit and
    variance model in this thread or task) forms :math:`A_b = L^{-1}K_b^\top`
    and :math:`A_b A_b^\top` per row block of ``b`` rows; with ``float32``
    both run in float32 BLAS (twice float64's rate on the CPU) and each
    block's products are added into float64 sums, so an entry of :math:`S`
    carries the rounding of a float32 sum of at most :data:`FLOAT32_SUM_ROWS`
    terms, not of ``n`` (``docs/solvers.md``, "Float32 products").  The kernel
    values are computed in the data's dtype (then rounded to float32); the
    jitter (the data's), :math:`L`, :math:`AY` and all ``m x m`` algebra stay
    float64, so the model is the float64 one, computed with rounder products.  A budgeted run's final fit uses it (``docs/tuning.md``,
    "Large data", point 3); a plain ``fit`` never does.

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2)); y = np.sin(X[:, 0])
    >>> a64 = direct_solve(nh.GaussianKernel(1.0), X, X[:20], y, penalty=1e-3)
    >>> with products_in(np.float32):
    ...     a32 = direct_solve(nh.GaussianKernel(1.0), X, X[:20], y, penalty=1e-3)
    >>> bool(np.abs(a32 - a64).max() < 1e-3 * np.abs(a64).max())
    True
    """
    dt = None if dtype is None else np.dtype(dtype)
    if dt is not None and dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32, float64 or None, got {dtype!r}")
    token = _PRODUCTS.set(None if dt == np.float64 else dt)
    try:
        yield
    finally:
        _PRODUCTS.reset(token)


def direct_solve(kernel, X, Z, Y, penalty):
    r"""Nystrom KRR coefficients by the :math:`L, A, C` factorization.

    Parameters
    ----------
    kernel : Kernel
        Kernel with its lengthscales.
    X : array, shape (n, d)
        Training inputs (NumPy or CuPy, float32 or float64).
    Z : array, shape (m, d)
        Nystrom centers (cast to the dtype of ``X``).
    Y : array, shape (n,) or (n, k)
        Targets.
    penalty : float
        :math:`\lambda > 0`.

    Returns
    -------
    alpha : array, shape (m, k)
        float64 coefficients, on the device of ``X``.

    Raises
    ------
    ValueError
        Bad shapes, non-finite values or ``penalty <= 0``.
    nyhopt.errors.IllConditionedError
        If a Cholesky factorization fails.

    Notes
    -----
    :math:`A` is never held whole: it is built one row block of ``X`` at a
    time (:math:`A_b = L^{-1} K(X_b, Z)^T`), accumulating :math:`A A^T` and
    :math:`A Y`, so memory is one ``b x m`` block plus ``O(m^2)``.  Time is
    :math:`O(n m^2)`.  All ``m x m`` algebra is float64; for float32 data each
    kernel block is computed in float32 and cast to float64.

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2)); y = X[:, 0] ** 2
    >>> alpha = direct_solve(nh.GaussianKernel(1.0), X, X[:10], y, penalty=1e-3)
    >>> alpha.shape
    (10, 1)
    """
    return direct_factors(kernel, X, Z, Y, penalty).alpha


class DirectFactors(NamedTuple):
    """What :func:`direct_factors` computes on the way to the coefficients.

    Attributes
    ----------
    alpha : array (m, p), float64
    Lt, Ct : arrays (m, m), float64
        The upper factors :math:`L^T` and :math:`C^T`.
    AY : array (m, p), float64
        :math:`A Y`.
    yy : float
        :math:`\\|Y\\|_F^2`.
    n_lam : float
        :math:`n\\lambda`.
    """

    alpha: object
    Lt: object
    Ct: object
    AY: object
    yy: float
    n_lam: float


def kmm_upper(kernel, Z, dtype, xp):
    """``L^T`` with ``L L^T = k(Z, Z) + eps I`` (float64; ``eps`` of the data ``dtype``), as the direct solver."""
    Kmm = kernel_matrix(kernel, Z.astype(np.float64, copy=False))
    add_to_diagonal(Kmm, jitter(dtype), xp, overwrite=True)
    return cholesky_upper(Kmm, xp, "Kmm + eps*I", overwrite=True)


def whitened_moments(kernel, X, Z, Y, Lt, xp, products=None):
    """``(A A^T, A Y, ||Y||^2)`` with :math:`A = L^{-1}k(Z, X)`, float64, in one pass over row blocks of ``X``.

    ``Y`` is (n, p); ``Z`` has the dtype of ``X``.  Each kernel block is cast
    to float64 before the triangular solve; with ``products=numpy.float32``
    to float32, and the solve and :math:`A_b A_b^T` run in float32: the Gram
    products of the blocks are summed in float32 over at most
    :data:`FLOAT32_SUM_ROWS` rows, then added into the float64 sum
    (:func:`products_in`; :math:`A_b Y_b` stays float64).  On the CPU the Gram
    product is one BLAS ``syrk`` into the sum (no ``m x m`` temporary per
    block).  ``X`` and ``Z`` must be validated already (as
    :func:`direct_factors` and the Dask blocks do): the blocks are not checked
    again, so the pass does not wait for the device per block.
    """
    n, m = X.shape[0], Z.shape[0]
    blocks = KernelBlocks(kernel, X, Z, checked=True)
    f64 = np.float64
    work = np.float32 if products is not None and np.dtype(products) == np.float32 else f64
    host = not is_cupy_namespace(xp)
    Lw = Lt.astype(work, copy=False)
    G = xp.zeros((m, m), dtype=f64)
    part = G if work == f64 else xp.zeros((m, m), dtype=work)  # the float32 partial sum
    AY = xp.zeros((m, Y.shape[1]), dtype=f64)
    yy = xp.zeros((), dtype=f64)  # summed on the device: no synchronization per block
    b = block_rows(n, m, 8, n_temps=4, per_row=Y.shape[1])
    if part is not G:
        b = min(b, FLOAT32_SUM_ROWS)
    in_part = 0
    for start in range(0, n, b):
        sl = slice(start, min(start + b, n))
        Kb = blocks.rows(sl.start, sl.stop).astype(work, copy=False)  # (b, m)
        Ab = solve_triangular(Lw, Kb.T, xp, trans=True)  # L^{-1} K_b^T, (m, b)
        if host:
            syrk_update(part, Ab)  # the lower triangle
        else:
            part += Ab @ Ab.T
        in_part += sl.stop - sl.start
        if part is not G and (in_part + b > FLOAT32_SUM_ROWS or sl.stop == n):
            G += part
            part[...] = 0
            in_part = 0
        Yb = Y[sl].astype(f64, copy=False)
        AY += Ab.astype(f64, copy=False) @ Yb
        yy += xp.sum(Yb * Yb)
    if host:
        G += xp.tril(G, -1).T
    return G, AY, float(yy)


def direct_factors(kernel, X, Z, Y, penalty) -> DirectFactors:
    """:func:`direct_solve` with the factors it computes on the way (for the predictive variance).

    Returns
    -------
    DirectFactors
    """
    xp = get_namespace(X, Z, Y)
    with cpu_threads("blas", xp):  # dense algebra dominates: BLAS owns the cores
        X = check_matrix(X, "X", xp)
        Z = check_matrix(Z, "Z", xp, dtype=X.dtype, n_features=X.shape[1])
        n = X.shape[0]
        Y, _ = check_targets(Y, "Y", n, xp, dtype=X.dtype)
        penalty = check_positive(penalty, "penalty")
        Lt = kmm_upper(kernel, Z, X.dtype, xp)
        G, AY, yy = whitened_moments(kernel, X, Z, Y, Lt, xp, _PRODUCTS.get())
        n_lam = float(n * penalty)
        add_to_diagonal(G, n_lam, xp, overwrite=True)
        Ct = cholesky_upper(G, xp, "A A^T + n*penalty*I", overwrite=True)  # C^T
        w = solve_triangular(Ct, solve_triangular(Ct, AY, xp, trans=True), xp)  # (C C^T)^{-1} A Y
        return DirectFactors(solve_triangular(Lt, w, xp), Lt, Ct, AY, yy, n_lam)  # alpha = L^{-T} w
