"""``nyhopt predict``: predictions of a saved model for the rows of a CSV."""
from __future__ import annotations

import csv
import sys
import warnings

import numpy as np

from ..backend._compile_notice import compile_notice
from . import _paths
from ._columns import feature_matrix, model_columns
from ._common import CLIError
from ._device import array_module, model_to, to_host


def cmd_predict(args) -> int:
    from ..io import load_model, read_csv

    if args.out:
        _paths.check_output(args.out, "--out")
    xp = array_module(args.device)
    model = load_model(args.model)
    table = read_csv(args.data, delimiter=args.delimiter)
    meta = getattr(model, "meta_", {})
    X = feature_matrix(table, model_columns(model, table), dtype=np.float64)
    if args.std:
        check_std(model, args.model)
    model = model_to(model, xp)
    std = None
    if args.std:
        pred, std = predict_on(model, xp.asarray(X), xp, return_std=True)
    else:
        pred = predict_on(model, xp.asarray(X), xp)
    target = str(meta.get("target_name", "prediction")) or "prediction"
    if pred.ndim == 2:
        header = [f"{target}_{k}" for k in range(pred.shape[1])]
        rows = pred.tolist()
        if std is not None:
            header += [f"{name}_std" for name in header]
            rows = [r + s for r, s in zip(rows, std.tolist())]
    else:
        header = [target]
        rows = [[v] for v in pred.tolist()]
        if std is not None:
            header.append(f"{target}_std")
            rows = [r + [s] for r, s in zip(rows, std.tolist())]

    def cell(v):
        return repr(v) if isinstance(v, float) else str(v)

    stream = open(args.out, "w", newline="") if args.out else sys.stdout
    try:
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(header)
        for row in rows:
            writer.writerow([cell(v) for v in row])
    finally:
        if args.out:
            stream.close()
    if args.out:
        print(f"{len(rows)} predictions written to {args.out}", file=sys.stderr)
    return 0


def check_std(model, path):
    """Refuse ``--std`` for a classifier, or for a model file without a variance model."""
    if getattr(model, "classes_", None) is not None:
        raise CLIError("--std is for regression models; this model is a classifier")
    if getattr(getattr(model, "model_", model), "variance_model_", None) is None:
        raise CLIError(f"{path} holds no variance model (saved by an older nyhopt, or fitted with "
                       "predictive_variance=False): run 'nyhopt tune' again to get --std")


def predict_on(model, X, xp, return_std=False):
    """``model.predict(X)`` as a NumPy array (with ``return_std``, the pair ``(mean, std)``); classes are
    looked up on the host.

    ``X`` holds the model's columns in its order (chosen by name by the caller), so the model's
    ``feature_names_in_`` is not checked against an array without names.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="X does not have valid feature names", category=UserWarning)
        with compile_notice():
            if return_std:
                return tuple(to_host(a, xp) for a in model.predict(X, return_std=True))
            return predict_array(model, X, xp)


def predict_array(model, X, xp):
    classes = getattr(model, "classes_", None)
    if xp is np or classes is None:
        return to_host(model.predict(X), xp)
    scores = to_host(model.decision_function(X), xp)
    index = (scores > 0).astype(np.intp) if scores.ndim == 1 else np.argmax(scores, axis=1)
    return np.asarray(classes)[index]
