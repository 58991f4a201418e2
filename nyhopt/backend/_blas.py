"""Triangular solves and GEMM updates in the BLAS that NumPy itself uses.

Why this module exists.  NumPy and SciPy wheels each bundle their *own*
OpenBLAS, each with its own pool of worker threads.  After a call, OpenBLAS
workers keep spinning for a while before they sleep; when the next call goes
to the *other* library, its workers compete with the spinning ones for the
cores.  On a 2-core machine, interleaving NumPy products with small SciPy
solves (which is what an objective evaluation does) made a step 2-3 times
slower with two threads than with one (measured: 157 ms against 57 ms for
the same products plus two 200 x 200 SciPy factorizations).  Keeping every
CPU BLAS/LAPACK call of nyhopt in NumPy's library removes the contention:

* products are NumPy's ``@``; Cholesky factors are :func:`numpy.linalg.cholesky`;
* Cholesky factors written in place (:func:`potrf`), inverses from a
  Cholesky factor (:func:`potri`), triangular solves (:func:`trsm`; NumPy
  has no public one) and in-place ``C += A B^T`` updates (:func:`gemm_update`)
  call the LAPACKE/CBLAS symbols of NumPy's bundled OpenBLAS through :mod:`ctypes`.

When NumPy's BLAS cannot be located (NumPy built against MKL, Accelerate or
a system BLAS), these functions fall back to :mod:`scipy.linalg`; results are
the same, only the thread interplay differs.  ``NYHOPT_NUMPY_BLAS=0`` forces
the fallback.

Examples
--------
>>> import numpy as np
>>> from nyhopt.backend._blas import trsm
>>> L = np.array([[2.0, 0.0], [1.0, 1.0]])
>>> trsm(L, np.array([[2.0], [3.0]]))  # L^{-1} b
array([[1.],
       [2.]])
"""
from __future__ import annotations

import ctypes
import functools
import glob
import os

import numpy as np

__all__ = ["potrf", "potri", "trsm", "gemm_update", "syrk_update", "numpy_blas_available"]

# CBLAS enumerations.
_ROW_MAJOR, _NO_TRANS, _TRANS, _UPPER, _LOWER, _NON_UNIT, _LEFT, _RIGHT = 101, 111, 112, 121, 122, 131, 141, 142
# Symbol names tried, with the width of their integers: NumPy >= 2 wheels
# bundle scipy-openblas with a "scipy_" prefix and ILP64 integers.
_NAMES = (("scipy_{}64_", ctypes.c_int64), ("{}64_", ctypes.c_int64), ("scipy_{}", ctypes.c_int32))
_COL_MAJOR = 102


class _Cblas:
    """``?potrf``, ``?potri``, ``?trsm``, ``?gemm`` and ``?syrk`` of one loaded library, for float32 and float64."""

    def __init__(self, lib, pattern, blasint):
        self.trsm, self.gemm, self.potrf, self.potri, self.syrk = {}, {}, {}, {}, {}
        enum = ctypes.c_int
        for prefix, ctype in (("s", ctypes.c_float), ("d", ctypes.c_double)):
            dtype = np.dtype(np.float32 if prefix == "s" else np.float64)
            for name, table in (("potrf", self.potrf), ("potri", self.potri)):
                fn = getattr(lib, pattern.format("LAPACKE_" + prefix + name))
                fn.restype = blasint
                fn.argtypes = [enum, ctypes.c_char, blasint, ctypes.c_void_p, blasint]
                table[dtype] = fn
            fn = getattr(lib, pattern.format("cblas_" + prefix + "trsm"))
            fn.restype = None
            fn.argtypes = [enum] * 5 + [blasint] * 2 + [ctype, ctypes.c_void_p, blasint, ctypes.c_void_p, blasint]
            self.trsm[dtype] = fn
            fn = getattr(lib, pattern.format("cblas_" + prefix + "gemm"))
            fn.restype = None
            fn.argtypes = ([enum] * 3 + [blasint] * 3 + [ctype, ctypes.c_void_p, blasint, ctypes.c_void_p, blasint,
                                                         ctype, ctypes.c_void_p, blasint])
            self.gemm[dtype] = fn
            fn = getattr(lib, pattern.format("cblas_" + prefix + "syrk"))
            fn.restype = None
            fn.argtypes = [enum] * 3 + [blasint] * 2 + [ctype, ctypes.c_void_p, blasint, ctype, ctypes.c_void_p, blasint]
            self.syrk[dtype] = fn


def _candidate_paths():
    root = os.path.dirname(os.path.dirname(np.__file__))
    here = os.path.dirname(np.__file__)
    pats = [os.path.join(root, "numpy.libs", "*openblas*"), os.path.join(here, ".dylibs", "*openblas*"),
            os.path.join(here, "..", "numpy.libs", "*openblas*")]
    return sorted({p for pat in pats for p in glob.glob(pat)})


@functools.lru_cache(maxsize=None)
def numpy_openblas():
    """NumPy's bundled OpenBLAS as a :class:`ctypes.CDLL` (already loaded by NumPy), or None."""
    for path in _candidate_paths():
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


@functools.lru_cache(maxsize=None)
def _cblas():
    """The CBLAS/LAPACKE of NumPy's bundled OpenBLAS, or None."""
    lib = numpy_openblas()
    if lib is None or os.environ.get("NYHOPT_NUMPY_BLAS", "1") == "0":
        return None
    for pattern, blasint in _NAMES:
        try:
            return _Cblas(lib, pattern, blasint)
        except AttributeError:
            continue
    return None


def numpy_blas_available() -> bool:
    """True when the triangular solves use NumPy's own BLAS (see the module notes)."""
    return _cblas() is not None


def _ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def _row_major(a):
    """``(view, transposed, ld)``: ``a`` or ``a.T`` as a row-major matrix with leading dimension ``ld``.

    Row-strided views (a block of columns of a C-ordered array) qualify;
    returns ``(None, False, 0)`` when neither layout does.
    """
    for view, flipped in ((a, False), (a.T, True)):
        s0, s1 = view.strides
        size = view.itemsize
        if (s1 == size or view.shape[1] <= 1) and s0 % size == 0 and s0 // size >= max(view.shape[1], 1):
            return view, flipped, s0 // size
    return None, False, 0


def _zero_triangle(F, keep_lower):
    """Zero the strict triangle of the square C-ordered ``F`` that is not kept."""
    for i in range(F.shape[0]):
        if keep_lower:
            F[i, i + 1:] = 0
        else:
            F[i, :i] = 0


def potrf(M, *, lower=True, overwrite=False):
    """Cholesky factor of the symmetric positive definite ``M`` (k, k).

    Parameters
    ----------
    M : ndarray (k, k), float32 or float64
        Only one triangle is read (``M`` is symmetric).
    lower : bool, default True
        Return ``L`` with :math:`L L^T = M` (else the upper ``U = L^T``).
    overwrite : bool, default False
        Allow the factor to be written into the memory of ``M`` (it is, when
        ``M`` is C-contiguous); ``M`` is then destroyed.

    Returns
    -------
    ndarray (k, k)
        The triangular factor, its other triangle zero.

    Raises
    ------
    numpy.linalg.LinAlgError
        If ``M`` is not numerically positive definite.
    """
    cb = _cblas()
    dtype = np.result_type(M.dtype, np.float32)
    if cb is None or dtype not in cb.potrf:
        from scipy.linalg import cholesky

        return cholesky(M, lower=lower, overwrite_a=overwrite, check_finite=False)
    F = M if (overwrite and M.dtype == dtype and M.flags.c_contiguous) else np.array(M, dtype=dtype, order="C")
    k = F.shape[0]
    if k:
        # Read column-major, the C-ordered buffer is M^T = M; LAPACK's "U" factor
        # in column-major is the C-ordered lower factor, and vice versa.
        info = cb.potrf[dtype](_COL_MAJOR, b"U" if lower else b"L", k, _ptr(F), k)
        if info != 0:
            raise np.linalg.LinAlgError(
                f"matrix is not positive definite (leading minor of order {info})" if info > 0
                else f"LAPACK potrf: illegal argument {-info}")
    _zero_triangle(F, keep_lower=lower)
    return F


def potri(F, *, lower=True):
    """:math:`M^{-1}` from the Cholesky factor ``F`` of :math:`M` (LAPACK ``potri``, :math:`2k^3/3` flops).

    Parameters
    ----------
    F : ndarray (k, k), float32 or float64
        :math:`M = FF^T` with ``F`` lower triangular (``lower``), or
        :math:`M = F^TF` with ``F`` upper triangular; only that triangle is read.
    lower : bool, default True

    Returns
    -------
    ndarray (k, k)
        A new C-contiguous :math:`M^{-1}`, exactly symmetric (LAPACK computes
        one triangle, mirrored into the other).

    Raises
    ------
    numpy.linalg.LinAlgError
        If ``F`` has a zero on its diagonal.
    """
    cb = _cblas()
    dtype = np.result_type(F.dtype, np.float32)
    if cb is None or dtype not in cb.potri:
        from scipy.linalg.lapack import get_lapack_funcs

        fn = get_lapack_funcs("potri", (np.asarray(F, dtype=dtype),))
        out, info = fn(np.asarray(F, dtype=dtype), lower=lower)
        out = np.ascontiguousarray(out)
    else:
        out = np.array(F, dtype=dtype, order="C")
        k = out.shape[0]
        # Read column-major, the C-ordered buffer is F^T: the triangle names swap (as in potrf).
        info = cb.potri[dtype](_COL_MAJOR, b"U" if lower else b"L", k, _ptr(out), k) if k else 0
    if info != 0:
        raise np.linalg.LinAlgError(f"LAPACK potri: {'singular factor' if info > 0 else 'illegal argument'} "
                                    f"({info})")
    _zero_triangle(out, keep_lower=lower)
    out += (np.tril(out, -1) if lower else np.triu(out, 1)).T
    return out


def trsm(T, B, *, lower=True, trans=False, right=False, overwrite_b=False):
    """``op(T)^{-1} B`` (``B op(T)^{-1}`` with ``right``) for a triangular ``T`` (k, k).

    Parameters
    ----------
    T : ndarray (k, k)
        Triangular matrix; only the triangle named by ``lower`` is read.
    B : ndarray (k, r) or (k,); (r, k) with ``right``
        Right-hand sides.
    lower : bool, default True
        Whether ``T`` is lower (else upper) triangular.
    trans : bool, default False
        Solve with :math:`T^T` instead of :math:`T`.
    right : bool, default False
        Solve from the right: :math:`X\\,\\mathrm{op}(T) = B`.
    overwrite_b : bool, default False
        Allow the result to be written into ``B`` (it is, when ``B`` is
        contiguous and of the common dtype).

    Returns
    -------
    ndarray
        :math:`\\mathrm{op}(T)^{-1} B` (:math:`B\\,\\mathrm{op}(T)^{-1}`) in the result dtype of ``T`` and ``B``.
    """
    if right:  # X op(T) = B  <=>  op(T)^T X^T = B^T
        return trsm(T, B.T, lower=lower, trans=not trans, overwrite_b=overwrite_b).T
    dtype = np.result_type(T.dtype, B.dtype, np.float32)
    cb = _cblas()
    if cb is None or dtype not in cb.trsm:
        from scipy.linalg import solve_triangular

        return solve_triangular(T, B, lower=lower, trans=1 if trans else 0, overwrite_b=overwrite_b,
                                check_finite=False)
    k = T.shape[0]
    vector = B.ndim == 1
    out = B if (overwrite_b and B.dtype == dtype) else B.astype(dtype, copy=True)
    out2 = out.reshape(k, 1) if vector else out
    Tc, t_flipped, ldt = _row_major(np.asarray(T, dtype=dtype))
    if Tc is None:
        Tc, t_flipped, ldt = np.ascontiguousarray(T, dtype=dtype), False, k
    # A transposed (F-ordered) T is read as its C-ordered transpose: flip triangle and op.
    uplo = _LOWER if lower != t_flipped else _UPPER
    op = _TRANS if trans != t_flipped else _NO_TRANS
    Bc, b_flipped, ldb = _row_major(out2)
    if Bc is None:
        Bc, b_flipped = np.ascontiguousarray(out2), False
        ldb = Bc.shape[1]
    if out2.size:
        if b_flipped:
            # Solve on the row-major (r, k) view: X^T = B^T op(T)^{-T}, a right-side solve.
            r = Bc.shape[0]
            op_r = _NO_TRANS if op == _TRANS else _TRANS
            cb.trsm[dtype](_ROW_MAJOR, _RIGHT, uplo, op_r, _NON_UNIT, r, k, 1.0, _ptr(Tc), ldt, _ptr(Bc), ldb)
        else:
            r = Bc.shape[1]
            cb.trsm[dtype](_ROW_MAJOR, _LEFT, uplo, op, _NON_UNIT, k, r, 1.0, _ptr(Tc), ldt, _ptr(Bc), ldb)
    res = Bc.T if b_flipped else Bc
    if not np.shares_memory(res, out2):
        out2[...] = res
    return out


def gemm_update(C, A, B, alpha=1.0):
    """``C += alpha * A @ B.T`` in place, for ``C`` (n, m), ``A`` (n, r), ``B`` (m, r).

    Uses one BLAS ``gemm`` with ``beta = 1`` writing into ``C`` (no
    ``n x m`` temporary) when ``C`` is C-contiguous; otherwise ``C += ...``.

    Returns
    -------
    ndarray
        ``C``.
    """
    cb = _cblas()
    dtype = C.dtype
    if cb is None or dtype not in cb.gemm or not C.flags.c_contiguous:
        C += alpha * (A @ B.T).astype(dtype, copy=False)
        return C
    A = np.ascontiguousarray(A, dtype=dtype)
    B = np.ascontiguousarray(B, dtype=dtype)
    n, m = C.shape
    r = A.shape[1]
    if C.size and r:
        cb.gemm[dtype](_ROW_MAJOR, _NO_TRANS, _TRANS, n, m, r, alpha, _ptr(A), max(r, 1), _ptr(B), max(r, 1), 1.0,
                       _ptr(C), m)
    return C


def syrk_update(C, A, alpha=1.0):
    """``C += alpha * A @ A.T`` in place on the lower triangle of ``C`` (m, m), for ``A`` (m, r).

    One BLAS ``syrk`` with ``beta = 1`` writing into ``C`` (no ``m x m``
    temporary, half the flops of a product) when ``C`` is C-contiguous and
    of ``A``'s dtype; the strict upper triangle of ``C`` is then left as it
    was (symmetrize once after the last update).  Otherwise the whole of
    ``C`` is updated by a product.

    Returns
    -------
    ndarray
        ``C``.

    Examples
    --------
    >>> import numpy as np
    >>> C = np.zeros((2, 2)); A = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> np.tril(syrk_update(C, A))
    array([[ 5.,  0.],
           [11., 25.]])
    """
    cb = _cblas()
    dtype = C.dtype
    if cb is None or dtype not in cb.syrk or not C.flags.c_contiguous or A.dtype != dtype:
        C += alpha * (A @ A.T).astype(dtype, copy=False)
        return C
    m, r = A.shape
    if A.flags.c_contiguous:  # row-major (m, r): C += A A^T
        op, lda, src = _NO_TRANS, max(r, 1), A
    elif A.T.flags.c_contiguous:  # row-major (r, m) A^T: C += (A^T)^T A^T
        op, lda, src = _TRANS, max(m, 1), A.T
    else:
        op, lda, src = _NO_TRANS, max(r, 1), np.ascontiguousarray(A)
    if C.size and r:
        cb.syrk[dtype](_ROW_MAJOR, _LOWER, op, m, r, alpha, _ptr(src), lda, 1.0, _ptr(C), max(m, 1))
    return C
