"""Loops over row blocks check their inputs once, not per block (nyhopt.ops._blocks.KernelBlocks).

On a GPU every check of an input (``bool`` of a device reduction) and the
GEMM form's overflow guard is a host synchronization that stalls the queue of
launches.  The loops (direct solver's pass, Gram matrix, predictive variance,
a ``stoch-prop`` step on the Gram route) must make as many host reads with 30
row blocks as with 8.  Counted on the host stand-in (``NYHOPT_HOST_CUPY=1``),
whose ndarray can be patched; on a card the results are checked against NumPy.
"""
from __future__ import annotations

import numpy as np
import pytest

import nyhopt as nh
from nyhopt import ops
from nyhopt.backend import gpu_available
from nyhopt.ops._blocks import KernelBlocks

HOST_READS = ("__bool__", "__float__", "__int__", "__index__", "__complex__", "__format__", "item", "get",
              "tolist")
BUDGET = 2 ** 14  # 16 KiB: many row blocks


def _problem(n, xp, rng):
    X, Y = rng.normal(size=(n, 3)), rng.normal(size=(n, 2))
    return xp.asarray(X), xp.asarray(Y)


def _loops(xp):
    """name -> function(X, Y) running one internal loop over row blocks of ``X``."""
    from nyhopt.objectives.stoch_prop import StochasticProp
    from nyhopt.ops.gram import gram_matrix
    from nyhopt.posterior import fit_variance, latent_variance
    from nyhopt.solvers.direct import kmm_upper, whitened_moments

    k = nh.GaussianKernel(1.0)

    def moments(X, Y):
        Z = X[:10]
        Lt = kmm_upper(k, Z, np.float64, xp)
        return lambda: whitened_moments(k, X, Z, Y, Lt, xp)

    def gram(X, Y):
        return lambda: gram_matrix(k, X, X[:10], Y)

    def variance(X, Y):
        vm = fit_variance(k, X, X[:10], Y, 1e-3)
        return lambda: latent_variance(k, X, X[:10], vm)

    def stoch_prop(X, Y):
        P = nh.Params.from_natural(2e-3, np.array([0.8, 1.0, 1.2]), xp.asarray(X[:12]))
        obj = StochasticProp(X, Y[:, 0], gram=True, kernel_cache=False, random_state=0, n_rows=40)
        return lambda: obj.value_and_grad(P)

    return {"whitened_moments": moments, "gram_matrix": gram, "latent_variance": variance,
            "stoch_prop_gram": stoch_prop}


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU (CuPy with a device)")
@pytest.mark.parametrize("loop", ["whitened_moments", "gram_matrix", "latent_variance", "stoch_prop_gram"])
def test_host_reads_do_not_grow_with_the_blocks(monkeypatch, loop):
    import cupy as cp

    from nyhopt.backend._config import block_rows

    host = getattr(cp, "_HOST", False)
    reads = []
    counting = [False]
    if host:
        for name in HOST_READS:
            original = getattr(cp.ndarray, name)

            def read(self, *args, _original=original, **kwargs):
                if counting[0]:
                    reads.append(1)
                return _original(self, *args, **kwargs)

            monkeypatch.setattr(cp.ndarray, name, read)
    counts, blocks = [], []
    for n in (240, 960):
        X, Y = _problem(n, cp, np.random.default_rng(0))
        with nh.memory_budget(BUDGET):
            run = _loops(cp)[loop](X, Y)
            blocks.append(-(-n // block_rows(n, 10, 8, n_temps=1, per_row=2)))
            reads.clear()
            counting[0] = True
            try:
                got = run()
            finally:
                counting[0] = False
            counts.append(len(reads))
        if n == 240:  # the results, against NumPy
            Xh, Yh = cp.asnumpy(X), cp.asnumpy(Y)
            with nh.memory_budget(BUDGET):
                ref = _loops(np)[loop](Xh, Yh)()
            got, ref = (got, ref) if isinstance(ref, tuple) else ((got,), (ref,))
            for g, r in zip(got, ref):
                if r is None or isinstance(r, (float, int)):
                    assert g == pytest.approx(r, rel=1e-9) if r is not None else g is None
                    continue
                if hasattr(r, "centers"):  # the gradient
                    g, r = g.centers, r.centers
                np.testing.assert_allclose(cp.asnumpy(g) if hasattr(g, "get") else g, r, rtol=1e-8, atol=1e-10)
    assert blocks[1] >= 3 * blocks[0] >= 6
    if host:
        assert counts[1] == counts[0], (loop, counts)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU (CuPy with a device)")
def test_overflow_guard_once_or_per_block():
    """The GEMM form's overflow guard is decided once for the loop when the norms are bounded, per block
    otherwise; the blocks equal kernel_matrix's either way."""
    import cupy as cp

    rng = np.random.default_rng(3)
    k = nh.GaussianKernel(1.0)
    X = cp.asarray(rng.normal(size=(50, 3)))
    kb = KernelBlocks(k, X, X[:7])
    assert kb._dot is True
    np.testing.assert_array_equal(cp.asnumpy(kb.rows(5, 20)), cp.asnumpy(ops.kernel_matrix(k, X[5:20], X[:7])))
    np.testing.assert_array_equal(cp.asnumpy(kb.rows_t(5, 20)), cp.asnumpy(ops.kernel_matrix(k, X[:7], X[5:20])))
    huge = X.copy()
    huge[3, 0] = 1e160  # its squared norm overflows float64
    with np.errstate(over="ignore"):  # the host stand-in's kernels square the huge coordinate
        kb = KernelBlocks(k, huge, huge[:7])
        assert kb._dot is None
        for lo, hi in ((0, 10), (10, 50)):
            np.testing.assert_array_equal(cp.asnumpy(kb.rows(lo, hi)),
                                          cp.asnumpy(ops.kernel_matrix(k, huge[lo:hi], huge[:7])))
        assert not np.isnan(cp.asnumpy(kb.rows(0, 10))).any()


@pytest.mark.parametrize("impl", ["numba", "numpy"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kernel_blocks_equal_kernel_matrix(impl, dtype):
    """Same implementation, same numbers (bit for bit), the worker pool's row split included."""
    from nyhopt.backend._threads import cpu_threads

    saved = dict(ops.CPU_IMPL)
    ops.set_cpu_impl(None, impl)
    try:
        rng = np.random.default_rng(0)
        X = rng.normal(size=(3000, 4)).astype(dtype)
        for kernel in (nh.GaussianKernel(1.2), nh.LaplacianKernel([0.7, 1.0, 1.3, 2.0]), nh.MaternKernel(0.9, nu=1.5)):
            kb = KernelBlocks(kernel, X, X[:60])
            with cpu_threads("pool", np):
                np.testing.assert_array_equal(kb.rows(100, 2900), ops.kernel_matrix(kernel, X[100:2900], X[:60]))
            np.testing.assert_array_equal(kb.rows_t(7, 300), ops.kernel_matrix(kernel, X[:60], X[7:300]))
            out = np.empty((20, 60), dtype=dtype)
            assert kb.rows(0, 20, out=out) is out
            np.testing.assert_array_equal(out, ops.kernel_matrix(kernel, X[:20], X[:60]))
    finally:
        ops.CPU_IMPL.update(saved)


def test_kernel_blocks_validate_once():
    k = nh.GaussianKernel(1.0)
    X = np.ones((10, 2))
    bad = X.copy()
    bad[4, 1] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        KernelBlocks(k, bad, X[:3])
    with pytest.raises(ValueError, match="Z contains NaN"):
        KernelBlocks(k, X, bad[:5])
    with pytest.raises(ValueError, match="Z has 3 features"):
        KernelBlocks(k, X, np.ones((2, 3)))
    kb = KernelBlocks(k, np.arange(20).reshape(10, 2), X[:3].astype(np.float32))
    assert kb.X.dtype == kb.Z.dtype == np.float64 and kb.rows(0, 4).dtype == np.float64
    with pytest.raises(ValueError, match="lengthscale"):
        KernelBlocks(nh.GaussianKernel([1.0, 2.0, 3.0]), X, X[:3], checked=True)
    with pytest.raises(ValueError, match="X contains NaN"):  # the public function still checks every call
        ops.kernel_matrix(k, bad, X[:3])
