"""Generalized cross-validation (``"gcv"``).

Definition (MATH.md, objective 3), with :math:`R = (I-H)Y` and
:math:`D = \\mathrm{Tr}\\,H`:

.. math::
    \\mathcal{L}_{\\rm GCV} = \\frac{1}{np}\\,
        \\frac{\\|(I-H)Y\\|_F^2}{\\big(\\tfrac1n\\mathrm{Tr}(I-H)\\big)^2}
      = \\frac{n\\,\\|R\\|_F^2}{p\\,(n-D)^2}.

Named terms (they add up to the value): ``data_fit`` = :math:`\\|R\\|_F^2/(np)`
(the training error) and ``complexity`` =
:math:`\\|R\\|_F^2/(np)\\,\\big((n/(n-D))^2 - 1\\big)`, the inflation due to
the effective dimension.

Gradient.

.. math::
    d\\mathcal{L} = \\frac{n}{p(n-D)^2}\\,d\\|R\\|_F^2
                 + \\frac{2n\\|R\\|_F^2}{p(n-D)^3}\\,dD .

:math:`dD` is as in :mod:`nyhopt.objectives.prop`.  For the residual norm,
:math:`d\\|R\\|^2 = -2\\,\\mathrm{Tr}(R^T dH\\,Y)`, and for any fixed
:math:`P` (n x p), with :math:`g = B^{-1}K^T P`,

.. math::
    \\mathrm{Tr}(P^T dH\\,Y) = \\langle (P - Kg)\\alpha^T + R g^T, dK\\rangle
        - n\\lambda\\,\\langle g\\alpha^T, d\\tilde K\\rangle
        - n\\,\\mathrm{Tr}(g^T\\tilde K\\alpha)\\,d\\lambda ,

(from :math:`dH = dK\\,B^{-1}K^T + KB^{-1}dK^T - KB^{-1}dB\\,B^{-1}K^T` and
:math:`dB = dK^TK + K^TdK + n\\,d\\lambda\\,\\tilde K + n\\lambda\\,d\\tilde K`).
For :math:`P = R`, :math:`AR = n\\lambda\\beta`, so
:math:`g = n\\lambda L^{-T}M^{-1}\\beta` costs only :math:`O(m^2p)`.

Constant mean (``mean="constant"``, not the default: in the quality table of
``docs/experiments.md``, "A constant mean: with and without", it was 3.1%
worse on abalone).  :math:`R_c = (I-H_c)Y = (I-H)\\tilde Y`
and :math:`D_c = D + \\|v\\|^2/\\gamma` replace :math:`R` and :math:`D`
(:math:`H_c = H + vv^T/\\gamma`, :math:`v = (I-H)1`, :math:`\\gamma = 1^Tv`,
:math:`\\tilde Y = Y - 1c^{*T}`, :math:`c^* = v^TY/\\gamma`).  With
:math:`dc^* = -1^TdH\\,\\tilde Y/\\gamma`,
:math:`d\\|R_c\\|^2 = -2\\,\\mathrm{Tr}\\big((R_c - 1g^T/\\gamma)^TdH\\,\\tilde Y\\big)`,
:math:`g = R_c^Tv`, and :math:`d(\\|v\\|^2/\\gamma) = \\mathrm{Tr}(P_1^TdH\\,1)`,
:math:`P_1 = -2v/\\gamma + (\\|v\\|^2/\\gamma^2)1` (:mod:`nyhopt.objectives._mean`).
"""
from __future__ import annotations

from ._base import Evaluation, Objective
from ._exact import CotangentBuilder, trace_hat
from ._mean import MeanChain, factor_and_fit

__all__ = ["GCV"]


class GCV(Objective):
    """Exact generalized cross-validation.

    Parameters
    ----------
    X : array of shape (n, d)
    y : array of shape (n,) or (n, p)
    kernel : str or Kernel, default "gaussian"
    noise_variance : float, default 1.0
        Accepted for a uniform interface (GCV does not use it).
    random_state : None
        Accepted for a uniform interface.

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 2)); y = np.sin(X[:, 0])
    >>> obj = nh.make_objective("gcv", X, y)
    >>> params = nh.Params.from_natural(1e-3, 1.0, X[:10])
    >>> sorted(obj.terms(params))
    ['complexity', 'data_fit']
    """

    name = "gcv"

    def _evaluate(self, ctx):
        xp, n, p = self.xp, self.n, self.p
        # the fit beside the m x m matrices of Tr H (and of the gradient), on the two workers
        fac, f, mf = factor_and_fit(self, ctx, ("M2", "MSM") if ctx.need_grad else ("Minv",))
        self.last_intercept = None if mf is None else mf.c
        D = trace_hat(fac, xp) + (0.0 if mf is None else mf.extra_dim)
        ratio = n / (n - D)
        data_fit = f.rss / (n * p)
        terms = {"data_fit": data_fit, "complexity": data_fit * (ratio * ratio - 1.0)}
        if not ctx.need_grad:
            return Evaluation(terms)
        c_rss, c_dim = n / (p * (n - D) ** 2), 2.0 * n * f.rss / (p * (n - D) ** 3)
        b = CotangentBuilder(fac, self.Y if mf is None else mf.Y, f, xp)
        if mf is None:
            b.add_rss(c_rss)
        else:  # d||R_c||^2 = 2 Tr(R_c^T dR_c), with A R_c = n lam beta_c
            chain = MeanChain(mf, fac, xp)
            chain.add_residual(mf.R, 2.0 * c_rss, fac.n_lam * f.beta[:, :p])
            chain.add_extra_dim(c_dim)
            chain.flush(b)
        b.add_trace_hat(c_dim)
        return Evaluation(terms, b.cotangents(self.X))
