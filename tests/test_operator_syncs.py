"""The streaming kernel operator checks ``X`` and ``Z`` once, not at every product (nyhopt.ops.operator).

A CG iteration of the streaming route (``gram=False``) is one normal product;
on a GPU each check of an input (``bool`` of a device reduction) and the
distance GEMM's overflow guard is a host synchronization.  The operator
checks once (:func:`nyhopt.placement.kernel_operator`, or its first streaming
product) and calls the unchecked forms of :mod:`nyhopt.ops`, which compute
the same numbers as the public functions (checked here bit for bit on the
CPU).  Host reads are counted on the host stand-in (``NYHOPT_HOST_CUPY=1``).
"""
from __future__ import annotations

import numpy as np
import pytest

import nyhopt as nh
from nyhopt import ops
from nyhopt.backend import gpu_available
from nyhopt.ops.operator import KernelOperator, LowRankCotangent, ResidualCotangent
from nyhopt.placement import kernel_operator

HOST_READS = ("__bool__", "__float__", "__int__", "__index__", "__complex__", "__format__", "item", "get",
              "tolist")


def _step_reads(cp, dtype, tol, counter):
    """(host reads, CG iterations, value, gradient) of one stoch-prop step on the streaming route."""
    from nyhopt.objectives.stoch_prop import StochasticProp

    rng = np.random.default_rng(0)
    X = cp.asarray(rng.normal(size=(600, 3)).astype(dtype))
    y = cp.asarray(rng.normal(size=600).astype(dtype))
    P = nh.Params.from_natural(2e-3, np.array([0.8, 1.0, 1.2]), X[:40].astype(cp.float64))
    obj = StochasticProp(X, y, gram=False, kernel_cache=False, random_state=0, n_rows=40, tol=tol,
                         warm_start=False)
    obj.value_and_grad(P)  # the probes, made once
    counter.clear()
    counter.append(True)
    try:
        value, grad = obj.value_and_grad(P)
    finally:
        counter[0] = False
    return len(counter) - 1, obj.last_solve.iterations, value, grad


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU (CuPy with a device)")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_host_reads_per_cg_iteration_are_cgs_own(monkeypatch, dtype):
    """Each CG iteration reads the device twice (its curvature p^T A p and its residual norms), no more.

    Before, every normal product checked ``X`` and ``Z`` and guarded the
    distance GEMM against overflow: five reads per iteration.
    """
    import cupy as cp

    host = getattr(cp, "_HOST", False)
    counter = [False]
    if host:
        for name in HOST_READS:
            original = getattr(cp.ndarray, name)

            def read(self, *args, _original=original, **kwargs):
                if counter and counter[0]:
                    counter.append(1)
                return _original(self, *args, **kwargs)

            monkeypatch.setattr(cp.ndarray, name, read)
    loose = _step_reads(cp, dtype, 1e-3, counter)
    tight = _step_reads(cp, dtype, 1e-9, counter)
    assert tight[1] >= loose[1] + 10, (loose[1], tight[1])
    if host:
        assert tight[0] - loose[0] == 2 * (tight[1] - loose[1]), (loose[:2], tight[:2])
    counter.clear()
    ref = _step_reads(np, dtype, 1e-9, counter)  # the results, against NumPy
    rtol = 2e-2 if dtype == np.float32 else 1e-6  # a card's rounding, through 30-odd CG iterations
    assert tight[2] == pytest.approx(ref[2], rel=rtol)
    g_ref = ref[3].centers
    np.testing.assert_allclose(cp.asnumpy(tight[3].centers), g_ref, rtol=rtol, atol=rtol * np.abs(g_ref).max())


@pytest.mark.parametrize("impl", ["numba", "numpy"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("pool", [False, True])
def test_streaming_products_equal_the_public_functions(monkeypatch, impl, dtype, pool):
    """Same implementation, same numbers (bit for bit): the unchecked forms and the worker pool's split."""
    from nyhopt.backend._threads import cpu_threads

    for name in ops.CPU_IMPL:
        monkeypatch.setitem(ops.CPU_IMPL, name, impl)
    rng = np.random.default_rng(1)
    X = rng.normal(size=(8000, 4)).astype(dtype)  # n m = 5.6e5: the pool phase splits the rows
    Z = X[:70].astype(np.float64)
    V, U = rng.normal(size=(70, 3)).astype(dtype), rng.normal(size=(8000, 2)).astype(dtype)
    for kernel in (nh.GaussianKernel(1.2), nh.LaplacianKernel([0.7, 1.0, 1.3, 2.0]),
                   nh.MaternKernel(0.9, nu=1.5)):
        for op in (KernelOperator(kernel, X, Z, cache=False, gram=False),
                   kernel_operator(kernel, X, Z, cache=False, gram=False)[0]):
            phase = cpu_threads("pool" if pool else "numba", np)
            with phase:
                got = [op.kmv(V), op.kmv(V[:, 0]), op.kmtv(U), op.kmtv(U[:, 1]), *op.normal_matvec(V, U, kv=True)]
                ref = [ops.kmv(kernel, X, Z, V), ops.kmv(kernel, X, Z, V[:, 0]), ops.kmtv(kernel, X, Z, U),
                       ops.kmtv(kernel, X, Z, U[:, 1]), *ops.normal_matvec(kernel, X, Z, V, U, kv=True)]
                for g, r in zip(got, ref):
                    assert g.dtype == r.dtype and g.shape == r.shape
                    np.testing.assert_array_equal(g, r)
                P, Q = rng.normal(size=(8000, 3)).astype(dtype), rng.normal(size=(70, 3)).astype(dtype)
                B = rng.normal(size=(70, 2)).astype(dtype)
                wrt = ("lengthscale", "centers")
                for z in (op.Z, Z):  # the operator's own Z, and another array (checked)
                    lr = LowRankCotangent(X, P, Q, op._valid()).contract(kernel, z, wrt)
                    lr_ref = ops.adjoint_lowrank(kernel, X, z, P, Q, wrt=wrt)
                    rs = ResidualCotangent(X, P, B, Q, op._valid()).contract(kernel, z, wrt)
                    rs_ref = ops.adjoint_residual(kernel, X, z, P, B, Q, wrt=wrt)
                    for g, r in ((lr, lr_ref), (rs, rs_ref)):
                        np.testing.assert_array_equal(g.lengthscale, r.lengthscale)
                        np.testing.assert_array_equal(g.centers, r.centers)


def test_operator_checks_once_and_public_functions_every_call():
    k = nh.GaussianKernel(1.0)
    X = np.ones((10, 2))
    bad = X.copy()
    bad[4, 1] = np.nan
    op = KernelOperator(k, bad, X[:3], cache=False, gram=False)
    assert op._valid() is None
    with pytest.raises(ValueError, match="X contains NaN"):
        op.normal_matvec(np.ones((3, 1)))
    with pytest.raises(ValueError, match="Z contains NaN"):
        KernelOperator(k, X, bad[2:5], cache=False, gram=False).kmv(np.ones(3))
    with pytest.raises(ValueError, match="X contains NaN"):
        kernel_operator(k, bad, X[:3], cache=False, gram=False)
    op = KernelOperator(k, np.arange(20).reshape(10, 2), X[:3], cache=False, gram=False)
    assert op.kmv(np.ones(3)).dtype == np.float64 and op._valid()[0].dtype == np.float64
    good = kernel_operator(k, X, X[:3], cache=False, gram=False)[0]
    cot = good.residual_cotangent(np.ones((10, 1)), good.fit_pass(np.ones((3, 1)), np.ones((10, 1)), False),
                                  np.ones(1), np.ones((3, 1)))
    with pytest.raises(ValueError, match="Z contains NaN"):  # another Z than the operator's is checked
        cot.contract(k, bad[2:5], ("centers",))
    for fn, args in ((ops.kmv, (np.ones(3),)), (ops.kmtv, (np.ones(10),)), (ops.normal_matvec, (np.ones(3),)),
                     (ops.adjoint_lowrank, (np.ones((10, 1)), np.ones((3, 1))))):
        with pytest.raises(ValueError, match="X contains NaN"):
            fn(k, bad, X[:3], *args)


def _count_checks(monkeypatch):
    """The calls of the ops package's check of an input matrix (a list that grows by one per call)."""
    calls = []
    original = ops.check_matrix

    def check(*args, **kwargs):
        calls.append(args[1])
        return original(*args, **kwargs)

    monkeypatch.setattr(ops, "check_matrix", check)
    return calls


@pytest.mark.parametrize("module, fn", [("gram8", "gram_matrix8"), ("gram16", "gram_matrix16")])
def test_tensor_core_gram_checks_unless_told_checked(monkeypatch, module, fn):
    """Called directly, the tensor-core Gram routes check ``X`` and ``Z``; with ``checked=True`` (from
    nyhopt.ops.gram.gram_matrix) they do not, with the same numbers."""
    import importlib

    gram = getattr(importlib.import_module(f"nyhopt.ops.{module}"), fn)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    U = rng.normal(size=(300, 2)).astype(np.float32)
    k = nh.GaussianKernel(1.1)
    calls = _count_checks(monkeypatch)
    G, KtU = gram(k, X, X[:20], U)
    assert calls == ["X", "Z"]
    calls.clear()
    G2, KtU2 = gram(k, X, X[:20], U, checked=True)
    assert calls == []
    np.testing.assert_array_equal(G, G2)
    np.testing.assert_array_equal(KtU, KtU2)
    bad = X.copy()
    bad[5, 0] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        gram(k, bad, X[:20])


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU (CuPy with a device)")
@pytest.mark.parametrize("route", ["int8", "float16"])
def test_gram_matrix_checks_its_inputs_once(monkeypatch, route):
    import cupy as cp

    from nyhopt.ops import gram

    monkeypatch.setattr(gram, "TENSOR_CORES", route)
    rng = np.random.default_rng(4)
    X = cp.asarray(rng.normal(size=(400, 3)).astype(np.float32))
    k = nh.GaussianKernel(1.0)
    gram.gram_matrix(k, X, X[:30])  # the int8 route's once-per-device check
    calls = _count_checks(monkeypatch)
    G, _ = gram.gram_matrix(k, X, X[:30])
    assert calls == ["X", "Z"]
    K = ops.kernel_matrix(k, cp.asnumpy(X).astype(np.float64), cp.asnumpy(X[:30]).astype(np.float64))
    np.testing.assert_allclose(cp.asnumpy(G), K.T @ K, rtol=1e-3, atol=1e-3)
