"""The fitted state of the estimators: the "not fitted" error, its check, the constant (documented internal API).

:class:`NotFittedError` is public as ``nyhopt.NotFittedError`` /
``nyhopt.estimator.NotFittedError``; :func:`check_fitted` and
:func:`not_fitted_error`, :func:`as_intercept` and :func:`intercept_of` serve every estimator module (in memory and on a
cluster) without importing :mod:`nyhopt.estimator`.
"""
from __future__ import annotations

import sys

import numpy as np

__all__ = ["NotFittedError", "not_fitted_error", "check_fitted", "as_intercept", "intercept_of"]


class NotFittedError(ValueError, AttributeError):
    """An estimator was used before ``fit`` (a ``ValueError`` and an ``AttributeError``)."""


NotFittedError.__module__ = "nyhopt.estimator"  # where users import it from


def not_fitted_error():
    """``NotFittedError``, also an instance of scikit-learn's when the caller imported it.

    scikit-learn is never imported here; if it is already loaded (the caller
    uses it), the error also derives from ``sklearn.exceptions.NotFittedError``
    so that ``except NotFittedError`` works in scikit-learn code.
    """
    sk = sys.modules.get("sklearn.exceptions")
    base = getattr(sk, "NotFittedError", None)
    if base is None or issubclass(NotFittedError, base):
        return NotFittedError
    if base not in _SK_NOT_FITTED:
        _SK_NOT_FITTED[base] = type("NotFittedError", (NotFittedError, base), {"__module__": "nyhopt.estimator"})
    return _SK_NOT_FITTED[base]


_SK_NOT_FITTED = {}


def check_fitted(est):
    """Raise :class:`NotFittedError` (naming the estimator) unless ``est`` has ``alpha_``."""
    if not hasattr(est, "alpha_"):
        raise not_fitted_error()(
            f"This {type(est).__name__} instance is not fitted yet; call 'fit' with appropriate "
            "arguments before using this estimator"
        )


def as_intercept(c, one_output):
    """``intercept_`` as scikit-learn has it: a float for one 1-D output, else an array (p,)."""
    c = np.asarray(c, dtype=np.float64).reshape(-1)
    return float(c[0]) if one_output else c


def intercept_of(est):
    """The constant of the predictor as an array (p,) (models without ``intercept_``: the target mean or 0)."""
    c = getattr(est, "intercept_", None)
    if c is None:
        c = est.y_mean_ if getattr(est, "normalize_y", False) else 0.0
    return np.atleast_1d(np.asarray(c, dtype=np.float64))
