"""Synthetic data of the GPU scripts, made on the GPU from a seed (shared by ``gpu_report`` and ``gpu_pieces``)."""


def synthetic_gpu(n, d, seed, dtype):
    """BENCHMARKS.md's target on the first 7 of ``d`` uniform columns, made on the GPU; y standardized."""
    import cupy as cp

    rs = cp.random.RandomState(seed)
    X = rs.uniform(-1.5, 1.5, (n, d), dtype=dtype)
    x = [X[:, j].astype(cp.float64) for j in range(7)]
    f = (cp.sin(3 * x[0]) + cp.cos(2 * x[1]) + 0.5 * x[2] * x[3] + 0.3 * x[4] ** 2 + 0.2 * cp.sin(5 * x[5])
         + 0.1 * x[6])
    y = f + 0.1 * rs.standard_normal(n)
    return X, ((y - y.mean()) / y.std()).astype(dtype)
