"""stoch-prop on the Gram route without the pass ``u = K a``.

The fit sums come from :math:`G = K^T K` and :math:`K^T W`
(:func:`nyhopt.ops.operator.gram_stats`) and the residual cotangent
:math:`(P_0 - K B) Q^T` is contracted in one adjoint pass
(:func:`nyhopt.ops.adjoint_residual`); both against the explicit route.
"""
from __future__ import annotations

import numpy as np
import pytest

import nyhopt as nh
from nyhopt import ops
from nyhopt.ops import _reference
from nyhopt.ops.operator import KernelOperator, ResidualCotangent, column_stats
from nyhopt.objectives.stoch_prop import StochasticProp

from _bounds import sum_error

KINDS = ["gaussian", "laplacian", "matern32", "matern52"]
EXACT = dict(tol=1e-11, maxiter=1000, warm_start=False)


def _fit_problem(rng, n=1037, d=4, m=41, k=7, dtype=np.float64, noise=0.03):
    """Data, centers, right-hand sides ``W = [V | Y | 1]`` that the centers fit well, and ``a`` of the solve."""
    X = rng.uniform(-1, 1, (n, d))
    Z = X[rng.choice(n, m, replace=False)] + 0.01 * rng.standard_normal((m, d))
    kernel = nh.GaussianKernel(np.linspace(0.7, 1.3, d))
    V = rng.standard_normal((n, k - 3))
    Y = np.stack([np.sin(2 * X[:, 0]) + noise * rng.standard_normal(n),
                  X[:, 1] ** 2 + noise * rng.standard_normal(n)], axis=1)
    W = np.concatenate([V, Y, np.ones((n, 1))], axis=1).astype(dtype)
    X, Z = X.astype(dtype), Z.astype(dtype)
    K = ops.kernel_matrix(kernel, X, Z).astype(np.float64)  # the data's kernel values, exactly
    a = np.linalg.solve(K.T @ K + 1e-6 * n * np.eye(m), K.T @ W.astype(np.float64))
    return kernel, X, Z, W, a, K


def _dense_stats(W, K, a):
    """:func:`column_stats` in float64 of ``u = K a`` (the reference both routes are held to)."""
    return column_stats(W.astype(np.float64), K @ a, np, plain=True, cross=True)


def _relerr(got, want):
    return float(np.max(np.abs(np.asarray(got) - want) / np.abs(want)))


@pytest.mark.parametrize("normal", [False, True])
def test_fit_sums_from_the_gram_matrix_match_the_explicit_pass(rng, normal):
    kernel, X, Z, W, a, K = _fit_problem(rng)
    op = KernelOperator(kernel, X, Z, cache=False, gram=True)
    op.form_gram(W)
    assert op.stats_from_gram(W)
    passes = op.passes
    fit = op.fit_pass(a, W, normal, plain=True, cross=True)
    assert op.passes == passes and fit.u is None  # no pass over the data
    old = KernelOperator(kernel, X, Z, cache=False, gram=False).fit_pass(a, W, normal, plain=True, cross=True)
    want = _dense_stats(W, K, a)
    fit_ratio = (want[2] / want[3])[-3:]
    assert np.all(fit_ratio < 3e-2) and np.min(fit_ratio) < 3e-3  # targets (and the ones) that fit well
    for got, ref, w in zip(fit[3:], old[3:], want):
        assert _relerr(got, w) < 1e-10
        assert _relerr(ref, w) < 1e-10
    if normal:
        np.testing.assert_allclose(fit.KtKa, K.T @ (K @ a), rtol=1e-11)
        np.testing.assert_allclose(fit.KtW, K.T @ W, rtol=1e-11)
    else:
        assert fit.KtKa is None and fit.KtW is None
    plain = op.fit_pass(a, W, normal, plain=False, cross=False)
    assert plain.ww is None and plain.cross is None
    np.testing.assert_array_equal(plain.rr, fit.rr)


def test_fit_sums_in_float32_are_as_accurate_as_the_explicit_pass(rng):
    """float32 data: both routes against float64 sums of the same (float32) kernel values.

    The explicit route rounds ``u`` to float32; the Gram route's ``r.r`` is a
    difference ``w.w - 2 w.u + u.u`` of float64 sums (measured: 1e-12 here,
    against 1e-6 for the explicit route).
    """
    kernel, X, Z, W, a, K = _fit_problem(rng, dtype=np.float32, noise=0.01)
    want = _dense_stats(W, K, a)
    op = KernelOperator(kernel, X, Z, cache=False, gram=True)
    op.form_gram(W)
    new = op.fit_pass(a, W, True, plain=True, cross=True)
    old = KernelOperator(kernel, X, Z, cache=False, gram=False).fit_pass(a, W, True, plain=True, cross=True)
    for name in ("wu", "uu", "rr", "cross"):
        e_new, e_old = _relerr(getattr(new, name), want[new._fields.index(name) - 3]), \
            _relerr(getattr(old, name), want[old._fields.index(name) - 3])
        assert e_new <= max(e_old, 1e-9), (name, e_new, e_old)


def test_fit_pass_keeps_the_explicit_route_without_the_right_hand_sides(rng):
    kernel, X, Z, W, a, K = _fit_problem(rng, n=300, m=20)
    op = KernelOperator(kernel, X, Z, cache=False, gram=True)
    op.form_gram()  # no K^T W: the sums need the pass
    assert not op.stats_from_gram(W)
    fit = op.fit_pass(a, W, False, cross=True)
    assert fit.u is not None and op.passes == 2  # the Gram pass and u = K a
    op.form_gram(W[:, :3])  # K^T of other columns: not used for W
    assert not op.stats_from_gram(W)
    want = _dense_stats(W, K, a)
    assert _relerr(fit.rr, want[2]) < 1e-10


def test_inputs_are_not_modified(rng):
    kernel, X, Z, W, a, _ = _fit_problem(rng, n=200, m=15)
    copies = [A.copy() for A in (X, Z, W, a)]
    op = KernelOperator(kernel, X, Z, cache=False, gram=True)
    op.form_gram(W)
    fit = op.fit_pass(a, W, True, cross=True)
    beta = rng.standard_normal(W.shape[1])
    cot = op.residual_cotangent(W, fit, beta, a)
    cot.contract(kernel, Z, ("lengthscale", "centers"))
    for A, B in zip((X, Z, W, a), copies):
        np.testing.assert_array_equal(A, B)


# -- the residual adjoint ----------------------------------------------------------------------------
def _residual_problem(rng, kind, ard, dtype, n=1013, d=3, m=37, k=5, extra=2):
    X = rng.uniform(-1.5, 1.5, (n, d)).astype(dtype)
    Z = rng.uniform(-1.5, 1.5, (m, d)).astype(dtype)
    Z[3] = X[11]  # a coincident point (the Laplacian's cusp)
    ell = np.sqrt(d) * (np.linspace(0.8, 1.6, d) if ard else 1.2)
    kernel = nh.make_kernel(kind, ell)
    r = k + extra
    P0 = rng.standard_normal((n, r)).astype(dtype)
    B = rng.standard_normal((m, k)).astype(dtype)
    Q = rng.standard_normal((m, r)).astype(dtype)
    return kernel, X, Z, P0, B, Q


def _explicit(kernel, X, Z, P0, B, Q, wrt):
    """``adjoint_lowrank`` of ``P = P0 - [K B | 0]`` formed in float64 (the reference)."""
    up = [A.astype(np.float64) for A in (X, Z, P0, B, Q)]
    X64, Z64, P, B64, Q64 = up
    P = P.copy()
    P[:, :B.shape[1]] -= ops.kernel_matrix(kernel, X64, Z64) @ B64
    return ops.adjoint_lowrank(kernel, X64, Z64, P, Q64, wrt=wrt)


def _check_grads(got, want, tol):
    for g, w in zip(got, want):
        if w is None:
            assert g is None
        else:
            assert g.shape == w.shape and g.dtype == np.float64
            np.testing.assert_allclose(g, w, rtol=0, atol=tol * np.abs(w).max())


@pytest.mark.parametrize("impl", ["numba", "numpy"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("ard", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_residual_adjoint_matches_the_explicit_cotangent(rng, monkeypatch, kind, ard, dtype, impl):
    monkeypatch.setitem(ops.CPU_IMPL, "adjoint_lowrank", impl)
    kernel, X, Z, P0, B, Q = _residual_problem(rng, kind, ard, dtype)
    tol = 1e-11 if dtype == np.float64 else 2e-5
    for wrt in [("lengthscale", "centers"), ("lengthscale",), ("centers", "X")]:
        with nh.memory_budget(2**16):  # several row blocks, none a divisor of n
            got = ops.adjoint_residual(kernel, X, Z, P0, B, Q, wrt=wrt)
        _check_grads(got, _explicit(kernel, X, Z, P0, B, Q, wrt), tol)


def test_residual_adjoint_on_the_worker_pool(rng):
    """Row ranges on nyhopt's workers (a "pool" phase) add up to the one-range result."""
    from nyhopt.backend import _parallel
    from nyhopt.backend._threads import cpu_threads

    kernel, X, Z, P0, B, Q = _residual_problem(rng, "matern52", True, np.float64, n=4003, m=40)
    one = ops.adjoint_residual(kernel, X, Z, P0, B, Q)
    with cpu_threads("pool", np):
        if _parallel.active_workers() < 2:
            pytest.skip("one worker thread")
        split = ops.adjoint_residual(kernel, X, Z, P0, B, Q)
    _check_grads(split, one, 1e-12)


def test_residual_adjoint_checks_its_operands(rng):
    kernel, X, Z, P0, B, Q = _residual_problem(rng, "gaussian", True, np.float64, n=50, m=6)
    with pytest.raises(ValueError, match="P0 and Q"):
        ops.adjoint_residual(kernel, X, Z, P0, B, Q[:, :-1])
    with pytest.raises(ValueError, match="B must have at most"):
        ops.adjoint_residual(kernel, X, Z, P0[:, :2], B, Q[:, :2])
    with pytest.raises(ValueError, match="B must have"):
        ops.adjoint_residual(kernel, X, Z, P0, B[:-1], Q)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("d", [1, 3, 28])
@pytest.mark.parametrize("kind", ["gaussian", "matern32", "matern52"])
def test_cupy_gemm_route_of_the_residual_adjoint(monkeypatch, kind, d, dtype):
    """``_cupy.adjoint_residual`` on NumPy: the GEMM route's algebra (values from the distance GEMM)."""
    from nyhopt.ops import _cupy

    rng = np.random.default_rng(4)
    n, m, k, r = 1031, 57, 3, 5
    X = (rng.uniform(-1.5, 1.5, (n, d)) + 5.0).astype(dtype)
    Z = (rng.uniform(-1.5, 1.5, (m, d)) + 5.0).astype(dtype)
    Z[4] = X[7]
    kernel = nh.make_kernel(kind, np.sqrt(d) * np.linspace(0.8, 1.6, d))
    ell = kernel.lengthscale_array(d)
    P0, Q = rng.standard_normal((n, r)).astype(dtype), rng.standard_normal((m, r)).astype(dtype)
    B = (0.1 * rng.standard_normal((m, k))).astype(dtype)
    tol = 1e-9 if dtype == "float64" else 2e-5
    monkeypatch.setattr(_cupy, "ADJOINT_GEMM", True)
    for wrt in [("lengthscale", "centers", "X"), ("centers",), ("lengthscale",)]:
        with nh.memory_budget(2**16):  # several row blocks
            got = _cupy.adjoint_residual(kernel, X, Z, P0, B, Q, ell, np, wrt)
        _check_grads(got, _explicit(kernel, X, Z, P0, B, Q, wrt), tol)


def test_cupy_fallback_of_the_residual_adjoint_forms_p_by_one_product(rng, monkeypatch):
    """Without the GEMM route (the Laplacian, or ``ADJOINT_GEMM`` off): ``P`` by one ``kmv``, then ``nh_adjoint``."""
    from nyhopt.ops import _cupy

    calls = []
    def kmv(kernel, X, Z, V, ell, xp, dot=None):  # the reference has no precomputed distance GEMM
        calls.append("kmv")
        return _reference.kmv(kernel, X, Z, V, ell, xp)

    monkeypatch.setattr(_cupy, "kmv", kmv)
    monkeypatch.setattr(_cupy, "adjoint_lowrank",
                        lambda *a, **k: calls.append("adjoint") or _reference.adjoint_lowrank(*a, **k))
    for kind, gemm in [("laplacian", True), ("gaussian", False)]:
        monkeypatch.setattr(_cupy, "ADJOINT_GEMM", gemm)
        kernel, X, Z, P0, B, Q = _residual_problem(rng, kind, True, np.float64, n=200, m=13)
        ell = kernel.lengthscale_array(X.shape[1])
        keep = P0.copy()
        got = _cupy.adjoint_residual(kernel, X, Z, P0, B, Q, ell, np, ("lengthscale", "centers"))
        np.testing.assert_array_equal(P0, keep)
        _check_grads(got, _explicit(kernel, X, Z, P0, B, Q, ("lengthscale", "centers")), 1e-11)
    assert calls == ["kmv", "adjoint"] * 2


# -- stoch-prop ---------------------------------------------------------------------------------------
def _problem(rng, n=150, d=3, m=12, p=1, dtype=np.float64):
    X = rng.uniform(-1.0, 1.0, size=(n, d))
    Y = np.sin(3 * X[:, :1]) + X[:, 1:2] ** 2 + 0.1 * rng.standard_normal((n, p))
    Z = X[rng.choice(n, m, replace=False)] + 0.01 * rng.standard_normal((m, d))
    params = nh.Params.from_natural(2e-3, rng.uniform(0.6, 1.4, d), Z)
    return X.astype(dtype), (Y[:, 0] if p == 1 else Y).astype(dtype), params


def _flat(g):
    return np.concatenate([np.atleast_1d(g.log_penalty), np.ravel(g.log_lengthscale), np.ravel(g.centers)])


def _explicit_route(monkeypatch):
    """The route before: the fit pass forms ``u`` even with the Gram matrix."""
    monkeypatch.setattr(KernelOperator, "stats_from_gram", lambda self, W: False)


OPTIONS = [
    {},
    {"mean": "constant"},
    {"value_form": "plain"},
    {"gradient": "direct"},
    {"trace_estimator": "hutchinson", "normalization": "paper"},
    {"effective_dimension_estimator": "hutch++", "noise_variance": 2.0},
]


@pytest.mark.parametrize("cache", [False, True])
@pytest.mark.parametrize("opts", OPTIONS)
def test_stoch_prop_value_and_grad_unchanged(rng, monkeypatch, opts, cache):
    X, y, params = _problem(rng, p=2 if "noise_variance" in opts else 1)
    make = lambda: StochasticProp(X, y, n_probes=10, n_rows=60, random_state=3, gram=True,  # noqa: E731
                                  kernel_cache=cache, **EXACT, **opts)
    new = make()
    v1, g1 = new.value_and_grad(params)
    with monkeypatch.context() as mp:
        _explicit_route(mp)
        old = make()
        v0, g0 = old.value_and_grad(params)
    assert v1 == pytest.approx(v0, rel=1e-10)
    np.testing.assert_allclose(_flat(g1), _flat(g0), rtol=0, atol=1e-10 * np.abs(_flat(g0)).max())
    assert new.last_solve.passes == old.last_solve.passes - 1
    if not cache:  # the Gram pass and the adjoint pass (and Hutch++'s sketch K Omega)
        assert new.last_solve.passes == 2 + (opts.get("effective_dimension_estimator") == "hutch++")


def test_stoch_prop_float32_unchanged(rng, monkeypatch):
    X, y, params = _problem(rng, n=400, m=20, dtype=np.float32)
    make = lambda: StochasticProp(X, y, n_probes=10, random_state=1, gram=True, kernel_cache=False,  # noqa: E731
                                  **EXACT)
    v1, g1 = make().value_and_grad(params)
    with monkeypatch.context() as mp:
        _explicit_route(mp)
        v0, g0 = make().value_and_grad(params)
    assert v1 == pytest.approx(v0, rel=1e-5)
    np.testing.assert_allclose(_flat(g1), _flat(g0), rtol=0, atol=1e-4 * np.abs(_flat(g0)).max())


def test_passes_per_step_on_the_gram_route(rng, monkeypatch):
    """A gradient step: the Gram pass and the adjoint; a value: the Gram pass alone (spied on the ops)."""
    from nyhopt.ops import _numba

    X, y, params = _problem(rng)
    obj = StochasticProp(X, y, n_probes=10, n_rows=40, random_state=0, gram=True, kernel_cache=False)
    calls = []
    for mod in (_numba, _reference):
        for name in ("kernel_matrix", "kmv", "kmtv", "normal_matvec", "adjoint_lowrank", "adjoint_residual"):
            original = getattr(mod, name)

            def spy(kernel, A, *args, _name=name, _original=original, **kwargs):
                if A.shape[0] == X.shape[0]:
                    calls.append(_name)
                return _original(kernel, A, *args, **kwargs)

            monkeypatch.setattr(mod, name, spy)
    obj.value_and_grad(params)
    # the Gram pass evaluates the kernel on row blocks: one call per block; the adjoint is one call
    assert calls[-1] == "adjoint_residual" and set(calls[:-1]) == {"kernel_matrix"}, calls
    assert obj.last_solve.passes == 2
    calls.clear()
    obj.reset()
    obj.value(params)
    assert set(calls) == {"kernel_matrix"} and obj.last_solve.passes == 1


@pytest.mark.parametrize("opts", [{}, {"mean": "constant"}, {"trace_estimator": "hutchinson"}])
def test_gradient_matches_finite_differences(rng, opts):
    X, y, params = _problem(rng)
    obj = StochasticProp(X, y, n_probes=12, n_rows=50, random_state=2, gram=True, kernel_cache=False,
                         **EXACT, **opts)
    _, g = obj.value_and_grad(params)
    h = 1e-6
    dl, de, dZ = rng.standard_normal(), rng.standard_normal(3), rng.standard_normal(params.centers.shape)

    def at(s):
        return obj.value(params.replace(log_penalty=params.log_penalty + s * dl,
                                        log_lengthscale=params.log_lengthscale + s * de,
                                        centers=params.centers + s * dZ))

    fd = (at(h) - at(-h)) / (2 * h)
    an = float(g.log_penalty * dl + g.log_lengthscale @ de + np.sum(g.centers * dZ))
    assert an == pytest.approx(fd, rel=1e-5, abs=1e-9)


def test_tune_trajectory_unchanged(rng, monkeypatch):
    """Three epochs of Adam on the Gram route (warm starts): the same iterates as the explicit route."""
    X, y, _ = _problem(rng, n=300, m=15)

    def run():
        return nh.tune(X, y, objective="stoch-prop", centers=15, epochs=3, progress=False, track_errors=False,
                       objective_options=dict(n_probes=10, gram=True, kernel_cache=False),
                       standardize=False)  # the bound below is computed on X as it is

    new = run()
    with monkeypatch.context() as mp:
        _explicit_route(mp)
        old = run()
    assert len(new.history) == len(old.history) == 4
    # The routes differ by the rounding of the system H = K_nm^T K_nm + n lambda K_mm (sums of n terms
    # in float64: sum_error(n) relative), which moves the solution, the objective and the gradient by
    # up to cond(H) times that (first order).  cond(H) at the final parameters, times 10 for the
    # earlier epochs' (within 15% of them) and Adam's steps (at most a few times lr of a relative change).
    p = new.params
    K = nh.GaussianKernel(p.lengthscale)
    Knm, Kmm = ops.kernel_matrix(K, X, p.centers), ops.kernel_matrix(K, p.centers, p.centers)
    rel = 10 * np.linalg.cond(Knm.T @ Knm + X.shape[0] * p.penalty * Kmm) * sum_error(X.shape[0], np.float64)
    assert rel < 1e-5  # still far below what a different iterate would change (the steps are ~5%)
    for a, b in zip(new.history, old.history):
        assert a.objective == pytest.approx(b.objective, rel=rel)
        np.testing.assert_allclose(a.lengthscale, b.lengthscale, rtol=rel)
        assert a.penalty == pytest.approx(b.penalty, rel=rel)
    # Adam divides by the gradient's size: a coordinate whose gradient is 1e-6 of the largest moves by
    # lr * (its relative rounding, ~1e-7): 6e-9 seen.
    np.testing.assert_allclose(new.params.centers, old.params.centers, rtol=0, atol=5e-8)


def test_cotangent_type(rng):
    kernel, X, Z, W, a, _ = _fit_problem(rng, n=200, m=15)
    op = KernelOperator(kernel, X, Z, cache=False, gram=True)
    op.form_gram(W)
    fit = op.fit_pass(a, W, True)
    cot = op.residual_cotangent(W, fit, np.ones(W.shape[1]), a, extra=(np.ones(2), rng.standard_normal((15, 2))))
    assert isinstance(cot, ResidualCotangent)
    assert cot.P0.shape == (200, W.shape[1] + 2) and cot.B.shape == (15, W.shape[1])
    assert cot.Q.shape == (15, W.shape[1] + 2)


def test_residual_adjoint_in_a_forked_child_matches_prange(rng, monkeypatch):
    """The plain (fork-safe) loop on nyhopt's workers gives the numbers of the prange loop."""
    import numba

    from nyhopt.ops import _numba

    if numba.get_num_threads() < 2:
        pytest.skip("needs 2 Numba threads")
    kernel, X, Z, P0, B, Q = _residual_problem(rng, "matern32", True, np.float64, n=203, m=11)
    ell = kernel.lengthscale_array(X.shape[1])
    wrt = ("lengthscale", "centers", "X")
    threaded = _numba.adjoint_residual(kernel, X, Z, P0, B, Q, ell, np, wrt)
    chunks = []
    original = _numba.map_chunks
    monkeypatch.setattr(_numba, "map_chunks", lambda fn, parts: chunks.append(parts) or original(fn, parts))
    monkeypatch.setattr(_numba, "in_forked_child", lambda: True)
    monkeypatch.setattr(_numba, "_MIN_CHUNK_ENTRIES", 1)
    split = _numba.adjoint_residual(kernel, X, Z, P0, B, Q, ell, np, wrt)
    assert len(chunks) == 1 and chunks[0] >= 2
    for a, b in zip(threaded, split):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


def _with_route(monkeypatch, route):
    import types

    from nyhopt.ops import operator

    monkeypatch.setattr(operator, "_gram", types.SimpleNamespace(tensor_core_setting=lambda: route,
                                                                  tensor_core_route=lambda dtype, xp, setting: route))


def test_a_float16_gram_matrix_keeps_the_explicit_pass(rng, monkeypatch):
    """The float16 tensor-core G (biased diagonal) is never read for the sums: u is formed."""
    _with_route(monkeypatch, "float16")
    kernel, X, Z, W, a, _ = _fit_problem(rng, n=200, m=15)
    op = KernelOperator(kernel, X, Z, cache=False, gram=True)
    op.form_gram(W)
    assert not op.stats_from_gram(W)
    assert op.fit_pass(a, W, True).u is not None


def test_an_int8_gram_matrix_gives_the_sums_where_the_residuals_are_not_small(rng, monkeypatch):
    """int8 G (error about 6e-8): its sums are kept only where r.r >= TENSOR_STATS_MIN_RATIO (w.w + u.u)."""
    from nyhopt.ops.operator import TENSOR_STATS_MIN_RATIO

    _with_route(monkeypatch, "int8")
    kernel, X, Z, W, a, K = _fit_problem(rng, n=400, m=30, noise=0.3)
    want = _dense_stats(W[:, :-1], K, a[:, :-1])
    assert np.all(want[2] >= TENSOR_STATS_MIN_RATIO * (want[3] + want[1]))
    op = KernelOperator(kernel, X, Z, cache=False, gram=True)
    op.form_gram(W[:, :-1])
    assert op.stats_from_gram(W[:, :-1])
    fit = op.fit_pass(a[:, :-1], W[:, :-1], True)
    assert fit.u is None and op.passes == 1
    assert _relerr(fit.rr, want[2]) < 1e-10

    # the column of ones is fitted almost exactly: r.r is far below w.w, so the pass is made
    want = _dense_stats(W, K, a)
    assert want[2][-1] < TENSOR_STATS_MIN_RATIO * (want[3][-1] + want[1][-1])
    op = KernelOperator(kernel, X, Z, cache=False, gram=True)
    op.form_gram(W)
    fit = op.fit_pass(a, W, True)
    assert fit.u is not None and op.passes == 2


def test_target_sums_are_kept_while_w_is_the_same(rng):
    from nyhopt.ops import operator

    X, y, params = _problem(rng)
    obj = StochasticProp(X, y, n_probes=10, random_state=0, gram=True, kernel_cache=False, mean="constant")
    v1 = obj.value(params)
    memo = dict(obj._w_sums)
    assert memo["W"] is obj._W
    v2 = obj.value(params)
    assert obj._w_sums["ww"] is memo["ww"] and obj._w_sums["wl"] is memo["wl"]  # kept, not summed again
    assert v2 == pytest.approx(v1, rel=1e-9)
    np.testing.assert_allclose(memo["ww"], np.sum(obj._W**2, axis=0), rtol=1e-13)
    np.testing.assert_allclose(memo["wl"], obj._W.T @ obj._W[:, -1], rtol=1e-13)
    other = obj._W.copy()  # another W: summed anew
    ww, wl = operator.target_sums(other, np, cross=True, memo=obj._w_sums)
    assert obj._w_sums["W"] is other and ww is not memo["ww"]
