"""The result type of the kernel adjoints.

It lives here, beside the code that builds it, so that :mod:`nyhopt.ops`
needs nothing from :mod:`nyhopt.kernels`; the kernels re-export it as
:class:`nyhopt.kernels.KernelGrad` (its public name).
"""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["KernelGrad"]


class KernelGrad(NamedTuple):
    """Gradients of :math:`\\langle G, k(X, Z)\\rangle`.

    Attributes
    ----------
    lengthscale : numpy.ndarray or None
        float64, shape of the kernel's lengthscale array, ``(1,)`` or ``(d,)``.
    centers : array or None
        Gradient with respect to ``Z``, shape ``(m, d)``, float64.
    X : array or None
        Gradient with respect to ``X``, shape ``(n, d)``, float64.

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> X, Z = np.zeros((4, 2)), np.ones((3, 2))
    >>> g = nh.GaussianKernel(1.0).adjoint(X, Z, np.ones((4, 3)), wrt=("centers",))
    >>> g.centers.shape, g.lengthscale is None
    ((3, 2), True)
    """

    lengthscale: object
    centers: object
    X: object
