"""What :func:`nyhopt.tune` returns: :class:`TuneResult`."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..params import Params

__all__ = ["TuneResult"]


class TuneResult(NamedTuple):
    r"""What :func:`nyhopt.tune` returns.

    Attributes
    ----------
    model : NystromKRR or NystromKRRClassifier
        Fitted with the best hyperparameters (regression: ``normalize_y=True``,
        so predictions are in the targets' units; ``fit_intercept=True`` when
        the objective has ``mean="constant"``, so ``model.intercept_`` is the
        tuned constant).  With ``standardize=True`` (the default) it keeps the
        input scaling (``input_mean_``, ``input_scale_``) and takes raw ``X``.
    params : Params
        The best hyperparameters (lowest objective value seen), in the
        standardized coordinates with ``standardize=True``: a center
        :math:`\tilde z` is ``input_mean_ + input_scale_ * z`` in the units of
        ``X``, a lengthscale ``input_scale_ * l`` (``docs/tuning.md``, "Inputs").
    history : History
        One :class:`TuneRecord` per evaluation (``history[0]`` is the
        initialization, ``history[k]`` the point after ``k`` Adam steps).
    objective : Objective
        The objective that was minimized (built on the encoded targets).
    best_epoch : int
        Epoch of ``params`` in the history.
    stop_reason : str
        ``"epochs"`` (all done), ``"patience"`` (early stopping),
        ``"callback"``, or ``"failed: <why>"`` (a step produced a non-finite
        objective or a failed factorization; the best point so far is kept).
    task : str
        ``"regression"`` or ``"classification"``.
    elapsed : float
        Wall-clock seconds of the whole call.
    candidates : tuple of Candidate
        With a list ``objective``: one record per candidate (name, validation
        error, best objective value, best epoch, epochs run, stop reason,
        params, history, elapsed), in the given order; ``()`` otherwise.
    validation_scores : dict or None
        Regression with validation rows (a fraction or ``(X_val, y_val)``;
        in-memory data): the final model's ``{"rmse", "nlpd", "coverage"}``
        on them, from ``predict(X_val, return_std=True)`` (:mod:`nyhopt.metrics`:
        the negative log predictive density and the 95% interval coverage);
        None otherwise.
    stages : tuple of Stage
        With ``time_budget``: one record per stage of the run, in order
        (centers, objective, first record in ``history``, epochs, seconds,
        best objective value, held-out error, stop reason, training rows;
        :class:`nyhopt.optim.budget.Stage`); ``()`` otherwise.
        ``tune(X, y, replay=result)`` runs them again, bit for bit
        (``docs/tuning.md``, "Replaying a budgeted run").
    final_rows : int
        With ``time_budget`` on row samples (``docs/tuning.md``, "Large
        data"): the training rows of the final fit; 0 otherwise.  Its
        centers, more than the stages tuned where that held-out error was
        lower, are those of ``params``.
    final_centers : int
        With ``time_budget`` where the final fit was chosen on the held-out
        rows (``docs/tuning.md``, "A time budget", point 5, and "Large data",
        point 3): the most centers that choice considered; 0 otherwise.
        The centers and penalty chosen are those of ``params``.
    transform : TransformChoice or None
        With ``time_budget`` on a regression table with skewed columns or a
        positive right-skewed target: the choice among standard scaling,
        the warp of the skewed features, ``log y`` and both (the skewed
        columns, the transforms tuned, their held-out RMSE, the one kept,
        its seconds; :mod:`nyhopt.optim.budget._features`,
        ``docs/tuning.md``, "Transforms").  The model keeps the warp as
        ``input_warp_`` and ``log y`` as ``target_transform_``.  None where
        no choice was made.

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = np.where(X[:, 0] > 0, "yes", "no")
    >>> res = nh.tune(X, y, centers=10, epochs=5, progress=False)
    >>> res.task, res.stop_reason, len(res.history), res.model.classes_.tolist()
    ('classification', 'epochs', 6, ['no', 'yes'])
    >>> res.params.penalty == res.history[res.best_epoch].penalty
    True
    """

    model: object
    params: Params
    history: History
    objective: object
    best_epoch: int
    stop_reason: str
    task: str
    elapsed: float
    candidates: tuple = ()
    validation_scores: object = None
    stages: tuple = ()
    final_rows: int = 0
    transform: object = None
    final_centers: int = 0

    def __repr__(self):
        """A short summary: the centers and long lengthscale vectors by their shape only."""
        p = self.params
        ell = np.asarray(p.lengthscale)
        ell_s = (np.array2string(ell, precision=4, separator=", ") if ell.size <= 4 else
                 f"<{ell.size} values, min {ell.min():.4g}, median {np.median(ell):.4g}, max {ell.max():.4g}>")
        name = getattr(self.objective, "name", type(self.objective).__name__)
        cands = f", candidates={[c.objective for c in self.candidates]}" if self.candidates else ""
        if self.stages:
            cands += f", stages={[s.centers for s in self.stages]}"
        return (f"TuneResult(task={self.task!r}, objective={name!r}, best_epoch={self.best_epoch}, "
                f"epochs_run={max(len(self.history) - 1, 0)}, stop_reason={self.stop_reason!r}, "
                f"elapsed={self.elapsed:.3g} s, penalty={p.penalty:.4g}, lengthscale={ell_s}, "
                f"centers=<array of shape {tuple(p.centers.shape)}>, model={type(self.model).__name__}{cands})")
