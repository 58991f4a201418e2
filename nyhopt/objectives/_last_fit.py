r"""The N-KRR fit that an exact objective computed anyway, kept for a caller that asks (error tracking).

Every exact objective that factorizes all its rows (``prop``, ``gcv``,
``loocv``, ``creg``, ``sgpr``; :func:`nyhopt.objectives._mean.factor_and_fit`)
solves the N-KRR system of its hyperparameters on the way to its value: the
coefficients :math:`\alpha = L^{-T}\beta`, the residuals :math:`R = Y - HY`,
the factors :math:`L` of :math:`\tilde K` and :math:`C` of :math:`M`, and the
penalized fit :math:`F = \mathrm{Tr}\,Y^T(I-H)Y` (notation of
:mod:`nyhopt.objectives._exact`).  That is all the tuning loop's error
tracking needs: the fitted values on the training rows are :math:`Y - R`,
predictions elsewhere are :math:`k(x, Z)^T\alpha` and the predictive variance
of :mod:`nyhopt.posterior` needs :math:`(L, C, n\lambda)` and the profiled
amplitude :math:`a^* = F / (np\,n\lambda)`.

An objective keeps them only when its attribute ``keep_fit`` is True (off by
default: nothing changes, and no ``n``-sized array is held, for the others).
The arrays are the objective's own: the m x m factors as computed, the
fitted values a new ``n x p`` array; the next evaluation replaces them.
"""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["LastFit", "keep_last_fit"]


class LastFit(NamedTuple):
    r"""The fit of the most recent evaluation of an exact objective.

    Attributes
    ----------
    params : Params
        The hyperparameters it was computed at.
    alpha : array (m, p), float64
        N-KRR coefficients of the ``p`` outputs (with a constant mean: of
        :math:`Y - 1c^{*T}`).
    intercept : numpy.ndarray (p,) or None
        The profiled constant :math:`c^*` (``mean="constant"``), else None.
    fitted : array (n, p), data dtype
        Fitted values on the objective's rows, :math:`Y - R` (constant included).
    L, C : arrays (m, m), float64
        Lower Cholesky factors of :math:`K_{mm} + \epsilon I` and of :math:`M`.
    n_lam : float
        :math:`n\lambda`.
    fit : float
        Penalized fit :math:`F` summed over the outputs (with a constant mean, :math:`F_c`).
    """

    params: object
    alpha: object
    intercept: object
    fitted: object
    L: object
    C: object
    n_lam: float
    fit: float


def keep_last_fit(obj, ctx, fac, f, intercept=None) -> None:
    """Set ``obj.last_fit`` from one evaluation's factors ``fac`` and fit ``f`` when ``obj.keep_fit``.

    ``f`` may hold more columns than the ``p`` outputs (the ones column of a
    constant mean); only the first ``p`` are kept.
    """
    if not getattr(obj, "keep_fit", False):
        return
    p = obj.p
    obj.last_fit = LastFit(ctx.params, f.alpha[:, :p], intercept, obj.Y - f.R[:, :p], fac.L, fac.C,
                           float(fac.n_lam), float(f.fit))
