r"""The pieces of the GPU route at the HIGGS size, timed one by one, and the HIGGS tuning run.

Modes (``python asv_bench/gpu_pieces.py MODE [--tiny]``; ``gpu_report.py`` runs the same):

* ``blocks``: one kernel-block pass at the HIGGS shape (a chunk of ``NB`` rows of
  n = 1e7, m = 5000, d = 28, float32, Gaussian, lengthscale 4), scaled to n = 1e7:
  the block by one GEMM plus ``nh_kernel_dot`` (today's default), by the
  coordinate-difference kernel ``nh_kernel_block`` (the previous default), by the
  reference chain of elementwise CuPy passes, the float16 hi/lo parts; a whole
  Falkon pass (``normal_matvec``, k = 21) and the gradient's low-rank adjoint.
* ``gram``: :math:`G = K^T K` of the same chunk: float64 products against the
  int8 tensor-core route (:mod:`nyhopt.ops.gram8`) and the float16 one
  (:mod:`nyhopt.ops.gram16`, default block and 256 rows), each with its error
  (Frobenius, and the mean diagonal bias scaled to n = 1e7 beside
  :math:`n\lambda = 1`).  JSON to ``$OUT/gram_sweep.json``.
* ``higgs [budget]``: 20 Adam steps of stoch-prop with default settings at the
  HIGGS setting (synthetic data of ``gpu_data.synthetic_gpu``), then the value
  of the float64-Gram route (``gram=True``, tensor cores off) at the SAME
  parameters of several steps (as many as ``budget`` seconds allow; each within
  0.5%?), and the test error on 1e5 held-out rows of a Falkon fit at the final
  parameters, with tensor-core and with float64 G.
* ``budget [seconds]``: ``tune(X, y, time_budget=seconds)`` on 10^6 rows of
  the same generator (CuPy arrays), its stages, wall time and the test error
  on 10^5 held-out rows (:func:`budgeted`).
* ``exact28``: see ``gpu_report.exact_step_vs_gpytorch``.

``NYHOPT_GRAM_ROUTE`` (``int8``, ``float16``, ``float64``) sets
``nyhopt.ops.gram.TENSOR_CORES`` for the run (default: the library's).

``--tiny``: toy sizes on whatever device there is (NumPy without a GPU), to
check the script end to end on a CPU.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback

import numpy as np

TINY = "--tiny" in sys.argv


def _xp():
    try:
        import cupy as cp

        if cp.is_available():
            return cp
    except Exception:
        pass
    return np


def _sync(xp):
    return xp.cuda.Device().synchronize if xp is not np else (lambda: None)


def _free(xp):
    if xp is not np:
        xp.get_default_memory_pool().free_all_blocks()


def _median(fn, sync, repeat=3):
    fn()
    sync()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def _case(label, fn):
    try:
        print(f"{label}: {fn()}", flush=True)
    except Exception:
        print(f"{label}: FAILED", flush=True)
        traceback.print_exc()
        sys.stdout.flush()


def _shape(xp, rows=500_000):
    """(NB chunk rows, n it stands for, m, d)."""
    if TINY:
        return 3000, 30000, 200, 28
    return rows, 10_000_000, 5000, 28


def _data(xp, rows, m, d, seed=0):
    rs = np.random.default_rng(seed)
    X = xp.asarray(rs.uniform(-1.5, 1.5, (rows, d)).astype(np.float32))
    Z = X[xp.asarray(rs.permutation(rows)[:m])].copy()
    return X, Z


def blocks(card):
    """Kernel-block pass pieces, fused vs old, scaled to n = 1e7."""
    xp = _xp()
    if xp is np:
        print("blocks: needs a GPU (CuPy); skipped", flush=True)
        return
    import nyhopt as nh
    from nyhopt import ops
    from nyhopt.ops import _cupy, _reference

    sync = _sync(xp)
    NB, N, m, d = _shape(xp, rows=250_000)  # several NB x m arrays at once (the reference chain: four)
    X, Z = _data(xp, NB, m, d)
    kern = nh.GaussianKernel(4.0)
    ell = kern.lengthscale_array(d)
    scale = N / NB
    out = xp.empty((NB, m), dtype=xp.float32)
    sl = slice(0, NB)
    tag = f"n={N} (chunk {NB}) m={m} d={d} float32 on {card}"
    res = {}

    def timed(label, fn):
        def run():
            t = _median(fn, sync)
            res[label] = t * scale
            return f"{t * 1e3:.2f} ms per chunk, {t * scale:.3f} s at n={N}"
        _case(f"kernel block {label} {tag}", run)

    pts = _cupy._Points(kern, X, Z, ell, xp)
    old = _cupy._Points(kern, X, Z, ell, xp)
    old.dot = False  # the coordinate-difference kernel nh_kernel_block
    work = xp.empty((NB, m), dtype=xp.float32)
    HL = xp.empty((NB, 2 * m), dtype=xp.float16)
    timed("GEMM X Z^T alone", lambda: xp.matmul(pts.Xs, pts.Zt, out=out))
    timed("GEMM + nh_kernel_dot (default)", lambda: pts.block(sl, out))
    timed("nh_kernel_block, coordinate differences (previous default)", lambda: old.block(sl, out))
    timed("reference chain of CuPy passes", lambda: _reference.kernel_matrix(kern, X, Z, ell, xp))
    timed("GEMM + nh_kernel_dot, float16 hi/lo parts", lambda: pts.block_half(sl, HL, work))

    def diff():
        a = pts.block(sl, xp.empty((NB, m), dtype=xp.float32))
        b = old.block(sl, xp.empty((NB, m), dtype=xp.float32))
        return f"max |K_dot - K_exact| = {float(xp.max(xp.abs(a - b))):.2e}"
    _case(f"kernel block agreement {tag}", diff)
    del out, work, HL
    _free(xp)
    V = xp.asarray(np.random.default_rng(1).standard_normal((m, 21)).astype(np.float32))
    P = xp.asarray(np.random.default_rng(2).standard_normal((NB, 21)).astype(np.float32))
    timed("Falkon pass normal_matvec k=21 (default)", lambda: ops.normal_matvec(kern, X, Z, V))
    saved = _cupy.DISTANCE_GEMM
    try:
        _cupy.DISTANCE_GEMM = False
        timed("Falkon pass normal_matvec k=21 (previous kernel block)", lambda: ops.normal_matvec(kern, X, Z, V))
    finally:
        _cupy.DISTANCE_GEMM = saved
    adj = lambda: ops.adjoint_lowrank(kern, X, Z, P, V, wrt=("lengthscale", "centers"))  # noqa: E731
    saved = _cupy.ADJOINT_GEMM
    try:
        _cupy.ADJOINT_GEMM = False
        timed("gradient: adjoint_lowrank k=21 (SIMT nh_adjoint)", adj)
        _cupy.ADJOINT_GEMM = True
        timed("gradient: adjoint_lowrank k=21 (GEMMs + nh_adjoint_dot, ADJOINT_GEMM, the default)", adj)

        def agree():
            a = _cupy.adjoint_lowrank(kern, X, Z, P, V, ell, xp, ("lengthscale", "centers"))
            _cupy.ADJOINT_GEMM = False
            b = _cupy.adjoint_lowrank(kern, X, Z, P, V, ell, xp, ("lengthscale", "centers"))
            return "; ".join(f"{name} relative difference {float(xp.max(xp.abs(u - v)) / xp.max(xp.abs(v))):.1e}"
                             for name, u, v in zip(("lengthscale", "centers"), a[:2], b[:2]))
        _case(f"gradient agreement GEMM vs SIMT adjoint {tag}", agree)
    finally:
        _cupy.ADJOINT_GEMM = saved
    return res


def gram(card):
    """G of one chunk: float64 products vs the tensor-core route; block-length sweep of the error."""
    xp = _xp()
    import nyhopt as nh
    from nyhopt import ops
    from nyhopt.ops import gram as gram_mod
    from nyhopt.ops.gram16 import BLOCK_ROWS, FOLD, gram_matrix16

    sync = _sync(xp)
    NB, N, m, d = _shape(xp)
    X, Z = _data(xp, NB, m, d)
    kern = nh.GaussianKernel(4.0)
    scale = N / NB
    tag = f"n={N} (chunk {NB}) m={m} d={d} float32 on {card}"
    report = {"device": card, "NB": NB, "n": N, "m": m, "d": d, "default": [BLOCK_ROWS, FOLD], "sweep": []}

    K = ops.kernel_matrix(kern, X, Z).astype(xp.float64)  # one NB x m float32 block, then float64
    G64 = K.T @ K
    del K
    _free(xp)
    ref = float(xp.linalg.norm(G64))

    def err(G):
        return float(xp.linalg.norm(G - G64)) / ref, float(xp.mean(xp.diag(G - G64))) * scale

    def f64():
        saved = gram_mod.TENSOR_CORES
        gram_mod.TENSOR_CORES = False
        try:
            t = _median(lambda: gram_mod.gram_matrix(kern, X, Z), sync, 1)
        finally:
            gram_mod.TENSOR_CORES = saved
        report["float64"] = t * scale
        return f"{t * scale:.2f} s at n={N}"
    _case(f"G float64 products (previous GPU route) {tag}", f64)
    _free(xp)

    def one(block, fold, split=True, label=None):
        fn = lambda: gram_matrix16(kern, X, Z, block=block, fold=fold, split=split)  # noqa: E731
        t = _median(fn, sync, 1 if block < 512 else 2)
        e, bias = err(fn()[0])
        row = {"block": block, "fold": fold, "split": split, "s_at_n": t * scale, "rel_err": e,
               "diag_bias_at_n": bias}
        report["sweep"].append(row)
        return (f"{t * scale:.3f} s at n={N}; relative error {e:.2e}; mean diagonal bias at n {bias:+.3g} "
                f"(n lambda = 1)")

    def int8(block=None):
        from nyhopt.ops.gram8 import gram_matrix8

        fn = lambda: gram_matrix8(kern, X, Z, block=block)  # noqa: E731
        t = _median(fn, sync, 2)
        e, bias = err(fn()[0])
        report.setdefault("int8", []).append({"block": block, "s_at_n": t * scale, "rel_err": e,
                                              "diag_bias_at_n": bias})
        return (f"{t * scale:.3f} s at n={N}; relative error {e:.2e}; mean diagonal bias at n {bias:+.3g} "
                f"(n lambda = 1)")

    _case(f"G int8 tensor cores (gram8, exact integer sums), default block {tag}", int8)
    _case(f"G int8 tensor cores, block 16384 {tag}", lambda: int8(16384))
    _case(f"G float16 tensor cores (gram16) default (block {BLOCK_ROWS}, fold {FOLD}) {tag}",
          lambda: one(BLOCK_ROWS, FOLD))
    for block in ((64, 256) if TINY else (256,)):
        _case(f"G float16 tensor cores block {block} fold 8 {tag}", lambda b=block: one(b, 8))
    ok = [r for r in report["sweep"] if r["split"] and r["rel_err"] <= 1.5e-6 and r["block"] < NB]
    best = max(ok, key=lambda r: r["block"]) if ok else None
    report["longest_block_within_1.5e-6"] = best
    print(f"longest block with error <= 1.5e-6: {best}", flush=True)
    out = os.environ.get("OUT") or "."
    with open(os.path.join(out, "gram_sweep.json"), "w") as fh:
        json.dump(report, fh, indent=1)
    return report


def _heldout(xp, n, n_test, d, seed):
    """Rows of the HIGGS-shaped synthetic problem: (X, y) for tuning, (Xt, yt) held out."""
    if xp is not np:
        sys.path.insert(0, os.path.dirname(__file__))
        from gpu_data import synthetic_gpu

        X, y = synthetic_gpu(n + n_test, d, seed, xp.float32)
    else:
        rs = np.random.default_rng(seed)
        X = rs.uniform(-1.5, 1.5, (n + n_test, d)).astype(np.float32)
        f = np.sin(3 * X[:, 0]) + np.cos(2 * X[:, 1]) + 0.5 * X[:, 2] * X[:, 3]
        y = (f + 0.1 * rs.standard_normal(n + n_test)).astype(np.float32)
        y = (y - y.mean()) / y.std()
    return X[:n], y[:n], X[n:], y[n:]


def higgs(card, budget=150.0, steps=20):
    """Default-settings tuning at the HIGGS setting, checked against the float64-Gram route at the same parameters."""
    xp = _xp()
    import nyhopt as nh
    from nyhopt.ops import gram as gram_mod
    from nyhopt.optim import adam

    sync = _sync(xp)
    d, t = 28, 20
    n, m, n_test = (20_000, 200, 2000) if TINY else (10_000_000, 5000, 100_000)
    X, y, Xt, yt = _heldout(xp, n, n_test, d, 1234)
    tag = f"n={n} m={m} d={d} t={t} float32 on {card}"
    opts = dict(kernel=nh.GaussianKernel(4.0), n_probes=t, tol=1e-3, maxiter=100, random_state=0)
    params = nh.Params.from_natural(1.0 / n, [4.0], X[:m])
    trail, values = [params], []

    def default_route():
        nonlocal params
        obj = nh.make_objective("stoch-prop", X, y, **opts)
        state, times, notes = adam.init(params), [], []
        start = time.perf_counter()
        for _ in range(steps):
            sync()
            t0 = time.perf_counter()
            value, grad = obj.value_and_grad(params)
            params, state = adam.update(grad, state, params, lr=0.05)
            sync()
            times.append(time.perf_counter() - t0)
            values.append(float(value))
            trail.append(params)
            rec = obj.last_solve
            notes.append(f"{times[-1]:.2f}s/{rec.iterations}it/{rec.passes}p/{float(value):.5g}")
            if time.perf_counter() - start > budget:
                break
        total = sum(times)
        kind = "measured" if len(times) == steps else f"{len(times)} steps in the budget"
        return f"{len(times)} steps: {total:.1f} s ({kind}); steps {', '.join(notes)}"
    _case(f"HIGGS stoch-prop tuning, default settings, {tag}", default_route)
    _free(xp)

    def same_parameters():
        saved = gram_mod.TENSOR_CORES
        gram_mod.TENSOR_CORES = False
        try:
            obj = nh.make_objective("stoch-prop", X, y, gram=True, **opts)
            last = len(values) - 1
            order = list(dict.fromkeys([0, last, last // 2, last // 4, 1, 3 * last // 4]))  # spread first
            out, worst, start = [], 0.0, time.perf_counter()
            for i in order:
                if i >= len(values) or time.perf_counter() - start > budget / 2:
                    continue
                v = float(obj.value_and_grad(trail[i])[0])
                rel = abs(values[i] - v) / abs(v)
                worst = max(worst, rel)
                out.append(f"step {i + 1}: {values[i]:.6g} vs {v:.6g} ({rel:.2%})")
            verdict = "PASS" if worst <= 0.005 else "FAIL"
            return f"{verdict} (worst {worst:.3%}, target 0.5%): " + "; ".join(out)
        finally:
            gram_mod.TENSOR_CORES = saved
    _case(f"HIGGS value with float64 G at the same parameters, {tag}", same_parameters)

    def test_error():
        res = []
        for label, tc in ((f"default route (TENSOR_CORES={gram_mod.TENSOR_CORES!r})", gram_mod.TENSOR_CORES),
                          ("float64 G", False)):
            saved = gram_mod.TENSOR_CORES
            gram_mod.TENSOR_CORES = tc
            try:
                model = nh.NystromKRR(kernel=nh.GaussianKernel(params.lengthscale), penalty=params.penalty,
                                      centers=params.centers, tol=1e-3, maxiter=100)
                t0 = time.perf_counter()
                model.fit(X, y)
                pred = model.predict(Xt)
                sync()
                rmse = float(xp.sqrt(xp.mean((pred - yt) ** 2)) / xp.std(yt))
                res.append(f"{label}: relative RMSE {rmse:.5f} (fit + predict {time.perf_counter() - t0:.1f} s)")
            finally:
                gram_mod.TENSOR_CORES = saved
        return "; ".join(res)
    _case(f"HIGGS test error on {n_test} held-out rows at the final parameters, {tag}", test_error)


def budgeted(card, seconds=120.0):
    """``tune(X, y, time_budget=seconds)`` on 10^6 rows of the HIGGS generator where the data live (CuPy on a GPU).

    The relative test RMSE on 10^5 held-out rows of the same generator is the
    figure to compare with the 20-step run's (mode ``higgs``, its own
    held-out rows of the same distribution); the stages and the final fit
    say where the time went.
    """
    xp = _xp()
    import nyhopt as nh

    n, n_test = (20_000, 2000) if TINY else (1_000_000, 100_000)
    X, y, Xt, yt = _heldout(xp, n, n_test, 28, 1234)

    def run():
        t0 = time.perf_counter()
        res = nh.tune(X, y, time_budget=seconds, random_state=0, progress=False)
        wall = time.perf_counter() - t0
        pred = res.model.predict(Xt)
        _sync(xp)()
        rmse = float(xp.sqrt(xp.mean((pred - yt) ** 2)) / xp.std(yt))
        stages = " ".join(f"{s.centers}:{s.objective}@{s.rows}({s.seconds:.0f}s, {s.stop_reason[:12]})"
                          for s in res.stages)
        return (f"wall {wall:.1f} s for a budget of {seconds:.0f} s; relative RMSE {rmse:.5f}; final fit "
                f"{res.params.n_centers} centers on {res.final_rows or n} rows; stages {stages}")
    _case(f"HIGGS tune(time_budget={seconds:.0f}) n={n} d=28 float32 on {card}, test error on {n_test} held-out rows",
          run)


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    route = os.environ.get("NYHOPT_GRAM_ROUTE")  # e.g. int8: the Gram route of this run (default: the library's)
    if route:
        from nyhopt.ops import gram as gram_mod

        gram_mod.TENSOR_CORES = False if route == "float64" else route
    mode = args[0] if args else "all"
    xp = _xp()
    card = xp.cuda.runtime.getDeviceProperties(0)["name"].decode() if xp is not np else "cpu (numpy)"
    print(f"device: {card}; numpy {np.__version__}; tiny={TINY}", flush=True)
    if mode in ("blocks", "all"):
        blocks(card)
    if mode in ("gram", "all"):
        gram(card)
    if mode in ("higgs", "all"):
        higgs(card, budget=float(args[1]) if len(args) > 1 else 150.0)
    if mode == "budget":
        budgeted(card, seconds=float(args[1]) if len(args) > 1 else 120.0)


if __name__ == "__main__":
    main(sys.argv[1:])
