r"""Replaying a budgeted run: ``tune(X, y, replay=result)``.

A budgeted run (:mod:`nyhopt.optim.budget._schedule`) takes a few decisions from the
clock: when a stage stops, the size of the next one, whether a growth of the
rows or a last stage fits, whether ``stoch-prop`` takes over, how many rows
the final fit gets and its centers.  Everything else (every draw, every step, the choice of
the final stage) follows from the data, the arguments and ``random_state``.
:class:`Replay` takes the clock's decisions from the stages of an earlier
result instead, so that the same call with ``replay=result`` runs the same
stages for the same epochs and returns the same hyperparameters and model,
bit for bit, on any machine and at any load (``docs/tuning.md``, "Replaying a
budgeted run").  A replay whose stages come out otherwise (other data or
arguments) raises.
"""
from __future__ import annotations

import functools
import math

from ._clock import Stage
from ._schedule import _Run, tune_budgeted
from .._setup import build_objective

__all__ = ["Replay", "replay_budgeted", "check_replay"]

#: The budget of a replay: its clock decides nothing.
_NO_LIMIT = 1e12


def check_replay(replay):
    """``(stages, final)`` from ``replay``: a ``TuneResult`` of a budgeted run, or its ``stages``.

    ``final``: the final fit's ``(centers, rows, considered)``: on row samples its widest centers (those
    its choice on held-out rows considered, else its own) and its rows, else 0, 0; the most centers that
    choice considered, else 0.
    """
    stages = getattr(replay, "stages", replay)
    try:
        stages = tuple(stages)
    except TypeError:
        stages = None
    if not stages or not all(isinstance(s, Stage) for s in stages):
        raise ValueError("replay must be the result of a tune(..., time_budget=) call, or its stages "
                         f"(a non-empty tuple of Stage), got {type(replay).__name__}")
    rows = int(getattr(replay, "final_rows", 0) or 0)
    params = getattr(replay, "params", None)
    considered = int(getattr(replay, "final_centers", 0) or 0)
    centers = (considered or int(params.n_centers)) if rows and params is not None else 0
    return stages, (centers, rows, considered)


class Replay(_Run):
    """A budgeted run whose clock decisions are those recorded in ``script`` (see the module notes)."""

    def __init__(self, a, parts, budget, script=(), final=(0, 0, 0)):
        super().__init__(a, parts, budget)
        self.script, self.recorded_final = tuple(script), tuple(final)

    def _next(self):
        """The recorded stage that the next stage of the run replays (None past the last)."""
        i = len(self.stages)
        return self.script[i] if i < len(self.script) else None

    def out_of_time(self, epoch, now, est, spent, allot, m, polish):
        rec = self._next()
        return rec is None or (rec.stop_reason == "time" and epoch >= rec.epochs)

    def plan(self, m):
        rec = self._next()
        return (rec.centers if rec is not None and rec.centers > m else m), False

    def fits(self, m):
        rec = self._next()
        return rec is not None and rec.centers == m

    def more_rows(self, m):
        rec = self._next()
        return rec.rows if rec is not None and rec.centers == m and rec.rows > self.n_tr else 0

    def goes_on(self, m):
        return self._next() is not None

    def polish_room(self, m):
        return math.inf if self._next() is not None else None

    def final_size(self, stage):
        centers, rows, _ = self.recorded_final
        return max(centers, stage.centers), rows or self.rows.n_train

    def refit_size(self, m):
        return max(self.recorded_final[2], m)

    def maybe_switch(self, name, obj, params, wrt):
        rec = self._next()
        if rec is None or rec.objective != "stoch-prop" or name != "prop":
            return None
        s = self.start
        cand = build_objective("stoch-prop", self.X_tr, self.enc, s.template, self.seed,
                               self.a["objective_options"] or {})
        for _ in range(2):  # the two timed steps of the recorded run (they warm-start its solver)
            cand.value_and_grad(params, wrt=wrt)
        return cand


def _key(stage):
    return stage.centers, stage.objective, stage.epochs, stage.rows


def replay_budgeted(a, parts, replay):
    """:func:`nyhopt.tune` with ``replay``: the budgeted run of ``a``'s arguments on ``replay``'s stages."""
    if a["time_budget"] is not None:
        raise ValueError("give replay= or time_budget=, not both (a replay takes its stages from the result)")
    script, final = check_replay(replay)
    a["time_budget"] = _NO_LIMIT
    result = tune_budgeted(a, parts, run_class=functools.partial(Replay, script=script, final=final))
    ran = tuple(_key(s) for s in result.stages)
    if ran != tuple(_key(s) for s in script):
        i = next((i for i, (x, y) in enumerate(zip(ran, script)) if x != _key(y)), min(len(ran), len(script)))
        raise ValueError(f"replay diverged at stage {i}: the data or the arguments differ from the recorded run's "
                         f"(ran {ran[i] if i < len(ran) else None}, recorded "
                         f"{_key(script[i]) if i < len(script) else None}; centers, objective, epochs, rows)")
    return result
