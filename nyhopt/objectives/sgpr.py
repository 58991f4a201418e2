"""Titsias' sparse GP bound, SGPR (``"sgpr"``), with a kernel amplitude.

Definition (MATH.md, objective 5, with a kernel amplitude).  With the
Nystrom kernel :math:`K_{ny} = K\\tilde K^{-1}K^T = A^TA`,
:math:`S_n = K_{ny} + n\\lambda I` and :math:`T = \\mathrm{Tr}(K_{nn} - K_{ny})`:

.. math::
    \\mathcal{L}_{\\rm SGPR} = \\frac{1}{np}\\Big[p\\,n\\log a + p\\log\\det S_n
        + \\frac1a\\mathrm{Tr}(Y^TS_n^{-1}Y) + \\frac{p\\,T}{n\\lambda}\\Big].

This is Titsias' collapsed bound of the model :math:`f \\sim GP(0, a k)` with
noise variance :math:`\\sigma^2 = a n\\lambda`, negated, times :math:`2/(np)`,
less the constant :math:`\\log 2\\pi`: the bound's covariance is
:math:`aQ_{nn} + \\sigma^2 I = aS_n` and its trace term
:math:`\\mathrm{Tr}(aK_{nn} - aQ_{nn})/\\sigma^2 = T/(n\\lambda)`.  The
penalty keeps its meaning for the predictor (which does not depend on
:math:`a`); at :math:`a = 1` (:math:`\\log a = 0`) the value is bit for bit
the objective without amplitude.

Computed with the m x m factorization: by the determinant lemma
:math:`\\log\\det S_n = \\log\\det M + (n-m)\\log(n\\lambda)` with
:math:`M = AA^T + n\\lambda I`, and by Woodbury
:math:`S_n^{-1} = (I - H)/(n\\lambda)`, so
:math:`\\mathrm{Tr}(Y^TS_n^{-1}Y) = F/(n\\lambda)` with the penalized fit
:math:`F`.

Named terms: ``log_det`` = :math:`\\log\\det(aS_n)/n = \\log\\det S_n/n + \\log a`,
``data_fit`` = :math:`F/(n^2p\\lambda a)`, ``trace`` = :math:`T/(n^2\\lambda)`.

Gradient.  :math:`\\log\\det M = \\log\\det B - \\log\\det\\tilde K` with
:math:`B = LML^T`, hence

.. math::
    d\\log\\det M = 2\\langle KB^{-1}, dK\\rangle
        + \\langle n\\lambda B^{-1} - \\tilde K^{-1}, d\\tilde K\\rangle
        + n\\,\\mathrm{Tr}(B^{-1}\\tilde K)\\,d\\lambda ,

i.e. :math:`G_{nm} = 2A^TM^{-1}L^{-1}`, :math:`G_{mm} =
n\\lambda L^{-T}M^{-1}L^{-1} - L^{-T}L^{-1}`, :math:`g_\\lambda =
n\\,\\mathrm{Tr}\\,M^{-1}`.  Then

.. math::
    d\\mathcal{L} = \\frac1n d\\log\\det M + \\frac{n-m}{n\\lambda}d\\lambda
      + \\frac{dF}{n^2p\\lambda a} - \\frac{F}{n^2p\\lambda^2 a}d\\lambda
      - \\frac{dQ}{n^2\\lambda} - \\frac{T}{n^2\\lambda^2}d\\lambda
      + \\Big(1 - \\frac{F}{n^2p\\lambda a}\\Big)\\,d\\log a ,

with :math:`dF`, :math:`dQ` (:math:`Q = \\mathrm{Tr}\\,K_{ny}`, :math:`dT = -dQ`)
as in :mod:`nyhopt.objectives.prop`.  The amplitude that minimizes the value
at fixed :math:`(\\lambda, \\ell, Z)` is :math:`a^* = F/(n^2p\\lambda) =
\\mathrm{Tr}(Y^TS_n^{-1}Y)/(np)`.

Profiled amplitude (``amplitude="profile"``, the concentrated bound).  The
value is :math:`\\min_a \\mathcal{L}`: every evaluation sets
:math:`a = a^*(\\lambda, \\ell, Z)`, where ``data_fit`` is 1.  By the
envelope theorem the gradient in :math:`(\\log\\lambda, \\log\\ell, Z)` is
the partial gradient above at :math:`a = a^*` and the one in
:math:`\\log a` is 0.  The last :math:`a^*` is kept in
:attr:`SGPR.last_amplitude` (``tune`` records it).

Constant mean (``mean="constant"``, the default here).  The bound of the GP
:math:`y \\sim GP(c, a\\,k)` with one constant per output, profiled with the
amplitude (the joint optimum): the data term
:math:`\\mathrm{Tr}((Y-1c^T)^TS_n^{-1}(Y-1c^T))/a` is minimized by the GLS
constant :math:`c^* = 1^TS_n^{-1}Y/1^TS_n^{-1}1 = v^TY/\\gamma`
(:math:`v = (I-H)1`, :math:`\\gamma = 1^Tv`) for every :math:`a`, so the
profile of the amplitude keeps its form with :math:`F` replaced by
:math:`F_c = \\mathrm{Tr}\\,\\tilde Y^T(I-H)\\tilde Y`, :math:`\\tilde Y = Y -
1c^{*T}`: :math:`a^* = F_c/(n^2p\\lambda)`.  By the envelope theorem the
gradient is the one above at :math:`\\tilde Y` with :math:`c^*` fixed
(:mod:`nyhopt.objectives._mean`).  The last :math:`c^*` is
:attr:`SGPR.last_intercept`.
"""
from __future__ import annotations

import math

from ._base import Evaluation, Objective
from ._exact import CotangentBuilder, logdet_M, trace_knn, trace_nystrom
from ._mean import MeanChain, factor_and_fit

__all__ = ["SGPR"]

_AMPLITUDE_MODES = ("profile", "learn")


class SGPR(Objective):
    """Exact SGPR objective (Titsias' collapsed bound, negated and divided by np).

    Parameters
    ----------
    X : array of shape (n, d)
    y : array of shape (n,) or (n, p)
    kernel : str or Kernel, default "gaussian"
    amplitude : {"profile", "learn"}, default "profile"
        ``"profile"``: the amplitude is set to its closed-form optimum
        :math:`a^*` at every evaluation (``params.amplitude`` is ignored and
        the gradient in ``log_amplitude`` is 0); ``"learn"``: the amplitude is
        ``params.amplitude``, a coordinate for the optimizer.
    noise_variance : float, default 1.0
        Accepted for a uniform interface (the noise variance of SGPR is
        :math:`a n\\lambda`, with the amplitude :math:`a` above).
    random_state : None
        Accepted for a uniform interface.

    Attributes
    ----------
    amplitude : str
        The amplitude mode.
    last_amplitude : float or None
        The amplitude :math:`a` of the most recent evaluation (:math:`a^*`
        when profiled); None before the first.

    Raises
    ------
    TypeError, ValueError
        ``amplitude`` not one of "profile", "learn".

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 2)); y = np.sin(X[:, 0])
    >>> obj = nh.make_objective("sgpr", X, y)
    >>> params = nh.Params.from_natural(1e-3, 1.0, X[:10])
    >>> sorted(obj.terms(params))
    ['data_fit', 'log_det', 'trace']
    """

    name = "sgpr"
    uses_amplitude = True
    default_mean = "constant"

    def __init__(self, X, y, kernel="gaussian", *, amplitude="profile", mean=None, noise_variance=1.0,
                 random_state=None):
        super().__init__(X, y, kernel, mean=mean, noise_variance=noise_variance, random_state=random_state)
        if not isinstance(amplitude, str):
            raise TypeError(f"amplitude must be one of {_AMPLITUDE_MODES}, got {amplitude!r}")
        if amplitude not in _AMPLITUDE_MODES:
            raise ValueError(f"amplitude must be one of {_AMPLITUDE_MODES}, got {amplitude!r}")
        self.amplitude = amplitude
        self.last_amplitude = None

    def _amplitude_message(self, a, constant_mean) -> str:
        """Why the profiled amplitude :math:`a^* = \\mathrm{Tr}(Y^T S_n^{-1} Y) / (np)` is not usable."""
        if constant_mean and self.n == 1:
            return ("sgpr: with one row the residual of y after the constant mean is zero whatever y is, so the "
                    "profiled amplitude is 0 (too few rows for a constant mean and an amplitude); give more rows, "
                    "or use mean='zero' or amplitude='learn'")
        head = f"sgpr: the profiled amplitude is {a}"
        if a == 0.0:
            what = "constant (the constant mean fits them exactly)" if constant_mean else "all zero"
            return f"{head}: the targets y are {what}; use amplitude='learn'"
        top = self._largest_target()
        return (f"{head}: the targets y reach |y| = {top:.3g} and sums of their squares overflow float64; "
                "scale y (for example standardize it)")

    def _evaluate(self, ctx):
        xp, n, p, a = self.xp, self.n, self.p, ctx.amplitude
        # the fit beside the m x m matrices of the gradient, on the two workers
        fac, f, mf = factor_and_fit(self, ctx, ("Minv",) if ctx.need_grad else ())
        m = fac.L.shape[0]
        Yb = self.Y if mf is None else mf.Y
        if mf is not None:
            self.last_intercept = mf.c
        T = trace_knn(ctx.kernel, self.X, xp) - trace_nystrom(fac, xp)
        nl = fac.n_lam
        profile = self.amplitude == "profile"
        if profile:
            a = float(f.fit) / (n * p * nl)  # a* = Tr(Y^T S_n^-1 Y) / (np)
            if not 0.0 < a < math.inf or (mf is not None and n == 1):  # one row: a is rounding noise
                raise ValueError(self._amplitude_message(a, mf is not None))
        self.last_amplitude = a
        terms = {
            "log_det": (logdet_M(fac, xp) + (n - m) * math.log(nl)) / n + math.log(a),
            "data_fit": f.fit / (n * p * nl) / a,
            "trace": T / (n * nl),
        }
        if not ctx.need_grad:
            return Evaluation(terms)
        b = CotangentBuilder(fac, Yb, f, xp)
        b.add_logdet_M(1.0 / n)
        # d/dlog(lam) of the parts (n - m) log(n lam) / n, data_fit and trace (both ~ 1/lam)
        b.add_log_penalty((n - m) / n - terms["data_fit"] - terms["trace"])
        if mf is None:
            b.add_fit(1.0 / (n * p * nl) / a)
        else:  # the same at the profiled constant (envelope theorem)
            chain = MeanChain(mf, fac, xp)
            chain.add_fit(1.0 / (n * p * nl) / a)
            chain.flush(b)
        b.add_trace_nystrom(-1.0 / (n * nl))
        cot = b.cotangents(self.X)._replace(log_amplitude=0.0 if profile else 1.0 - terms["data_fit"])
        return Evaluation(terms, cot)
