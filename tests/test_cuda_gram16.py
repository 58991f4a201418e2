"""The tensor-core Gram matrix (:mod:`nyhopt.ops.gram16`) against float64.

On the host the route runs with NumPy (float16 parts, float32 products with
IEEE sums per row block, float64 across blocks): the emulation of its
numerics.  A model of the tensor cores' accumulation (sums of 16 products
truncated to float32 at each step, the behaviour the GPU measurements point
to) shows why the products run over short row blocks.  The ``gpu`` tests
repeat the comparison on a device.
"""
from __future__ import annotations

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.ops import _reference, gram as gram_mod
from nyhopt.ops.gram16 import BLOCK_ROWS, FOLD, gram_matrix16, split_block

from _bounds import dot_error, sum_error
from test_host_cupy import host_module

KINDS = ["gaussian", "laplacian", "matern32", "matern52"]


def problem(kind, d, n=2345, m=77, k=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, (n, d)).astype(np.float32)
    Z = X[rng.permutation(n)[:m]].copy()
    U = rng.standard_normal((n, k)).astype(np.float32)
    kernel = nh.make_kernel(kind, np.sqrt(d) * np.linspace(0.8, 1.6, d))
    return kernel, X, Z, U


def reference(kernel, X, Z, U):
    """``K^T K`` and ``K^T U`` in float64 from the float32 kernel values (what the route holds to 2^-22)."""
    ell = kernel.lengthscale_array(X.shape[1])
    K = _reference.kernel_matrix(kernel, X, Z, ell, np).astype(np.float64)
    return K.T @ K, K.T @ U.astype(np.float64)


def kernel_values(kernel, X, Z):
    """The float32 kernel matrix the route splits."""
    return _reference.kernel_matrix(kernel, X, Z, kernel.lengthscale_array(X.shape[1]), np)


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def route_errors(K, U, block, fold, eps=None):
    r"""Entrywise bounds on the errors of ``G`` and ``K^T U`` (or None) from the route, against float64.

    Derived from the route's steps (module notes of :mod:`nyhopt.ops.gram16`, docs/dev/testing.md):

    * ``K = H + L / 2048`` holds each entry to :math:`2^{-22} |K|`, plus
      :math:`2^{-36}` where ``H`` is a float16 subnormal (below :math:`2^{-14}`);
      ``U``'s two parts hold it to :math:`2^{-22} |U|` plus :math:`2^{-25}` of the
      column's power-of-two scale (at most twice its largest entry);
    * ``G`` drops :math:`L^T L / 2^{22}`, at most :math:`D^T D` with
      :math:`D = 2^{-11} (1 + 2^{-11}) (|K| + 2^{-25})`;
    * the products of float16 parts are exact in float32; a float32 sum runs over
      at most ``block`` rows plus ``fold - 1`` additions of whole products
      (:func:`_bounds.sum_error`; ``eps``, a relative error, replaces it for another accumulation),
      and the low parts add at most :math:`2^{-9}` to the magnitudes summed;
    * the float64 sums across folds: :func:`_bounds.sum_error` of ``n`` terms.
    """
    K = np.abs(np.asarray(K, dtype=np.float64))
    n = K.shape[0]
    if eps is None:
        eps = sum_error(min(block, n) + min(fold, -(-n // block)) - 1, np.float32)
    eps = (1 + 2.0**-9) * eps + sum_error(n, np.float64)
    Kmag = K + 2.0**-25
    dK = 2.0**-22 * K + 2.0**-36
    D = 2.0**-11 * (1 + 2.0**-11) * Kmag
    EG = K.T @ dK + dK.T @ K + dK.T @ dK + D.T @ D + eps * (Kmag.T @ Kmag)
    if U is None:
        return EG, None
    U = np.abs(np.asarray(U, dtype=np.float64)).reshape(n, -1)
    dU = 2.0**-22 * U + 2.0**-24 * U.max(axis=0)
    EU = K.T @ dU + dK.T @ U + dK.T @ dU + eps * (Kmag.T @ (U + dU))
    return EG, EU


def within(got, want, bound):
    """``got`` is within the entrywise ``bound`` of ``want`` (the rounding of the bound itself: 1e-12)."""
    err = np.abs(np.asarray(got, dtype=np.float64) - want)
    ratio = err / np.reshape(bound, err.shape)
    assert np.all(ratio <= 1 + 1e-12), f"error up to {float(np.max(ratio)):.3g} times its bound"


@pytest.mark.parametrize("d", [1, 3, 28, 64])
@pytest.mark.parametrize("kind", KINDS)
def test_emulated_route_is_as_accurate_as_float32(kind, d):
    """n = 2345, m = 77: neither a multiple of the block (300) nor of the fold (3)."""
    kernel, X, Z, U = problem(kind, d)
    G64, KU64 = reference(kernel, X, Z, U)
    G, KtU = gram_matrix16(kernel, X, Z, U, block=300, fold=3)
    assert G.dtype == np.float64 and KtU.dtype == np.float64 and KtU.shape == (77, 3)
    np.testing.assert_array_equal(G, G.T)
    EG, EU = route_errors(kernel_values(kernel, X, Z), U, 300, 3)
    within(G, G64, EG)
    within(KtU, KU64, EU)
    G1, Ku1 = gram_matrix16(kernel, X, Z, U[:, 0], block=300, fold=3)
    assert Ku1.shape == (77,)
    within(Ku1, KU64[:, 0], EU[:, 0])  # one column: another BLAS call (gemv), its own rounding


def test_the_split_removes_the_rounding_to_16_bits():
    """One float16 part rounds K: G is the product of the rounded matrix, its diagonal gains sum(delta^2) > 0.

    Both routes are checked against float64 under their own bounds: without the
    split, ``G - K^T K`` is ``K^T D + D^T K + D^T D`` (``D`` the rounding to 16 bits) up to
    the float32 sums of the parts; with it, ``G`` is within the route's bound.
    """
    kernel, X, Z, U = problem("gaussian", 3, n=6000, m=40)
    G64, _ = reference(kernel, X, Z, U)
    G1, _ = gram_matrix16(kernel, X, Z, block=500, split=False)
    G2, _ = gram_matrix16(kernel, X, Z, block=500)
    K = kernel_values(kernel, X, Z)
    within(G2, G64, route_errors(K, None, 500, FOLD)[0])
    K = K.astype(np.float64)
    H = K.astype(np.float16).astype(np.float64)
    delta = H - K
    bias = (delta * delta).sum(0)  # the diagonal bias of the rounded matrix
    assert np.all(bias > 0)
    # H^T H in float32 blocks of 500 rows, folds of FOLD products: exact products, sums of 507 terms.
    within(G1 - G64, K.T @ delta + delta.T @ K + delta.T @ delta, dot_error(H, H, 500 + FOLD - 1, np.float32))


def test_fold_and_block_do_not_change_the_sums_beyond_float32():
    """Each blocking against float64, under its own bound (not against another float32 rounding).

    A route that lost or repeated one row of the 3001 would be off by about 1/3001 in ``G``
    (all its terms are positive), three times the largest bound here (1e-4 relative).
    """
    kernel, X, Z, U = problem("matern52", 5, n=3001, m=60)
    K = kernel_values(kernel, X, Z)
    G64, KU64 = reference(kernel, X, Z, U)
    for block, fold in [(3001, 1), (1, 1), (64, 7), (1000, 2), (BLOCK_ROWS, FOLD)]:
        G, KtU = gram_matrix16(kernel, X, Z, U, block=block, fold=fold)
        EG, EU = route_errors(K, U, block, fold)
        assert np.linalg.norm(EG) < 1e-4 * np.linalg.norm(G64)  # tight enough to catch a lost row
        within(G, G64, EG)
        within(KtU, KU64, EU)


def test_arguments_are_checked_and_inputs_kept():
    kernel, X, Z, U = problem("gaussian", 2, n=100, m=10)
    with pytest.raises(TypeError, match="float32"):
        gram_matrix16(kernel, X.astype(np.float64), Z)
    with pytest.raises(ValueError, match="block and fold"):
        gram_matrix16(kernel, X, Z, block=0)
    with pytest.raises(ValueError, match="U must have"):
        gram_matrix16(kernel, X, Z, U[:50])
    saved = [a.copy() for a in (X, Z, U)]
    gram_matrix16(kernel, X, Z, U)
    for a, b in zip((X, Z, U), saved):
        np.testing.assert_array_equal(a, b)


def test_split_block_parts():
    K = np.array([[1.0, 0.5, 1e-3, 1e-9], [0.1, 0.7, 0.3333, 0.0]], dtype=np.float32)
    HL = split_block(K, np)
    assert HL.dtype == np.float16 and HL.shape == (2, 8)
    back = HL[:, :4].astype(np.float64) + HL[:, 4:].astype(np.float64) / 2048
    np.testing.assert_allclose(back, K, rtol=2.0**-21, atol=2.0**-35)  # float16 subnormals: absolute 2^-25 / 2048
    np.testing.assert_array_equal(split_block(K, np, split=False), K.astype(np.float16))


# -------------------------------------------------- a model of the tensor cores
def _truncate32(s):
    """Round float64 ``s`` to float32 toward zero."""
    f = s.astype(np.float32)
    over = np.abs(f.astype(np.float64)) > np.abs(s)
    f[over] = np.nextafter(f[over], np.float32(0))
    return f


def tensor_core_matmul(A, B, C, beta, xp, k_step=16):
    """``C = A^T B + beta C``: each step adds 16 exact products to a float32 accumulator, truncated.

    The epilogue ``+ beta C`` rounds to nearest (IEEE float32), as cuBLAS's does.
    """
    acc = np.zeros((A.shape[1], B.shape[1]), dtype=np.float32)
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    for lo in range(0, A.shape[0], k_step):
        acc = _truncate32(acc.astype(np.float64) + A64[lo:lo + k_step].T @ B64[lo:lo + k_step])
    C[...] = acc + (C if beta else np.float32(0))
    return C


def test_truncated_accumulation_grows_with_the_block_length():
    """Why short blocks: one long sum loses ~n/16 truncations; blocks of 64 rows stay below 1e-6."""
    kernel, X, Z, U = problem("gaussian", 28, n=8192, m=24)
    G64, KU64 = reference(kernel, X, Z, U)
    errors = {}
    for block in (64, 512, 8192):
        G, KtU = gram_matrix16(kernel, X, Z, U, block=block, fold=4, matmul=tensor_core_matmul)
        errors[block] = rel(G, G64)
    assert errors[64] < 1e-6 < errors[8192]
    assert errors[64] < errors[512] < errors[8192]
    assert 4 < errors[8192] / errors[512] < 40  # about linear in the length (8192 / 512 = 16)


def test_gram_matrix_dispatches_float32_on_a_gpu(monkeypatch):
    """``gram_matrix`` takes the tensor-core route for float32 CuPy data (here: NumPy standing in)."""
    kernel, X, Z, U = problem("gaussian", 3, n=500, m=20)
    calls = []
    import nyhopt.ops.gram16 as g16

    real = g16.gram_matrix16
    monkeypatch.setattr(g16, "gram_matrix16", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(gram_mod, "is_cupy_namespace", lambda xp: True)
    gram_mod.gram_matrix(kernel, X, Z, U)
    assert calls == []  # off by default: its truncated sums broke CG at the HIGGS size (docs/solvers.md)
    monkeypatch.setattr(gram_mod, "TENSOR_CORES", "float16")
    G, KtU = gram_mod.gram_matrix(kernel, X, Z, U)
    assert calls == [1]
    monkeypatch.setattr(gram_mod, "TENSOR_CORES", False)
    gram_mod.gram_matrix(kernel, X, Z, U)
    gram_mod.gram_matrix(kernel, X.astype(np.float64), Z.astype(np.float64), U)
    assert calls == [1]


# ----------------------------------------------------------------- on a device
@pytest.mark.gpu
@pytest.mark.parametrize("d", [1, 3, 28, 64])
@pytest.mark.parametrize("kind", KINDS)
def test_tensor_core_gram_on_gpu(kind, d, monkeypatch):
    """n = 5011, m = 301: the default route against float64.

    The bound leaves room for the hardware's truncated sums, which no IEEE bound covers: about
    6.4e-9 per row of a block measured on an H200 (module notes), 1.3e-5 at the default 2048 rows,
    plus the split's 3 * 2^-22 (7e-7): 4e-5 is that with a margin of 3 for other devices
    (a bound from a measured rate, see docs/dev/testing.md).
    """
    cp = pytest.importorskip("cupy")
    kernel, X, Z, U = problem(kind, d, n=5011, m=301, k=5)
    monkeypatch.setattr(gram_mod, "TENSOR_CORES", "float16")
    G, KtU = gram_mod.gram_matrix(kernel, cp.asarray(X), cp.asarray(Z), cp.asarray(U))
    G64, KU64 = reference(kernel, X, Z, U)
    G, KtU = cp.asnumpy(G), cp.asnumpy(KtU)
    np.testing.assert_array_equal(G, G.T)
    assert rel(G, G64) < 4e-5 and rel(KtU, KU64) < 4e-5


@pytest.mark.gpu
def test_tensor_core_gram_short_blocks_on_gpu():
    """Shorter blocks are at least as accurate: 128 rows within 5e-6.

    At the measured 6.4e-9 per row (module notes): 8e-7, plus the split's 7e-7 and the
    IEEE sums of the fold's 8 products (5e-7): 2e-6; 5e-6 leaves a margin of 2.5.
    """
    cp = pytest.importorskip("cupy")
    kernel, X, Z, U = problem("gaussian", 28, n=40_003, m=500)
    G64, _ = reference(kernel, X, Z, U)
    G, _ = gram_matrix16(kernel, cp.asarray(X), cp.asarray(Z), block=128, fold=8)
    assert rel(cp.asnumpy(G), G64) < 5e-6


# ------------------------------------------- the cuBLAS call, against a host model
class _HostArray:
    """A NumPy array seen through the attributes the cuBLAS call uses."""

    def __init__(self, a):
        self.a = a
        self.shape, self.strides, self.itemsize, self.dtype = a.shape, a.strides, a.itemsize, a.dtype
        self.flags = a.flags
        self.data = type("Memory", (), {"ptr": a.ctypes.data})()


def host_cublas(monkeypatch, name, check=None):
    """The stand-in's cuBLAS (``tests/hostcupy``) in place of CuPy's, loaded by path; returns the call log.

    ``cupy``, ``cupy_backends.cuda.libs`` and ``.api`` are replaced for the
    test, so the real CuPy is not needed (nor shadowed afterwards).  The log
    holds the pointer modes set and ``"gemm"`` for each call of ``name``, which
    runs ``check(*args)`` first.
    """
    import sys
    import types

    cublas, runtime = host_module("cupy_backends/cuda/libs/cublas.py"), host_module("cupy/cuda/runtime.py")
    calls = []
    set_mode, gemm = cublas.setPointerMode, getattr(cublas, name)

    def logged_gemm(*args):
        calls.append("gemm")
        if check is not None:
            check(*args)
        return gemm(*args)

    monkeypatch.setattr(cublas, "_mode", {})  # every handle starts in device pointer mode, as cuBLAS's
    monkeypatch.setattr(cublas, "setPointerMode", lambda h, mode: (calls.append(mode), set_mode(h, mode)))
    monkeypatch.setattr(cublas, name, logged_gemm)
    fake_cupy = types.SimpleNamespace(
        cuda=types.SimpleNamespace(device=types.SimpleNamespace(get_cublas_handle=lambda: 7),
                                   get_current_stream=lambda: types.SimpleNamespace(ptr=0)))
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.api", types.SimpleNamespace(runtime=runtime))
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs", types.SimpleNamespace(cublas=cublas))
    return calls


def test_the_transposed_cublas_call_against_a_host_model(monkeypatch):
    """``_cublas_tn``: C = A^T B (+ C) for row blocks of ``[H | L]`` with row stride 2m, beta 0 and 1.

    The host model of ``SgemmEx`` sums in float32, as the device does.
    """
    from nyhopt.ops import gram16

    calls = host_cublas(monkeypatch, "sgemmEx")
    rng = np.random.default_rng(3)
    m, rows = 23, 300
    HL = rng.random((rows, 2 * m)).astype(np.float16)
    Q = rng.standard_normal((rows, 6)).astype(np.float16)
    C = np.zeros((2 * m, m), dtype=np.float32)
    gram16._cublas_tn(_HostArray(HL[40:170]), _HostArray(HL[40:170, :m]), _HostArray(C), 0.0)
    want = HL[40:170].astype(np.float64).T @ HL[40:170, :m].astype(np.float64)
    # float16 products are exact in float32: only the sums round (130 terms, then one more addition)
    within(C, want, dot_error(HL[40:170], HL[40:170, :m], 130, np.float32))
    gram16._cublas_tn(_HostArray(HL[170:]), _HostArray(HL[170:, :m]), _HostArray(C), 1.0)
    want += HL[170:].astype(np.float64).T @ HL[170:, :m].astype(np.float64)
    within(C, want, dot_error(HL[40:], HL[40:, :m], 131, np.float32))
    CQ = np.full((2 * m, 6), np.nan, dtype=np.float32)  # beta = 0 never reads C
    gram16._cublas_tn(_HostArray(HL[:99]), _HostArray(Q[:99]), _HostArray(CQ), 0.0)
    within(CQ, HL[:99].astype(np.float64).T @ Q[:99].astype(np.float64), dot_error(HL[:99], Q[:99], 99, np.float32))
    assert calls.count("gemm") == 3 and calls[-1] == 1  # the pointer mode is restored


def test_the_gpu_control_flow_on_the_host(monkeypatch):
    """``gram_matrix16``'s CuPy branch (float16 parts written into reused chunk buffers) on NumPy."""
    from nyhopt.ops import _cupy, gram16

    kernel, X, Z, U = problem("matern32", 4, n=3001, m=37)
    want = gram_matrix16(kernel, X, Z, U, block=128, fold=3)
    ell = kernel.lengthscale_array(4)
    seen = []

    class Points:
        def block_half(self, sl, out, work):
            assert out.dtype == np.float16 and out.shape[1] == 2 * Z.shape[0] and work.dtype == np.float32
            seen.append((sl.start, sl.stop))
            out[...] = split_block(_reference.kernel_matrix(kernel, X[sl], Z, ell, np), np)
            return out

    monkeypatch.setattr(_cupy, "kernel_block_half", lambda *args: Points())
    monkeypatch.setattr(gram16, "is_cupy_namespace", lambda xp: True)
    with nh.memory_budget(37 * 8 * 700):  # chunks of 640 rows: whole blocks of 128
        got = gram_matrix16(kernel, X, Z, U, block=128, fold=3, matmul=_numpy_tn)
    assert len(seen) > 3 and all((hi - lo) % 128 == 0 for lo, hi in seen[:-1]) and seen[-1][1] == 3001
    # Chunks restart the folds: another float32 grouping than ``want``'s, so each against float64.
    for g, w, e in zip(got, reference(kernel, X, Z, U), route_errors(kernel_values(kernel, X, Z), U, 128, 3)):
        within(g, w, e)
    for g, w, e in zip(want, reference(kernel, X, Z, U), route_errors(kernel_values(kernel, X, Z), U, 128, 3)):
        within(g, w, e)


def _numpy_tn(A, B, C, beta, xp):
    P = A.astype(np.float32).T @ B.astype(np.float32)
    C[...] = P + C if beta else P
    return C


@pytest.mark.parametrize("penalty", [1e-4, None], ids=["1e-4", "1/n"])
def test_stoch_prop_through_the_emulated_route(monkeypatch, penalty):
    """``stoch-prop`` with G from the tensor-core route (emulated, and with truncated sums) keeps its value."""
    from nyhopt.ops import gram16

    rng = np.random.default_rng(5)
    n, d, m = 6000, 8, 120
    X = rng.uniform(-1.5, 1.5, (n, d)).astype(np.float32)
    y = (np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(n)).astype(np.float32)
    theta = nh.Params.from_natural(penalty or 1.0 / n, np.full(d, 1.5), X[:m])

    def evaluate():
        obj = nh.make_objective("stoch-prop", X, y, kernel="gaussian", gram=True, kernel_cache=False,
                                random_state=0, tol=1e-6)
        v, g = obj.value_and_grad(theta)
        return float(v), np.concatenate([np.ravel(np.asarray(a, dtype=np.float64)) for a in g])

    v64, g64 = evaluate()
    monkeypatch.setattr(gram_mod, "is_cupy_namespace", lambda xp: True)
    v16, g16 = evaluate()
    real = gram16.gram_matrix16
    monkeypatch.setattr(gram16, "gram_matrix16", lambda *a, **k: real(*a, matmul=tensor_core_matmul, **k))
    vtc, gtc = evaluate()
    for v, g in ((v16, g16), (vtc, gtc)):
        assert abs(v - v64) < 1e-5 * abs(v64)
        assert np.linalg.norm(g - g64) < 1e-3 * np.linalg.norm(g64)
