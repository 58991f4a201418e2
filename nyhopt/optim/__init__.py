"""Hyperparameter optimization: Adam (pure functions) and the tuning loop.

* :mod:`nyhopt.optim.adam` -- ``init(params)`` and ``update(grads, state, params, ...)``;
* :func:`tune` -- the paper's procedure end to end, returning a :class:`TuneResult`
  with the fitted model, the best hyperparameters and a per-epoch :class:`History`.
"""
from . import adam
from ._history import History, TuneRecord
from .adam import AdamState
from .tune import TuneResult, tune

__all__ = ["adam", "AdamState", "tune", "TuneResult", "TuneRecord", "History"]
