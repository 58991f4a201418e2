"""The m x m matrices of the exact objectives (nyhopt.objectives._mm) against dense formulas."""
import threading

import numpy as np
import pytest

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
    Linv, Ci = inv(L), inv(C)
    Minv = inv(C @ C.T)
    P = Minv @ Linv
    return {
        "Linv": Linv, "Ci": Ci, "CiS": Ci @ S, "Minv": Minv, "MinvLinv": P, "SMinv": S @ Minv,
        "M2Linv": Minv @ Minv @ Linv, "SP": S @ P, "FTSF": P.T @ S @ P, "SLinv": S @ Linv,
        "LSL": Linv.T @ S @ Linv, "FtF": Linv.T @ Minv @ Linv, "LtL": Linv.T @ Linv, "F": Ci @ Linv,
        "Q": Ci @ Ci.T,
    }


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
    for key in ("FTSF", "LSL", "FtF", "LtL", "Minv", "Q"):
        a = mm.get(key)
        np.testing.assert_array_equal(a, a.T, err_msg=key)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_prefetch_on_workers_gives_the_serial_matrices_and_runs_alongside(rng, workers):
    L, C, S = _factors(rng)
    serial = SmallAlgebra(L, C, S, np)
    keys = ("CiS", "M2Linv", "FTSF", "SMinv", "LSL", "FtF", "LtL", "Q", "F")
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
    assert set(mm._have) <= set(keys) | {"Linv", "Ci", "Minv", "MinvLinv", "SP", "SLinv"}


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
        mm.prefetch("M2Linv", "LSL", alongside=alongside)


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
        idents = mm.prefetch("M2Linv", "FTSF", alongside=fit_like)
    assert seen == [1] and len(set(idents)) == 1
