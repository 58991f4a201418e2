r"""The variance factor of a model file as its packed lower triangle.

The predictive variance needs the lower-triangular Cholesky factor :math:`C`
(:math:`m \times m`, :mod:`nyhopt.posterior`), whose upper triangle is zero:
a file stores its :math:`m(m+1)/2` lower entries row by row,
:math:`(C_{00}, C_{10}, C_{11}, C_{20}, \dots, C_{m-1,m-1})`, half the bytes of
the square (format version 2; version 1 files hold the square, ``var_chol``).
"""
from __future__ import annotations

import numpy as np

__all__ = ["packed_size", "pack_lower", "unpack_lower"]


def packed_size(m: int) -> int:
    """:math:`m(m+1)/2`, the number of entries of the lower triangle of an ``m x m`` matrix."""
    return m * (m + 1) // 2


def pack_lower(C) -> np.ndarray:
    """The lower triangle of the square NumPy array ``C``, row by row, as a float64 vector.

    Examples
    --------
    >>> pack_lower(np.array([[1.0, 0.0], [2.0, 3.0]])).tolist()
    [1.0, 2.0, 3.0]
    """
    C = np.asarray(C, dtype=np.float64)
    return C[np.tril_indices(C.shape[0])]


def unpack_lower(packed, m: int) -> np.ndarray:
    """The ``m x m`` lower-triangular float64 matrix whose packed triangle is ``packed`` (:func:`pack_lower`).

    Examples
    --------
    >>> unpack_lower(np.array([1.0, 2.0, 3.0]), 2).tolist()
    [[1.0, 0.0], [2.0, 3.0]]
    """
    C = np.zeros((m, m))
    C[np.tril_indices(m)] = packed
    return C
