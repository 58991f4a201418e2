"""Cotangents in factored form: ``ops.adjoint_factored`` and the exact objectives' use of it.

``adjoint_factored`` contracts :math:`G = \\mathrm{diag}(u_0)B_0V_0 + PQ^T +
\\sum_k \\mathrm{diag}(u_k)B_kV_k` block by block.  It must agree with
``adjoint_dense`` of the dense ``G`` (float64: to 1e-13 relative to the
largest entry), on both of its loops: the transposed Gaussian loop that
reads a kept ``k(Z, X)`` and the row loop of the other cases; with sizes
that are not multiples of the block or of the four centers per pass, and
on nyhopt's worker pool.  ``factorize(keep_kernel=True)`` must give the
same factors as without, and the exact objectives the same gradient as
with the dense cotangent.
"""
from __future__ import annotations

import numpy as np
import pytest

import nyhopt as nh
from nyhopt import ops
from nyhopt.backend._parallel import pool_phase
from nyhopt.objectives import _exact, holdout
from nyhopt.objectives._base import params_gradient
from nyhopt.ops import _factored

KINDS = ["gaussian", "laplacian", "matern32", "matern52"]


def close(got, want, rtol):
    want = np.asarray(want, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == want.shape
    err = np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300)
    assert err <= rtol, f"relative error {err:.2e} > {rtol:.1e}"


def problem(rng, n, m, d=3, dtype=np.float64, ard=True, kind="gaussian"):
    X = rng.uniform(-1.5, 1.5, (n, d)).astype(dtype)
    Z = rng.uniform(-1.5, 1.5, (m, d)).astype(dtype)
    Z[1] = X[2]  # coincident pair
    ell = np.array([0.7, 1.9, 1.1, 0.8][:d]) if ard else 1.3
    return nh.make_kernel(kind, ell), X, Z


def factors(rng, n, m, dtype, with_thin=True, n_scaled=1):
    """``products`` and (P, Q) of a random factored cotangent, and its dense ``G``."""
    A = rng.standard_normal((m, n)).astype(dtype)  # B_0 = A.T, a transposed view as in the objectives
    prods = [(A.T, None, rng.standard_normal((m, m)).astype(dtype))]
    for _ in range(n_scaled):
        B = np.asfortranarray(rng.standard_normal((n, m))).astype(dtype)
        prods.append((B, rng.uniform(0.1, 2.0, n).astype(dtype), rng.standard_normal((m, m)).astype(dtype)))
    P = Q = None
    G = prods[0][0].astype(np.float64) @ prods[0][2]
    if with_thin:
        P, Q = rng.standard_normal((n, 2)).astype(dtype), rng.standard_normal((m, 2)).astype(dtype)
        G = G + P.astype(np.float64) @ Q.T
    for B, u, V in prods[1:]:
        G = G + (B.astype(np.float64) @ V) * u[:, None]
    return prods, P, Q, G


@pytest.mark.parametrize("n, m", [(7, 5), (256, 4), (300, 9), (1000, 30), (2000, 4 * 13 + 3)])
@pytest.mark.parametrize("kind", KINDS)
def test_adjoint_factored_matches_dense(rng, n, m, kind):
    kernel, X, Z = problem(rng, n, m, kind=kind)
    prods, P, Q, G = factors(rng, n, m, np.float64)
    want = ops.adjoint_dense(kernel, X, Z, G)
    KT = ops.kernel_matrix(kernel, Z, X)
    for kt in (None, KT):
        got = ops.adjoint_factored(kernel, X, Z, prods, P, Q, KT=kt)
        close(got.lengthscale, want.lengthscale, 1e-13)
        close(got.centers, want.centers, 1e-13)
        assert got.X is None


@pytest.mark.parametrize("ard", [True, False], ids=["ard", "iso"])
def test_adjoint_factored_variants(rng, ard):
    n, m = 777, 21
    kernel, X, Z = problem(rng, n, m, d=4, ard=ard)
    KT = ops.kernel_matrix(kernel, Z, X)
    for with_thin, n_scaled in [(False, 0), (True, 0), (False, 2), (True, 2)]:
        prods, P, Q, G = factors(rng, n, m, np.float64, with_thin, n_scaled)
        want = ops.adjoint_dense(kernel, X, Z, G)
        got = ops.adjoint_factored(kernel, X, Z, prods, P, Q, KT=KT)
        assert got.lengthscale.shape == np.shape(kernel.lengthscale_array(4))
        close(got.lengthscale, want.lengthscale, 1e-13)
        close(got.centers, want.centers, 1e-13)
    # only a low-rank part
    _, P, Q, _ = factors(rng, n, m, np.float64)
    got = ops.adjoint_factored(kernel, X, Z, (), P, Q, KT=KT)
    want = ops.adjoint_lowrank(kernel, X, Z, P, Q)
    close(got.centers, want.centers, 1e-13)
    close(got.lengthscale, want.lengthscale, 1e-13)


def test_adjoint_factored_wrt_and_pool(rng):
    n, m = 3000, 37
    kernel, X, Z = problem(rng, n, m)
    prods, P, Q, G = factors(rng, n, m, np.float64)
    KT = ops.kernel_matrix(kernel, Z, X)
    full = ops.adjoint_dense(kernel, X, Z, G, wrt=("lengthscale", "centers", "X"))
    for wrt in [("lengthscale",), ("centers",), ("lengthscale", "centers", "X")]:
        for kt in (None, KT):
            with pool_phase(2):  # two row ranges on the worker pool
                got = ops.adjoint_factored(kernel, X, Z, prods, P, Q, KT=kt, wrt=wrt)
            for field in ("lengthscale", "centers", "X"):
                value = getattr(got, field)
                if field in wrt:
                    close(value, getattr(full, field), 1e-13)
                else:
                    assert value is None


def test_adjoint_factored_float32(rng):
    """float32 data: the blocks of G are float32 products, the sums float64."""
    n, m = 900, 17
    kernel, X, Z = problem(rng, n, m, dtype=np.float32)
    prods, P, Q, _ = factors(rng, n, m, np.float32)
    G32 = _factored.factored_matrix(prods, P, Q, n, m, np.dtype(np.float32))
    KT = ops.kernel_matrix(kernel, Z, X)
    want = ops.adjoint_dense(kernel, X, Z, G32)
    for kt in (None, KT):
        got = ops.adjoint_factored(kernel, X, Z, prods, P, Q, KT=kt)
        assert got.centers.dtype == np.float64
        close(got.centers, want.centers, 1e-5)
        close(got.lengthscale, want.lengthscale, 1e-5)


def test_adjoint_factored_other_backends_and_errors(rng, monkeypatch):
    n, m = 120, 6
    kernel, X, Z = problem(rng, n, m)
    prods, P, Q, G = factors(rng, n, m, np.float64)
    want = ops.adjoint_dense(kernel, X, Z, G)
    monkeypatch.setitem(ops.CPU_IMPL, "adjoint_dense", "numpy")  # the dense fallback
    got = ops.adjoint_factored(kernel, X, Z, prods, P, Q)
    close(got.centers, want.centers, 1e-12)
    close(ops._factored_dense(prods, P, Q, np), G, 1e-14)
    monkeypatch.setitem(ops.CPU_IMPL, "adjoint_dense", "numba")
    with pytest.raises(ValueError, match="products"):
        ops.adjoint_factored(kernel, X, Z, [(prods[0][0][:5], None, prods[0][2])])
    with pytest.raises(ValueError, match="row scaling"):
        ops.adjoint_factored(kernel, X, Z, [(prods[0][0], np.ones(3), prods[0][2])])
    with pytest.raises(ValueError, match="together"):
        ops.adjoint_factored(kernel, X, Z, prods, P, None)
    with pytest.raises(ValueError, match="at least one"):
        ops.adjoint_factored(kernel, X, Z, ())
    with pytest.raises(ValueError, match="KT"):
        ops.adjoint_factored(kernel, X, Z, prods, KT=np.ones((n, m)))
    before = [a.copy() for a in (X, Z, P, Q, prods[1][1])]
    ops.adjoint_factored(kernel, X, Z, prods, P, Q, KT=ops.kernel_matrix(kernel, Z, X))
    for a, b in zip(before, (X, Z, P, Q, prods[1][1])):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kind", ["gaussian", "matern32"])
def test_factorize_keeps_the_kernel_matrix(rng, kind):
    kernel, X, Z = problem(rng, 2500, 40, kind=kind)
    kept = _exact.factorize(kernel, X, Z, 1e-3, np, keep_kernel=True)
    plain = _exact.factorize(kernel, X, Z, 1e-3, np)
    assert plain.KT is None
    for a, b in zip(kept[:4], plain[:4]):
        np.testing.assert_array_equal(a, b)  # column blocks of a triangular solve: the same numbers
    if kind == "gaussian":
        np.testing.assert_array_equal(kept.KT, ops.kernel_matrix(kernel, Z, X))
    else:  # the other kernels do not read it
        assert kept.KT is None


def test_gram_with_weights(rng):
    A = rng.standard_normal((13, 500))
    w = rng.uniform(0.0, 3.0, 500)
    close(_exact.gram(A, np, weights=w), (A * w) @ A.T, 1e-14)
    w[3] = -1.0  # a negative weight: the general product
    close(_exact.gram(A, np, weights=w), (A * w) @ A.T, 1e-14)


@pytest.mark.parametrize("name", ["holdout", "loocv", "gcv", "creg", "sgpr", "prop"])
def test_objectives_factored_gradient_equals_dense(rng, name, monkeypatch):
    """The factored cotangent and the kept kernel matrices give the gradient of the dense path (1e-12)."""
    X = rng.normal(size=(1500, 3))
    y = np.c_[np.sin(X[:, 0]), X[:, 1] ** 2] + 0.1 * rng.normal(size=(1500, 2))
    obj = nh.make_objective(name, X, y, kernel="gaussian")
    params = nh.Params.from_natural(1e-3, [0.8, 1.2, 1.0], X[:30])
    value, grad = obj.value_and_grad(params)
    ev = obj._evaluate(obj._context(params, frozenset(("lengthscale",)), True))
    assert all(block.KT is not None for block in ev.cotangents.nm)  # every block reads its kept k(Z, X_b)
    monkeypatch.setattr(_exact.CotangentBuilder, "cotangent_factored", _exact.CotangentBuilder.cotangent_nm)
    monkeypatch.setattr(_exact, "kernel_reused", lambda kernel, xp: False)
    monkeypatch.setattr(holdout, "kernel_reused", lambda kernel, xp: False)
    value2, grad2 = obj.value_and_grad(params)
    assert value == value2
    for a, b in zip(grad, grad2):
        close(a, b, 1e-12)


def test_builder_products_in_dense_and_factored_form(rng):
    """``add_product`` terms: the dense cotangent and the factored one contract alike."""
    X = rng.normal(size=(800, 2))
    Y = rng.normal(size=(800, 1))
    kernel = nh.make_kernel("gaussian", [0.9, 1.1])
    Z = X[:25]
    fac = _exact.factorize(kernel, X, Z, 1e-2, np, keep_kernel=True)
    b = _exact.CotangentBuilder(fac, Y, _exact.fit(fac, Y, np), np)
    b.add_fit(0.7)
    b.add_trace_hat(0.3)
    b.add_product(np.asfortranarray(rng.normal(size=(800, 25))), rng.normal(size=(25, 25)), rng.uniform(size=800))
    dense, factored = b.cotangent_nm(X), b.cotangent_factored(X)
    assert factored.G is None and factored.KT is fac.KT and len(factored.products) == 2
    cot = b.cotangents(X)
    params = nh.Params.from_natural(1e-2, [0.9, 1.1], Z)
    g1 = params_gradient(kernel, Z, cot, params)
    g2 = params_gradient(kernel, Z, cot._replace(nm=(dense,)), params)
    for a, c in zip(g1, g2):
        close(a, c, 1e-13)
