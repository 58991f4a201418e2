"""Hold-out validation error (``"holdout"``).

Definition (MATH.md, objective 1).  The rows are split once, at
construction and from ``random_state``, into a training part (:math:`n_t`
rows) and a validation part (:math:`n_v = \\mathrm{round}(f\\,n)` rows,
``val_fraction`` :math:`f = 0.6` by default, the paper's setting).  N-KRR is
trained on the training part with its own size in the penalty,

.. math::
    \\alpha = (K_t^TK_t + n_t\\lambda\\tilde K)^{-1}K_t^TY_t,\\qquad
    \\mathcal{L}_{\\rm HO} = \\frac{1}{n_v p}\\|Y_v - K_v\\alpha\\|_F^2,

with :math:`K_t = k(X_t, Z)`, :math:`K_v = k(X_v, Z)`.  Named term:
``validation_error`` (the value).

Gradient.  With :math:`R_v = Y_v - K_v\\alpha`, :math:`c = 1/(n_vp)`,

.. math::
    d\\mathcal{L} = -2c\\langle R_v\\alpha^T, dK_v\\rangle
                  - 2c\\langle K_v^TR_v, d\\alpha\\rangle .

For a fixed :math:`V` (m x p) and :math:`q = B^{-1}V`, from
:math:`B\\,d\\alpha = dK_t^TY_t - dB\\,\\alpha`,

.. math::
    \\langle V, d\\alpha\\rangle = \\langle R_tq^T - K_tq\\alpha^T, dK_t\\rangle
       - n_t\\lambda\\langle q\\alpha^T, d\\tilde K\\rangle
       - n_t\\,\\mathrm{Tr}(q^T\\tilde K\\alpha)\\,d\\lambda ,

with :math:`R_t = Y_t - K_t\\alpha`.  All cotangents on :math:`K_t` and
:math:`K_v` have rank at most :math:`3p`, so the kernel adjoints run in
low-rank form (no ``n x m`` cotangent).
"""
from __future__ import annotations

import numbers

import numpy as np

from ..ops import kernel_matrix
from ._base import Evaluation, KernelCotangent, Objective
from ._exact import CotangentBuilder, _sumsq, factorize, fit, kernel_reused, tri_solve

__all__ = ["Holdout"]


class Holdout(Objective):
    """Hold-out validation error on a fixed random split.

    Parameters
    ----------
    X : array of shape (n, d)
    y : array of shape (n,) or (n, p)
    kernel : str or Kernel, default "gaussian"
    val_fraction : float in (0, 1), default 0.6
        Fraction of the rows used for validation (rounded; both parts must
        keep at least one row).
    noise_variance : float, default 1.0
        Accepted for a uniform interface (hold-out does not use it).
    random_state : int, numpy.random.Generator or None
        Seed of the split, drawn once here.

    Attributes
    ----------
    train_index, val_index : numpy.ndarray of int
        Sorted row indices of the two parts.
    n_train, n_val : int

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 2)); y = np.sin(X[:, 0])
    >>> obj = nh.make_objective("holdout", X, y, val_fraction=0.4, random_state=0)
    >>> obj.n_train, obj.n_val
    (30, 20)
    """

    name = "holdout"

    def __init__(self, X, y, kernel="gaussian", *, val_fraction=0.6, noise_variance=1.0, random_state=None):
        super().__init__(X, y, kernel, noise_variance=noise_variance, random_state=random_state)
        if isinstance(val_fraction, bool) or not isinstance(val_fraction, numbers.Real):
            raise TypeError(f"val_fraction must be a number in (0, 1), got {val_fraction!r}")
        val_fraction = float(val_fraction)
        if not 0.0 < val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction!r}")
        n_val = int(round(val_fraction * self.n))
        if n_val < 1 or n_val > self.n - 1:
            raise ValueError(
                f"val_fraction={val_fraction} leaves {n_val} validation and {self.n - n_val} training "
                f"rows out of n={self.n}; both parts need at least one row"
            )
        self.val_fraction = val_fraction
        perm = np.random.default_rng(random_state).permutation(self.n)
        self.val_index = np.sort(perm[:n_val])
        self.train_index = np.sort(perm[n_val:])
        self.n_val, self.n_train = n_val, self.n - n_val
        xp = self.xp
        tr, va = xp.asarray(self.train_index), xp.asarray(self.val_index)
        self._Xt, self._Yt = self.X[tr], self.Y[tr]
        self._Xv, self._Yv = self.X[va], self.Y[va]

    def _evaluate(self, ctx):
        xp = self.xp
        fac = factorize(ctx.kernel, self._Xt, ctx.Z, ctx.penalty, xp, keep_kernel=ctx.need_grad)
        f = fit(fac, self._Yt, xp)
        # K_v^T = k(Z, X_v) (m, n_val); computed in that order when the adjoint reads it again
        keep = ctx.need_grad and kernel_reused(ctx.kernel, xp)
        KvT = kernel_matrix(ctx.kernel, ctx.Z, self._Xv) if keep else kernel_matrix(ctx.kernel, self._Xv, ctx.Z).T
        Rv = self._Yv - KvT.T @ f.alpha.astype(KvT.dtype)
        c = 1.0 / (self.n_val * self.p)
        terms = {"validation_error": _sumsq(Rv, xp) * c}
        if not ctx.need_grad:
            return Evaluation(terms)
        b = CotangentBuilder(fac, self._Yt, f, xp)
        b.add_alpha_vjp(tri_solve(fac.L, (KvT @ Rv).astype(xp.float64), xp), -2.0 * c)
        val = KernelCotangent(self._Xv, P=Rv, Q=((-2.0 * c) * f.alpha).astype(Rv.dtype), KT=KvT if keep else None)
        del KvT
        return Evaluation(terms, b.cotangents(self._Xt, extra_nm=(val,)))
