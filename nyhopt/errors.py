"""Exceptions of nyhopt that are not plain ``ValueError``/``TypeError``."""
from __future__ import annotations

__all__ = ["DataError"]


class DataError(ValueError):
    """A data or model file that cannot be used (the message says where and why).

    A ``ValueError``, so ``except ValueError`` catches it too.  Also available
    as ``nyhopt.io.DataError``.
    """
