"""The :class:`Objective` base class and the chain rule shared by every objective.

Every objective of nyhopt is a function of the kernel matrices
:math:`K_{nm} = k(X, Z)` and :math:`K_{mm} = k(Z, Z)` and of the penalty
:math:`\\lambda`.  Its differential is therefore

.. math::
    d\\,\\mathcal{L} = \\langle G_{nm}, dK_{nm}\\rangle
                    + \\langle G_{mm}, dK_{mm}\\rangle
                    + g_\\lambda\\, d\\lambda ,

and an objective only has to produce the *cotangents* :math:`G_{nm}` (dense
or low rank, possibly split over several row sets of the data),
:math:`G_{mm}` and the scalar :math:`g_\\lambda`.  An objective that depends
on the kernel amplitude :math:`a` (``sgpr``) adds the scalar
:math:`\\partial\\mathcal{L}/\\partial\\log a` at fixed kernel matrices and
penalty; for the others it is exactly zero.  This module turns them into
a gradient with respect to the optimizer's coordinates
:math:`(\\log\\lambda, \\log\\ell, Z, \\log a)` with the kernel adjoints of
:mod:`nyhopt.ops`:

* :math:`\\partial/\\partial\\ell` and :math:`\\partial/\\partial Z` of
  :math:`\\langle G_{nm}, k(X, Z)\\rangle` come from ``adjoint_dense`` (or
  ``adjoint_lowrank`` for :math:`G_{nm} = P Q^T`);
* for :math:`\\langle G_{mm}, k(Z, Z)\\rangle` both arguments are :math:`Z`,
  so the centers gradient is the sum of the adjoint's ``centers`` and ``X``
  parts;
* :math:`\\partial/\\partial\\log\\lambda = \\lambda\\, g_\\lambda` and
  :math:`\\partial/\\partial\\log\\ell = \\ell\\odot\\partial/\\partial\\ell`.

Objectives never differentiate a kernel themselves.

Writing an objective (the hooks)
--------------------------------
A subclass sets the class attribute ``name`` and implements one method,

``_evaluate(self, ctx) -> Evaluation``
    ``ctx`` is an :class:`EvalContext` (the kernel with the params'
    lengthscales, the penalty as a float, the centers in the data dtype, the
    requested ``wrt`` and ``need_grad``).  Return an :class:`Evaluation`:
    ``terms`` (a dict of named Python floats whose **sum is the value**) and,
    when ``ctx.need_grad`` is true, ``cotangents`` (a :class:`Cotangents`);
    otherwise ``cotangents=None``.

Optionally:

``__init__(self, X, y, kernel="gaussian", *, <own options>, mean=None, noise_variance=1.0, random_state=None)``
    call ``super().__init__(X, y, kernel, mean=..., noise_variance=..., random_state=...)``
    first (it validates and stores ``X``, ``Y``, ``n``, ``p``, ``xp``,
    ``kernel``, ``mean``, ``noise_variance``, ``random_state``), then validate and
    store the own options.  Fix everything random (splits, probes) here.
``_check_centers(self, m)``
    extra checks on the number of centers (default: ``m <= n``).

Everything else (``value``, ``value_and_grad``, ``terms``, validation of
``Params``, the params -> kernel plumbing and the chain rule) is inherited.
The helper :func:`params_gradient` is public for objectives that want to
assemble gradients themselves.

Examples
--------
A toy objective :math:`\\mathcal{L} = \\lambda\\,\\mathrm{sum}(K_{nm})`, whose
cotangents are :math:`G_{nm} = \\lambda\\,1 1^T` (rank one) and
:math:`g_\\lambda = \\mathrm{sum}(K_{nm})`:

>>> import numpy as np
>>> from nyhopt.params import Params
>>> from nyhopt.ops import kmv
>>> class ToySum(Objective):
...     name = "toy"
...     def _evaluate(self, ctx):
...         s = float(kmv(ctx.kernel, self.X, ctx.Z, np.ones(ctx.Z.shape[0])).sum())
...         cot = None
...         if ctx.need_grad:
...             nm = KernelCotangent(self.X, P=np.full((self.n, 1), ctx.penalty),
...                                  Q=np.ones((ctx.Z.shape[0], 1)))
...             cot = Cotangents(nm=(nm,), mm=None, penalty=s)
...         return Evaluation({"sum": ctx.penalty * s}, cot)
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(20, 2))
>>> obj = ToySum(X, rng.normal(size=20))
>>> params = Params.from_natural(0.5, [1.0, 2.0], X[:3])
>>> value, grad = obj.value_and_grad(params)
>>> bool(np.isclose(grad.log_penalty, value))      # d/dlog(lam) of lam*s is lam*s
True
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..inputs._door import trusting
from ..inputs._validation import check_matrix, check_positive, check_targets, reject_bool
from ..backend._threads import cpu_threads
from ..backend import device_memory_advice, format_bytes, get_namespace, to_numpy
from ..kernels import Kernel, KernelGrad, make_kernel
from ..kernels._base import check_finite_grad
from ..ops import adjoint_dense, adjoint_factored, adjoint_lowrank
from ..params import Params
from ..solvers import jitter  # the one per-dtype jitter (1e-10 float64, 1e-6 float32)

__all__ = [
    "Objective",
    "EvalContext",
    "Evaluation",
    "Cotangents",
    "KernelCotangent",
    "params_gradient",
    "WRT_ALL",
    "jitter",
]

#: Values of the objectives' option ``mean``.
MEANS = ("zero", "constant")


def check_mean(mean, default):
    """``mean`` validated (None gives ``default``)."""
    if mean is None:
        return default
    if not isinstance(mean, str):
        raise TypeError(f"mean must be one of {MEANS}, got {mean!r}")
    if mean not in MEANS:
        raise ValueError(f"mean must be one of {MEANS}, got {mean!r}")
    return mean


#: Every coordinate of :class:`~nyhopt.params.Params`, the default ``wrt``.
WRT_ALL = ("penalty", "lengthscale", "centers", "amplitude")


class KernelCotangent(NamedTuple):
    """Cotangent of one kernel block :math:`k(X_b, Z)`.

    Give either a dense ``G`` of shape ``(n_b, m)``, or a low-rank pair
    ``P`` ``(n_b, r)``, ``Q`` ``(m, r)`` meaning :math:`G = P Q^T`, or
    ``products`` (with an optional low-rank pair) meaning
    :math:`G = \\mathrm{diag}(u_0)B_0V_0 + PQ^T + \\sum_{k\\ge1}\\mathrm{diag}(u_k)B_kV_k`,
    which is contracted block by block without forming ``G``
    (:func:`nyhopt.ops.adjoint_factored`).

    Attributes
    ----------
    X : array (n_b, d)
        The rows of the block (data dtype); e.g. all of ``X``, a training
        split, or a sample of rows.
    G : array (n_b, m) or None
    P, Q : arrays or None
    products : tuple of ``(B (n_b, r), u (n_b,) or None, V (r, m))``, default ()
    KT : array (m, n_b) or None
        ``k(Z, X_b)`` if the objective kept it (read instead of evaluating
        the kernel again), with ``products`` or ``P, Q``.
    """

    X: object
    G: object = None
    P: object = None
    Q: object = None
    products: tuple = ()
    KT: object = None


class Cotangents(NamedTuple):
    """Cotangents of an objective on its kernel matrices and the penalty.

    Attributes
    ----------
    nm : tuple of KernelCotangent
        Cotangents on :math:`k(X_b, Z)` blocks (contributions add up).
    mm : array (m, m) or None
        Cotangent :math:`G_{mm}` on :math:`K_{mm} = k(Z, Z)` (the jitter is a
        constant, so it is also the cotangent on :math:`K_{mm} + \\epsilon I`).
    penalty : float
        :math:`g_\\lambda`, partial derivative with respect to the *natural*
        penalty :math:`\\lambda` (with the kernel matrices held fixed).
    log_penalty : float, default 0.0
        A further partial derivative, with respect to :math:`\\log\\lambda`
        (kernel matrices fixed), added as is to the gradient.  Terms
        proportional to :math:`\\lambda^{-1}` put theirs here:
        :math:`\\partial/\\partial\\log\\lambda` of such a term is minus the
        term, finite, where its :math:`g_\\lambda` (a :math:`\\lambda^{-2}`)
        overflows for a tiny :math:`\\lambda`.
    log_amplitude : float, default 0.0
        Partial derivative with respect to :math:`\\log a`, the log kernel
        amplitude (kernel matrices and penalty fixed); 0 for the objectives
        whose value does not depend on the amplitude.
    """

    nm: tuple = ()
    mm: object = None
    penalty: float = 0.0
    log_penalty: float = 0.0
    log_amplitude: float = 0.0


class Evaluation(NamedTuple):
    """What :meth:`Objective._evaluate` returns.

    Attributes
    ----------
    terms : dict[str, float]
        Named parts of the objective; their sum is the value.
    cotangents : Cotangents or None
        ``None`` unless a gradient was asked for.
    """

    terms: dict
    cotangents: object = None


@dataclass(frozen=True)
class EvalContext:
    """Everything an objective needs to evaluate itself at ``params``.

    Attributes
    ----------
    params : Params
        The validated parameters.
    kernel : Kernel
        The objective's kernel template with ``lengthscale = params.lengthscale``.
    penalty : float
        :math:`\\lambda` (natural).
    Z : array (m, d)
        Centers cast to the data dtype (use it for every kernel evaluation).
    wrt : frozenset of str
        Requested gradient fields (subset of ``{"penalty", "lengthscale", "centers", "amplitude"}``).
    need_grad : bool
        Whether cotangents must be returned.
    amplitude : float, default 1.0
        Kernel amplitude :math:`a` (natural); only objectives whose value
        depends on it read it.
    """

    params: Params
    kernel: Kernel
    penalty: float
    Z: object
    wrt: frozenset
    need_grad: bool
    amplitude: float = 1.0


def _check_wrt(wrt) -> frozenset:
    if isinstance(wrt, str):
        wrt = (wrt,)
    wrt = frozenset(wrt)
    unknown = wrt - set(WRT_ALL)
    if unknown:
        raise ValueError(f"wrt must name fields among {WRT_ALL}, got unknown {sorted(unknown)}")
    return wrt


def params_gradient(kernel, Z, cotangents, params, wrt=WRT_ALL, xp=np) -> Params:
    """Turn cotangents on kernel matrices into a gradient in ``Params`` coordinates.

    Parameters
    ----------
    kernel : Kernel
        Kernel with the lengthscales of ``params``.
    Z : array (m, d)
        Centers in the data dtype (as used for the kernel matrices).
    cotangents : Cotangents
    params : Params
        Where the gradient is taken (for :math:`\\lambda` and :math:`\\ell`).
    wrt : iterable of {"penalty", "lengthscale", "centers", "amplitude"}
        Fields to compute; the others are zeros.
    xp : module
        Array module of ``Z``.

    Returns
    -------
    Params
        :math:`\\partial\\mathcal{L}/\\partial\\log\\lambda = \\lambda g_\\lambda`,
        :math:`\\partial\\mathcal{L}/\\partial\\log\\ell = \\ell \\odot
        \\partial\\mathcal{L}/\\partial\\ell`,
        :math:`\\partial\\mathcal{L}/\\partial Z` and
        :math:`\\partial\\mathcal{L}/\\partial\\log a` (``cotangents.log_amplitude``),
        all float64.

    Notes
    -----
    For :math:`K_{mm} = k(Z, Z)` the adjoint is asked for both of its
    arguments: :math:`\\partial\\langle G, k(Z, Z)\\rangle/\\partial Z` is the
    sum of the derivative through the first argument (``X`` part) and through
    the second (``centers`` part).
    """
    wrt = _check_wrt(wrt)
    ell = np.asarray(params.lengthscale, dtype=np.float64)
    m, d = Z.shape
    g_ell = np.zeros_like(ell)
    g_z = xp.zeros((m, d), dtype=xp.float64)
    kwrt = tuple(name for name in ("lengthscale", "centers") if name in wrt)
    if kwrt:
        for block in cotangents.nm:
            if hasattr(block, "contract"):  # a placement's own cotangent (nyhopt.ops.operator)
                kg = block.contract(kernel, Z, kwrt)
            elif block.G is not None:
                kg = adjoint_dense(kernel, block.X, Z, block.G, wrt=kwrt)
            elif block.products or block.KT is not None:
                kg = adjoint_factored(kernel, block.X, Z, block.products, block.P, block.Q, KT=block.KT, wrt=kwrt)
            else:
                kg = adjoint_lowrank(kernel, block.X, Z, block.P, block.Q, wrt=kwrt)
            if kg.lengthscale is not None:
                g_ell = g_ell + to_numpy(kg.lengthscale, dtype=np.float64)
            if kg.centers is not None:
                g_z += kg.centers
        if cotangents.mm is not None:
            mwrt = kwrt + (("X",) if "centers" in wrt else ())
            Gmm = xp.asarray(cotangents.mm)
            kg = adjoint_dense(kernel, Z, Z, Gmm, wrt=mwrt)
            if kg.lengthscale is not None:
                g_ell = g_ell + to_numpy(kg.lengthscale, dtype=np.float64)
            if kg.centers is not None:
                g_z += kg.centers + kg.X
    g_log_lam = (params.penalty * float(cotangents.penalty) + float(cotangents.log_penalty)
                 if "penalty" in wrt else 0.0)
    g_log_ell = ell * g_ell if "lengthscale" in wrt else np.zeros_like(ell)
    g_log_amp = float(cotangents.log_amplitude) if "amplitude" in wrt else 0.0
    check_finite_grad(KernelGrad(g_ell, g_z, None), xp)  # a clear error, not a NaN step
    return Params(np.asarray(g_log_lam, dtype=np.float64), g_log_ell.reshape(ell.shape), g_z,
                  np.asarray(g_log_amp, dtype=np.float64))



def _positive_from_log(log_value, name):
    """``exp(params.log_<name>)`` as a float, raising unless it is one finite number giving a value in (0, inf)."""
    arr = np.asarray(log_value, dtype=np.float64)
    if arr.size != 1 or not np.isfinite(arr).all():
        raise ValueError(f"params.log_{name} must be one finite number, got {log_value!r}")
    value = float(np.exp(arr.reshape(())))
    if not 0.0 < value < np.inf:
        raise ValueError(f"params.log_{name}={float(arr.reshape(()))} gives {name} {value}")
    return value

class Objective:
    """Base class of the model-selection objectives (all minimized).

    Parameters
    ----------
    X : array of shape (n, d)
        Training inputs, float32 or float64 (integers become float64), NumPy
        or CuPy.  Never modified.
    y : array of shape (n,) or (n, p)
        Targets; cast to the dtype of ``X``.
    kernel : str or Kernel, default "gaussian"
        Kernel family; its lengthscale is a template replaced by the params'.
    mean : {"zero", "constant"}, optional
        The model's mean: ``"zero"`` (the targets as they are) or
        ``"constant"`` (an unpenalized constant per output, profiled in
        closed form at every evaluation, ``docs/objectives.md``, "A constant
        mean"); default :attr:`default_mean` of the class: ``"constant"``
        for ``sgpr`` (a GP's constant mean), ``"zero"`` for the others,
        where the constant was worse on at least one dataset of the quality
        table (``docs/experiments.md``, "A constant mean: with and without").
    noise_variance : float, default 1.0
        :math:`s^2`, the noise-variance estimate (labels standardized).
    random_state : int, numpy.random.Generator or None
        Seed for whatever the objective draws at construction.

    Attributes
    ----------
    name : str
    X : array (n, d)
    Y : array (n, p)
    n, p : int
    xp : module
        ``numpy`` or ``cupy``.
    kernel : Kernel
    noise_variance : float
    random_state : int, Generator or None
    mean : str
        ``"zero"`` or ``"constant"``.
    last_intercept : numpy.ndarray (p,) or None
        :math:`c^*` of the most recent evaluation with ``mean="constant"``.

    Raises
    ------
    ValueError
        Shapes that do not match, NaN or infinity, a non-positive noise variance.
    TypeError
        Non-numeric data, NumPy and CuPy arrays mixed.

    Notes
    -----
    Subclasses implement ``_evaluate`` (see the module docstring of
    :mod:`nyhopt.objectives._base`); values and gradients of the objectives
    are derived in ``docs/objectives.md``.

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40, 2)); y = np.cos(X[:, 1])
    >>> obj = nh.make_objective("creg", X, y)
    >>> params = nh.Params.from_natural(1e-2, [1.0, 1.0], X[:5])
    >>> value, grad = obj.value_and_grad(params, wrt=("penalty",))
    >>> grad.log_lengthscale.tolist()        # not requested: zeros
    [0.0, 0.0]
    >>> bool(np.isclose(sum(obj.terms(params).values()), value))
    True
    """

    name = "objective"
    #: Whether the value depends on the kernel amplitude ``params.amplitude`` (``sgpr``);
    #: for the others its gradient is exactly zero.
    uses_amplitude = False
    #: The mean of the model when ``mean`` is not given: "zero" (targets as they are) or
    #: "constant" (an unpenalized intercept profiled at every evaluation, docs/objectives.md).
    default_mean = "zero"
    #: CPU engine that keeps its threads during an evaluation (see :mod:`nyhopt.backend._threads`).
    cpu_engine = "pool"

    def _cpu_engine(self, params):
        """The CPU engine (:mod:`nyhopt.backend._threads`) of an evaluation at ``params``: :attr:`cpu_engine`."""
        return self.cpu_engine

    def __init__(self, X, y, kernel="gaussian", *, mean=None, noise_variance=1.0, random_state=None):
        xp = get_namespace(X, y)
        self.xp = xp
        self.X = check_matrix(X, "X", xp)
        self.n = int(self.X.shape[0])
        self.Y, self._y_was_1d = check_targets(y, "y", self.n, xp, dtype=self.X.dtype)
        self.p = int(self.Y.shape[1])
        if self.p < 1:
            raise ValueError("y must have at least one column")
        self.kernel = make_kernel(kernel)
        self.noise_variance = check_positive(noise_variance, "noise_variance")
        self.random_state = reject_bool(random_state, "random_state")
        self.mean = check_mean(mean, self.default_mean)
        #: The profiled constant :math:`c^*` (numpy (p,)) of the most recent evaluation with
        #: ``mean="constant"`` (None before the first, and always with ``mean="zero"``).
        self.last_intercept = None
        #: Named parts of the most recent evaluation (None before the first): free to
        #: read, where :meth:`terms` evaluates again.
        self.last_terms = None

    # -- public API -----------------------------------------------------------------
    def value(self, params) -> float:
        """Objective value at ``params`` (a Python float)."""
        with cpu_threads(self._cpu_engine(params), self.xp), self._memory_advice(params), \
                trusting(*self._checked_data()):
            ev = self._run(params, frozenset(), need_grad=False)
        return _total(ev.terms)

    def value_and_grad(self, params, wrt=WRT_ALL):
        """Value and gradient with respect to ``(log_penalty, log_lengthscale, centers, log_amplitude)``.

        Parameters
        ----------
        params : Params
        wrt : iterable of {"penalty", "lengthscale", "centers", "amplitude"}
            Fields of the gradient to compute; the others are returned as zeros
            (``log_amplitude`` is zero anyway for the objectives that ignore
            the amplitude, see :attr:`uses_amplitude`).

        Returns
        -------
        value : float
        grad : Params
            Partial derivatives in the same coordinates as ``params`` (float64).
        """
        wrt = _check_wrt(wrt)
        with cpu_threads(self._cpu_engine(params), self.xp), self._memory_advice(params), \
                trusting(*self._checked_data()):
            ctx, ev = self._run(params, wrt, need_grad=True, return_ctx=True)
            self._check_target_scale(ev.terms)
            grad = params_gradient(ctx.kernel, ctx.Z, ev.cotangents, ctx.params, wrt, self.xp)
        return _total(ev.terms), grad

    def terms(self, params) -> dict:
        """Named parts of the objective at ``params``; their sum is :meth:`value`."""
        with cpu_threads(self._cpu_engine(params), self.xp), self._memory_advice(params), \
                trusting(*self._checked_data()):
            return dict(self._run(params, frozenset(), need_grad=False).terms)

    def __repr__(self):
        return f"{type(self).__name__}(n={self.n}, d={self.X.shape[1]}, p={self.p}, kernel={self.kernel!r})"

    def _checked_data(self):
        """The arrays this objective checked when it was made: its evaluations do not check them again."""
        return (self.X,)

    def _memory_advice(self, params):
        """Out of GPU memory in an evaluation: a :class:`MemoryError` that names what to change (CuPy only)."""
        n, m = self.n, getattr(getattr(params, "centers", None), "shape", (0,))[0]  # params not checked yet
        what = f"evaluating the objective {self.name!r} (n = {n}, m = {m}, {self.X.dtype})"
        return device_memory_advice(self.xp, what, lambda: self._memory_tips(n, m))

    def _memory_tips(self, n, m) -> list:
        """What makes an evaluation fit: the exact objectives hold whole ``n x m`` matrices."""
        size = format_bytes(n * m * self.X.dtype.itemsize)
        tips = [f"the exact objectives hold whole n x m matrices ({size} each): use fewer centers"]
        if self.X.dtype == np.float64:
            tips.append("float32 data (tune's dtype='float32') halve them")
        tips.append("the scalable objective 'stoch-prop' streams row blocks instead")
        return tips

    def _largest_target(self) -> float:
        """:math:`\\max |y|` (a host float)."""
        return float(to_numpy(self.xp.max(self.xp.abs(self.Y)), dtype=np.float64))

    def _check_target_scale(self, terms) -> None:
        """Raise when terms are not finite because the squares of the targets overflow float64.

        Their gradient is then not finite either, and the kernel's check would
        blame the lengthscale (:func:`nyhopt.kernels._base.check_finite_grad`).
        """
        bad = [name for name, v in terms.items() if not math.isfinite(float(v))]
        if not bad:
            return
        top = self._largest_target()
        if top * math.sqrt(self.Y.size) < math.sqrt(np.finfo(np.float64).max):
            return  # the squares of y sum to a finite number: not the cause
        raise ValueError(
            f"{self.name}: the objective is not finite ({', '.join(f'{k} = {float(terms[k])}' for k in bad)}): "
            f"the targets y reach |y| = {top:.3g}, and sums of their squares overflow float64; scale y "
            "(for example standardize it)")

    # -- hooks ----------------------------------------------------------------------
    def _evaluate(self, ctx: EvalContext) -> Evaluation:  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_centers(self, m: int) -> None:
        if m > self.n:
            raise ValueError(f"more centers than samples: params.centers has {m} rows, X has {self.n}")

    # -- plumbing -------------------------------------------------------------------
    def _context(self, params, wrt, need_grad) -> EvalContext:
        if not isinstance(params, Params):
            raise TypeError(f"params must be a nyhopt.Params, got {type(params).__name__}")
        xp = self.xp
        get_namespace(self.X, params.centers)  # TypeError when host and device are mixed
        d = self.X.shape[1]
        Z = xp.asarray(params.centers)
        if Z.ndim != 2:
            raise ValueError(f"params.centers must be 2-D (m, d), got shape {tuple(Z.shape)}")
        if Z.shape[1] != d:
            raise ValueError(f"params.centers has {Z.shape[1]} features (columns) but X has {d}")
        if Z.shape[0] < 1:
            raise ValueError("params.centers must have at least one row")
        self._check_centers(int(Z.shape[0]))
        if not bool(xp.all(xp.isfinite(Z))):
            raise ValueError("params.centers contains NaN or infinity")
        log_ell = np.asarray(params.log_lengthscale, dtype=np.float64).reshape(-1)
        if log_ell.size not in (1, d):
            raise ValueError(f"params.log_lengthscale has {log_ell.size} entries; expected 1 or {d} (features of X)")
        if not np.all(np.isfinite(log_ell)):
            raise ValueError("params.log_lengthscale contains NaN or infinity")
        penalty = _positive_from_log(params.log_penalty, "penalty")
        amplitude = _positive_from_log(params.log_amplitude, "amplitude")
        kernel = self.kernel.with_lengthscale(np.exp(log_ell))
        return EvalContext(params, kernel, penalty, Z.astype(self.X.dtype, copy=False), wrt, need_grad,
                           amplitude)

    def _run(self, params, wrt, need_grad, return_ctx=False):
        ctx = self._context(params, wrt, need_grad)
        ev = self._evaluate(ctx)
        self.last_terms = dict(ev.terms)
        if need_grad and ev.cotangents is None:
            raise RuntimeError(f"{type(self).__name__}._evaluate returned no cotangents")
        return (ctx, ev) if return_ctx else ev


def _total(terms) -> float:
    return math.fsum(float(v) for v in terms.values())
