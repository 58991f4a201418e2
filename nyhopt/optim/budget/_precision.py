r"""The large grown stages of a budgeted run tune in float32 on the CPU.

An exact epoch (``prop``, ``sgpr``, ``gcv``, ...) at :math:`n` rows and
:math:`m` centers is four :math:`n m^2` BLAS products (the triangular
solve :math:`A = L^{-1}K^\top`, the Gram product :math:`S = AA^\top` and the
product :math:`A^\top W` of the gradient, twice the flops) and
:math:`O(m^3)` work in float64 (``docs/performance-ops.md``).  The
:math:`n \times m` products dominate at thousands of centers, and float32
BLAS runs them at twice the float64 rate: at :math:`n = 36\,000`,
:math:`m = 3000`, :math:`d = 8` one ``sgpr`` value and gradient took
14.4 s on float64 data and 9.2 s on float32 data (2-core AMD EPYC, DGEMM
130 and SGEMM 248 GFLOP/s; ``docs/tuning.md``, "A time budget", point 8).

So a budgeted run on float64 data (``dtype`` not given) on the CPU tunes a
grown stage on a float32 copy of its rows where :math:`n m^2 \ge`
:data:`FLOAT32_FROM` (an epoch of at least about 0.3 s in float64), for the exact
objectives (``stoch-prop`` keeps the data's dtype: not measured): the
objective then takes its float32 route (the ``n x m`` arrays in float32,
every ``m x m`` matrix and every reduction in float64, the jitter of float32
data, :func:`nyhopt.solvers.jitter`).  What chooses among the stages stays in
float64: each stage's validation fit, its held-out error and the final model
are computed on the float64 rows, so a stage whose float32 tuning lost
accuracy is measured as such.  Stage 0 (the default run) and the last stage
on all the rows (which no held-out error checks) keep the data's dtype, and
so do the small stages, where the products are a small part of an epoch and
float32's rounding of :math:`K_{mm}` and :math:`AA^\top` costs the most
(nearly duplicate centers, long lengthscales).  The rule is one of sizes,
not of measured times, so that a replay makes the same choice.  The run's
cost model (:class:`~nyhopt.optim.budget.SizeCost`) counts epochs in float64
time: a float32 epoch is recorded divided by :data:`FLOAT32_EPOCH`, and a
projected one multiplied by it, so the sizes planned before the first
float32 stage (from float64 measurements) and the last stage on all the rows
(float64, projected from float32 measurements) are costed right.

A grown stage whose factorization fails in float32 (nearly noise-free data
can tune :math:`n\lambda` below float32's rounding of :math:`AA^\top`), or
at its first epoch (:math:`K_{mm}` of many centers in few features), is run
again from its best point in float64, and the run stays in float64
(:meth:`EpochRows.fall_back`).

The final fit of a run on row samples, at up to eight times the tuned
centers (:func:`nyhopt.optim.budget._rows.final_size`), is a direct fit
whose two :math:`n m^2` products run in float32 under the same rule
(:meth:`EpochRows.fit_products`: :func:`nyhopt.solvers.direct.products_in`,
each row block's products summed into float64); its kernel values, jitter
and ``m x m`` algebra stay float64, so it is the float64 model computed with
rounder products, and it replaces the stage's model only where its held-out
error is lower.  Measured on the robot arm (``docs/tuning.md``, "Large
data", point 3): 8000 centers on 96 000 rows took 56.8 s instead of 105.9 s
with the test RMSE 0.091224 against 0.091218; its cost is projected as
:data:`FLOAT32_FIT` times the float64 fit's.

Not on the GPU: an H100's float64 and float32 rates of the products are
alike, and no card was at hand to measure it.  ``dtype="float64"`` keeps
every stage in float64; ``dtype="float32"`` tunes and fits everything in
float32, as before.
"""
from __future__ import annotations

import numpy as np

from ...backend import get_namespace, is_cupy_namespace

__all__ = ["GROWN_FLOAT32", "FLOAT32_FROM", "FLOAT32_EPOCH", "FLOAT32_FIT", "grown_in_float32", "EpochRows"]

#: Whether the large grown stages of a budgeted run on float64 CPU data tune on a float32 copy of the rows.
GROWN_FLOAT32 = True
#: A grown stage tunes in float32 from this :math:`n m^2` on (four products of :math:`4\cdot 10^{10}` flops).
FLOAT32_FROM = 1e10
#: An epoch's time in float32 over its time in float64 where stages switch (``sgpr`` 9.2 / 14.4 s, ``prop``
#: 11.1 / 16.1 s at n = 36 000, m = 3000): the run's cost model counts in float64 and scales by this.
FLOAT32_EPOCH = 0.65
#: A direct fit's time with float32 products over its time in float64 (robot arm, d = 8: 3.5 / 6.3 s at 3000
#: centers on 36 000 rows, 56.8 / 105.9 s at 8000 on 96 000; AMD EPYC, 2 cores).
FLOAT32_FIT = 0.55


def grown_in_float32(dtype, X) -> bool:
    """Whether a budgeted run's large grown stages may tune in float32 (module notes).

    Parameters
    ----------
    dtype : numpy.dtype or None
        ``tune``'s checked ``dtype`` argument (None: not given).
    X : array
        The tuning rows as the run holds them (after ``dtype`` was applied).

    Examples
    --------
    >>> import numpy as np
    >>> grown_in_float32(None, np.zeros((3, 2))), grown_in_float32(np.dtype("float64"), np.zeros((3, 2)))
    (True, False)
    >>> grown_in_float32(None, np.zeros((3, 2), dtype=np.float32))
    False
    """
    if not GROWN_FLOAT32 or dtype is not None or X.dtype != np.float64:
        return False
    return not is_cupy_namespace(get_namespace(X))


class EpochRows:
    """The rows a grown stage's epochs run on: the tuning rows, or their float32 copy (made once per row set).

    Parameters
    ----------
    enabled : bool
        From :func:`grown_in_float32`; when False :meth:`__call__` returns its argument.

    Examples
    --------
    >>> import numpy as np
    >>> rows = EpochRows(True)
    >>> X = np.zeros((10**6, 2))
    >>> rows(X, 50, "sgpr").dtype.name, rows(X, 100, "sgpr").dtype.name, rows(X, 100, "sgpr") is rows(X, 200, "prop")
    ('float64', 'float32', True)
    >>> rows(X, 100, "stoch-prop") is X
    True
    """

    def __init__(self, enabled):
        self.enabled = self.active = bool(enabled)  # active: the run's float32 objectives are this copy's
        self._source = self._copy = None

    def wants_float32(self, n, m, name) -> bool:
        """Whether a stage of objective ``name`` at ``m`` centers on ``n`` rows tunes in float32 (exact objectives)."""
        return name != "stoch-prop" and self.fit_products(n, m) is not None

    def fit_products(self, n, m):
        """The dtype of the products of a final fit at ``m`` centers on ``n`` rows: float32, or None (float64)."""
        return np.float32 if self.enabled and float(n) * float(m) ** 2 >= FLOAT32_FROM else None

    def fit_factor(self, n, m) -> float:
        """A final fit's time at ``(n, m)`` over float64's: :data:`FLOAT32_FIT` with float32 products, else 1."""
        return FLOAT32_FIT if self.fit_products(n, m) is not None else 1.0

    def factor(self, n, m, name) -> float:
        """An epoch's time at ``(n, m)`` over float64's: :data:`FLOAT32_EPOCH` where it tunes in float32, else 1."""
        return FLOAT32_EPOCH if self.wants_float32(n, m, name) else 1.0

    def in_float64(self, obj, seconds) -> float:
        """The measured ``seconds`` of an epoch of ``obj``, in float64 terms (the cost model's unit)."""
        return seconds / FLOAT32_EPOCH if self.active and obj.X.dtype == np.float32 else seconds

    def __call__(self, X, m, name):
        """``X`` as a stage of ``name`` at ``m`` centers tunes on it (the float32 copy is made once per ``X``)."""
        if not self.wants_float32(X.shape[0], m, name):
            return X
        if self._source is not X:
            self._source, self._copy = X, np.ascontiguousarray(X, dtype=np.float32)
        return self._copy

    def holds(self, obj, m) -> bool:
        """Whether the objective ``obj`` tunes on rows of the dtype of a stage at ``m`` centers on its rows."""
        is32 = obj.X.dtype == np.float32
        if self.wants_float32(obj.n, m, obj.name):
            return is32
        return not (is32 and self.active)

    def fall_back(self, obj) -> bool:
        """After a float32 stage of ``obj`` failed: tune in the data's dtype from now on; True when that is a change."""
        if not self.enabled or obj.X.dtype != np.float32:
            return False
        self.enabled = False
        return True
