r"""The scores ``nyhopt score`` prints: errors, error bars, log loss and calibration (host NumPy arrays in).

Regression: RMSE, MAE and :math:`R^2` (as scikit-learn's ``r2_score``); with
the predictive standard deviations of new observations, the coverage of the
central 95% interval and the mean Gaussian negative log predictive density
(:mod:`nyhopt.metrics`).  Classification: the error rate, the log loss of
``predict_proba`` (natural logarithm, probabilities clipped at
:math:`10^{-15}` as scikit-learn does) and the expected calibration error over
:data:`BINS` equal-width bins,

.. math::
    \mathrm{ECE} = \sum_b \frac{n_b}{n}\,\big|\,\text{observed rate}_b -
    \text{mean probability}_b\big|,

of the probability of ``classes_[1]`` for two classes (as
docs/pipelines.md's table) and of the most probable class (its probability
against whether it is right) for more.  docs/cli.md shows the output.
"""
from __future__ import annotations

import numpy as np

__all__ = ["BINS", "regression_scores", "classification_scores", "calibration"]

#: Equal-width probability bins of the calibration summary.
BINS = 10
#: Probabilities are clipped to [EPS, 1] before the log loss.
EPS = 1e-15


def regression_scores(y, mean, std=None) -> dict:
    """RMSE, MAE and R2 of ``mean`` against ``y`` (float arrays (n,)); with ``std``, ``coverage_95`` and ``nlpd``.

    Examples
    --------
    >>> s = regression_scores(np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, 3.0]))
    >>> round(s["rmse"], 4), round(s["mae"], 4), s["r2"]
    (0.5774, 0.3333, 0.5)
    """
    from .. import metrics
    from ..metrics._r2 import r2_combine, r2_from_sums, r2_partials

    y, mean = np.asarray(y, dtype=np.float64), np.asarray(mean, dtype=np.float64)
    ss_res, ss_tot, _ = r2_combine([r2_partials(y.reshape(-1, 1), mean.reshape(-1, 1))])
    out = {"rmse": metrics.rmse(y, mean), "mae": float(np.mean(np.abs(y - mean))),
           "r2": r2_from_sums(ss_res, ss_tot)}
    if std is not None:
        out["coverage_95"] = metrics.coverage(y, mean, std, level=0.95)
        out["nlpd"] = metrics.nlpd(y, mean, std)
    return out


def calibration(probability, outcome, bins=BINS):
    """The expected calibration error of ``probability`` (n,) for the 0/1 ``outcome`` (n,), and its bins.

    Returns
    -------
    ece : float
    table : list of dict
        One per non-empty bin: ``lower``, ``upper``, ``rows``, ``mean_probability``, ``observed_rate``.

    Examples
    --------
    >>> ece, table = calibration(np.array([0.1, 0.1, 0.9, 0.9]), np.array([0, 1, 1, 1]))
    >>> round(ece, 3), [row["rows"] for row in table]
    (0.25, [2, 2])
    """
    probability, outcome = np.asarray(probability, dtype=np.float64), np.asarray(outcome, dtype=np.float64)
    index = np.minimum((probability * bins).astype(np.intp), bins - 1)
    ece, table = 0.0, []
    for b in range(bins):
        sel = index == b
        if not sel.any():
            continue
        p, rate = float(probability[sel].mean()), float(outcome[sel].mean())
        ece += float(sel.mean()) * abs(rate - p)
        table.append({"lower": b / bins, "upper": (b + 1) / bins, "rows": int(sel.sum()),
                      "mean_probability": p, "observed_rate": rate})
    return ece, table


def _label(classes, k):
    if classes is None:
        return f"class {k}"
    label = classes[k]
    return repr(label.item() if hasattr(label, "item") else label)


def classification_scores(y_index, predicted_index, proba=None, classes=None) -> dict:
    """Error rate of the class indices ``predicted_index`` against ``y_index``; log loss and ECE of ``proba``.

    Parameters
    ----------
    y_index, predicted_index : int arrays of shape (n,)
        Indices in ``classes``.
    proba : array of shape (n, k), optional
        Column ``j`` is the probability of class ``j``; None when the model
        gives none (the log loss and the ECE are then NaN).
    classes : sequence, optional
        The labels, to name what the calibration is of.

    Examples
    --------
    >>> proba = np.array([[0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    >>> s = classification_scores(np.array([0, 1, 1]), np.array([0, 1, 0]), proba, classes=["no", "yes"])
    >>> s["errors"], round(s["log_loss"], 4), s["calibration"]
    (1, 0.4987, "probability of 'yes'")
    """
    y_index, predicted_index = np.asarray(y_index), np.asarray(predicted_index)
    wrong = int(np.count_nonzero(y_index != predicted_index))
    out = {"error_rate": wrong / y_index.size, "errors": wrong, "log_loss": float("nan"), "ece": float("nan"),
           "calibration": None, "calibration_bins": []}
    if proba is None:
        return out
    proba = np.asarray(proba, dtype=np.float64)
    rows = np.arange(y_index.size)
    out["log_loss"] = float(-np.mean(np.log(np.clip(proba[rows, y_index], EPS, 1.0))))
    if proba.shape[1] == 2:
        probability, outcome = proba[:, 1], y_index == 1
        out["calibration"] = f"probability of {_label(classes, 1)}"
    else:
        top = np.argmax(proba, axis=1)
        probability, outcome = proba[rows, top], y_index == top
        out["calibration"] = "probability of the most probable class"
    out["ece"], out["calibration_bins"] = calibration(probability, outcome)
    return out
