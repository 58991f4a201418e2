r"""The unpenalized constant of N-KRR from a solve with one more right-hand side.

For coefficients :math:`[\alpha_Y \mid \alpha_1]` of the targets :math:`[Y \mid 1]`
(any solver), the ridge fit with intercept has

.. math::
    c^* = \frac{1^T(I-H)Y}{1^T(I-H)1},\qquad \alpha = \alpha_Y - \alpha_1c^{*T},

with both quadratic forms in their penalized form
:math:`1^T(I-H)Y = r_1^Tr_Y + n\lambda\,\alpha_1^T\tilde K\alpha_Y`
(:math:`r = [Y \mid 1] - K_{nm}[\alpha_Y \mid \alpha_1]`,
:math:`\tilde K = K_{mm} + \epsilon I`), a sum of non-negative terms for the
denominator.  ``docs/objectives.md`` ("A constant mean") has the derivation.
"""
from __future__ import annotations

import numpy as np

from ..backend import get_namespace, to_numpy
from ..ops import kernel_matrix, kmv
from ..solvers import jitter

__all__ = ["with_ones", "profile_intercept"]


def with_ones(Y, xp):
    """:math:`[Y \\mid 1]` (n, p + 1) in the dtype of ``Y``."""
    return xp.concatenate([Y, xp.ones((Y.shape[0], 1), dtype=Y.dtype)], axis=1)


def profile_intercept(kernel, X, Z, Y, alpha, penalty):
    """``(alpha_c (m, p) float64, c (p,) float64 NumPy)`` from ``alpha`` (m, p + 1) of :math:`[Y \\mid 1]`.

    Raises
    ------
    ValueError
        When :math:`1^T(I-H)1` is not positive (the constant is not determined).
    """
    xp = get_namespace(X, alpha)
    f64 = xp.float64
    n, p = Y.shape
    alpha = xp.asarray(alpha, dtype=f64)
    R = with_ones(Y, xp).astype(f64) - kmv(kernel, X, Z, alpha).astype(f64)
    Kmm = kernel_matrix(kernel, Z).astype(f64)
    idx = xp.arange(Kmm.shape[0])
    Kmm[idx, idx] += jitter(X.dtype)  # the solvers' K_mm + eps I
    nl = n * float(penalty)
    Ka1 = Kmm @ alpha[:, p]
    gamma = float(R[:, p] @ R[:, p]) + nl * float(alpha[:, p] @ Ka1)
    num = R[:, :p].T @ R[:, p] + nl * (alpha[:, :p].T @ Ka1)
    c = to_numpy(num, dtype=np.float64) / gamma
    if not (gamma > 0 and np.all(np.isfinite(c))):
        raise ValueError(f"the intercept is not determined (1^T (I - H) 1 = {gamma:.3g}); use a larger penalty "
                         "or no intercept")
    return alpha[:, :p] - alpha[:, p:] @ xp.asarray(c)[None, :], c
