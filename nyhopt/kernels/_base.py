"""Base class shared by the stationary kernels.

Every kernel of nyhopt is a radial function of the scaled squared distance

.. math::  s(x, z) = \\sum_{j=1}^{d} (x_j - z_j)^2 / \\ell_j^2,
           \\qquad k(x, z) = \\varphi(s(x, z)),

with one lengthscale :math:`\\ell` shared by all features or one per feature.
A kernel therefore only has to provide its *profile* :math:`\\varphi` and the
profile's derivative :math:`\\varphi'`; distances, blocks and adjoints are
computed once for all kernels in :mod:`nyhopt.ops`.

Adjoint.  For a cotangent :math:`G` of :math:`K = k(X, Z)` let
:math:`W_{ij} = G_{ij}\\,\\varphi'(s_{ij})`, :math:`w^r = W 1` (row sums) and
:math:`w^c = W^T 1` (column sums).  With scaled points
:math:`\\tilde x = x / \\ell`, :math:`\\tilde z = z / \\ell`:

.. math::
    \\frac{\\partial \\langle G, K\\rangle}{\\partial Z_{jk}}
        = \\frac{2}{\\ell_k}\\big(w^c_j \\tilde Z_{jk} - (W^T \\tilde X)_{jk}\\big),
    \\qquad
    \\frac{\\partial \\langle G, K\\rangle}{\\partial X_{ik}}
        = \\frac{2}{\\ell_k}\\big(w^r_i \\tilde X_{ik} - (W \\tilde Z)_{ik}\\big),

.. math::
    \\frac{\\partial \\langle G, K\\rangle}{\\partial \\ell_k}
        = -\\frac{2}{\\ell_k} \\sum_{ij} W_{ij} (\\tilde X_{ik} - \\tilde Z_{jk})^2 ,

and, for a single shared lengthscale, the sum of the last expression over k.
When :math:`G = P Q^T` is low rank, :math:`W` is formed one row block at a
time, so no ``n x m`` array ever exists.
"""
from __future__ import annotations

import numpy as np

from ..inputs._validation import check_lengthscale, check_matrix
from ..backend import get_namespace
from ..ops import adjoint_dense, adjoint_lowrank, kernel_matrix
from ..ops._grad import KernelGrad

__all__ = ["Kernel", "KernelGrad", "check_finite_grad"]


def check_finite_grad(grad, xp):
    """Return ``grad`` (a :class:`KernelGrad`), or raise when one of its arrays is not finite.

    A tiny lengthscale makes the scaled coordinates :math:`x/\\ell` or their
    squares overflow; the kernel values then underflow to 0 but the adjoint
    formulas meet :math:`0\\cdot\\infty`.

    Raises
    ------
    ValueError
        If a gradient contains NaN or infinity (the message says what to change).
    """
    for name, g in zip(grad._fields, grad):
        if g is not None and not bool(xp.all(xp.isfinite(xp.asarray(g)))):
            raise ValueError(
                f"the kernel gradient with respect to {name} is not finite: |x - z| / lengthscale "
                "overflows (the lengthscale is too small for the range of the data); use a larger "
                "lengthscale or standardize X"
            )
    return grad


class Kernel:
    """Stationary kernel :math:`k(x, z) = \\varphi(\\|(x - z)/\\ell\\|^2)`.

    Subclasses set ``kind`` (a short name used by the fused CPU/GPU loops)
    and implement :meth:`profile` and :meth:`profile_and_derivative`.

    Parameters
    ----------
    lengthscale : float or array of shape (d,)
        One lengthscale for every feature, or one per feature.  Must be > 0.

    Examples
    --------
    A new kernel only needs its profile; here :math:`\varphi(s) = 1/(1 + s)`
    (the derivative is then :math:`-1/(1 + s)^2`):

    >>> import numpy as np
    >>> from nyhopt.kernels import Kernel
    >>> class Cauchy(Kernel):
    ...     kind = "cauchy"
    ...     def profile(self, s, xp=np):
    ...         return 1 / (1 + s)
    ...     def profile_and_derivative(self, s, xp=np):
    ...         k = 1 / (1 + s)
    ...         return k, -k * k
    >>> Cauchy(2.0)(np.zeros((1, 1)), np.full((1, 1), 2.0))
    array([[0.5]])

    (Fused Numba/CUDA paths know the built-in kinds only; set
    ``nyhopt.ops.set_cpu_impl(None, "numpy")`` for a custom kernel.)
    """

    kind = "base"
    #: True when the profile has a cusp at s = 0, so squared distances must be
    #: computed from coordinate differences (exact zeros) rather than from
    #: ``|x|^2 + |z|^2 - 2 x.z`` (rounding ~1e-16 turns into ~1e-8 under a sqrt).
    needs_exact_distances = False

    def __init__(self, lengthscale=1.0):
        self.lengthscale = lengthscale

    # -- scikit-learn style parameters -------------------------------------------
    def _param_names(self):
        return ["lengthscale"]

    def get_params(self, deep=True):
        """Constructor parameters, as scikit-learn's ``get_params``."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        """Set constructor parameters, as scikit-learn's ``set_params``."""
        for key, value in params.items():
            if key not in self._param_names():
                raise ValueError(f"invalid parameter {key!r} for {type(self).__name__}")
            setattr(self, key, value)
        return self

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        a, b = self.get_params(), other.get_params()
        return all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)

    __hash__ = None

    # -- hyperparameters ----------------------------------------------------------
    def lengthscale_array(self, n_features=None) -> np.ndarray:
        """Lengthscales as float64 array of shape ``(1,)`` or ``(d,)`` (validated)."""
        return check_lengthscale(self.lengthscale, n_features)

    def with_lengthscale(self, lengthscale):
        """A copy of this kernel with other lengthscales."""
        params = self.get_params()
        params["lengthscale"] = lengthscale
        return type(self)(**params)

    # -- profile ---------------------------------------------------------------------
    def profile(self, s, xp=np):
        """:math:`\\varphi(s)` elementwise; may overwrite ``s``."""
        raise NotImplementedError

    def profile_and_derivative(self, s, xp=np):
        """:math:`(\\varphi(s), \\varphi'(s))` elementwise (``s`` is left intact)."""
        raise NotImplementedError

    # -- matrices ----------------------------------------------------------------------
    def __call__(self, X, Z=None):
        """Kernel matrix :math:`k(X, Z)` (``k(X, X)`` when ``Z`` is None).

        Parameters
        ----------
        X : array of shape (n, d)
        Z : array of shape (m, d), optional

        Returns
        -------
        K : array of shape (n, m), dtype of ``X``; symmetric when ``Z`` is None.
        """
        return kernel_matrix(self, X, Z)

    def diag(self, X):
        """Diagonal :math:`k(x_i, x_i) = \\varphi(0) = 1` for every row of ``X``."""
        xp = get_namespace(X)
        X = check_matrix(X, "X", xp)
        return xp.ones(X.shape[0], dtype=X.dtype)

    def adjoint(self, X, Z, G=None, *, P=None, Q=None, wrt=("lengthscale", "centers")):
        """Gradients of :math:`\\langle G, k(X, Z)\\rangle` (see module notes).

        Give either a dense cotangent ``G`` of shape ``(n, m)`` or a low-rank
        one ``G = P @ Q.T`` through ``P`` (n, k) and ``Q`` (m, k).

        Parameters
        ----------
        X : array (n, d)
        Z : array (m, d)
        G : array (n, m), optional
        P, Q : arrays (n, k), (m, k), optional
        wrt : iterable of {"lengthscale", "centers", "X"}

        Returns
        -------
        KernelGrad
            Requested gradients (float64), ``None`` for the others.

        Raises
        ------
        ValueError
            If a gradient is not finite (scaled distances overflow at a tiny
            lengthscale), see :func:`check_finite_grad`.
        """
        if G is not None:
            if P is not None or Q is not None:
                raise ValueError("give either G or (P, Q), not both")
            grad = adjoint_dense(self, X, Z, G, wrt=wrt)
        elif P is None or Q is None:
            raise ValueError("adjoint needs a cotangent: G, or both P and Q")
        else:
            grad = adjoint_lowrank(self, X, Z, P, Q, wrt=wrt)
        return check_finite_grad(grad, get_namespace(X))
