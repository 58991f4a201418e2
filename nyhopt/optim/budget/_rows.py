r"""The rows of a budgeted run on large data: nested row samples, grown with the centers.

A budgeted run (``tune(X, y, time_budget=T)``, ``docs/tuning.md``, "Large
data: rows grown with the centers") on more than :data:`SAMPLE_FROM`
training rows, or on dask arrays, does not tune on all of them: one epoch of
the exact objectives is :math:`O(n m^2)`, and at :math:`n = 10^6` the first
stage alone would take the whole budget.  It tunes on a random sample of the
rows instead and grows it:

* **Held-out rows and samples** come from one random permutation
  :math:`\pi` of the :math:`n` rows (:class:`RowPlan`): the first
  ``n_val`` are held out, and every tuning sample is a prefix
  :math:`\pi_{n_{val}}, \dots, \pi_{n_{val}+k-1}` of the rest, so a grown
  sample holds the smaller one (the tuned centers stay rows of it) and none
  of the held-out rows.  Only the rows of a sample are gathered (for dask
  arrays, to the driver); ``X`` itself is never copied whole except for the
  final fit (:func:`final_rows`).
* **What carries over** from :math:`n` to :math:`n'` rows
  (:func:`rescale_penalty`): everything but the penalty, which keeps
  :math:`n\lambda` fixed.  :math:`n\lambda` is SGPR's noise variance (times
  the amplitude) and the ridge of the normal matrix
  :math:`B = K_{nm}^\top K_{nm} + n\lambda K_{mm}`, whose first term grows
  like :math:`n`: with :math:`n\lambda` fixed, the predictor is the
  posterior mean of the same Gaussian-process model given more
  observations.  In log coordinates the step is
  :math:`\log\lambda' = \log\lambda + \log(n/n')`, a shift that leaves
  Adam's moments meaningful.
* **The final fit** (:func:`final_size`) keeps :data:`FINAL_SHARE` of the
  budget and spends it on more centers than were tuned: up to
  :data:`FINAL_CENTERS` times as many, on :data:`FINAL_ROWS_PER_CENTER`
  rows a center (more where the centers reach their cap and time is left),
  at the tuned hyperparameters (the penalty rescaled), its products in
  float32 where the stages' may be
  (:meth:`~nyhopt.optim.budget._precision.EpochRows.fit_products`).  The
  kernel is the one tuned, so the wider fit is a better Nystrom
  approximation of the same Gaussian-process posterior; with enough
  held-out rows its leading centers and its penalty are chosen on them from
  one pass over its rows (:mod:`nyhopt.optim.budget._refit`), and it is
  kept only where its held-out error is lower.  Where no wider fit is affordable, the
  largest prefix of the training rows that the time left buys
  (:func:`final_rows`).  Never the held-out rows, so that the 95% intervals
  are calibrated on rows the final model has not seen.
"""
from __future__ import annotations

import math

import numpy as np

from ...backend import as_native, get_namespace
from ...inputs._door import trust
from ...inputs._frame_errors import frame_errors
from ...inputs._validation import check_labels, check_matrix
from ...placement import on_cluster

__all__ = ["SAMPLE_FROM", "START_ROWS", "ROWS_PER_CENTER", "ROW_FACTOR", "FINAL_SHARE", "FINAL_CENTERS",
           "FINAL_ROWS_PER_CENTER", "FINAL_MAX_CENTERS", "FINAL_MAX_ROWS", "RowPlan", "needs_rows", "rescale_penalty",
           "check_full_data", "final_rows", "final_size"]

#: A run with at most this many training rows tunes on all of them, as before; one with more samples rows.
SAMPLE_FROM = 40000
#: Training rows the first stage of a run on row samples tunes on.  Measured on the robot arm at
#: 10^6 rows, 120 s (docs/results/large-rows.md): 5000, 10 000, 20 000 and 40 000 rows gave test RMSEs
#: of 0.131, 0.125, 0.126 and 0.132 (fewer rows an epoch buy more centers; too few tune them poorly).
START_ROWS = 10000
#: A stage at :math:`m` centers tunes on at least this many rows per center, where there are so many.
#: Measured on the robot arm at 10^6 rows (docs/results/large-rows.md): 8 a center won at 60 and 120 s
#: and lost at 600 s (0.1137 at 2396 centers on 19 168 rows, against 0.1076 for a 40 000-row sample
#: at 2858 centers on 36 000 rows); 12 is the ratio of the best 600 s runs on 36 000 rows.
ROWS_PER_CENTER = 12
#: The factor by which a row growth that is not tied to the centers multiplies the rows.
ROW_FACTOR = 4
#: Fraction of the budget a run on row samples keeps for its final fit (the tuning stages end before).
#: Measured on the robot arm at 10^6 rows, 120 s (docs/tuning.md, "Large data", point 3): 0.2, 0.3 and 0.5
#: gave 0.1160, 0.1140 and 0.1175 against 0.1204 with nothing kept.
FINAL_SHARE = 0.3
#: The final fit takes up to this many times the tuned centers, on this many rows a center, and at
#: most FINAL_MAX_CENTERS centers (a few m x m float64 matrices: 0.8 GB each at 10 000).
FINAL_CENTERS, FINAL_ROWS_PER_CENTER, FINAL_MAX_CENTERS = 8, 12, 10000
#: The most rows a wider final fit takes where its centers reach their cap with time left (they are gathered
#: to the driver: 112 MB at d = 28 in float64).
FINAL_MAX_ROWS = 500_000
#: A wider final fit is made only when it has at least this factor of the tuned centers.
FINAL_MIN_FACTOR = 1.25
#: The projected seconds of the wider fit times this must fit in the time left.  The projection from the
#: largest fit of the run as O(n m^2) is high already (measured: 1.3-1.45 times the wide fit's seconds on the
#: robot arm at 10^6 rows, 120 s), the overheads of the smaller fit being counted as if they grew too.
FINAL_MARGIN = 1.1


def needs_rows(X, n_train):
    """Whether a budgeted run samples rows: more than :data:`SAMPLE_FROM` training rows, or dask arrays."""
    return on_cluster(X) or n_train > SAMPLE_FROM


def check_full_data(X, y, dtype):
    """``(X, y)`` checked once at the door, without a copy where none is needed (in-memory data).

    Dask arrays are checked for what can be known without computing them:
    two dimensions and known chunk sizes along the rows (the samples are
    gathered by index).
    """
    if on_cluster(X, y):
        for name, a in (("X", X), ("y", y)):
            chunks = getattr(a, "chunks", None)
            if chunks is None or any(math.isnan(c) for c in chunks[0]):
                raise ValueError(f"{name} is a dask array with unknown chunk sizes along its rows; call "
                                 f"{name}.compute_chunk_sizes() (or give arrays with known chunks) before "
                                 "tune(..., time_budget=)")
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {tuple(X.shape)}")
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y has {y.shape[0]} rows but X has {X.shape[0]}")
        return X, y
    frame = X
    X, y = as_native(X, "X"), as_native(y, "y")
    xp = get_namespace(X)
    y = check_labels(y, "y")
    with frame_errors(frame, "X"):
        X = check_matrix(X, "X", xp, dtype=dtype, min_rows=2)
    if len(y) != X.shape[0]:
        raise ValueError(f"y has {len(y)} rows but X has {X.shape[0]}")
    trust(X)
    return X, y


def rescale_penalty(params, n_from, n_to):
    r"""``params`` with :math:`\lambda' = \lambda\, n_{from} / n_{to}` (:math:`n\lambda` kept), the rest as it is.

    Examples
    --------
    >>> import numpy as np
    >>> from nyhopt import Params
    >>> p = Params.from_natural(penalty=1e-3, lengthscale=np.ones(2), centers=np.zeros((3, 2)))
    >>> float(rescale_penalty(p, 1000, 4000).penalty)
    0.00025
    """
    if n_from == n_to:
        return params
    return params.replace(log_penalty=np.asarray(params.log_penalty + math.log(n_from / n_to)))


class RowPlan:
    """Held-out rows and nested tuning samples of ``n`` rows, from one random permutation.

    Parameters
    ----------
    n : int
        Rows of ``X``.
    n_val : int
        Rows to hold out (the first ``n_val`` of the permutation).
    rng : numpy.random.Generator
        Draws the permutation (once, at construction).
    """

    def __init__(self, n, n_val, rng):
        self.n, self.n_val = int(n), int(n_val)
        order = rng.permutation(self.n)
        self.order = order.astype(np.int32) if self.n < 2**31 else order

    @property
    def n_train(self):
        """Rows that may be tuned or fitted on (all but the held-out ones)."""
        return self.n - self.n_val

    def held_out(self):
        """Sorted indices of the held-out rows."""
        return np.sort(self.order[:self.n_val])

    def sample(self, k):
        """Sorted indices of the first ``k`` training rows of the permutation (``k`` at most :attr:`n_train`)."""
        k = int(min(max(k, 1), self.n_train))
        return np.sort(self.order[self.n_val:self.n_val + k])

    def rows_for(self, m, current):
        """Rows a stage at ``m`` centers tunes on: ``current``, grown to :data:`ROWS_PER_CENTER` per center."""
        return int(min(self.n_train, max(current, ROWS_PER_CENTER * m)))

    def gather(self, X, y, idx, client=None):
        """``(X[idx], y[idx])`` in memory: NumPy or CuPy as ``X`` is, NumPy for dask arrays (computed)."""
        if on_cluster(X, y):
            parts = (X[idx], y[idx])
            if client is not None:
                return tuple(client.compute(list(parts), sync=True))
            import dask

            return dask.compute(*parts)
        xp = get_namespace(X)
        i = xp.asarray(idx)
        yy = y[i] if hasattr(y, "get") else np.asarray(y)[idx]
        return X[i], yy

    def select(self, X, y, idx):
        """``(X[idx], y[idx])`` where the data live: gathered in memory (one copy), lazy for dask arrays."""
        if on_cluster(X, y):
            return X[idx], y[idx]
        return self.gather(X, y, idx)


def final_rows(plan, fit_seconds, tuned_rows, seconds_left):
    """Rows of the final fit: the most that ``seconds_left`` affords, from ``tuned_rows`` up to all training rows.

    ``fit_seconds`` is the measured (or projected) seconds of a fit on
    ``tuned_rows`` rows at the final centers; a fit is :math:`O(n)` in the
    rows, and a margin of 25% is kept.
    """
    if fit_seconds <= 0.0:
        return plan.n_train
    per_row = 1.25 * fit_seconds / tuned_rows
    return int(min(plan.n_train, max(tuned_rows, seconds_left / per_row)))


def final_size(plan, fit_seconds, m, tuned_rows, seconds_left):
    """``(centers, rows)`` of the final fit after a stage at ``m`` centers on ``tuned_rows`` rows.

    The most centers up to ``min(FINAL_CENTERS * m, FINAL_MAX_CENTERS)``
    whose fit on ``FINAL_ROWS_PER_CENTER`` rows a center (at least
    ``tuned_rows``, at most all training rows), projected by
    ``fit_seconds(centers, rows)`` and times :data:`FINAL_MARGIN`, takes at
    most ``seconds_left``, on the most rows that time buys (more than
    ``FINAL_ROWS_PER_CENTER`` a center where the centers reach their cap, up
    to :data:`FINAL_MAX_ROWS`);
    where that is below ``FINAL_MIN_FACTOR * m``, ``m`` centers on the rows
    :func:`final_rows` gives.

    Examples
    --------
    >>> import numpy as np
    >>> plan = RowPlan(10**6, 5000, np.random.default_rng(0))
    >>> cost = lambda m, rows: 1e-11 * rows * m * m
    >>> final_size(plan, cost, 1000, 12000, 50.0)  # the most centers that fit, on 12 rows a center
    (7235, 86836)
    >>> final_size(plan, cost, 1000, 12000, 100.0)  # the centers at their cap: more rows a center
    (8000, 142045)
    >>> final_size(plan, cost, 1000, 12000, 0.2)  # not 1.25 times the centers: the rows the time buys
    (1000, 16000)
    """
    def rows_at(k):
        return int(min(plan.n_train, max(tuned_rows, FINAL_ROWS_PER_CENTER * k)))

    lo, hi = m, max(m, min(FINAL_CENTERS * m, FINAL_MAX_CENTERS, plan.n_train))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if FINAL_MARGIN * fit_seconds(mid, rows_at(mid)) <= seconds_left:
            lo = mid
        else:
            hi = mid - 1
    if lo < FINAL_MIN_FACTOR * m:
        return m, final_rows(plan, fit_seconds(m, tuned_rows), tuned_rows, seconds_left)
    rows = rows_at(lo)
    per_row = FINAL_MARGIN * fit_seconds(lo, rows) / rows
    if per_row > 0.0:  # the centers at their cap: the time left buys more rows
        rows = int(min(plan.n_train, max(rows, min(FINAL_MAX_ROWS, seconds_left / per_row))))
    return lo, rows
