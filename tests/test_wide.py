"""The n-sized products of the exact objectives (nyhopt.objectives._wide) and A Y from the Gram product."""
import numpy as np
import pytest

import nyhopt as nh
from nyhopt.backend._parallel import pool_phase
from nyhopt.objectives import _exact
from nyhopt.objectives._wide import wide_t_times_thin, wide_times_thin

from _bounds import dot_error, sum_error


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("r", [1, 2, 5])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fortran", [False, True])
def test_thin_products_match_dense_products(rng, workers, r, dtype, fortran):
    A = rng.standard_normal((40, 9000)).astype(dtype)
    if fortran:
        A = np.asfortranarray(A)
    Y = rng.standard_normal((9000, r)).astype(dtype)
    B = rng.standard_normal((40, r))
    A0, Y0, B0 = A.copy(), Y.copy(), B.copy()
    tol = 1e-13 if dtype == np.float64 else 2e-5
    with pool_phase(workers):
        AY = wide_times_thin(A, Y, np)
        R = wide_t_times_thin(A, B, np, Y=Y, sign=-1.0)
        P = wide_t_times_thin(A, B, np)
        P2 = wide_t_times_thin(A, B, np, sign=2.0)
    want = A.astype(np.float64) @ Y.astype(np.float64)
    assert AY.dtype == np.float64 and AY.shape == (40, r)
    if dtype == np.float64:
        np.testing.assert_allclose(AY, want, rtol=tol, atol=tol * np.abs(want).max())
    else:  # sums of 9000 float32 products (at most): tests/_bounds.py
        assert np.all(np.abs(AY - want) <= dot_error(A.T, Y, 9000, dtype))
    Bd = B.astype(dtype).astype(np.float64)
    want = Y.astype(np.float64) - A.T.astype(np.float64) @ Bd
    assert R.dtype == dtype and R.shape == (9000, r) and R.flags.c_contiguous
    if dtype == np.float64:
        np.testing.assert_allclose(R, want, rtol=tol, atol=tol * np.abs(want).max())
        np.testing.assert_allclose(P, A.T.astype(np.float64) @ Bd, rtol=tol, atol=tol * np.abs(want).max())
    else:  # 40 products and Y in float32, rounded once more to the float32 result
        mags = np.abs(A.T.astype(np.float64)) @ np.abs(Bd)
        eps = sum_error(41, dtype) + 2.0**-24
        assert np.all(np.abs(R - want) <= eps * (mags + np.abs(Y)))
        assert np.all(np.abs(P - A.T.astype(np.float64) @ Bd) <= eps * mags)
    np.testing.assert_allclose(P2, 2.0 * P, rtol=tol, atol=tol * np.abs(want).max())
    for a, a0 in ((A, A0), (Y, Y0), (B, B0)):
        np.testing.assert_array_equal(a, a0)


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("p", [1, 3])
def test_factorize_with_targets_gives_AY_and_the_same_factors(rng, keep, p):
    X = rng.normal(size=(3000, 3))
    Y = rng.normal(size=(3000, p))
    Z = X[:40]
    kernel = nh.make_kernel("gaussian", [0.8, 1.1, 1.0])
    plain = _exact.factorize(kernel, X, Z, 1e-3, np, keep_kernel=keep)
    fac = _exact.factorize(kernel, X, Z, 1e-3, np, keep_kernel=keep, targets=Y)
    assert plain.AY is None and fac.targets is Y
    np.testing.assert_array_equal(fac.At, plain.At)
    np.testing.assert_allclose(fac.S, plain.S, rtol=1e-14, atol=1e-14 * np.abs(plain.S).max())
    np.testing.assert_allclose(fac.AY, plain.At.T @ Y, rtol=1e-13, atol=1e-13 * np.abs(fac.AY).max())
    f1, f2 = _exact.fit(plain, Y, np), _exact.fit(fac, Y, np)
    np.testing.assert_allclose(f2.alpha, f1.alpha, rtol=1e-10, atol=1e-12 * np.abs(f1.alpha).max())
    assert f2.rss == pytest.approx(f1.rss, rel=1e-12)
    # other targets than the ones factorized: computed from A
    Y2 = rng.normal(size=(3000, p))
    f3 = _exact.fit(fac, Y2, np)
    np.testing.assert_allclose(f3.AY, plain.At.T @ Y2, rtol=1e-13, atol=1e-13 * np.abs(f3.AY).max())


@pytest.mark.parametrize("workers", [1, 2])
def test_column_sumsq_is_the_einsum_of_the_whole(rng, workers):
    from nyhopt.objectives._wide import column_sumsq

    A = rng.standard_normal((30, 20000))
    with pool_phase(workers):
        got = column_sumsq(A, np)
    np.testing.assert_array_equal(got, np.einsum("ji,ji->i", A, A))


@pytest.mark.parametrize("keep", [False, True])
def test_factor_of_kmm_beside_the_kernel_rows_gives_the_same_factors(rng, keep):
    """On two workers L = chol(K_mm + eps I) is computed beside a share of k(Z, X): the same numbers."""
    from nyhopt.objectives._workspace import Workspace

    X = rng.normal(size=(6000, 3))
    Z = X[:64]
    kernel = nh.make_kernel("gaussian", [0.8, 1.1, 1.0])
    facs = []
    for workers in (1, 2):
        with pool_phase(workers):
            facs.append(_exact.factorize(kernel, X, Z, 1e-3, np, keep_kernel=keep, workspace=Workspace()))
    a, b = facs
    np.testing.assert_array_equal(a.L, b.L)
    np.testing.assert_array_equal(a.At, b.At)
    if keep:
        np.testing.assert_array_equal(a.KT, b.KT)
    np.testing.assert_array_equal(a.L, _exact.kmm_factor(kernel, Z, np))
