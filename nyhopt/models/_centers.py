"""Choosing Nystrom centers: a seeded uniform subset of the training points, or given ones."""
from __future__ import annotations

import numbers
import warnings

import numpy as np

from ..inputs._validation import check_matrix
from ..backend import is_cupy_namespace
from ..errors import warn_user

__all__ = ["as_generator", "select_centers", "fit_centers"]


def as_generator(random_state) -> np.random.Generator:
    """A NumPy ``Generator`` from ``None``, an int, a ``Generator`` or a ``RandomState``.

    A ``Generator`` is used as is (its state advances); a ``RandomState`` seeds
    a new ``Generator`` from one draw, so both stay reproducible.

    Examples
    --------
    >>> int(as_generator(0).integers(10)) == int(as_generator(0).integers(10))
    True
    """
    if random_state is None or isinstance(random_state, (numbers.Integral, np.integer)):
        if random_state is not None and (isinstance(random_state, bool) or random_state < 0):
            raise ValueError(f"random_state must be a non-negative integer, got {random_state!r}")
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    raise TypeError(
        "random_state must be None, an int, a numpy.random.Generator or RandomState, "
        f"got {type(random_state).__name__}"
    )


def fit_centers(m: int, n: int) -> int:
    """The number of centers to draw: ``m``, or all ``n`` rows (with a warning) when ``m > n``.

    As scikit-learn's ``Nystroem`` does with ``n_components > n_samples``: a
    default such as ``centers=100`` keeps working on a small data set.

    Raises
    ------
    ValueError
        ``m < 1``.

    Examples
    --------
    >>> import warnings
    >>> fit_centers(10, 50)
    10
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     fit_centers(100, 50), str(w[0].message)[:40]
    (50, 'centers=100 is more than the 50 training')
    """
    m = int(m)
    if m < 1:
        raise ValueError(f"centers must be >= 1, got {m}")
    if m > n:
        warn_user(f"centers={m} is more than the {n} training rows: using all {n} rows as centers "
                  f"(pass centers={n} or fewer to silence this warning)", UserWarning)
        return n
    return m


def select_centers(X, centers, random_state, xp):
    """Return the Nystrom centers ``Z`` (m, d) for the training inputs ``X``.

    Parameters
    ----------
    X : array (n, d)
        Validated training inputs.
    centers : int or array-like (m, d)
        Number of centers, drawn uniformly without replacement from the rows
        of ``X`` with ``random_state``; or the centers themselves, converted to
        the array module and dtype of ``X``.
    random_state : None, int, Generator or RandomState
    xp : module

    Returns
    -------
    Z : array (m, d), a new array (the caller's ``centers`` is never aliased).

    Raises
    ------
    ValueError
        ``centers`` < 1, more given centers than points, wrong number of
        features, NaN/inf in given centers.  A number of centers larger than
        ``n`` uses all ``n`` rows, with a warning.
    TypeError
        ``centers`` neither an integer nor an array.
    """
    n, d = X.shape
    if isinstance(centers, (numbers.Integral, np.integer)) and not isinstance(centers, bool):
        m = fit_centers(centers, n)
        idx = np.sort(as_generator(random_state).choice(n, size=m, replace=False))
        return X[xp.asarray(idx)]
    if isinstance(centers, (bool, np.bool_, str, float, numbers.Real)) or centers is None:
        raise TypeError(f"centers must be an int or an array of shape (m, n_features), got {centers!r}")
    if hasattr(centers, "get") and not is_cupy_namespace(xp):
        raise TypeError("centers is a CuPy (device) array but X is a NumPy (host) array")
    arr = check_matrix(centers, "centers", xp, dtype=X.dtype, n_features=d)
    if arr.shape[0] > n:
        raise ValueError(
            f"centers has {arr.shape[0]} rows, more centers than training points (n_samples = {n})"
        )
    return arr.copy() if arr is centers else arr
