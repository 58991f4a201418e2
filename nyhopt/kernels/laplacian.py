"""Laplacian (exponential) kernel, the Matern kernel with nu = 1/2.

.. math:: k(x, z) = e^{-r},\\qquad r = \\|(x - z)/\\ell\\|,
          \\qquad \\varphi(s) = e^{-\\sqrt{s}},\\quad
          \\varphi'(s) = -\\frac{e^{-\\sqrt s}}{2\\sqrt s}.

At zero distance the kernel has a cusp: it is not differentiable in ``z``
when ``z = x``.  nyhopt takes :math:`\\varphi'(0) = 0` there, i.e. a
coincident pair contributes nothing to the gradients with respect to the
lengthscales, the centers or ``X`` (the value of the one-sided derivative
along any direction is bounded, and 0 is the average over directions).
Squared distances of this kernel are computed from coordinate differences,
so coincident points give exactly :math:`s = 0` and :math:`k = 1`.
"""
from __future__ import annotations

import numpy as np

from ._base import Kernel

__all__ = ["LaplacianKernel", "laplacian_profile_and_derivative"]


def laplacian_profile_and_derivative(s, xp=np):
    r = xp.sqrt(s)
    k = xp.exp(-r)
    with np.errstate(divide="ignore", invalid="ignore"):
        dk = xp.where(r > 0, -0.5 * k / xp.where(r > 0, r, 1), 0).astype(k.dtype, copy=False)
    return k, dk


class LaplacianKernel(Kernel):
    """Laplacian kernel :math:`\\exp(-\\|(x - z)/\\ell\\|)`.

    The derivative at zero distance is taken as 0 (see module notes).

    Parameters
    ----------
    lengthscale : float or array of shape (d,)

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> K = nh.LaplacianKernel(1.0)(np.zeros((1, 2)), np.array([[3.0, 4.0]]))
    >>> np.allclose(K, np.exp(-5.0))
    True
    """

    kind = "laplacian"
    needs_exact_distances = True

    def profile(self, s, xp=np):
        xp.sqrt(s, out=s)
        s *= -1
        return xp.exp(s, out=s)

    def profile_and_derivative(self, s, xp=np):
        return laplacian_profile_and_derivative(s, xp)
