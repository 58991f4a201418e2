"""L_Prop, the objective proposed by the paper (``"prop"``).

Definition (MATH.md, objective 6).  With :math:`D = \\mathrm{Tr}\\,H` (the
effective dimension), :math:`F = \\mathrm{Tr}\\,Y^T(I-H)Y = \\|R\\|_F^2 +
n\\lambda\\,\\mathrm{Tr}(\\alpha^T\\tilde K\\alpha)` (the penalized data fit,
summed over the p outputs) and :math:`T = \\mathrm{Tr}(K_{nn} - K_{nm}\\tilde
K^{-1}K_{mn})` (the Nystrom trace gap),

.. math::
    \\mathcal{L}_{\\rm Prop} = \\frac{2}{np}\\Big[p\\,s^2 D
        + F\\Big(1 + \\frac{T}{c\\,\\lambda}\\Big)\\Big],
    \\qquad c = n^2\\ (\\text{``released''}),\\quad c = n\\ (\\text{``paper''}).

The default ``normalization="released"`` is the normalization of the
authors' released implementation; ``"paper"`` is the literal displayed
equation of the paper, which MATH.md found to pick far worse hyperparameters
(offered only as an explicit option).

Named terms (they add up to the value): ``effective_dimension`` =
:math:`2 s^2 D/n`, ``data_fit`` = :math:`2F/(np)`, ``trace`` =
:math:`2FT/(np\\,c\\lambda)`.

Gradient.  With :math:`Q = \\mathrm{Tr}(K\\tilde K^{-1}K^T)`, :math:`dT = -dQ`
(the diagonal of :math:`K_{nn}` is constant for stationary kernels) and

.. math::
    d\\mathcal{L} = \\frac{2s^2}{n}\\,dD
        + \\frac{2}{np}\\Big(1 + \\frac{T}{c\\lambda}\\Big) dF
        - \\frac{2F}{np\\,c\\lambda}\\,dQ
        - \\frac{2FT}{np\\,c\\lambda^2}\\,d\\lambda .

The differentials of :math:`D`, :math:`F` and :math:`Q` as cotangents on
:math:`(K_{nm}, K_{mm}, \\lambda)`, with :math:`A = L^{-1}K^T`,
:math:`M = AA^T + n\\lambda I`, :math:`\\beta = M^{-1}AY`, :math:`\\alpha =
L^{-T}\\beta`, :math:`S = AA^T`:

* :math:`dF`: :math:`G_{nm} = -2R\\alpha^T`, :math:`G_{mm} = n\\lambda\\,\\alpha\\alpha^T`,
  :math:`g_\\lambda = n\\|\\beta\\|_F^2`;
* :math:`dD`: :math:`G_{nm} = 2n\\lambda\\,A^T M^{-2}L^{-1}`,
  :math:`G_{mm} = -n\\lambda\\,L^{-T}M^{-1}SM^{-1}L^{-1}`,
  :math:`g_\\lambda = -n\\,\\mathrm{Tr}(M^{-2}S)`;
* :math:`dQ`: :math:`G_{nm} = 2A^T L^{-1}`, :math:`G_{mm} = -L^{-T}SL^{-1}`.

All :math:`G_{nm}` parts are summed into one :math:`A^T W + Y Q_1^T`, formed
with a single ``n x m x m`` product, and contracted once with the kernel
adjoint (see :mod:`nyhopt.objectives._exact`).  Cost
:math:`O(nm^2 + m^3)`, memory two ``n x m`` arrays.

Constant mean (``mean="constant"``, not the default: in the quality table of
``docs/experiments.md``, "A constant mean: with and without", it was 1.3%
worse on higgs_small).  With the smoother of ridge regression
with intercept, :math:`H_c = H + vv^T/\\gamma` (:math:`v = (I-H)1`,
:math:`\\gamma = 1^Tv`), :math:`D` becomes :math:`D_c = D + \\|v\\|^2/\\gamma`
and :math:`F` becomes :math:`F_c = \\mathrm{Tr}\\,\\tilde Y^T(I-H)\\tilde Y`,
:math:`\\tilde Y = Y - 1c^{*T}`, :math:`c^* = v^TY/\\gamma`.  Gradient:
:math:`dF_c = -\\mathrm{Tr}(\\tilde Y^TdH\\,\\tilde Y)` (envelope theorem) and
:math:`d(\\|v\\|^2/\\gamma) = \\mathrm{Tr}(P_1^TdH\\,1)`,
:math:`P_1 = -2v/\\gamma + (\\|v\\|^2/\\gamma^2)1`, both quadratic forms of
:math:`dH` (:mod:`nyhopt.objectives._mean`).
"""
from __future__ import annotations

from ._base import Evaluation, Objective
from ._exact import CotangentBuilder, trace_hat, trace_knn, trace_nystrom
from ._mean import MeanChain, factor_and_fit

__all__ = ["Prop"]

_NORMALIZATIONS = ("released", "paper")


class Prop(Objective):
    """Exact L_Prop objective.

    Parameters
    ----------
    X : array of shape (n, d)
    y : array of shape (n,) or (n, p)
    kernel : str or Kernel, default "gaussian"
    normalization : {"released", "paper"}, default "released"
        ``"released"`` divides the trace gap by :math:`n^2\\lambda` (the
        authors' implementation); ``"paper"`` by :math:`n\\lambda` (the
        literal equation of the paper).
    noise_variance : float, default 1.0
        :math:`s^2`.
    random_state : None
        Accepted for a uniform interface; nothing is random.

    Notes
    -----
    See the module docstring for the value and its gradient.

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 2)); y = np.sin(X[:, 0])
    >>> obj = nh.make_objective("prop", X, y)
    >>> params = nh.Params.from_natural(1e-3, [1.0, 1.0], X[:10])
    >>> value, grad = obj.value_and_grad(params)
    >>> t = obj.terms(params)
    >>> sorted(t)
    ['data_fit', 'effective_dimension', 'trace']
    >>> bool(np.isclose(sum(t.values()), value))
    True
    """

    name = "prop"

    def __init__(self, X, y, kernel="gaussian", *, normalization="released", mean=None, noise_variance=1.0,
                 random_state=None):
        super().__init__(X, y, kernel, mean=mean, noise_variance=noise_variance, random_state=random_state)
        if normalization not in _NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {_NORMALIZATIONS}, got {normalization!r}")
        self.normalization = normalization

    def _evaluate(self, ctx):
        xp, n, p, s2, lam = self.xp, self.n, self.p, self.noise_variance, ctx.penalty
        c = float(n) ** 2 if self.normalization == "released" else float(n)
        # the fit beside the m x m matrices of Tr H (and of the gradient), on the two workers
        fac, f, mf = factor_and_fit(self, ctx, ("M2", "MSM") if ctx.need_grad else ("Minv",))
        self.last_intercept = None if mf is None else mf.c
        D = trace_hat(fac, xp) + (0.0 if mf is None else mf.extra_dim)
        T = trace_knn(ctx.kernel, self.X, xp) - trace_nystrom(fac, xp)
        terms = {
            "effective_dimension": 2.0 * s2 * D / n,
            "data_fit": 2.0 * f.fit / (n * p),
            "trace": 2.0 * f.fit * T / (n * p * c * lam),
        }
        if not ctx.need_grad:
            return Evaluation(terms)
        b = CotangentBuilder(fac, self.Y if mf is None else mf.Y, f, xp)
        b.add_trace_hat(2.0 * s2 / n)
        if mf is None:
            b.add_fit(2.0 / (n * p) * (1.0 + T / (c * lam)))
        else:
            chain = MeanChain(mf, fac, xp)
            chain.add_extra_dim(2.0 * s2 / n)
            chain.add_fit(2.0 / (n * p) * (1.0 + T / (c * lam)))
            chain.flush(b)
        b.add_trace_nystrom(-2.0 * f.fit / (n * p * c * lam))
        b.add_log_penalty(-terms["trace"])  # trace is proportional to 1/lam
        return Evaluation(terms, b.cotangents(self.X))
