"""GPU check of the constant mean: CuPy against NumPy (objectives, stoch-prop, estimator, tune)."""
import sys, time
import numpy as np
import cupy as cp
import nyhopt as nh

rng = np.random.default_rng(0)
X = rng.uniform(-1, 1, size=(600, 3)); Y = np.stack([np.sin(3 * X[:, 0]) + 2.0, X[:, 1] ** 2 - 1.0], axis=1)
p = nh.Params.from_natural(1e-3, [0.8, 1.0, 1.2], X[:30] + 0.01)
pg = nh.Params(p.log_penalty, p.log_lengthscale, cp.asarray(p.centers), p.log_amplitude)
ok = True
for dt in (np.float64, np.float32):
    for name in ["holdout", "loocv", "gcv", "creg", "sgpr", "prop", "stoch-prop"]:
        opts = dict(mean="constant", random_state=0)
        if name == "stoch-prop":
            opts.update(tol=1e-10, maxiter=500, warm_start=False)
        a = nh.make_objective(name, X.astype(dt), Y.astype(dt), **opts)
        b = nh.make_objective(name, cp.asarray(X.astype(dt)), cp.asarray(Y.astype(dt)), **opts)
        va, ga = a.value_and_grad(p)
        vb, gb = b.value_and_grad(pg)
        rv = abs(va - vb) / abs(va)
        gz = float(np.abs(ga.centers - cp.asnumpy(gb.centers)).max() / np.abs(ga.centers).max())
        rc = float(np.abs(a.last_intercept - np.asarray(b.last_intercept)).max())
        tol = 1e-8 if dt == np.float64 else 2e-3
        good = rv < tol and gz < (1e-6 if dt == np.float64 else 5e-2) and rc < (1e-8 if dt == np.float64 else 1e-3)
        ok &= good
        print(f"{np.dtype(dt).name} {name:10s} value rel {rv:.2e} grad rel {gz:.2e} c abs {rc:.2e} {'ok' if good else 'BAD'}")
for solver in ("direct", "falkon"):
    kw = dict(kernel=nh.GaussianKernel(0.8), penalty=1e-3, centers=X[:30] + 0.01, solver=solver, tol=1e-10,
              maxiter=500, fit_intercept=True, normalize_y=True)
    m = nh.NystromKRR(**kw).fit(X, Y)
    kw["centers"] = cp.asarray(kw["centers"])
    g = nh.NystromKRR(**kw).fit(cp.asarray(X), cp.asarray(Y))
    d = float(np.abs(m.intercept_ - g.intercept_).max()); e = float(np.abs(m.predict(X) - cp.asnumpy(g.predict(cp.asarray(X)))).max())
    good = d < 1e-7 and e < 1e-6 and isinstance(g.predict(cp.asarray(X)), cp.ndarray)
    ok &= good
    print(f"NystromKRR {solver}: intercept diff {d:.2e} pred diff {e:.2e} {'ok' if good else 'BAD'}")
r = nh.tune(cp.asarray(X), cp.asarray(Y[:, 0]), objective="sgpr", centers=20, epochs=10, progress=False)
rn = nh.tune(X, Y[:, 0], objective="sgpr", centers=20, epochs=10, progress=False)
d = abs(r.model.intercept_ - rn.model.intercept_)
good = r.model.fit_intercept and d < 1e-5
ok &= good
print(f"tune sgpr cupy intercept {r.model.intercept_:.6f} numpy {rn.model.intercept_:.6f} {'ok' if good else 'BAD'}")
print("ALL OK" if ok else "SOME BAD")
