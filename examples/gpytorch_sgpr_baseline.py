"""GPyTorch SGPR baseline for ``quality_table.py``; NOT part of nyhopt.

Runs in its own virtual environment with torch and gpytorch (never a
dependency of nyhopt, never imported by nyhopt or its tests)::

    python3 -m venv /tmp/gpyt && /tmp/gpyt/bin/pip install torch gpytorch numpy scipy
    python examples/quality_table.py --export /tmp/nyhopt_quality --methods none
    /tmp/gpyt/bin/python examples/gpytorch_sgpr_baseline.py /tmp/nyhopt_quality

Reads the ``<dataset>_seed<k>.npz`` problems that ``quality_table.py --export``
writes (split, standardization, initial inducing points ``Z0`` and initial
lengthscale ``ell0`` identical to the nyhopt runs) and fits the model of
GPyTorch's SGPR example: ``InducingPointKernel(ScaleKernel(RBFKernel(ard_num_dims=d)))``
trained on ``gpytorch.mlls.ExactMarginalLogLikelihood`` (Titsias' collapsed
bound), outputscale 1 and noise 1 at the start (nyhopt's amplitude 1 times
``n * lambda0`` with ``lambda0 = 1/n``), Adam with the same learning rate and
number of steps as the nyhopt runs; like :func:`nyhopt.tune` it keeps the
parameters with the lowest training loss among the ``steps + 1`` evaluations.
float64 throughout.  Besides the test error it reports the predictive
distribution's negative log density and 95% interval coverage on the test
labels (``likelihood(model(X_test))``: latent variance plus noise).  Writes one CSV row per problem (``gpytorch.csv`` in the
problem folder unless ``--csv``), which ``quality_table.py --gpytorch-csv``
merges into the table.
"""
from __future__ import annotations

import argparse
import copy
import csv
import math
import sys
import time
from pathlib import Path

try:
    import torch
    import gpytorch
except ImportError as exc:  # the system python of nyhopt has neither, on purpose
    sys.exit(f"gpytorch_sgpr_baseline.py needs torch and gpytorch ({exc}); run it with the "
             "python of a separate virtual environment, e.g. /tmp/gpyt/bin/python (see the "
             "module docstring)")
import numpy as np

COLUMNS = ["dataset", "seed", "method", "test_error", "metric", "nlpd", "coverage", "seconds", "epochs",
           "n_train", "centers", "penalty", "amplitude", "status"]


class SGPR(gpytorch.models.ExactGP):
    """Sparse GP regression with inducing points, as in GPyTorch's SGPR example."""

    def __init__(self, X, y, likelihood, Z0, ell0, mean):
        super().__init__(X, y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean() if mean == "constant" else gpytorch.means.ZeroMean()
        base = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=X.shape[1]))
        base.base_kernel.lengthscale = torch.full((1, X.shape[1]), float(ell0), dtype=X.dtype)
        base.outputscale = torch.tensor(1.0, dtype=X.dtype)
        self.covar_module = gpytorch.kernels.InducingPointKernel(
            base, inducing_points=Z0.clone(), likelihood=likelihood)

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def fit_and_predict(data, steps, lr, mean):
    """Train on one problem; returns (test predictive mean, test predictive std, seconds, model).

    The std is that of a new observation: ``likelihood(model(X_test))``, the latent
    variance plus the noise, as nyhopt's ``predict(X, return_std=True)``.
    """
    t = {k: torch.as_tensor(np.asarray(data[k], dtype=np.float64))
         for k in ("X_train", "y_train", "X_test", "Z0")}
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    likelihood.noise = torch.tensor(1.0, dtype=torch.float64)
    model = SGPR(t["X_train"], t["y_train"], likelihood, t["Z0"], data["ell0"], mean).double()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    likelihood.train()
    best_loss, best_state = math.inf, None
    t0 = time.perf_counter()
    for step in range(steps + 1):
        optimizer.zero_grad()
        loss = -mll(model(t["X_train"]), t["y_train"])
        value = loss.item()
        if value < best_loss:
            best_loss, best_state = value, copy.deepcopy(model.state_dict())
        if step < steps:
            loss.backward()
            optimizer.step()
    seconds = time.perf_counter() - t0
    model.load_state_dict(best_state)
    model.eval()
    likelihood.eval()
    with torch.no_grad():
        dist = likelihood(model(t["X_test"]))
        pred = dist.mean.numpy()
        std = dist.variance.clamp_min(0).sqrt().numpy()
    return pred, std, seconds, model


def error_bars(y_test, mean, std):
    """Negative log predictive density (nats per value) and the coverage of the 95% interval."""
    z = (y_test - mean) / std
    nlpd = float(np.mean(0.5 * z * z + np.log(std)) + 0.5 * math.log(2 * math.pi))
    return nlpd, float(np.mean(np.abs(z) <= 1.959963984540054))


def test_error(task, y_test, pred):
    """RMSE on the standardized labels, or the error of ``sign(pred)`` against -1/+1 labels."""
    if task == "regression":
        return float(np.sqrt(np.mean((y_test - pred) ** 2)))
    return float(np.mean((pred > 0) != (y_test > 0)))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", type=Path, help="folder of <dataset>_seed<k>.npz files")
    parser.add_argument("--csv", type=Path, default=None, help="output (default <problems>/gpytorch.csv)")
    parser.add_argument("--datasets", default=None, help="comma-separated (default: all found)")
    parser.add_argument("--steps", type=int, default=100, help="Adam steps (default 100)")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--mean", choices=["zero", "constant"], default="zero",
                        help="prior mean (zero, like N-KRR; GPyTorch's example uses constant)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    if args.steps < 0:
        parser.error(f"--steps must be >= 0, got {args.steps}")
    if not args.problems.is_dir():
        parser.error(f"problems folder {args.problems} not found; write it with "
                     "quality_table.py --export")
    return args


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    wanted = set(args.datasets.split(",")) if args.datasets else None
    paths = sorted(args.problems.glob("*_seed*.npz"))
    out = args.csv or args.problems / "gpytorch.csv"
    with open(out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        for path in paths:
            name, seed = path.stem.rsplit("_seed", 1)
            if wanted is not None and name not in wanted:
                continue
            data = dict(np.load(path))
            task = str(data["task"])
            row = {"dataset": name, "seed": int(seed), "method": "gpytorch",
                   "metric": "rmse" if task == "regression" else "c-error",
                   "n_train": data["X_train"].shape[0], "centers": data["Z0"].shape[0]}
            try:
                pred, std, seconds, model = fit_and_predict(data, args.steps, args.lr, args.mean)
                amplitude = float(model.covar_module.base_kernel.outputscale)
                noise = float(model.likelihood.noise)
                nlpd, coverage = error_bars(np.asarray(data["y_test"], dtype=np.float64), pred, std)
                row.update(test_error=test_error(task, data["y_test"], pred), nlpd=nlpd, coverage=coverage,
                           seconds=seconds,
                           epochs=args.steps, amplitude=amplitude,
                           penalty=noise / (amplitude * row["n_train"]), status="ok")
            except Exception as exc:  # keep going; the table shows the failure
                row.update(test_error=float("nan"), status=f"failed: {exc!r}"[:200])
            writer.writerow(row)
            fh.flush()
            print(f"{name:12s} seed {seed} gpytorch error {row['test_error']:.4f} "
                  f"({row.get('seconds', 0):.1f} s)", flush=True)
    return out


if __name__ == "__main__":
    main()
