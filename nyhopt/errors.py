"""Exceptions of nyhopt that are not plain ``ValueError``/``TypeError``."""
from __future__ import annotations

import numpy as np

__all__ = ["DataError", "IllConditionedError"]


class DataError(ValueError):
    """A data or model file that cannot be used (the message says where and why).

    A ``ValueError``, so ``except ValueError`` catches it too.  Also available
    as ``nyhopt.io.DataError``.
    """


class IllConditionedError(np.linalg.LinAlgError):
    """The N-KRR system of a valid problem cannot be factorized in floating point.

    Raised by ``fit``, the objectives and ``tune`` (at the initial
    hyperparameters) when ``K_mm`` or ``A A^T + n lambda I`` is not numerically
    positive definite: duplicate centers, a penalty too small for the
    conditioning of the problem, or a very large lengthscale.  The message
    says which matrix failed and what to change.  A subclass of
    :class:`numpy.linalg.LinAlgError` and so of ``ValueError``: ``except
    ValueError`` catches it with every other error of a bad problem.
    """
