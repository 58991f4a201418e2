"""Predictions with error bars on a 1-D problem: the figure of docs/uncertainty.md.

Noisy samples of a smooth function on two intervals with a gap between them;
``HyperoptKRR(objective="sgpr")`` tunes the penalty, the lengthscale, the 12
centers and the kernel amplitude (the sparse GP of SGPR), then
``predict(x, return_std=True)`` gives the mean and the standard deviation of a
new observation (``include_noise=False``: of the latent function).  The plot
shows the data, the mean, the 95% band of a new observation and of the latent
function, and the tuned centers; the band widens in the gap and outside the
data.  Writes ``uncertainty_1d.png`` (default ``docs/``) and prints the
coverage of the 95% band on fresh samples.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

import nyhopt as nh  # noqa: E402

NOISE = 0.2


def truth(x):
    return np.sin(3 * x) + 0.5 * x


def sample(n, rng):
    """``n`` inputs on [-3, -0.5] and [1, 3] (a gap between), with Gaussian noise of std 0.2."""
    x = np.concatenate([rng.uniform(-3, -0.5, n // 2), rng.uniform(1, 3, n - n // 2)])
    return x[:, None], truth(x) + NOISE * rng.normal(size=n)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=common.ROOT / "docs",
                        help="folder of uncertainty_1d.png (default docs/)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=150)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    X, y = sample(200, rng)
    est = nh.HyperoptKRR(objective="sgpr", centers=12, epochs=args.epochs, lr=0.05, random_state=args.seed,
                         patience=None).fit(X, y)
    grid = np.linspace(-4, 4, 400)[:, None]
    mean, std = est.predict(grid, return_std=True)
    _, latent = est.predict(grid, return_std=True, include_noise=False)
    Xf, yf = sample(5000, np.random.default_rng(args.seed + 1))
    mf, sf = est.predict(Xf, return_std=True)
    cover = nh.metrics.coverage(yf, mf, sf)
    noise_std = float(np.sqrt(est.noise_variance_) * est.model_.y_scale_[0])
    print(f"noise std {noise_std:.3f} (true {NOISE}); coverage of the 95% band on 5000 fresh samples "
          f"{cover:.3f}; NLPD {nh.metrics.nlpd(yf, mf, sf):.3f}")

    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    g = grid[:, 0]
    ax.fill_between(g, mean - 1.96 * std, mean + 1.96 * std, color="tab:blue", alpha=0.18,
                    label="95% band, new observation")
    ax.fill_between(g, mean - 1.96 * latent, mean + 1.96 * latent, color="tab:blue", alpha=0.35,
                    label="95% band, latent function")
    ax.plot(g, truth(g), color="k", lw=1, ls="--", label="true function")
    ax.plot(g, mean, color="tab:blue", lw=1.5, label="predictive mean")
    ax.scatter(X[:, 0], y, s=6, color="0.35", zorder=3, label="training data")
    centers = est.model_.centers_[:, 0] * est.x_scale_[0] + est.x_mean_[0]
    ax.plot(centers, np.full_like(centers, ax.get_ylim()[0] + 0.1), "^", color="tab:red", ms=6,
            label="tuned centers")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_title(f"HyperoptKRR(objective='sgpr'), 12 centers: 95% coverage on fresh data {cover:.3f}",
                 fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "uncertainty_1d.png"
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    print(f"figure written to {path}")
    return cover


if __name__ == "__main__":
    main()
