"""``nyhopt tune``: read a CSV, tune a model, save it (with an optional report and JSON summary)."""
from __future__ import annotations

import json
import math
import os
import time

import numpy as np

from ..backend._compile_notice import compile_notice
from . import _paths
from ._columns import feature_matrix
from ._common import (CLIError, clean_floats, fmt_error, json_default, note, require, say, split_names,
                      target_values)
from ._device import array_module, to_host

# Two distinct integers (0/1, -1/+1, 1/2) are taken as classes without a note; from three on,
# counts or ratings are as likely as labels and --task auto says what it chose.
_PLAIN_CLASSES = 2


def cmd_tune(args) -> int:
    from ..hyperopt import HyperoptKRR, HyperoptKRRClassifier
    from ..io import DataError, column_index, read_csv, save_model
    from ..optim._targets import resolve_task

    _paths.check_output(_paths.npz_path(args.out), "--out")
    if args.report:
        _paths.check_output(args.report, "--report")
        require("matplotlib", "--report", "plot")
    if args.json:
        _paths.check_output(args.json, "--json")
    xp = array_module(args.device)
    table = read_csv(args.data, delimiter=args.delimiter)
    j = column_index(table, args.target)
    target_name = table.names[j]
    if args.features:
        feat = [column_index(table, name) for name in split_names(args.features)]
        if j in feat:
            raise DataError(f"the target column {target_name!r} is also listed in --features")
    else:
        feat = [k for k in range(len(table.names)) if k != j]
    if not feat:
        raise DataError(f"{table.path}: no feature columns (only the target {target_name!r})")
    X = feature_matrix(table, feat, dtype=np.float32 if args.float32 else np.float64)
    y = target_values(table, j, args.task)
    task = resolve_task(y, args.task)
    n, d = X.shape
    folds = isinstance(args.validation_fraction, int)
    n_train = n - (math.ceil(n / args.validation_fraction) if folds else int(round(args.validation_fraction * n)))
    centers = args.centers
    if centers > n_train:  # as scikit-learn's Nystroem: all rows, with a warning
        note(args, f"--centers {centers} is more than the {n_train} training rows: using all {n_train} rows "
                    f"as centers")
        centers = n_train
    several = not isinstance(args.objective, str)
    if several and not args.validation_fraction:
        raise CLIError("--objective with several names chooses by validation error: give --validation F "
                       "(for instance 0.2, or 5 for 5 folds)")
    if folds and not several:
        raise CLIError(f"--validation {args.validation_fraction} (folds) chooses among several --objective "
                       "names; with one objective give a fraction such as 0.2")

    cls = HyperoptKRRClassifier if task == "classification" else HyperoptKRR
    est = cls(objective=args.objective, centers=centers, epochs=args.epochs, lr=args.lr,
              kernel=args.kernel, ard=not args.no_ard, random_state=args.seed,
              standardize=not args.no_standardize, patience=args.patience or None,
              validation_fraction=args.validation_fraction or None,
              record_terms=bool(args.report or args.json), progress=False if args.quiet else "log",
              freeze=("amplitude",) if args.freeze_amplitude else (), time_budget=args.time_budget)
    names = [table.names[k] for k in feat]
    extra = ""
    if task == "classification":
        extra = f", {np.unique(y).size} classes"
    say(args, f"data: {table.path}: {n} rows, {d} features, target {target_name!r} ({task}{extra})")
    n_values = np.unique(y).size
    if args.task == "auto" and task == "classification" and y.dtype.kind in "iuf" and n_values > _PLAIN_CLASSES:
        note(args, f"the target {target_name!r} holds {n_values} distinct integers, taken as class "
                    "labels; give --task regression to regress on them (or --task classification)")
    shown = ",".join(args.objective) + " (chosen by validation)" if several else args.objective
    if shown == "auto":
        shown = "prop" if args.time_budget is None else "prop or sgpr (chosen on held-out rows)"
    say(args, f"tuning: objective {shown}, "
               + (f"{centers} centers, up to {args.epochs} epochs, " if args.time_budget is None else
                  f"centers from {centers} grown within a {args.time_budget:g} s budget, up to {args.epochs} "
                  "epochs per stage, ")
               + f"lr {args.lr}, kernel {args.kernel}{'' if args.no_ard else ' (one lengthscale per feature)'}")
    # On the GPU, text labels are fitted as their indices in the sorted labels (CuPy holds no
    # text) and the labels are put back before saving.
    text_classes = None
    y_fit = y
    if xp is not np and y.dtype.kind == "U":
        text_classes, y_fit = np.unique(y, return_inverse=True)
    X_fit = xp.asarray(X)
    t0 = time.perf_counter()
    with compile_notice(enabled=not args.quiet):
        est.fit(X_fit, xp.asarray(y_fit))
    elapsed = time.perf_counter() - t0

    hist = est.history_
    best = hist[est.best_epoch_]
    if args.validation_fraction and not several:
        # History errors were tracked at every epoch on the held-out rows; report the best epoch's.
        train_err, val_err = best.train_error, best.validation_error
    else:
        # No held-out rows in the final model's run (none asked for, or the chosen objective was tuned
        # again on all rows): the error on the rows it was fitted on, and the chosen candidate's.
        with compile_notice(enabled=not args.quiet):
            pred = to_host(est.predict(X_fit), xp)
        if text_classes is not None:
            pred = text_classes[pred]
        from ..optim._tracking import prediction_error

        train_err = prediction_error(pred, y, task)
        chosen = [c for c in est.candidates_ if c.objective == est.objective_]
        val_err = chosen[0].validation_error if chosen else float("nan")
    metric = "error rate" if task == "classification" else "RMSE"
    for cand in est.candidates_:
        say(args, f"candidate {cand.objective}: validation {metric} {fmt_error(task, cand.validation_error)}, "
                   f"objective {cand.objective_value:.6g}, {cand.epochs} epochs ({cand.stop_reason})")
    if several:
        criterion = "squared error of the scores" if task == "classification" else metric
        over = f", mean of {args.validation_fraction} folds" if folds else ""
        say(args, f"chosen: {est.objective_} (lowest validation {criterion}{over}); tuned again on all {n} rows")
    choice = getattr(est, "transform_", None)
    if choice is not None:
        tried = ", ".join(f"{c} {fmt_error(task, e)}" for c, e in zip(choice.candidates, choice.errors))
        say(args, f"transform: {choice.chosen} (held-out {metric} {tried}; {choice.seconds:.1f} s)"
                   + ("; the stages' held-out errors below are in log units" if choice.log_target else ""))
    for st in getattr(est, "stages_", ()):
        held = "" if math.isnan(st.validation_error) else f", held-out {metric} {fmt_error(task, st.validation_error)}"
        say(args, f"stage: {st.centers} centers, {st.objective}, {st.rows} rows, {st.epochs} epochs in "
                   f"{st.seconds:.1f} s ({st.stop_reason}{held})")
    ell = est.params_.lengthscale
    say(args, f"done in {elapsed:.1f} s: {len(hist) - 1} epochs ({est.stop_reason_}), best epoch {est.best_epoch_}, "
               f"objective {best.objective:.6g}")
    say(args, f"penalty {est.params_.penalty:.4g}; amplitude {est.amplitude_:.4g}; lengthscale "
               + (f"{ell[0]:.4g}" if ell.size == 1 else f"min {ell.min():.4g}, median {np.median(ell):.4g}, max {ell.max():.4g}"))
    if several:
        say(args, f"{metric} on all {n} rows {fmt_error(task, train_err)}; validation {metric} of "
                   f"{est.objective_} {fmt_error(task, val_err)} (tuned on the training part)")
    else:
        say(args, f"train {metric} {fmt_error(task, train_err)}"
                   + (f"; validation {metric} {fmt_error(task, val_err)}" if args.validation_fraction else ""))
    scores = getattr(est, "validation_scores_", None)
    if scores:
        say(args, f"validation error bars: NLPD {scores['nlpd']:.4g} nats, 95% interval coverage "
                   f"{scores['coverage']:.3f} (final model, {n_train} training rows)")

    meta = {"objective": est.objective_, "epochs": len(hist) - 1, "best_epoch": est.best_epoch_,
            "stop_reason": est.stop_reason_, "train_error": train_err, "validation_error": val_err,
            "task": task, "target_name": target_name, "feature_names": np.array(names, dtype=str),
            "source": os.path.basename(table.path)}
    if text_classes is not None:
        est.classes_ = est.model_.classes_ = text_classes
    est.feature_names_in_ = np.array(names, dtype=object)  # nyhopt predict finds the columns by these names
    out = save_model(args.out, est, meta=meta)
    say(args, f"model saved to {out}")
    if args.report:
        from ..report import save_report

        path = save_report(hist, args.report, best_epoch=est.best_epoch_, error_name=metric,
                           title=f"{os.path.basename(table.path)}: {est.objective_}, target {target_name!r}")
        say(args, f"report saved to {path}")
    if args.json:
        summary = {
            "data": table.path, "n_rows": n, "n_features": d, "features": names, "target": target_name,
            "task": task, "objective": est.objective_, "centers": args.centers, "epochs": args.epochs,
            "lr": args.lr, "kernel": args.kernel, "ard": not args.no_ard, "seed": args.seed,
            "standardize": not args.no_standardize, "validation_fraction": args.validation_fraction,
            "epochs_run": len(hist) - 1, "best_epoch": est.best_epoch_, "stop_reason": est.stop_reason_,
            "seconds": elapsed, "penalty": est.params_.penalty, "amplitude": est.amplitude_,
            "freeze_amplitude": args.freeze_amplitude, "lengthscale": ell.tolist(),
            "metric": metric, "train_error": train_err, "validation_error": val_err, "model": out,
            "noise_variance": est.noise_variance_, "validation_scores": scores,
            "history": hist.as_dict(),
            "time_budget": args.time_budget,
            "stages": [st._asdict() for st in getattr(est, "stages_", ())],
            "transform": None if choice is None else choice._asdict(),
            "candidates": [{"objective": c.objective, "validation_error": c.validation_error,
                            "validation_score": c.validation_score, "fold_errors": list(c.fold_errors),
                            "objective_value": c.objective_value, "epochs": c.epochs, "best_epoch": c.best_epoch,
                            "stop_reason": c.stop_reason, "seconds": c.elapsed} for c in est.candidates_],
        }
        with open(args.json, "w") as f:
            json.dump(clean_floats(summary), f, indent=1, default=json_default)
        say(args, f"summary saved to {args.json}")
    return 0
