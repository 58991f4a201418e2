"""Per-epoch records of a tuning run, and column access to them."""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = ["TuneRecord", "History"]


class TuneRecord(NamedTuple):
    """The state of a tuning run after ``epoch`` Adam steps.

    Attributes
    ----------
    epoch : int
        Number of Adam steps taken before this evaluation (0 = initialization).
    objective : float
        Objective value at these hyperparameters.
    terms : dict[str, float]
        The objective's named parts (their sum is ``objective``); empty when
        terms were not recorded.
    penalty : float
        :math:`\\lambda`.
    lengthscale : numpy.ndarray, shape (1,) or (d,)
        :math:`\\ell`, in the coordinates the objective saw (standardized
        inputs when ``standardize=True``).
    train_error, validation_error : float
        Error of the N-KRR model fitted with these hyperparameters on the
        training / validation data (RMSE in the target's units for regression,
        error rate for classification); NaN when not tracked (tracking
        every k-th epoch, the default where it costs a solve of its own:
        ``docs/tuning.md``, "Tracking the errors").
    time : float
        Seconds spent in the optimization (objective, gradient, update) up to
        this evaluation, error tracking excluded.
    amplitude : float, default 1.0
        Kernel amplitude :math:`a` (signal variance); stays 1 for the
        objectives that ignore it.
    validation_nlpd, validation_coverage : float, default NaN
        Regression with validation rows and the direct solver (or an exact
        objective, whose own fit is read), on the tracked epochs: the negative
        log predictive density and the 95% interval coverage of the same
        model's error bars on the validation rows (:mod:`nyhopt.metrics`;
        ``docs/uncertainty.md``); NaN otherwise.
    """

    epoch: int
    objective: float
    terms: dict
    penalty: float
    lengthscale: np.ndarray
    train_error: float
    validation_error: float
    time: float
    amplitude: float = 1.0
    validation_nlpd: float = float("nan")
    validation_coverage: float = float("nan")


class History(Sequence):
    """The records of a tuning run, one per evaluation, in order.

    Index it like a list (``history[-1]`` is a :class:`TuneRecord`) or read a
    whole column as an array: ``history.objective``, ``history.penalty``,
    ``history.lengthscale`` (shape (epochs, 1 or d)), ``history.train_error``,
    ``history.validation_error``, ``history.time``, ``history.epoch``,
    ``history.amplitude``, ``history.validation_nlpd``, ``history.validation_coverage``;
    ``history.term(name)`` gives one term of the objective.

    Examples
    --------
    >>> import numpy as np
    >>> h = History([TuneRecord(0, 2.0, {"a": 2.0}, 0.1, np.ones(1), np.nan, np.nan, 0.0),
    ...              TuneRecord(1, 1.5, {"a": 1.5}, 0.2, np.ones(1), np.nan, np.nan, 0.1)])
    >>> len(h), h.objective.tolist(), h.term("a").tolist()
    (2, [2.0, 1.5], [2.0, 1.5])
    """

    def __init__(self, records=()):
        self._records = list(records)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return History(self._records[i])
        return self._records[i]

    def __len__(self):
        return len(self._records)

    def append(self, record: TuneRecord) -> None:
        """Add a record (used by the tuning loop)."""
        self._records.append(record)

    def replace(self, i: int, record: TuneRecord) -> None:
        """Put ``record`` in place of record ``i`` (used by the tuning loop: a best epoch's errors tracked late)."""
        self._records[i] = record

    def __getattr__(self, name):
        if name in TuneRecord._fields and name != "terms":
            values = [getattr(r, name) for r in self._records]
            if name == "lengthscale":
                return np.array([np.asarray(v, dtype=np.float64) for v in values]) if values else np.empty((0, 1))
            return np.asarray(values, dtype=np.int64 if name == "epoch" else np.float64)
        if name == "terms":
            return [dict(r.terms) for r in self._records]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def term(self, name: str) -> np.ndarray:
        """One named term of the objective, per record (NaN where missing)."""
        return np.array([r.terms.get(name, np.nan) for r in self._records], dtype=np.float64)

    def as_dict(self) -> dict:
        """Columns as plain lists (JSON friendly): epoch, objective, terms, ..."""
        out = {name: getattr(self, name).tolist() for name in TuneRecord._fields if name != "terms"}
        names = sorted({k for r in self._records for k in r.terms})
        out["terms"] = {k: self.term(k).tolist() for k in names}
        return out

    def __repr__(self):
        if not self._records:
            return "History([])"
        last = self._records[-1]
        return f"History({len(self)} records, last epoch {last.epoch}, objective {last.objective:.6g})"
