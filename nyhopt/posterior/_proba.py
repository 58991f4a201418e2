r"""Class probabilities from the Gaussian predictive distribution of the classifier's scores.

A classifier regresses encoded labels; at a point ``x`` its regression gives
a score :math:`\mu(x)` and a predictive standard deviation
:math:`s(x) = \sqrt{\sigma_f^2(x) + \sigma_n^2}` (latent variance plus noise
variance, ``docs/uncertainty.md``).  A new encoded label is modelled as
:math:`y^* \sim \mathcal N(\mu(x), s(x)^2)` and the class is the one that
label points to:

* two classes (targets -1/+1, one score):
  :math:`P(\text{classes\_[1]} \mid x) = P(y^* > 0) = \Phi(\mu / s)`;
* :math:`K > 2` classes (one-hot targets, one score per class, the
  :math:`y^*_k` taken independent): the class of the largest draw,

  .. math::
      P(k \mid x) = \int \varphi(z) \prod_{j \ne k}
      \Phi\!\Big(\frac{\mu_k - \mu_j + s_k z}{s_j}\Big)\, dz
      = \int \frac{1}{s_k}\varphi\Big(\frac{w - \mu_k}{s_k}\Big)
      \frac{\prod_j \Phi((w - \mu_j)/s_j)}{\Phi((w - \mu_k)/s_k)}\, dw,

  the second form summed on one grid of draws :math:`w` shared by all
  classes (so :math:`O(K)` CDFs per grid point, not :math:`O(K^2)`), in
  logarithms (so that small probabilities stay positive), then normalized to
  sum to 1.

``docs/pipelines.md`` ("Class probabilities") states what these numbers are
and measures their calibration.
"""
from __future__ import annotations

import numpy as np

from ..backend import get_namespace, is_cupy_namespace, to_numpy

__all__ = ["class_probabilities"]

# The multiclass integral is a sum over a uniform grid of draws w, from mu_top - SPAN s_top to the
# largest mu_k + SPAN s_k, with PER_STD points per smallest s: the integrand is smooth on the scale
# s, and this Riemann sum is right to rounding for equal s (the two-class case against its closed
# form, tests/test_proba.py) and within 1e-6 otherwise.  At most MAX_POINTS points per row.
_SPAN = 9.0
_PER_STD = 3.0
_MAX_POINTS = 4096
# elements of the (rows, classes, points) work arrays per block of rows
_BLOCK = 1 << 21


def _special(xp):
    if is_cupy_namespace(xp):
        from cupyx.scipy.special import log_ndtr, ndtr
    else:
        from scipy.special import log_ndtr, ndtr
    return ndtr, log_ndtr


def _binary(mu, s, xp):
    ndtr, _ = _special(xp)
    # s == 0: the sign of the score (a tie, 1/2)
    z = xp.where(s > 0, mu / xp.where(s > 0, s, 1.0), xp.sign(mu) * np.finfo(np.float64).max)
    p1 = ndtr(z)
    return xp.stack([1.0 - p1, p1], axis=1)


def _logsumexp(a, axis, xp):
    m = xp.max(a, axis=axis, keepdims=True)
    m = xp.where(xp.isfinite(m), m, 0.0)
    return xp.squeeze(m, axis=axis) + xp.log(xp.sum(xp.exp(a - m), axis=axis))


def _multiclass(mu, s, xp):
    """``P(k | x)`` as the integral over the draw ``w`` of class ``k`` (see the module notes), rows of ``mu``."""
    _, log_ndtr = _special(xp)
    n, k = mu.shape
    s = xp.maximum(s, np.finfo(np.float64).tiny)
    out = xp.empty((n, k), dtype=np.float64)
    rows = xp.arange(n)
    top = xp.argmax(mu, axis=1)
    # below mu_top - SPAN s_top the top class is above w with probability 1 - Phi(-SPAN); above every
    # mu_k + SPAN s_k no density is left
    low = mu[rows, top] - _SPAN * s[rows, top]
    high = xp.max(mu + _SPAN * s, axis=1)
    points = to_numpy((high - low) / xp.min(s, axis=1) * _PER_STD)
    start = 0
    while start < n:
        stop = min(n, start + max(1, _BLOCK // (k * (int(min(points[start], _MAX_POINTS)) + 2))))
        g = int(min(points[start:stop].max(), _MAX_POINTS)) + 2
        m, sd, lo, hi = mu[start:stop], s[start:stop], low[start:stop], high[start:stop]
        step = (hi - lo) / (g - 1)
        w = lo[:, None] + step[:, None] * xp.arange(g, dtype=np.float64)  # (rows, g)
        z = (w[:, None, :] - m[:, :, None]) / sd[:, :, None]  # (rows, k, g)
        log_cdf = log_ndtr(z)
        log_all = log_cdf.sum(axis=1, keepdims=True)  # log of prod_j Phi((w - mu_j) / s_j)
        # density of class k's draw at w times the CDFs of the others, in logarithms
        terms = -0.5 * z * z - xp.log(sd)[:, :, None] + (log_all - log_cdf)
        logp = _logsumexp(terms, 2, xp) + xp.log(step)[:, None]
        out[start:stop] = xp.exp(logp - _logsumexp(logp, 1, xp)[:, None])
        start = stop
    return out


def _probabilities(mu, s):
    xp = get_namespace(mu)
    mu = xp.asarray(mu, dtype=np.float64)
    s = xp.broadcast_to(xp.asarray(s, dtype=np.float64), mu.shape)
    if mu.ndim == 1:
        return _binary(mu, s, xp)
    return _multiclass(mu, s, xp)


def class_probabilities(mu, s):
    """Class probabilities, float64 of shape (n, n_classes), from scores and their predictive std.

    Parameters
    ----------
    mu : array of shape (n,) (two classes) or (n, n_classes)
        The scores, NumPy or CuPy (the result is of the same kind).
    s : float or array of the shape of ``mu``
        The standard deviation of a new encoded label (noise included).

    Returns
    -------
    array of shape (n, n_classes)
        Rows sum to 1; column ``k`` is the probability of ``classes_[k]``.

    Examples
    --------
    >>> import numpy as np
    >>> class_probabilities(np.array([0.0, 1.0]), np.array([1.0, 1.0])).round(4)
    array([[0.5   , 0.5   ],
           [0.1587, 0.8413]])
    >>> p = class_probabilities(np.array([[1.0, 0.0, 0.0]]), np.full((1, 3), 0.5))
    >>> bool(np.isclose(p.sum(), 1.0)), int(p.argmax())
    (True, 0)
    """
    return _probabilities(mu, s)
