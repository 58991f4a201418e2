"""Block-wise kernel products and adjoint contractions.

Public functions validate their inputs, pick the array module from them, and
dispatch to one implementation:

* CuPy arrays -> :mod:`nyhopt.ops._cupy` (cuBLAS blocks + CUDA RawKernels);
* NumPy arrays -> the implementation chosen per operation in ``CPU_IMPL``:
  ``"numpy"`` (:mod:`nyhopt.ops._reference`, BLAS based) or ``"numba"``
  (:mod:`nyhopt.ops._numba`, fused loops).

Row blocks are sized from the memory budget (:func:`nyhopt.set_memory_budget`).
Inside a ``"pool"`` phase (:mod:`nyhopt.backend._threads`, the exact objectives) the
kernel matrix, ``kmv`` and the adjoints cut the rows of ``X`` into ranges
that run on nyhopt's worker threads; ``kmtv`` and ``normal_matvec`` are not
split, so that their float32 results keep a single float64 accumulation.
:func:`adjoint_factored` contracts a cotangent given as products (that of
the exact objectives) block by block without forming it
(:mod:`nyhopt.ops._factored`).
:mod:`nyhopt.ops.cached` holds the kernel matrix for repeated products.
"""
from __future__ import annotations

import importlib

import numpy as np

from ..backend import _parallel
from ..backend._parallel import active_workers, map_ranges, min_rows
from ..inputs._validation import check_matrix
from ..backend import get_namespace, is_cupy_namespace
from ._grad import KernelGrad
from . import _reference

__all__ = [
    "kernel_matrix",
    "kmv",
    "kmtv",
    "normal_matvec",
    "adjoint_dense",
    "adjoint_lowrank",
    "adjoint_residual",
    "adjoint_factored",
    "CPU_IMPL",
    "set_cpu_impl",
]

#: Implementation used on the CPU for each operation ("numpy" or "numba"),
#: chosen by measurement (see asv_bench and docs/performance-ops.md).
CPU_IMPL = {
    "kernel_matrix": "numba",
    "kmv": "numba",
    "kmtv": "numba",
    "normal_matvec": "numba",
    "adjoint_dense": "numba",
    "adjoint_lowrank": "numba",
}


def set_cpu_impl(op: str | None = None, impl: str = "numpy") -> None:
    """Choose the CPU implementation ("numpy" or "numba") of one operation, or all."""
    if impl not in ("numpy", "numba"):
        raise ValueError(f"impl must be 'numpy' or 'numba', got {impl!r}")
    ops = list(CPU_IMPL) if op is None else [op]
    for name in ops:
        if name not in CPU_IMPL:
            raise ValueError(f"unknown operation {name!r}; expected one of {sorted(CPU_IMPL)}")
        CPU_IMPL[name] = impl


def _module(op, xp, name=None):
    """The implementation of operation ``op`` for ``xp`` (its function ``name``, default ``op``)."""
    if is_cupy_namespace(xp):
        mod = importlib.import_module("nyhopt.ops._cupy")
    elif CPU_IMPL[op] == "numba":
        mod = importlib.import_module("nyhopt.ops._numba")
    else:
        mod = _reference
    return getattr(mod, name or op)


def _prepare(kernel, X, Z, *others, checked=False):
    """Validate ``X``, ``Z`` (and extra operands) and return (xp, X, Z, ell).

    ``checked``: ``X`` and ``Z`` are valid already (as this returns them;
    a caller that checked them): only the array module and the kernel are checked.
    """
    if not (hasattr(kernel, "lengthscale_array") and hasattr(kernel, "profile")):  # nyhopt.kernels imports ops
        raise TypeError(f"kernel must be a nyhopt Kernel instance (nyhopt.GaussianKernel(...)), got {kernel!r}")
    xp = get_namespace(X, Z, *[o for o, _ in others])
    if not checked:
        X = check_matrix(X, "X", xp)
        Z = check_matrix(Z, "Z", xp, dtype=X.dtype, n_features=X.shape[1])
    ell = kernel.lengthscale_array(X.shape[1])
    kernel.kind  # validates Matern's nu
    return xp, X, Z, ell


def _operand(a, name, rows, dtype, xp):
    a = xp.asarray(a)
    if a.dtype.kind not in "biufO":
        raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or a.shape[0] != rows:
        raise ValueError(f"{name} must have {rows} rows, got shape {tuple(a.shape)}")
    if a.dtype != dtype:
        try:
            a = a.astype(dtype)
        except (TypeError, ValueError) as exc:  # an object array of non-numbers
            raise TypeError(f"{name} must hold real numbers ({exc})") from None
    return a


def _split_rows(xp, n, m):
    """Whether to cut the rows of ``X`` over nyhopt's worker pool (CPU, pool phase, enough work)."""
    return not is_cupy_namespace(xp) and active_workers() > 1 and n * m >= 2 * _parallel.MIN_ENTRIES


def _sum_grads(parts):
    """Add the :class:`KernelGrad` of row ranges (``X`` parts are stacked)."""
    first = parts[0]
    if len(parts) == 1:
        return first
    add = lambda name: None if getattr(first, name) is None else sum(getattr(g, name) for g in parts)  # noqa: E731
    Xg = None if first.X is None else np.concatenate([g.X for g in parts], axis=0)
    return KernelGrad(add("lengthscale"), add("centers"), Xg)


def kernel_matrix(kernel, X, Z=None, *, out=None, copy=None):
    """Dense kernel matrix ``k(X, Z)`` (``k(X, X)``, exactly symmetric, if Z is None).

    ``out``: a C-contiguous NumPy array of shape (n, m) and the dtype of
    ``X`` to write the matrix into (CPU only; its contents are overwritten),
    which is returned.  ``copy``: another such array that receives the same
    values (in the same pass with the fused loops).
    """
    symmetric = Z is None or Z is X
    xp, X, Z, ell = _prepare(kernel, X, X if Z is None else Z)
    n, m = X.shape[0], Z.shape[0]
    for name, a in (("out", out), ("copy", copy)):
        if a is not None and (is_cupy_namespace(xp) or not isinstance(a, np.ndarray) or a.shape != (n, m)
                              or a.dtype != X.dtype or not a.flags.c_contiguous or not a.flags.writeable):
            raise ValueError(f"{name} must be a writeable C-contiguous NumPy array of shape {(n, m)} and "
                             f"dtype {X.dtype}")
    return _kernel_block(kernel, X, Z, ell, xp, symmetric=symmetric, out=out, copy=copy)


def _kernel_block(kernel, X, Z, ell, xp, *, symmetric=False, out=None, copy=None, dot=None):
    """:func:`kernel_matrix` of arrays that are valid already: the same implementation, no checks.

    ``X``, ``Z``, ``ell`` and ``xp`` as :func:`_prepare` returns them (and
    ``out``, ``copy`` as :func:`kernel_matrix` checks them).  Validation reads
    the whole input and, on a GPU, waits for the device (a host
    synchronization per check); loops over row blocks validate once and
    call this for each block (:class:`nyhopt.ops._blocks.KernelBlocks`).  ``dot``: the GPU's
    choice of the GEMM form of the distances made once for all the blocks
    (:func:`nyhopt.ops._blocks.dot_safe`); None decides per block.
    """
    impl = _module("kernel_matrix", xp)
    n, m = X.shape[0], Z.shape[0]
    if dot is not None and is_cupy_namespace(xp) and not symmetric:
        return impl(kernel, X, Z, ell, xp, dot=dot)
    fused = impl is not _reference.kernel_matrix and not symmetric
    if symmetric or not _split_rows(xp, n, m) or impl is _reference.kernel_matrix:
        if out is not None and fused:
            return impl(kernel, X, Z, ell, xp, out=out, copy=copy)
        K = impl(kernel, X, Z, ell, xp, symmetric=symmetric)
        if copy is not None:
            copy[...] = K
        if out is None:
            return K
        out[...] = K
        return out
    if out is None:
        out = np.empty((n, m), dtype=X.dtype)
    map_ranges(lambda lo, hi: impl(kernel, X[lo:hi], Z, ell, xp, out=out[lo:hi],
                                   copy=None if copy is None else copy[lo:hi]), n, min_rows(m))
    return out


def _gpu_dot(xp, dot):
    """The keyword that hands a GPU implementation the loop's overflow bound (:func:`nyhopt.ops._blocks.dot_safe`)."""
    return {"dot": dot} if dot is not None and is_cupy_namespace(xp) else {}


def kmv(kernel, X, Z, V):
    """``k(X, Z) @ V`` block by block.

    Parameters
    ----------
    kernel : Kernel
    X : array (n, d)
    Z : array (m, d)
    V : array (m,) or (m, k)

    Returns
    -------
    array (n, k) (or (n,) when V is 1-D), dtype of X.
    """
    xp, X, Z, ell = _prepare(kernel, X, Z, (V, "V"))
    return _kmv(kernel, X, Z, V, ell, xp)


def _kmv(kernel, X, Z, V, ell, xp, dot=None):
    """:func:`kmv` of ``X``, ``Z`` that are valid already (as :func:`_prepare` returns them): no checks.

    The products of one solve (:class:`nyhopt.ops.operator.KernelOperator`)
    check ``X`` and ``Z`` once and call the unchecked forms :func:`_kmv`,
    :func:`_kmtv`, :func:`_normal_matvec`, :func:`_adjoint_lowrank` and
    :func:`_adjoint_residual` at every iteration: on a GPU each check is a
    host synchronization.  ``dot``: as for :func:`_kernel_block`.
    """
    V2 = _operand(V, "V", Z.shape[0], X.dtype, xp)
    impl = _module("kmv", xp)
    n, m = X.shape[0], Z.shape[0]
    if _split_rows(xp, n, m):
        out = np.concatenate(map_ranges(lambda lo, hi: impl(kernel, X[lo:hi], Z, V2, ell, xp), n, min_rows(m)))
    else:
        out = impl(kernel, X, Z, V2, ell, xp, **_gpu_dot(xp, dot))
    return out[:, 0] if xp.asarray(V).ndim == 1 else out


def kmtv(kernel, X, Z, U):
    """``k(X, Z).T @ U`` block by block; U (n,) or (n, k), result (m,) or (m, k)."""
    xp, X, Z, ell = _prepare(kernel, X, Z, (U, "U"))
    return _kmtv(kernel, X, Z, U, ell, xp)


def _kmtv(kernel, X, Z, U, ell, xp, dot=None):
    """:func:`kmtv` of arrays that are valid already (see :func:`_kmv`)."""
    U2 = _operand(U, "U", X.shape[0], X.dtype, xp)
    out = _module("kmtv", xp)(kernel, X, Z, U2, ell, xp, **_gpu_dot(xp, dot))
    return out[:, 0] if xp.asarray(U).ndim == 1 else out


def normal_matvec(kernel, X, Z, V, U=None, *, kv=False):
    """``K^T (K V)`` and optionally ``K^T U`` in a single pass over ``X``.

    This is the product of one Falkon CG iteration (``K = k(X, Z)``).

    Parameters
    ----------
    kv : bool, default False
        Also return ``K V`` (n, k), formed in the same pass anyway.

    Returns
    -------
    (KtKV, KtU) or (KtKV, KtU, KV) : arrays (m, k), (m, k') or None, and (n, k).
    """
    xp, X, Z, ell = _prepare(kernel, X, Z, (V, "V"), (U, "U"))
    return _normal_matvec(kernel, X, Z, V, ell, xp, U, kv=kv)


def _normal_matvec(kernel, X, Z, V, ell, xp, U=None, *, kv=False, dot=None):
    """:func:`normal_matvec` of arrays that are valid already (see :func:`_kmv`)."""
    V2 = _operand(V, "V", Z.shape[0], X.dtype, xp)
    U2 = None if U is None else _operand(U, "U", X.shape[0], X.dtype, xp)
    extra = _gpu_dot(xp, dot)
    if kv:
        return _module("normal_matvec", xp)(kernel, X, Z, V2, ell, xp, U=U2, kv=True, **extra)
    return _module("normal_matvec", xp)(kernel, X, Z, V2, ell, xp, U=U2, **extra)


def adjoint_dense(kernel, X, Z, G, wrt=("lengthscale", "centers")):
    """Gradients of ``<G, k(X, Z)>`` for a dense cotangent ``G`` of shape (n, m).

    Returns a :class:`~nyhopt.kernels.KernelGrad` (float64 arrays).
    """
    xp, X, Z, ell = _prepare(kernel, X, Z, (G, "G"))
    G = xp.asarray(G)
    if G.shape != (X.shape[0], Z.shape[0]):
        raise ValueError(f"G must have shape {(X.shape[0], Z.shape[0])}, got {tuple(G.shape)}")
    G = G.astype(X.dtype, copy=False)
    impl, n, m = _module("adjoint_dense", xp), X.shape[0], Z.shape[0]
    if _split_rows(xp, n, m):
        return _sum_grads(map_ranges(lambda lo, hi: impl(kernel, X[lo:hi], Z, G[lo:hi], ell, xp, wrt=tuple(wrt)),
                                     n, min_rows(m)))
    return impl(kernel, X, Z, G, ell, xp, wrt=tuple(wrt))


def adjoint_lowrank(kernel, X, Z, P, Q, wrt=("lengthscale", "centers")):
    """Gradients of ``<P Q^T, k(X, Z)>`` without forming an n x m matrix.

    Parameters
    ----------
    P : array (n, k)
    Q : array (m, k)
    """
    xp, X, Z, ell = _prepare(kernel, X, Z, (P, "P"), (Q, "Q"))
    return _adjoint_lowrank(kernel, X, Z, P, Q, ell, xp, wrt)


def _adjoint_lowrank(kernel, X, Z, P, Q, ell, xp, wrt=("lengthscale", "centers")):
    """:func:`adjoint_lowrank` of ``X``, ``Z`` that are valid already (see :func:`_kmv`)."""
    P2 = _operand(P, "P", X.shape[0], X.dtype, xp)
    Q2 = _operand(Q, "Q", Z.shape[0], X.dtype, xp)
    if P2.shape[1] != Q2.shape[1]:
        raise ValueError(f"P and Q must have the same number of columns, got {P2.shape[1]} and {Q2.shape[1]}")
    impl, n, m = _module("adjoint_lowrank", xp), X.shape[0], Z.shape[0]
    if _split_rows(xp, n, m):
        return _sum_grads(map_ranges(lambda lo, hi: impl(kernel, X[lo:hi], Z, P2[lo:hi], Q2, ell, xp, wrt=tuple(wrt)),
                                     n, min_rows(m)))
    return impl(kernel, X, Z, P2, Q2, ell, xp, wrt=tuple(wrt))


def adjoint_residual(kernel, X, Z, P0, B, Q, wrt=("lengthscale", "centers")):
    r"""Gradients of ``<P Q^T, k(X, Z)>`` with :math:`P = P_0 - [K B \mid 0]`, in one pass over ``X``.

    The residual cotangent of ``stoch-prop`` without :math:`u = K a`
    formed beforehand: each row block's :math:`K_b B` is formed from the
    kernel values that the block evaluates for its derivative anyway.
    Dispatched like :func:`adjoint_lowrank` (its entry of ``CPU_IMPL``).

    Parameters
    ----------
    P0 : array (n, r)
    B : array (m, kb), ``kb <= r``
        Subtracted (through :math:`K B`) from the first ``kb`` columns of ``P0``.
    Q : array (m, r)

    Returns
    -------
    KernelGrad
        float64, as :func:`adjoint_lowrank` of the explicit ``P``.
    """
    xp, X, Z, ell = _prepare(kernel, X, Z, (P0, "P0"), (B, "B"), (Q, "Q"))
    return _adjoint_residual(kernel, X, Z, P0, B, Q, ell, xp, wrt)


def _adjoint_residual(kernel, X, Z, P0, B, Q, ell, xp, wrt=("lengthscale", "centers"), dot=None):
    """:func:`adjoint_residual` of ``X``, ``Z`` that are valid already (see :func:`_kmv`)."""
    P2 = _operand(P0, "P0", X.shape[0], X.dtype, xp)
    B2 = _operand(B, "B", Z.shape[0], X.dtype, xp)
    Q2 = _operand(Q, "Q", Z.shape[0], X.dtype, xp)
    if P2.shape[1] != Q2.shape[1]:
        raise ValueError(f"P0 and Q must have the same number of columns, got {P2.shape[1]} and {Q2.shape[1]}")
    if B2.shape[1] > P2.shape[1]:
        raise ValueError(f"B must have at most as many columns as P0 ({P2.shape[1]}), got {B2.shape[1]}")
    impl, n, m = _module("adjoint_lowrank", xp, "adjoint_residual"), X.shape[0], Z.shape[0]
    if _split_rows(xp, n, m):
        return _sum_grads(map_ranges(lambda lo, hi: impl(kernel, X[lo:hi], Z, P2[lo:hi], B2, Q2, ell, xp,
                                                         wrt=tuple(wrt)), n, min_rows(m)))
    return impl(kernel, X, Z, P2, B2, Q2, ell, xp, wrt=tuple(wrt), **_gpu_dot(xp, dot))


def _factored_dense(products, P, Q, xp):
    """``G = diag(u_0) B_0 V_0 + P Q^T + sum_{k>0} diag(u_k) B_k V_k`` as one dense array."""
    G = None
    terms = list(products[:1]) + [("thin", P, Q)] + list(products[1:])
    for B, u, V in terms:
        if isinstance(B, str):
            if u is None:
                continue
            part = u @ V.T
        else:
            part = B @ V
            if u is not None:
                part = part * u[:, None]
        G = part if G is None else G + part
    return G


def adjoint_factored(kernel, X, Z, products=(), P=None, Q=None, *, KT=None, wrt=("lengthscale", "centers")):
    """Gradients of ``<G, k(X, Z)>`` for a cotangent given as products, without forming ``G``.

    .. math:: G = \\mathrm{diag}(u_0) B_0 V_0 + P Q^T + \\sum_{k \\ge 1} \\mathrm{diag}(u_k) B_k V_k

    (the terms are added in this order).  On the CPU (Numba) the rows are
    processed in blocks that stay in cache: each block of ``G`` is formed by
    BLAS products and contracted at once, so no ``n x m`` array is written;
    on other back ends ``G`` is formed and passed to :func:`adjoint_dense`.

    Parameters
    ----------
    kernel : Kernel
    X : array (n, d)
    Z : array (m, d)
    products : sequence of ``(B, u, V)``
        ``B`` (n, r) (a transposed view is fine), ``u`` (n,) or None (no
        row scaling), ``V`` (r, m).
    P, Q : arrays (n, r), (m, r), optional
        A low-rank part :math:`P Q^T`.
    KT : array (m, n), optional
        ``kernel_matrix(kernel, Z, X)`` if the caller kept it: the Gaussian
        kernel then reads :math:`\\varphi'` from it instead of evaluating
        the kernel again.  Must be exactly that matrix.
    wrt : iterable of {"lengthscale", "centers", "X"}

    Returns
    -------
    KernelGrad
        float64 gradients, as :func:`adjoint_dense` of the dense ``G``.
    """
    xp, X, Z, ell = _prepare(kernel, X, Z)
    n, m = X.shape[0], Z.shape[0]
    prods = []
    for B, u, V in products:
        B, V = xp.asarray(B), xp.asarray(V)
        if B.ndim != 2 or V.ndim != 2 or B.shape[0] != n or V.shape != (B.shape[1], m):
            raise ValueError(f"products: need B (n={n}, r) and V (r, m={m}), got {tuple(B.shape)} and {tuple(V.shape)}")
        if u is not None:
            u = xp.asarray(u).astype(X.dtype, copy=False)
            if u.shape != (n,):
                raise ValueError(f"products: the row scaling u must have shape ({n},), got {tuple(u.shape)}")
        prods.append((B.astype(X.dtype, copy=False), u, V.astype(X.dtype, copy=False)))
    if (P is None) != (Q is None):
        raise ValueError("P and Q must be given together")
    if P is not None:
        P = _operand(P, "P", n, X.dtype, xp)
        Q = _operand(Q, "Q", m, X.dtype, xp)
        if P.shape[1] != Q.shape[1]:
            raise ValueError(f"P and Q must have the same number of columns, got {P.shape[1]} and {Q.shape[1]}")
    if not prods and P is None:
        raise ValueError("adjoint_factored needs at least one product or a low-rank part P, Q")
    if KT is not None and tuple(KT.shape) != (m, n):
        raise ValueError(f"KT must have shape {(m, n)}, got {tuple(KT.shape)}")
    wrt = tuple(wrt)
    if not is_cupy_namespace(xp) and CPU_IMPL["adjoint_dense"] == "numba":
        from . import _factored

        return _factored.adjoint_factored(kernel, X, Z, prods, P, Q, ell, xp, wrt=wrt, KT=KT)
    return adjoint_dense(kernel, X, Z, _factored_dense(prods, P, Q, xp), wrt=wrt)
