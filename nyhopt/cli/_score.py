"""``nyhopt score``: the errors of a saved model on the rows of a table that holds their targets.

The table is read as ``nyhopt predict`` reads it (the model's feature columns
by name, other columns ignored), the target column as ``nyhopt tune`` reads
it.  The scores are :mod:`nyhopt.cli._scores`'s; docs/cli.md shows the output.
"""
from __future__ import annotations

import json
import warnings

import numpy as np

from ..backend._compile_notice import compile_notice
from ._columns import feature_matrix, model_columns
from ._common import CLIError, clean_floats, json_default, target_values
from ._device import array_module, model_to, to_host
from ._predict import check_std, predict_on
from ._scores import BINS, classification_scores, regression_scores


def cmd_score(args) -> int:
    from ..io import DataError, column_index, load_model, read_csv

    xp = array_module(args.device)
    model = load_model(args.model)
    table = read_csv(args.data, delimiter=args.delimiter)
    meta = getattr(model, "meta_", {})
    target = args.target if args.target is not None else meta.get("target_name")
    if target is None or str(target) == "":
        raise CLIError(f"{args.model} names no target column: give --target")
    j = column_index(table, str(target))
    cols = model_columns(model, table, exclude=(j,))
    if j in cols:
        raise DataError(f"the target column {table.names[j]!r} is one of the model's features")
    classes = getattr(model, "classes_", None)
    if args.std:
        check_std(model, args.model)
    X = feature_matrix(table, cols, dtype=np.float64)
    model = model_to(model, xp)
    summary = {"model": args.model, "data": table.path, "rows": X.shape[0], "target": table.names[j],
               "task": "regression" if classes is None else "classification"}
    if classes is None:
        y = target_values(table, j, "regression", text_hint="the model is a regression model")
        if args.std:
            mean, std = predict_on(model, xp.asarray(X), xp, return_std=True)
        else:
            mean, std = predict_on(model, xp.asarray(X), xp), None
        if mean.ndim == 2:
            raise CLIError(f"{args.model} predicts {mean.shape[1]} outputs; nyhopt score scores a model with one")
        summary.update(regression_scores(y, mean, std))
    else:
        classes = np.asarray(classes)
        y_index = class_indices(target_values(table, j, "classification"), classes, table, j)
        predicted = predict_on(model, xp.asarray(X), xp)
        proba, why = probabilities(model, xp.asarray(X), xp)
        summary["classes"] = classes.tolist()
        summary.update(classification_scores(y_index, class_indices(predicted, classes), proba, classes))
        if why:
            summary["no_probabilities"] = why
    if args.json:
        print(json.dumps(clean_floats(summary), default=json_default))
    else:
        print("\n".join(text_lines(summary)))
    return 0


def class_indices(labels, classes, table=None, j=None):
    """The index in ``classes`` of each label; labels the model does not know are refused, by name."""
    from ..io import DataError

    labels = np.asarray(labels)
    if classes.dtype.kind in "USO":
        labels = labels.astype(str) if table is None else table.cells[:, j].astype(str)
        classes = classes.astype(str)
    elif labels.dtype.kind not in "biuf":
        raise DataError(f"the target column {table.names[j]!r} holds text labels but the model's classes are "
                        f"numbers {classes.tolist()[:10]}")
    order = np.argsort(classes, kind="stable")
    index = order[np.searchsorted(classes[order], labels).clip(0, classes.size - 1)]
    unknown = classes[index] != labels
    if np.any(unknown):
        seen = sorted({str(v) for v in labels[unknown].tolist()})
        raise DataError(f"the target column {table.names[j]!r} holds label(s) the model was not fitted on: "
                        f"{seen[:10]}; its classes are {classes.tolist()[:10]}")
    return index


def probabilities(model, X, xp):
    """``predict_proba(X)`` on the host and None, or None and why the model gives none."""
    if not hasattr(model, "predict_proba"):
        return None, f"{type(model).__name__} has no predict_proba"
    if getattr(getattr(model, "model_", model), "variance_model_", None) is None:
        return None, "the model file holds no variance model (saved by an older nyhopt, or fitted with " \
                     "predictive_variance=False)"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="X does not have valid feature names", category=UserWarning)
        with compile_notice():
            return to_host(model.predict_proba(X), xp), None


def _num(value, fmt):
    return "n/a" if value is None or value != value else format(value, fmt)


def text_lines(s):
    """The scores of ``s`` (a summary of :func:`cmd_score`) as lines of text."""
    head = f"{s['model']} on {s['data']}: {s['rows']} rows, target {s['target']!r}"
    if s["task"] == "regression":
        lines = [f"{head} (regression)",
                 f"RMSE                   {_num(s['rmse'], '.6g')}",
                 f"MAE                    {_num(s['mae'], '.6g')}",
                 f"R2                     {_num(s['r2'], '.6g')}"]
        if "nlpd" in s:
            inside = round(s["coverage_95"] * s["rows"])
            lines += [f"95% interval coverage  {_num(s['coverage_95'], '.4f')} ({inside} of {s['rows']} rows)",
                      f"NLPD                   {_num(s['nlpd'], '.6g')} nats"]
        return lines
    lines = [f"{head} (classification, {len(s['classes'])} classes)",
             f"error rate             {100 * s['error_rate']:.2f}% ({s['errors']} of {s['rows']} rows wrong)"]
    if s.get("no_probabilities"):
        return lines + [f"log loss, calibration  n/a: {s['no_probabilities']}"]
    lines.append(f"log loss               {_num(s['log_loss'], '.6g')} nats")
    worst = max(s["calibration_bins"], key=lambda b: abs(b["observed_rate"] - b["mean_probability"]))
    gap = abs(worst["observed_rate"] - worst["mean_probability"])
    lines += [f"calibration (ECE)      {_num(s['ece'], '.4f')} over {BINS} bins of the {s['calibration']}",
              f"largest gap            {gap:.4f} in bin {worst['lower']:.1f}-{worst['upper']:.1f} ({worst['rows']} "
              f"rows: mean probability {worst['mean_probability']:.3f}, observed {worst['observed_rate']:.3f})"]
    return lines
