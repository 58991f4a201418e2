r"""A tuning run that spends a time budget: ``tune(X, y, time_budget=T)``.

The run is a sequence of stages (:class:`~nyhopt.optim.budget.Stage`), each
the loop of :func:`nyhopt.tune` at a fixed number of centers :math:`m`:

1. **Hold out rows** to choose among the stages: ``min(10%, 5000)`` of the
   rows (at least 200 rows in all), unless ``validation`` is given; the final
   model is fitted on all the rows.
2. **Stage 0** at the starting centers (100 by default: today's default
   run, which may use the whole budget: a budget that buys the default run
   gets at least its result), for each candidate of a list ``objective``
   (``"auto"``: :data:`AUTO_OBJECTIVES`) in turn (sharing the budget); the
   candidate with the lowest held-out error goes on (with ``"auto"``,
   :data:`PREFERRED`, the others kept as fallbacks: :func:`_choose_candidate`;
   it grows from a fallback's best point when that one is clearly better:
   :func:`_with_fallback`).
3. **Grow** (:mod:`nyhopt.optim.budget._grow`, :meth:`_Run.plan`): keep the tuned
   :math:`\lambda, \ell`, amplitude, centers and Adam's state, add new
   centers by k-means++ seeding in the tuned metric, and run the next
   stage.  The size doubles while the time left would buy a last stage of
   :data:`FINAL_EPOCHS` epochs at four times :math:`m` (the doubled stage is
   intermediate: at most :data:`STAGE_EPOCHS` epochs or
   :data:`MID_FRACTION` of the time left); then it jumps to the largest size
   that buys that last stage.  Growing stops when :data:`GROW_PATIENCE`
   grown stages in a row did not lower the best held-out error by
   :data:`MIN_GAIN` (more centers are not always better, and a held-out
   error of a few hundred rows is noisy), when no larger stage's projected
   cost (:class:`~nyhopt.optim.budget.SizeCost`: at least
   :data:`MIN_EPOCHS` epochs, its validation fit and the final fit) fits in
   the time left, or at the largest size (all rows; for the exact
   objectives :math:`nm \le` :data:`MAX_NM`).
4. **Switch the objective** from ``prop`` to ``stoch-prop`` when growing to a
   size where one epoch of ``prop`` is projected to take over
   :data:`SWITCH_SECONDS`: two steps of ``stoch-prop`` are timed at the grown
   hyperparameters, and it takes over when its step is faster.  The tuned
   hyperparameters and Adam's state carry over (both minimize the same
   :math:`\mathcal L_{Prop}`).
5. **Finish**: the largest stage whose held-out losses are not clearly
   above the lowest error's (:func:`_largest_within_noise`; without
   held-out rows, the last stage) gives the model.  With at least
   :data:`._refit.MIN_HELD_OUT` rows held out by the run itself (regression in
   memory), the final fit's centers (up to a few times those tuned) and penalty are chosen on
   them (:mod:`._refit`; the stages leave time for it: :func:`._refit.refit_reserve`).
   Where that choice changes nothing, or with fewer held-out rows of its
   own, a last stage (:func:`._finish.polish`) tunes that stage's objective on
   all the rows from its best point, for the time left (at least
   :data:`POLISH_EPOCHS` epochs, else it is skipped; :mod:`._finish`); its held-out error is
   NaN.  Otherwise, a best stage that time cut short goes on.  All within
   the budget: every
   epoch is started only when its measured cost, the validation fit and
   the final fit (projected) still fit in the time left, less a margin of
   3% of the budget.
6. **Calibrate** (:func:`._finish.finish`): with at least
   :data:`._finish.CALIBRATE_MIN_ROWS` rows held out by the run itself, the final
   model's predictive variance is scaled so that its 95% intervals cover
   the held-out rows.
"""
from __future__ import annotations

import math
import numbers
import statistics

import numpy as np

from ...models._estimator_params import check_feature_names_arg
from ...backend import get_namespace
from ...placement import on_cluster
from ._clock import Budget, SizeCost, Stage, check_time_budget
from ._grow import add_centers, grow_state, next_size
from ._finish import finish, winning_stage
from ._precision import EpochRows, grown_in_float32
from ._refit import PATH_PASSES, path_applies, refit_applies, refit_reserve, widest
from ...solvers.direct import products_in
from .._init import as_generator
from .._setup import build_objective
from ._rows import (FINAL_SHARE, ROW_FACTOR, START_ROWS, RowPlan, check_full_data, final_size,
                    needs_rows, rescale_penalty)
from ._choice import (PREFERRED, PREFER_Z, choose_candidate as _choose_candidate,  # noqa: F401
                            clearly_better as _clearly_better, holdout_error as _holdout_error,
                            holdout_losses as _holdout_losses, largest_within_noise as _largest_within_noise,
                            variance_factor as _variance_factor, with_fallback as _with_fallback)
from .._tracking import choose_solver
from .._targets import encode_targets
from .._tune_args import check_arguments, check_switches

__all__ = ["tune_budgeted", "AUTO_OBJECTIVES", "MIN_EPOCHS", "MAX_NM", "SWITCH_SECONDS"]

#: Epochs a grown stage must be able to run for the growth to be started.
MIN_EPOCHS = 20
#: Largest n m of the exact objectives' n x m matrices when growing (1.2 GB in float64).
MAX_NM = 1.5e8
#: Largest number of centers the schedule grows to.
MAX_CENTERS = 20000
#: A projected epoch of ``prop`` this long (seconds) makes the run time ``stoch-prop`` against it.
SWITCH_SECONDS = 1.0
#: ``stoch-prop`` takes over when its measured step is below this times ``prop``'s projected epoch.
SWITCH_FACTOR = 1.0
#: Fraction of the time left that a stage may use when a larger one can follow.
SHARE = 0.5
#: Held-out rows: this fraction, at most HOLDOUT_MAX rows, when there are HOLDOUT_MIN_N rows or more.
HOLDOUT_FRACTION, HOLDOUT_MAX, HOLDOUT_MIN_N = 0.1, 5000, 200
#: A grown stage must lower the best held-out error by this fraction for growing to go on.
MIN_GAIN = 0.002
#: Where new centers come from (:func:`nyhopt.optim.budget._grow.add_centers`) and how Adam's state carries
#: over ("mean", "zero": :func:`nyhopt.optim.budget._grow.grow_state`; "reset": a new state).
GROW_FROM, ADAM_CARRY = "kmeans++", "zero"
#: Epochs the last stage on all the rows must be able to run for it to be started.
POLISH_EPOCHS = 5
#: Growing stops after this many grown stages in a row without that gain.
GROW_PATIENCE = 2
#: Epochs the last stage is planned for: the run grows straight to the largest size that buys them
#: once doubling twice would not fit.  Fewer epochs on more centers won at every setting measured
#: (60, 40, 25, 15); 25 leaves a margin for centers that need more steps (docs/tuning.md).
FINAL_EPOCHS = 25
#: An intermediate stage (one a larger stage is planned after) runs for at most the larger of this many
#: epochs at its projected cost and MID_FRACTION of the time left, before patience stops it.
STAGE_EPOCHS, MID_FRACTION = 40, 0.1
#: A jump to the largest affordable size is made only when it is at least this factor of the current.
MIN_FACTOR = 1.25
#: The candidates of ``objective="auto"`` (chosen at stage 0 by held-out error): the paper's
#: objective, and SGPR with its constant mean and amplitude, far better on some sets
#: (docs/results/accuracy-at-scale.md).
AUTO_OBJECTIVES = ("prop", "sgpr")
#: The options of ``prop`` that ``stoch-prop`` takes too (others keep ``prop``).
_SHARED_OPTIONS = {"mean", "noise_variance", "normalization", "random_state"}


def _schedule(centers):
    """``(start, sizes)``: the starting centers for :func:`tune`'s setup, and a fixed tuple of sizes or None."""
    if isinstance(centers, str):
        if centers != "auto":
            raise ValueError(f"centers must be an int, 'auto', a tuple of sizes or an array, got {centers!r}")
        return 100, None
    if isinstance(centers, tuple) and centers and all(
            isinstance(c, numbers.Integral) and not isinstance(c, bool) for c in centers):
        if any(c < 1 for c in centers):
            raise ValueError(f"centers={centers!r}: a schedule is a tuple of sizes >= 1")
        if any(b <= a for a, b in zip(centers, centers[1:])):
            raise ValueError(f"centers={centers!r}: the sizes of a schedule must increase")
        return int(centers[0]), tuple(int(c) for c in centers)
    return centers, None


def _objective_names(objective, can_choose):
    """The candidate objectives: ``"auto"`` is :data:`AUTO_OBJECTIVES` where rows can choose, else ``prop``."""
    if isinstance(objective, str):
        if objective == "auto":
            return list(AUTO_OBJECTIVES) if can_choose else ["prop"]
        return [objective]
    names = list(objective)
    if not names or not all(isinstance(s, str) for s in names):
        raise ValueError(f"objective must be a name or a non-empty list of names, got {objective!r}")
    return names


class _Run:
    """The state of one budgeted run (one instance per call)."""

    def __init__(self, a, parts, budget):
        self.a, self.parts, self.budget = a, parts, budget
        self.epoch_cost, self.fit_cost = SizeCost(), SizeCost()
        self.records, self.stages, self.results, self.losses = [], [], [], []
        self.t_offset = 0.0
        self.margin = 0.03 * budget.seconds + 0.05
        self.rows = None  # a RowPlan when the run tunes on samples of the rows (nyhopt.optim.budget._rows)
        self.epoch_rows = EpochRows(False)  # the grown stages' rows, float32 on the CPU (._precision)
        self.growing = None  # the objective that grows

    # -- the rows (a run on samples of the rows: nyhopt.optim.budget._rows) -------------------------------
    def rows_for(self, m):
        """Rows a stage at ``m`` centers tunes on (the current ones, unless the run samples rows)."""
        return self.n_tr if self.rows is None else self.rows.rows_for(m, self.n_tr)

    def use_rows(self, k):
        """Tune on the first ``k`` training rows of the run's :class:`~nyhopt.optim.budget._rows.RowPlan` from now on."""
        s = self.start
        X, y = self.rows.gather(self.full[0], self.full[1], self.rows.sample(k), self.client)
        xp = get_namespace(X)
        self.X_tr, self.y_tr = X, y
        self.enc = encode_targets(y, s.task, X.shape[0], xp, s.dtype)
        self.n_tr = X.shape[0]
        self.n_all = self.n_tr + s.X_val.shape[0]

    def objective(self, name, m):
        """A new objective ``name`` on the tuning rows for a stage at ``m`` centers (its dtype: :mod:`._precision`)."""
        return build_objective(name, self.epoch_rows(self.X_tr, m, name), self.enc, self.start.template, self.seed,
                               self.a["objective_options"])

    # -- costs (measured per tuning row: an epoch and a fit are O(n) in the rows) -------------------
    def per_row(self, m):
        """The factor from costs measured at :attr:`n_ref` rows to a stage at ``m`` centers."""
        return 1.0 if self.rows is None else self.rows_for(m) / self.n_ref

    def epoch_seconds(self, m):
        """Projected seconds of one epoch at ``m`` centers (:math:`O(m^2)` at least beyond those measured)."""
        precision = self.epoch_rows.factor(self.rows_for(m), m, self.growing)
        return self.epoch_cost.predict(m, default=0.0, min_exponent=2.0) * self.per_row(m) * precision

    def fit_seconds(self, m):
        cost = self.fit_cost.predict(m, default=self.epoch_cost.predict(m, default=0.0, min_exponent=2.0),
                                     min_exponent=2.0)
        return cost * self.per_row(m)

    def epoch_here(self, m):
        """Projected seconds of one epoch at ``m`` centers on the current rows (the measured exponent)."""
        per_row = 1.0 if self.rows is None else self.n_tr / self.n_ref
        return self.epoch_cost.predict(m, default=0.0) * per_row * self.epoch_rows.factor(self.n_tr, m, self.growing)

    def add_cost(self, which, m, seconds, obj=None):
        """Record a measured cost at ``m`` centers on the current rows (an epoch of ``obj``: in float64 time)."""
        seconds = seconds if obj is None else self.epoch_rows.in_float64(obj, seconds)
        which.add(m, seconds if self.rows is None else seconds * self.n_ref / self.n_tr)

    def reserve(self, m, polish=False):
        """Seconds to keep for the work after a stage at ``m`` centers: its validation fit and the final fit."""
        f = self.fit_seconds(m)
        if polish:
            return 1.25 * f * self.n_all / self.n_tr
        if self.internal and self.rows is None:
            if refit_applies(self):  # the final fit chosen on the held-out rows (._refit)
                return 1.25 * f + refit_reserve(self, m)
            return 1.25 * f * (1.0 + self.n_all / self.n_tr)
        return 1.25 * f

    @property
    def kept(self):
        """Seconds kept for the final fit: :data:`~nyhopt.optim.budget._rows.FINAL_SHARE` of the budget on row samples."""
        return 0.0 if self.rows is None else FINAL_SHARE * self.budget.seconds

    def usable(self, final=False):
        """Seconds left for the stages (``final``: for the final fit, which has the kept share too)."""
        return self.budget.left() - self.margin - (0.0 if final else self.kept)

    # -- one stage ----------------------------------------------------------------------------
    def stage(self, name, obj, wrt, mask, profile, params, state, allot, polish=False):
        """Run the loop at ``params``' centers for at most ``allot`` seconds; evaluate and record it.

        ``polish``: the last stage, on all the rows (no tracker, no validation fit).
        """
        a, b = self.a, self.budget
        m = int(params.n_centers)
        t0 = b.now()
        times, last, why = [], [None], [None]
        user = a["callback"]
        offset = len(self.records)

        def guard(epoch, record):
            now = b.now()
            if last[0] is not None:
                times.append(now - last[0])
            last[0] = now
            if user is not None and user(offset + epoch, record._replace(epoch=offset + epoch)):
                return True
            est = max(times[-3:]) if times else self.epoch_here(m)
            if self.out_of_time(epoch, now, est, now - t0, allot, m, polish):
                why[0] = "time"
                return True
            return False

        def status():
            best = min((st.validation_error for st in self.stages if not math.isnan(st.validation_error)),
                       default=math.nan)
            held = "" if math.isnan(best) else f", held-out {best:.4g}"
            return (f"stage {len(self.stages)} {name}: {self.n_tr} rows, {m} centers{held}, "
                    f"{max(b.left(), 0.0):.0f}s left")

        try:
            loop = self.parts.loop(
                obj, params, wrt, mask, profile, None if polish else self.start.tracker,
                self.start.X_val is not None and not polish,
                epochs=a["epochs"], lr=a["lr"], b1=a["b1"], b2=a["b2"], eps=a["eps"], patience=a["patience"],
                min_delta=a["min_delta"], rel_delta=a["rel_delta"], callback=guard, record_terms=a["record_terms"],
                progress=a["progress"], checkpoint=None, signature=None, state=state, status=status)
        except np.linalg.LinAlgError:  # its first epoch failed (many centers, float32 products): again in float64
            if polish or not self.epoch_rows.fall_back(obj):
                raise
            again = self.parts.objective_stage(self.objective(name, m), self.freeze, self.start.tracker)
            return self.stage(name, *again, params, state, allot - (b.now() - t0))
        if times:
            self.add_cost(self.epoch_cost, m, statistics.median(times), obj)
        reason = "time" if (loop.stop_reason == "callback" and why[0] == "time") else loop.stop_reason
        model, err, losses = None, math.nan, None
        if self.start.X_val is not None and not polish:
            t_fit = b.now()
            model = self.fit(obj, loop.best_params, self.X_tr, self.y_tr)
            self.add_cost(self.fit_cost, m, b.now() - t_fit)
            losses = _holdout_losses(model, self.start.task, self.start.X_val, self.start.y_val)
            err = _holdout_error(losses, self.start.task)
        for r in loop.history:
            self.records.append(r._replace(epoch=offset + r.epoch, time=self.t_offset + r.time))
        if len(loop.history):
            self.t_offset += loop.history[-1].time
        best = loop.history[loop.best_epoch].objective if len(loop.history) else math.nan
        self.stages.append(Stage(m, name, offset, max(len(loop.history) - 1, 0), b.now() - t0, best, err, reason,
                                 self.n_all if polish else self.n_tr))
        self.results.append((loop, obj, model, offset, (wrt, mask, profile)))
        self.losses.append(losses)
        if reason.startswith("failed") and not polish and self.epoch_rows.fall_back(obj):  # again in float64
            again = self.parts.objective_stage(self.objective(name, m), self.freeze, self.start.tracker)
            return self.stage(name, *again, loop.best_params, None, allot - (b.now() - t0))
        return loop, reason, err

    def fit(self, obj, params, X, y, client=None, products=None):
        """The model at ``params`` on ``(X, y)``; ``products``: the direct solver's (:func:`~nyhopt.solvers.direct.products_in`).

        ``solver="auto"`` is the direct solver in memory (at any :math:`nm^2`: the budget costs it), Falkon on a
        cluster.
        """
        p = self.parts
        s = self.start
        solver = self.a["solver"]
        if on_cluster(X):
            solver = "falkon"
        elif solver == "auto":
            solver = "direct"  # one pass over the rows, also the variance model's; Falkon's iterations cost more
        solver = choose_solver(solver, X.shape[0], params.n_centers)
        with products_in(products):
            return p.final_model(s.task, s.template, params, X, y, s.dtype, solver, client,
                                 fit_intercept=getattr(obj, "mean", "zero") == "constant",
                                 amplitude=params.amplitude if obj.uses_amplitude else None)

    # -- the decisions that read the clock (a replay takes them from a record: nyhopt.optim.budget._replay) ---
    def out_of_time(self, epoch, now, est, spent, allot, m, polish):
        """Whether a stage at ``m`` centers stops before its next epoch of ``est`` seconds (``spent`` so far)."""
        end = self.budget.seconds - self.margin - self.kept
        return now + est + self.reserve(m, polish) > end or spent + est > allot

    def fits(self, m):
        """Whether a stage at ``m`` centers of :data:`MIN_EPOCHS` epochs fits in the time left (a given schedule)."""
        return self.usable() >= self.stage_cost(m, MIN_EPOCHS)

    def more_rows(self, m):
        """Rows for a stage at ``m`` centers on :data:`~nyhopt.optim.budget._rows.ROW_FACTOR` times the rows, or 0.

        0 when all the training rows are in use or the time left does not buy
        :data:`MIN_EPOCHS` epochs of it (an epoch and a fit are :math:`O(n)`).
        """
        rows = min(self.rows.n_train, ROW_FACTOR * self.n_tr)
        if rows <= self.n_tr:
            return 0
        grown = rows / self.n_tr
        return rows if self.usable() >= grown * (MIN_EPOCHS * self.epoch_here(m) + self.reserve(m)) else 0

    def goes_on(self, m):
        """Whether the best stage, cut short by time at ``m`` centers, goes on (three epochs fit)."""
        return self.usable() - self.reserve(m) >= 3.0 * self.epoch_here(m)

    def polish_room(self, m):
        """Seconds for the last stage on all the rows at ``m`` centers, or None when its epochs do not fit."""
        est = self.epoch_cost.predict(m, default=0.0) * self.n_all / self.n_tr
        room = self.usable() - self.reserve(m, polish=True)
        return None if room < POLISH_EPOCHS * est or room <= 0 else room

    def final_size(self, stage):
        """``(centers, rows)`` of the final fit after ``stage`` (a run on row samples): what the time left buys."""
        passes = PATH_PASSES if path_applies(self) else 1.0

        def seconds(m, rows):  # a fit on rows >= 12 m is O(n m^2): the Gram matrix of its rows
            f64 = self.fit_cost.predict(m, default=0.0, exponent=2.0) * rows / self.n_ref
            return f64 * (passes * self.epoch_rows.fit_factor(rows, m) if m > stage.centers else 1.0)

        return final_size(self.rows, seconds, stage.centers, stage.rows, self.usable(final=True))

    def refit_size(self, m):
        """The most centers the final fit chosen on held-out rows considers after a stage at ``m`` (:mod:`._refit`)."""
        return widest(self, m)

    # -- the schedule -------------------------------------------------------------------------
    def allot(self, m, can_grow, intermediate=False):
        """Seconds a stage at ``m`` centers may run; ``intermediate``: a larger stage is planned after it."""
        room = self.usable() - self.reserve(m)
        if not can_grow:
            return room
        if intermediate:
            cap = max(STAGE_EPOCHS * self.epoch_seconds(m), MID_FRACTION * room)
            return min(SHARE * room, cap)
        after = next_size(next_size(m, self.n_tr, max_size=self.max_size), self.n_tr, max_size=self.max_size)
        need = self.epoch_seconds(after) * MIN_EPOCHS + self.reserve(after)
        return SHARE * room if room * (1.0 - SHARE) >= need else room

    def stage_cost(self, m, epochs):
        """Projected seconds of a stage of ``epochs`` epochs at ``m`` centers and the fits after it."""
        return epochs * self.epoch_seconds(m) + self.reserve(m)

    def largest_size(self, m, epochs):
        """The largest size up to :attr:`max_size` whose stage of ``epochs`` epochs fits in the time left (>= ``m``)."""
        lo, hi = m, min(self.n_tr, self.max_size)
        room = self.usable()
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.stage_cost(mid, epochs) <= room:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def plan(self, m):
        """``(size, intermediate)``: the next stage after one at ``m`` centers (``size == m``: none).

        Doubling while the time left buys a last stage of :data:`FINAL_EPOCHS`
        epochs at four times ``m`` (the doubled stage is then intermediate);
        else straight to the largest size that buys it; else doubling if
        :data:`MIN_EPOCHS` epochs fit.
        """
        double = next_size(m, self.n_tr, max_size=self.max_size)
        if double <= m:
            return m, False
        last = self.largest_size(m, FINAL_EPOCHS)
        if last >= 2 * double:
            return double, True
        if last >= MIN_FACTOR * m:
            return last, False
        return (double, False) if self.usable() >= self.stage_cost(double, MIN_EPOCHS) else (m, False)

    def max_size_for(self, name):
        exact = name != "stoch-prop"
        return int(min(MAX_CENTERS, MAX_NM / self.n_tr)) if exact else MAX_CENTERS

    def maybe_switch(self, name, obj, params, wrt):
        """``stoch-prop`` instead of ``prop`` at ``params``' size when it is measured faster (module notes)."""
        a = self.a
        options = a["objective_options"] or {}
        if name != "prop" or self.start.task != "regression" or not set(options) <= _SHARED_OPTIONS:
            return None
        projected = self.epoch_here(params.n_centers)
        if projected < SWITCH_SECONDS or 3.0 * projected > 0.1 * self.usable():
            return None
        cand = build_objective("stoch-prop", self.X_tr, self.enc, self.start.template, self.seed, options)
        b = self.budget
        cand.value_and_grad(params, wrt=wrt)  # setup and compilation
        t0 = b.now()
        cand.value_and_grad(params, wrt=wrt)
        stochastic = b.now() - t0
        if stochastic >= SWITCH_FACTOR * projected:
            return None
        t0 = b.now()  # the projection from smaller sizes can be far off: time prop's step itself
        obj.value_and_grad(params, wrt=wrt)
        exact = b.now() - t0
        self.add_cost(self.epoch_cost, int(params.n_centers), exact, obj)
        return cand if stochastic < SWITCH_FACTOR * exact else None


def _grow_rows(run, params, rows, name, tuned_on=None):
    """``(params, objective)`` on the first ``rows`` training rows; the penalty keeps n lambda (nyhopt.optim.budget._rows)."""
    n_old = run.n_tr if tuned_on is None else tuned_on
    run.use_rows(rows)
    return rescale_penalty(params, n_old, run.n_tr), run.objective(name, params.n_centers)


def tune_budgeted(a, parts, run_class=None):
    """:func:`nyhopt.tune` with ``time_budget``: ``a`` holds its arguments by name, ``parts`` its stages.

    ``run_class``: a subclass of :class:`_Run` that takes the decisions that
    read the clock from elsewhere (:mod:`nyhopt.optim.budget._replay`).
    """
    budget = Budget(check_time_budget(a["time_budget"]))
    X, y = a["X"], a["y"]
    if a["checkpoint"] is not None:
        raise ValueError("time_budget cannot be combined with checkpoint (a budgeted run is not resumable)")
    validation = a["validation"]
    if on_cluster(X, y) and validation is not None:
        raise ValueError("time_budget on dask arrays holds out rows itself: leave validation out")
    a["epochs"], a["patience"], a["min_delta"], a["rel_delta"], freeze, dtype = check_arguments(
        validation, a["epochs"], a["patience"], a["min_delta"], a["rel_delta"], a["lr"], a["b1"], a["b2"],
        a["eps"], a["freeze"], a["dtype"], a["callback"], a["kernel"], a["objective_options"])
    check_switches(a["ard"], a["progress"], a["record_terms"], a["track_errors"])
    feature_names = check_feature_names_arg(a["feature_names"], X)
    start_centers, sizes = _schedule(a["centers"])
    rng = as_generator(a["random_state"])
    n = X.shape[0]
    internal = validation is None and n >= HOLDOUT_MIN_N
    track = a["track_errors"]
    full = plan = None
    if on_cluster(X, y):
        full = check_full_data(X, y, dtype)  # what can be known of dask arrays without computing them
    if internal:
        validation = min(HOLDOUT_FRACTION, HOLDOUT_MAX / n)
        track = bool(track)
        n_val = int(round(validation * n))
        if needs_rows(X, n - n_val):  # tune on samples of the rows (nyhopt.optim.budget._rows)
            full = full or check_full_data(X, y, dtype)
            plan = RowPlan(n, n_val, rng)
            validation = plan.gather(*full, plan.held_out(), a["client"])
            X, y = plan.gather(*full, plan.sample(START_ROWS), a["client"])
            n = X.shape[0]
    elif on_cluster(X, y):
        raise ValueError(f"time_budget on dask arrays needs at least {HOLDOUT_MIN_N} rows (it holds some out)")
    names = _objective_names(a["objective"], validation is not None and not a["objective_options"])
    if len(names) > 1 and validation is None:
        raise ValueError(f"objective lists candidates to choose by held-out error, but X has only {n} rows "
                         f"(a budgeted run holds out rows from {HOLDOUT_MIN_N}): give validation=")
    if isinstance(start_centers, numbers.Integral) and start_centers > n:
        start_centers = n
    run = (run_class or _Run)(a, parts, budget)
    run.start = start = parts.start(
        X, y, objective=names[0], centers=start_centers, penalty=a["penalty"], lengthscale=a["lengthscale"],
        kernel=a["kernel"], ard=a["ard"], rng=rng, validation=validation, task=a["task"], dtype=dtype,
        solver=a["solver"], objective_options=a["objective_options"], track_errors=track,
        client=None if plan is not None else a["client"])
    run.internal = internal
    run.X_tr, run.y_tr, run.enc = start.X, start.y, start.enc
    run.n_tr = start.X.shape[0]
    run.epoch_rows = EpochRows(grown_in_float32(dtype, start.X))
    run.freeze = freeze
    run.n_all = run.n_tr + (start.X_val.shape[0] if internal else 0)
    run.seed = int(rng.integers(0, 2**31 - 1))
    if plan is not None:
        if on_cluster(*full) and start.task != "regression":
            raise ValueError("tune on dask arrays does regression only: pass task='regression' "
                             "(classification on dask arrays is not built yet)")
        run.rows, run.full, run.client, run.n_ref = plan, full, a["client"], run.n_tr
    run.max_size = run.max_size_for(names[0])

    # stage 0: every candidate objective from the same start
    candidates = []
    for k, name in enumerate(names):
        obj0 = start.obj if k == 0 else build_objective(name, start.X, start.enc, start.template, run.seed,
                                                        a["objective_options"])
        obj, wrt, mask, profile = parts.objective_stage(obj0, freeze, start.tracker)
        share = run.allot(int(start.params.n_centers), False) / (len(names) - k)  # stage 0 as without a budget
        loop, reason, err = run.stage(name, obj, wrt, mask, profile, start.params, None, share)
        candidates.append((name, obj, wrt, mask, profile, loop, reason))
    best_i, fallbacks = _choose_candidate(run, names, a["objective"] == "auto")
    grown = best_i
    best_err = run.stages[best_i].validation_error
    name, obj, wrt, mask, profile, loop, reason = candidates[best_i]
    source = candidates[_with_fallback(run, best_i, fallbacks)][5]  # the point the first growth starts from
    run.max_size, run.growing = run.max_size_for(name), name
    step, fails, rows_pay = 1, 0, True
    while True:
        m = int(source.best_params.n_centers)
        if sizes is not None:
            m_next, intermediate = (sizes[step] if step < len(sizes) else m), False
            fits = run.fits(m_next)
        else:
            m_next, intermediate = run.plan(m)
            fits = True
        gained = fails < GROW_PATIENCE
        if m_next > m and gained and not reason.startswith("failed") and reason != "callback" and fits:
            kept = source.best_params
            Z = add_centers(run.X_tr, kept.centers, kept.lengthscale, m_next - m, rng, how=GROW_FROM)
            params = kept.replace(centers=Z)
            if run.rows_for(m_next) > run.n_tr:  # the rows grow with the centers
                params, obj = _grow_rows(run, params, run.rows_for(m_next), name)
                obj, wrt, mask, profile = parts.objective_stage(obj, freeze, start.tracker)
            elif not run.epoch_rows.holds(obj, m_next):  # on to float32 rows, or back (._precision)
                obj, wrt, mask, profile = parts.objective_stage(run.objective(name, m_next), freeze, start.tracker)
            fresh = ADAM_CARRY == "reset" or source is not loop  # another objective's moments do not carry
            state = None if fresh else grow_state(loop.state, m_next, fill=ADAM_CARRY)
            if hasattr(obj, "reset"):  # a warm start of the old size (stoch-prop's CG variable)
                obj.reset()
            switched = run.maybe_switch(name, obj, params, wrt)
            if switched is not None:
                name = "stoch-prop"
                obj, wrt, mask, profile = parts.objective_stage(switched, freeze, start.tracker)
                run.max_size, run.growing = run.max_size_for(name), name
            prev_best = best_err
            can_grow = sizes is None or step + 1 < len(sizes)
            loop, reason, err = run.stage(name, obj, wrt, mask, profile, params, state,
                                          run.allot(m_next, can_grow, intermediate))
            source = loop
            step += 1
            if not math.isnan(err):
                fails = 0 if err < prev_best * (1.0 - MIN_GAIN) else fails + 1
            if not math.isnan(err) and err < best_err:
                best_i, best_err = len(run.stages) - 1, err
            continue
        k = best_i if best_i is not None and not math.isnan(best_err) else len(run.stages) - 1
        loop, obj, _, _, (wrt, mask, profile) = run.results[k]
        name, reason, m = run.stages[k].objective, run.stages[k].stop_reason, run.stages[k].centers
        more = run.more_rows(m) if run.rows is not None and rows_pay and not math.isnan(best_err) else 0
        if more:  # the centers stopped growing: grow the rows alone, from the best stage
            params, obj = _grow_rows(run, loop.best_params, more, name, tuned_on=run.stages[k].rows)
            obj, wrt, mask, profile = parts.objective_stage(obj, freeze, start.tracker)
            prev_best = best_err
            loop, reason, err = run.stage(name, obj, wrt, mask, profile, params, None, run.usable() - run.reserve(m))
            source = loop
            rows_pay = not math.isnan(err) and err < prev_best * (1.0 - MIN_GAIN)
            fails = 0 if rows_pay else fails
            if not math.isnan(err) and err < best_err:
                best_i, best_err = len(run.stages) - 1, err
            continue
        go_on = reason == "time" and (not internal or run.rows is not None and run.stages[k].rows == run.n_tr)
        if go_on and run.goes_on(m):  # go on with it
            loop, reason, err = run.stage(name, obj, wrt, mask, profile, loop.last_params, loop.state,
                                          run.usable() - run.reserve(m))
            source = loop
            if not math.isnan(err) and err < best_err:
                best_i, best_err = len(run.stages) - 1, err
            if reason == "time":
                break
            continue
        break
    k = winning_stage(run, best_i, best_err, grown, len(names), fallbacks)
    return finish(run, k, freeze, feature_names)
