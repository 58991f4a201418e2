r"""Stochastic L_Prop: the proposed objective without :math:`O(n m^2)` work.

The exact objective (:mod:`nyhopt.objectives.prop`) is

.. math::
    \mathcal L = \frac{2}{np}\Big[p\,s^2 D + F\big(1 + T/\kappa\big)\Big],
    \qquad \kappa = n^2\lambda \text{ ("released") or } n\lambda \text{ ("paper")},

with :math:`D = \operatorname{Tr} H`, :math:`H = K_{nm} B^{-1} K_{nm}^T`,
:math:`B = K_{nm}^T K_{nm} + n\lambda K_{mm}`, the penalized data fit
:math:`F = \operatorname{Tr}(Y^T (I - H) Y)` and
:math:`T = \operatorname{Tr}(K_{nn} - K_{nm} K_{mm}^{-1} K_{mn})`.
Here every term is estimated from quantities that cost :math:`O(n m k)`
(``docs/stochastic.md`` has the derivation and the measured accuracy).

Estimator
---------
Let :math:`V` (n x k) be fixed probe vectors with weights :math:`w`
(:mod:`nyhopt.objectives._trace`: Hutchinson by default, Hutch++ as an
option), :math:`W = [V \mid Y]` and :math:`c = n\lambda`.  One multi
right-hand-side Falkon solve gives :math:`a \approx B^{-1} K_{nm}^T W` and
one product :math:`u = K_{nm} a`.  For each column the quadratic form
:math:`w_j^T H w_j` is estimated in *energy form*

.. math:: q_j = 2\, w_j^T u_j - \|u_j\|^2 - c\, a_j^T K_{mm} a_j ,

which equals :math:`w_j^T H w_j` at the exact solution and errs by
:math:`-\|a_j - a_j^\star\|_B^2` otherwise (second order in the solver
error; the *plain* form :math:`w_j^T u_j` of the paper errs to first
order and is available with ``value_form="plain"``).  Then

.. math::
    D \approx \sum_{j \le k} \mathrm w_j q_j, \qquad
    F \approx \sum_c \|y_c - u_c\|^2 + c\, a_c^T K_{mm} a_c
      \;(= \|Y\|^2 - \textstyle\sum_c q_c),

and :math:`T` by row sampling on :math:`q` rows :math:`\mathcal Q`
(default :math:`q = \min(n, \max(m, 5000))`), with
:math:`\tilde K_{mm} = K_{mm} + \epsilon I = L L^T`,

.. math::
    T \approx \frac nq \sum_{i\in\mathcal Q}
        \big(k(x_i, x_i) - \|L^{-1} k(Z, x_i)\|^2\big),

or, as an option, by Hutchinson on :math:`\operatorname{Tr} K_{nm}\tilde K_{mm}^{-1}K_{mn}`
with the same probes.

Gradient
--------
A quadratic form is a maximum, :math:`w^T H w = \max_a 2 w^T K_{nm} a - a^T B a`,
so its derivative is the partial derivative at the maximizer.  Written in
the whitened coordinates :math:`b = T a`, with Falkon's Cholesky factor
:math:`T^T T = K_{mm} + \epsilon m I`, :math:`\Phi = K_{nm} T^{-1}`,
:math:`q_j = 2 w_j^T\Phi b_j - \|\Phi b_j\|^2 - c\|b_j\|^2` and, at fixed
:math:`b_j`,

.. math::
    dq_j = \big\langle 2 (w_j - u_j) a_j^T, dK_{nm}\big\rangle
           - 2\, \hat s_j^T\, dT\, a_j - dc\, \|b_j\|^2,
    \qquad \hat s_j = T^{-T} K_{nm}^T (w_j - u_j).

At the exact solution :math:`\hat s_j = c\, b_j` and this is the textbook
:math:`\langle 2(w_j - u_j)a_j^T, dK_{nm}\rangle - c\,a_j^T dK_{mm} a_j -
dc\, a_j^T K_{mm} a_j` (available as ``gradient="direct"``).  Away from it
the two differ to first order in the solver error, and the whitened one is
far less sensitive: with an ill-conditioned :math:`K_{mm}` the error of
:math:`a` is amplified by :math:`T^{-1}` in directions where
:math:`dK_{nm}` is not small, while :math:`b` is what CG controls
(measured in ``docs/stochastic.md``: the same gradient accuracy at a 10-30
times looser tolerance).  It costs no extra pass: the pass that forms
:math:`u = K_{nm} a` also accumulates :math:`K_{nm}^T u` and
:math:`K_{nm}^T W` (:func:`~nyhopt.ops.normal_matvec` with ``kv=True``).

With :math:`\beta_j = 2 s^2 \mathrm w_j / n` for probe columns and
:math:`\beta_c = -2 g / (np)`, :math:`g = 1 + T/\kappa`, for target
columns, every :math:`K_{nm}` term is one low-rank cotangent
:math:`G_{nm} = P Q^T` with :math:`P = 2 (W - u)\operatorname{diag}(\beta)`
and :math:`Q = a` (one adjoint pass); the cotangent
:math:`-2\sum_j\beta_j \hat s_j a_j^T` on :math:`T` becomes one on
:math:`K_{mm}` through the Cholesky adjoint (:func:`cholesky_adjoint`).
The trace gap lives on the small :math:`q \times m` block
:math:`k(X_{\mathcal Q}, Z)`: with :math:`\Gamma = \tilde K_{mm}^{-1}
K_{m\mathcal Q}` and :math:`\gamma_T = 2F/(np\kappa)`,
:math:`G_{\mathcal Q m} = -2\gamma_T (n/q)\Gamma^T` and
:math:`G_{mm} \mathrel{+}= \gamma_T (n/q) \Gamma\Gamma^T`.  The penalty
gets :math:`g_\lambda = -n\sum_j \beta_j \|b_j\|^2 - 2FT/(np\kappa\lambda)`.

Cost per step: the Falkon solve (one pass over the ``n x m`` kernel per CG
iteration, plus one for the right-hand side, shared with the initial
residual on a warm start), then the two passes of the gradient: one for
:math:`u` and :math:`\hat s` together and one adjoint pass
(:func:`~nyhopt.ops.adjoint_lowrank`), plus :math:`O(q m^2 + m^3)`.  A value
alone needs one pass after the solve (:func:`~nyhopt.ops.kmv` for :math:`u`).
On the Gram route the sums of :math:`u` come from :math:`G` and the adjoint forms
:math:`P = 2 W \beta - K_{nm} (2 a \beta)` itself (:func:`~nyhopt.ops.adjoint_residual`):
a step is two passes (Gram, adjoint), a value one.
Memory: :math:`O(n(k + p) + m^2)` beyond the data, never ``n x m``.

Inside the solve :math:`K_{mm}` is Falkon's :math:`T^T T = K_{mm} + \epsilon m I`
(see :mod:`nyhopt.solvers.falkon`); the energy form and the gradient use
the same matrix, so that they are stationary at the solver's solution.
The trace gap uses :math:`\tilde K_{mm} = K_{mm} + \epsilon I` like ``prop``.
"""
from __future__ import annotations

import functools
import numpy as np

from ..ops import kernel_matrix
from ..ops.cached import cache_storage
from ..ops.half import STORAGE as STORAGE_16
from ..ops.operator import KernelOperator, column_stats, gram_memory_advice, gram_pays  # noqa: F401 (named here before)
from ..ops.operator import stream_memory_advice
from ._exact import gram, solve_lower_inplace
from ..solvers import jitter
from ..solvers._linalg import add_to_diagonal, cholesky_adjoint, cholesky_upper, solve_triangular
from .. import placement
from ..inputs._door import trust
from ..placement import kernel_operator, place_data
from ..solvers.falkon import ConvergenceWarning, FalkonPreconditioner, falkon_operator_solve
from ._base import Cotangents, Evaluation, KernelCotangent, Objective
from ._stoch_cluster import init_on_cluster
from ._stoch_mean import constant_gamma, profile_constant
from ._stoch_options import (  # noqa: F401 (named here: the options' public home)
    DEFAULT_MAXITER,
    DEFAULT_MIN_ROWS,
    DEFAULT_TOL,
    EXPECTED_ITERATIONS,
    STREAM_HUTCHPP,
    STREAM_PROBES,
    STREAM_ROWS,
    STREAM_SKETCH,
    SolveRecord,
    row_sample,
    set_options,
    trace_rows,
)
from ._trace import (
    TraceProbes,
    derive_seed,
    hutchpp_probes,
    keyed_generator,
    probe_rows,
)
from ..errors import warn_user

__all__ = [
    "StochasticProp",
    "SolveRecord",
    "cholesky_adjoint",
    "trace_rows",
    "row_sample",
    "DEFAULT_TOL",
    "DEFAULT_MAXITER",
    "DEFAULT_MIN_ROWS",
]

class StochasticProp(Objective):
    r"""Stochastic estimate of L_Prop for large data (``"stoch-prop"``).

    Parameters
    ----------
    X : array of shape (n, d)
        Training inputs (NumPy or CuPy, float32 or float64); never modified.
    y : array of shape (n,) or (n, p)
        Targets.
    kernel : str or Kernel, default "gaussian"
        Kernel family (its lengthscale is replaced by the params').
    n_probes : int, default 20
        Number :math:`t` of probe vectors for :math:`D = \operatorname{Tr} H`.
    probes : {"gaussian", "rademacher"}, default "gaussian"
        Distribution of the probe entries.
    trace_estimator : {"rows", "hutchinson"}, default "rows"
        Estimator of :math:`T = \operatorname{Tr}(K_{nn} - \tilde K)`: row
        sampling on ``n_rows`` rows (the default, accurate because :math:`T`
        is a small difference of large numbers), or the paper's Hutchinson
        estimate of :math:`\operatorname{Tr}\tilde K` with the same probes
        (costs one more pass per step on warm starts).
    effective_dimension_estimator : {"hutchinson", "hutch++"}, default "hutchinson"
        Estimator of :math:`D`.  ``"hutch++"`` spends ``sketch_size`` of the
        ``n_probes`` columns on an orthonormal basis :math:`Q` of
        :math:`K_{nm} \Omega` (traced exactly) and the rest on Hutchinson
        probes projected off :math:`Q`; the sketch is computed at the first
        evaluation after construction or :meth:`reset` and then kept fixed
        (it is state, like the warm start).
    sketch_size : int, optional
        Columns of the Hutch++ sketch (default ``n_probes // 2``, at most ``n``).
    n_rows : int, optional
        Rows :math:`q` for the row-sampling estimate of :math:`T`; default
        ``min(n, max(m, 5000))``.  The rows are a uniform sample of ``q``
        distinct rows keyed by the seed and ``q`` (:func:`row_sample`).
    tol : float, default 1e-4
        Relative residual tolerance of the Falkon CG solve (the choice is
        explained in ``docs/stochastic.md``: the gradient needs it, the value
        would be accurate with much less).
    maxiter : int, default 200
        Maximal CG iterations per step; a step that reaches it returns its
        (finite) estimate, warns with a ``ConvergenceWarning`` and records it
        in :attr:`last_solve`.
    warm_start : {True, False, "extrapolate"}, default True
        Start each solve from the previous step's CG variable.  This makes
        the value depend (within the solver tolerance) on the previous call;
        set False, or call :meth:`reset`, for a function of the params only.
        ``"extrapolate"`` starts from the line through the last two
        solutions, :math:`2\beta_k - \beta_{k-1}` (the previous one alone
        after a reset): measured on protein over 20 Adam steps, 11-14% fewer
        CG iterations, trajectory within 5e-4 (see the user guide, Stochastic
        L_Prop).
    normalization : {"released", "paper"}, default "released"
        :math:`\kappa = n^2\lambda` (the authors' released code) or
        :math:`n\lambda` (the paper's displayed equation); see MATH.md.
    value_form : {"energy", "plain"}, default "energy"
        How a quadratic form :math:`w^T H w` is read from the solve (see the
        module notes); both agree at exact solves, and also after CG from a
        zero start (Galerkin property), so they differ only on warm starts.
    gradient : {"whitened", "direct"}, default "whitened"
        Gradient formula (see the module notes); both are exact at exact
        solves, the whitened one is far more accurate at loose tolerances;
        both take two passes over the data after the solve (one, the adjoint,
        on the Gram route).
    kernel_cache : {"auto", True, False, "float16"}, default "auto"
        Hold :math:`K_{nm}` in memory during each evaluation
        (:class:`~nyhopt.ops.cached.CachedKernel`, ``n m`` numbers of the data
        dtype): every pass but the adjoint becomes a matrix product.
        ``"auto"`` holds it when it fits the cache budget
        (:func:`nyhopt.set_cache_budget`: 1 GiB on the host, half the free
        GPU memory by default) and streams otherwise, with memory
        :math:`O(n(t + p) + m^2)`.  ``"float16"`` holds it in float16
        (float32 data only; half the memory and bytes read per pass), at the
        cost of a bias in the effective-dimension term at small penalties
        (:mod:`nyhopt.ops.half`).
    gram : {"auto", True, False}, default "auto"
        Form :math:`K_{nm}^T K_{nm}` once per evaluation (one pass, with the
        right-hand sides) so that the CG iterations make no pass over the
        data (:mod:`nyhopt.ops.operator`).  ``"auto"``: on the CPU when
        ``m <= GRAM_GAIN * (t + p) * iterations`` for the iterations of the
        previous step (:data:`EXPECTED_ITERATIONS` before the first), and
        during a solve once streaming has cost as much; on a GPU by the
        cost model of :func:`nyhopt.ops.operator.gram_pays` with the same
        iterations.  The iterates are the same up to rounding.
    mean : {"zero", "constant"}, default "zero"
        (The default by the quality table of ``docs/experiments.md``, "A
        constant mean: with and without": the constant was better on 5 of
        8 datasets, 0.05-0.2% worse on 3.)
        ``"constant"``: an unpenalized constant per output, profiled at every
        evaluation from one more right-hand side (a column of ones) in the
        same solve; the probes then estimate :math:`\operatorname{Tr} H_c`
        and the data fit is that of the centered targets
        (:mod:`nyhopt.objectives._stoch_mean`, ``docs/objectives.md``).
        Needs ``value_form="energy"``.  On dask arrays the ones are
        persisted with the rows and the products the constant needs come
        from the fit pass (``fit_pass(..., cross=True)`` of either operator).
    noise_variance : float, default 1.0
        :math:`s^2`.
    random_state : int, Generator or None
        Seed of the probes, the sampled rows and the Hutch++ sketch; one
        integer :attr:`seed` is derived from it and every random quantity
        comes from counter-based streams of that seed
        (:func:`~nyhopt.objectives._trace.probe_rows`), so that the probes do
        not depend on how the rows are chunked (the Dask path draws the same
        probes block by block on the workers).

    Attributes
    ----------
    probes : TraceProbes or None
        The fixed probes of :math:`D` (None for Hutch++ until the first evaluation).
    seed : int
        The integer seed of every random stream of this objective.
    last_solve : SolveRecord or None
        Record of the Falkon solve of the last evaluation.
    last_terms : dict or None
        The named terms of the last evaluation (what :meth:`terms` would
        return there, without another solve).

    Raises
    ------
    ValueError
        Bad shapes or values of ``X``/``y`` (from :class:`Objective`), and
        any option outside its range, named in the message.
    TypeError
        Non-integer counts, a non-boolean ``warm_start``, a bad ``random_state``.

    Warns
    -----
    ConvergenceWarning
        When a Falkon solve stops at ``maxiter`` (the step still returns).

    Notes
    -----
    The value is a deterministic function of the parameters once the probes
    are fixed, up to the solver tolerance; with ``warm_start=False`` it is a
    deterministic function, and with exact solves its gradient is exact.
    The equations are in the module docstring; measured accuracy against
    the exact objective in ``docs/stochastic.md``.

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> from nyhopt.objectives.stoch_prop import StochasticProp
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(500, 3)); y = np.sin(3 * X[:, 0])
    >>> obj = StochasticProp(X, y, n_probes=10, random_state=0)
    >>> params = nh.Params.from_natural(1e-3, [1.0, 1.0, 1.0], X[:30])
    >>> value, grad = obj.value_and_grad(params)
    >>> grad.centers.shape, obj.last_solve.converged
    ((30, 3), True)
    >>> sorted(obj.terms(params))
    ['data_fit', 'effective_dimension', 'trace']
    """

    name = "stoch-prop"

    cpu_engine = "numba"

    def _routes(self, m):
        """``(storage of a held K or None, form K^T K up front)`` for ``m`` centers (see ``kernel_cache``, ``gram``)."""
        xp = self.xp
        cache = cache_storage(self.kernel_cache, self.n, m, self.X.dtype, xp, "kernel_cache")
        gram = self.gram
        if gram == "auto":
            expected = EXPECTED_ITERATIONS if self.last_solve is None else max(self.last_solve.iterations, 1)
            source = self.X if self.data is None else self.data  # the placement prices the passes
            gram = placement.gram_pays(source, m, self.n_probes + self.p + self._n_ones, expected, xp,
                                       dtype=self.X.dtype, held=cache is not None)
        return cache, gram

    def _cpu_engine(self, params):
        """Streaming passes: Numba owns the cores; matrix products (held kernel, Gram matrix): nyhopt's pool."""
        if self.data is not None:
            return self.data.driver_engine
        cache, gram = self._routes(params.n_centers)
        return "pool" if cache is not None or gram else "numba"

    def _operator(self, kernel, Z):
        """The kernel operator of one evaluation (:func:`nyhopt.placement.kernel_operator`)."""
        cache, gram = self._routes(Z.shape[0])
        held = False if cache is None else ("float16" if cache == STORAGE_16 else True)
        source = self.X if self.data is None else self.data
        return kernel_operator(kernel, source, Z, cache=held, gram=True if gram else self.gram)[0]

    def __init__(
        self,
        X,
        y,
        kernel="gaussian",
        *,
        n_probes=20,
        probes="gaussian",
        trace_estimator="rows",
        effective_dimension_estimator="hutchinson",
        sketch_size=None,
        n_rows=None,
        tol=DEFAULT_TOL,
        maxiter=DEFAULT_MAXITER,
        warm_start=True,
        normalization="released",
        value_form="energy",
        gradient="whitened",
        kernel_cache="auto",
        gram="auto",
        mean=None,
        noise_variance=1.0,
        random_state=None,
        client=None,
    ):
        self.data = place_data(X, y, client=client)
        if self.data is not None:
            init_on_cluster(self, y, kernel, n_probes, probes, trace_estimator, effective_dimension_estimator,
                            sketch_size, n_rows, tol, maxiter, warm_start, normalization, value_form, gradient,
                            kernel_cache, gram, mean, noise_variance, random_state)
            return
        super().__init__(X, y, kernel, mean=mean, noise_variance=noise_variance, random_state=random_state)
        self._set_options(n_probes, probes, trace_estimator, effective_dimension_estimator, sketch_size,
                          n_rows, tol, maxiter, warm_start, normalization, value_form, gradient, kernel_cache,
                          gram)
        if self.mean == "constant" and self.value_form != "energy":
            raise ValueError("mean='constant' needs value_form='energy' (the constant is profiled on the "
                             "energy forms)")
        if self.kernel_cache == "float16" and self.X.dtype != np.float32:
            raise ValueError(f"kernel_cache='float16' needs float32 data, got {self.X.dtype.name} "
                             "(pass dtype='float32' or cast X)")

        # Everything random comes from one seed through counter-based streams (_trace.probe_rows):
        # the same probes and rows for any chunking of the data (the Dask path draws them per block).
        self.seed = derive_seed(random_state)
        xp, n, dt = self.xp, self.n, self.X.dtype
        if self.effective_dimension_estimator == "hutchinson":
            R = probe_rows(self.seed, self.n_probes, 0, n, self.probe_kind, stream=STREAM_PROBES, dtype=dt, xp=xp)
            self.probes = TraceProbes(R, np.full(self.n_probes, 1.0 / self.n_probes), "hutchinson", 0)
            self._G = None
        else:
            self.probes = None
            self._G = probe_rows(self.seed, self.n_probes - self.sketch_size, 0, n, self.probe_kind,
                                 stream=STREAM_HUTCHPP, dtype=dt, xp=xp)
        self._W = None if self.probes is None else self._stack(self.probes)
        self._w_sums = {}
        self._beta = None
        self._rows_cache = None
        self.last_solve = None
        self.last_terms = None

    def release(self):
        """Drop data persisted on a cluster (the objective cannot be evaluated afterwards)."""
        if self.data is not None:
            self.data.release()

    def _checked_data(self):
        """``X``, the trace gap's row sample (rows of ``X``) and ``W`` (probes beside the checked targets)."""
        return (self.X, self._W) + (() if self._rows_cache is None else (self._rows_cache[1],))

    def _memory_tips(self, n, m) -> list:
        """What makes a step fit: row blocks and a held kernel (the memory and cache budgets), the Gram route."""
        return stream_memory_advice(n, m, self.X.dtype, self.xp) + gram_memory_advice(m)

    def _run(self, params, wrt, need_grad, return_ctx=False):
        # On a cluster the driver's m x m work is on the host: CuPy centers (m x d) come over once,
        # and the gradient is a NumPy Params whatever the chunks hold.
        if self.data is not None and hasattr(params.centers, "get"):
            params = params.replace(centers=params.centers.get())
        return super()._run(params, wrt, need_grad, return_ctx)

    def _set_options(self, n_probes, probes, trace_estimator, effective_dimension_estimator, sketch_size,
                     n_rows, tol, maxiter, warm_start, normalization, value_form, gradient, kernel_cache,
                     gram="auto"):
        """Validate and store the options (``self.n`` must be set; :func:`._stoch_options.set_options`)."""
        set_options(self, n_probes, probes, trace_estimator, effective_dimension_estimator, sketch_size, n_rows,
                    tol, maxiter, warm_start, normalization, value_form, gradient, kernel_cache, gram)
        self._beta_prev = None

    # -- state --------------------------------------------------------------------------------
    def reset(self):
        """Forget the warm start (and the Hutch++ sketch, rebuilt at the next evaluation)."""
        self._beta = None
        self.last_solve = None
        self.last_terms = None
        if self.effective_dimension_estimator == "hutch++":
            self.probes = None
            self._W = None

    @property
    def _n_ones(self):
        """1 when the right-hand sides end with a column of ones (``mean="constant"``), else 0."""
        return 1 if self.mean == "constant" else 0

    def _stack(self, probes: TraceProbes):
        """``W = [V | Y]`` (``[V | Y | 1]`` with the constant) in the data dtype (the right-hand sides)."""
        xp = self.xp
        parts = [probes.vectors.astype(self.X.dtype, copy=False), self.Y]
        if self._n_ones:
            parts.append(xp.ones((self.n, 1), dtype=self.X.dtype))
        return xp.concatenate(parts, axis=1)

    def _ensure_probes(self, kernel, Z, op):
        if self.probes is not None:
            return
        xp = self.xp
        rng = keyed_generator(self.seed, STREAM_SKETCH)
        omega = xp.asarray(rng.standard_normal((Z.shape[0], self.sketch_size))).astype(self.X.dtype)
        sketch = op.kmv(omega)
        self.probes = hutchpp_probes(sketch, self._G, xp=xp, dtype=self.X.dtype)
        self._W = self._stack(self.probes)
        self._beta = None

    def _rows(self, m, op=None):
        """The trace gap's sampled rows ``X_Q`` on the driver (kept while ``q`` stays the same).

        ``op`` (the evaluation's kernel operator) gathers them; without one, the data's placement does.
        """
        q = trace_rows(self.n, m, self.n_rows)
        if self._rows_cache is None or self._rows_cache[0] != q:
            idx = row_sample(self.seed, self.n, q)
            if op is None:
                op = self.data if self.data is not None else KernelOperator(self.kernel, self.X, self.X[:1],
                                                                            cache=False, gram=False)
            self._rows_cache = (q, op.rows(idx))
            trust(self._rows_cache[1])  # rows of the checked X
        return self._rows_cache[1]

    # -- the estimator ------------------------------------------------------------------------------
    def _solve(self, kernel, Z, lam, W, op, rhs=None):
        """Falkon solve of ``B a = Knm^T W`` (warm-started); returns (a, precond, rhs or None)."""
        xp, X = self.xp, self.X
        m = Z.shape[0]
        precond = FalkonPreconditioner(kernel, Z, lam, self.n, dtype=X.dtype)
        n_rhs = len(self.probes.weights) + self.p + self._n_ones
        beta0 = self._start(m, n_rhs)
        if rhs is None and self.trace_estimator == "hutchinson":  # Knm^T V is needed for Tr Kt
            rhs = op.kmtv(W).astype(xp.float64, copy=False)
        res = self._falkon(kernel, Z, lam, W, beta0, precond, rhs, op)
        cg = res.cg
        residual = float(cg.residual_norms[-1]) if len(cg.residual_norms) else float("nan")
        self.last_solve = SolveRecord(int(cg.iterations), residual, bool(cg.converged), beta0 is not None,
                                      n_rhs)
        if not cg.converged:
            warn_user(
                f"stoch-prop: the Falkon solve stopped at maxiter={self.maxiter} with relative residual "
                f"{residual:.3g} > tol={self.tol:.3g}; the estimate is returned (see .last_solve)",
                ConvergenceWarning
            )
        if self.warm_start:
            self._beta_prev, self._beta = self._beta, res.beta
        return res.alpha, precond, rhs

    def _start(self, m, n_rhs):
        """The CG start of the next solve (see ``warm_start``), or None."""
        beta, prev = self._beta, self._beta_prev
        if not self.warm_start or beta is None or beta.shape != (m, n_rhs):
            return None
        if self.warm_start == "extrapolate" and prev is not None and prev.shape == beta.shape:
            return 2.0 * beta - prev
        return beta

    def _u_pass(self, kernel, Z, a, whitened, op):
        """The pass ``u = Knm a`` with its column sums (and ``Knm^T u``, ``Knm^T W`` if ``whitened``): ``op.fit_pass``."""
        return op.fit_pass(a, self._W, whitened, self.value_form == "plain", cross=bool(self._n_ones),
                           memo=self._w_sums)  # W's sums for the Gram route, kept while W is the same

    def _falkon(self, kernel, Z, lam, W, beta0, precond, rhs, op):
        """The Falkon solve with right-hand sides ``Knm^T W`` on the evaluation's operator."""
        return falkon_operator_solve(op, W, lam, tol=self.tol, maxiter=self.maxiter, beta0=beta0,
                                     precond=precond, rhs=rhs, warn=False)

    def _trace_gap(self, kernel, Z, rhs, weights, k):
        """``T = Tr(Knn - Kt)`` and what its cotangents need."""
        xp, X, n = self.xp, self.X, self.n
        f64 = xp.float64
        Kmm = kernel_matrix(kernel, Z).astype(f64)
        Lt = cholesky_upper(add_to_diagonal(Kmm, jitter(X.dtype), xp), xp, "Kmm + jitter*I")
        if self.trace_estimator == "rows":
            XQ = self._rows_cache[1]  # sampled by _evaluate (op.rows)
            # L^{-1} K_mQ on the C-ordered (m, q) block (column ranges on the worker pool)
            AQ = solve_lower_inplace(Lt.T, kernel_matrix(kernel, Z, XQ).astype(f64), xp)
            T = (float(xp.sum(kernel.diag(XQ).astype(f64))) - float(xp.sum(AQ * AQ))) * (n / XQ.shape[0])
            return T, (Lt, XQ, AQ)
        Ab = solve_triangular(Lt, rhs[:, :k], xp, trans=True)  # L^{-1} Kmn v_j
        T = float(xp.sum(kernel.diag(X).astype(f64))) - float(xp.sum(weights * xp.sum(Ab * Ab, axis=0)))
        return T, (Lt, None, Ab)

    def _evaluate(self, ctx):
        xp, n, p = self.xp, self.n, self.p
        kernel, Z, lam = ctx.kernel, ctx.Z, ctx.penalty
        f64 = xp.float64
        c = n * lam
        kappa = n * n * lam if self.normalization == "released" else n * lam
        s2 = self.noise_variance

        op = self._operator(kernel, Z)
        self._ensure_probes(kernel, Z, op)
        probes, W = self.probes, self._W
        k = len(probes.weights)
        weights = xp.asarray(probes.weights, dtype=f64)

        # With the Gram matrix the solve's right-hand sides Knm^T W come with it, in one pass.
        rhs = op.form_gram(W) if op.gram_policy is True else None
        a, precond, rhs = self._solve(kernel, Z, lam, W, op, rhs)

        # Quadratic forms from u = Knm a; the whitened gradient's Knm^T (W - u) comes from the same pass.
        whitened = ctx.need_grad and self.gradient == "whitened"
        st = self._u_pass(kernel, Z, a, whitened, op)
        # + the adjoint pass (on the Gram route st came from G, with no pass)
        self.last_solve = self.last_solve._replace(passes=op.passes + int(ctx.need_grad))
        if self.trace_estimator == "rows":
            self._rows(Z.shape[0], op)
        cotangent = functools.partial(op.residual_cotangent, W, st)
        op.close()  # a held n x m kernel is not needed by the adjoint (it evaluates the kernel derivative)
        b = precond.T @ a  # whitened coefficients; ||b_j||^2 = a_j^T (Kmm + eps m I) a_j
        bb = xp.sum(b * b, axis=0)
        if self.value_form == "energy":
            q = 2.0 * st.wu - st.uu - c * bb
            F = float(xp.sum(st.rr[k:k + p])) + c * float(xp.sum(bb[k:k + p]))
        else:
            q = st.wu
            F = float(xp.sum(st.ww[k:])) - float(xp.sum(q[k:]))
        D = float(xp.sum(weights * q[:k]))
        if self._n_ones:
            cm = profile_constant(st.cross, b, c, weights, k, p, xp)
            self.last_intercept = cm.c
            F, D = F - cm.fit_drop, D + cm.extra_dim
        T, tr = self._trace_gap(kernel, Z, rhs, weights, k)

        g = 1.0 + T / kappa
        scale = 2.0 / (n * p)
        terms = {
            "effective_dimension": scale * p * s2 * D,
            "data_fit": scale * F,
            "trace": scale * F * T / kappa,
        }
        self.last_terms = dict(terms)
        if not ctx.need_grad:
            return Evaluation(terms, None)

        # Cotangents: column weights beta_j = d value / d q_j (with the constant, a symmetric matrix
        # Gamma of the bilinear forms B(w_i, w_l), see _constant).
        beta = xp.concatenate([2.0 * s2 / n * weights, xp.full(p, -scale * g, dtype=f64)])
        if self._n_ones:
            beta = constant_gamma(cm, beta, scale * g, 2.0 * s2 / n, weights, k, p, xp)
            bmat = beta
        else:
            bmat = None
        if whitened:
            s_hat = solve_triangular(precond.T, st.KtW.astype(f64) - st.KtKa.astype(f64), xp, trans=True)
            sb = s_hat @ bmat if bmat is not None else s_hat * beta[None, :]
            G_mm = cholesky_adjoint(precond.T, -2.0 * sb @ a.T, xp)
        else:
            G_mm = -c * ((a @ bmat if bmat is not None else a * beta[None, :]) @ a.T)
        g_lam = -n * (float(xp.sum(bmat * (b.T @ b))) if bmat is not None else float(xp.sum(beta * bb)))
        g_log_lam = -terms["trace"]  # trace ~ 1/lam: its d/dlog(lam), finite for a tiny lam

        gamma_T = scale * F / kappa
        Lt, XQ, A_T = tr
        nm = []
        extra = None
        if self.trace_estimator == "rows":
            ratio = n / XQ.shape[0]
            Gam = solve_lower_inplace(Lt.T, A_T, xp, trans=True)  # (Kmm + eps I)^{-1} K_mQ (A_T is ours)
            G_mm = G_mm + (gamma_T * ratio) * gram(Gam, xp)
            nm.append(KernelCotangent(XQ, G=(-2.0 * gamma_T * ratio) * Gam.T))
        else:
            Gam = solve_triangular(Lt, A_T, xp)  # (Kmm + eps I)^{-1} Kmn v_j
            extra = ((-2.0 * gamma_T) * weights, Gam)
            G_mm = G_mm + gamma_T * ((Gam * weights[None, :]) @ Gam.T)
        nm.insert(0, cotangent(beta, a, extra))
        return Evaluation(terms, Cotangents(nm=tuple(nm), mm=0.5 * (G_mm + G_mm.T), penalty=g_lam,
                                            log_penalty=g_log_lam))
