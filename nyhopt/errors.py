"""Exceptions of nyhopt that are not plain ``ValueError``/``TypeError``, and where its warnings point."""
from __future__ import annotations

import os
import sys
import warnings

import numpy as np

__all__ = ["DataError", "IllConditionedError"]


class DataError(ValueError):
    """A data or model file that cannot be used (the message says where and why).

    A ``ValueError``, so ``except ValueError`` catches it too.  Also available
    as ``nyhopt.io.DataError``.

    Examples
    --------
    >>> import os, tempfile
    >>> import nyhopt as nh
    >>> path = os.path.join(tempfile.mkdtemp(), "data.csv")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("x,y")
    >>> try:
    ...     nh.load_model(path)
    ... except nh.DataError as exc:
    ...     print("not an nyhopt model file" in str(exc))
    True
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

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> X = np.random.default_rng(0).normal(size=(60, 2))
    >>> Z = np.repeat(X[:1], 5, axis=0)                   # five copies of one center
    >>> try:
    ...     nh.NystromKRR(penalty=1e-300, centers=Z, solver="direct").fit(X, X[:, 0])
    ... except nh.IllConditionedError as exc:
    ...     print("use distinct centers" in str(exc), isinstance(exc, ValueError))
    True True
    """


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message, category=UserWarning) -> None:
    """:func:`warnings.warn` pointed at the first line outside nyhopt: the user's call, however deep.

    A warning raised below a public entry point (through the solvers, the
    objectives, nested estimators and :func:`nyhopt.inputs._door.entry_point`)
    names the line of the user's code that called nyhopt, as scikit-learn's
    and pandas' warnings do, without counting frames at each call site.
    """
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
