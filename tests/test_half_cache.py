"""A kernel matrix held in float16 (nyhopt.ops.half): the algorithm the GPU runs, on the CPU."""
import numpy as np
import pytest

import nyhopt as nh
from nyhopt import ops
from nyhopt.ops import cached, half
from nyhopt.ops.cached import CachedKernel, cache_storage
from nyhopt.ops.operator import KernelOperator
from nyhopt.solvers import falkon_solve

from _bounds import dot_error


def _relative(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return np.linalg.norm(got - want) / np.linalg.norm(want)


def _operand_error(B):
    """Entrywise bound on how a product's float32 or split-float16 form holds the operand ``B``.

    float32: :math:`2^{-24} |b|`; two float16 parts and a power-of-two scale per column
    (:func:`nyhopt.ops.half.split_half`): :math:`2^{-22} |b|` plus :math:`2^{-25}` of the scale, at
    most twice the column's largest entry.  The sum covers either form.
    """
    B = np.abs(np.asarray(B, dtype=np.float64))
    return (2.0**-22 + 2.0**-24) * B + 2.0**-24 * B.max(axis=0)


def _cache_products_within_bounds(got, K, V, U):
    """``[kmv(V), kmtv(U), normal_matvec(V, U, kv=True)..., gram(U)...]`` of a held ``K``, each against float64.

    ``gram(U)``'s two results are optional.

    The bounds (``tests/_bounds.py``, docs/dev/testing.md): float32 sums at most as long as the
    sum (``m`` for ``K V``, ``n`` for the others), operands held as :func:`_operand_error` says;
    ``K^T (K V)`` adds ``|K|^T`` times the error of the intermediate ``K V``, itself held in float32.
    """
    n, m = K.shape
    V, U = np.asarray(V, dtype=np.float64), np.asarray(U, dtype=np.float64)
    KV = K @ V
    e_kv = dot_error(K.T, V, m, np.float32, dB=_operand_error(V))
    e_ktu = dot_error(K, U, n, np.float32, dB=_operand_error(U))
    w = np.abs(KV) + e_kv
    e_ktkv = np.abs(K).T @ e_kv + dot_error(K, w, n, np.float32, dB=_operand_error(w))
    wants = [(KV, e_kv), (K.T @ U, e_ktu), (K.T @ KV, e_ktkv), (K.T @ U, e_ktu), (KV, e_kv),
             (K.T @ K, dot_error(K, K, n, np.float32)), (K.T @ U, e_ktu)]
    assert len(got) in (5, len(wants))  # without gram(U) or with it
    for g, (want, bound) in zip(got, wants):
        err = np.abs(np.asarray(g, dtype=np.float64) - want)
        assert g.shape == want.shape and np.all(err <= bound * (1 + 1e-12)), float(np.max(err / bound))


def test_split_half_represents_columns_to_float32_accuracy(rng):
    V = (rng.standard_normal((501, 5)) * np.array([1e-30, 1e-3, 1.0, 7e3, 3e30])).astype(np.float32)
    V[0, 1] = 0.0
    V[:, 3] = 0.0  # a zero column: scale 1, nothing else
    before = V.copy()
    P, scale = half.split_half(V[:, ::-1][:, ::-1], np)  # a strided view is fine
    np.testing.assert_array_equal(V, before)
    assert P.dtype == np.float16 and P.shape == (501, 10) and scale.dtype == np.float32
    assert scale[3] == 1 and np.all(np.log2(scale) == np.round(np.log2(scale)))  # powers of two
    back = half.join_half(P.astype(np.float32), scale, axis=1)
    top = np.abs(V).max(axis=0)
    # hi + lo hold 22 bits of the largest entry; the power-of-two scale keeps them in float16's range
    assert np.all(np.abs(back - V) <= 2.0**-21 * np.where(top > 0, top, 1))
    np.testing.assert_array_equal(half.join_half(P.T.astype(np.float32), scale, axis=0), back.T)
    assert np.all(np.isfinite(P))


@pytest.mark.parametrize("kind", ["gaussian", "laplacian", "matern32", "matern52"])
def test_products_of_the_rounded_matrix(rng, kind, monkeypatch):
    """Each product is the float32 product of the float16 matrix, and within 1e-3 of the exact one."""
    monkeypatch.setattr("nyhopt.backend._parallel.MIN_ENTRIES", 1)  # several row ranges
    X = rng.uniform(-1.5, 1.5, (9001, 3)).astype(np.float32)
    Z = X[:37].copy()
    kernel = nh.make_kernel(kind, np.array([0.7, 1.3, 1.1]))
    V = rng.standard_normal((37, 4)).astype(np.float32)
    U = rng.standard_normal((9001, 2)).astype(np.float32)
    ck = CachedKernel(kernel, X, Z, storage="float16")
    assert ck.storage == np.float16 and ck.dtype == np.float32 and ck.nbytes == 9001 * 37 * 2
    K = ops.kernel_matrix(kernel, X.astype(np.float64), Z.astype(np.float64))
    Kh = ops.kernel_matrix(kernel, X, Z).astype(np.float16).astype(np.float64)  # float32 values, rounded
    np.testing.assert_array_equal(ck.Kt.T.astype(np.float64), Kh)
    KV, KtU = ck.kmv(V), ck.kmtv(U)
    KtKV, KtU2, KV2 = ck.normal_matvec(V, U, kv=True)
    G, KtU3 = ck.gram(U)
    assert KV.dtype == np.float32 and KtU.dtype == np.float64 and KtKV.dtype == np.float64
    # the float32 products of the float16 matrix, each against float64 under its bound
    _cache_products_within_bounds([KV, KtU, KtKV, KtU2, KV2, G, KtU3], Kh, V, U)
    for got, exact in [(KV, K @ V), (KtU, K.T @ U), (KtKV, K.T @ (K @ V)), (KtU2, K.T @ U), (KV2, K @ V),
                       (KtU3, K.T @ U)]:
        assert _relative(got, exact) < 1e-3  # the rounding of K to 16 bits: 2^-11 a value, averaging out
    np.testing.assert_allclose(G, Kh.T @ Kh, rtol=1e-12)
    assert ck.normal_matvec(V)[1] is None and ck.gram()[1] is None


def test_storage_is_checked(rng):
    X = rng.uniform(-1, 1, (50, 2))
    with pytest.raises(ValueError, match="float16 for float32 data"):
        CachedKernel(nh.GaussianKernel(1.0), X, X[:5], storage="float16")
    with pytest.raises(ValueError, match="storage"):
        CachedKernel(nh.GaussianKernel(1.0), X, X[:5], storage=np.float32)
    with pytest.raises(ValueError, match="cache='float16' needs float32 data"):
        KernelOperator(nh.GaussianKernel(1.0), X, X[:5], cache="float16")
    with pytest.raises(ValueError, match="kernel_cache"):
        nh.make_objective("stoch-prop", X, np.sin(X[:, 0]), kernel_cache="bfloat16")
    with pytest.raises(ValueError, match="kernel_cache='float16' needs float32 data, got float64"):
        nh.make_objective("stoch-prop", X, np.sin(X[:, 0]), kernel_cache="float16")  # at once, not at a step


def test_the_auto_policy(monkeypatch):
    f32 = np.dtype(np.float32)
    with nh.cache_budget(1000 * 10 * 4):
        assert cache_storage("auto", 1000, 10, f32, np) == f32
        assert cache_storage("auto", 1000, 11, f32, np) is None  # never float16 on the CPU unless asked
        assert cache_storage("float16", 10**6, 10**4, f32, np) == np.float16  # asked: the budget is not checked
        assert cache_storage(False, 10, 10, f32, np) is None and cache_storage(True, 10**9, 10**9, f32, np) == f32
        monkeypatch.setattr(cached, "is_cupy_namespace", lambda xp: True)
        assert cache_storage("auto", 1000, 11, f32, np) is None  # not on a GPU either (see nyhopt.ops.half)


def test_building_it_makes_no_float32_matrix(rng):
    import tracemalloc

    X = rng.uniform(-1, 1, (40000, 3)).astype(np.float32)
    Z = X[:500].copy()
    CachedKernel(nh.GaussianKernel(1.0), X[:100], Z, storage="float16")  # compiled before it is measured
    with nh.memory_budget(2**22):
        tracemalloc.start()
        try:
            ck = CachedKernel(nh.GaussianKernel(1.0), X, Z, storage="float16")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert ck.nbytes == 40000 * 500 * 2
    assert peak < 1.5 * ck.nbytes  # a float32 matrix on the way would make it 3 times the cache


def test_falkon_and_stoch_prop_with_a_float16_cache(rng):
    X = rng.uniform(-1, 1, (3000, 3)).astype(np.float32)
    y = (np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(3000)).astype(np.float32)
    kernel = nh.GaussianKernel(np.float32(0.8))
    a = falkon_solve(kernel, X, X[:60], y, 1e-3, tol=1e-6, maxiter=300, cache=False, gram=False)
    b = falkon_solve(kernel, X, X[:60], y, 1e-3, tol=1e-6, maxiter=300, cache="float16", gram=False)
    assert b.passes == a.passes + 1  # the kernel evaluation
    Knm = ops.kernel_matrix(kernel, X, X[:60]).astype(np.float64)
    assert _relative(Knm @ b.alpha, Knm @ a.alpha) < 1e-3  # the fit; alpha itself is ill-conditioned
    params = nh.Params.from_natural(1e-3, [0.8, 1.0, 1.2], X[:60])
    opts = dict(n_rows=200, tol=1e-6, random_state=0)
    plain = nh.make_objective("stoch-prop", X, y, kernel_cache=False, gram=False, **opts)
    held = nh.make_objective("stoch-prop", X, y, kernel_cache="float16", gram=False, **opts)
    assert held._routes(60)[0] == np.float16 and held._cpu_engine(params) == "pool"
    v1, g1 = plain.value_and_grad(params)
    v2, g2 = held.value_and_grad(params)
    t1, t2 = plain.terms(params), held.terms(params)
    # The data fit barely moves; the effective dimension rises (7% here): the rounding of K is noise
    # that B's smallest eigenvalues see (nyhopt.ops.half).  float32 itself is within 3e-4 of float64.
    assert t2["data_fit"] == pytest.approx(t1["data_fit"], rel=2e-3)
    assert t1["effective_dimension"] < t2["effective_dimension"] < 1.15 * t1["effective_dimension"]
    assert v2 == pytest.approx(v1, rel=3e-2)
    for field in ("log_penalty", "log_lengthscale"):
        assert _relative(getattr(g2, field), getattr(g1, field)) < 5e-2


@pytest.mark.gpu
def test_half_matmul_on_cupy(rng):
    cp = pytest.importorskip("cupy")
    A = rng.standard_normal((37, 1001)).astype(np.float16)
    B = rng.standard_normal((1001, 5)).astype(np.float16)
    got = half.half_matmul(cp.asarray(A), cp.asarray(B), cp)
    assert isinstance(got, cp.ndarray) and got.dtype == np.float32 and got.shape == (37, 5)

    def exact_within_float32_sums(got, P, Q):  # float16 products are exact in float32: only the sums round
        want = P.astype(np.float64) @ Q.astype(np.float64)
        bound = dot_error(P.T.astype(np.float64), Q.astype(np.float64), P.shape[1], np.float32)
        assert np.all(np.abs(cp.asnumpy(got) - want) <= bound * (1 + 1e-12))

    exact_within_float32_sums(got, A, B)
    Kt = rng.random((37, 3001)).astype(np.float16)
    C = rng.standard_normal((2000, 3)).astype(np.float16)
    got = half.half_matmul(cp.asarray(Kt)[:, 17:2017], cp.asarray(C), cp)  # rows with a stride
    exact_within_float32_sums(got, Kt[:, 17:2017], C)
    got = half.half_matmul(cp.asarray(C).T, cp.asarray(Kt).T[17:2017], cp)  # transposed views are copied
    exact_within_float32_sums(got, C.T, Kt.T[17:2017])
    assert half.half_matmul(cp.zeros((3, 0), cp.float16), cp.zeros((0, 4), cp.float16), cp).sum() == 0


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["gaussian", "matern52"])
def test_float16_cache_on_cupy_matches_the_cpu(rng, kind):
    cp = pytest.importorskip("cupy")
    X = rng.uniform(-1.5, 1.5, (20011, 5)).astype(np.float32)
    Z = X[:45].copy()
    kernel = nh.make_kernel(kind, np.array([0.7, 1.3, 1.1, 0.9, 1.6]))
    V = rng.standard_normal((45, 4)).astype(np.float32)
    U = rng.standard_normal((20011, 3)).astype(np.float32)
    cpu = CachedKernel(kernel, X, Z, storage="float16")
    gpu = CachedKernel(kernel, cp.asarray(X), cp.asarray(Z), storage="float16")
    assert gpu.storage == np.float16 and gpu.nbytes == cpu.nbytes
    want = [cpu.kmv(V), cpu.kmtv(U), *cpu.normal_matvec(V, U, kv=True), *cpu.gram(U)]
    got = [gpu.kmv(cp.asarray(V)), gpu.kmtv(cp.asarray(U)), *gpu.normal_matvec(cp.asarray(V), cp.asarray(U), kv=True),
           *gpu.gram(cp.asarray(U))]
    for g, w in zip(got, want):
        assert isinstance(g, cp.ndarray) and g.shape == w.shape and g.dtype == w.dtype
        assert _relative(cp.asnumpy(g), w) < 1e-4  # the device rounds a few entries of K the other way


@pytest.mark.gpu
def test_cupy_gram_of_a_held_float32_kernel_in_chunks(rng):
    cp = pytest.importorskip("cupy")
    X = rng.uniform(-1, 1, (30001, 3)).astype(np.float32)
    Z, U = X[:64].copy(), rng.standard_normal((30001, 2)).astype(np.float32)
    kernel = nh.GaussianKernel(0.9)
    want = CachedKernel(kernel, X, Z).gram(U)
    with nh.memory_budget(64 * 8 * 1000):  # chunks of 1000 rows: no float64 copy of the whole matrix
        got = CachedKernel(kernel, cp.asarray(X), cp.asarray(Z)).gram(cp.asarray(U))
    for g, w in zip(got, want):
        assert _relative(cp.asnumpy(g), w) < 1e-5


# -- the GPU code path without a GPU ------------------------------------------------------------------
class _HostArray:
    """A NumPy array seen through the attributes the cuBLAS call uses (``data.ptr``, strides, ...)."""

    def __init__(self, a):
        self.a = a
        self.shape, self.strides, self.itemsize, self.dtype = a.shape, a.strides, a.itemsize, a.dtype
        self.data = type("Memory", (), {"ptr": a.ctypes.data})()

    def fill(self, value):
        self.a.fill(value)


def _host_sgemm_ex(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc):
    """cuBLAS SgemmEx (column-major, host scalars) on host memory: C = alpha op(A) op(B) + beta C."""
    import ctypes

    from numpy.lib.stride_tricks import as_strided

    types = {2: np.float16, 0: np.float32}

    def view(ptr, dtype, rows, cols, ld):
        dtype = np.dtype(dtype)
        buf = np.ctypeslib.as_array((ctypes.c_char * (dtype.itemsize * (ld * (cols - 1) + rows))).from_address(ptr))
        return as_strided(buf.view(dtype), shape=(rows, cols), strides=(dtype.itemsize, ld * dtype.itemsize))

    assert (transa, transb) == (0, 0) and Ctype == 0
    assert lda >= m and ldb >= k and ldc >= m
    a, b = view(A, types[Atype], m, k, lda), view(B, types[Btype], k, n, ldb)
    c = view(C, np.float32, m, n, ldc)
    one = np.ctypeslib.as_array((ctypes.c_float * 1).from_address(alpha))[0]
    zero = np.ctypeslib.as_array((ctypes.c_float * 1).from_address(beta))[0]
    product = one * (a.astype(np.float64) @ b.astype(np.float64))
    c[...] = product if zero == 0 else product + zero * c  # beta = 0: C is not read (BLAS convention)


def test_the_cublas_call_against_a_host_model_of_sgemm_ex(rng, monkeypatch):
    """Argument order, leading dimensions and the row-major/column-major swap of ``_cublas_half_matmul``."""
    import sys
    import types

    calls = []
    cublas = types.SimpleNamespace(
        CUBLAS_OP_N=0, CUBLAS_POINTER_MODE_HOST=0, setStream=lambda h, s: None, getPointerMode=lambda h: 1,
        setPointerMode=lambda h, mode: calls.append(mode),
        sgemmEx=lambda *args: (calls.append("gemm"), _host_sgemm_ex(*args)))
    runtime = types.SimpleNamespace(CUDA_R_16F=2, CUDA_R_32F=0)
    fake_cupy = types.SimpleNamespace(
        float32=np.float32, empty=lambda shape, dtype: _HostArray(np.empty(shape, dtype)),
        ascontiguousarray=lambda x: _HostArray(np.ascontiguousarray(x.a)),
        cuda=types.SimpleNamespace(device=types.SimpleNamespace(get_cublas_handle=lambda: 7),
                                   get_current_stream=lambda: types.SimpleNamespace(ptr=0)))
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.api", types.SimpleNamespace(runtime=runtime))
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs", types.SimpleNamespace(cublas=cublas))
    Kt = rng.random((37, 3001)).astype(np.float16)
    C = rng.standard_normal((2000, 6)).astype(np.float16)
    Pt = rng.standard_normal((6, 37)).astype(np.float16)
    cases = [(Pt, Kt), (Kt[:, 17:2017], C), (Pt, Kt[:, 5:1006]), (C.T, Kt.T[17:2017])]  # strided rows; a copy
    for A, B in cases:
        got = half._cublas_half_matmul(_HostArray(A), _HostArray(B))
        want = A.astype(np.float64) @ B.astype(np.float64)
        assert got.shape == want.shape and got.a.dtype == np.float32
        np.testing.assert_allclose(got.a, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert calls.count("gemm") == len(cases) and calls[-1] == 1  # the pointer mode is restored


def test_the_gpu_control_flow_of_the_cache_on_the_host(rng, monkeypatch):
    """CachedKernel's CuPy branches (one range; the Gram matrix in chunks of the memory budget) on NumPy."""
    X = rng.uniform(-1, 1, (5003, 3)).astype(np.float32)
    Z, V, U = X[:29].copy(), rng.standard_normal((29, 3)).astype(np.float32), rng.standard_normal((5003, 2))
    kernel = nh.GaussianKernel(0.9)
    K32 = ops.kernel_matrix(kernel, X, Z).astype(np.float64)
    held = {None: K32, "float16": K32.astype(np.float16).astype(np.float64)}
    for storage, K in held.items():  # the host route, each against float64
        c = CachedKernel(kernel, X, Z, storage=storage)
        _cache_products_within_bounds([c.kmv(V), c.kmtv(U), *c.normal_matvec(V, U, kv=True), *c.gram(U)], K, V, U)
    monkeypatch.setattr(cached, "is_cupy_namespace", lambda xp: True)
    with nh.memory_budget(29 * 8 * 700):  # Gram chunks of 700 rows: another grouping of the float32 sums
        for storage, K in held.items():
            ck = CachedKernel(kernel, X, Z, storage=storage)
            got = [ck.kmv(V), ck.kmtv(U), *ck.normal_matvec(V, U, kv=True), *ck.gram(U)]
            _cache_products_within_bounds(got, K, V, U)
