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
      \Phi\!\Big(\frac{\mu_k - \mu_j + s_k z}{s_j}\Big)\, dz,

  a one-dimensional integral computed by Gauss-Hermite quadrature, in
  logarithms (so that small probabilities stay positive), then normalized to
  sum to 1.

``docs/pipelines.md`` ("Class probabilities") states what these numbers are
and measures their calibration.
"""
from __future__ import annotations

import numpy as np

from .backend import get_namespace, is_cupy_namespace

__all__ = ["class_probabilities"]

# Gauss-Hermite nodes for the multiclass integral; the integrand is a product of normal CDFs
# shifted along z, smooth on the scale of the Gaussian weight.  With 64 nodes the two-class case
# (closed form Phi(d / sqrt 2)) is right to rounding for every d (tests/test_proba.py).
_NODES = 64
# elements of the (rows, classes, nodes) work array per block of rows
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
    _, log_ndtr = _special(xp)
    t, w = np.polynomial.hermite_e.hermegauss(_NODES)
    t = xp.asarray(t)
    logw = xp.asarray(np.log(w / np.sqrt(2.0 * np.pi)))
    n, k = mu.shape
    s = xp.maximum(s, np.finfo(np.float64).tiny)
    out = xp.empty((n, k), dtype=np.float64)
    rows = max(1, _BLOCK // (k * _NODES))
    for lo in range(0, n, rows):
        m, sd = mu[lo:lo + rows], s[lo:lo + rows]
        logp = xp.empty(m.shape, dtype=np.float64)
        for c in range(k):
            # draw of class c at each node: mu_c + s_c t, shape (rows, 1, nodes)
            draw = (m[:, c, None] + sd[:, c, None] * t)[:, None, :]
            terms = log_ndtr((draw - m[:, :, None]) / sd[:, :, None])
            terms[:, c, :] = 0.0
            logp[:, c] = _logsumexp(logw + terms.sum(axis=1), 1, xp)
        out[lo:lo + rows] = xp.exp(logp - _logsumexp(logp, 1, xp)[:, None])
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
