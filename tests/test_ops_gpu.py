"""The CuPy path of nyhopt.ops (fused CUDA kernels + cuBLAS) against NumPy.

Same checks as test_ops_fast.py for the Numba path: every operation and
kernel kind, float64 and float32, a tiny memory budget (many row blocks),
sizes that are not multiples of the CUDA tiles (32 centers x 32 rows) nor of
the blocks, one-column operands, coincident points.  Marked ``gpu``: skipped
cleanly (see conftest.py) where ``cupy.is_available()`` is False.
"""
from __future__ import annotations

import numpy as np
import pytest

import nyhopt as nh
from nyhopt import ops
from nyhopt.ops import _reference

pytestmark = pytest.mark.gpu

KINDS = ["gaussian", "laplacian", "matern32", "matern52"]
TINY = 2**12
ALL = ("lengthscale", "centers", "X")
# float32: arithmetic in float32 on the device, against a float64 reference
# on the same numbers.
RTOL = {np.float64: 1e-12, np.float32: 2e-5}


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.fixture(params=[np.float64, np.float32], ids=["f64", "f32"])
def dtype(request):
    return request.param


def problem(rng, dtype, kind, n=333, m=45, d=3, k=1, ard=True):
    X = rng.uniform(-1.5, 1.5, (n, d)).astype(dtype)
    Z = rng.uniform(-1.5, 1.5, (m, d)).astype(dtype)
    Z[5] = X[11]
    ell = np.array([0.7, 1.9, 1.1, 0.8, 1.4][:d]) if ard else 1.3
    if d > 5:
        ell = np.linspace(0.5, 2.0, d) if ard else 1.3
    kernel = nh.make_kernel(kind, ell)
    o = dict(
        V=rng.standard_normal((m, k)).astype(dtype),
        U=rng.standard_normal((n, k)).astype(dtype),
        P=rng.standard_normal((n, k)).astype(dtype),
        Q=rng.standard_normal((m, k)).astype(dtype),
        G=rng.standard_normal((n, m)).astype(dtype),
    )
    return kernel, X, Z, o


def close(got, want, rtol):
    from nyhopt.backend import to_numpy

    got = np.asarray(to_numpy(got), dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    err = np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300)
    assert err <= rtol, f"relative error {err:.2e} > {rtol:.1e}"


def up(*arrays):
    return [np.asarray(a, dtype=np.float64) for a in arrays]


@pytest.mark.parametrize("d", [3, 70], ids=["fused", "gemm"])
@pytest.mark.parametrize("kind", KINDS)
def test_products_match_numpy(cp, rng, kind, dtype, d):
    kernel, X, Z, o = problem(rng, dtype, kind, d=d)
    Xd, Zd, Vd, Ud = (cp.asarray(a) for a in (X, Z, o["V"], o["U"]))
    X64, Z64, V64, U64 = up(X, Z, o["V"], o["U"])
    with nh.memory_budget(TINY):
        got = [
            ops.kernel_matrix(kernel, Xd, Zd),
            ops.kmv(kernel, Xd, Zd, Vd),
            ops.kmtv(kernel, Xd, Zd, Ud),
            *ops.normal_matvec(kernel, Xd, Zd, Vd, Ud),
        ]
    want = [
        _reference.kernel_matrix(kernel, X64, Z64, kernel.lengthscale_array(d), np),
        kernel(X64, Z64) @ V64,
        kernel(X64, Z64).T @ U64,
    ]
    K = want[0]
    want += [K.T @ (K @ V64), K.T @ U64]
    with nh.memory_budget(TINY):
        got.append(ops.normal_matvec(kernel, Xd, Zd, Vd, Ud, kv=True)[2])
    want.append(want[1])
    for g, w in zip(got, want):
        assert isinstance(g, cp.ndarray) and g.dtype == dtype
        close(g, w, RTOL[dtype])


@pytest.mark.parametrize("kind", KINDS)
def test_symmetric_kernel_matrix(cp, rng, kind, dtype):
    kernel, X, _, _ = problem(rng, dtype, kind)
    K = ops.kernel_matrix(kernel, cp.asarray(X)).get()
    np.testing.assert_array_equal(K, K.T)
    np.testing.assert_array_equal(np.diag(K), 1.0)


@pytest.mark.parametrize("ard", [True, False], ids=["ard", "iso"])
@pytest.mark.parametrize("kind", KINDS)
def test_adjoints_match_numpy(cp, rng, kind, dtype, ard):
    kernel, X, Z, o = problem(rng, dtype, kind, ard=ard, k=1)
    d = X.shape[1]
    ell = kernel.lengthscale_array(d)
    X64, Z64, P64, Q64, G64 = up(X, Z, o["P"], o["Q"], o["G"])
    dev = {name: cp.asarray(a) for name, a in [("X", X), ("Z", Z)] + sorted(o.items())}
    with nh.memory_budget(TINY):
        got_lr = ops.adjoint_lowrank(kernel, dev["X"], dev["Z"], dev["P"], dev["Q"], wrt=ALL)
        got_d = ops.adjoint_dense(kernel, dev["X"], dev["Z"], dev["G"], wrt=ALL)
    want_lr = _reference.adjoint_lowrank(kernel, X64, Z64, P64, Q64, ell, np, ALL)
    want_d = _reference.adjoint_dense(kernel, X64, Z64, G64, ell, np, ALL)
    for got, want in [(got_lr, want_lr), (got_d, want_d)]:
        for g, w in zip(got, want):
            assert isinstance(g, cp.ndarray) and g.dtype == np.float64
            close(g, w, RTOL[dtype])


@pytest.mark.parametrize("wrt", [("lengthscale",), ("centers",), ("X",), ("centers", "X")])
def test_adjoint_subsets_and_wide_operands(cp, rng, wrt):
    kernel, X, Z, o = problem(rng, np.float64, "matern52", n=1000, m=77, d=5, k=4)
    ell = kernel.lengthscale_array(5)
    got = ops.adjoint_lowrank(kernel, cp.asarray(X), cp.asarray(Z), cp.asarray(o["P"]), cp.asarray(o["Q"]), wrt=wrt)
    want = _reference.adjoint_lowrank(kernel, X, Z, o["P"], o["Q"], ell, np, wrt)
    for g, w in zip(got, want):
        if w is None:
            assert g is None
        else:
            close(g, w, 1e-12)


def test_many_features_use_the_reference(cp, rng, monkeypatch):
    """d above the fused adjoint's shared-memory limit: the reference runs on CuPy (the SIMT route)."""
    from nyhopt.ops import _cupy

    monkeypatch.setattr(_cupy, "ADJOINT_GEMM", False)  # the GEMM route has no limit on d

    d = _cupy.FUSED_ADJOINT_MAX_D + 1
    kernel, X, Z, o = problem(rng, np.float64, "gaussian", n=50, m=20, d=d, k=2)
    got = ops.adjoint_lowrank(kernel, cp.asarray(X), cp.asarray(Z), cp.asarray(o["P"]), cp.asarray(o["Q"]))
    want = _reference.adjoint_lowrank(kernel, X, Z, o["P"], o["Q"], kernel.lengthscale_array(d), np, ("lengthscale", "centers"))
    close(got.lengthscale, want.lengthscale, 1e-12)
    close(got.centers, want.centers, 1e-12)


def test_modules_are_cached_per_device(cp, rng):
    from nyhopt.ops import _cuda_compile

    kernel, X, Z, o = problem(rng, np.float64, "gaussian")
    ops.kmv(kernel, cp.asarray(X), cp.asarray(Z), cp.asarray(o["V"]))
    n_modules = len(_cuda_compile._modules)
    ops.kmv(kernel, cp.asarray(X), cp.asarray(Z), cp.asarray(o["V"]))
    assert len(_cuda_compile._modules) == n_modules
    assert any(key[0] == cp.cuda.Device().id for key in _cuda_compile._modules)


def test_inputs_are_not_modified(cp, rng):
    kernel, X, Z, o = problem(rng, np.float32, "laplacian")
    dev = {name: cp.asarray(a) for name, a in [("X", X), ("Z", Z)] + sorted(o.items())}
    saved = {name: a.copy() for name, a in dev.items()}
    ops.normal_matvec(kernel, dev["X"], dev["Z"], dev["V"], dev["U"])
    ops.adjoint_lowrank(kernel, dev["X"], dev["Z"], dev["P"], dev["Q"], wrt=ALL)
    ops.adjoint_dense(kernel, dev["X"], dev["Z"], dev["G"], wrt=ALL)
    for name, a in dev.items():
        assert bool((a == saved[name]).all()), name


# ------------------------------------------- kernel blocks from a distance product
# Gaussian and Matern blocks: one GEMM X Z^T plus nh_kernel_dot (norms, clamp,
# profile, cast in one pass); the Laplacian: nh_kernel_block (exact differences).
BLOCK_CASES = [(kind, d) for kind in KINDS for d in (1, 3, 28, 64, 100)]


def block_problem(rng, dtype, kind, d, n, m, k, ku, shift=0.0):
    X = rng.uniform(-1.5, 1.5, (n, d)).astype(dtype) + dtype(shift)
    Z = rng.uniform(-1.5, 1.5, (m, d)).astype(dtype) + dtype(shift)
    Z[5] = X[11]
    kernel = nh.make_kernel(kind, np.sqrt(d) * np.linspace(0.8, 1.6, d))  # kernel values of order 0.1 to 1
    V = rng.standard_normal((m, k)).astype(dtype)
    U = rng.standard_normal((n, ku)).astype(dtype)
    return kernel, X, Z, V, U


def check_products(cp, kernel, X, Z, V, U, dtype):
    Xd, Zd, Vd, Ud = (cp.asarray(a) for a in (X, Z, V, U))
    got = [ops.kmv(kernel, Xd, Zd, Vd), ops.kmtv(kernel, Xd, Zd, Ud),
           *ops.normal_matvec(kernel, Xd, Zd, Vd, Ud, kv=True), ops.kernel_matrix(kernel, Xd, Zd) @ Vd]
    X64, Z64, V64, U64 = up(X, Z, V, U)
    K = _reference.kernel_matrix(kernel, X64, Z64, kernel.lengthscale_array(X.shape[1]), np)
    want = [K @ V64, K.T @ U64, K.T @ (K @ V64), K.T @ U64, K @ V64, K @ V64]
    for g, w in zip(got, want):
        assert isinstance(g, cp.ndarray) and g.dtype == dtype
        close(g, w, RTOL[dtype])


@pytest.mark.parametrize("kind,d", BLOCK_CASES)
def test_block_products_match_numpy(cp, rng, kind, dtype, d):
    """n = 2311 rows, m = 139 centers, k in {1, 5, 21, 33}."""
    k = {1: 1, 3: 5, 28: 21, 64: 33, 100: 5}[d]
    check_products(cp, *block_problem(rng, dtype, kind, d, n=2311, m=139, k=k, ku=3), dtype)


@pytest.mark.parametrize("kind", ["gaussian", "laplacian", "matern52"])
def test_block_products_moderate_size_uncentered(cp, rng, kind, dtype):
    """n = 20011, m = 1003, d = 28, k = 21 (20 more columns of U); data shifted by 30 (centering)."""
    check_products(cp, *block_problem(rng, dtype, kind, 28, n=20011, m=1003, k=21, ku=20, shift=30.0), dtype)


def test_block_products_inputs_are_not_modified(cp, rng):
    kernel, X, Z, V, U = block_problem(rng, np.float32, "matern32", 5, n=500, m=70, k=3, ku=2)
    dev = [cp.asarray(a) for a in (X, Z, V, U)]
    saved = [a.copy() for a in dev]
    ops.normal_matvec(kernel, *dev, kv=True)
    ops.kmtv(kernel, dev[0], dev[1], dev[3])
    for a, b in zip(dev, saved):
        assert bool((a == b).all())


@pytest.mark.parametrize("kind", ["gaussian", "matern32"])
def test_block_products_with_the_coordinate_difference_kernel(cp, rng, kind, dtype, monkeypatch):
    """``DISTANCE_GEMM = False``: every block from nh_kernel_block, the same products."""
    from nyhopt.ops import _cupy

    monkeypatch.setattr(_cupy, "DISTANCE_GEMM", False)
    check_products(cp, *block_problem(rng, dtype, kind, 28, n=2311, m=139, k=21, ku=3), dtype)


@pytest.mark.parametrize("kind", ["gaussian", "matern32", "matern52"])
def test_gemm_adjoint_on_the_device(cp, rng, kind, dtype, monkeypatch):
    """``ADJOINT_GEMM``: the low-rank adjoint from GEMMs and nh_adjoint_dot against the reference."""
    from nyhopt.ops import _cupy

    monkeypatch.setattr(_cupy, "ADJOINT_GEMM", True)
    kernel, X, Z, V, U = block_problem(rng, dtype, kind, 28, n=5011, m=301, k=21, ku=21, shift=3.0)
    ell = kernel.lengthscale_array(28)
    with nh.memory_budget(2**22):
        got = ops.adjoint_lowrank(kernel, cp.asarray(X), cp.asarray(Z), cp.asarray(U), cp.asarray(V), wrt=ALL)
    want = _reference.adjoint_lowrank(kernel, *up(X, Z, U, V), ell, np, ALL)
    for g, w in zip(got, want):
        assert isinstance(g, cp.ndarray) and g.dtype == np.float64
        close(g, w, RTOL[dtype])
