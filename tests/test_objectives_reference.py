"""Objective values against plain dense references (explicit n x n hat matrix).

Every reference below is written from the definition in MATH.md with dense
NumPy algebra on small problems (n <= 300), independently of the factorized
implementation: explicit kernel formulas, ``H = K B^{-1} K^T`` formed as an
n x n matrix, ``slogdet`` of the n x n SGPR covariance.  The same jittered
``K_mm + eps I`` is used on both sides (MATH.md).
"""
import numpy as np
import pytest

import nyhopt as nh
from nyhopt.objectives import make_objective

EPS64 = 1e-10  # jitter of float64 data (MATH.md / contracts.md)


# -- plain kernels ---------------------------------------------------------------------------
def plain_kernel(kind, X, Z, ell):
    diff = (X[:, None, :] - Z[None, :, :]) / np.asarray(ell, dtype=float)
    s = np.sum(diff**2, axis=-1)
    r = np.sqrt(s)
    if kind == "gaussian":
        return np.exp(-0.5 * s)
    if kind == "laplacian":
        return np.exp(-r)
    if kind == "matern32":
        return (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r)
    if kind == "matern52":
        return (1 + np.sqrt(5) * r + 5 * s / 3) * np.exp(-np.sqrt(5) * r)
    raise ValueError(kind)


class Dense:
    """Everything of N-KRR formed densely from the definitions."""

    def __init__(self, kind, X, Y, Z, ell, lam, eps=EPS64):
        self.n, self.m, self.p = X.shape[0], Z.shape[0], Y.shape[1]
        self.lam, self.Y = lam, Y
        self.K = plain_kernel(kind, X, Z, ell)
        self.Kt = plain_kernel(kind, Z, Z, ell) + eps * np.eye(self.m)
        self.Knn = plain_kernel(kind, X, X, ell)
        # B = K^T K + n lam Kt = G^T G with G = [K; sqrt(n lam) Lk^T]; with G = Q R (QR),
        # H = K B^{-1} K^T = Q_n Q_n^T (Q_n: first n rows of Q).  Orthogonal, hence
        # accurate even when Kt is ill-conditioned (unlike solving with B).
        Lk = np.linalg.cholesky(self.Kt)
        Q, R = np.linalg.qr(np.vstack([self.K, np.sqrt(self.n * lam) * Lk.T]))
        Qn = Q[: self.n]
        self.H = Qn @ Qn.T  # n x n hat matrix
        self.alpha = np.linalg.solve(R, Qn.T @ Y)
        self.I = np.eye(self.n)
        W = np.linalg.solve(Lk, self.K.T)
        self.Knys = W.T @ W  # K Kt^{-1} K^T

    def D(self):
        return np.trace(self.H)

    def F(self):
        return np.trace(self.Y.T @ (self.I - self.H) @ self.Y)

    def T(self):
        return np.trace(self.Knn - self.Knys)

    def resid(self):
        return (self.I - self.H) @ self.Y


def ref_loocv(d):
    R = d.resid()
    h = np.diag(d.H)
    return np.sum((R / (1 - h)[:, None]) ** 2) / (d.n * d.p)


def ref_gcv(d):
    R = d.resid()
    return np.sum(R**2) / (d.n * d.p) / (np.trace(d.I - d.H) / d.n) ** 2


def ref_creg(d, s2):
    return np.sum(d.resid() ** 2) / (d.n * d.p) + 2 * s2 / d.n * d.D()


def ref_sgpr(d):
    S = d.Knys + d.n * d.lam * d.I
    _, logdet = np.linalg.slogdet(S)
    quad = np.trace(d.Y.T @ np.linalg.solve(S, d.Y))
    return (d.p * logdet + quad + d.p * d.T() / (d.n * d.lam)) / (d.n * d.p)


def ref_prop(d, s2, c):
    return 2 / (d.n * d.p) * (d.p * s2 * d.D() + d.F() * (1 + d.T() / (c * d.lam)))


def ref_holdout(kind, X, Y, Z, ell, lam, tr, va):
    alpha = Dense(kind, X[tr], Y[tr], Z, ell, lam).alpha
    Rv = Y[va] - plain_kernel(kind, X[va], Z, ell) @ alpha
    return np.sum(Rv**2) / (len(va) * Y.shape[1])


# -- problems ----------------------------------------------------------------------------------
def problem(n=120, d=3, m=12, p=1, seed=0, ard=True):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, size=(n, d))
    f = np.sin(2 * X[:, :1]) + 0.5 * X[:, 1:2] ** 2
    Y = f + 0.1 * rng.normal(size=(n, p)) + np.arange(p)[None, :] * X[:, -1:]
    Z = X[rng.choice(n, m, replace=False)] + 0.05 * rng.normal(size=(m, d))
    ell = rng.uniform(0.8, 1.6, size=d) if ard else np.array([1.2])
    return X, Y, Z, ell


def rel(a, b):
    return abs(a - b) / abs(b)


KINDS = ["gaussian", "laplacian", "matern32", "matern52"]


@pytest.mark.parametrize("p", [1, 3])
@pytest.mark.parametrize("kind", KINDS)
def test_values_match_dense_references(kind, p):
    X, Y, Z, ell = problem(n=150, p=p, seed=1)
    lam, s2 = 3e-3, 0.7
    y = Y[:, 0] if p == 1 else Y
    params = nh.Params.from_natural(lam, ell, Z)
    d = Dense(kind, X, Y, Z, ell, lam)
    refs = {
        "loocv": ref_loocv(d),
        "gcv": ref_gcv(d),
        "creg": ref_creg(d, s2),
        "sgpr": ref_sgpr(d),
        "prop": ref_prop(d, s2, d.n**2),
    }
    for name, ref in refs.items():
        amp = {"amplitude": "learn", "mean": "zero"} if name == "sgpr" else {}  # the bound at params.amplitude (1)
        obj = make_objective(name, X, y, kernel=kind, noise_variance=s2, **amp)
        assert rel(obj.value(params), ref) < 1e-10, name
    paper = make_objective("prop", X, y, kernel=kind, noise_variance=s2, normalization="paper")
    assert rel(paper.value(params), ref_prop(d, s2, d.n)) < 1e-10
    ho = make_objective("holdout", X, y, kernel=kind, random_state=3)
    ref = ref_holdout(kind, X, Y, Z, ell, lam, ho.train_index, ho.val_index)
    assert rel(ho.value(params), ref) < 1e-10


@pytest.mark.parametrize("n, m, lam", [(300, 40, 1e-4), (60, 60, 1e-2), (200, 5, 1.0)])
def test_values_match_references_across_sizes(n, m, lam):
    X, Y, Z, ell = problem(n=n, m=m, p=2, seed=n + m, ard=False)
    params = nh.Params.from_natural(lam, ell, Z)
    d = Dense("gaussian", X, Y, Z, ell, lam)
    for name, ref in [("prop", ref_prop(d, 1.0, n**2)), ("sgpr", ref_sgpr(d)), ("loocv", ref_loocv(d)),
                      ("gcv", ref_gcv(d)), ("creg", ref_creg(d, 1.0))]:
        amp = {"amplitude": "learn", "mean": "zero"} if name == "sgpr" else {}
        assert rel(make_objective(name, X, Y, **amp).value(params), ref) < 1e-10, name


def test_loocv_is_the_leave_one_out_error():
    """R_i / (1 - h_i) is the error of the fit without row i (same n*lam, MATH.md)."""
    X, Y, Z, ell = problem(n=40, m=6, p=2, seed=5)
    lam = 1e-2
    n = X.shape[0]
    Kmm = plain_kernel("gaussian", Z, Z, ell) + EPS64 * np.eye(len(Z))
    errs = []
    for i in range(n):
        keep = np.arange(n) != i
        K = plain_kernel("gaussian", X[keep], Z, ell)
        alpha = np.linalg.solve(K.T @ K + n * lam * Kmm, K.T @ Y[keep])
        errs.append(Y[i] - plain_kernel("gaussian", X[i : i + 1], Z, ell)[0] @ alpha)
    ref = np.mean(np.square(errs))
    obj = make_objective("loocv", X, Y)
    assert rel(obj.value(nh.Params.from_natural(lam, ell, Z)), ref) < 1e-9


def test_terms_add_up_and_match_their_definitions():
    X, Y, Z, ell = problem(n=100, p=2, seed=2)
    lam, s2 = 1e-3, 0.5
    params = nh.Params.from_natural(lam, ell, Z)
    d = Dense("gaussian", X, Y, Z, ell, lam)
    n, p = d.n, d.p
    t = make_objective("prop", X, Y, noise_variance=s2).terms(params)
    assert rel(t["effective_dimension"], 2 * s2 * d.D() / n) < 1e-10
    assert rel(t["data_fit"], 2 * d.F() / (n * p)) < 1e-10
    assert rel(t["trace"], 2 * d.F() * d.T() / (n * p * n**2 * lam)) < 1e-8
    rss = np.sum(d.resid() ** 2) / (n * p)
    assert rel(make_objective("gcv", X, Y).terms(params)["data_fit"], rss) < 1e-10
    assert rel(make_objective("loocv", X, Y).terms(params)["data_fit"], rss) < 1e-10
    tc = make_objective("creg", X, Y, noise_variance=s2).terms(params)
    assert rel(tc["effective_dimension"], 2 * s2 * d.D() / n) < 1e-10
    ts = make_objective("sgpr", X, Y).terms(params)
    assert rel(ts["trace"], d.T() / (n * n * lam)) < 1e-8
    for name in ["holdout", "loocv", "gcv", "creg", "sgpr", "prop"]:
        obj = make_objective(name, X, Y, random_state=0)
        terms = obj.terms(params)
        assert terms and all(isinstance(v, float) for v in terms.values())
        assert rel(sum(terms.values()), obj.value(params)) < 1e-13, name
