"""Complexity-regularized training error, C-Reg (``"creg"``).

Definition (MATH.md, objective 4), with :math:`R = (I-H)Y`, :math:`D = \\mathrm{Tr}\\,H`:

.. math::
    \\mathcal{L}_{\\rm CReg} = \\frac{1}{np}\\|R\\|_F^2 + \\frac{2s^2}{n}\\,D .

Named terms: ``data_fit`` = :math:`\\|R\\|_F^2/(np)` and
``effective_dimension`` = :math:`2s^2D/n`.

Gradient: :math:`d\\mathcal{L} = \\frac{1}{np}d\\|R\\|_F^2 + \\frac{2s^2}{n}dD`,
with :math:`d\\|R\\|_F^2` as in :mod:`nyhopt.objectives.gcv` and :math:`dD` as
in :mod:`nyhopt.objectives.prop`.

Constant mean (``mean="constant"``, not the default: in the quality table of
``docs/experiments.md``, "A constant mean: with and without", it was 1.7%
worse on svmguide1): :math:`\\frac{1}{np}\\|R_c\\|_F^2 +
\\frac{2s^2}{n}D_c` with :math:`R_c = (I-H_c)Y`, :math:`D_c = \\mathrm{Tr}\\,H_c
= D + \\|v\\|^2/\\gamma`; the differentials as in :mod:`nyhopt.objectives.gcv`.
"""
from __future__ import annotations

from ._base import Evaluation, Objective
from ._exact import CotangentBuilder, trace_hat
from ._mean import MeanChain, factor_and_fit

__all__ = ["CReg"]


class CReg(Objective):
    """Exact C-Reg objective.

    Parameters
    ----------
    X : array of shape (n, d)
    y : array of shape (n,) or (n, p)
    kernel : str or Kernel, default "gaussian"
    noise_variance : float, default 1.0
        :math:`s^2`.
    random_state : None
        Accepted for a uniform interface.

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 2)); y = np.sin(X[:, 0])
    >>> obj = nh.make_objective("creg", X, y, noise_variance=0.5)
    >>> params = nh.Params.from_natural(1e-3, 1.0, X[:10])
    >>> sorted(obj.terms(params))
    ['data_fit', 'effective_dimension']
    """

    name = "creg"

    def _evaluate(self, ctx):
        xp, n, p, s2 = self.xp, self.n, self.p, self.noise_variance
        # the fit beside the m x m matrices of Tr H (and of the gradient), on the two workers
        fac, f, mf = factor_and_fit(self, ctx, ("M2", "MSM") if ctx.need_grad else ("Minv",))
        self.last_intercept = None if mf is None else mf.c
        D = trace_hat(fac, xp) + (0.0 if mf is None else mf.extra_dim)
        terms = {"data_fit": f.rss / (n * p), "effective_dimension": 2.0 * s2 * D / n}
        if not ctx.need_grad:
            return Evaluation(terms)
        b = CotangentBuilder(fac, self.Y if mf is None else mf.Y, f, xp)
        if mf is None:
            b.add_rss(1.0 / (n * p))
        else:
            chain = MeanChain(mf, fac, xp)
            chain.add_residual(mf.R, 2.0 / (n * p), fac.n_lam * f.beta[:, :p])
            chain.add_extra_dim(2.0 * s2 / n)
            chain.flush(b)
        b.add_trace_hat(2.0 * s2 / n)
        return Evaluation(terms, b.cotangents(self.X))
