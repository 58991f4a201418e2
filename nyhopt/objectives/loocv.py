"""Exact leave-one-out cross-validation (``"loocv"``).

Definition (MATH.md, objective 2).  For a linear smoother the leave-one-out
residual of row :math:`i` is :math:`R_i/(1-h_i)` with :math:`R = (I-H)Y`
and the leverages :math:`h = \\mathrm{diag}(H)`:

.. math::
    \\mathcal{L}_{\\rm LOOCV} = \\frac{1}{np}\\sum_{i=1}^n
        \\frac{\\|R_{i\\cdot}\\|^2}{(1-h_i)^2}.

The leverages come from :math:`V = C^{-1}A` (m x n, one more triangular
solve): :math:`H = A^TM^{-1}A = V^TV`, so :math:`h_i = \\|V_{\\cdot i}\\|^2`
(and :math:`0 \\le h_i < 1` because :math:`n\\lambda > 0`).

Named terms: ``data_fit`` = :math:`\\|R\\|_F^2/(np)` and ``leverage`` =
:math:`\\frac{1}{np}\\sum_i \\|R_i\\|^2\\,h_i(2-h_i)/(1-h_i)^2`.

Gradient.  With :math:`w_i = (1-h_i)^{-2}`, :math:`u_i = \\|R_i\\|^2(1-h_i)^{-3}`
and :math:`c = 1/(np)`,

.. math::
    d\\mathcal{L} = -2c\\,\\mathrm{Tr}\\big((wR)^T dH\\,Y\\big)
                 + 2c\\,\\mathrm{Tr}(U\\,dH),\\qquad U = \\mathrm{diag}(u).

The first term is the quadratic form of :mod:`nyhopt.objectives.gcv` with
:math:`P = \\mathrm{diag}(w)R`.  For the second, with
:math:`\\Phi = B^{-1}K^TUKB^{-1}`,

.. math::
    \\mathrm{Tr}(U\\,dH) = 2\\langle UKB^{-1} - K\\Phi, dK\\rangle
        - n\\lambda\\langle\\Phi, d\\tilde K\\rangle
        - n\\,\\mathrm{Tr}(\\Phi\\tilde K)\\,d\\lambda ,

and in factored form, with :math:`\\Psi = VUV^T`, :math:`X_1 = C^{-1}L^{-1}` and
:math:`\\Psi_w = C^{-T}\\Psi C^{-1}`:
:math:`UKB^{-1} = U V^T X_1`, :math:`K\\Phi = A^T\\Psi_wL^{-1}`,
:math:`\\Phi = L^{-T}\\Psi_wL^{-1}` (the whitened frame of
:class:`~nyhopt.objectives._exact.CotangentBuilder`), :math:`\\mathrm{Tr}(\\Phi\\tilde K) =
\\mathrm{Tr}\\,\\Psi_w`.  Cost: three more ``n x m x m`` products than
:mod:`nyhopt.objectives.prop` (:math:`V`, :math:`\\Psi`, :math:`UV^TX_1`).

Constant mean (``mean="constant"``, not the default: in the quality table of
``docs/experiments.md``, "A constant mean: with and without", it was 4.6%
worse on svmguide1).  The leave-one-out error of the smoother
with intercept :math:`H_c = H + vv^T/\\gamma`: residuals :math:`R_c =
(I-H)\\tilde Y` and leverages :math:`h_c = h + v\\odot v/\\gamma`.  The
gradient adds, to the two terms above (with :math:`u`, :math:`w` from
:math:`h_c`, :math:`R_c`), :math:`\\mathrm{Tr}(G^TdR_c)` with
:math:`G = 2c\\,\\mathrm{diag}(w)R_c` through :math:`dc^* = -1^TdH\\,\\tilde Y/\\gamma`,
and :math:`2c\\sum_iu_i\\,d(v_i^2/\\gamma) = \\mathrm{Tr}(P_1^TdH\\,1)`,
:math:`P_1 = 2c\\,[-2(u\\odot v)/\\gamma + (u^T(v\\odot v)/\\gamma^2)1]`
(:mod:`nyhopt.objectives._mean`; :math:`A(u\\odot v)` is one more column of
the pass that forms :math:`A\\,\\mathrm{diag}(w)R_c`).
"""
from __future__ import annotations

from ._base import Evaluation, Objective
from ._exact import CotangentBuilder, gram, solve_lower_copy, sym, tri_solve
from ._workspace import workspace_of
from ._wide import column_sumsq, wide_times_thin
from ._mean import MeanChain, factor_and_fit

__all__ = ["LOOCV"]


class LOOCV(Objective):
    """Exact leave-one-out cross-validation error.

    Parameters
    ----------
    X : array of shape (n, d)
    y : array of shape (n,) or (n, p)
    kernel : str or Kernel, default "gaussian"
    noise_variance : float, default 1.0
        Accepted for a uniform interface (LOOCV does not use it).
    random_state : None
        Accepted for a uniform interface.

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 2)); y = np.sin(X[:, 0])
    >>> obj = nh.make_objective("loocv", X, y)
    >>> params = nh.Params.from_natural(1e-3, 1.0, X[:10])
    >>> sorted(obj.terms(params))
    ['data_fit', 'leverage']
    """

    name = "loocv"

    def _evaluate(self, ctx):
        xp, n, p = self.xp, self.n, self.p
        f64 = xp.float64
        # the fit beside the m x m matrices of the gradient, on the two workers
        fac, f, mf = factor_and_fit(self, ctx, ("F",) if ctx.need_grad else ())
        R = f.R if mf is None else mf.R
        At = fac.At
        ws = workspace_of(self, xp)
        V = None if ws is None else ws.empty("V", At.T.shape, At.dtype)
        Vt = solve_lower_copy(fac.C, At.T, xp, out=V).T  # (n, m): V^T, V = C^{-1} A
        del V
        h = column_sumsq(Vt.T, xp).astype(f64)  # leverages ||V_i||^2
        if mf is not None:  # diag(H_c) = diag(H) + v^2 / gamma
            v64 = mf.v.astype(f64)
            h = h + v64 * v64 / mf.gamma
            self.last_intercept = mf.c
        one_minus_h = 1.0 - h
        r2 = xp.einsum("ij,ij->i", R, R).astype(f64)
        c = 1.0 / (n * p)
        terms = {
            "data_fit": f.rss * c,
            "leverage": float(xp.sum(r2 * (h * (2.0 - h)) / one_minus_h**2)) * c,
        }
        if not ctx.need_grad:
            return Evaluation(terms)
        w = 1.0 / one_minus_h**2
        u = r2 / one_minus_h**3
        if mf is None:
            b = CotangentBuilder(fac, self.Y, f, xp)
            b.add_hat_quadratic(R * w[:, None].astype(R.dtype), -2.0 * c)
        else:  # Tr(G^T dR_c) with G = 2c w R_c, and sum_i 2c u_i d(v_i^2 / gamma)
            b = CotangentBuilder(fac, mf.Y, f, xp)
            wR = R * w[:, None].astype(R.dtype)
            uv = (u * v64).astype(R.dtype)
            AG = wide_times_thin(At.T, xp.concatenate([wR, uv[:, None]], axis=1), xp)
            chain = MeanChain(mf, fac, xp)
            chain.add_residual(wR, 2.0 * c, AG[:, :p])
            chain.add_leverage(u, 2.0 * c, AG[:, p])
            chain.flush(b)
        # 2c Tr(U dH)
        Psi = gram(Vt.T, xp, weights=u)  # V diag(u) V^T
        Psi_w = sym(tri_solve(fac.C, tri_solve(fac.C, Psi, xp, trans=True).T, xp, trans=True))  # C^-T Psi C^-1
        b.add_whitened((-4.0 * c) * Psi_w, (-2.0 * c * fac.n_lam) * Psi_w)
        b.add_penalty(-2.0 * c * n * float(xp.trace(Psi_w)))
        # G_nm += 4c diag(u) V^T X_1, X_1 = C^{-1} L^{-1}: formed block by block with the rest of G_nm
        b.add_product(Vt, (4.0 * c) * fac.mm.get("F"), u)
        return Evaluation(terms, b.cotangents(self.X))
