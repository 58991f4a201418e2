"""Hold-out validation error (``"holdout"``).

Definition (MATH.md, objective 1).  The rows are split once, at
construction and from ``random_state``, into a training part (:math:`n_t`
rows) and a validation part (:math:`n_v = \\mathrm{round}(f\\,n)` rows,
``val_fraction`` :math:`f = 0.6` by default, the paper's setting).  N-KRR is
trained on the training part with its own size in the penalty,

.. math::
    \\alpha = (K_t^TK_t + n_t\\lambda\\tilde K)^{-1}K_t^TY_t,\\qquad
    \\mathcal{L}_{\\rm HO} = \\frac{1}{n_v p}\\|Y_v - K_v\\alpha\\|_F^2,

with :math:`K_t = k(X_t, Z)`, :math:`K_v = k(X_v, Z)`.  Named term:
``validation_error`` (the value).

Gradient.  With :math:`R_v = Y_v - K_v\\alpha`, :math:`c = 1/(n_vp)`,

.. math::
    d\\mathcal{L} = -2c\\langle R_v\\alpha^T, dK_v\\rangle
                  - 2c\\langle K_v^TR_v, d\\alpha\\rangle .

For a fixed :math:`V` (m x p) and :math:`q = B^{-1}V`, from
:math:`B\\,d\\alpha = dK_t^TY_t - dB\\,\\alpha`,

.. math::
    \\langle V, d\\alpha\\rangle = \\langle R_tq^T - K_tq\\alpha^T, dK_t\\rangle
       - n_t\\lambda\\langle q\\alpha^T, d\\tilde K\\rangle
       - n_t\\,\\mathrm{Tr}(q^T\\tilde K\\alpha)\\,d\\lambda ,

with :math:`R_t = Y_t - K_t\\alpha`.  All cotangents on :math:`K_t` and
:math:`K_v` have rank at most :math:`3p`, so the kernel adjoints run in
low-rank form (no ``n x m`` cotangent).

Constant mean (``mean="constant"``, not the default: in the quality table of
``docs/experiments.md``, "A constant mean: with and without", it was 2.2%
worse on svmguide1 and 1.6% on spacega).  The fit on the training part has an
unpenalized constant, :math:`c^* = v_t^TY_t/\\gamma_t` (:math:`v_t = (I -
H_t)1`, :math:`\\gamma_t = 1^Tv_t`), :math:`\\alpha` the fit of
:math:`Y_t - 1c^{*T}`, and :math:`R_v = Y_v - K_v\\alpha - 1c^{*T}`.  Then
:math:`dR_v = -dK_v\\alpha - K_v\\,d\\alpha|_c - v_v\\,dc^{*T}` with
:math:`v_v = 1 - K_v\\alpha_1` (:math:`\\alpha_1` the fit of the ones) and
:math:`dc^* = -1^TdH_t\\,\\tilde Y_t/\\gamma_t`, which adds the quadratic form
:math:`2c\\,\\mathrm{Tr}((1g^T/\\gamma_t)^TdH_t\\,\\tilde Y_t)`,
:math:`g = R_v^Tv_v`, on the training rows (:mod:`nyhopt.objectives._mean`).
"""
from __future__ import annotations

import numbers

import numpy as np

from ..ops import kernel_matrix
from ._base import Evaluation, KernelCotangent, Objective
from ._exact import CotangentBuilder, _sumsq, factorize, fit, kernel_reused, tri_solve
from ._wide import wide_t_times_thin, wide_times_thin
from ._workspace import workspace_of
from ._mean import MeanChain, centered_fit, fit_targets

__all__ = ["Holdout"]


class Holdout(Objective):
    """Hold-out validation error on a fixed random split.

    Parameters
    ----------
    X : array of shape (n, d)
    y : array of shape (n,) or (n, p)
    kernel : str or Kernel, default "gaussian"
    val_fraction : float in (0, 1), default 0.6
        Fraction of the rows used for validation (rounded; both parts must
        keep at least one row).
    noise_variance : float, default 1.0
        Accepted for a uniform interface (hold-out does not use it).
    random_state : int, numpy.random.Generator or None
        Seed of the split, drawn once here.

    Attributes
    ----------
    train_index, val_index : numpy.ndarray of int
        Sorted row indices of the two parts.
    n_train, n_val : int

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 2)); y = np.sin(X[:, 0])
    >>> obj = nh.make_objective("holdout", X, y, val_fraction=0.4, random_state=0)
    >>> obj.n_train, obj.n_val
    (30, 20)
    """

    name = "holdout"

    def __init__(self, X, y, kernel="gaussian", *, val_fraction=0.6, mean=None, noise_variance=1.0,
                 random_state=None):
        super().__init__(X, y, kernel, mean=mean, noise_variance=noise_variance, random_state=random_state)
        if isinstance(val_fraction, bool) or not isinstance(val_fraction, numbers.Real):
            raise TypeError(f"val_fraction must be a number in (0, 1), got {val_fraction!r}")
        val_fraction = float(val_fraction)
        if not 0.0 < val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction!r}")
        n_val = int(round(val_fraction * self.n))
        if n_val < 1 or n_val > self.n - 1:
            raise ValueError(
                f"val_fraction={val_fraction} leaves {n_val} validation and {self.n - n_val} training "
                f"rows out of n={self.n}; both parts need at least one row"
            )
        self.val_fraction = val_fraction
        perm = np.random.default_rng(random_state).permutation(self.n)
        self.val_index = np.sort(perm[:n_val])
        self.train_index = np.sort(perm[n_val:])
        self.n_val, self.n_train = n_val, self.n - n_val
        xp = self.xp
        tr, va = xp.asarray(self.train_index), xp.asarray(self.val_index)
        self._Xt, self._Yt = self.X[tr], self.Y[tr]
        self._Xv, self._Yv = self.X[va], self.Y[va]

    def _evaluate(self, ctx):
        xp = self.xp
        Yfit = fit_targets(self._Yt, self.mean, xp)
        fac = factorize(ctx.kernel, self._Xt, ctx.Z, ctx.penalty, xp, keep_kernel=ctx.need_grad,
                        workspace=workspace_of(self, xp), targets=Yfit)
        p = self.p
        if self.mean == "constant":
            mf = centered_fit(fac, self._Yt, xp, Ya=Yfit)
            f, Yb, alpha = mf.fit, mf.Y, mf.fit.alpha[:, :p]
            self.last_intercept = mf.c
        else:
            mf, f, Yb = None, fit(fac, Yfit, xp), self._Yt
            alpha = f.alpha
        # K_v^T = k(Z, X_v) (m, n_val), in this order for the value too (the products below read
        # it in one layout, so value() and value_and_grad() agree to the last bit); kept for the
        # adjoint when it reads it again
        keep = ctx.need_grad and kernel_reused(ctx.kernel, xp)
        ws, m = workspace_of(self, xp), ctx.Z.shape[0]
        out = None if ws is None else ws.empty("KvT", (m, self.n_val), self._Xv.dtype)
        KvT = kernel_matrix(ctx.kernel, ctx.Z, self._Xv, out=out)
        del out
        # with the constant: the fit of its train split, R_v = Y_v - K_v alpha_c - c*
        Yv = self._Yv if mf is None else self._Yv - xp.asarray(mf.c).astype(self._Yv.dtype)[None, :]
        Rv = wide_t_times_thin(KvT, alpha, xp, Y=Yv, sign=-1.0)
        c = 1.0 / (self.n_val * p)
        terms = {"validation_error": _sumsq(Rv, xp) * c}
        if not ctx.need_grad:
            return Evaluation(terms)
        b = CotangentBuilder(fac, Yb, f, xp)
        KvR = wide_times_thin(KvT, Rv, xp)
        if mf is not None:
            # dR_v = -dK_v alpha_c - K_v dalpha_c|_c - v_v dc*, v_v = 1 - K_v alpha_1, and
            # dc* = -1^T dH_t Ytilde_t / gamma: a quadratic form with P = 1 g^T / gamma, g = R_v^T v_v.
            vv_ = wide_t_times_thin(KvT, f.alpha[:, p:], xp, Y=xp.ones((self.n_val, 1), dtype=KvT.dtype),
                                    sign=-1.0)[:, 0]
            g = (Rv.T @ vv_).astype(xp.float64) / mf.gamma
            chain = MeanChain(mf, fac, xp)
            chain.P[:, :p] += (2.0 * c) * g[None, :]
            chain.AP[:, :p] += (2.0 * c) * (f.AY[:, p:] @ g[None, :])
            chain.flush(b)
            KvR = xp.concatenate([KvR, xp.zeros((KvR.shape[0], 1), dtype=KvR.dtype)], axis=1)
        b.add_alpha_vjp(tri_solve(fac.L, KvR, xp), -2.0 * c)
        val = KernelCotangent(self._Xv, P=Rv, Q=((-2.0 * c) * alpha).astype(Rv.dtype), KT=KvT if keep else None)
        del KvT
        return Evaluation(terms, b.cotangents(self._Xt, extra_nm=(val,)))
