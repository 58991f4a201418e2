"""The direct solver's n x m products in float32 (``products_in``), against float64 within the rounding bound."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import solve_triangular

import nyhopt as nh
import nyhopt.solvers.direct as direct
from nyhopt.ops import kernel_matrix
from nyhopt.solvers.direct import direct_solve, kmm_upper, products_in, whitened_moments

from _bounds import dot_error, unit_roundoff, worst_sum_error

BLOCK = 64


def _data(n=700, m=40, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = np.stack([np.sin(X[:, 0]), X[:, 1] * X[:, 2]], axis=1) + 0.1 * rng.normal(size=(n, 2))
    return X, X[rng.choice(n, m, replace=False)], Y


@pytest.mark.parametrize("sum_rows", [128, 8192])
def test_float32_products_agree_with_float64_within_the_rounding_bound(monkeypatch, sum_rows):
    monkeypatch.setattr(direct, "block_rows", lambda *a, **k: BLOCK)
    monkeypatch.setattr(direct, "FLOAT32_SUM_ROWS", sum_rows)  # 128: several float32 sums added in float64
    X, Z, Y = _data()
    kernel = nh.GaussianKernel(np.array([0.8, 1.3, 1.0]))
    Lt = kmm_upper(kernel, Z, X.dtype, np)
    S64, AY64, yy64 = whitened_moments(kernel, X, Z, Y, Lt, np)
    S32, AY32, yy32 = whitened_moments(kernel, X, Z, Y, Lt, np, products=np.float32)
    assert S32.dtype == AY32.dtype == np.float64 and yy32 == yy64

    K = kernel_matrix(kernel, X, Z)  # (n, m), float64
    A = solve_triangular(Lt, K.T, trans="T")  # L^{-1} K^T, the float64 reference
    u, m = unit_roundoff(np.float32), Z.shape[0]
    Linv = np.abs(solve_triangular(Lt, np.eye(m), trans="T"))
    # the float32 solve: K and L rounded to float32 and a backward error gamma_m |L| (Higham, Thm 8.5)
    dA = Linv @ ((worst_sum_error(m + 1, np.float32) + 2 * u) * (np.abs(Lt.T) @ np.abs(A)) + u * np.abs(K.T))
    dA *= 1.0 + 1e-3  # the second-order terms
    S_err = dot_error(A.T, A.T, min(sum_rows, X.shape[0]), np.float32, dA=dA.T, dB=dA.T)
    assert np.all(np.abs(S32 - S64) <= S_err + dot_error(A.T, A.T, X.shape[0], np.float64))
    AY_err = dot_error(A.T, Y, X.shape[0], np.float64, dA=dA.T)
    assert np.all(np.abs(AY32 - AY64) <= AY_err)
    assert np.max(np.abs(S32 - S64)) > 0  # the float32 route ran


def test_the_products_are_float64_outside_the_block_and_after_it():
    X, Z, Y = _data()
    kernel = nh.GaussianKernel(1.0)
    a64 = direct_solve(kernel, X, Z, Y, 1e-3)
    with products_in(np.float32):
        a32 = direct_solve(kernel, X, Z, Y, 1e-3)
        with products_in(None):
            np.testing.assert_array_equal(direct_solve(kernel, X, Z, Y, 1e-3), a64)
        with products_in("float64"):
            np.testing.assert_array_equal(direct_solve(kernel, X, Z, Y, 1e-3), a64)
    assert 0 < np.max(np.abs(a32 - a64)) < 1e-3 * np.max(np.abs(a64))
    np.testing.assert_array_equal(direct_solve(kernel, X, Z, Y, 1e-3), a64)


def test_the_inputs_are_left_alone():
    X, Z, Y = _data()
    before = [a.copy() for a in (X, Z, Y)]
    with products_in(np.float32):
        direct_solve(nh.GaussianKernel(1.0), X, Z, Y, 1e-3)
    for a, b in zip((X, Z, Y), before):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bad", [np.int64, "float16", np.complex128])
def test_products_other_than_float32_or_float64_are_refused(bad):
    with pytest.raises(ValueError, match="dtype must be float32, float64 or None"):
        with products_in(bad):
            pass
