"""Tests of nyhopt.solvers: jitter, multi-RHS CG, Falkon and the direct solver.

References are plain float64 dense computations: the closed form
alpha = (Knm^T Knm + n lam Kmm)^{-1} Knm^T Y is evaluated stably as the
least-squares problem min ||Y - Knm a||^2 + n lam ||R a||^2 with R^T R = Kmm
(symmetric square root from eigh), solved by LAPACK's SVD-based lstsq.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from conftest import DATA_DIR
import nyhopt as nh
from nyhopt import solvers
from nyhopt.backend import gpu_available
from nyhopt.solvers import (
    CGResult,
    ConvergenceWarning,
    FalkonPreconditioner,
    conjugate_gradient,
    direct_solve,
    falkon_solve,
    jitter,
)
from nyhopt.solvers import falkon as falkon_mod



# ----------------------------------------------------------------------------- helpers


def closed_form(kernel, X, Z, Y, lam, shift=0.0):
    """alpha = (Knm^T Knm + n lam (Kmm + shift I))^{-1} Knm^T Y by a stable least-squares solve."""
    X, Z = np.asarray(X, np.float64), np.asarray(Z, np.float64)
    Y = np.asarray(Y, np.float64).reshape(len(X), -1)
    n, m = len(X), len(Z)
    Knm, Kmm = kernel(X, Z), kernel(Z) + shift * np.eye(len(Z))
    w, V = np.linalg.eigh(Kmm)
    R = (V * np.sqrt(np.clip(w, 0, None))).T  # R^T R = Kmm
    aug = np.vstack([Knm, np.sqrt(n * lam) * R])
    rhs = np.vstack([Y, np.zeros((m, Y.shape[1]))])
    return np.linalg.lstsq(aug, rhs, rcond=None)[0]


def rel_err(a, b):
    return np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b))


@pytest.fixture(scope="module")
def protein():
    """A 2000-row subset of protein (standardized, seeded) with 120 random centers."""
    if not (DATA_DIR / "protein" / "CASP.csv").exists():
        pytest.skip(f"real data not found at {DATA_DIR} (set NYHOPT_DATA)")
    from nyhopt.datasets import load_dataset

    ds = load_dataset("protein", data_dir=DATA_DIR, seed=0)
    rng = np.random.default_rng(0)
    X = ds.X_train[:2000]
    Y = np.column_stack([ds.y_train[:2000], np.sin(2 * X[:, 0])])  # two right-hand sides
    Z = X[rng.choice(len(X), 120, replace=False)]
    return X, Y, Z


# ----------------------------------------------------------------------------- jitter


def test_jitter_values():
    assert jitter(np.float64) == 1e-10
    assert jitter(np.float32) == 1e-6
    assert jitter("float32") == 1e-6
    assert jitter(np.zeros(2, np.float32)) == 1e-6
    assert jitter(np.int64) == 1e-10  # ints are converted to float64
    assert solvers.jitter is jitter
    with pytest.raises(TypeError, match="dtype"):
        jitter(np.complex128)


# ----------------------------------------------------------------------------- CG


def spd(m, cond, seed=0):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(m, m)))
    return (Q * np.geomspace(1, cond, m)) @ Q.T


def test_cg_multi_rhs_matches_dense_solve():
    A = spd(40, 1e3)
    B = np.random.default_rng(1).normal(size=(40, 3))
    calls = []

    def matvec(V):
        calls.append(V.shape[1])
        return A @ V

    res = conjugate_gradient(matvec, B, tol=1e-12, maxiter=500)
    assert isinstance(res, CGResult) and res.converged
    np.testing.assert_allclose(res.x, np.linalg.solve(A, B), rtol=1e-9, atol=1e-11)
    assert len(res.residual_norms) == res.iterations + 1 == len(calls) + 1
    assert res.residual_norms[0] == pytest.approx(1.0)
    assert res.residual_norms[-1] <= 1e-12
    # the true relative residual agrees with the recorded one at the end
    true = np.linalg.norm(B - A @ res.x, axis=0) / np.linalg.norm(B, axis=0)
    assert true.max() < 1e-10
    # one matvec call per iteration, for all unconverged columns at once
    assert max(calls) == 3


def test_cg_residual_follows_condition_number_bound():
    """||r_k|| / ||r_0|| <= 2 sqrt(kappa) ((sqrt(kappa) - 1) / (sqrt(kappa) + 1))^k."""
    kappa = 100.0
    A = spd(60, kappa, seed=2)
    b = np.random.default_rng(3).normal(size=60)
    res = conjugate_gradient(lambda V: A @ V, b, tol=1e-13, maxiter=200)
    k = np.arange(len(res.residual_norms))
    rate = (np.sqrt(kappa) - 1) / (np.sqrt(kappa) + 1)
    assert np.all(res.residual_norms <= 2 * np.sqrt(kappa) * rate**k * (1 + 1e-6))
    # and the decrease is real: ten orders of magnitude within the bound's iteration count
    assert res.converged and res.iterations < np.log(1e-13 / (2 * np.sqrt(kappa))) / np.log(rate) + 1


def test_cg_preconditioner_and_warm_start():
    A = spd(50, 1e4, seed=4) + np.diag(np.geomspace(1, 1e4, 50))
    b = np.random.default_rng(5).normal(size=(50, 2))
    d = np.diag(A).copy()
    plain = conjugate_gradient(lambda V: A @ V, b, tol=1e-10, maxiter=1000)
    jac = conjugate_gradient(lambda V: A @ V, b, precond=lambda R: R / d[:, None], tol=1e-10, maxiter=1000)
    assert jac.converged and plain.converged
    np.testing.assert_allclose(jac.x, np.linalg.solve(A, b), rtol=1e-7)
    assert jac.iterations < plain.iterations
    # warm start at the solution: nothing to do
    again = conjugate_gradient(lambda V: A @ V, b, x0=jac.x, tol=1e-6)
    assert again.converged and again.iterations == 0
    # a given initial residual is used instead of a matvec
    r0 = b - A @ (0.5 * jac.x)
    res = conjugate_gradient(lambda V: A @ V, b, x0=0.5 * jac.x, r0=r0, tol=1e-10, maxiter=1000)
    np.testing.assert_allclose(res.x, jac.x, rtol=1e-6)


def test_cg_zero_column_maxiter_and_breakdown():
    A = spd(20, 10.0, seed=6)
    b = np.zeros((20, 2))
    b[:, 1] = 1.0
    res = conjugate_gradient(lambda V: A @ V, b, tol=1e-12, maxiter=100)
    assert res.converged and np.all(res.x[:, 0] == 0)
    short = conjugate_gradient(lambda V: A @ V, b, tol=1e-14, maxiter=2)
    assert not short.converged and short.iterations == 2
    zero = conjugate_gradient(lambda V: A @ V, b, maxiter=0)
    assert zero.iterations == 0 and np.all(zero.x == 0) and not zero.converged
    indefinite = np.diag([1.0, -1.0])
    bad = conjugate_gradient(lambda V: indefinite @ V, np.array([1.0, 1.0]), tol=1e-12)
    assert not bad.converged


def test_cg_rejects_bad_arguments():
    A = np.eye(3)
    with pytest.raises(ValueError, match="tol"):
        conjugate_gradient(lambda V: A @ V, np.ones(3), tol=-1)
    with pytest.raises(ValueError, match="maxiter"):
        conjugate_gradient(lambda V: A @ V, np.ones(3), maxiter=1.5)
    with pytest.raises(ValueError, match="x0"):
        conjugate_gradient(lambda V: A @ V, np.ones((3, 2)), x0=np.ones((3, 1)))


def test_cg_does_not_modify_inputs():
    A = spd(10, 10.0)
    b = np.ones((10, 2))
    x0 = np.full((10, 2), 0.1)
    b.flags.writeable = False
    x0.flags.writeable = False
    conjugate_gradient(lambda V: A @ V, b, x0=x0, tol=1e-10)


# ----------------------------------------------------------------------------- direct and Falkon


def test_direct_matches_closed_form_on_protein(protein):
    X, Y, Z = protein
    k = nh.GaussianKernel(1.5)
    for lam in (1e-3, 1e-6):
        ref = closed_form(k, X, Z, Y, lam)
        alpha = direct_solve(k, X, Z, Y, lam)
        assert alpha.shape == (120, 2) and alpha.dtype == np.float64
        Knm = k(X, Z)
        assert rel_err(Knm @ alpha, Knm @ ref) < 1e-8
        Xt = X[:200] + 0.1  # predictions off the training points too
        assert rel_err(k(Xt, Z) @ alpha, k(Xt, Z) @ ref) < 1e-8


def test_direct_small_memory_budget_same_result(protein):
    X, Y, Z = protein
    k = nh.GaussianKernel(1.5)
    a = direct_solve(k, X, Z, Y[:, 0], 1e-4)
    with nh.memory_budget(64 * 1024):  # blocks of a few dozen rows
        b = direct_solve(k, X, Z, Y[:, 0], 1e-4)
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_falkon_reaches_closed_form_on_protein(protein):
    X, Y, Z = protein
    k = nh.GaussianKernel(1.5)
    lam = 1e-5
    ref = closed_form(k, X, Z, Y, lam)
    res = falkon_solve(k, X, Z, Y, lam, tol=1e-11, maxiter=500)
    assert res.cg.converged and res.alpha.shape == (120, 2) and res.beta.shape == (120, 2)
    Knm = k(X, Z)
    assert rel_err(Knm @ res.alpha, Knm @ ref) < 1e-5
    # residual history: starts at 1 (cold start), ends below tol, decreases overall
    h = res.cg.residual_norms
    assert h[0] == pytest.approx(1.0) and h[-1] <= 1e-11
    assert np.all(np.minimum.accumulate(h)[10::10] < h[0:-10:10])  # down every 10 iterations


def test_falkon_residuals_follow_preconditioned_condition_number(protein):
    """CG on W must obey the kappa(W) bound; W is formed densely (m = 120) only in the test."""
    X, Y, Z = protein
    k = nh.GaussianKernel(1.5)
    lam, n = 1e-3, len(X)
    pc = FalkonPreconditioner(k, Z, lam, n)
    P = pc.apply(np.eye(120))
    Knm = k(X, Z)
    W = P.T @ (Knm.T @ Knm + n * lam * pc.T.T @ pc.T) @ P
    ev = np.linalg.eigvalsh((W + W.T) / 2)
    kappa = ev[-1] / ev[0]
    assert kappa < 100  # the preconditioner does its job
    res = falkon_solve(k, X, Z, Y[:, 0], lam, tol=1e-12, maxiter=300, precond=pc)
    rate = (np.sqrt(kappa) - 1) / (np.sqrt(kappa) + 1)
    it = np.arange(len(res.cg.residual_norms))
    assert np.all(res.cg.residual_norms <= 2 * np.sqrt(kappa) * rate**it * (1 + 1e-6) + 1e-13)


def test_falkon_preconditioner_factors():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(30, 3))
    k = nh.GaussianKernel(0.7)
    pc = FalkonPreconditioner(k, Z, penalty=1e-2, n=500)
    m = 30
    np.testing.assert_allclose(pc.T.T @ pc.T, k(Z) + 1e-10 * m * np.eye(m), atol=1e-13)
    np.testing.assert_allclose(pc.A.T @ pc.A, pc.T @ pc.T.T / m + 1e-2 * np.eye(m), atol=1e-13)
    assert np.allclose(pc.T, np.triu(pc.T)) and np.allclose(pc.A, np.triu(pc.A))
    V = rng.normal(size=(m, 2))
    np.testing.assert_allclose(pc.apply(V), np.linalg.solve(pc.T, np.linalg.solve(pc.A, V)) / np.sqrt(500))
    np.testing.assert_allclose(pc.apply_transpose(V), (np.linalg.inv(pc.T) @ np.linalg.inv(pc.A)).T @ V / np.sqrt(500))
    pc32 = FalkonPreconditioner(k, Z.astype(np.float32), penalty=1e-2, n=500)
    assert pc32.eps == 1e-6 and pc32.T.dtype == np.float64


def test_falkon_warm_start_rhs_and_pass_count(protein):
    X, Y, Z = protein
    k = nh.GaussianKernel(1.5)
    stream = dict(cache=False, gram=False)
    cold = falkon_solve(k, X, Z, Y, 1e-4, tol=1e-9, maxiter=300, **stream)
    # cold start: one pass for Knm^T Y, then one pass per iteration
    assert cold.passes == cold.cg.iterations + 1

    near = falkon_solve(k, X, Z, Y, 1.2e-4, tol=1e-9, maxiter=300, beta0=cold.beta, **stream)
    # warm start: Knm^T Y shares the pass of the initial residual
    assert near.passes == near.cg.iterations + 1
    fresh = falkon_solve(k, X, Z, Y, 1.2e-4, tol=1e-9, maxiter=300, **stream)
    assert near.cg.iterations < fresh.cg.iterations
    assert near.cg.residual_norms[0] < 1e-1
    np.testing.assert_allclose(near.alpha, fresh.alpha, rtol=1e-5, atol=1e-8 * np.abs(fresh.alpha).max())

    rhs = k(X, Z).T @ Y
    given = falkon_solve(k, X, Z, None, 1e-4, tol=1e-9, maxiter=300, rhs=rhs, **stream)
    assert given.passes == given.cg.iterations
    # the two right-hand sides differ by rounding (dense GEMM vs fused block sums); CG stops at a
    # relative residual of 1e-9, so the solutions agree to about cond(W) * 1e-9
    np.testing.assert_allclose(given.alpha, cold.alpha, rtol=1e-6, atol=1e-8 * np.abs(cold.alpha).max())
    # restarting at the solution costs one pass and no iteration
    same = falkon_solve(k, X, Z, Y, 1e-4, tol=1e-6, beta0=cold.beta, **stream)
    assert same.cg.iterations == 0 and same.passes == 1


@pytest.mark.parametrize("cache", [False, True])
def test_falkon_gram_route_same_solution_fewer_passes(protein, cache):
    X, Y, Z = protein
    k = nh.GaussianKernel(1.5)
    ref = falkon_solve(k, X, Z, Y, 1e-4, tol=1e-12, maxiter=300, cache=False, gram=False)
    res = falkon_solve(k, X, Z, Y, 1e-4, tol=1e-12, maxiter=300, cache=cache, gram=True)
    # the Gram pass brings the right-hand side along; the iterations make no pass; a held kernel is one more
    assert res.passes == 1 + int(cache)
    loose = [falkon_solve(k, X, Z, Y, 1e-4, tol=1e-8, cache=cache, gram=g).cg.iterations for g in (False, True)]
    # the same iterates up to rounding, which CG on this ill-conditioned system (cond(B) ~ 7e8) amplifies
    assert loose[1] == pytest.approx(loose[0], rel=0.1)
    # the solutions agree to about cond(W) * tol (as two streaming solves with different rounding do)
    np.testing.assert_allclose(res.alpha, ref.alpha, rtol=0, atol=1e-6 * np.abs(ref.alpha).max())
    # ski rental: streams first, forms K^T K once the passes have cost as much
    auto = falkon_solve(k, X, Z, Y, 1e-4, tol=1e-12, maxiter=300, cache=False, gram="auto")
    assert auto.passes < ref.passes
    np.testing.assert_allclose(auto.alpha, ref.alpha, rtol=0, atol=1e-6 * np.abs(ref.alpha).max())


def test_falkon_cache_and_gram_options_are_checked(protein):
    X, Y, Z = protein
    k = nh.GaussianKernel(1.5)
    with pytest.raises(ValueError, match="gram"):
        falkon_solve(k, X, Z, Y, 1e-4, gram="always")
    with pytest.raises(ValueError, match="cache"):
        falkon_solve(k, X, Z, Y, 1e-4, cache="yes please")
    with pytest.raises(TypeError, match="cache"):
        falkon_solve(k, X, Z, Y, 1e-4, cache=3)
    with nh.cache_budget(0):
        assert falkon_solve(k, X, Z, Y, 1e-4, tol=1e-6, gram=False).passes > 1
    with nh.cache_budget(10 * 2**20):  # held: one evaluation, then matrix products
        held = falkon_solve(k, X, Z, Y, 1e-4, tol=1e-6, gram=False)
    assert held.passes == held.cg.iterations + 2


def test_falkon_columns_are_independent(protein):
    X, Y, Z = protein
    k = nh.GaussianKernel(1.5)
    both = falkon_solve(k, X, Z, Y, 1e-4, tol=1e-10, maxiter=300)
    one = falkon_solve(k, X, Z, Y[:, 1], 1e-4, tol=1e-10, maxiter=300)
    np.testing.assert_allclose(both.alpha[:, 1], one.alpha[:, 0], rtol=1e-7, atol=1e-9 * np.abs(one.alpha).max())


def test_falkon_float32_and_small_blocks(protein):
    X, Y, Z = protein
    k = nh.GaussianKernel(1.5)
    ref = falkon_solve(k, X, Z, Y, 1e-4, tol=1e-10, maxiter=300)
    with nh.memory_budget(2**20):  # 11 row blocks
        blocks = falkon_solve(k, X, Z, Y, 1e-4, tol=1e-10, maxiter=300)
    np.testing.assert_allclose(blocks.alpha, ref.alpha, rtol=1e-8, atol=1e-9 * np.abs(ref.alpha).max())
    X32, Z32 = X.astype(np.float32), Z.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        r32 = falkon_solve(k, X32, Z32, Y.astype(np.float32), 1e-4, tol=1e-6, maxiter=300)
    assert r32.alpha.dtype == np.float64
    # float32 data: jitter 1e-6, so Falkon solves with Kmm + 1e-6 m I and direct with Kmm + 1e-6 I
    X64, Z64 = X32.astype(np.float64), Z32.astype(np.float64)
    Knm = k(X64, Z64)
    ref_f = closed_form(k, X64, Z64, Y.astype(np.float32), 1e-4, shift=1e-6 * len(Z))
    # float32 products (accumulated in float32 by nyhopt.ops) cost about three digits
    assert rel_err(Knm @ r32.alpha, Knm @ ref_f) < 5e-3
    d32 = direct_solve(k, X32, Z32, Y.astype(np.float32), 1e-4)
    ref_d = closed_form(k, X64, Z64, Y.astype(np.float32), 1e-4, shift=1e-6)
    assert rel_err(Knm @ d32, Knm @ ref_d) < 1e-4


def test_falkon_warns_at_maxiter(protein):
    X, Y, Z = protein
    with pytest.warns(ConvergenceWarning, match="maxiter"):
        res = falkon_solve(nh.GaussianKernel(1.5), X, Z, Y, 1e-6, tol=1e-12, maxiter=3)
    assert not res.cg.converged and res.cg.iterations == 3 and len(res.cg.residual_norms) == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        falkon_solve(nh.GaussianKernel(1.5), X, Z, Y, 1e-6, tol=1e-12, maxiter=3, warn=False)


def test_solvers_reject_bad_input():
    rng = np.random.default_rng(0)
    X, Z, y = rng.normal(size=(50, 3)), rng.normal(size=(5, 3)), rng.normal(size=50)
    k = nh.GaussianKernel(1.0)
    for solve in (direct_solve, falkon_solve):
        with pytest.raises(ValueError, match="penalty"):
            solve(k, X, Z, y, 0.0)
        with pytest.raises(ValueError, match="penalty"):
            solve(k, X, Z, y, -1e-3)
        with pytest.raises(ValueError, match="Z"):
            solve(k, X, Z[:, :2], y, 1e-3)
        with pytest.raises(ValueError, match="Y"):
            solve(k, X, Z, y[:-1], 1e-3)
        Xn = X.copy()
        Xn[3, 1] = np.nan
        with pytest.raises(ValueError, match="X"):
            solve(k, Xn, Z, y, 1e-3)
        yi = y.copy()
        yi[0] = np.inf
        with pytest.raises(ValueError, match="Y"):
            solve(k, X, Z, yi, 1e-3)
    with pytest.raises(ValueError, match="beta0"):
        falkon_solve(k, X, Z, y, 1e-3, beta0=np.zeros((5, 2)))
    with pytest.raises(ValueError, match="rhs"):
        falkon_solve(k, X, Z, y, 1e-3, rhs=np.zeros((4, 1)))
    with pytest.raises(ValueError, match="precond"):
        falkon_solve(k, X, Z, y, 1e-3, precond=FalkonPreconditioner(k, Z, 1e-2, 50))
    with pytest.raises(ValueError, match="maxiter"):
        falkon_solve(k, X, Z, y, 1e-3, maxiter=-1)
    with pytest.raises(ValueError, match="Y or the right-hand side"):
        falkon_solve(k, X, Z, None, 1e-3)


def test_solvers_do_not_modify_inputs():
    rng = np.random.default_rng(0)
    X, Z, y = rng.normal(size=(60, 3)), rng.normal(size=(6, 3)), rng.normal(size=60)
    for a in (X, Z, y):
        a.flags.writeable = False
    k = nh.GaussianKernel(1.0)
    r = falkon_solve(k, X, Z, y, 1e-3, tol=1e-10)
    falkon_solve(k, X, Z, y, 1e-3, beta0=r.beta)
    direct_solve(k, X, Z, y, 1e-3)


# ----------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU (CuPy with a device)")
def test_falkon_and_direct_on_cupy_match_numpy():
    import cupy as cp

    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 5))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=3000)
    Z = X[:100]
    k = nh.GaussianKernel(1.5)
    ref = falkon_solve(k, X, Z, y, 1e-5, tol=1e-10, maxiter=300)
    gpu = falkon_solve(k, cp.asarray(X), cp.asarray(Z), cp.asarray(y), 1e-5, tol=1e-10, maxiter=300)
    assert isinstance(gpu.alpha, cp.ndarray) and gpu.cg.converged
    np.testing.assert_allclose(cp.asnumpy(gpu.alpha), ref.alpha, rtol=1e-6, atol=1e-8 * np.abs(ref.alpha).max())
    warm = falkon_solve(k, cp.asarray(X), cp.asarray(Z), cp.asarray(y), 1e-5, tol=1e-10, beta0=gpu.beta)
    assert warm.cg.iterations <= 1
    d = direct_solve(k, cp.asarray(X), cp.asarray(Z), cp.asarray(y), 1e-5)
    np.testing.assert_allclose(cp.asnumpy(d), direct_solve(k, X, Z, y, 1e-5), rtol=1e-7, atol=1e-9)
    g32 = falkon_solve(k, cp.asarray(X, dtype=cp.float32), cp.asarray(Z, dtype=cp.float32),
                       cp.asarray(y, dtype=cp.float32), 1e-5, tol=1e-6, maxiter=300)
    Knm = k(X, Z)
    assert rel_err(Knm @ cp.asnumpy(g32.alpha), Knm @ ref.alpha) < 1e-3


def _lapack_style_cholesky(a):
    """What LAPACK's potrf leaves for a matrix that is not positive definite: the factor up to the failing
    pivot, which keeps its non-positive value, and the trailing part untouched (no NaN anywhere)."""
    import cupy as cp

    L = np.tril(cp.asnumpy(a)).astype(np.float64)
    for j in range(L.shape[0]):
        ajj = L[j, j] - L[j, :j] @ L[j, :j]
        if not ajj > 0:
            L[j, j] = ajj
            break
        L[j, j] = np.sqrt(ajj)
        L[j + 1:, j] = (L[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    return cp.asarray(L.astype(a.dtype))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU (CuPy with a device)")
@pytest.mark.parametrize("failure", ["as cupy", "lapack style"])
def test_device_cholesky_failure_is_detected(monkeypatch, failure):
    """CuPy does not raise on a matrix that is not positive definite: every GPU factorization must see it,
    whether cuSOLVER leaves NaN or a finite factor with a non-positive pivot."""
    import cupy as cp

    from nyhopt.errors import IllConditionedError
    from nyhopt.objectives._exact import cholesky
    from nyhopt.solvers._linalg import cholesky_upper

    if failure == "lapack style":
        monkeypatch.setattr(cp.linalg, "cholesky", _lapack_style_cholesky)
    bad = cp.asarray(np.array([[4.0, 2.0, 1.0], [2.0, 1.0, 3.0], [1.0, 3.0, 9.0]]))  # second pivot 0
    with pytest.raises(IllConditionedError):
        cholesky_upper(bad.copy(), cp, "M")
    with pytest.raises(IllConditionedError):
        cholesky(bad.copy(), cp)
    good = cp.asarray(np.array([[4.0, 2.0, 1.0], [2.0, 5.0, 3.0], [1.0, 3.0, 9.0]]))
    U = cholesky_upper(good.copy(), cp, "M")
    np.testing.assert_allclose(cp.asnumpy(U.T @ U), cp.asnumpy(good), rtol=1e-14)
    L = cholesky(good.copy(), cp)
    np.testing.assert_allclose(cp.asnumpy(L @ L.T), cp.asnumpy(good), rtol=1e-14)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU (CuPy with a device)")
def test_direct_pass_sums_targets_on_the_device(monkeypatch):
    """The direct solver's pass over row blocks adds ||Y_b||^2 on the device: one host read in all, not one
    per block (each is a synchronization on the GPU).  Counted on the host stand-in, whose ndarray can be
    patched; the sums are checked everywhere."""
    import cupy as cp

    from nyhopt.solvers.direct import kmm_upper, whitened_moments

    rng = np.random.default_rng(4)
    X, Y = rng.normal(size=(400, 3)), rng.normal(size=(400, 2))
    k = nh.GaussianKernel(1.0)
    Z = X[:10]
    reads = []
    if getattr(cp, "_HOST", False):
        to_float = cp.ndarray.__float__
        monkeypatch.setattr(cp.ndarray, "__float__", lambda a: reads.append(1) or to_float(a))
    with nh.memory_budget(2 ** 14):  # 16 KiB: 9 row blocks
        got = whitened_moments(k, cp.asarray(X), cp.asarray(Z), cp.asarray(Y), kmm_upper(k, cp.asarray(Z),
                               np.float64, cp), cp)
    ref = whitened_moments(k, X, Z, Y, kmm_upper(k, Z, np.float64, np), np)
    assert type(got[2]) is float and got[2] == pytest.approx(ref[2], rel=1e-13)
    np.testing.assert_allclose(cp.asnumpy(got[0]), ref[0], rtol=1e-10, atol=1e-12)
    if getattr(cp, "_HOST", False):
        assert len(reads) <= 1
