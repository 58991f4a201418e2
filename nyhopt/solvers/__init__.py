"""Linear solvers for Nystrom kernel ridge regression.

* :func:`jitter` -- the fixed per-dtype diagonal jitter for ``Kmm``.
"""

from ._jitter import jitter

__all__ = ["jitter"]
