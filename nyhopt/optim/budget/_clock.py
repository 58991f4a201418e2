r"""The clock of a budgeted tuning run, and the cost model that plans its stages.

:func:`nyhopt.tune` with ``time_budget=T`` must return within :math:`T`
seconds, the final fit included.  It plans with two measured costs per number
of centers :math:`m`: the seconds of one epoch and the seconds of one N-KRR
fit.  Both are :math:`O(n m^2)` for the exact objectives and the direct
solver; the model :class:`SizeCost` fits :math:`t(m) = c\, m^{a}` through the
two largest sizes measured (:math:`a` clipped to :math:`[1, 3]`; with one
size, :math:`a = 2`), which absorbs the overheads that make small sizes
cheaper than :math:`m^2` predicts.  See ``docs/tuning.md``, "A time budget".
"""
from __future__ import annotations

import math
import numbers
import time
from typing import NamedTuple

__all__ = ["CLOCK", "Budget", "SizeCost", "Stage", "check_time_budget"]

#: The clock a :class:`Budget` reads unless given one (tests replace it by a simulated clock).
CLOCK = time.perf_counter


def check_time_budget(value):
    """``time_budget`` checked: None, or a finite number of seconds > 0 (a float)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)) \
            or float(value) <= 0:
        raise ValueError(f"time_budget must be a finite number of seconds > 0, got {value!r}")
    return float(value)


class Stage(NamedTuple):
    """One stage of a budgeted run, in ``TuneResult.stages``.

    Attributes
    ----------
    centers : int
        Number of centers :math:`m` of the stage.
    objective : str
        The objective minimized in the stage.
    first_epoch : int
        Index in ``TuneResult.history`` of the stage's first record (its
        starting point, before any step of the stage).
    epochs : int
        Adam steps run in the stage.
    seconds : float
        Wall-clock seconds of the stage, its validation fit included.
    objective_value : float
        The stage's lowest objective value.
    validation_error : float
        Error on the held-out rows of the model fitted on the training rows
        with the stage's best hyperparameters (RMSE in the units of ``y``, or
        the error rate); NaN when the run held out no rows.
    stop_reason : str
        ``"patience"``, ``"epochs"``, ``"time"`` (its share of the budget
        was spent), ``"callback"`` or ``"failed: ..."``.
    rows : int
        Training rows the stage tuned on (0 where not recorded): all of
        them, or a sample on large data (``docs/tuning.md``, "Large data").

    Examples
    --------
    >>> s = Stage(200, "prop", 41, 35, 2.5, -0.61, 0.28, "patience")
    >>> s.centers, s.stop_reason
    (200, 'patience')
    """

    centers: int
    objective: str
    first_epoch: int
    epochs: int
    seconds: float
    objective_value: float
    validation_error: float
    stop_reason: str
    rows: int = 0


class Budget:
    """Seconds left of a time budget, read from one clock.

    Parameters
    ----------
    seconds : float
        The budget.
    clock : callable, optional
        Returns the time in seconds (default :data:`CLOCK`, read when the
        budget is made).

    Examples
    --------
    >>> ticks = iter([0.0, 4.0, 7.5])
    >>> b = Budget(10.0, clock=lambda: next(ticks))
    >>> b.elapsed(), b.left()
    (4.0, 2.5)
    """

    def __init__(self, seconds, clock=None):
        self.seconds = float(seconds)
        self.clock = CLOCK if clock is None else clock
        self.t0 = self.clock()

    def now(self) -> float:
        """Seconds since the budget started."""
        return self.clock() - self.t0

    elapsed = now

    def left(self) -> float:
        """Seconds left (negative once overspent)."""
        return self.seconds - self.now()


class SizeCost:
    r"""Measured seconds of one kind of work against the number of centers, and their projection.

    Examples
    --------
    >>> c = SizeCost()
    >>> c.add(100, 0.1); c.predict(200)          # one size: t ~ m^2
    0.4
    >>> c.add(200, 0.2); round(c.predict(400), 6)  # two sizes: the measured exponent (1 here)
    0.4
    >>> round(c.predict(400, exponent=2.0), 6)  # work known to be O(m^2), from the largest size
    0.8
    """

    def __init__(self):
        self.seen = {}

    def add(self, m, seconds):
        """Record ``seconds`` for ``m`` centers (the largest value seen for a size is kept)."""
        m = int(m)
        self.seen[m] = max(float(seconds), self.seen.get(m, 0.0))

    def predict(self, m, default=math.inf, min_exponent=1.0, exponent=None):
        """Projected seconds at ``m`` centers; ``default`` when nothing was measured.

        ``min_exponent`` floors the fitted exponent for sizes beyond the
        largest measured (2 plans a larger stage as :math:`O(nm^2)` work,
        whose overheads no longer hide the growth); ``exponent`` replaces it
        there (2 for work known to be :math:`O(nm^2)`, from the largest size
        measured alone).
        """
        if not self.seen:
            return default
        sizes = sorted(self.seen)
        m1 = sizes[-1]
        t1 = max(self.seen[m1], 1e-6)
        a = 2.0
        if len(sizes) >= 2:
            m0 = sizes[-2]
            t0 = max(self.seen[m0], 1e-6)
            a = min(max(math.log(t1 / t0) / math.log(m1 / m0), 1.0), 3.0)
        if m > m1:
            a = max(a, min_exponent) if exponent is None else exponent
        return t1 * (float(m) / m1) ** a
