"""NumPy-BLAS triangular solves, Cholesky and GEMM updates; the CPU thread policy."""
import itertools

import numpy as np
import pytest
import scipy.linalg as sla

from nyhopt.backend import _blas
from nyhopt.backend._blas import gemm_update, potrf, potri, syrk_update, trsm
from nyhopt.backend._threads import _openblas_local_setter, cpu_threads

TOL = {np.float64: 1e-12, np.float32: 2e-5}


@pytest.fixture(params=["numpy-blas", "scipy-fallback"])
def backend(request, monkeypatch):
    if request.param == "scipy-fallback":
        monkeypatch.setattr(_blas, "_cblas", lambda: None)
    elif not _blas.numpy_blas_available():
        pytest.skip("NumPy's BLAS not found: only the SciPy fallback runs here")
    return request.param


@pytest.mark.parametrize(
    "dtype, lower, trans, t_fortran, b_layout",
    list(itertools.product([np.float64, np.float32], [True, False], [False, True], [False, True],
                           ["C", "F", "vector"])),
)
def test_trsm_matches_scipy_and_leaves_inputs(backend, rng, dtype, lower, trans, t_fortran, b_layout):
    k = 9
    T = rng.standard_normal((k, k)) + 4 * np.eye(k)
    T = (np.tril(T) if lower else np.triu(T)).astype(dtype)
    if t_fortran:
        T = np.asfortranarray(T)
    B = rng.standard_normal((k,) if b_layout == "vector" else (k, 4)).astype(dtype)
    if b_layout == "F":
        B = np.asfortranarray(B)
    T0, B0 = T.copy(), B.copy()
    want = sla.solve_triangular(T.astype(np.float64), B.astype(np.float64), lower=lower, trans=int(trans))
    got = trsm(T, B, lower=lower, trans=trans)
    assert got.shape == B.shape and got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])
    np.testing.assert_array_equal(T, T0)
    np.testing.assert_array_equal(B, B0)
    got = trsm(T, B, lower=lower, trans=trans, overwrite_b=True)
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize(
    "dtype, lower, trans, b_layout",
    list(itertools.product([np.float64, np.float32], [True, False], [False, True], ["C", "F", "view"])),
)
def test_trsm_from_the_right(backend, rng, dtype, lower, trans, b_layout):
    k = 9
    T = rng.standard_normal((k, k)) + 4 * np.eye(k)
    T = (np.tril(T) if lower else np.triu(T)).astype(dtype)
    B = rng.standard_normal((5, 2 * k) if b_layout == "view" else (5, k)).astype(dtype)
    B = B[:, :k] if b_layout == "view" else (np.asfortranarray(B) if b_layout == "F" else B)
    B0 = B.copy()
    want = B.astype(np.float64) @ np.linalg.inv(T.astype(np.float64).T if trans else T.astype(np.float64))
    got = trsm(T, B, lower=lower, trans=trans, right=True)
    assert got.shape == B.shape and got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])
    np.testing.assert_array_equal(B, B0)
    got = trsm(T, B, lower=lower, trans=trans, right=True, overwrite_b=True)
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])
    if backend == "numpy-blas":  # solved in place
        np.testing.assert_allclose(B, want, rtol=TOL[dtype], atol=TOL[dtype])


def test_trsm_reads_only_its_triangle(backend, rng):
    L = np.tril(rng.standard_normal((6, 6))) + 3 * np.eye(6)
    junk = L + np.triu(rng.standard_normal((6, 6)), 1)
    b = rng.standard_normal((6, 2))
    np.testing.assert_allclose(trsm(junk, b), trsm(L, b), rtol=1e-14)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("lower", [True, False])
def test_potrf_matches_scipy(backend, rng, dtype, lower):
    A = rng.standard_normal((12, 12))
    M = (A @ A.T + 12 * np.eye(12)).astype(dtype)
    M0 = M.copy()
    want = sla.cholesky(M.astype(np.float64), lower=lower)
    got = potrf(M, lower=lower)
    np.testing.assert_array_equal(M, M0)
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype] * 10)
    assert np.all((np.triu(got, 1) if lower else np.tril(got, -1)) == 0)
    got = potrf(M, lower=lower, overwrite=True)
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype] * 10)


def test_potrf_raises_on_indefinite(backend):
    with pytest.raises(np.linalg.LinAlgError):
        potrf(np.diag([1.0, -1.0, 2.0]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("t_fortran", [False, True])
def test_potri_is_the_symmetric_inverse(backend, rng, dtype, lower, t_fortran):
    A = rng.standard_normal((12, 12))
    M = A @ A.T + 12 * np.eye(12)
    F = sla.cholesky(M, lower=lower)
    F = (F + (np.triu if lower else np.tril)(rng.standard_normal((12, 12)), 1 if lower else -1)).astype(dtype)
    if t_fortran:
        F = np.asfortranarray(F)
    F0 = F.copy()
    got = potri(F, lower=lower)  # the junk in the other triangle is not read
    assert got.dtype == dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got, got.T)
    np.testing.assert_allclose(got, np.linalg.inv(M), rtol=TOL[dtype] * 10, atol=TOL[dtype])
    np.testing.assert_array_equal(F, F0)


def test_potri_raises_on_a_singular_factor(backend):
    with pytest.raises(np.linalg.LinAlgError):
        potri(np.diag([1.0, 0.0, 2.0]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("c_order", [True, False])
def test_gemm_update_in_place(backend, rng, dtype, c_order):
    C = rng.standard_normal((30, 7)).astype(dtype)
    if not c_order:
        C = np.asfortranarray(C)
    A, B = rng.standard_normal((30, 3)), rng.standard_normal((7, 3))
    want = C.astype(np.float64) - 2.0 * A @ B.T
    out = gemm_update(C, A, B, alpha=-2.0)
    assert out is C
    np.testing.assert_allclose(C, want, rtol=TOL[dtype], atol=TOL[dtype] * 10)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("a_layout", ["C", "F", "strided"])
def test_syrk_update_adds_into_the_lower_triangle(backend, rng, dtype, a_layout):
    C0 = rng.standard_normal((12, 12)).astype(dtype)
    A = rng.standard_normal((12, 10)).astype(dtype)
    A = {"C": A, "F": np.asfortranarray(A), "strided": A[:, ::2]}[a_layout]
    before = A.copy()
    C = C0.copy()
    out = syrk_update(C, A, alpha=-2.0)
    assert out is C
    want = C0.astype(np.float64) - 2.0 * A.astype(np.float64) @ A.T.astype(np.float64)
    np.testing.assert_allclose(np.tril(C), np.tril(want), rtol=TOL[dtype], atol=TOL[dtype] * 10)
    upper = np.triu_indices(12, 1)
    assert np.allclose(C[upper], C0[upper]) or np.allclose(C[upper], want[upper], rtol=TOL[dtype], atol=TOL[dtype] * 10)
    np.testing.assert_array_equal(A, before)


def test_cpu_threads_restores_settings():
    import numba

    before = numba.get_num_threads()
    with cpu_threads("blas"):
        assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == before
    setter = _openblas_local_setter()
    if setter is not None:
        old = setter(3)
        with cpu_threads("numba"):
            assert setter(1) == 1  # single-threaded inside
        assert setter(old) == 3  # restored on exit
    with pytest.raises(ValueError, match="kind"):
        with cpu_threads("gpu"):
            pass


def test_cpu_threads_restores_after_an_error():
    import numba

    before = numba.get_num_threads()
    with pytest.raises(RuntimeError):
        with cpu_threads("blas"):
            raise RuntimeError("boom")
    assert numba.get_num_threads() == before
