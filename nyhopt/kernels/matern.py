"""Matern kernels with nu in {1/2, 3/2, 5/2}.

With :math:`r = \\|(x - z)/\\ell\\|` and :math:`s = r^2`:

.. math::
    \\nu = 1/2:\\; e^{-r}, \\qquad
    \\nu = 3/2:\\; (1 + \\sqrt3 r) e^{-\\sqrt3 r}, \\qquad
    \\nu = 5/2:\\; (1 + \\sqrt5 r + \\tfrac53 r^2) e^{-\\sqrt5 r}.

Their derivatives in :math:`s` are smooth for nu = 3/2 and 5/2:

.. math::
    \\varphi'_{3/2}(s) = -\\tfrac32 e^{-\\sqrt3 r}, \\qquad
    \\varphi'_{5/2}(s) = -\\tfrac56 (1 + \\sqrt5 r) e^{-\\sqrt5 r};

nu = 1/2 is the Laplacian kernel (cusp at 0, derivative taken as 0 there).

Far apart (:math:`s \\ge` :data:`S_CAP`) :math:`e^{-\\sqrt3 r}` is already 0 in
every floating dtype, so :math:`s` is clipped at :data:`S_CAP` before the
profile is evaluated: an overflowing distance (:math:`r = \\infty`) then gives
0, as the Gaussian does, instead of :math:`\\infty \\cdot 0 = \\mathrm{NaN}`.  The
values are unchanged wherever the unclipped formula was finite.
"""
from __future__ import annotations

import math

import numpy as np

from ._base import Kernel
from .laplacian import laplacian_profile_and_derivative

__all__ = ["MaternKernel", "S_CAP"]

_SQRT3 = math.sqrt(3.0)
_SQRT5 = math.sqrt(5.0)
#: Clip of the scaled squared distance: exp(-sqrt(3 * S_CAP)) underflows to 0 in float32 and float64,
#: and the polynomial factors stay finite.  Shared with the Numba and CUDA profiles.
S_CAP = 1e6
_KINDS = {0.5: "laplacian", 1.5: "matern32", 2.5: "matern52"}


class MaternKernel(Kernel):
    """Matern kernel with smoothness ``nu`` in {0.5, 1.5, 2.5}.

    Parameters
    ----------
    lengthscale : float or array of shape (d,)
    nu : {0.5, 1.5, 2.5}, default 1.5

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> k = nh.MaternKernel(lengthscale=1.0, nu=2.5)
    >>> float(k(np.zeros((1, 1)), np.zeros((1, 1)))[0, 0])
    1.0
    """

    def __init__(self, lengthscale=1.0, nu=1.5):
        super().__init__(lengthscale)
        self.nu = nu

    def _param_names(self):
        return ["lengthscale", "nu"]

    @property
    def kind(self):
        try:
            if isinstance(self.nu, (str, bytes, bool, np.bool_)):  # float("1.5") and True == 1 would pass
                raise TypeError
            return _KINDS[float(self.nu)]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"nu must be one of 0.5, 1.5, 2.5, got {self.nu!r}") from None

    @property
    def needs_exact_distances(self):
        return self.kind == "laplacian"

    def profile(self, s, xp=np):
        return self.profile_and_derivative(s, xp)[0]

    def profile_and_derivative(self, s, xp=np):
        kind = self.kind
        if kind == "laplacian":
            return laplacian_profile_and_derivative(s, xp)
        s = xp.minimum(s, S_CAP)  # a new array: ``s`` is left intact; NaN stays NaN
        r = xp.sqrt(s)
        if kind == "matern32":
            e = xp.exp(r * -_SQRT3)
            return (1 + _SQRT3 * r) * e, e * -1.5
        sr = _SQRT5 * r
        e = xp.exp(-sr)
        return (1 + sr + (5.0 / 3.0) * s) * e, (1 + sr) * e * (-5.0 / 6.0)
