"""Reading a model file (``.npz``) and checking every field before a model is built from it.

A file that is not a zip archive, a damaged archive, an entry holding pickled
objects, a missing field, or a field of the wrong kind, shape or value all
raise :class:`~nyhopt.errors.DataError` naming the file and the field; nothing
is unpickled and no model is built from a file that failed a check.  The
fields are described in :mod:`nyhopt.io`.
"""
from __future__ import annotations

import os

import numpy as np

from ..errors import DataError
from ._packed import packed_size, unpack_lower

__all__ = ["FORMAT", "VERSION", "KERNELS", "ESTIMATORS", "read_npz", "validate_state"]

FORMAT = "nyhopt-model"
#: 2: the variance factor as its packed lower triangle (``var_chol_packed``), the archive compressed,
#: input scalings of ``NystromKRR*`` models; files of version 1 (the full ``var_chol``) still load.
VERSION = 2
KERNELS = ("gaussian", "laplacian", "matern12", "matern32", "matern52")
ESTIMATORS = ("HyperoptKRR", "HyperoptKRRClassifier", "NystromKRR", "NystromKRRClassifier")
_DTYPES = ("float32", "float64")
_ZIP_SIGNATURES = (b"PK\x03\x04", b"PK\x05\x06")  # a local file header; an empty archive


def read_npz(path: str) -> dict:
    """All arrays of the ``.npz`` file ``path``, read without pickle.

    Raises
    ------
    DataError
        A folder, a file that is not a zip archive, a truncated or corrupted
        archive, or an entry holding pickled Python objects.
    """
    if os.path.isdir(path):
        raise DataError(f"{path} is a folder, not an nyhopt model file")
    with open(path, "rb") as f:
        signature = f.read(4)
    if signature not in _ZIP_SIGNATURES:
        raise DataError(f"{path} is not an nyhopt model file (it is not an .npz archive)")
    state = {}
    try:
        # the file object is ours: np.load leaves a path's file open when the archive is unreadable
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as data:
            for key in data.files:
                state[key] = _read_entry(data, key, path)
    except DataError:
        raise
    except Exception as exc:  # zipfile.BadZipFile, EOFError, zlib.error, a bad .npy header ...
        raise DataError(f"{path} is damaged (a truncated or corrupted .npz archive): "
                        f"{type(exc).__name__}: {exc}") from None
    return state


def _read_entry(data, key, path):
    try:
        return data[key]
    except ValueError as exc:
        if "pickle" not in str(exc):
            raise
    raise DataError(f"{path}: field {key!r} holds pickled Python objects, which an nyhopt model file never "
                    "contains; the file was not loaded")


class _Fields:
    """Typed access to the fields of one file; every failure names the file and the field."""

    def __init__(self, state, path):
        self.state, self.path = state, path

    def fail(self, key, why):
        raise DataError(f"{self.path}: field {key!r} {why}")

    def get(self, key):
        if key not in self.state:
            raise DataError(f"{self.path}: the model file has no {key!r} field")
        return self.state[key]

    def text(self, key, choices=None) -> str:
        a = self.get(key)
        if a.ndim != 0 or a.dtype.kind != "U":
            self.fail(key, f"must be a text value, got {_describe(a)}")
        value = str(a)
        if choices is not None and value not in choices:
            self.fail(key, f"must be one of {list(choices)}, got {value!r}")
        return value

    def flag(self, key) -> bool:
        a = self.get(key)
        if a.ndim != 0 or a.dtype.kind != "b":
            self.fail(key, f"must be a boolean, got {_describe(a)}")
        return bool(a)

    def floats(self, key, shape, positive=False) -> np.ndarray:
        """A finite float64 array of ``shape`` (None: any length >= 1)."""
        a = self.get(key)
        if a.dtype.kind != "f":
            self.fail(key, f"must hold floating-point numbers, got {_describe(a)}")
        if a.ndim != len(shape) or any(s is not None and s != n for s, n in zip(shape, a.shape)):
            want = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
            self.fail(key, f"must have shape {want}, got {a.shape}")
        if any(s is None and n < 1 for s, n in zip(shape, a.shape)):
            self.fail(key, f"must not be empty, got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            self.fail(key, "contains NaN or infinity")
        if positive and not np.all(a > 0):
            self.fail(key, "must be > 0")
        return a.astype(np.float64)


def _describe(a) -> str:
    return f"dtype {a.dtype}, shape {a.shape}"


def validate_state(state: dict, path: str) -> dict:
    """Check every field of a model file; return the fields, floats as float64.

    Parameters
    ----------
    state : dict of numpy.ndarray
        What :func:`read_npz` returned; not modified.
    path : str
        The file, for messages.

    Returns
    -------
    dict
        The checked fields (``meta_*`` and unknown fields are left out).

    Raises
    ------
    DataError
        A missing field, or one of the wrong kind, shape or value (NaN,
        infinity, a non-positive scale, a shape that does not match the other
        fields, an unknown name), or a format version this nyhopt cannot read.
    """
    f = _Fields(state, path)
    fmt = state.get("format")
    if fmt is None or fmt.ndim != 0 or fmt.dtype.kind != "U" or str(fmt) != FORMAT:
        raise DataError(f"{path} is not an nyhopt model file (no 'format' = {FORMAT!r} field)")
    version = f.get("version")
    if version.ndim != 0 or version.dtype.kind not in "iu":
        f.fail("version", f"must be an integer, got {_describe(version)}")
    if int(version) > VERSION:
        raise DataError(f"{path} was written by a newer nyhopt (format version {int(version)}; "
                        f"this nyhopt reads up to {VERSION})")
    if int(version) < 1:
        f.fail("version", f"must be >= 1, got {int(version)}")
    out = {"estimator": f.text("estimator", ESTIMATORS), "kernel": f.text("kernel", KERNELS)}
    centers = out["centers"] = f.floats("centers", (None, None))
    m, d = centers.shape
    alpha = out["alpha"] = f.floats("alpha", (m, None))
    p = alpha.shape[1]
    ell = out["lengthscale"] = f.floats("lengthscale", (None,), positive=True)
    if ell.size not in (1, d):
        f.fail("lengthscale", f"has {ell.size} entries but the centers have {d} features")
    out["penalty"] = f.floats("penalty", (), positive=True)
    out["y_was_1d"] = f.flag("y_was_1d")
    if out["y_was_1d"] and p != 1:
        f.fail("y_was_1d", f"is True but 'alpha' has {p} columns")
    out["x_mean"] = f.floats("x_mean", (d,))
    out["x_scale"] = f.floats("x_scale", (d,), positive=True)
    out["y_mean"] = f.floats("y_mean", (p,))
    out["y_scale"] = f.floats("y_scale", (p,), positive=True)
    out["normalize_y"] = f.flag("normalize_y")
    out["standardize"] = f.flag("standardize")
    out["dtype"] = f.text("dtype", _DTYPES)
    # optional: files written before intercept_ existed hold none (the loader uses y_mean or 0)
    out["intercept"] = f.floats("intercept", (p,)) if "intercept" in state else None
    out["fit_intercept"] = f.flag("fit_intercept") if "fit_intercept" in state else False
    if out["estimator"].endswith("Classifier"):
        out["classes"] = _classes(f, p)
    if out["estimator"].startswith("Hyperopt"):
        out["objective"] = f.text("objective")
        out["ard"] = f.flag("ard")
        # optional: files written before the amplitude existed hold none (amplitude 1)
        out["amplitude"] = f.floats("amplitude", (), positive=True) if "amplitude" in state else np.float64(1.0)
    if "var_chol" in state or "var_chol_packed" in state:  # optional: the predictive variance
        out["var_chol"] = _variance_factor(f, state, m)
        out["var_n_lam"] = f.floats("var_n_lam", (), positive=True)
        out["var_amplitude"] = f.floats("var_amplitude", ())
        if not out["var_amplitude"] >= 0:
            f.fail("var_amplitude", "must be >= 0")
    # optional: save_model(..., std=False) left out a fitted variance model (return_std then names it)
    out["variance_left_out"] = f.flag("variance_left_out") if "variance_left_out" in state else False
    if "feature_names" in state:
        names = state["feature_names"]
        if names.ndim != 1 or names.dtype.kind != "U" or names.size not in (0, d):
            f.fail("feature_names", f"must be {d} text values, got {_describe(names)}")
        out["feature_names"] = names
    if "target_name" in state:
        out["target_name"] = f.text("target_name")
    if "params" in state:  # optional: the constructor parameters (JSON text, nyhopt.io._model_params)
        out["params"] = f.text("params")
    out["warp"] = _warp(f, state, d) if "x_warp_features" in state else None  # optional: nyhopt.models._warp
    out["target_transform"] = f.text("target_transform", ("log",)) if "target_transform" in state else None
    return out


def _warp(f: _Fields, state, d: int):
    """The checked fields of a feature warp (:class:`nyhopt.models._warp.FeatureWarp`)."""
    from ..models._warp import FeatureWarp

    J = f.get("x_warp_features")
    if J.ndim != 1 or J.dtype.kind not in "iu" or J.size < 1:
        f.fail("x_warp_features", f"must be a non-empty list of feature indices, got {_describe(J)}")
    if not (np.all(np.diff(J) > 0) and J[0] >= 0 and J[-1] < d):
        f.fail("x_warp_features", f"must be increasing feature indices in [0, {d}), got {J.tolist()}")
    k = J.size
    return FeatureWarp(J.astype(np.int64), f.floats("x_warp_center", (k,)), f.floats("x_warp_scale", (k,), True),
                       f.floats("x_warp_mean", (k,)), f.floats("x_warp_std", (k,), True))


def _variance_factor(f: _Fields, state, m: int) -> np.ndarray:
    """The ``(m, m)`` lower Cholesky factor: ``var_chol`` (version 1, the square) or ``var_chol_packed``."""
    if "var_chol" in state:
        key, C = "var_chol", f.floats("var_chol", (m, m))
        lower = np.array_equal(C, np.tril(C))
    else:
        key, C = "var_chol_packed", unpack_lower(f.floats("var_chol_packed", (packed_size(m),)), m)
        lower = True
    if not (lower and np.all(np.diag(C) > 0)):
        f.fail(key, "must be a lower-triangular Cholesky factor (positive diagonal)")
    return C


def _classes(f: _Fields, p: int) -> np.ndarray:
    classes = f.get("classes")
    if classes.ndim != 1 or classes.dtype.kind not in "biufUS":
        f.fail("classes", f"must be a 1-D array of numbers or text, got {_describe(classes)}")
    if classes.dtype.kind == "f" and not np.all(np.isfinite(classes)):
        f.fail("classes", "contains NaN or infinity")
    k = classes.size
    if k < 2 or np.unique(classes).size != k or not np.array_equal(np.sort(classes), classes):
        f.fail("classes", f"must hold at least two distinct labels in sorted order, got {classes.tolist()!r}")
    if p != (1 if k == 2 else k):
        f.fail("classes", f"has {k} labels but 'alpha' has {p} column(s)")
    return classes
