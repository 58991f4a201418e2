"""The arguments of :func:`nyhopt.optim.tune.tune` that need no data, checked with messages naming them."""
from __future__ import annotations

import numbers

import numpy as np

from ..inputs._validation import check_real
from ..kernels import Kernel
from . import adam
from ._setup import check_dtype

__all__ = ["FIELDS", "check_int", "check_freeze", "check_arguments", "check_switches"]

#: Names accepted by ``freeze``.
FIELDS = ("penalty", "lengthscale", "centers", "amplitude")


def check_int(value, name, low):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def check_switches(ard, progress, record_terms, track_errors):
    """The on/off arguments, each True or False (``track_errors`` also None, ``progress`` also ``"log"``).

    A ``TypeError`` names the first other: a truthy string or number would
    otherwise pass for True (``ard="no"``).
    """
    if isinstance(progress, str) and progress == "log":
        progress = True
    for name, value in (("ard", ard), ("progress", progress), ("record_terms", record_terms),
                        ("track_errors", track_errors)):
        if not (isinstance(value, (bool, np.bool_)) or (value is None and name == "track_errors")):
            allowed = {"track_errors": "True, False or None",
                       "progress": "True, False or 'log'"}.get(name, "True or False")
            raise TypeError(f"{name} must be {allowed}, got {value!r}")


def check_freeze(freeze):
    if freeze is None:
        return frozenset()
    if isinstance(freeze, str):
        freeze = (freeze,)
    freeze = frozenset(freeze)
    unknown = freeze - set(FIELDS)
    if unknown:
        raise ValueError(f"freeze must name fields among {FIELDS}, got unknown {sorted(unknown)}")
    if freeze == set(FIELDS):
        raise ValueError("freeze names every hyperparameter: there is nothing to tune")
    return freeze


def check_arguments(validation, epochs, patience, min_delta, rel_delta, lr, b1, b2, eps, freeze, dtype, callback,
                    kernel, objective_options):
    """Stage 1, check: the arguments that need no data; ``(epochs, patience, min_delta, rel_delta, freeze, dtype)``."""
    if isinstance(validation, numbers.Integral) and not isinstance(validation, (bool, np.bool_)):
        raise ValueError(f"validation={validation!r} is a number of folds, which chooses among a list of "
                         "objectives; with one objective give a fraction in (0, 1) or a tuple (X_val, y_val)")
    epochs = check_int(epochs, "epochs", 0)
    if patience is not None:
        patience = check_int(patience, "patience", 1)
    min_delta = check_real(min_delta, "min_delta", low=0.0)
    rel_delta = check_real(rel_delta, "rel_delta", low=0.0)
    adam._check_hyper(lr, b1, b2, eps)
    freeze = check_freeze(freeze)
    dtype = check_dtype(dtype)
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {callback!r}")
    if not isinstance(kernel, (str, Kernel)):
        raise TypeError(f"kernel must be a name or a Kernel instance, got {kernel!r}")
    if objective_options is not None and not isinstance(objective_options, dict):
        raise TypeError(f"objective_options must be a dict, got {type(objective_options).__name__}")
    return epochs, patience, min_delta, rel_delta, freeze, dtype
