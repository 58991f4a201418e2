"""The integer tensor-core Gram matrix (:mod:`nyhopt.ops.gram8`) against float64.

On the host the route runs with NumPy: the same digits (float64 arithmetic,
ties to even) and exact products of digit planes, so it computes what the
device computes.  The CUDA kernel that writes the digits is checked against
the host digits bit for bit (on its host emulation), the cuBLAS call against
a host model of ``GemmEx``, and the ``gpu`` tests repeat the comparison with
float64 on a device.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.ops import _cupy, _reference, gram as gram_mod, gram8
from nyhopt.ops.gram8 import BLOCK_ROWS, PAD, gram_matrix8, join_digits, split_digits

from _bounds import dot_error
from test_cuda_gram16 import KINDS, _HostArray, host_cublas, kernel_values, reference, rel, within
from test_cuda_gram16 import problem as _problem
from test_host_cupy import host_module


def problem(kind, d, n=3001, m=37, k=3, seed=0):
    """As test_cuda_gram16's, with sizes that are no multiple of the padding (16)."""
    return _problem(kind, d, n=n, m=m, k=k, seed=seed)


# ------------------------------------------------------------------ the digits
def test_digits_hold_a_value_to_six_in_1e8():
    rng = np.random.default_rng(1)
    K = np.concatenate([rng.random(20000), [0.0, 1.0, 0.5, 1e-30, 1 - 2.0**-24]]).astype(np.float32)
    D = split_digits(K)
    assert D.dtype == np.int8 and D.shape == (3, K.size)
    assert D[0].min() >= 0 and D[0].max() <= 127
    assert np.abs(D[1:].astype(int)).max() <= 127
    err = join_digits(D) - K.astype(np.float64)
    assert np.abs(err).max() <= 0.5 / (127 * 254**2) * (1 + 1e-12)
    assert abs(err.mean()) < 1e-9  # round to nearest: no bias
    assert join_digits(split_digits(np.float32([0.0, 1.0]))).tolist() == [0.0, 1.0]


def test_digits_clip_and_keep_the_input():
    K = np.array([[-0.25, 1.5], [np.nan, 0.75]], dtype=np.float32)
    before = K.copy()
    D = split_digits(K)
    np.testing.assert_array_equal(join_digits(D), [[0.0, 1.0], [0.0, 0.75]])
    np.testing.assert_array_equal(K, before)


def test_products_of_digits_are_exact():
    rng = np.random.default_rng(2)
    D = rng.integers(-127, 128, size=(3, 2 * PAD, 4 * PAD)).astype(np.int8)
    C1, C2 = np.empty((3, 2 * PAD, 2 * PAD)), np.empty((2 * PAD, 2 * PAD))
    gram8.digit_products(D, 3 * PAD, C1, C2)
    Di = D[:, :, : 3 * PAD].astype(np.int64)
    for p in range(3):
        np.testing.assert_array_equal(C1[p], Di[p] @ Di[0].T)
    np.testing.assert_array_equal(C2, Di[1] @ Di[1].T)
    with pytest.raises(ValueError, match="at most"):
        gram8.digit_products(D, BLOCK_ROWS + PAD, C1, C2)


# ------------------------------------------------------- the route against float64
@pytest.mark.parametrize("d", [1, 3, 28, 64])
@pytest.mark.parametrize("kind", KINDS)
def test_route_is_as_accurate_as_the_float32_kernel(kind, d):
    """n = 3001, m = 37: neither a multiple of the block (304) nor of the padding (16)."""
    kernel, X, Z, U = problem(kind, d)
    G64, KU64 = reference(kernel, X, Z, U)
    G, KtU = gram_matrix8(kernel, X, Z, U, block=304)
    assert G.dtype == np.float64 and KtU.dtype == np.float64 and KtU.shape == (37, 3)
    np.testing.assert_array_equal(G, G.T)
    # The digits' sums are exact: G is a fixed function of K, up to float64 rounding (no BLAS order).
    assert rel(G, G64) < 2e-7
    # K^T U: float32 products of the float32 blocks (304 rows), added in float64; each against float64.
    EU = dot_error(kernel_values(kernel, X, Z), U, 304, np.float32)
    within(KtU, KU64, EU)
    # No bias on the diagonal: the digits round to nearest and the sums are exact.
    assert abs(float(np.mean(np.diag(G - G64)))) < 1e-9 * X.shape[0]
    _, Ku1 = gram_matrix8(kernel, X, Z, U[:, 0], block=304)
    assert Ku1.shape == (37,)
    within(Ku1, KU64[:, 0], EU[:, 0])  # one column: another BLAS call (gemv), its own rounding


def test_block_length_does_not_change_the_matrix_beyond_rounding():
    kernel, X, Z, _ = problem("gaussian", 5, n=2000, m=50)
    G1, _ = gram_matrix8(kernel, X, Z, block=2000)
    G2, _ = gram_matrix8(kernel, X, Z, block=97)
    # Exact digit sums per block; only the float64 additions of the 21 blocks' (and planes') sums
    # differ: worst case about 30 * 2^-53 = 3.3e-15 of the magnitudes, far below 1e-13.
    np.testing.assert_allclose(G1, G2, rtol=1e-13, atol=1e-13 * np.abs(G1).max())


def test_arguments_are_checked_and_inputs_kept():
    kernel, X, Z, U = problem("gaussian", 2, n=300, m=10)
    before = [a.copy() for a in (X, Z, U)]
    with pytest.raises(TypeError, match="float32"):
        gram_matrix8(kernel, X.astype(np.float64), Z)
    with pytest.raises(ValueError, match="block"):
        gram_matrix8(kernel, X, Z, block=0)
    with pytest.raises(ValueError, match="block"):
        gram_matrix8(kernel, X, Z, block=BLOCK_ROWS + 1)
    gram_matrix8(kernel, X, Z, U, block=64)
    for a, b in zip((X, Z, U), before):
        np.testing.assert_array_equal(a, b)


def test_gram_matrix_dispatches_by_the_setting(monkeypatch):
    """``gram_matrix`` on float32 CuPy data (NumPy standing in) takes the route ``TENSOR_CORES`` names."""
    kernel, X, Z, U = problem("gaussian", 3, n=500, m=20)
    calls = []
    real = gram8.gram_matrix8
    monkeypatch.setattr(gram8, "gram_matrix8", lambda *a, **k: calls.append("int8") or real(*a, **k))
    monkeypatch.setattr(gram_mod, "is_cupy_namespace", lambda xp: True)
    monkeypatch.setattr(gram_mod, "TENSOR_CORES", "int8")
    G, KtU = gram_mod.gram_matrix(kernel, X, Z, U)
    assert calls == ["int8"] and rel(G, reference(kernel, X, Z, U)[0]) < 2e-7
    gram_mod.gram_matrix(kernel, X.astype(np.float64), Z.astype(np.float64), U)  # float64 data: float64
    monkeypatch.setattr(gram_mod, "TENSOR_CORES", False)
    gram_mod.gram_matrix(kernel, X, Z, U)
    assert calls == ["int8"]
    monkeypatch.setattr(gram_mod, "TENSOR_CORES", True)
    with pytest.raises(ValueError, match="TENSOR_CORES"):
        gram_mod.gram_matrix(kernel, X, Z, U)


# ------------------------------------------- the GPU control flow and the cuBLAS call
def test_the_integer_cublas_call_against_a_host_model(monkeypatch):
    """``_igemm_tn``: ``C = B A^T`` from int8 planes contiguous along the sum, over a padded length.

    The host model of ``GemmEx`` (``tests/hostcupy``) checks the int8 types, int32 compute type and
    output, the multiples of 4 and sums exactly; nyhopt's scalars are 1 and 0.
    """
    cublas = host_module("cupy_backends/cuda/libs/cublas.py")

    def scalars_one_and_zero(handle, transa, transb, m, n, k, alpha, *args):
        assert (cublas._scalar(alpha, ctypes.c_int32), cublas._scalar(args[6], ctypes.c_int32)) == (1, 0)

    calls = host_cublas(monkeypatch, "gemmEx", scalars_one_and_zero)
    rng = np.random.default_rng(3)
    mp, ld = 32, 96
    D = rng.integers(-127, 128, size=(3, mp, ld)).astype(np.int8)
    C1 = np.full((3 * mp, mp), -1, dtype=np.int32)
    gram8._igemm_tn(_HostArray(D[0]), _HostArray(D.reshape(3 * mp, ld)), _HostArray(C1), 80)
    Di = D[:, :, :80].astype(np.int64)
    np.testing.assert_array_equal(C1.reshape(3, mp, mp), np.einsum("pjr,ir->pji", Di, Di[0]))
    C2 = np.zeros((mp, mp), dtype=np.int32)
    gram8._igemm_tn(_HostArray(D[1]), _HostArray(D[1]), _HostArray(C2), 96)
    np.testing.assert_array_equal(C2, D[1].astype(np.int64) @ D[1].astype(np.int64).T)
    assert calls.count("gemm") == 2 and calls[-1] == 1  # the pointer mode is restored
    with pytest.raises(ValueError, match="contiguous"):
        gram8._igemm_tn(_HostArray(D[0]), _HostArray(D[1]), _HostArray(np.zeros((mp, 2 * mp), np.int32)), 16)


def test_the_gpu_control_flow_on_the_host(monkeypatch):
    """``gram_matrix8``'s CuPy branch (digits written into one reused buffer, integer products) on NumPy."""
    kernel, X, Z, U = problem("matern32", 4, n=3001, m=37)
    want = gram_matrix8(kernel, X, Z, U, block=304)
    ell = kernel.lengthscale_array(4)
    seen = []

    class Points:
        def block_digits(self, sl, kt, digits):
            b, m = sl.stop - sl.start, Z.shape[0]
            assert kt.shape == (m, b) and kt.dtype == np.float32 and digits.dtype == np.int8
            assert digits.shape[1] % PAD == 0 and digits.shape[2] % PAD == 0
            seen.append((sl.start, sl.stop))
            kt[...] = _reference.kernel_matrix(kernel, X[sl], Z, ell, np).T
            digits[:, :m, :b] = split_digits(kt)
            digits[:, :m, b:] = 0
            return kt

    def igemm_tn(A, B, C, rows):
        assert A.dtype == B.dtype == np.int8 and C.dtype == np.int32 and rows % PAD == 0
        C[...] = B[:, :rows].astype(np.int64) @ A[:, :rows].astype(np.int64).T
        return C

    monkeypatch.setattr(_cupy, "kernel_block_digits", lambda *args: Points())
    monkeypatch.setattr(gram8, "is_cupy_namespace", lambda xp: True)
    monkeypatch.setattr(gram8, "_igemm_tn", igemm_tn)
    monkeypatch.setattr(gram8, "add_digit_products", lambda G, C1, C2, m, xp: gram8._add_host(G, C1, C2, m))
    got = gram_matrix8(kernel, X, Z, U, block=304)
    assert len(seen) == 10 and seen[-1] == (2736, 3001)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13 * np.abs(w).max())


def test_stoch_prop_through_the_route(monkeypatch):
    """``stoch-prop`` with G from the int8 route (on the host) keeps its value and gradient at lambda = 1/n."""
    rng = np.random.default_rng(5)
    n, d, m = 6000, 8, 120
    X = rng.uniform(-1.5, 1.5, (n, d)).astype(np.float32)
    y = (np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(n)).astype(np.float32)
    theta = nh.Params.from_natural(1.0 / n, np.full(d, 1.5), X[:m])

    def evaluate():
        obj = nh.make_objective("stoch-prop", X, y, kernel="gaussian", gram=True, kernel_cache=False,
                                random_state=0, tol=1e-6)
        v, g = obj.value_and_grad(theta)
        return float(v), np.concatenate([np.ravel(np.asarray(a, dtype=np.float64)) for a in g])

    v64, g64 = evaluate()
    monkeypatch.setattr(gram_mod, "is_cupy_namespace", lambda xp: True)
    monkeypatch.setattr(gram_mod, "TENSOR_CORES", "int8")
    v8, g8 = evaluate()
    assert abs(v8 - v64) < 1e-6 * abs(v64)
    assert np.linalg.norm(g8 - g64) < 1e-4 * np.linalg.norm(g64)


# ----------------------------------------------------------------- on a device
@pytest.mark.gpu
@pytest.mark.parametrize("d", [1, 3, 28, 64])
@pytest.mark.parametrize("kind", KINDS)
def test_integer_tensor_core_gram_on_gpu(kind, d, monkeypatch):
    """n = 5011, m = 301 (no multiple of any block or padding): the int8 route against float64."""
    cp = pytest.importorskip("cupy")
    kernel, X, Z, U = problem(kind, d, n=5011, m=301, k=5)
    monkeypatch.setattr(gram_mod, "TENSOR_CORES", "int8")
    G, KtU = gram_mod.gram_matrix(kernel, cp.asarray(X), cp.asarray(Z), cp.asarray(U))
    G64, KU64 = reference(kernel, X, Z, U)
    G, KtU = cp.asnumpy(G), cp.asnumpy(KtU)
    np.testing.assert_array_equal(G, G.T)
    assert rel(G, G64) < 1e-6 and rel(KtU, KU64) < 1e-5
    assert abs(float(np.mean(np.diag(G - G64)))) < 1e-8 * X.shape[0]


@pytest.mark.gpu
def test_integer_tensor_core_gram_matches_the_host_route():
    """Device and host compute the same digits and the same exact sums: equal up to the kernel's rounding."""
    cp = pytest.importorskip("cupy")
    kernel, X, Z, _ = problem("gaussian", 28, n=70_001, m=500)
    G_host, _ = gram_matrix8(kernel, X, Z, block=20_000)
    G_dev, _ = gram_matrix8(kernel, cp.asarray(X), cp.asarray(Z), block=20_000)
    assert rel(cp.asnumpy(G_dev), G_host) < 1e-6


# ------------------------------------------------------------ the once-per-device check
@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
def test_the_device_check_passes_and_is_kept(kind, monkeypatch):
    """On a working device the route's check passes for every kernel, once per device and kind."""
    cp = pytest.importorskip("cupy")
    monkeypatch.setattr(gram8, "_CHECKED", {})
    kernel, X, Z, _ = problem(kind, 5, n=400, m=50)
    calls = []
    real = gram8._device_mismatch
    monkeypatch.setattr(gram8, "_device_mismatch", lambda *a: calls.append(1) or real(*a))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            assert gram8.device_check(kernel, cp.asarray(X), cp.asarray(Z), cp)
    assert calls == [1]
    assert gram8.device_check(kernel, X, Z, np)  # the host route is exact by construction
    assert not gram8.failed_here() and gram_mod.tensor_core_route(np.float32, cp) == "int8"


@pytest.mark.gpu
@pytest.mark.parametrize("fault,message", [("products", "integer products"), ("digits", "digits"),
                                           ("kernel", "kernel values"), ("error", "RuntimeError: status 15")])
def test_a_failed_device_check_falls_back_to_float64_products(fault, message, monkeypatch):
    """A device whose int8 route computes something else warns once, naming it, and gets float64 products."""
    cp = pytest.importorskip("cupy")
    monkeypatch.setattr(gram8, "_CHECKED", {})
    monkeypatch.setattr(gram_mod, "TENSOR_CORES", "int8")
    kernel, X, Z, U = problem("gaussian", 3, n=600, m=40)
    Xd, Zd, Ud = cp.asarray(X), cp.asarray(Z), cp.asarray(U)
    if fault == "products":
        real = gram8._igemm_tn
        monkeypatch.setattr(gram8, "_igemm_tn", lambda A, B, C, rows: real(A, B, C, rows - gram8.PAD))
    elif fault == "digits":
        real_split = gram8.split_digits
        monkeypatch.setattr(gram8, "split_digits", lambda K, xp=np: real_split(K, xp)[::-1].copy())
    elif fault == "kernel":
        real_ref = gram8._reference.kernel_matrix
        monkeypatch.setattr(gram8._reference, "kernel_matrix", lambda *a, **k: 0.5 * real_ref(*a, **k))
    else:
        def fail(*args):
            raise RuntimeError("status 15")
        monkeypatch.setattr(gram8, "_igemm_tn", fail)
    with pytest.warns(RuntimeWarning, match=f"int8 tensor-core Gram route failed its check.*{message}"):
        G, KtU = gram_mod.gram_matrix(kernel, Xd, Zd, Ud)
    monkeypatch.setattr(gram_mod, "TENSOR_CORES", False)
    G64, KtU64 = gram_mod.gram_matrix(kernel, Xd, Zd, Ud)
    np.testing.assert_array_equal(cp.asnumpy(G), cp.asnumpy(G64))
    np.testing.assert_array_equal(cp.asnumpy(KtU), cp.asnumpy(KtU64))
    monkeypatch.setattr(gram_mod, "TENSOR_CORES", "int8")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once: the verdict is kept
        gram_mod.gram_matrix(kernel, Xd, Zd, Ud)
    # the route the operators price and trust is float64 products on this device from now on
    assert gram8.failed_here() and gram_mod.tensor_core_route(np.float32, cp) is None
    assert gram_mod.tensor_core_route(np.float32, cp, "float16") == "float16"
