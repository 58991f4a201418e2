"""Block-wise products of the reference path against unblocked dense algebra."""
from __future__ import annotations

import numpy as np
import pytest

import nyhopt as nh
from nyhopt import ops
from nyhopt.backend import get_namespace

KINDS = ["gaussian", "laplacian", "matern32", "matern52"]
# 1 KiB: with m = 13 float64 columns this is a handful of rows per block.
TINY = 2**10


@pytest.fixture(autouse=True)
def reference_impl(monkeypatch):
    """Test the NumPy reference itself, whatever the default CPU implementation."""
    monkeypatch.setattr(ops, "CPU_IMPL", {name: "numpy" for name in ops.CPU_IMPL})


@pytest.fixture(params=KINDS)
def kernel(request):
    return nh.make_kernel(request.param, np.array([0.9, 1.7, 1.2]))


def operands(rng, n=101, m=13, k=4):
    X = rng.standard_normal((n, 3))
    Z = rng.standard_normal((m, 3))
    return X, Z, rng.standard_normal((m, k)), rng.standard_normal((n, k))


@pytest.mark.parametrize("k", [1, 4])
def test_products_blocked_equal_dense(rng, kernel, k):
    X, Z, V, U = operands(rng, k=k)
    K = kernel(X, Z)
    with nh.memory_budget(TINY):
        assert nh.get_memory_budget() == TINY
        kv = ops.kmv(kernel, X, Z, V)
        ktu = ops.kmtv(kernel, X, Z, U)
        ktkv, ktu2 = ops.normal_matvec(kernel, X, Z, V, U)
    np.testing.assert_allclose(kv, K @ V, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ktu, K.T @ U, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ktkv, K.T @ (K @ V), rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(ktu2, K.T @ U, rtol=1e-12, atol=1e-12)


def test_vector_operands_keep_their_shape(rng, kernel):
    X, Z, V, U = operands(rng)
    assert ops.kmv(kernel, X, Z, V[:, 0]).shape == (X.shape[0],)
    assert ops.kmtv(kernel, X, Z, U[:, 0]).shape == (Z.shape[0],)


def test_adjoints_blocked_equal_unblocked(rng, kernel):
    X, Z, _, _ = operands(rng)
    P, Q = rng.standard_normal((X.shape[0], 3)), rng.standard_normal((Z.shape[0], 3))
    G = rng.standard_normal((X.shape[0], Z.shape[0]))
    wrt = ("lengthscale", "centers", "X")
    full_lr = ops.adjoint_lowrank(kernel, X, Z, P, Q, wrt)
    full_d = ops.adjoint_dense(kernel, X, Z, G, wrt)
    with nh.memory_budget(TINY):
        blk_lr = ops.adjoint_lowrank(kernel, X, Z, P, Q, wrt)
        blk_d = ops.adjoint_dense(kernel, X, Z, G, wrt)
    for a, b in zip(full_lr + full_d, blk_lr + blk_d):
        np.testing.assert_allclose(b, a, rtol=1e-11, atol=1e-12)


def test_float32_products(rng, kernel):
    X, Z, V, U = operands(rng)
    X32, Z32 = X.astype(np.float32), Z.astype(np.float32)
    kv = ops.kmv(kernel, X32, Z32, V)
    assert kv.dtype == np.float32
    np.testing.assert_allclose(kv, kernel(X, Z) @ V, rtol=2e-3, atol=2e-3)
    g = ops.adjoint_lowrank(kernel, X32, Z32, U[:, :2], V[:, :2], ("lengthscale",))
    assert g.lengthscale.dtype == np.float64


def test_errors_name_the_operand(rng):
    X, Z, V, U = operands(rng)
    k = nh.GaussianKernel(1.0)
    with pytest.raises(ValueError, match="V must have 13 rows"):
        ops.kmv(k, X, Z, U)
    with pytest.raises(ValueError, match="U must have 101 rows"):
        ops.kmtv(k, X, Z, V)
    with pytest.raises(ValueError, match="same number of columns"):
        ops.adjoint_lowrank(k, X, Z, U, V[:, :2])
    with pytest.raises(ValueError, match="wrt"):
        ops.adjoint_lowrank(k, X, Z, U, V, wrt=("penalty",))
    with pytest.raises(ValueError, match="memory budget"):
        nh.set_memory_budget(0)


def test_mixed_host_device_is_an_error():
    class FakeCupy:  # an object whose type claims to come from cupy
        pass

    FakeCupy.__module__ = "cupy._core.core"
    with pytest.raises(TypeError, match="mix NumPy"):
        get_namespace(np.ones(2), FakeCupy())


def test_cpu_impl_selection_is_validated():
    with pytest.raises(ValueError, match="impl"):
        ops.set_cpu_impl("kmv", "fortran")
    with pytest.raises(ValueError, match="unknown operation"):
        ops.set_cpu_impl("matmul", "numpy")
