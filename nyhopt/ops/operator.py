r"""The products of a Falkon solve with :math:`K = k(X, Z)`, by the cheapest of three routes.

A solve and the gradient of ``stoch-prop`` need :math:`K V`, :math:`K^T U`
and the normal product :math:`K^T (K V)` many times for the same :math:`K`.
:class:`KernelOperator` serves them

* *streaming*: every product evaluates the kernel again on row blocks
  (:mod:`nyhopt.ops`), memory bounded by the memory budget;
* *cached*: :math:`K` is evaluated once and held (:class:`~nyhopt.ops.cached.CachedKernel`)
  when ``n x m`` numbers fit the cache budget (:func:`nyhopt.set_cache_budget`),
  and every product is a matrix product;
* *Gram*: :math:`G = K^T K` is formed in one pass (from the cache or
  streaming, :mod:`nyhopt.ops.gram`), after which a normal product is the
  ``m x m`` product :math:`G V` and needs no pass over the data.

Forming :math:`G` costs about :math:`n m^2` flops at the machine's peak
against :math:`4 n m k` flops of skinny products per normal product, so it
pays once a solve takes more than about ``m / (GRAM_GAIN * k)`` iterations.
With ``gram="auto"`` the operator streams (or uses the cache) until the
normal products done so far have cost that much, then forms :math:`G` (the
"ski-rental" rule: never more than twice the cost of the better route in
hindsight); a caller that expects many iterations forms it at once with
:meth:`KernelOperator.form_gram`.

On a GPU the break-even comes from a cost model of the measured pieces
(:func:`gram_pays`; docs/solvers.md, "The Gram matrix on a GPU"): forming
:math:`G` costs one kernel evaluation plus about ``a * n m^2`` seconds
(``a`` for its route: float64 products, or int8 or float16 tensor cores for
float32 data, :data:`nyhopt.ops.gram.TENSOR_CORES`), a streaming normal
product one kernel evaluation plus its skinny products.  At the HIGGS size
(n = 1e7, m = 5000, k = 21, one H100) that is about 11 s in float64 against
0.6 s: :math:`G` pays from the 18th product; on int8 tensor cores (about
2.4 s, estimated) from the fourth.  The streaming route
stays when :math:`G` and its work space (:data:`GPU_GRAM_BYTES` bytes per
``m^2``) do not fit in half the device's free memory.

:attr:`KernelOperator.passes` counts the sweeps over the ``n x m`` kernel:
each kernel evaluation (the cache, the Gram pass, a streaming product) and
each product with the cached matrix is one; :math:`G V` is none, and so is
:meth:`KernelOperator.fit_pass` once :math:`G` and :math:`K^T W` are held
(:func:`gram_stats`).

Examples
--------
>>> import numpy as np
>>> import nyhopt as nh
>>> from nyhopt.ops.operator import KernelOperator
>>> rng = np.random.default_rng(0)
>>> X, V = rng.normal(size=(400, 3)), rng.normal(size=(30, 2))
>>> op = KernelOperator(nh.GaussianKernel(1.0), X, X[:30], cache=False, gram=False)
>>> KtKV, _ = op.normal_matvec(V)
>>> op.passes
1
>>> _ = op.form_gram(); _ = op.normal_matvec(V); op.passes
2
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..backend._threads import cpu_threads
from ..inputs._validation import check_matrix, check_targets
from ..backend._config import get_cache_budget, get_memory_budget
from ..backend import DeviceMemoryError, device_memory_advice, format_bytes, get_namespace, is_cupy_namespace
from . import _adjoint_lowrank, _adjoint_residual, adjoint_lowrank, adjoint_residual
from ._blocks import KernelBlocks
from .cached import CachedKernel, cache_storage
from . import gram as _gram
from .gram import gram_matrix

__all__ = ["KernelOperator", "FitPass", "LowRankCotangent", "ResidualCotangent", "column_stats", "gram_stats",
           "target_sums", "gram_stats_trusted", "check_policy", "GRAM_GAIN", "gram_pays", "gram_now", "gram_fits_device", "gram_memory_advice", "stream_memory_advice", "GPU_EVAL_S", "GPU_GRAM_S", "GPU_GRAM8_S", "GPU_GRAM64_S", "GPU_PRODUCT_S",
           "GPU_GRAM_BYTES", "TENSOR_STATS_MIN_RATIO"]

#: Ratio of the machine's speed on the Gram matrix's rank updates to its speed on the
#: skinny products of a streaming normal product, times 4 (their flop ratio):
#: G pays after about m / (GRAM_GAIN * k) normal products (measured on the CPU,
#: docs/stochastic.md, "Passes per step").
GRAM_GAIN = 8.0


# GPU cost model of the two routes, seconds per unit of work (one H200, float32 data, d = 28;
# measured pieces, docs/solvers.md "The Gram matrix on a GPU"):
#: Kernel evaluation per entry of ``K``: a distance GEMM plus one fused pass (0.40 s for n m = 5e10).
GPU_EVAL_S = 8.0e-12
#: The Gram matrix per :math:`n m^2` on float16 tensor cores (``TENSOR_CORES = "float16"``):
#: 2.7 s for n m^2 = 2.5e14 (one H100, with its block sums).
GPU_GRAM_S = 1.1e-14
#: The Gram matrix per :math:`n m^2` on int8 tensor cores (``TENSOR_CORES = "int8"``): four
#: int8 products, about 2e15 operations at n m^2 = 2.5e14; an estimate of 2 s from the H100's
#: int8 rate, not yet measured.
GPU_GRAM8_S = 8.0e-15
#: The Gram matrix per :math:`n m^2` in float64 products (float64 data, a held kernel, or
#: ``nyhopt.ops.gram.TENSOR_CORES`` off): 10.7 s for n m^2 = 2.5e14 on one H100 (13.6 s on
#: one H200, in an earlier run).
GPU_GRAM64_S = 4.3e-14
#: Skinny products of a streaming normal product per :math:`n m k` (0.22 s for k = 21 at n m = 5e10).
GPU_PRODUCT_S = 2.1e-13
#: Bytes per :math:`m^2` the GPU Gram route holds at once: float64 ``G``, its two float64 parts
#: and their float32 sums, and the ``m x m`` matrices of the solve.
GPU_GRAM_BYTES = 64

#: Smallest :math:`r_j^T r_j / (w_j^T w_j + u_j^T u_j)`, in every column, for which
#: :meth:`KernelOperator.fit_pass` keeps the sums it read from an int8 tensor-core :math:`G`
#: (relative error about 6e-8): their error then stays below about 1e-5 of :math:`r_j^T r_j`.
TENSOR_STATS_MIN_RATIO = 1e-2


def _device_free_bytes(xp):
    """Free memory of the current device, counting blocks free in CuPy's pool."""
    return int(xp.cuda.Device().mem_info[0] + xp.get_default_memory_pool().free_bytes())


def gram_fits_device(m, xp, free_bytes=None) -> bool:
    """Whether the GPU Gram route (:data:`GPU_GRAM_BYTES` per ``m^2``) fits in half the free device memory."""
    free = _device_free_bytes(xp) if free_bytes is None else free_bytes
    return GPU_GRAM_BYTES * m * m <= free // 2


def gram_memory_advice(m) -> list:
    """What to change when the GPU Gram route (:data:`GPU_GRAM_BYTES` per ``m^2``) does not fit: tips."""
    return [f"the Gram route holds G = K^T K and its parts, about {format_bytes(GPU_GRAM_BYTES * m * m)} for "
            f"m = {m} centers: stream the products instead with the objective option gram=False "
            "(make_objective('stoch-prop', X, y, gram=False), or tune(..., objective_options={'gram': False}))",
            "fewer centers shrink everything m-sized (G by their square)"]


def stream_memory_advice(n, m, dtype, xp=None) -> list:
    """What to change when the row blocks (or a held kernel) of an ``n x m`` problem do not fit in GPU memory."""
    itemsize = np.dtype(dtype).itemsize
    tips = [f"each row block holds b x {m} kernel values, b sized by the memory budget (now "
            f"{format_bytes(get_memory_budget())}): lower it with nyhopt.set_memory_budget(nbytes) or "
            "'with nyhopt.memory_budget(nbytes):'",
            f"a kernel held whole takes {format_bytes(n * m * itemsize)} (allowed up to the cache budget, now "
            f"{format_bytes(get_cache_budget(xp))}): nyhopt.set_cache_budget(0) streams it instead"]
    if np.dtype(dtype) == np.float64:
        tips.append("float32 data (X.astype('float32'), or tune's dtype='float32') halve every n-sized array")
    tips.append("fewer centers shrink everything m-sized")
    return tips


def gram_pays(m, k, products, xp=np, *, dtype=np.float32, held=False, free_bytes=None) -> bool:
    r"""Whether forming :math:`K^T K` beats ``products`` normal products with ``k`` columns.

    CPU: ``m <= GRAM_GAIN * k * products`` (measured constant).  GPU: the
    cost model of the module notes, per :math:`n m`,

    .. math::  p\,(e + c\,k) \ge e + a\,m,

    with :math:`e` = :data:`GPU_EVAL_S` (0 when the kernel is ``held``: no
    evaluation on either side), :math:`c` = :data:`GPU_PRODUCT_S`, and
    :math:`a` = :data:`GPU_GRAM8_S` or :data:`GPU_GRAM_S` for float32 data on
    int8 or float16 tensor cores (``nyhopt.ops.gram.TENSOR_CORES``), else
    :data:`GPU_GRAM64_S` (float64 data, a held kernel, or tensor cores off);
    and only when :func:`gram_fits_device` (``free_bytes``: the device's free
    memory, read from CuPy when None).
    """
    if not is_cupy_namespace(xp):
        return m <= GRAM_GAIN * k * products
    if not gram_fits_device(m, xp, free_bytes):
        return False
    route = None if held else _gram.tensor_core_route(dtype)
    a = {"int8": GPU_GRAM8_S, "float16": GPU_GRAM_S}.get(route, GPU_GRAM64_S)
    e = 0.0 if held else GPU_EVAL_S
    return products * (e + GPU_PRODUCT_S * k) >= e + a * m


def gram_now(op, pays) -> bool:
    """Whether operator ``op`` forms :math:`G` before its next normal product (the ski-rental rule).

    Never once formed or with ``gram_policy`` False, always with True; with
    ``"auto"`` when ``pays()`` (the placement's price of the Gram pass against
    the products streamed so far) says so.
    """
    if op.gram is not None or op.gram_policy is False:
        return False
    return op.gram_policy is True or bool(pays())


class FitPass(NamedTuple):
    """What the fit pass ``u = K a`` returns (:meth:`KernelOperator.fit_pass`).

    ``u`` is ``K a`` (n x k, data dtype; on the workers for a sharded
    operator), or None when the sums came from the Gram matrix
    (:func:`gram_stats`, no pass); ``KtKa``, ``KtW`` are :math:`K^T u`, :math:`K^T W` (m x k,
    None unless ``normal``); ``wu``, ``uu``, ``rr``, ``ww``, ``cross`` are
    the float64 sums of :func:`column_stats` (``cross``: the products
    :math:`(W - u)^T (W - u)_{:,-1}` of every residual column with the last
    one, None unless asked; the constant mean of ``stoch-prop``, whose last
    right-hand side is the column of ones).
    """

    u: object
    KtKa: object
    KtW: object
    wu: object
    uu: object
    rr: object
    ww: object
    cross: object = None


def _checked_args(kernel, valid, Z):
    """``(X, Z, ell, xp)`` for an unchecked adjoint, or None when ``X`` was not checked (``valid`` None).

    ``valid``: the operator's checked ``(X, Z)``; a ``Z`` other than that
    one is checked here (one host read on a GPU instead of two).
    """
    if valid is None:
        return None
    X, Zv = valid
    xp = get_namespace(X, Z)
    if Z is not Zv:
        Z = check_matrix(Z, "Z", xp, dtype=X.dtype, n_features=X.shape[1])
    ell = kernel.lengthscale_array(X.shape[1])
    kernel.kind  # validates Matern's nu
    return X, Z, ell, xp


class LowRankCotangent(NamedTuple):
    """A cotangent ``P Q^T`` on ``k(X, Z)`` that contracts itself (:meth:`contract`).

    What :meth:`KernelOperator.residual_cotangent` returns;
    :func:`nyhopt.objectives._base.params_gradient` calls :meth:`contract`
    on any cotangent block that has one (the sharded operator's runs on the workers).
    ``valid``: ``(X, Z)`` as the operator checked them (the adjoint then
    skips the check of ``X``, and of ``Z`` when it is that array), or None.
    """

    X: object
    P: object
    Q: object
    valid: object = None

    def contract(self, kernel, Z, wrt):
        """:math:`\\partial \\langle P Q^T, k(X, Z)\\rangle` w.r.t. ``wrt`` (a KernelGrad), one adjoint pass."""
        args = _checked_args(kernel, self.valid, Z)
        if args is None:
            return adjoint_lowrank(kernel, self.X, Z, self.P, self.Q, wrt=wrt)
        X, Z, ell, xp = args
        return _adjoint_lowrank(kernel, X, Z, self.P, self.Q, ell, xp, wrt)


class ResidualCotangent(NamedTuple):
    r"""The cotangent ``P Q^T`` with :math:`P = P_0 - [K B \mid 0]`, ``K = k(X, Z)``, contracted in one pass.

    What :meth:`KernelOperator.residual_cotangent` returns when the fit pass
    formed no :math:`u = K a` (the sums came from the Gram matrix): the
    adjoint pass forms each row block's :math:`K_b B` from the kernel values
    it evaluates anyway (:func:`nyhopt.ops.adjoint_residual`).
    ``P0`` (n, r), ``B`` (m, kb <= r), ``Q`` (m, r); ``valid`` as for
    :class:`LowRankCotangent`.
    """

    X: object
    P0: object
    B: object
    Q: object
    valid: object = None

    def contract(self, kernel, Z, wrt):
        """:math:`\\partial \\langle P Q^T, k(X, Z)\\rangle` w.r.t. ``wrt`` (a KernelGrad), one adjoint pass."""
        args = _checked_args(kernel, self.valid, Z)
        if args is None:
            return adjoint_residual(kernel, self.X, Z, self.P0, self.B, self.Q, wrt=wrt)
        X, Z, ell, xp = args
        return _adjoint_residual(kernel, X, Z, self.P0, self.B, self.Q, ell, xp, wrt)


def target_sums(W, xp, cross=False, memo=None):
    """``(W.W per column, W^T W[:, -1] or None)`` in float64, over row blocks (no ``n x k`` float64 copy).

    ``memo``: a dict that keeps the sums of the last ``W`` (by identity; the
    caller must not change ``W`` in place while it keeps ``memo``), so that
    the same right-hand sides are summed once (:math:`O(n k)`: 0.4 s at
    n = 2e6, k = 22 on this CPU).
    """
    if memo is not None and memo.get("W") is W and (memo["wl"] is not None or not cross):
        return memo["ww"], memo["wl"] if cross else None
    n, k = W.shape
    f64 = xp.float64
    ww = xp.zeros(k, dtype=f64)
    wl = xp.zeros(k, dtype=f64) if cross else None
    step = max(1, (1 << 20) // max(k, 1))
    for lo in range(0, n, step):
        Wb = W[lo:lo + step].astype(f64, copy=False)
        ww += xp.einsum("ij,ij->j", Wb, Wb)
        if cross:
            wl += xp.ascontiguousarray(Wb[:, -1]) @ Wb
    if memo is not None:
        memo.update(W=W, ww=ww, wl=wl)
    return ww, wl


def gram_stats(G, KtW, a, ww, wlast=None):
    r"""The sums of :func:`column_stats` from :math:`G = K^T K` and :math:`K^T W`, without :math:`u = K a`.

    ``G`` (m, m), ``KtW`` (m, k), ``a`` (m, k) float64; ``ww`` the column
    sums :math:`W_j^T W_j` and ``wlast`` :math:`W^T W_{:,-1}` (for ``cross``;
    :func:`target_sums`).  Returns ``(K^T u, W.u, u.u, r.r, W.W, r^T r_last or None)``.

    Notes
    -----
    With :math:`u_j = K a_j`: :math:`K^T u = G a`,
    :math:`w_j^T u_j = (K^T W)_j^T a_j`, :math:`u_j^T u_j = a_j^T G a_j`,
    :math:`r_j^T r_j = w_j^T w_j - 2 w_j^T u_j + u_j^T u_j` and
    :math:`R^T r_{-1} = W^T w_{-1} - (K^T W)^T a_{-1} - a^T (K^T W)_{-1} + a^T G a_{-1}`.
    The residual sums are differences of terms of size :math:`\|w_j\|^2` (or
    more, when the entries of :math:`a_j` cancel): their absolute error is the
    relative error of :math:`G` and :math:`K^T W` times those terms, so
    relative to :math:`r_j^T r_j` it grows as :math:`\|w_j\|^2 / \|r_j\|^2`
    (measured in docs/stochastic.md, "Passes per step").
    """
    KtKa = G @ a
    wu = (KtW * a).sum(axis=0)
    uu = (a * KtKa).sum(axis=0)
    rr = ww - 2.0 * wu + uu
    cross = None
    if wlast is not None:
        cross = wlast - KtW.T @ a[:, -1] - a.T @ KtW[:, -1] + a.T @ KtKa[:, -1]
    return KtKa, wu, uu, rr, ww, cross


def gram_stats_trusted(route, rr, ww, uu, xp=np) -> bool:
    """Whether the sums of :func:`gram_stats` from a :math:`G` of tensor-core ``route`` may be kept.

    Always for float64 products (``route`` None), never for ``"float16"``;
    for ``"int8"`` when :math:`r_j^T r_j \\ge` :data:`TENSOR_STATS_MIN_RATIO`
    :math:`(w_j^T w_j + u_j^T u_j)` in every column.
    """
    if route is None:
        return True
    return route == "int8" and bool(xp.all(rr >= TENSOR_STATS_MIN_RATIO * (ww + uu)))


def column_stats(W, u, xp, plain=False, cross=False):
    """Float64 sums ``(W.u, u.u, r.r, W.W or None, r^T r_last or None)`` of ``W`` and ``u = K a``.

    Per column, with ``r = W - u``; ``W.W`` only when ``plain`` (the plain
    value form needs it, the energy form does not); with ``cross`` also the
    products ``r^T r[:, -1]`` of every residual column with the last one.
    """
    W64, u64 = W.astype(xp.float64, copy=False), u.astype(xp.float64, copy=False)
    r = W64 - u64
    return (xp.sum(W64 * u64, axis=0), xp.sum(u64 * u64, axis=0), xp.sum(r * r, axis=0),
            xp.sum(W64 * W64, axis=0) if plain else None, r.T @ r[:, -1] if cross else None)


def check_policy(value, name):
    """A ``gram``-style policy checked: ``"auto"``, True or False (a ``ValueError``/``TypeError`` naming ``name``)."""
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f"{name} must be 'auto', True or False, got {value!r}")
        return value
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be 'auto', True or False, got {value!r}")
    return bool(value)


class KernelOperator:
    """Products with :math:`K = k(X, Z)` for one solve; see the module notes.

    This is the in-memory placement of the kernel operator interface that
    :func:`nyhopt.solvers.falkon.falkon_operator_solve` and
    :class:`~nyhopt.objectives.stoch_prop.StochasticProp` run on; the sharded
    one is :class:`nyhopt.distributed.sharded.ShardedOperator`, and
    :func:`nyhopt.placement.kernel_operator` picks between them.  The interface:

    * attributes ``kernel``, ``Z`` (m, d), ``shape`` ``(n, m)``, ``dtype``
      (of the data), ``xp`` (array module of the driver's ``m``-sized work),
      ``engine``, ``passes``, ``gram``, ``gram_rhs``, ``gram_policy``;
    * :meth:`check_targets` (an ``n``-sized operand ``U`` of this placement),
      :meth:`kmv`, :meth:`kmtv`, :meth:`normal_matvec` (with extra
      right-hand sides), :meth:`form_gram` (the Gram pass),
      :meth:`fit_pass` (``u = K a`` with its column sums; from the Gram
      matrix, with no pass and no ``u``, when :meth:`stats_from_gram`),
      :meth:`stats_from_gram`,
      :meth:`residual_cotangent` (the low-rank adjoint pass's cotangent),
      :meth:`rows` (a row sample, on the driver).

    Parameters
    ----------
    kernel : Kernel
    X : array (n, d)
    Z : array (m, d)
        Same array module as ``X`` (cast to its dtype).
    cache : {"auto", True, False, "float16"} or CachedKernel, default "auto"
        Hold :math:`K` in memory: ``"auto"`` when ``n m`` numbers of the
        data dtype fit the cache budget (:func:`nyhopt.get_cache_budget`),
        ``"float16"`` in float16 (float32 data, :mod:`nyhopt.ops.half`), or
        a :class:`~nyhopt.ops.cached.CachedKernel` of these ``X``, ``Z``.
    gram : {"auto", True, False}, default "auto"
        Use :math:`K^T K` for the normal products: ``True`` from the first
        one, ``"auto"`` once streaming has cost as much as forming it
        (:func:`gram_pays`: a measured constant on the CPU, a cost model on a
        GPU), ``False`` never.
    checked : bool, default False
        ``X`` and ``Z`` are valid already (:func:`nyhopt.inputs._validation.check_matrix`,
        ``Z`` in the dtype of ``X``; :func:`nyhopt.placement.kernel_operator`
        checks them).  Otherwise the first streaming product checks them.
        Either way they are checked once, not at every product: the
        streaming products call the unchecked forms of :mod:`nyhopt.ops`
        (on a GPU every check is a host synchronization).

    Attributes
    ----------
    passes : int
        Sweeps over the ``n x m`` kernel so far (see the module notes).
    gram : array (m, m) or None
        :math:`K^T K` (float64) once formed.
    gram_rhs : array (m, k) or None
        :math:`K^T U` (float64) of the ``U`` given to :meth:`form_gram`.
    cache : CachedKernel or None
    """

    def __init__(self, kernel, X, Z, *, cache="auto", gram="auto", checked=False):
        self.xp = xp = get_namespace(X, Z)
        self._checked = bool(checked)
        self._blocks = None
        self.kernel, self.X = kernel, X
        self.Z = xp.asarray(Z).astype(X.dtype, copy=False)
        n, m = X.shape[0], self.Z.shape[0]
        self.passes = 0
        self.gram = self.gram_rhs = None
        self._gram_route = None
        self.gram_policy = check_policy(gram, "gram")
        self._streamed = 0
        if isinstance(cache, CachedKernel):
            if tuple(cache.shape) != (n, m):
                raise ValueError(f"cache holds a {tuple(cache.shape)} kernel matrix, expected {(n, m)}")
            self.cache = cache
        else:
            storage = cache_storage(cache, n, m, X.dtype, xp)
            self.cache = None
            if storage is not None:
                with cpu_threads("pool", xp):
                    self.cache = CachedKernel(kernel, X, self.Z, storage)
                self.passes += 1

    @property
    def shape(self):
        return (self.X.shape[0], self.Z.shape[0])

    @property
    def dtype(self):
        """dtype of the data (and of ``V`` in the products)."""
        return self.X.dtype

    def check_targets(self, Y, name="Y"):
        """``Y`` validated as an ``n``-sized operand (n, k) of the data dtype; returns ``(Y, k)``."""
        Y, _ = check_targets(Y, name, self.shape[0], self.xp, dtype=self.X.dtype)
        return Y, int(Y.shape[1])

    def _stream(self):
        """The checked ``X``, ``Z`` of the streaming products (a :class:`KernelBlocks`), made at the first one.

        It also holds the GPU's overflow bound of the distance GEMM
        (:func:`nyhopt.ops._blocks.dot_safe`), decided once for all the products.
        """
        if self._blocks is None:
            self._blocks = KernelBlocks(self.kernel, self.X, self.Z, checked=self._checked)
        return self._blocks

    def _valid(self):
        """``(X, Z)`` as checked, or None when nothing has checked them yet."""
        if self._blocks is not None:
            return self._blocks.X, self._blocks.Z
        return (self.X, self.Z) if self._checked else None

    def close(self):
        """Drop a held kernel and the Gram matrix (the arrays belong to the caller); products stream after."""
        self.cache = None
        self.gram = self.gram_rhs = None

    def rows(self, idx):
        """Rows ``idx`` (sorted int64 host indices) of ``X``, on the driver."""
        return self.X[self.xp.asarray(idx)]

    def stats_from_gram(self, W):
        """Whether :meth:`fit_pass` of ``W`` may read its sums from the Gram matrix (no pass).

        When :math:`G` and :math:`K^T W` (``gram_rhs``, ``k`` columns like
        ``W``) are held and :math:`G` comes from float64 products (of the
        held kernel or of each block) or from the int8 tensor-core route
        (:data:`nyhopt.ops.gram.TENSOR_CORES`).  The int8 route's :math:`G`
        is accurate to about 6e-8, which the differences of
        :func:`gram_stats` amplify by :math:`(\\|w_j\\|^2 + \\|u_j\\|^2) /
        \\|r_j\\|^2`: :meth:`fit_pass` keeps its sums only when that ratio is
        at most ``1 / TENSOR_STATS_MIN_RATIO`` in every column, and makes the
        pass otherwise.  The float16 route's :math:`G` is never used for them.
        """
        return (self.gram is not None and self.gram_rhs is not None and self._gram_route in (None, "int8")
                and tuple(self.gram_rhs.shape) == (self.shape[1], int(W.shape[1])))

    def fit_pass(self, a, W, normal, plain=False, cross=False, memo=None):
        """The sums of ``u = K a`` and ``W`` (:func:`column_stats`; a :class:`FitPass`), in at most one pass.

        With :math:`G` and :math:`K^T W` from the Gram pass
        (:meth:`stats_from_gram`) they come from :func:`gram_stats` with no
        pass and ``u`` is None (``memo``: a dict keeping the sums of ``W``
        for the next call, see :func:`target_sums`).  Otherwise the pass
        forms ``u``; with ``normal`` it also gives :math:`K^T u` and
        :math:`K^T W` in the same pass.  ``plain``, ``cross``: the optional
        sums of :func:`column_stats`.
        """
        xp = self.xp
        if self.stats_from_gram(W):
            f64 = xp.float64
            ww, wlast = target_sums(W, xp, cross, memo)
            KtKa, wu, uu, rr, ww, cr = gram_stats(self.gram, self.gram_rhs.astype(f64, copy=False),
                                                  a.astype(f64, copy=False), ww, wlast)
            if gram_stats_trusted(self._gram_route, rr, ww, uu, xp):
                return FitPass(None, KtKa if normal else None, self.gram_rhs if normal else None, wu, uu, rr,
                               ww if plain else None, cr)
        a_dt = a.astype(self.X.dtype, copy=False)
        KtKa = KtW = None
        if normal and self.gram is not None and self.gram_rhs is not None:
            u, KtKa, KtW = self.kmv(a_dt), self.gram @ a.astype(xp.float64, copy=False), self.gram_rhs
        elif normal:
            KtKa, KtW, u = self.normal_matvec(a_dt, W, kv=True)
        else:
            u = self.kmv(a_dt)
        return FitPass(u, KtKa, KtW, *column_stats(W, u, xp, plain, cross))

    def residual_cotangent(self, W, fit, beta, a, extra=None):
        """Cotangent ``P Q^T`` on :math:`K`: ``P = 2 (W - u) diag(beta)``, ``Q = a`` (``u`` of ``fit``).

        A symmetric matrix ``beta`` (bilinear forms of the columns, the
        constant mean of ``stoch-prop``) gives ``P = 2 (W - u) beta``.

        ``extra = (omega, Gam)`` appends the columns ``W[:, :k] diag(omega)``
        to ``P`` and ``Gam`` to ``Q``.  Contracted by
        :func:`nyhopt.objectives._base.params_gradient` (the low-rank adjoint pass).
        When ``fit`` has no ``u`` (its sums came from the Gram matrix), a
        :class:`ResidualCotangent` with :math:`P_0 = 2 W \\beta` and
        :math:`B = 2 a \\beta` (:math:`P = P_0 - K B`): the adjoint pass forms
        :math:`K B` itself.
        """
        xp, X = self.xp, self.X
        f64 = xp.float64
        if fit.u is None:
            W64 = W.astype(f64, copy=False)
            a64 = a.astype(f64, copy=False)
            P0 = 2.0 * (W64 @ beta if beta.ndim == 2 else W64 * beta[None, :])
            B = 2.0 * (a64 @ beta if beta.ndim == 2 else a64 * beta[None, :])
            Q = a
            if extra is not None:
                omega, Gam = extra
                k = omega.shape[0]
                P0 = xp.concatenate([P0, W64[:, :k] * omega[None, :]], axis=1)
                Q = xp.concatenate([a, Gam], axis=1)
            dt = X.dtype
            return ResidualCotangent(X, P0.astype(dt, copy=False), B.astype(dt, copy=False), Q.astype(dt, copy=False),
                                     self._valid())
        R2 = 2.0 * (W.astype(f64, copy=False) - fit.u.astype(f64, copy=False))
        P = R2 @ beta if beta.ndim == 2 else R2 * beta[None, :]  # a matrix beta: bilinear forms
        Q = a
        if extra is not None:
            omega, Gam = extra
            k = omega.shape[0]
            P = xp.concatenate([P, W[:, :k].astype(f64) * omega[None, :]], axis=1)
            Q = xp.concatenate([a, Gam], axis=1)
        return LowRankCotangent(X, P.astype(X.dtype, copy=False), Q.astype(X.dtype, copy=False), self._valid())

    @property
    def engine(self):
        """The CPU engine of the products (:mod:`nyhopt.backend._threads`): ``"pool"`` for matrix products."""
        return "pool" if self.cache is not None or self.gram_policy is True else "numba"

    def _phase(self):
        return cpu_threads(self.engine, self.xp)

    def form_gram(self, U=None):
        """Form :math:`G = K^T K` now (one pass, with :math:`K^T U` if given); returns ``K^T U`` (float64) or None.

        Raises
        ------
        MemoryError
            On a GPU, when the Gram route cannot fit (:func:`gram_memory_advice`):
            before anything is allocated when its :data:`GPU_GRAM_BYTES` per
            :math:`m^2` exceed the device's free memory, else when CuPy runs out.
        """
        m = self.shape[1]
        free = _device_free_bytes(self.xp) if is_cupy_namespace(self.xp) else None
        if free is not None and GPU_GRAM_BYTES * m * m > free:
            raise DeviceMemoryError([f"forming the Gram matrix G = K^T K (m = {m} centers)"],
                                    f"the Gram route does not fit on this GPU: it needs about "
                                    f"{format_bytes(GPU_GRAM_BYTES * m * m)} and {format_bytes(free)} are free; "
                                    "nothing was allocated", gram_memory_advice(m))
        with device_memory_advice(self.xp, f"forming the Gram matrix G = K^T K (m = {m} centers)",
                                  lambda: gram_memory_advice(m)):
            if self.cache is not None:
                with cpu_threads("pool", self.xp):
                    self.gram, KtU = self.cache.gram(U)
                self._gram_route = None
            else:
                setting = _gram.tensor_core_setting()  # read once: the route taken is the route trusted
                valid = self._valid()
                X, Z = valid or (self.X, self.Z)
                self.gram, KtU = gram_matrix(self.kernel, X, Z, U, tensor_cores=setting,
                                             checked=valid is not None)
                self._gram_route = _gram.tensor_core_route(self.X.dtype, self.xp, setting)
        self.passes += 1
        self.gram_rhs = KtU
        return KtU

    def _wants_gram(self, k):
        return gram_now(self, lambda: gram_pays(self.Z.shape[0], k, self._streamed, self.xp, dtype=self.X.dtype,
                                                held=self.cache is not None))

    def kmv(self, V):
        """:math:`K V`, (n, k) in the data dtype."""
        self.passes += 1
        with self._phase():
            if self.cache is not None:
                return self.cache.kmv(V)
            return self._stream().kmv(V)

    def kmtv(self, U):
        """:math:`K^T U`, (m, k)."""
        self.passes += 1
        with self._phase():
            if self.cache is not None:
                return self.cache.kmtv(U)
            return self._stream().kmtv(U)

    def normal_matvec(self, V, U=None, *, kv=False):
        """``(K^T K V, K^T U or None)`` (and :math:`K V` with ``kv``), like :func:`nyhopt.ops.normal_matvec`."""
        xp = self.xp
        V2 = xp.asarray(V)
        V2 = V2[:, None] if V2.ndim == 1 else V2
        KtU = None
        if self._wants_gram(V2.shape[1]):
            KtU = self.form_gram(U)
            U = None
        if self.gram is not None:
            KtKV = self.gram @ V2.astype(xp.float64, copy=False)
            if U is not None:
                KtU = self.kmtv(U)
            return (KtKV, KtU, self.kmv(V2)) if kv else (KtKV, KtU)
        self.passes += 1
        self._streamed += 1
        with self._phase():
            if self.cache is not None:
                return self.cache.normal_matvec(V2, U, kv=kv)
            return self._stream().normal_matvec(V2, U, kv=kv)
