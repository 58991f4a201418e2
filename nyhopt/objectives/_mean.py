r"""A constant mean (an unpenalized intercept), profiled in closed form, for the exact objectives.

With ``mean="constant"`` the model is :math:`y = c + k(x, Z)\alpha` with one
constant :math:`c` per output, not penalized.  For the rows of one
factorization (:mod:`nyhopt.objectives._exact`, :math:`H = A^TM^{-1}A`
symmetric) let

.. math::
    v = (I - H)\,1, \qquad \gamma = 1^Tv = 1^T(I-H)1 > 0 .

Minimizing the penalized loss over :math:`(\alpha, c)` gives, for every
output column,

.. math::
    c^* = \frac{v^TY}{\gamma}
        = \frac{1^TS_n^{-1}Y}{1^TS_n^{-1}1}\ \ (S_n = K_{ny} + n\lambda I,\ \text{the GLS constant}),
    \qquad \tilde Y = Y - 1c^{*T},

and :math:`\alpha` is the N-KRR fit of :math:`\tilde Y`.  The smoother of
the model with intercept is

.. math::
    H_c = H + \frac{vv^T}{\gamma},\qquad
    (I - H_c)Y = (I - H)\tilde Y,\qquad
    \mathrm{diag}(H_c) = \mathrm{diag}(H) + \frac{v\odot v}{\gamma},\qquad
    \mathrm{Tr}\,H_c = \mathrm{Tr}\,H + \frac{\|v\|^2}{\gamma},

and the penalized fit is :math:`F_c = \mathrm{Tr}\,\tilde Y^T(I-H)\tilde Y =
F - \|v^TY\|^2/\gamma`.  (:math:`0 < \|v\|^2/\gamma \le 1` since
:math:`0 \preceq I - H \preceq I`.)  Everything comes from one N-KRR fit of
:math:`[Y \mid 1]` (one more right-hand side): :math:`v` is the residual of
the ones column and :math:`\gamma = \|v\|^2 + n\lambda\|\beta_1\|^2` its
penalized fit (a sum of non-negative terms); the fit of :math:`\tilde Y`
follows by linearity.

Differentials.  All that depends on the constant reduces to quadratic forms
of :math:`dH` against the columns of :math:`[\tilde Y \mid 1]`, which
:meth:`~nyhopt.objectives._exact.CotangentBuilder.add_hat_quadratic`
turns into cotangents (one call for all of them, :meth:`MeanChain.flush`):

* :math:`dF_c = -\mathrm{Tr}(\tilde Y^T dH\,\tilde Y)` (envelope theorem:
  :math:`c^*` minimizes :math:`F`);
* :math:`dc^* = -1^TdH\,\tilde Y/\gamma` (differentiate :math:`1^T(I-H)\tilde Y = 0`),
  so for a fixed :math:`G` (n x p), with :math:`R_c = (I-H)\tilde Y`,
  :math:`dR_c = -dH\,\tilde Y - v\,dc^*` and
  :math:`\mathrm{Tr}(G^TdR_c) = -\mathrm{Tr}\big((G - 1g^T/\gamma)^TdH\,\tilde Y\big)`,
  :math:`g = G^Tv`;
* :math:`dv = -dH\,1` and :math:`d\gamma = -1^TdH\,1`, so
  :math:`d(\|v\|^2/\gamma) = \mathrm{Tr}(P_1^TdH\,1)` with
  :math:`P_1 = -2v/\gamma + (\|v\|^2/\gamma^2)1`, and for weights :math:`u`,
  :math:`\sum_iu_i\,d(v_i^2/\gamma) = \mathrm{Tr}(P_1^TdH\,1)` with
  :math:`P_1 = -2(u\odot v)/\gamma + (u^T(v\odot v)/\gamma^2)1`.

The products :math:`AP` that the quadratic form needs are known without a
pass over :math:`A` for every term but the last: :math:`A\tilde Y` and
:math:`A1` from the fit, :math:`AR_c = n\lambda\tilde\beta` and
:math:`Av = n\lambda\beta_1`.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..backend import to_numpy
from ..errors import IllConditionedError
from ._base import MEANS, check_mean
from ._exact import Fit, _sumsq, factorize, fit
from ._last_fit import keep_last_fit
from ._workspace import workspace_of

__all__ = ["MEANS", "check_mean", "MeanFit", "centered_fit", "MeanChain", "fit_targets", "factor_and_fit"]


class MeanFit(NamedTuple):
    """N-KRR with a profiled constant on one factorization.

    Attributes
    ----------
    Y : array (n, p + 1), data dtype
        :math:`[\\tilde Y \\mid 1]`.
    fit : Fit
        The fit of ``Y`` (``AY``, ``beta``, ``alpha``, ``R`` with p + 1
        columns); its ``rss`` and ``fit`` are those of the :math:`\\tilde Y`
        columns alone (:math:`\\|R_c\\|_F^2`, :math:`F_c`).
    c : numpy.ndarray (p,), float64
        :math:`c^*`.
    gamma : float
        :math:`\\gamma = 1^T(I-H)1`.
    vv : float
        :math:`\\|v\\|^2`.
    p : int
    """

    Y: object
    fit: Fit
    c: object
    gamma: float
    vv: float
    p: int

    @property
    def R(self):
        """:math:`R_c = (I - H_c)Y` (n, p)."""
        return self.fit.R[:, : self.p]

    @property
    def v(self):
        """:math:`v = (I - H)1` (n,)."""
        return self.fit.R[:, self.p]

    @property
    def extra_dim(self) -> float:
        """:math:`\\|v\\|^2/\\gamma`, what the constant adds to :math:`\\mathrm{Tr}\\,H`."""
        return self.vv / self.gamma


def fit_targets(Y, mean, xp):
    """The targets that :func:`~nyhopt.objectives._exact.fit` is given: ``Y``, or :math:`[Y \\mid 1]` for a constant mean.

    Pass them to ``factorize(..., targets=)`` and (with ``mean="constant"``)
    to :func:`centered_fit` as ``Ya``: the Gram product then also gives their
    product with :math:`A`.
    """
    if mean != "constant":
        return Y
    return xp.concatenate([Y, xp.ones((Y.shape[0], 1), dtype=Y.dtype)], axis=1)


def factor_and_fit(obj, ctx, keys=()):
    """``(fac, f, mf)``: the factors of an exact objective, and its fit beside the m x m matrices ``keys``.

    Factorizes ``k(obj.X, ctx.Z)`` at ``ctx.penalty`` (keeping the kernel for a
    gradient, in the objective's workspace, with the targets of
    :func:`fit_targets`), then computes the ``m x m`` matrices ``keys`` of
    ``fac.mm`` on the two workers beside the fit of the targets: ``f`` is
    :func:`~nyhopt.objectives._exact.fit` of ``obj.Y`` and ``mf`` None, or,
    with ``obj.mean == "constant"``, ``mf`` the :class:`MeanFit` of
    :func:`centered_fit` and ``f`` its ``fit``.  With ``obj.keep_fit`` the
    fit is also kept in ``obj.last_fit`` (:mod:`nyhopt.objectives._last_fit`).
    """
    xp = obj.xp
    Yfit = fit_targets(obj.Y, obj.mean, xp)
    fac = factorize(ctx.kernel, obj.X, ctx.Z, ctx.penalty, xp, keep_kernel=ctx.need_grad,
                    workspace=workspace_of(obj, xp), targets=Yfit)
    if obj.mean == "constant":
        mf = fac.mm.prefetch(*keys, alongside=lambda: centered_fit(fac, obj.Y, xp, Ya=Yfit))
        keep_last_fit(obj, ctx, fac, mf.fit, mf.c)
        return fac, mf.fit, mf
    f = fac.mm.prefetch(*keys, alongside=lambda: fit(fac, Yfit, xp))
    keep_last_fit(obj, ctx, fac, f)
    return fac, f, None


def centered_fit(fac, Y, xp, Ya=None) -> MeanFit:
    """Fit :math:`[Y \\mid 1]` once and profile the constant (see the module notes).

    ``Ya`` is :math:`[Y \\mid 1]` when already formed (:func:`fit_targets`).
    """
    n, p = Y.shape
    if Ya is None:
        Ya = fit_targets(Y, "constant", xp)
    fa = fit(fac, Ya, xp)
    f64 = xp.float64
    R64, b64 = fa.R.astype(f64, copy=False), fa.beta
    v, b1 = R64[:, p], b64[:, p]
    vv = float(xp.dot(v, v))
    gamma = vv + fac.n_lam * float(xp.dot(b1, b1))  # 1^T (I - H) 1, a sum of non-negative terms
    if not (gamma > 0.0 and np.isfinite(gamma)):
        raise IllConditionedError(f"the constant mean is not determined (1^T (I - H) 1 = {gamma}); "
                                  "use mean='zero' or a larger penalty")
    # v^T Y = 1^T (I - H) Y = R_1^T R_Y + n lam beta_1^T beta_Y
    c = (to_numpy(R64[:, :p].T @ v, dtype=np.float64)
         + fac.n_lam * to_numpy(b64[:, :p].T @ b1, dtype=np.float64)) / gamma
    cd = xp.asarray(c)
    Yt = Y - cd.astype(Y.dtype)[None, :]
    cols = lambda a: a[:, :p] - a[:, p:] @ cd[None, :].astype(a.dtype)  # noqa: E731 - (.)_Y - (.)_1 c^T
    AY = xp.concatenate([cols(fa.AY), fa.AY[:, p:]], axis=1)
    beta = xp.concatenate([cols(fa.beta), fa.beta[:, p:]], axis=1)
    alpha = xp.concatenate([cols(fa.alpha), fa.alpha[:, p:]], axis=1)
    R = xp.concatenate([cols(fa.R), fa.R[:, p:]], axis=1)
    rss = _sumsq(R[:, :p], xp)
    F = rss + fac.n_lam * _sumsq(beta[:, :p], xp)
    Yc = xp.concatenate([Yt, Ya[:, p:]], axis=1)
    return MeanFit(Yc, Fit(AY, beta, alpha, R, rss, F), c, float(gamma), vv, p)


class MeanChain:
    """Accumulates :math:`\\mathrm{Tr}(P^TdH\\,[\\tilde Y \\mid 1])` for the terms that involve the constant.

    Parameters
    ----------
    mf : MeanFit
    fac : Factors
    xp : module

    Notes
    -----
    Each ``add_*`` adds ``coef`` times the differential named in the module
    notes; :meth:`flush` hands the sum to a
    :class:`~nyhopt.objectives._exact.CotangentBuilder` built on ``mf.Y``
    and ``mf.fit`` as one quadratic form.
    """

    def __init__(self, mf: MeanFit, fac, xp):
        self.mf, self.fac, self.xp = mf, fac, xp
        n, p1 = mf.Y.shape
        m = fac.L.shape[0]
        self.P = xp.zeros((n, p1), dtype=xp.float64)
        self.AP = xp.zeros((m, p1), dtype=xp.float64)

    def add_fit(self, coef):
        """``coef * dF_c``."""
        mf, p = self.mf, self.mf.p
        self.P[:, :p] -= coef * mf.Y[:, :p].astype(self.xp.float64)
        self.AP[:, :p] -= coef * mf.fit.AY[:, :p]

    def add_residual(self, G, coef, AG):
        """``coef * Tr(G^T dR_c)`` for a fixed ``G`` (n, p) with ``AG`` = :math:`AG` (m, p)."""
        xp, mf, p = self.xp, self.mf, self.mf.p
        G64 = G.astype(xp.float64, copy=False)
        g = (G64.T @ mf.v.astype(xp.float64)) / mf.gamma  # (p,)
        self.P[:, :p] -= coef * (G64 - g[None, :])
        self.AP[:, :p] -= coef * (AG - mf.fit.AY[:, p:] @ g[None, :])

    def add_extra_dim(self, coef):
        """``coef * d(||v||^2 / gamma)``."""
        mf, fac, p = self.mf, self.fac, self.mf.p
        a, b = -2.0 / mf.gamma, mf.vv / mf.gamma**2
        self.P[:, p] += coef * (a * mf.v.astype(self.xp.float64) + b)
        self.AP[:, p] += coef * (a * fac.n_lam * mf.fit.beta[:, p] + b * mf.fit.AY[:, p])

    def add_leverage(self, u, coef, Auv):
        """``coef * sum_i u_i d(v_i^2 / gamma)`` for fixed weights ``u`` (n,), ``Auv`` = :math:`A(u\\odot v)` (m,)."""
        xp, mf, p = self.xp, self.mf, self.mf.p
        v = mf.v.astype(xp.float64)
        a, b = -2.0 / mf.gamma, float(xp.dot(u, v * v)) / mf.gamma**2
        self.P[:, p] += coef * (a * (u * v) + b)
        self.AP[:, p] += coef * (a * Auv + b * mf.fit.AY[:, p])

    def flush(self, builder):
        """Add the accumulated quadratic form to ``builder`` (a CotangentBuilder on ``mf.Y``, ``mf.fit``)."""
        builder.add_hat_quadratic(self.P.astype(self.mf.Y.dtype, copy=False), 1.0, APl=self.AP)
