"""Exact N-KRR quantities and their cotangents, shared by the exact objectives.

Notation (``docs/objectives.md`` has the full derivations).  With ``n`` rows,
:math:`K = K_{nm}`, :math:`\\tilde K = K_{mm} + \\epsilon I = L L^T`:

.. math::
    A = L^{-1} K^T\\ (m\\times n),\\quad S = A A^T,\\quad
    M = S + n\\lambda I = C C^T,\\quad
    B = K^T K + n\\lambda\\tilde K = L M L^T,

    \\beta = M^{-1} A Y,\\quad \\alpha = B^{-1} K^T Y = L^{-T}\\beta,\\quad
    H = K B^{-1} K^T = A^T M^{-1} A,\\quad R = Y - HY = Y - A^T\\beta .

Every cotangent on :math:`K` produced here has the form
:math:`G_{nm} = A^T W + \\sum_k P_k Q_k^T` with :math:`W` (m x m) and thin
:math:`P_k` (n x p): because :math:`K = A^T L^T`, a product :math:`K V`
is :math:`A^T (L^T V)`.  :class:`CotangentBuilder` accumulates :math:`W`,
the thin pairs, :math:`G_{mm}` and :math:`g_\\lambda`; the dense parts as
:math:`W = \\tilde W L^{-1}`, :math:`G_{mm} = L^{-T}\\tilde G L^{-1}` with
:math:`L^{-1}` applied once (:meth:`nyhopt.objectives._mm.SmallAlgebra.unwhiten`).
On the CPU it hands :math:`G_{nm}` to the kernel adjoint in this factored form
(:func:`nyhopt.ops.adjoint_factored`), which forms and contracts it one
block of rows at a time, so it is never stored; on the GPU it is formed
with a single ``n x m x m`` product.

Cost: one ``n x m`` kernel matrix, one triangular solve for :math:`A`
(:math:`n m^2` flops), one Gram product :math:`S` (:math:`n m^2`, a
symmetric rank-k update), one product :math:`A^T W` for the gradient
(:math:`2 n m^2`); everything else is :math:`O(m^3 + n m (p + d))`
(``docs/performance-ops.md`` has the account per objective).  Memory: for
a value, :math:`K^T` is overwritten by :math:`A`; for a gradient with the
Gaussian kernel :math:`K^T` is kept (:attr:`Factors.KT`, read by the
adjoint instead of evaluating the kernel again), so two ``n x m`` arrays
exist (:math:`A` and :math:`K^T`; on the GPU :math:`A` and :math:`G_{nm}`).
On the CPU they are the previous evaluation's when free
(:mod:`nyhopt.objectives._workspace`), and one kernel pass writes both
:math:`K^T` and the copy that the triangular solve turns into :math:`A`.

Precision: ``n x m`` arrays keep the data dtype; everything ``m x m``
(:math:`L`, :math:`S`, :math:`C`, :math:`W`, :math:`G_{mm}`) and all
reductions are float64.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..backend._blas import gemm_update, potrf, trsm
from ..backend._config import block_rows
from ..backend._parallel import active_workers, map_chunks, map_ranges, min_rows, pool_phase
from ..backend import is_cupy_namespace
from ..errors import IllConditionedError
from ..ops import kernel_matrix
from ..solvers._linalg import NOT_PD_HINT, device_cholesky
from ._base import Cotangents, KernelCotangent, jitter
from ._mm import SmallAlgebra
from ._wide import gram, solve_lower_copy, solve_lower_inplace, wide_t_times_thin, wide_times_thin

__all__ = [
    "Factors",
    "factorize",
    "Fit",
    "fit",
    "CotangentBuilder",
    "tri_solve",
    "cho_solve",
    "trace_hat",
    "trace_nystrom",
    "trace_knn",
    "logdet_M",
    "kmm_factor",
    "solve_lower_inplace",
    "solve_lower_copy",
    "kernel_reused",
    "gram",
    "sym",
]


# -- small linear algebra (NumPy's own BLAS on the CPU, see nyhopt.backend._blas; cupyx on the GPU) ---
def cholesky(a, xp, what="K_mm + jitter*I"):
    """Lower Cholesky factor of the symmetric positive definite ``a``."""
    try:
        if is_cupy_namespace(xp):
            L = device_cholesky(a, xp)
            if L is None:
                raise np.linalg.LinAlgError("a non-positive or non-finite pivot")
            return L
        return potrf(a, lower=True)
    except np.linalg.LinAlgError as exc:
        raise IllConditionedError(f"{what} is not numerically positive definite ({NOT_PD_HINT}): {exc}") from exc


def tri_solve(L, b, xp, trans=False, overwrite=False):
    """``L^{-1} b`` (or ``L^{-T} b`` when ``trans``) for lower-triangular ``L``."""
    if is_cupy_namespace(xp):
        import cupyx.scipy.linalg as sla  # needs the CUDA libraries: only on GPU paths

        return sla.solve_triangular(L, b, trans=1 if trans else 0, lower=True, overwrite_b=overwrite)
    return trsm(L, b, lower=True, trans=trans, overwrite_b=overwrite)


def cho_solve(C, b, xp):
    """``(C C^T)^{-1} b`` from the lower Cholesky factor ``C``."""
    return tri_solve(C, tri_solve(C, b, xp), xp, trans=True)


def add_outer(G, P, Q, xp):
    """``G += P @ Q.T`` in place (``G`` (n, m), ``P`` (n, r), ``Q`` (m, r)).

    On the CPU this is one BLAS ``gemm`` with ``beta = 1`` writing into ``G``
    (no ``n x m`` temporary, :func:`nyhopt.backend._blas.gemm_update`).
    """
    if is_cupy_namespace(xp):
        G += P @ Q.T.astype(G.dtype)
        return G
    return gemm_update(G, P, Q)


def sym(a):
    """Symmetric part ``(a + a^T) / 2``."""
    return 0.5 * (a + a.T)


def _sumsq(a, xp):
    """``sum(a**2)`` accumulated in float64 (a Python float)."""
    a64 = a if a.dtype == xp.float64 else a.astype(xp.float64)
    return float(xp.vdot(a64.ravel(), a64.ravel()).real) if a64.flags.c_contiguous else float((a64 * a64).sum())


# -- the factorization -------------------------------------------------------------------------
class Factors(NamedTuple):
    """Stable factorization of the N-KRR system for one row set.

    Attributes
    ----------
    At : array (n, m), data dtype
        :math:`A^T = K L^{-T}` (the transposed view of the C-contiguous ``A``).
    L : array (m, m), float64
        Lower Cholesky factor of :math:`K_{mm} + \\epsilon I`.
    S : array (m, m), float64
        :math:`A A^T = L^{-1} K^T K L^{-T}`.
    C : array (m, m), float64
        Lower Cholesky factor of :math:`M = S + n\\lambda I`.
    n_lam : float
        :math:`n \\lambda` with ``n`` the number of rows.
    n : int
    KT : array (m, n) or None
        The kernel matrix :math:`K^T = k(Z, X)` when :func:`factorize` was
        asked to keep it (the Gaussian kernel's adjoint reads it instead of
        evaluating the kernel again); None otherwise.
    mm : SmallAlgebra
        The ``m x m`` matrices built from :math:`M^{-1}`, computed on first use
        and shared by the value and the gradient (:mod:`nyhopt.objectives._mm`).
    targets, AY : arrays (n, p), (m, p) float64, or None
        The ``targets`` given to :func:`factorize` and :math:`A\\,\\mathrm{targets}`,
        computed by the Gram product (:func:`fit` of these targets reads it).
    """

    At: object
    L: object
    S: object
    C: object
    n_lam: float
    n: int
    KT: object = None
    mm: object = None
    targets: object = None
    AY: object = None


def kmm_factor(kernel, Z, xp):
    """``L = chol(k(Z, Z) + eps I)`` in float64 (``eps`` from the dtype of ``Z``)."""
    Kmm = kernel_matrix(kernel, Z).astype(xp.float64)
    idx = xp.arange(Kmm.shape[0])
    Kmm[idx, idx] += jitter(Z.dtype)
    return cholesky(Kmm, xp)


def kernel_reused(kernel, xp) -> bool:
    """Whether the gradient of ``kernel`` reads a kept :math:`K^T` (:attr:`Factors.KT`).

    True for the Gaussian kernel on the CPU (Numba adjoints), whose
    :math:`\\varphi' = -\\varphi/2` is read from the kernel matrix; the
    other kernels evaluate :math:`\\varphi'` anyway, and the GPU path forms
    the dense cotangent.
    """
    from .. import ops

    return (not is_cupy_namespace(xp) and getattr(kernel, "kind", None) == "gaussian"
            and ops.CPU_IMPL["adjoint_dense"] == "numba")


def _kernel_and_factor(kernel, X, Z, xp, L, out, copy):
    """:math:`K^T = k(Z, X)` into ``out`` (and ``copy``), and ``L`` (:func:`kmm_factor`) when None.

    On two or more workers (a pool phase, CPU) the factor of :math:`K_{mm}` is
    computed by the calling thread beside its share of the kernel rows, which
    is smaller by about the factor's cost; otherwise one after the other.
    The values are those of the separate calls.
    """
    m, n = Z.shape[0], X.shape[0]
    if L is not None or is_cupy_namespace(xp) or out is None or active_workers() < 2 or m < 16:
        L = kmm_factor(kernel, Z, xp) if L is None else L
        return kernel_matrix(kernel, Z, X, out=out, copy=copy), L
    # rows of the worker: half, plus the rows whose kernel values cost about what the factor does
    # (a factor of K_mm ~ m^2 (d + m/3) flops at a quarter of the kernel's rate per entry, ~ n (d + 25))
    d = X.shape[1]
    extra = int(4 * m * m * (d + m / 3.0) / max(n * (3 * d + 25), 1))
    split = min(m - 4, m // 2 + max(extra, 0) // 2)

    def part(c):
        with pool_phase(1):  # one thread each: the other is busy
            if c == 0:
                kernel_matrix(kernel, Z[:split], X, out=out[:split], copy=None if copy is None else copy[:split])
                return None
            f = kmm_factor(kernel, Z, xp)
            kernel_matrix(kernel, Z[split:], X, out=out[split:], copy=None if copy is None else copy[split:])
            return f

    return out, map_chunks(part, 2)[1]


def factorize(kernel, X, Z, penalty, xp, L=None, keep_kernel=False, workspace=None, targets=None):
    """Factorize :math:`B = K^T K + n\\lambda(K_{mm} + \\epsilon I)` for the rows ``X``.

    Parameters
    ----------
    kernel : Kernel
    X : array (n, d)
    Z : array (m, d), dtype of ``X``
    penalty : float
    xp : module
    L : array (m, m), optional
        Cholesky factor of :math:`K_{mm} + \\epsilon I` if already known.
    keep_kernel : bool, default False
        Keep :math:`K^T = k(Z, X)` in :attr:`Factors.KT` when the gradient
        reads it (:func:`kernel_reused`): one more ``n x m`` array, one
        kernel evaluation fewer.  Pass the evaluation's ``need_grad``.
    workspace : Workspace, optional
        Where the ``n x m`` arrays (:math:`K^T`, :math:`A`) come from on the
        CPU (:mod:`nyhopt.objectives._workspace`): the arrays of the previous
        evaluation when free, so their pages are not mapped again.
    targets : array (n, p), optional
        Targets that :func:`fit` will be given.  On the CPU they are stored
        below :math:`A` (as :math:`Y^T`, p more rows) so that the Gram
        product gives :math:`AY` too: no separate pass over :math:`A`.

    Returns
    -------
    Factors
    """
    n = X.shape[0]
    keep = keep_kernel and kernel_reused(kernel, xp)
    m = Z.shape[0]
    cpu = not is_cupy_namespace(xp)
    ws = workspace if cpu else None
    p = targets.shape[1] if (targets is not None and cpu and targets.ndim == 2) else 0

    def rows():  # (m + p, n): A, then Y^T
        return np.empty((m + p, n), dtype=X.dtype) if ws is None else ws.empty("A", (m + p, n), X.dtype)

    # K^T = k(Z, X) (m, n), C-contiguous and ours
    if keep and ws is not None:  # the kernel loop also writes the copy that becomes A: K^T is not read back
        buf = rows()
        KT, L = _kernel_and_factor(kernel, X, Z, xp, L, ws.empty("KT", (m, n), X.dtype), buf[:m])
        A = solve_lower_inplace(L, buf[:m], xp)
    elif keep:
        KT, L = _kernel_and_factor(kernel, X, Z, xp, L, np.empty((m, n), dtype=X.dtype) if cpu else None, None)
        buf = rows() if cpu else None
        A = solve_lower_copy(L, KT, xp, out=None if buf is None else buf[:m])
    else:  # overwritten by A = L^{-1} K^T
        buf = rows() if cpu else None
        KT, L = _kernel_and_factor(kernel, X, Z, xp, L, None if buf is None else buf[:m], None)
        A, KT = solve_lower_inplace(L, KT, xp), None
    AY = None
    if p and buf is not None and np.shares_memory(A, buf):
        buf[m:] = targets.T
        G = gram(buf, xp)
        S, AY = np.ascontiguousarray(G[:m, :m]), np.ascontiguousarray(G[:m, m:])
    else:
        S = gram(A, xp)
    n_lam = float(n * penalty)
    M = S.copy()
    idx = xp.arange(M.shape[0])
    M[idx, idx] += n_lam
    C = cholesky(M, xp, what="A A^T + n*lam*I")
    return Factors(A.T, L, S, C, n_lam, n, KT, SmallAlgebra(L, C, S, xp), None if AY is None else targets, AY)


class Fit(NamedTuple):
    """Fitted N-KRR quantities for targets ``Y`` (n, p).

    Attributes
    ----------
    AY : (m, p) float64, :math:`A Y`
    beta : (m, p) float64, :math:`M^{-1} A Y`
    alpha : (m, p) float64, :math:`L^{-T}\\beta` (the N-KRR coefficients)
    R : (n, p) data dtype, :math:`Y - A^T\\beta`
    rss : float, :math:`\\|R\\|_F^2`
    fit : float, :math:`F = \\|R\\|_F^2 + n\\lambda\\|\\beta\\|_F^2 = \\mathrm{Tr}\\,Y^T(I-H)Y`
    """

    AY: object
    beta: object
    alpha: object
    R: object
    rss: float
    fit: float


def fit(fac: Factors, Y, xp) -> Fit:
    """Coefficients and residuals of N-KRR on the factorized rows."""
    At = fac.At
    AY = fac.AY if (fac.targets is Y and fac.AY is not None) else wide_times_thin(At.T, Y, xp)
    beta = cho_solve(fac.C, AY, xp)
    alpha = tri_solve(fac.L, beta, xp, trans=True)
    R = wide_t_times_thin(At.T, beta, xp, Y=Y, sign=-1.0)
    rss = _sumsq(R, xp)
    return Fit(AY, beta, alpha, R, rss, rss + fac.n_lam * _sumsq(beta, xp))


def trace_hat(fac: Factors, xp) -> float:
    """:math:`D = \\mathrm{Tr}\\,H = \\mathrm{Tr}(M^{-1}S) = \\sum_{ij} (M^{-1})_{ij} S_{ij}`.

    :math:`M^{-1}` is kept in ``fac.mm``.  Not :math:`m - n\\lambda\\,\\mathrm{Tr}\\,M^{-1}`,
    which loses its relative accuracy when :math:`n\\lambda` dominates :math:`S`.
    """
    return float(xp.sum(fac.mm.get("Minv") * fac.S))


def trace_nystrom(fac: Factors, xp) -> float:
    """:math:`\\mathrm{Tr}(K \\tilde K^{-1} K^T) = \\mathrm{Tr}\\,S = \\|A\\|_F^2`."""
    return float(xp.trace(fac.S))


def trace_knn(kernel, X, xp) -> float:
    """:math:`\\mathrm{Tr}\\,K_{nn} = \\sum_i k(x_i, x_i)`.

    For the stationary kernels of nyhopt :math:`k(x, x) = \\varphi(0) = 1`
    does not depend on the hyperparameters, so this term has no gradient.
    """
    return float(xp.sum(kernel.diag(X), dtype=xp.float64))


def logdet_M(fac: Factors, xp) -> float:
    """:math:`\\log\\det M = 2\\sum_i \\log C_{ii}`."""
    return 2.0 * float(xp.sum(xp.log(xp.diagonal(fac.C))))


# -- cotangents -----------------------------------------------------------------------------------
class CotangentBuilder:
    """Accumulates :math:`G_{nm} = A^T W + \\sum_k P_k Q_k^T`, :math:`G_{mm}` and :math:`g_\\lambda`.

    Each ``add_*`` method adds ``coef`` times the differential of one exact
    quantity (see the module notes and ``docs/objectives.md``).  Rank-``p``
    parts of :math:`W` are kept as factors, so an objective whose :math:`W`
    is low rank (hold-out) never forms an ``n x m`` cotangent.

    Parameters
    ----------
    fac : Factors
    Y : array (n, p)
        Targets of the factorized rows (data dtype).
    fit : Fit
        :func:`fit` of ``Y``.
    xp : module
    """

    def __init__(self, fac: Factors, Y, fit: Fit, xp):
        self.fac, self.Y, self.fit, self.xp = fac, Y, fit, xp
        m = fac.L.shape[0]
        self.W = None  # dense part of W (m, m) float64, or None
        self.Wt = self.Gt = None  # whitened parts (m, m) or None: W += Wt L^{-1}, Gmm += L^{-T} Gt L^{-1}
        self.W_thin = []  # (U (m, r), V (m, r)): W += U V^T
        self.Gmm = xp.zeros((m, m), dtype=xp.float64)
        self.glam = 0.0
        self.glog = 0.0  # d / d log(lam), see Cotangents.log_penalty
        self.thin = []  # (P (n, r) data dtype, Q (m, r) float64): G_nm += P Q^T
        self.products = []  # (B (n, r) data dtype, u (n,) or None, V (r, m) float64): G_nm += diag(u) B V

    def add_whitened(self, W=None, G=None):
        """Add :math:`G_{nm} \\mathrel{+}= A^T W L^{-1}` and :math:`G_{mm} \\mathrel{+}= L^{-T} G L^{-1}`.

        ``W``, ``G``: new (m, m) float64 arrays (kept, and added to in place),
        scalars (that multiple of the identity) or None.  They are summed
        here; :math:`L^{-1}` is applied once to the sums when the cotangents
        are formed.
        """
        self.Wt, self.Gt = self._plus(self.Wt, W), self._plus(self.Gt, G)

    def _plus(self, acc, a):
        """``acc + a``, in place in ``acc`` unless None; a scalar ``a`` is ``a I``."""
        if a is None:
            return acc
        if getattr(a, "ndim", 0) == 0:
            if acc is None:
                acc = self.xp.zeros_like(self.Gmm)
            idx = self.xp.arange(acc.shape[0])
            acc[idx, idx] += a
            return acc
        if acc is None:
            return a
        acc += a
        return acc

    def _unwhiten(self):
        """Fold the whitened parts into :attr:`W` and :attr:`Gmm` (:meth:`SmallAlgebra.unwhiten`)."""
        if self.Wt is None and self.Gt is None:
            return
        W, G = self.fac.mm.unwhiten(self.Wt, self.Gt)
        self.Wt = self.Gt = None
        if W is not None:
            self.W = W if self.W is None else self.W + W
        if G is not None:
            self.Gmm += G

    def add_product(self, B, V, u=None):
        """Add :math:`G_{nm} \\mathrel{+}= \\mathrm{diag}(u) B V` for ``B`` (n, r), ``V`` (r, m).

        ``B`` is in the data dtype (a transposed view is fine) and is kept,
        not copied, until the gradient is formed; ``u`` (n,) scales the rows
        (None: no scaling).
        """
        self.products.append((B, u, V))

    def add_alpha_vjp(self, Vw, coef=1.0):
        """Add ``coef * <V, d alpha>`` given the *whitened* ``Vw = L^{-1} V`` (m, p).

        With :math:`t = M^{-1} V_w` and :math:`q = L^{-T} t = B^{-1} V`:
        :math:`G_{nm} \\mathrel{+}= Y q^T - A^T(\\beta q^T + t\\alpha^T)`,
        :math:`G_{mm} \\mathrel{-}= n\\lambda\\,\\mathrm{sym}(q\\alpha^T)`,
        :math:`g_\\lambda \\mathrel{-}= n\\,\\mathrm{Tr}(t^T\\beta)`  (all times ``coef``).
        """
        fac, xp, f = self.fac, self.xp, self.fit
        t = cho_solve(fac.C, Vw, xp)
        q = tri_solve(fac.L, t, xp, trans=True)
        self.thin.append((self.Y, coef * q))
        self.W_thin.append((f.beta, -coef * q))
        self.W_thin.append((t, -coef * f.alpha))
        self.Gmm -= coef * fac.n_lam * sym(q @ f.alpha.T)
        self.glam -= coef * fac.n * float(xp.sum(t * f.beta))

    def add_hat_quadratic(self, Pl, coef=1.0, APl=None):
        """Add ``coef * Tr(Pl^T dH Y)`` for a fixed ``Pl`` (n, p).

        :math:`dH\\,Y = dK\\,\\alpha + K\\,d\\alpha`, so this is the direct term
        :math:`G_{nm} \\mathrel{+}= P_l\\alpha^T` plus the alpha-VJP with
        :math:`V_w = L^{-1}K^T P_l = A P_l` (pass ``APl`` when it is known).
        """
        self.thin.append((Pl, coef * self.fit.alpha))
        if APl is None:
            APl = wide_times_thin(self.fac.At.T, Pl, self.xp)
        self.add_alpha_vjp(APl, coef)

    def add_fit(self, coef=1.0):
        """Add ``coef * dF`` for the penalized fit :math:`F = \\mathrm{Tr}\\,Y^T(I-H)Y`.

        :math:`G_{nm} = -2R\\alpha^T = -2Y\\alpha^T + 2A^T\\beta\\alpha^T`,
        :math:`G_{mm} = n\\lambda\\alpha\\alpha^T`, :math:`g_\\lambda = n\\|\\beta\\|_F^2`.
        """
        fac, xp, f = self.fac, self.xp, self.fit
        self.thin.append((self.Y, -2.0 * coef * f.alpha))
        self.W_thin.append((f.beta, 2.0 * coef * f.alpha))
        self.Gmm += coef * fac.n_lam * (f.alpha @ f.alpha.T)
        self.glam += coef * fac.n * float(xp.sum(f.beta * f.beta))

    def add_rss(self, coef=1.0):
        """Add ``coef * d||R||^2`` (:math:`d\\|R\\|^2 = -2\\,\\mathrm{Tr}(R^T dH\\,Y)`)."""
        # A R = A Y - S beta = n lam beta (from M beta = A Y): no pass over A.
        self.add_hat_quadratic(self.fit.R, -2.0 * coef, APl=self.fac.n_lam * self.fit.beta)

    def add_trace_hat(self, coef=1.0):
        """Add ``coef * dD`` for :math:`D = \\mathrm{Tr}\\,H`.

        :math:`G_{nm} = 2n\\lambda A^T M^{-2} L^{-1}`,
        :math:`G_{mm} = -n\\lambda L^{-T} M^{-1} S M^{-1} L^{-1}`,
        :math:`g_\\lambda = -n\\,\\mathrm{Tr}(M^{-1} S M^{-1})`.
        """
        fac, xp, mm = self.fac, self.xp, self.fac.mm
        mm.prefetch("M2", "MSM")
        MSM = mm.get("MSM")
        self.add_whitened((2.0 * coef * fac.n_lam) * mm.get("M2"), -(coef * fac.n_lam) * MSM)
        self.glam -= coef * fac.n * float(xp.trace(MSM))

    def add_trace_nystrom(self, coef=1.0):
        """Add ``coef * dQ`` for :math:`Q = \\mathrm{Tr}(K\\tilde K^{-1}K^T) = \\mathrm{Tr}\\,S`.

        :math:`G_{nm} = 2A^T L^{-1}`, :math:`G_{mm} = -L^{-T} S L^{-1}`, :math:`g_\\lambda = 0`.
        """
        self.add_whitened(2.0 * coef, -coef * self.fac.S)

    def add_logdet_M(self, coef=1.0):
        """Add ``coef * d log det M`` (:math:`\\log\\det M = \\log\\det B - \\log\\det\\tilde K`).

        :math:`G_{nm} = 2A^T M^{-1} L^{-1}`,
        :math:`G_{mm} = L^{-T}(n\\lambda M^{-1} - I)L^{-1}`,
        :math:`g_\\lambda = n\\,\\mathrm{Tr}\\,M^{-1}`.
        """
        fac, xp = self.fac, self.xp
        Minv = fac.mm.get("Minv")
        self.add_whitened((2.0 * coef) * Minv, (coef * fac.n_lam) * Minv)
        self.add_whitened(G=-coef)
        self.glam += coef * fac.n * float(xp.trace(Minv))

    def add_penalty(self, g):
        """Add a direct partial derivative with respect to :math:`\\lambda`."""
        self.glam += float(g)

    def add_log_penalty(self, g):
        """Add a direct partial derivative with respect to :math:`\\log\\lambda`.

        For a term :math:`t \\propto \\lambda^{-1}` add :math:`-t`: its
        :math:`g_\\lambda = -t/\\lambda` overflows when :math:`\\lambda` is tiny.
        """
        self.glog += float(g)

    def dense_W(self):
        """:math:`W` with its whitened and thin parts folded in (m, m) float64, or None when zero."""
        self._unwhiten()
        W = self.W
        for U, V in self.W_thin:
            W = U @ V.T if W is None else W + U @ V.T
        return W

    @staticmethod
    def _merged(pairs):
        """``pairs`` with the ``Q`` of a repeated ``P`` (the same array) summed: fewer thin columns."""
        out = {}
        for P, Q in pairs:
            out[id(P)] = (P, out[id(P)][1] + Q) if id(P) in out else (P, Q)
        return list(out.values())

    def _thin_pair(self, dtype):
        xp = self.xp
        if not self.thin:
            return None, None
        thin = self._merged(self.thin)
        P = xp.concatenate([xp.asarray(P, dtype=dtype) for P, _ in thin], axis=1)
        Q = xp.concatenate([xp.asarray(Q, dtype=dtype) for _, Q in thin], axis=1)
        return P, Q

    def _products(self, dtype):
        """``(B, u, V)`` of the products, ``V`` and ``u`` in ``dtype``."""
        return [(B, None if u is None else u.astype(dtype, copy=False), V.astype(dtype, copy=False))
                for B, u, V in self.products]

    def cotangent_nm(self, X):
        """The :class:`KernelCotangent` of :math:`K = k(X, Z)` for these rows.

        Dense (one ``n x m x m`` product) when :math:`W` has a dense part,
        otherwise low rank :math:`[P_k \\mid A^T U_j][Q_k \\mid V_j]^T`.
        """
        xp, At = self.xp, self.fac.At
        self._unwhiten()
        if self.W is None and not self.products:
            thin, wthin = self._merged(self.thin), self._merged(self.W_thin)
            Ps, Qs = [P for P, _ in thin], [Q for _, Q in thin]
            if wthin:  # one pass over A for all of them
                Ps.append(wide_t_times_thin(At.T, xp.concatenate([U for U, _ in wthin], axis=1), xp))
                Qs.append(xp.concatenate([V for _, V in wthin], axis=1))
            P = xp.concatenate([xp.asarray(P, dtype=At.dtype) for P in Ps], axis=1)
            Q = xp.concatenate([xp.asarray(Q, dtype=At.dtype) for Q in Qs], axis=1)
            return KernelCotangent(X, P=P, Q=Q)
        W = self.dense_W()
        Wd = (xp.zeros((At.shape[1], At.shape[1]), dtype=At.dtype) if W is None
              else W.astype(At.dtype, copy=False))
        P, Q = self._thin_pair(At.dtype)
        prods = self._products(At.dtype)
        G = xp.empty((At.shape[0], Wd.shape[1]), dtype=At.dtype)
        step = block_rows(At.shape[0], Wd.shape[1], G.dtype.itemsize, n_temps=max(1, active_workers()))

        def rows(lo, hi):  # row ranges on the worker pool in a pool phase
            xp.matmul(At[lo:hi], Wd, out=G[lo:hi])
            if P is not None:
                add_outer(G[lo:hi], P[lo:hi], Q, xp)
            for B, u, V in prods:  # in row blocks: no further n x m temporary
                for start in range(lo, hi, step):
                    sl = slice(start, min(start + step, hi))
                    part = B[sl] @ V
                    if u is not None:
                        part *= u[sl, None]
                    G[sl] += part

        if is_cupy_namespace(xp):
            rows(0, At.shape[0])
        else:
            map_ranges(rows, At.shape[0], min_rows(Wd.shape[0]))
        return KernelCotangent(X, G=G)

    def cotangent_factored(self, X):
        """:meth:`cotangent_nm` as products, :math:`G_{nm} = A^T W + \\sum P_kQ_k^T + \\ldots`, never formed.

        The kernel adjoint (:func:`nyhopt.ops.adjoint_factored`) forms and
        contracts ``G`` one block of rows at a time, and reads the kernel
        matrix kept by :func:`factorize` (:attr:`Factors.KT`) when there is one.
        """
        self._unwhiten()
        if self.W is None and not self.products:
            kc = self.cotangent_nm(X)  # low rank
            return kc if self.fac.KT is None else kc._replace(KT=self.fac.KT)
        At = self.fac.At
        W = self.dense_W()
        P, Q = self._thin_pair(At.dtype)
        prods = ([] if W is None else [(At, None, W.astype(At.dtype, copy=False))]) + self._products(At.dtype)
        return KernelCotangent(X, P=P, Q=Q, products=tuple(prods), KT=self.fac.KT)

    def cotangents(self, X, extra_nm=()):
        """Finish: a :class:`~nyhopt.objectives._base.Cotangents` for rows ``X``.

        On the CPU the cotangent on :math:`k(X, Z)` is in factored form
        (:meth:`cotangent_factored`); on the GPU it is dense (:meth:`cotangent_nm`).
        """
        self._unwhiten()
        nm_block = self.cotangent_nm(X) if is_cupy_namespace(self.xp) else self.cotangent_factored(X)
        nm = (nm_block,) + tuple(extra_nm)
        return Cotangents(nm=nm, mm=sym(self.Gmm), penalty=self.glam, log_penalty=self.glog)
