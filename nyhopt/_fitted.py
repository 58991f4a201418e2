"""The "not fitted" error of the estimators, and its check (documented internal API).

:class:`NotFittedError` is public as ``nyhopt.NotFittedError`` /
``nyhopt.estimator.NotFittedError``; :func:`check_fitted` and
:func:`not_fitted_error` serve every estimator module (in memory and on a
cluster) without importing :mod:`nyhopt.estimator`.
"""
from __future__ import annotations

import sys

__all__ = ["NotFittedError", "not_fitted_error", "check_fitted"]


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
