"""Gaussian (squared-exponential) kernel.

.. math:: k(x, z) = \\exp\\Big(-\\tfrac12 \\sum_j (x_j - z_j)^2/\\ell_j^2\\Big),
          \\qquad \\varphi(s) = e^{-s/2},\\quad \\varphi'(s) = -\\tfrac12 e^{-s/2}.
"""
from __future__ import annotations

import numpy as np

from ._base import Kernel

__all__ = ["GaussianKernel"]


class GaussianKernel(Kernel):
    """Gaussian kernel :math:`\\exp(-\\|(x - z)/\\ell\\|^2 / 2)`.

    Parameters
    ----------
    lengthscale : float or array of shape (d,)
        Positive lengthscale(s); one per feature gives automatic relevance
        determination.

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> k = nh.GaussianKernel(lengthscale=2.0)
    >>> K = k(np.zeros((1, 3)), np.ones((2, 3)))
    >>> np.allclose(K, np.exp(-3 / 8))
    True
    """

    kind = "gaussian"

    def profile(self, s, xp=np):
        s *= -0.5
        return xp.exp(s, out=s)

    def profile_and_derivative(self, s, xp=np):
        k = xp.exp(s * -0.5)
        return k, k * -0.5
