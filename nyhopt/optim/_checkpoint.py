"""Checkpoints of :func:`nyhopt.tune`: save after every step, resume exactly.

A checkpoint is one ``.npz`` file (NumPy arrays and one JSON string; loaded
with ``allow_pickle=False``) written atomically: a temporary file in the same
folder, then ``os.replace``.  It holds what the loop needs to go on as if it
had never stopped:

* the epoch to evaluate next, the parameters and Adam's state (step, moments);
* the history so far, the best point (value, parameters, epoch), the count of
  steps without improvement and the optimizer time;
* the objective's warm start (``stoch-prop``'s Falkon solution, ``_beta``);
* the state of the generator that seeded the setup, so that a call with
  ``random_state=None`` or a ``Generator`` redraws the same centers and probes;
* the call's signature and its initial parameters, checked on resume.

Everything else (the encoded targets, the initial point, the objective and its
probes) is rebuilt by the resumed call from the same arguments and seed.
"""
from __future__ import annotations

import json
import math
import os
import tempfile

import numpy as np

from ..backend import get_namespace, to_numpy
from ..params import Params
from . import adam
from ._history import History, TuneRecord

__all__ = ["Checkpointer", "Resumed"]

FORMAT = "nyhopt-tune-checkpoint-1"
_FIELDS = ("log_penalty", "log_lengthscale", "centers", "log_amplitude")


def _params_arrays(prefix, params, out):
    for f in _FIELDS:
        out[f"{prefix}.{f}"] = to_numpy(getattr(params, f), dtype=np.float64)


def _params_from(prefix, data, like):
    xp = get_namespace(like.centers)
    values = {f: np.asarray(data[f"{prefix}.{f}"]) for f in _FIELDS}
    values["centers"] = xp.asarray(values["centers"])
    return Params(**values)


def _float(x):
    """JSON has no NaN/inf: store them as strings."""
    x = float(x)
    return x if math.isfinite(x) else repr(x)


def _jsonable(obj):
    """Generator states of other bit generators hold arrays (MT19937's key)."""
    if isinstance(obj, (np.ndarray, np.generic)):
        return obj.tolist()
    raise TypeError(f"cannot save {type(obj).__name__} in a checkpoint")


def _unfloat(x):
    return float(x)


class Resumed:
    """The loop state read from a checkpoint (attributes named as in :func:`nyhopt.tune`'s loop)."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


class Checkpointer:
    """Save the tuning loop after every step to ``path``; resume from it.

    Parameters
    ----------
    path : str or os.PathLike
        The checkpoint file (``.npz``).  Its folder must exist.
    rng : numpy.random.Generator
        The generator of the setup; restored from the file, when there is one,
        before any draw.

    Raises
    ------
    TypeError
        ``path`` is not a path.
    ValueError
        The file exists but is not an nyhopt checkpoint, or its folder does not exist
        (the messages name ``checkpoint``).
    """

    def __init__(self, path, rng):
        if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"checkpoint must be a path (str or os.PathLike), got {type(path).__name__}")
        self.path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            raise ValueError(f"checkpoint: the folder {folder!r} does not exist")
        self._saved = None
        if os.path.exists(self.path):
            self._saved = self._read()
            rng.bit_generator.state = self._meta["rng"]
        self._rng_state = rng.bit_generator.state

    def _read(self):
        try:
            with np.load(self.path, allow_pickle=False) as f:
                data = {k: f[k] for k in f.files}
            meta = json.loads(str(data.pop("meta")))
        except Exception as exc:  # any unreadable file: say which argument it came from
            raise ValueError(f"checkpoint={self.path!r} is not an nyhopt tune checkpoint ({exc})") from None
        if meta.get("format") != FORMAT:
            raise ValueError(f"checkpoint={self.path!r} is not an nyhopt tune checkpoint "
                             f"(format {meta.get('format')!r})")
        self._meta = meta
        return data

    # -- resume ---------------------------------------------------------------------------------
    def resume(self, signature, params, epochs, objective):
        """The saved loop state, or None without a file; checks that it belongs to this call.

        Parameters
        ----------
        signature : dict
            JSON-able description of the call (data shape, objective, seed, ...).
        params : Params
            The initial parameters of this call (must equal the saved ones).
        epochs : int
            Epochs asked now; the checkpoint must not be past them.
        objective : Objective
            Receives the saved warm start.

        Raises
        ------
        ValueError
            The checkpoint was written by a different call (message names
            ``checkpoint`` and what differs) or is past ``epochs``.
        """
        self.signature = signature
        if self._saved is None:
            return None
        meta, data = self._meta, self._saved
        saved_sig = meta["signature"]
        diff = sorted(k for k in set(saved_sig) | set(signature) if saved_sig.get(k) != signature.get(k))
        if diff:
            what = ", ".join(f"{k}: saved {saved_sig.get(k)!r}, now {signature.get(k)!r}" for k in diff)
            raise ValueError(f"checkpoint={self.path!r} was written by a different call ({what}); "
                             "pass the same arguments, or another checkpoint path to start afresh")
        init = _params_from("init", data, params)
        if not all(np.array_equal(to_numpy(getattr(init, f)), to_numpy(getattr(params, f))) for f in _FIELDS):
            raise ValueError(f"checkpoint={self.path!r} was written for other data or another start "
                             "(the initial hyperparameters differ); pass the same data and arguments, "
                             "or another checkpoint path")
        next_epoch = int(meta["next_epoch"])
        if next_epoch > epochs:
            raise ValueError(f"checkpoint={self.path!r} is at epoch {next_epoch}, past epochs={epochs}; "
                             f"ask for epochs >= {next_epoch} to continue it")
        state = adam.AdamState(int(meta["adam_step"]), _params_from("adam_m", data, params),
                               _params_from("adam_v", data, params))
        history = History()
        for i, rec in enumerate(meta["history"]):
            history.append(TuneRecord(int(rec["epoch"]), _unfloat(rec["objective"]),
                                      {k: _unfloat(v) for k, v in rec["terms"].items()},
                                      _unfloat(rec["penalty"]), np.array(data[f"history.{i}.lengthscale"]),
                                      _unfloat(rec["train_error"]), _unfloat(rec["validation_error"]),
                                      _unfloat(rec["time"]), _unfloat(rec["amplitude"]),
                                      _unfloat(rec.get("validation_nlpd", "nan")),
                                      _unfloat(rec.get("validation_coverage", "nan"))))
        if "warm_start" in data and hasattr(objective, "_beta"):
            objective._beta = get_namespace(params.centers).asarray(data["warm_start"])
        return Resumed(epoch=next_epoch, params=_params_from("params", data, params), state=state,
                       history=history, best_value=_unfloat(meta["best_value"]),
                       best_params=_params_from("best", data, params), best_epoch=int(meta["best_epoch"]),
                       stale=int(meta["stale"]), t_opt=_unfloat(meta["t_opt"]))

    # -- save -----------------------------------------------------------------------------------
    def save(self, next_epoch, init, params, state, history, best_value, best_params, best_epoch, stale, t_opt,
             objective):
        """Write the loop state atomically (a temporary file, then ``os.replace``)."""
        arrays = {}
        _params_arrays("init", init, arrays)
        _params_arrays("params", params, arrays)
        _params_arrays("adam_m", state.m, arrays)
        _params_arrays("adam_v", state.v, arrays)
        _params_arrays("best", best_params, arrays)
        records = []
        for i, r in enumerate(history):
            arrays[f"history.{i}.lengthscale"] = np.asarray(r.lengthscale, dtype=np.float64)
            records.append({"epoch": r.epoch, "objective": _float(r.objective),
                            "terms": {k: _float(v) for k, v in r.terms.items()}, "penalty": _float(r.penalty),
                            "train_error": _float(r.train_error), "validation_error": _float(r.validation_error),
                            "time": _float(r.time), "amplitude": _float(r.amplitude),
                            "validation_nlpd": _float(r.validation_nlpd),
                            "validation_coverage": _float(r.validation_coverage)})
        beta = getattr(objective, "_beta", None)
        if beta is not None:
            arrays["warm_start"] = to_numpy(beta)
        meta = {"format": FORMAT, "signature": self.signature, "rng": self._rng_state,
                "next_epoch": int(next_epoch), "adam_step": int(state.step), "history": records,
                "best_value": _float(best_value), "best_epoch": int(best_epoch), "stale": int(stale),
                "t_opt": float(t_opt)}
        arrays["meta"] = np.array(json.dumps(meta, default=_jsonable))
        folder = os.path.dirname(os.path.abspath(self.path))
        fd, tmp = tempfile.mkstemp(prefix=".nyhopt-checkpoint-", suffix=".npz", dir=folder)
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, **arrays)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise


def _seed(random_state):
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return int(random_state)
    return "generator"  # None or a Generator: its state is saved and restored


def call_signature(X, enc, objective, random_state, lr, b1, b2, eps, freeze, patience, min_delta, kernel, ard,
                   objective_options, track_errors, record_terms, rel_delta=0.0):
    """What a resumed call must share with the one that wrote the checkpoint (JSON-able).

    ``epochs`` is left out on purpose: a run may be resumed to go further.
    """
    return {
        "data_shape": [int(s) for s in X.shape], "targets": [int(s) for s in enc.Y.shape],
        "dtype": str(X.dtype), "task": enc.task, "objective": objective.name,
        "objective_options": repr(sorted((objective_options or {}).items())), "random_state": _seed(random_state),
        "kernel": kernel if isinstance(kernel, str) else type(kernel).__name__, "ard": bool(ard),
        "adam": [float(lr), float(b1), float(b2), float(eps)], "freeze": sorted(freeze),
        "patience": patience, "min_delta": float(min_delta), "track_errors": bool(track_errors),
        "record_terms": bool(record_terms), **({"rel_delta": float(rel_delta)} if rel_delta else {}),
    }
