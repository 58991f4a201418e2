"""Kernels: Gaussian, Laplacian and Matern, with hand-written adjoints."""
from ._base import Kernel, KernelGrad
from .gaussian import GaussianKernel
from .laplacian import LaplacianKernel
from .matern import MaternKernel

__all__ = ["Kernel", "KernelGrad", "GaussianKernel", "LaplacianKernel", "MaternKernel", "make_kernel"]

_NAMES = {
    "gaussian": lambda ell: GaussianKernel(ell),
    "rbf": lambda ell: GaussianKernel(ell),
    "laplacian": lambda ell: LaplacianKernel(ell),
    "matern12": lambda ell: MaternKernel(ell, nu=0.5),
    "matern32": lambda ell: MaternKernel(ell, nu=1.5),
    "matern52": lambda ell: MaternKernel(ell, nu=2.5),
}


def make_kernel(kernel="gaussian", lengthscale=1.0) -> Kernel:
    """Return a kernel from a name or a :class:`Kernel` instance.

    Parameters
    ----------
    kernel : str or Kernel
        One of "gaussian" (alias "rbf"), "laplacian", "matern12", "matern32",
        "matern52", or a kernel instance (returned as is).
    lengthscale : float or array
        Used only when ``kernel`` is a name.

    Examples
    --------
    >>> make_kernel("matern52", 2.0)
    MaternKernel(lengthscale=2.0, nu=2.5)
    """
    if isinstance(kernel, Kernel):
        kernel.kind  # validates nu for Matern kernels
        return kernel
    if isinstance(kernel, str) and kernel.lower() in _NAMES:
        return _NAMES[kernel.lower()](lengthscale)
    raise ValueError(f"unknown kernel {kernel!r}; expected one of {sorted(_NAMES)} or a Kernel instance")
