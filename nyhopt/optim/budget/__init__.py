r"""Tuning under a time budget: ``tune(X, y, time_budget=T)`` and ``tune(X, y, replay=result)``.

One concern, one module each (``docs/tuning.md``, "A time budget"):

* :mod:`._clock`: the budget's clock, the measured costs per number of
  centers and their projection, and :class:`Stage`, the record of a stage;
* :mod:`._schedule`: the run itself, stage by stage (stage 0, growing,
  the switch to ``stoch-prop``);
* :mod:`._finish`: the winning stage, the last stage on all the rows, the
  final model and the calibration of its error bars;
* :mod:`._precision`: the grown stages' epochs in float32 on the CPU;
* :mod:`._grow`: new centers (k-means++ seeds in the tuned metric) and
  Adam's state at the grown size;
* :mod:`._rows`: large data, the nested row samples grown with the centers
  and the final fit on the rows the time buys;
* :mod:`._choice`: how the held-out rows choose among the stages;
* :mod:`._replay`: a run again, its clock's decisions taken from a record.
"""
from ._clock import Budget, SizeCost, Stage, check_time_budget

__all__ = ["Budget", "SizeCost", "Stage", "check_time_budget"]
