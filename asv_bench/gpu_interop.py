"""Hand PyTorch and CuPy GPU arrays to nyhopt and compare with the NumPy path.

Run on a machine with a CUDA GPU, CuPy and PyTorch::

    python asv_bench/gpu_interop.py

Each check prints one line ``PASS``/``FAIL`` with the relative difference of
the predictions to the same fit on NumPy arrays (float32 data, so the
tolerance is a float32 one).  A torch CUDA tensor reaches nyhopt through
DLPack (``nyhopt.backend.as_native``): it becomes a CuPy view of the same
memory and the results are CuPy arrays.  Exits 0 with a ``skipped: ...`` line
when torch, CuPy or a GPU is missing, 1 when a check fails.
"""
from __future__ import annotations

import sys

import numpy as np

RTOL_FIT = 1e-3    # one solve in float32 on two devices
RTOL_TUNED = 1e-2  # a few Adam steps in float32 on two devices, then a solve


def _rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def _skip_reason():
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA GPU"
    from nyhopt.backend import gpu_available

    if not gpu_available():
        return "CuPy is not installed or sees no GPU"
    return None


def main() -> int:
    reason = _skip_reason()
    if reason is not None:
        print(f"skipped: {reason}")
        return 0
    import cupy as cp
    import torch

    import nyhopt as nh
    from nyhopt.backend import as_native

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(2000, 4)).astype(np.float32)
    y = (np.sin(3 * X[:, 0]) + X[:, 1] + 0.05 * rng.normal(size=2000)).astype(np.float32)
    X_test = rng.uniform(-1, 1, size=(300, 4)).astype(np.float32)
    tX, ty, tX_test = (torch.from_numpy(a).cuda() for a in (X, y, X_test))
    results = []

    def kind(a):
        return f"{type(a).__module__.split('.')[0]}.{type(a).__name__}"

    def check(name, ok, detail=""):
        results.append(ok)
        print(f"{'PASS' if ok else 'FAIL'}  {name}  {detail}".rstrip())

    view = as_native(tX, "X")
    check("torch CUDA tensor -> CuPy view (zero copy)",
          isinstance(view, cp.ndarray) and view.data.ptr == tX.data_ptr(), f"type {kind(view)}")

    def krr():
        return nh.NystromKRR(nh.GaussianKernel(0.5), penalty=1e-5, centers=100, random_state=0)

    ref = krr().fit(X, y).predict(X_test)
    for label, (Xa, ya, Xt) in {"torch CUDA tensors": (tX, ty, tX_test),
                                "CuPy arrays": (cp.asarray(X), cp.asarray(y), cp.asarray(X_test))}.items():
        pred = krr().fit(Xa, ya).predict(Xt)
        err = _rel(cp.asnumpy(pred), ref) if isinstance(pred, cp.ndarray) else float("nan")
        check(f"NystromKRR fit/predict on {label}", isinstance(pred, cp.ndarray) and err <= RTOL_FIT,
              f"type {kind(pred)}, rel. diff {err:.2e} (tol {RTOL_FIT:g})")

    def hyper():
        return nh.HyperoptKRR(centers=50, epochs=5, random_state=0, standardize=True)

    ref = hyper().fit(X, y).predict(X_test)
    pred = hyper().fit(tX, ty).predict(tX_test)
    err = _rel(cp.asnumpy(pred), ref) if isinstance(pred, cp.ndarray) else float("nan")
    check("HyperoptKRR fit/predict on torch CUDA tensors", isinstance(pred, cp.ndarray) and err <= RTOL_TUNED,
          f"type {kind(pred)}, rel. diff {err:.2e} (tol {RTOL_TUNED:g})")

    ref = krr().fit(X, y).predict(X_test)
    pred = krr().fit(torch.from_numpy(X), torch.from_numpy(y)).predict(torch.from_numpy(X_test))
    same = isinstance(pred, np.ndarray) and np.array_equal(pred, ref)
    check("NystromKRR on torch CPU tensors equals the NumPy path", same, f"type {kind(pred)}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
