"""The Numba CPU path of nyhopt.ops against the NumPy reference.

Every operation, every kernel kind, float64 and float32, with a tiny memory
budget that makes the reference run many row blocks, sizes that are not
multiples of anything, one-column operands, and coincident points (the
Laplacian's derivative is 0 at zero distance).

Agreement is measured relative to the largest entry.  float64: 1e-13.
float32: the Numba loops compute in float64 whatever the data dtype, so they
are compared with the reference run in float64 on the same (float32) numbers:
gradients (float64) to 1e-13, products (rounded to float32 once) to 1.2e-7;
and, loosely, with the float32 reference (whose expanded lengthscale sums
cancel in float32).
"""
from __future__ import annotations

import numpy as np
import pytest

import nyhopt as nh
from nyhopt import ops
from nyhopt.ops import _numba, _reference

KINDS = ["gaussian", "laplacian", "matern32", "matern52"]
TINY = 2**11  # bytes: a few rows per block of the reference
ALL = ("lengthscale", "centers", "X")
RTOL = {np.float64: 1e-13, np.float32: 1.2e-7}


def problem(rng, dtype, kind, n=103, m=29, d=3, k=1, ard=True):
    X = rng.uniform(-1.5, 1.5, (n, d)).astype(dtype)
    Z = rng.uniform(-1.5, 1.5, (m, d)).astype(dtype)
    Z[5] = X[11]  # coincident pair
    ell = np.array([0.7, 1.9, 1.1, 0.8, 1.4][:d]) if ard else 1.3
    kernel = nh.make_kernel(kind, ell)
    ops_ = dict(
        V=rng.standard_normal((m, k)).astype(dtype),
        U=rng.standard_normal((n, k)).astype(dtype),
        P=rng.standard_normal((n, k)).astype(dtype),
        Q=rng.standard_normal((m, k)).astype(dtype),
        G=rng.standard_normal((n, m)).astype(dtype),
    )
    return kernel, X, Z, kernel.lengthscale_array(d), ops_


def close(got, want, rtol):
    """Entrywise agreement relative to the largest entry of ``want``."""
    want = np.asarray(want, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == want.shape
    scale = max(np.max(np.abs(want)), 1e-300)
    err = np.max(np.abs(got - want)) / scale
    assert err <= rtol, f"relative error {err:.2e} > {rtol:.1e}"


def reference64(op, kernel, X, Z, *operands, **kw):
    """The reference on float64 copies of the operands."""
    up = [None if a is None else np.asarray(a, dtype=np.float64) for a in (X, Z, *operands)]
    kw = {k: (None if v is None else np.asarray(v, dtype=np.float64)) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    ell = kw.pop("ell")
    return getattr(_reference, op)(kernel, *up, ell, np, **kw)


@pytest.fixture(params=[np.float64, np.float32], ids=["f64", "f32"])
def dtype(request):
    return request.param


@pytest.mark.parametrize("kind", KINDS)
def test_products_match_reference(rng, kind, dtype):
    kernel, X, Z, ell, o = problem(rng, dtype, kind)
    V, U = o["V"], o["U"]
    with nh.memory_budget(TINY):
        fast = [
            _numba.kernel_matrix(kernel, X, Z, ell, np),
            _numba.kmv(kernel, X, Z, V, ell, np),
            _numba.kmtv(kernel, X, Z, U, ell, np),
            *_numba.normal_matvec(kernel, X, Z, V, ell, np, U=U),
        ]
        fast_nou = _numba.normal_matvec(kernel, X, Z, V, ell, np)
        calls = [("kernel_matrix", ()), ("kmv", (V,)), ("kmtv", (U,))]
        ref = [reference64(op, kernel, X, Z, *args, ell=ell) for op, args in calls]
        ref += list(reference64("normal_matvec", kernel, X, Z, V, ell=ell, U=U))
        ref32 = [getattr(_reference, op)(kernel, X, Z, *args, ell, np) for op, args in calls]
    assert fast_nou[1] is None
    np.testing.assert_array_equal(fast_nou[0], fast[3])
    with nh.memory_budget(TINY):
        ktkv, ktu, kv = _numba.normal_matvec(kernel, X, Z, V, ell, np, U=U, kv=True)
        ref_kv = _reference.normal_matvec(kernel, X, Z, V, ell, np, U=U, kv=True)[2]
    np.testing.assert_array_equal(ktkv, fast[3])
    np.testing.assert_array_equal(ktu, fast[4])
    assert kv.dtype == dtype
    close(kv, ref[1], RTOL[dtype])  # K V from the same pass equals kmv
    close(ref_kv, ref[1], 1e-5 if dtype == np.float32 else 1e-12)
    for i, (got, want) in enumerate(zip(fast, ref)):
        assert got.dtype == dtype
        close(got, want, RTOL[dtype])
        if dtype == np.float32 and i < len(ref32):
            close(got, ref32[i], 1e-5)


@pytest.mark.parametrize("ard", [True, False], ids=["ard", "iso"])
@pytest.mark.parametrize("kind", KINDS)
def test_adjoints_match_reference(rng, kind, dtype, ard):
    kernel, X, Z, ell, o = problem(rng, dtype, kind, ard=ard)
    with nh.memory_budget(TINY):
        fast_lr = _numba.adjoint_lowrank(kernel, X, Z, o["P"], o["Q"], ell, np, ALL)
        ref_lr = reference64("adjoint_lowrank", kernel, X, Z, o["P"], o["Q"], ell=ell, wrt=ALL)
        fast_d = _numba.adjoint_dense(kernel, X, Z, o["G"], ell, np, ALL)
        ref_d = reference64("adjoint_dense", kernel, X, Z, o["G"], ell=ell, wrt=ALL)
        ref32 = _reference.adjoint_lowrank(kernel, X, Z, o["P"], o["Q"], ell, np, ALL)
    for fast, ref in [(fast_lr, ref_lr), (fast_d, ref_d)]:
        assert fast.lengthscale.shape == ell.shape
        for got, want in zip(fast, ref):
            assert got.dtype == np.float64
            close(got, want, 1e-13)
    if dtype == np.float32:
        for got, want in zip(fast_lr, ref32):
            close(got, want, 2e-5)


def test_wider_operands_and_features(rng):
    """k > 1 columns, odd and even feature counts (the loops pair features)."""
    for d in (1, 4, 5):
        kernel, X, Z, ell, o = problem(rng, np.float64, "matern52", n=37, m=11, d=d, k=4)
        close(_numba.kmv(kernel, X, Z, o["V"], ell, np), _reference.kmv(kernel, X, Z, o["V"], ell, np), 1e-13)
        for q in (3, 4):  # odd and even numbers of low-rank columns
            P, Q = o["P"][:, :q], o["Q"][:, :q]
            got = _numba.adjoint_lowrank(kernel, X, Z, P, Q, ell, np, ALL)
            want = _reference.adjoint_lowrank(kernel, X, Z, P, Q, ell, np, ALL)
            for a, b in zip(got, want):
                close(a, b, 1e-13)


def test_wrt_subsets(rng):
    kernel, X, Z, ell, o = problem(rng, np.float64, "gaussian")
    full = _numba.adjoint_lowrank(kernel, X, Z, o["P"], o["Q"], ell, np, ALL)
    for wrt in [("lengthscale",), ("centers",), ("X",), ()]:
        part = _numba.adjoint_lowrank(kernel, X, Z, o["P"], o["Q"], ell, np, wrt)
        for field in ("lengthscale", "centers", "X"):
            value = getattr(part, field)
            if field in wrt:  # the loops differ per subset: equal up to rounding
                np.testing.assert_allclose(value, getattr(full, field), rtol=1e-14, atol=1e-14)
            else:
                assert value is None
    with pytest.raises(ValueError, match="wrt"):
        _numba.adjoint_dense(kernel, X, Z, o["G"], ell, np, ("penalty",))


def test_symmetric_matrix_is_exactly_symmetric(rng):
    for kind in KINDS:
        kernel, X, _, ell, _ = problem(rng, np.float64, kind)
        K = _numba.kernel_matrix(kernel, X, X, ell, np, symmetric=True)
        np.testing.assert_array_equal(K, K.T)
        np.testing.assert_array_equal(np.diag(K), 1.0)


def test_inputs_are_not_modified(rng):
    kernel, X, Z, ell, o = problem(rng, np.float32, "laplacian")
    X = np.asfortranarray(X)  # non C-contiguous inputs are accepted too
    saved = {name: a.copy() for name, a in [("X", X), ("Z", Z)] + sorted(o.items())}
    _numba.kmv(kernel, X, Z, o["V"], ell, np)
    _numba.normal_matvec(kernel, X, Z, o["V"], ell, np, U=o["U"])
    _numba.adjoint_lowrank(kernel, X, Z, o["P"], o["Q"], ell, np, ALL)
    _numba.adjoint_dense(kernel, X, Z, o["G"], ell, np, ALL)
    for name, a in [("X", X), ("Z", Z)] + sorted(o.items()):
        np.testing.assert_array_equal(a, saved[name], err_msg=name)


def test_exp_matches_numpy():
    x = np.concatenate([-np.geomspace(1e-300, 750.0, 20001), [0.0, -0.0, -708.0, -709.0, -1e300]])
    got = np.array([_numba._exp(v) for v in x])
    want = np.exp(x)
    normal = want >= 2.3e-308
    assert np.max(np.abs(got[normal] - want[normal]) / want[normal]) <= 2.3e-16
    assert np.all(got[~normal] <= want[~normal]) and np.all(got[~normal] == 0.0)
    assert _numba._exp(0.0) == 1.0


@pytest.mark.parametrize("kind", KINDS)
def test_profile_is_accurate_in_the_tails(kind):
    """Entrywise (not max-relative) accuracy, down to values near 1e-300.

    With X = 0 and Z = integers the distances are exact, so the only error
    left is the one of the profile itself (the fused, vectorized exp).
    """
    Z = np.arange(0.0, 38.0)[:, None] if kind == "gaussian" else np.arange(0.0, 700.0, 7.0)[:, None]
    X = np.zeros((3, 1))
    kernel = nh.make_kernel(kind, 1.0)
    got = _numba.kernel_matrix(kernel, X, Z, kernel.lengthscale_array(1), np)
    r = Z[:, 0]
    exact = {
        "gaussian": np.exp(-0.5 * r**2),
        "laplacian": np.exp(-r),
        "matern32": (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r),
        "matern52": (1 + np.sqrt(5) * r + 5 * r**2 / 3) * np.exp(-np.sqrt(5) * r),
    }[kind]
    ok = exact > 1e-300
    assert ok.sum() > 30
    np.testing.assert_allclose(got[0, ok], exact[ok], rtol=2e-15 if kind == "laplacian" else 2e-14)


def test_unknown_kind_falls_back_to_reference(rng):
    class Cauchy(nh.GaussianKernel):
        kind = "cauchy"

        def profile(self, s, xp=np):
            return 1.0 / (1.0 + s)

        def profile_and_derivative(self, s, xp=np):
            k = 1.0 / (1.0 + s)
            return k, -k * k

    kernel, X, Z, ell, o = problem(rng, np.float64, "gaussian")
    kernel = Cauchy(ell)
    np.testing.assert_array_equal(_numba.kmv(kernel, X, Z, o["V"], ell, np), _reference.kmv(kernel, X, Z, o["V"], ell, np))


def test_public_dispatch_uses_numba(rng, monkeypatch):
    kernel, X, Z, _, o = problem(rng, np.float64, "matern32")
    calls = []
    original = _numba.kmv

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(_numba, "kmv", spy)
    monkeypatch.setitem(ops.CPU_IMPL, "kmv", "numba")
    got = ops.kmv(kernel, X, Z, o["V"][:, 0])
    assert calls and got.shape == (X.shape[0],)
    monkeypatch.setitem(ops.CPU_IMPL, "kmv", "numpy")
    np.testing.assert_allclose(got, ops.kmv(kernel, X, Z, o["V"][:, 0]), rtol=1e-13, atol=1e-15)


def test_thread_buffers_respect_the_memory_budget(rng):
    """Per-thread accumulators count against the budget: fewer chunks when tight."""
    import numba

    assert _numba._n_chunks(10**6, 1000) == min(10**6, numba.get_num_threads())
    assert _numba._n_chunks(3, 1000) <= 3
    with nh.memory_budget(8 * 1000):
        assert _numba._n_chunks(10**6, 1000) == 1
    with nh.memory_budget(1):
        assert _numba._n_chunks(10**6, 1000) == 1  # never 0


def test_several_chunks_match_one_chunk(rng):
    """The same results with one row chunk (tight budget) and one per thread."""
    kernel, X, Z, ell, o = problem(rng, np.float64, "laplacian", n=211, k=3)
    runs = []
    for budget in (None, 64):
        with nh.memory_budget(budget or nh.get_memory_budget()):
            runs.append(
                [
                    _numba.kmtv(kernel, X, Z, o["U"], ell, np),
                    *_numba.normal_matvec(kernel, X, Z, o["V"], ell, np, U=o["U"]),
                    *_numba.adjoint_lowrank(kernel, X, Z, o["P"], o["Q"], ell, np, ALL),
                ]
            )
    for a, b in zip(*runs):
        close(a, b, 1e-14)
