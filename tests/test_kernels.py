"""Kernels: dense values against plain formulas, adjoints against finite differences."""
from __future__ import annotations

import math

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.kernels import make_kernel

KERNELS = ["gaussian", "laplacian", "matern32", "matern52"]


def plain_kernel(kind, X, Z, ell):
    """Loop-free but explicit reference: r = ||(x - z) / ell|| by differences."""
    diff = (X[:, None, :] - Z[None, :, :]) / ell
    r = np.sqrt(np.sum(diff**2, axis=2))
    if kind == "gaussian":
        return np.exp(-0.5 * r**2)
    if kind == "laplacian":
        return np.exp(-r)
    if kind == "matern32":
        return (1 + math.sqrt(3) * r) * np.exp(-math.sqrt(3) * r)
    return (1 + math.sqrt(5) * r + 5 * r**2 / 3) * np.exp(-math.sqrt(5) * r)


def data(rng, n=23, m=7, d=3, dtype=np.float64):
    X = rng.standard_normal((n, d)).astype(dtype)
    Z = rng.standard_normal((m, d)).astype(dtype)
    return X, Z


@pytest.mark.parametrize("kind", KERNELS)
@pytest.mark.parametrize("ard", [False, True])
def test_matrix_matches_plain_formula(rng, kind, ard):
    X, Z = data(rng)
    ell = np.array([0.7, 1.3, 2.1]) if ard else np.array([0.9])
    K = make_kernel(kind, ell if ard else 0.9)(X, Z)
    np.testing.assert_allclose(K, plain_kernel(kind, X, Z, ell), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", KERNELS)
def test_float32_matrix(rng, kind):
    X, Z = data(rng, dtype=np.float32)
    K = make_kernel(kind, 1.1)(X, Z)
    assert K.dtype == np.float32
    ref = plain_kernel(kind, X.astype(np.float64), Z.astype(np.float64), np.array([1.1]))
    tol = 2e-3 if kind == "laplacian" else 1e-5
    np.testing.assert_allclose(K, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("kind", KERNELS)
def test_symmetric_with_unit_diagonal(rng, kind):
    _, Z = data(rng, m=31)
    k = make_kernel(kind, np.array([0.5, 1.0, 2.0]))
    K = k(Z)
    assert np.array_equal(K, K.T)
    assert np.array_equal(np.diag(K), np.ones(31))
    np.testing.assert_array_equal(k.diag(Z), np.ones(31))


def test_laplacian_is_exact_at_zero_distance(rng):
    X, _ = data(rng, n=5)
    K = nh.LaplacianKernel(0.3)(X, X.copy())
    np.testing.assert_array_equal(np.diag(K), 1.0)


def test_laplacian_zero_distance_contributes_no_gradient(rng):
    """The derivative at r = 0 is taken as 0 (documented convention)."""
    X, _ = data(rng, n=4)
    k = nh.LaplacianKernel(0.8)
    G = np.eye(4)
    g = k.adjoint(X, X.copy(), G, wrt=("lengthscale", "centers", "X"))
    assert np.all(g.lengthscale == 0) and np.all(g.centers == 0) and np.all(g.X == 0)


def test_matern_half_is_laplacian(rng):
    X, Z = data(rng)
    np.testing.assert_array_equal(nh.MaternKernel(0.7, nu=0.5)(X, Z), nh.LaplacianKernel(0.7)(X, Z))


def _fd_check(kind, ard, lowrank, rng):
    X, Z = data(rng, n=17, m=6, d=3)
    ell = np.array([0.8, 1.4, 1.1]) if ard else np.array([1.2])
    G = rng.standard_normal((17, 6))
    P = rng.standard_normal((17, 2))
    Q = rng.standard_normal((6, 2))
    cot = P @ Q.T if lowrank else G

    def f(X_, Z_, ell_):
        return float(np.sum(cot * plain_kernel(kind, X_, Z_, ell_)))

    k = make_kernel(kind, ell if ard else float(ell[0]))
    if lowrank:
        g = k.adjoint(X, Z, P=P, Q=Q, wrt=("lengthscale", "centers", "X"))
    else:
        g = k.adjoint(X, Z, G, wrt=("lengthscale", "centers", "X"))
    h = 1e-6
    # directional derivatives along random directions (central differences)
    for target, grad in (("X", g.X), ("Z", g.centers), ("ell", g.lengthscale)):
        base = {"X": X, "Z": Z, "ell": ell}[target]
        v = rng.standard_normal(base.shape)
        args_p = {"X_": X, "Z_": Z, "ell_": ell}
        args_m = dict(args_p)
        key = {"X": "X_", "Z": "Z_", "ell": "ell_"}[target]
        args_p[key] = base + h * v
        args_m[key] = base - h * v
        fd = (f(**args_p) - f(**args_m)) / (2 * h)
        an = float(np.sum(np.asarray(grad) * v))
        assert abs(fd - an) <= 1e-7 * max(1.0, abs(fd)), (target, fd, an)


@pytest.mark.parametrize("kind", KERNELS)
@pytest.mark.parametrize("ard", [False, True])
@pytest.mark.parametrize("lowrank", [False, True])
def test_adjoint_matches_finite_differences(rng, kind, ard, lowrank):
    _fd_check(kind, ard, lowrank, rng)


def test_adjoint_lengthscale_every_coordinate(rng):
    X, Z = data(rng, n=9, m=4, d=3)
    ell = np.array([0.8, 1.4, 1.1])
    G = rng.standard_normal((9, 4))
    g = nh.MaternKernel(ell, nu=2.5).adjoint(X, Z, G, wrt=("lengthscale",))
    assert g.centers is None and g.X is None
    for j in range(3):
        e = np.zeros(3)
        e[j] = 1e-6
        fd = (np.sum(G * plain_kernel("matern52", X, Z, ell + e)) - np.sum(G * plain_kernel("matern52", X, Z, ell - e))) / 2e-6
        assert abs(fd - g.lengthscale[j]) < 1e-7 * max(1, abs(fd))


def test_lowrank_equals_dense(rng):
    X, Z = data(rng, n=40, m=9)
    P, Q = rng.standard_normal((40, 3)), rng.standard_normal((9, 3))
    k = nh.GaussianKernel(np.array([1.0, 0.5, 2.0]))
    a = k.adjoint(X, Z, P @ Q.T, wrt=("lengthscale", "centers", "X"))
    b = k.adjoint(X, Z, P=P, Q=Q, wrt=("lengthscale", "centers", "X"))
    for u, v in zip(a, b):
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: nh.GaussianKernel(-1.0).lengthscale_array(), "lengthscale"),
        (lambda: nh.GaussianKernel(0.0)(np.ones((2, 2))), "lengthscale"),
        (lambda: nh.GaussianKernel(np.nan)(np.ones((2, 2))), "lengthscale"),
        (lambda: nh.GaussianKernel([1.0, 2.0, 3.0])(np.ones((2, 2))), "lengthscale"),
        (lambda: nh.MaternKernel(1.0, nu=2.0)(np.ones((2, 2))), "nu"),
        (lambda: nh.GaussianKernel(1.0)(np.ones(3)), "X must be 2-D"),
        (lambda: nh.GaussianKernel(1.0)(np.ones((3, 2)), np.ones((3, 3))), "Z has 3 features"),
        (lambda: nh.GaussianKernel(1.0)(np.array([[np.nan, 1.0]])), "NaN"),
        (lambda: nh.GaussianKernel(1.0)(np.array([[np.inf, 1.0]])), "infinity"),
        (lambda: make_kernel("cosine"), "unknown kernel"),
        (lambda: nh.GaussianKernel(1.0).adjoint(np.ones((2, 2)), np.ones((2, 2))), "cotangent"),
        (lambda: nh.GaussianKernel(1.0).adjoint(np.ones((2, 2)), np.ones((2, 2)), np.ones((3, 2))), "G must have shape"),
    ],
)
def test_bad_input_is_named(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_inputs_are_not_modified(rng):
    X, Z = data(rng)
    X0, Z0 = X.copy(), Z.copy()
    G = rng.standard_normal((X.shape[0], Z.shape[0]))
    G0 = G.copy()
    k = nh.LaplacianKernel(np.array([1.0, 2.0, 3.0]))
    k(X, Z)
    k.adjoint(X, Z, G, wrt=("lengthscale", "centers", "X"))
    assert np.array_equal(X, X0) and np.array_equal(Z, Z0) and np.array_equal(G, G0)


def test_kernel_params_roundtrip():
    k = nh.MaternKernel(lengthscale=2.0, nu=2.5)
    assert k.get_params() == {"lengthscale": 2.0, "nu": 2.5}
    k2 = k.with_lengthscale(np.array([1.0, 3.0]))
    assert k2.nu == 2.5 and k.lengthscale == 2.0
    assert k == nh.MaternKernel(2.0, 2.5) and k != k2
