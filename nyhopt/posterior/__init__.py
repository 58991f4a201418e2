r"""The predictive variance of N-KRR: the posterior of Titsias' sparse GP with the same predictor.

The N-KRR predictor :math:`f(x) = k_x^T\alpha`, :math:`\alpha = B^{-1}K_{mn}Y`,
:math:`B = K_{mn}K_{nm} + n\lambda\tilde K` (:math:`\tilde K = K_{mm} + \epsilon I`,
:math:`k_x = k(Z, x)`), is the posterior mean of the sparse GP of
``docs/objectives.md`` (SGPR): the prior :math:`f \sim GP(0, a\,k)` with
inducing inputs :math:`Z`, observed with noise variance :math:`\sigma^2 = a n\lambda`.
With :math:`u = f(Z)`, Titsias' optimal :math:`q(u)` has covariance

.. math::
    \Sigma_u = a\tilde K\big(a\tilde K + \sigma^{-2}a^2K_{mn}K_{nm}\big)^{-1}a\tilde K
    = a\,n\lambda\,\tilde K B^{-1}\tilde K ,

and the predictive distribution of :math:`f(x)` (the DTC predictive) is
Gaussian with mean :math:`k_x^T\alpha` (independent of :math:`a`) and variance

.. math::
    \operatorname{var} f(x) = a\big[k(x, x) - k_x^T\tilde K^{-1}k_x
        + n\lambda\, k_x^T B^{-1}k_x\big] ;

a new observation :math:`y(x)` adds the noise variance :math:`a n\lambda`.
The same formulas with ``n x n`` algebra read
:math:`\operatorname{var} f(x) = a[k(x,x) - Q_{xn}(Q_{nn} + n\lambda I)^{-1}Q_{nx}]`
with :math:`Q = K_{\cdot m}\tilde K^{-1}K_{m\cdot}` (the tests check one
against the other).

Stable form (the notation of ``docs/objectives.md``).  With :math:`\tilde K = LL^T`,
:math:`A = L^{-1}K_{mn}`, :math:`S = AA^T` and :math:`M = S + n\lambda I = CC^T`
we have :math:`B = LML^T`, so with :math:`v = L^{-1}k_x` and :math:`w = C^{-1}v`

.. math::
    \operatorname{var} f(x) = a\big[k(x, x) - \|v\|^2 + n\lambda\|w\|^2\big] ,

two triangular solves per point (:math:`O(m^2)`) after :math:`O(m^3)` once;
rounding can make the bracket slightly negative, it is clipped at 0.  Nothing
is ``n x n``, and :math:`\tilde K^{-1}` is never formed.

Fitting the variance model is one pass over the training data
(:func:`whitened_moments`: :math:`S`, :math:`AY` and :math:`\|Y\|^2`, row
block by row block, :math:`O(nm^2)`), which is also the whole of the direct
solver (:func:`direct_fit` returns :math:`\alpha` from it).

The amplitude.  Unless given (``sgpr`` learns it), :math:`a` is the maximizer
of SGPR's bound at the fitted :math:`(\lambda, \ell, Z)` (``sgpr``'s profiled
amplitude): :math:`a^* = F/(n p\,n\lambda)` with the penalized fit
:math:`F = \mathrm{Tr}\,Y^T(I - H)Y = \|Y\|^2 - \|C^{-1}AY\|^2` summed over the
``p`` output columns (one amplitude for all columns, as in the SGPR model),
so that the noise variance :math:`a^* n\lambda = F/(np)` is the penalized
mean squared residual.  The quantities are in the units of the targets the
model was fitted on (standardized ones with ``normalize_y``).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..backend._config import block_rows
from ..backend._threads import cpu_threads
from ..inputs._validation import check_real
from ..backend import get_namespace, to_numpy
from ..ops import kernel_matrix
from ..ops._blocks import KernelBlocks
from ..objectives._exact import cholesky, tri_solve
from ..solvers.direct import direct_factors, kmm_upper, whitened_moments

__all__ = ["VarianceModel", "kmm_lower", "whitened_moments", "variance_model", "direct_fit", "fit_variance",
           "latent_variance", "latent_covariance", "amplitude_from_fit", "block_whitened", "check_variance_model"]


class VarianceModel(NamedTuple):
    """What the predictive variance needs besides the kernel and the centers.

    Attributes
    ----------
    L : array (m, m), float64
        Lower Cholesky factor of :math:`K_{mm} + \\epsilon I` (``epsilon`` of the data dtype).
    C : array (m, m), float64
        Lower Cholesky factor of :math:`M = AA^T + n\\lambda I`.
    n_lam : float
        :math:`n\\lambda` (``n`` training rows).
    amplitude : float
        Kernel amplitude :math:`a \\ge 0`; the noise variance is :math:`a n\\lambda`.
    """

    L: object
    C: object
    n_lam: float
    amplitude: float

    @property
    def noise_variance(self) -> float:
        """:math:`a n\\lambda`, the variance of the observation noise."""
        return self.amplitude * self.n_lam


def kmm_lower(kernel, Z, dtype, xp):
    """``L = chol(k(Z, Z) + eps I)``, lower, float64, ``eps`` of the data ``dtype``: the direct solver's factor."""
    return kmm_upper(kernel, Z, dtype, xp).T  # a transposed view: no m x m copy


def amplitude_from_fit(yy, AY, C, n_lam, n, xp, YtY=None):
    """SGPR's profiled amplitude :math:`a^* = F/(n p\\, n\\lambda)` with :math:`F = \\|Y\\|^2 - \\|C^{-1}AY\\|^2`.

    ``C`` is lower triangular; ``F`` is clipped at 0 (an exact interpolation of
    zero targets gives ``a = 0``).

    With ``YtY`` (the float64 Gram matrix :math:`Y^TY` of targets whose last
    column is the constant of an intercept, ``fit_intercept``), ``F`` is the
    fit of the other ``p`` columns with their constants profiled out: with
    :math:`M = Y^T(I - H)Y = Y^TY - (C^{-1}AY)^T C^{-1}AY` and ``q`` the
    constant's column, :math:`F = \\sum_{j<q} M_{jj} - M_{jq}^2 / M_{qq}`
    (``docs/objectives.md``, "A constant mean").
    """
    CiAY = tri_solve(C, AY, xp)
    if YtY is None:
        p = AY.shape[1]
        F = yy - float(xp.sum(CiAY * CiAY))
    else:
        Q = CiAY.T @ CiAY
        M = np.asarray(YtY, dtype=np.float64) - to_numpy(Q, dtype=np.float64)
        p = M.shape[0] - 1
        F = float(np.sum(np.diag(M)[:p]) - np.sum(M[:p, p] ** 2) / M[p, p]) if M[p, p] > 0 else 0.0
    return max(F, 0.0) / (n * p * n_lam)


def target_gram(Y, xp):
    """:math:`Y^TY` of targets ``Y`` (n,) or (n, p) in float64, a NumPy array (p, p)."""
    Y64 = Y.reshape(Y.shape[0], -1).astype(xp.float64, copy=False)
    return to_numpy(Y64.T @ Y64, dtype=np.float64)


def _check_amplitude(amplitude):
    if amplitude is None:
        return None
    return check_real(amplitude, "amplitude", low=0.0)


def variance_model(S, AY, yy, L, n, penalty, xp, amplitude=None, YtY=None):
    """The :class:`VarianceModel` from the moments ``(S, AY, yy)`` of one pass (:func:`whitened_moments`).

    ``L`` is the lower factor of :math:`K_{mm} + \\epsilon I` the moments were whitened with;
    ``YtY``: see :func:`amplitude_from_fit` (targets with an intercept's column).
    """
    n_lam = float(n * penalty)
    M = S.copy()
    idx = xp.arange(M.shape[0])
    M[idx, idx] += n_lam
    C = cholesky(M, xp, what="A A^T + n*lam*I")
    a = _check_amplitude(amplitude)
    if a is None:
        a = amplitude_from_fit(yy, AY, C, n_lam, n, xp, YtY)
    return VarianceModel(L, C, n_lam, float(a))


def direct_fit(kernel, X, Z, Y, penalty, amplitude=None, intercept=False):
    """N-KRR coefficients by the direct solver and the :class:`VarianceModel`, from its one pass.

    The coefficients are those of :func:`nyhopt.solvers.direct_solve` (the
    same computation); the variance model costs :math:`O(m^3)` more.  With
    ``intercept`` the last column of ``Y`` is an intercept's constant column
    and the amplitude is that of the other columns with their constants
    profiled (:func:`amplitude_from_fit`).

    Returns
    -------
    alpha : array (m, p), float64
    VarianceModel

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=200)
    >>> alpha, vm = direct_fit(nh.GaussianKernel(1.0), X, X[:20], y, penalty=1e-3)
    >>> alpha.shape, vm.C.shape, round(vm.noise_variance, 2)
    ((20, 1), (20, 20), 0.02)
    """
    fac = direct_factors(kernel, X, Z, Y, penalty)
    xp = get_namespace(fac.Lt)
    C = fac.Ct.T  # lower factors as transposed views of the solver's upper ones: no m x m copies
    a = _check_amplitude(amplitude)
    if a is None:
        YtY = target_gram(Y, xp) if intercept else None
        a = amplitude_from_fit(fac.yy, fac.AY, C, fac.n_lam, X.shape[0], xp, YtY)
    return fac.alpha, VarianceModel(fac.Lt.T, C, fac.n_lam, float(a))


def fit_variance(kernel, X, Z, Y, penalty, amplitude=None, intercept=False):
    """The :class:`VarianceModel` of N-KRR on ``(X, Y)``: one pass over the data, then :math:`O(m^3)`.

    Parameters
    ----------
    kernel : Kernel
    X : array (n, d)
    Z : array (m, d)
    Y : array (n,) or (n, p)
        The targets the model is fitted on.
    penalty : float
    amplitude : float, optional
        Kernel amplitude; default SGPR's profiled amplitude (module notes).
    intercept : bool, default False
        The last column of ``Y`` is an intercept's constant (:func:`direct_fit`).

    Returns
    -------
    VarianceModel
    """
    return direct_fit(kernel, X, Z, Y, penalty, amplitude, intercept)[1]


def block_whitened(block, shared):
    """One Dask row block's partial ``(S, AY, [yy], Y^T Y)`` (float64, on the host); ``shared = (kernel, Z, Lt)``."""
    X, Y = block
    kernel, Z, Lt = shared
    xp = get_namespace(X)
    S, AY, yy = whitened_moments(kernel, X, xp.asarray(Z, dtype=X.dtype), Y, xp.asarray(Lt), xp)
    return (to_numpy(S), to_numpy(AY), np.array([yy]), target_gram(Y, xp))


def _whiten(Kt, vm, xp):
    """``(v = L^{-1}k(Z, X), w = C^{-1}v)`` for a row block, float64, from ``Kt = k(Z, X)``."""
    Kt = Kt.astype(xp.float64, copy=False)
    V = tri_solve(vm.L, Kt, xp, overwrite=True)
    W = tri_solve(vm.C, V, xp)
    return V, W


def latent_variance(kernel, X, Z, vm: VarianceModel):
    """:math:`\\operatorname{var} f(x)` for every row of ``X`` (float64, shape (n,)), see the module notes.

    Row blocks of the memory budget; :math:`2m^2` flops per row in two
    triangular solves, plus one kernel evaluation.  ``X`` and ``Z`` are
    checked once, before the blocks (no host synchronization per block on a GPU).
    """
    xp = get_namespace(X, Z)
    n, m = X.shape[0], Z.shape[0]
    blocks = KernelBlocks(kernel, X, Z.astype(X.dtype, copy=False))
    kxx_all = kernel.diag(blocks.X)
    out = xp.empty(n, dtype=xp.float64)
    b = block_rows(n, m, 8, n_temps=4)
    vm = vm._replace(L=xp.asarray(vm.L), C=xp.asarray(vm.C))  # factors fitted elsewhere move to X's device
    with cpu_threads("blas", xp):
        for lo in range(0, n, b):
            hi = min(n, lo + b)
            V, W = _whiten(blocks.rows_t(lo, hi), vm, xp)
            kxx = kxx_all[lo:hi].astype(xp.float64)
            q = kxx - xp.sum(V * V, axis=0) + vm.n_lam * xp.sum(W * W, axis=0)
            out[lo:hi] = xp.maximum(q, 0.0)
    out *= vm.amplitude
    return out


def latent_covariance(kernel, X, Z, vm: VarianceModel):
    """:math:`\\operatorname{cov}(f(x_i), f(x_j))`, float64 of shape (n, n): ``n x n`` memory."""
    xp = get_namespace(X, Z)
    Z = Z.astype(X.dtype, copy=False)
    vm = vm._replace(L=xp.asarray(vm.L), C=xp.asarray(vm.C))
    with cpu_threads("blas", xp):
        V, W = _whiten(kernel_matrix(kernel, Z, X), vm, xp)
        cov = kernel_matrix(kernel, X, X).astype(xp.float64) - V.T @ V + vm.n_lam * (W.T @ W)
    cov = 0.5 * (cov + cov.T)
    cov *= vm.amplitude
    return cov


def check_variance_model(vm, m, what="the model", reason=None):
    """Raise a clear ``ValueError`` when a fitted :class:`VarianceModel` is missing or does not fit ``m`` centers."""
    if vm is None and reason is not None:
        raise ValueError(f"{what} has no variance model: {reason}")
    if vm is None:
        raise ValueError(
            f"{what} has no variance model: it was fitted with predictive_variance=False (or loaded from a file "
            "saved without one); refit it with predictive_variance=True to get return_std/return_cov")
    if tuple(vm.C.shape) != (m, m):  # pragma: no cover - set together with the centers
        raise ValueError(f"the variance model is for {vm.C.shape[0]} centers, the model has {m}")
    if not (math.isfinite(vm.amplitude) and vm.amplitude >= 0):  # pragma: no cover
        raise ValueError(f"the variance model's amplitude is {vm.amplitude}")

