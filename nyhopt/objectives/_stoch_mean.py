r"""The constant mean of stochastic L_Prop (``mean="constant"``), from one more right-hand side.

The Falkon solve takes :math:`W = [V \mid Y \mid 1]`.  For two columns the
*bilinear* energy form

.. math::
    \hat B(w, x) = w^TKa_x + x^TKa_w - (Ka_w)^T(Ka_x) - c\,b_w^Tb_x

equals :math:`w^THx` at exact solves and is stationary in the solves (it is
the polarization of the energy form :math:`q`), so
:math:`w^T(I-H)x \approx w^Tx - \hat B(w, x) = r_w^Tr_x + c\,b_w^Tb_x`
(:math:`r = w - Ka`).  With :math:`e_j = w_j^T(I-H)1` so estimated and
:math:`\hat\gamma = e_1` (the ones column):

* :math:`c^* = e_{y}/\hat\gamma` per target column and
  :math:`\hat F_c = \hat F - \sum_c e_{y_c}^2/\hat\gamma`, which is the
  energy-form :math:`\hat F` of the centered targets :math:`Y - 1c^{*T}`
  (their solves :math:`a_y - a_1c^{*T}`), minimized over the constant;
* the probes estimate :math:`\mathrm{Tr}\,H_c = \mathrm{Tr}(H + vv^T/\gamma)`:
  :math:`\hat D_c = \hat D + \hat E`,
  :math:`\hat E = \sum_j \mathrm w_j e_{z_j}^2/\hat\gamma`, since
  :math:`z^Tv = z^T(I-H)1` and :math:`E_z[(z^Tv)^2] = \|v\|^2` (Hutch++
  probes alike).  Exact in expectation over the probes at exact solves.

The gradient: every part of the value is a function of bilinear forms
:math:`\hat B(w_i, w_l)`, so :math:`d\,\mathrm{value} =
\sum_{il}\Gamma_{il}\,d\hat B(w_i, w_l)` with a symmetric :math:`\Gamma`
(:func:`constant_gamma`; :math:`c^*` is held fixed by the envelope
theorem), and at fixed whitened solves

.. math::
    d\hat B(w, x) = \langle (w - u_w)a_x^T + (x - u_x)a_w^T, dK_{nm}\rangle
        - \hat s_w^T dT\,a_x - \hat s_x^T dT\,a_w - dc\,b_w^Tb_x ,

the polarization of the energy form's :math:`dq`.  The cotangents of
:mod:`nyhopt.objectives.stoch_prop` then read :math:`P = 2(W - u)\Gamma`,
:math:`-2\hat S\Gamma a^T` on :math:`T` and
:math:`g_\lambda = -n\sum\Gamma_{il}b_i^Tb_l` (the diagonal
:math:`\Gamma = \mathrm{diag}(\beta)` without the constant).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..backend import to_numpy
from ..errors import IllConditionedError

__all__ = ["ConstantMean", "profile_constant", "constant_gamma"]


class ConstantMean(NamedTuple):
    """The profiled constant of one evaluation.

    Attributes
    ----------
    e : numpy.ndarray (K,)
        :math:`w_j^T(I-H)1` for every column of :math:`W`, :math:`\\hat\\gamma` last.
    gamma : float
    c : numpy.ndarray (p,)
        :math:`c^*`.
    fit_drop : float
        :math:`\\hat F - \\hat F_c = \\sum_c e_{y_c}^2/\\hat\\gamma`.
    extra_dim : float
        :math:`\\hat E`.
    """

    e: object
    gamma: float
    c: object
    fit_drop: float
    extra_dim: float


def profile_constant(cross, b, c, weights, k, p, xp) -> ConstantMean:
    """The constant from the fit pass of ``W = [V | Y | 1]`` (n, k + p + 1).

    ``cross`` is :math:`R^TR_{:,-1}` with :math:`R = W - Ka` (the ``cross``
    sums of :meth:`nyhopt.ops.operator.KernelOperator.fit_pass`, from any
    placement of the data), ``b`` the whitened coefficients, ``c = n lam``.
    """
    o = k + p
    e = to_numpy(cross, dtype=np.float64) + to_numpy(c * (b.T @ b[:, o]), dtype=np.float64)
    gamma = float(e[o])
    if not (gamma > 0.0 and math.isfinite(gamma)):
        raise IllConditionedError(f"stoch-prop: the constant mean is not determined (1^T (I - H) 1 ~ {gamma}); "
                                  "use mean='zero' or a larger penalty")
    ct = e[k:o] / gamma
    extra = float(np.sum(to_numpy(weights, dtype=np.float64) * e[:k] ** 2)) / gamma
    return ConstantMean(e, gamma, ct, float(np.sum(e[k:o] ** 2)) / gamma, extra)


def constant_gamma(cm: ConstantMean, beta, sg, sd, weights, k, p, xp):
    r"""The symmetric :math:`\Gamma` (K, K) of :math:`d\,\mathrm{value} = \sum\Gamma_{il}\,d\hat B(w_i, w_l)`.

    :math:`\Gamma_{jj}` = ``beta`` (probes :math:`s_d\mathrm w_j`, targets
    :math:`-s_g`), :math:`\Gamma_{y_c,1} = s_gc^*_c`,
    :math:`\Gamma_{z_j,1} = -s_d\mathrm w_je_{z_j}/\hat\gamma`,
    :math:`\Gamma_{1,1} = -s_g\|c^*\|^2 + s_d\hat E/\hat\gamma`, with
    :math:`s_g = 2g/(np)` and :math:`s_d = 2s^2/n` (from
    :math:`\hat F_c = \hat F(\tilde Y)`, :math:`\hat q(\tilde y) = \hat q(y) -
    2c\hat B(y, 1) + c^2\hat q(1)`, and :math:`d\hat E = \sum_j
    (-2\mathrm w_je_{z_j}/\hat\gamma)\,d\hat B(z_j, 1) + (\hat E/\hat\gamma)\,d\hat B(1, 1)`).
    """
    o = k + p
    G = np.zeros((o + 1, o + 1))
    G[np.arange(o), np.arange(o)] = to_numpy(beta, dtype=np.float64)
    G[k:o, o] = G[o, k:o] = sg * cm.c
    G[:k, o] = G[o, :k] = -sd * to_numpy(weights, dtype=np.float64) * cm.e[:k] / cm.gamma
    G[o, o] = -sg * float(np.sum(cm.c**2)) + sd * cm.extra_dim / cm.gamma
    return xp.asarray(G)
