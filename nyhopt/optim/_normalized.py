"""Stand-in for ``NystromKRR(normalize_y=True)`` until the estimator has that option.

:class:`NormalizedNystromKRR` is a :class:`~nyhopt.NystromKRR` that fits on
targets standardized column by column, :math:`\\tilde y = (y - \\mu)/\\sigma`
(a constant column only centered), and predicts :math:`\\mu + \\sigma f(x)`:
the model the paper fits after tuning on standardized labels.
"""
from __future__ import annotations

import numpy as np

from ..backend import get_namespace
from ..estimator import NystromKRR

__all__ = ["NormalizedNystromKRR"]


class NormalizedNystromKRR(NystromKRR):
    """:class:`~nyhopt.NystromKRR` with standardized targets (``normalize_y``).

    Parameters
    ----------
    kernel, penalty, centers, solver, maxiter, tol, random_state
        As for :class:`~nyhopt.NystromKRR`.
    normalize_y : bool, default True
        Standardize each target column with its training mean and standard
        deviation before solving; predictions are mapped back.

    Attributes
    ----------
    y_mean_, y_scale_ : numpy.ndarray of shape (p,)
        The statistics (0 and 1 when ``normalize_y`` is False).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(200, 1)); y = 100 + np.sin(3 * X[:, 0])
    >>> m = NormalizedNystromKRR(penalty=1e-6, centers=20, random_state=0, solver="direct").fit(X, y)
    >>> bool(abs(m.predict(X[:1])[0] - y[0]) < 1e-2), m.y_mean_.shape
    (True, (1,))
    """

    def __init__(self, kernel=None, penalty=1e-6, centers=100, solver="falkon", maxiter=100, tol=1e-7,
                 random_state=None, normalize_y=True):
        super().__init__(kernel=kernel, penalty=penalty, centers=centers, solver=solver, maxiter=maxiter,
                         tol=tol, random_state=random_state)
        self.normalize_y = normalize_y

    def fit(self, X, y):
        """Fit on standardized targets; see :meth:`nyhopt.NystromKRR.fit`."""
        xp = get_namespace(X, y)
        Y = xp.asarray(y)
        was_1d = Y.ndim == 1
        Y2 = Y.reshape(Y.shape[0], -1).astype(xp.float64)
        p = Y2.shape[1]
        if self.normalize_y:
            mean = np.asarray(Y2.mean(axis=0).tolist(), dtype=np.float64)
            scale = np.asarray(Y2.std(axis=0).tolist(), dtype=np.float64)
            scale = np.where(scale > 0, scale, 1.0)
        else:
            mean, scale = np.zeros(p), np.ones(p)
        Ys = (Y2 - xp.asarray(mean)) / xp.asarray(scale)
        super().fit(X, Ys[:, 0] if was_1d else Ys)
        self.y_mean_, self.y_scale_ = mean, scale
        return self

    def predict(self, X):
        """Predictions in the targets' units: :math:`\\mu + \\sigma k(X, Z)\\alpha`."""
        f = super().predict(X)
        xp = get_namespace(f)
        if f.ndim == 1:
            return f * float(self.y_scale_[0]) + float(self.y_mean_[0])
        return f * xp.asarray(self.y_scale_) + xp.asarray(self.y_mean_)
