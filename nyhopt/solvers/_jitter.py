"""Fixed per-dtype diagonal jitter for the m x m Cholesky factorizations."""

from __future__ import annotations

import numpy as np

__all__ = ["jitter"]

_JITTER = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 1e-6}


def jitter(dtype) -> float:
    r"""Diagonal jitter added to :math:`K_{mm}` before its Cholesky factorization.

    The value depends only on the floating-point type of the *data*; the m x m
    algebra itself is always carried out in float64.

    ========  ==========
    data      jitter
    ========  ==========
    float64   ``1e-10``
    float32   ``1e-6``
    ========  ==========

    The objectives use :math:`L = \operatorname{chol}(K_{mm} + \epsilon I)` and the
    Falkon preconditioner uses :math:`T = \operatorname{chol}(K_{mm} + \epsilon m I)`
    with :math:`\epsilon` = ``jitter(dtype)``.

    Parameters
    ----------
    dtype : dtype-like
        The dtype of the data (anything :func:`numpy.dtype` accepts, or an array
        with a ``dtype`` attribute). Integer dtypes are treated as float64, the
        dtype they are converted to on input.

    Returns
    -------
    float
        The jitter :math:`\epsilon`.

    Raises
    ------
    TypeError
        If ``dtype`` is not a float32, float64 or integer dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from nyhopt.solvers import jitter
    >>> jitter(np.float64)
    1e-10
    >>> jitter("float32")
    1e-06
    """
    dt = dtype
    if not isinstance(dtype, (type, str, np.dtype)) and hasattr(dtype, "dtype"):
        dt = dtype.dtype  # an array (NumPy or CuPy)
    try:
        dt = np.dtype(dt)
    except TypeError as exc:
        raise TypeError(f"dtype must be a NumPy dtype, got {dtype!r}") from exc
    if dt.kind in "iub":
        dt = np.dtype(np.float64)
    try:
        return _JITTER[dt]
    except KeyError:
        raise TypeError(
            f"dtype must be float32 or float64 (or an integer type), got {dt}"
        ) from None
