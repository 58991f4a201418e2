r"""The Gram matrix :math:`K^T K` of :math:`K = k(X, Z)` in one pass over the data.

A Falkon solve spends one pass :math:`V \mapsto K^T (K V)` per CG iteration,
:math:`4 n m k` flops for ``k`` right-hand sides, in skinny products that run
far below the machine's peak.  Forming :math:`G = K^T K` costs
:math:`n m^2` flops once (a symmetric rank-``b`` update per row block, near
peak), after which every iteration is the ``m x m`` product :math:`G V`.
With ``m`` centers of the order of ``k`` times the number of iterations this
is the cheaper way to the same solve (:class:`nyhopt.ops.operator.KernelOperator`
decides; ``docs/stochastic.md``, "Passes per step", has the measurements).

Memory: one ``b x m`` kernel block at a time (the memory budget), plus
:math:`G`; nothing ``n x m``.  The products are float64 whatever the data
dtype: :math:`K^T K` squares the condition number of :math:`K`, and float32
rank updates lose its small eigenvalues (measured: Falkon's CG broke down on
float32 protein data with a float32 Gram matrix, and converges with a float64
one; the streaming passes, whose errors scale with :math:`\|K V\|`, do not
need this).

On a GPU, float32 data take a tensor-core route, chosen by
:data:`TENSOR_CORES`: ``"int8"``, the default (:mod:`nyhopt.ops.gram8`: each
kernel value as three 8-bit digits, integer products with exact sums, added
in float64: as accurate as the float32 kernel, with no bias; checked once
per device by :func:`nyhopt.ops.gram8.device_check`) or ``"float16"``
(:mod:`nyhopt.ops.gram16`: float16 hi/lo parts with the tensor cores'
truncated float32 sums, biased low at large ``n``: kept to measure against);
``False``: float64 products, as on the CPU.

Examples
--------
>>> import numpy as np
>>> import nyhopt as nh
>>> from nyhopt import ops
>>> from nyhopt.ops.gram import gram_matrix
>>> rng = np.random.default_rng(0)
>>> X, U = rng.normal(size=(300, 2)), rng.normal(size=(300, 3))
>>> G, KtU = gram_matrix(nh.GaussianKernel(1.0), X, X[:20], U)
>>> K = ops.kernel_matrix(nh.GaussianKernel(1.0), X, X[:20])
>>> bool(np.allclose(G, K.T @ K)), bool(np.allclose(KtU, K.T @ U))
(True, True)
"""
from __future__ import annotations

import numpy as np

from ..backend._config import block_rows
from ..backend._parallel import sum_ranges
from ..backend._threads import cpu_threads
from ..backend import is_cupy_namespace
from . import _operand, _prepare
from ._blocks import KernelBlocks

__all__ = ["gram_matrix", "block_gram", "tensor_core_route", "tensor_core_setting", "TENSOR_CORES"]

#: On a GPU, how the Gram matrix of float32 data is formed (read at each call): ``"int8"`` (the
#: default: :mod:`nyhopt.ops.gram8`, after its once-per-device check, float64 products if that
#: fails), ``"float16"`` (:mod:`nyhopt.ops.gram16`) or ``False`` (float64 products).
TENSOR_CORES = "int8"

_ROUTES = (False, "int8", "float16")


def tensor_core_setting(setting=None):
    """``setting`` checked (one of ``False``, ``"int8"``, ``"float16"``); None: :data:`TENSOR_CORES`, read now.

    A caller that forms the Gram matrix elsewhere (the workers of a cluster,
    in other processes) reads the setting once here and passes it on, so
    that one value governs both sides.
    """
    value = TENSOR_CORES if setting is None else setting
    # ``value in _ROUTES`` would take 0 and 0.0 for False
    if not any(value is r if isinstance(r, bool) else value == r for r in _ROUTES):
        name = "nyhopt.ops.gram.TENSOR_CORES" if setting is None else "tensor_cores"
        raise ValueError(f"{name} must be one of {_ROUTES}, got {value!r}")
    return value


def tensor_core_route(dtype, xp=None, setting=None):
    """The tensor-core route (``"int8"``, ``"float16"``) of a Gram matrix of ``dtype`` data on ``xp``, or None.

    ``xp=None``: on a GPU (the caller knows).  ``setting``: as
    :data:`TENSOR_CORES` (None: that global, read now; see :func:`tensor_core_setting`).
    None for ``"int8"`` on a device whose :func:`nyhopt.ops.gram8.device_check`
    failed in this process (its Gram matrices take float64 products).
    """
    setting = tensor_core_setting(setting)
    gpu = xp is None or is_cupy_namespace(xp)
    if not (setting and gpu and np.dtype(dtype) == np.float32):
        return None
    if setting == "int8":
        from .gram8 import failed_here

        if failed_here():
            return None
    return setting


#: Rows per range of the rank updates: fixed, so that the sums do not depend on the thread count.
RANGE_ROWS = 4096


def block_gram(K, U, xp):
    """``(K^T K, K^T U or None)`` of one row block ``K`` (b, m), in float64, over row ranges.

    On the CPU the ranges of :data:`RANGE_ROWS` rows run on nyhopt's worker
    threads (in a ``"pool"`` phase), ``K^T K`` as symmetric rank updates
    (NumPy's ``a.T @ a``), and are added in row order.
    """
    f64 = xp.float64

    def part(lo, hi):
        Kr = K[lo:hi].astype(f64, copy=False)
        return Kr.T @ Kr, (None if U is None else Kr.T @ U[lo:hi].astype(f64, copy=False))

    if is_cupy_namespace(xp):
        return part(0, K.shape[0])
    return sum_ranges(part, K.shape[0], RANGE_ROWS)


def gram_matrix(kernel, X, Z, U=None, *, tensor_cores=None, checked=False):
    r"""``(K^T K, K^T U or None)`` for :math:`K = k(X, Z)`, in one pass over ``X``.

    Parameters
    ----------
    kernel : Kernel
    X : array (n, d)
    Z : array (m, d)
    U : array (n,) or (n, k), optional
        Columns whose products :math:`K^T U` are formed in the same pass.
    tensor_cores : {False, "int8", "float16"}, optional
        The tensor-core setting for float32 data on a GPU; None (default):
        :data:`TENSOR_CORES`, read at the call.  A caller in another process
        than the one whose setting counts (a worker of a cluster) is passed it.
    checked : bool, default False
        ``X`` and ``Z`` are valid already (a kernel operator's, a placed row
        block's): they are not checked again.

    Returns
    -------
    G : array (m, m), float64
        :math:`K^T K`, exactly symmetric.
    KtU : array (m, k), float64, or None

    Notes
    -----
    Costs :math:`n m (m + 2k)` flops and one kernel evaluation per entry.
    On a GPU with float32 data it is :func:`nyhopt.ops.gram8.gram_matrix8`
    or :func:`nyhopt.ops.gram16.gram_matrix16` as ``tensor_cores`` (or :data:`TENSOR_CORES`) says.
    On the CPU it runs as a ``"pool"`` phase (:mod:`nyhopt.backend._threads`): the
    kernel blocks and the rank updates are split over nyhopt's worker threads.
    """
    xp, X, Z, _ = _prepare(kernel, X, Z, (U, "U"), checked=checked)
    route = tensor_core_route(X.dtype, xp, tensor_cores)
    if route == "int8":
        from .gram8 import device_check, gram_matrix8

        if device_check(kernel, X, Z, xp):
            return gram_matrix8(kernel, X, Z, U, checked=True)  # checked above
        route = None
    if route == "float16":
        from .gram16 import gram_matrix16

        return gram_matrix16(kernel, X, Z, U, checked=True)
    n, m = X.shape[0], Z.shape[0]
    U2 = None if U is None else _operand(U, "U", n, X.dtype, xp)
    k = 0 if U2 is None else U2.shape[1]
    G = xp.zeros((m, m), dtype=xp.float64)
    KtU = None if U2 is None else xp.zeros((m, k), dtype=xp.float64)
    b = block_rows(n, m, X.dtype.itemsize, n_temps=1, per_row=k)
    blocks = KernelBlocks(kernel, X, Z, checked=True)  # validated above: no checks per block
    with cpu_threads("pool", xp):
        for lo in range(0, n, b):
            hi = min(n, lo + b)
            g, ku = block_gram(blocks.rows(lo, hi), None if U2 is None else U2[lo:hi], xp)
            G += g
            if KtU is not None:
                KtU += ku
    if is_cupy_namespace(xp):  # cuBLAS GEMMs are not exactly symmetric
        G = 0.5 * (G + G.T)
    return G, (None if KtU is None else (KtU[:, 0] if xp.asarray(U).ndim == 1 else KtU))
