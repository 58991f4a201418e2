"""The m x m matrices of the exact objectives (nyhopt.objectives._mm) against dense formulas."""
import threading

import numpy as np
import pytest

from nyhopt.backend import _blas
from nyhopt.backend._parallel import pool_phase
from nyhopt.objectives._mm import DEPENDS, SmallAlgebra


def _factors(rng, m=30, n_lam=0.7):
    G = rng.standard_normal((m, 3 * m))
    Kmm = G @ G.T / (3 * m) + 0.1 * np.eye(m)
    A = rng.standard_normal((m, 5 * m))
    S = A @ A.T
    S = 0.5 * (S + S.T)
    L = np.linalg.cholesky(Kmm)
    C = np.linalg.cholesky(S + n_lam * np.eye(m))
    return L, C, S


def _dense(L, C, S):
    inv = np.linalg.inv
    Minv = inv(C @ C.T)
    return {"Minv": Minv, "M2": Minv @ Minv, "SMinv": S @ Minv, "MSM": Minv @ S @ Minv, "F": inv(C) @ inv(L)}


def test_every_matrix_matches_its_dense_formula(rng):
    L, C, S = _factors(rng)
    want = _dense(L, C, S)
    assert set(want) == set(DEPENDS)
    mm = SmallAlgebra(L, C, S, np)
    for key, w in want.items():
        got = mm.get(key)
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, w, rtol=1e-10, atol=1e-10 * np.abs(w).max(), err_msg=key)


def test_symmetric_matrices_are_exactly_symmetric(rng):
    mm = SmallAlgebra(*_factors(rng), np)
    for key in ("Minv", "M2", "MSM"):
        a = mm.get(key)
        np.testing.assert_array_equal(a, a.T, err_msg=key)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_prefetch_on_workers_gives_the_serial_matrices_and_runs_alongside(rng, workers):
    L, C, S = _factors(rng)
    serial = SmallAlgebra(L, C, S, np)
    keys = ("M2", "MSM", "F")
    for k in keys:
        serial.get(k)
    mm = SmallAlgebra(L, C, S, np)
    threads = []
    with pool_phase(workers):
        out = mm.prefetch(*keys, alongside=lambda: threads.append(threading.get_ident()) or "fit")
    assert out == "fit" and len(threads) == 1
    for k in keys:
        np.testing.assert_allclose(mm._have[k], serial.get(k), rtol=1e-14, atol=1e-14 * np.abs(serial.get(k)).max())
    # only what was asked for, and what it needs
    assert set(mm._have) == set(keys) | {"Minv", "SMinv"}
    mm = SmallAlgebra(L, C, S, np)
    with pool_phase(workers):
        mm.prefetch("M2")
    assert set(mm._have) == {"Minv", "M2"}


@pytest.mark.parametrize("where", ["alongside", "matrix"])
def test_prefetch_raises_an_error_of_any_task_without_hanging(rng, monkeypatch, where):
    mm = SmallAlgebra(*_factors(rng), np)

    def boom():
        raise ValueError("boom")

    if where == "matrix":
        real = mm._compute
        monkeypatch.setattr(mm, "_compute", lambda k: boom() if k == "Minv" else real(k))
        alongside = None
    else:
        alongside = boom
    with pool_phase(2), pytest.raises(ValueError, match="boom"):
        mm.prefetch("M2", "MSM", alongside=alongside)


def test_unknown_key_is_a_key_error(rng):
    mm = SmallAlgebra(*_factors(rng), np)
    with pytest.raises(KeyError):
        mm.get("nope")


def test_alongside_runs_its_ranges_on_its_own_thread(rng):
    """A task that splits rows (map_ranges) must not hand a range to the worker that computes matrices."""
    from nyhopt.backend._parallel import active_workers, map_ranges

    mm = SmallAlgebra(*_factors(rng), np)
    seen = []

    def fit_like():
        seen.append(active_workers())
        return map_ranges(lambda lo, hi: threading.get_ident(), 100000, 10)

    with pool_phase(2):
        idents = mm.prefetch("M2", "MSM", alongside=fit_like)
    assert seen == [1] and len(set(idents)) == 1


@pytest.mark.parametrize("numpy_blas", [True, False])
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("which", ["both", "W", "G"])
def test_unwhiten_applies_L_inverse_without_forming_it(rng, monkeypatch, numpy_blas, workers, which):
    if not numpy_blas:  # the SciPy fallback of the solves, which may not solve in place
        monkeypatch.setattr(_blas, "_cblas", lambda: None)
    L, C, S = _factors(rng, m=300)  # wide enough for the solves to be split over two workers
    Wt = rng.standard_normal((300, 300)) if which != "G" else None
    Gt = S.copy() if which != "W" else None
    Wt0, Gt0 = None if Wt is None else Wt.copy(), None if Gt is None else Gt.copy()
    Linv = np.linalg.inv(L)
    with pool_phase(workers):
        W, G = SmallAlgebra(L, C, S, np).unwhiten(Wt, Gt)
    assert (W is None) == (Wt is None) and (G is None) == (Gt is None)
    if Wt is not None:
        want = Wt0 @ Linv
        np.testing.assert_allclose(W, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())
        np.testing.assert_array_equal(Wt, Wt0)
    if Gt is not None:
        want = Linv.T @ Gt0 @ Linv
        np.testing.assert_allclose(G, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())
        np.testing.assert_array_equal(Gt, Gt0)
    assert SmallAlgebra(L, C, S, np).unwhiten() == (None, None)


@pytest.mark.parametrize("n_lam", [1e-12, 1e6])
def test_trace_hat_is_accurate_at_extreme_penalties_with_near_duplicate_centers(rng, n_lam):
    """Tr H = <M^{-1}, S> keeps its relative accuracy where m - n lam Tr M^{-1} does not."""
    from fractions import Fraction

    from nyhopt.objectives._exact import Factors, trace_hat

    m = 8
    Z = rng.standard_normal((m, 2))
    Z[1::2] = Z[::2] + 1e-7 * rng.standard_normal((m // 2, 2))  # near-duplicate centers: S nearly singular
    X = rng.standard_normal((60, 2))
    K = np.exp(-0.5 * ((X[:, None] - Z[None]) ** 2).sum(-1))
    L = np.linalg.cholesky(np.exp(-0.5 * ((Z[:, None] - Z[None]) ** 2).sum(-1)) + 1e-10 * np.eye(m))
    A = np.linalg.solve(L, K.T)
    S = A @ A.T
    S = 0.5 * (S + S.T)
    C = np.linalg.cholesky(S + n_lam * np.eye(m))
    # exact Tr((S + n lam I)^{-1} S) of the rounded S, by Gauss-Jordan in fractions
    rows = [[Fraction(float(S[i, j])) + (Fraction(n_lam) if i == j else 0) for j in range(m)]
            + [Fraction(int(i == j)) for j in range(m)] for i in range(m)]
    for k in range(m):
        p = max(range(k, m), key=lambda r: abs(rows[r][k]))
        rows[k], rows[p] = rows[p], rows[k]
        rows[k] = [x / rows[k][k] for x in rows[k]]
        for r in range(m):
            if r != k and rows[r][k]:
                rows[r] = [x - rows[r][k] * y for x, y in zip(rows[r], rows[k])]
    want = float(sum(rows[i][m + j] * Fraction(float(S[j, i])) for i in range(m) for j in range(m)))
    fac = Factors(A.T, L, S, C, n_lam, 60, mm=SmallAlgebra(L, C, S, np))
    assert trace_hat(fac, np) == pytest.approx(want, rel=1e-13)
