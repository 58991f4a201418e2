"""Linear solvers for Nystrom kernel ridge regression.

* :func:`jitter` -- the fixed per-dtype diagonal jitter added to ``Kmm``.
* :func:`conjugate_gradient` / :class:`CGResult` -- multi right-hand side
  preconditioned conjugate gradient (NumPy or CuPy).
* :func:`falkon_solve` / :class:`FalkonPreconditioner` / :class:`FalkonResult`
  -- the Falkon solver (one pass over the data per iteration, bounded memory).
* :func:`direct_solve` -- Cholesky solver through the stable ``L, A, C``
  factorization, ``O(n m^2)`` time.
"""

from ._jitter import jitter
from .cg import CGResult, conjugate_gradient
from .direct import direct_solve
from .falkon import ConvergenceWarning, FalkonPreconditioner, FalkonResult, falkon_solve

__all__ = [
    "jitter",
    "CGResult",
    "conjugate_gradient",
    "FalkonPreconditioner",
    "FalkonResult",
    "ConvergenceWarning",
    "falkon_solve",
    "direct_solve",
]
