r"""Growing the Nystrom centers of a tuning run, with a warm start.

A budgeted run (``tune(..., time_budget=T)``, ``docs/tuning.md``) tunes at a
small :math:`m` first, then adds centers and goes on from where it was.
Growing keeps every tuned quantity: :math:`\lambda`, the lengthscales, the
amplitude and the tuned centers themselves; only rows are appended.

* **Where new centers come from**: :func:`add_centers` seeds them as
  k-means++ does (:math:`D^2` sampling), in the metric of the tuned kernel:
  a row is drawn with probability proportional to its squared distance
  :math:`\min_j \lVert (x - z_j)/\ell\rVert^2` to the nearest center, so the
  new centers go where the current ones leave the data uncovered (the
  Nystrom residual :math:`k(x,x) - k_x^\top K_{mm}^{-1}k_x` of a Gaussian
  kernel grows with that distance).  The draw is made in a few rounds, each
  updating the distances, over a random subset of the rows.
* **Adam's state** (:func:`grow_state`): the moments of the kept entries are
  kept, and so is the step counter (the bias corrections are spent).  A new
  center starts with both moments 0, so its first steps are up to
  :math:`\sqrt{1/(1-\beta_2)} \approx 32` times larger than the old centers'
  (``fill="mean"`` starts its second moment at the old centers' mean
  instead, steps of their size).  Measured on spacega and cpusmall
  (``docs/tuning.md``, "A time budget"): zeros gave a held-out error 0.6%
  lower on average than the mean, a new Adam state 0.5% higher (from 3%
  lower to 5% higher).
"""
from __future__ import annotations

import numpy as np

from ...backend import get_namespace, to_numpy
from ...params import Params
from ..adam import AdamState

__all__ = ["next_size", "add_centers", "grow_state"]

#: Rows considered as new centers (a random subset of the training rows when there are more).
MAX_CANDIDATES = 20000
#: Rounds of the batched k-means++ draw (the distances are updated after each).
ROUNDS = 8


def next_size(m, n, factor=2.0, max_size=None):
    """The next number of centers: ``factor * m``, at most ``n`` (and ``max_size``); ``m`` when none is left.

    Examples
    --------
    >>> next_size(100, 10000), next_size(800, 1000), next_size(1000, 1000)
    (200, 1000, 1000)
    """
    cap = n if max_size is None else min(n, max_size)
    return int(max(m, min(int(round(factor * m)), cap)))


def _scaled_sq_dist(A, B, xp):
    """Squared Euclidean distances between the rows of ``A`` and ``B`` (clipped at 0)."""
    d2 = (A * A).sum(axis=1)[:, None] + (B * B).sum(axis=1)[None, :] - 2.0 * (A @ B.T)
    return xp.maximum(d2, 0.0)


def _nearest_sq_dist(C, Z, xp, block=4096):
    """For each row of ``C``, the squared distance to the nearest row of ``Z`` (in blocks of rows)."""
    out = xp.empty(C.shape[0], dtype=xp.float64)
    for i in range(0, C.shape[0], block):
        out[i:i + block] = _scaled_sq_dist(C[i:i + block], Z, xp).min(axis=1)
    return out


def add_centers(X, centers, lengthscale, m_new, rng, how="kmeans++", in_draw_order=False):
    r"""``centers`` with ``m_new`` rows of ``X`` appended.

    Parameters
    ----------
    X : array of shape (n, d)
        Training inputs (NumPy or CuPy).
    centers : array of shape (m, d)
        The current centers (float64, same device); kept as they are, first.
    lengthscale : array of shape (d,) or (1,)
        The kernel's lengthscales: distances are measured in :math:`x / \ell`.
    m_new : int
        Rows to add, ``0 <= m_new``; at most the number of rows considered.
    rng : numpy.random.Generator
    how : {"kmeans++", "random"}
        :math:`D^2` sampling (module notes) or uniform rows.
    in_draw_order : bool, default False
        Append the new rows in the order of the rounds that drew them (so
        that every prefix of the new rows is a :math:`D^2` draw of its own,
        for nested fits: :mod:`nyhopt.solvers.penalty_path`), instead of
        the order of the rows in ``X``.

    Returns
    -------
    array of shape (m + m_new, d), float64, on the device of ``centers``

    Examples
    --------
    >>> import numpy as np
    >>> X = np.vstack([np.zeros((50, 1)), np.ones((50, 1)) * 10])
    >>> Z = add_centers(X, np.zeros((1, 1)), np.ones(1), 1, np.random.default_rng(0))
    >>> Z.ravel().tolist()          # the uncovered cluster
    [0.0, 10.0]
    """
    xp = get_namespace(centers)
    n = X.shape[0]
    m_new = int(m_new)
    if m_new <= 0:
        return xp.array(centers, dtype=xp.float64, copy=True)
    pool = np.arange(n) if n <= MAX_CANDIDATES else np.sort(rng.choice(n, size=MAX_CANDIDATES, replace=False))
    if m_new > pool.size:
        raise ValueError(f"cannot add {m_new} centers from {pool.size} candidate rows")
    Xc = xp.asarray(X[xp.asarray(pool)] if pool.size < n else X, dtype=xp.float64)
    if how == "random":
        pick = np.sort(rng.choice(pool.size, size=m_new, replace=False))
        return xp.concatenate([xp.asarray(centers, dtype=xp.float64), Xc[xp.asarray(pick)]])
    if how != "kmeans++":
        raise ValueError(f"how must be 'kmeans++' or 'random', got {how!r}")
    inv = 1.0 / xp.asarray(to_numpy(lengthscale, dtype=np.float64))
    C = Xc * inv
    d2 = _nearest_sq_dist(C, xp.asarray(centers, dtype=xp.float64) * inv, xp)
    chosen = np.zeros(pool.size, dtype=bool)
    picks = []
    sizes = np.diff(np.linspace(0, m_new, min(ROUNDS, m_new) + 1).round().astype(int))
    for k in sizes:
        w = np.where(chosen, 0.0, to_numpy(d2, dtype=np.float64))
        total = w.sum()
        if not total > 0:  # every row is a center already (or duplicates): uniform among the others
            w = (~chosen).astype(np.float64)
            total = w.sum()
        k = int(min(k, np.count_nonzero(w)))
        idx = rng.choice(pool.size, size=k, replace=False, p=w / total)
        chosen[idx] = True
        picks.append(idx)
        d2 = xp.minimum(d2, _nearest_sq_dist(C, C[xp.asarray(idx)], xp))
    idx = np.concatenate(picks) if picks else np.zeros(0, dtype=int)
    if idx.size < m_new:  # fewer positive weights than asked: fill uniformly from the rest
        rest = np.flatnonzero(~chosen)
        idx = np.concatenate([idx, rng.choice(rest, size=m_new - idx.size, replace=False)])
    if not in_draw_order:
        idx = np.sort(idx)
    return xp.concatenate([xp.asarray(centers, dtype=xp.float64), Xc[xp.asarray(idx)]])


def grow_state(state: AdamState, m_total: int, fill="zero") -> AdamState:
    """Adam's state for ``m_total`` centers: the kept rows as they are, new rows as in the module notes.

    ``fill="mean"`` starts the new rows' second moment at the old rows' mean
    (column by column) instead of 0.

    Examples
    --------
    >>> import numpy as np
    >>> from nyhopt.optim import adam
    >>> p = Params.from_natural(1e-3, [1.0], np.zeros((2, 1)))
    >>> s = grow_state(adam.init(p)._replace(step=5), 3)
    >>> s.step, s.m.centers.shape, s.v.centers.shape
    (5, (3, 1), (3, 1))
    """
    def grow(moments, fill_mean):
        C = moments.centers
        xp = get_namespace(C)
        extra = m_total - C.shape[0]
        if extra <= 0:
            return moments
        if fill_mean and C.shape[0]:
            rows = xp.broadcast_to(C.mean(axis=0, keepdims=True), (extra, C.shape[1]))
        else:
            rows = xp.zeros((extra, C.shape[1]), dtype=xp.float64)
        return Params(moments.log_penalty, moments.log_lengthscale,
                      xp.concatenate([C, xp.asarray(rows, dtype=xp.float64)]), moments.log_amplitude)

    if fill not in ("mean", "zero"):
        raise ValueError(f"fill must be 'mean' or 'zero', got {fill!r}")
    return AdamState(state.step, grow(state.m, False), grow(state.v, fill == "mean"))
