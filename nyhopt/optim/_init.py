r"""The paper's initialization of the hyperparameters.

* penalty :math:`\lambda_0 = 1/n`;
* lengthscale by the median heuristic, the same value in every dimension:
  :math:`\ell_0 = \operatorname{median}_{i<j} \|x_i - x_j\|` over the distinct
  pairs of (a seeded random subset of at most ``max_samples``) training rows;
* centers: a random subset of ``m`` distinct training rows.

All three are deterministic given the seed.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..models._centers import as_generator
from ..models._scaling import pow2_scale
from ..backend import get_namespace
from ..placement import take_rows

__all__ = ["median_heuristic", "initial_centers", "gather_rows"]


def gather_rows(X, idx, client=None):
    """Rows ``idx`` (sorted indices) of ``X``; for a dask ``X`` only those rows reach the driver.

    Parameters
    ----------
    X : array of shape (n, d)
        NumPy, CuPy or dask array.
    idx : numpy.ndarray of int, or None
        Sorted row indices; None means every row.
    client : distributed.Client, optional
        Runs the gather for a dask ``X`` (default: the current scheduler).

    Returns
    -------
    array of shape (len(idx), d)
        NumPy or CuPy (the chunks' type for a dask ``X``).
    """
    return take_rows(X, idx, client)


def median_heuristic(X, max_samples: int = 1000, random_state=0, client=None) -> float:
    r"""Median of the pairwise Euclidean distances between rows of ``X``.

    Parameters
    ----------
    X : array of shape (n, d)
        Training inputs (NumPy or CuPy), n >= 2.
    max_samples : int, default 1000
        When ``n > max_samples`` the median is taken over a random subset of
        ``max_samples`` rows (drawn without replacement from ``random_state``).
    random_state : None, int, numpy.random.Generator or RandomState, default 0
    client : distributed.Client, optional
        For a dask ``X``: gathers the subset of rows (``max_samples x d``).

    Returns
    -------
    float
        :math:`\operatorname{median}_{i<j}\|x_i - x_j\|_2` (over the subset),
        or 1.0 when that median is 0 (e.g. mostly repeated rows).  Computed on
        ``X / 2^e`` with ``2^e`` near :math:`\max|X|` (exact), so huge finite
        values do not overflow the squared distances.

    Raises
    ------
    ValueError
        If the median distance itself exceeds the float64 range.

    Examples
    --------
    >>> import numpy as np
    >>> median_heuristic(np.array([[0.0], [1.0], [3.0]]))   # distances 1, 2, 3
    2.0
    """
    n = X.shape[0]
    if n < 2:
        raise ValueError(f"X needs at least 2 rows for the median heuristic, got {n}")
    idx = None
    if n > max_samples:
        idx = np.sort(as_generator(random_state).choice(n, size=max_samples, replace=False))
    X = gather_rows(X, idx, client)
    xp = get_namespace(X)
    A = xp.asarray(X, dtype=xp.float64)
    s = float(pow2_scale(float(xp.max(xp.abs(A)))))
    if s != 1.0:
        A = A / s
    if xp is np:
        from scipy.spatial.distance import pdist

        med = float(np.median(pdist(A)))
    else:
        # Coordinate differences (not |x|^2 + |z|^2 - 2 x.z): exact for repeated rows.
        sq = xp.zeros((A.shape[0], A.shape[0]), dtype=xp.float64)
        for j in range(A.shape[1]):
            diff = A[:, j, None] - A[None, :, j]
            sq += diff * diff
        iu = xp.triu_indices(A.shape[0], k=1)
        med = float(xp.median(xp.sqrt(sq[iu])))
    med *= s
    if not np.isfinite(med):
        raise ValueError("X: the median pairwise distance (median heuristic for the initial lengthscale) "
                         "exceeds the float64 range; standardize X or pass lengthscale")
    return med if med > 0 else 1.0


def initial_centers(X, m: int, random_state=0, client=None):
    """``m`` distinct rows of ``X`` drawn at random, as a float64 copy (same device).

    Parameters
    ----------
    X : array of shape (n, d)
    m : int
        Number of centers, ``1 <= m <= n``.
    random_state : None, int, numpy.random.Generator or RandomState, default 0
    client : distributed.Client, optional
        For a dask ``X``: gathers the ``m`` rows (the result is then on the driver).

    Returns
    -------
    array of shape (m, d), float64

    Examples
    --------
    >>> import numpy as np
    >>> Z = initial_centers(np.arange(10.0).reshape(5, 2), 3, random_state=0)
    >>> Z.shape, Z.dtype
    ((3, 2), dtype('float64'))
    """
    n = X.shape[0]
    if isinstance(m, bool) or not isinstance(m, numbers.Integral):
        raise TypeError(f"centers must be an int or an (m, d) array, got {m!r}")
    m = int(m)
    if not 1 <= m <= n:
        raise ValueError(f"centers must be between 1 and the number of training rows ({n}), got {m}")
    idx = np.sort(as_generator(random_state).choice(n, size=m, replace=False))
    rows = gather_rows(X, idx, client)
    xp = get_namespace(rows)
    return xp.array(rows, dtype=xp.float64, copy=True)
