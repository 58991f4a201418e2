"""Reading CSV tables and saving/loading fitted models (``.npz``, no pickle).

CSV files have a header row; columns are chosen by name (or by 0-based index).
Every problem in a file is reported as a :class:`DataError` that names the
file, the line and the column, so that the command line can print it as is.

A model file is a plain NumPy ``.npz`` archive written with
:func:`numpy.savez_compressed` and read with ``allow_pickle=False``: nothing in
it can execute code.  It holds what ``predict`` and ``predict(X,
return_std=True)`` need and no more (sizes in ``docs/cli.md``, "Model files").
Keys:

==================  ===========================================================
``format``          ``"nyhopt-model"``; ``version``: format version (2; files
                    of version 1 load too)
``estimator``       class name: ``HyperoptKRR``, ``HyperoptKRRClassifier``,
                    ``NystromKRR`` or ``NystromKRRClassifier``
``kernel``          kernel name (``gaussian``, ``laplacian``, ``matern12`` ...)
``lengthscale``     (1,) or (d,) float64
``penalty``         float64
``centers``         (m, d) float64, in the (standardized) model coordinates
``alpha``           (m, p) float64
``y_was_1d``        bool
``x_mean``          (d,) and ``x_scale`` (d,): inputs are ``(X - x_mean) / x_scale``
                    when ``standardize`` (a ``Hyperopt*`` estimator's option;
                    for ``NystromKRR*``, the input scaling ``input_mean_``,
                    ``input_scale_`` a model from :func:`nyhopt.tune` keeps)
``y_mean``          (p,) and ``y_scale`` (p,): regression outputs are
                    ``y_mean + y_scale * f``
``classes``         classifier labels (numbers or strings), sorted
``feature_names``   (d,) str, ``target_name`` str: column names (may be empty)
``normalize_y``     bool; ``standardize`` bool; ``dtype``: ``"float32"`` or ``"float64"``
``objective``       objective name, ``ard`` bool (``Hyperopt*`` estimators)
``amplitude``       float64 > 0, the kernel amplitude (``Hyperopt*``;
                    optional: files without it load with 1.0)
``var_chol_packed`` (m(m+1)/2,) float64, ``var_n_lam`` and ``var_amplitude``
                    float64: the predictive variance (:mod:`nyhopt.posterior`:
                    the lower triangle of the factor :math:`C` row by row,
                    :mod:`nyhopt.io._packed`, :math:`n\\lambda` and :math:`a`;
                    the factor :math:`L` is computed again from the kernel and
                    the centers); version 1 files hold the square ``var_chol``
                    (m, m) instead.  Optional: without them ``return_std`` is
                    refused (``variance_left_out`` True: it was left out by
                    ``save_model(..., std=False)``)
``intercept``       (p,) float64, the constant of the predictor (``intercept_``:
                    regression outputs are ``intercept + y_scale * f``, scores
                    ``intercept + f``); ``fit_intercept`` bool.  Optional: files
                    without them load with ``y_mean`` (``normalize_y``) or 0
``x_warp_features`` (k,) int64: the features warped after the input scaling
                    (:mod:`nyhopt.models._warp`), with ``x_warp_center``,
                    ``x_warp_scale``, ``x_warp_mean``, ``x_warp_std`` (k,)
                    float64.  Optional: only a model from ``nyhopt.tune``
                    that chose the warp has them
``target_transform`` ``"log"``: the regressor was tuned on ``log y`` and predicts
                    ``exp`` of its output (``NystromKRR.target_transform_``).
                    Optional: absent for every other model
``params``          JSON text: the estimator's constructor parameters
                    (``get_params(deep=False)``, :mod:`nyhopt.io._model_params`),
                    which the loaded estimator gets back.  Optional: files
                    without it load with the parameters the fields give
``meta_*``          free-form summary (objective name, epochs, ...)
==================  ===========================================================
"""
from __future__ import annotations

import csv
import os
from typing import NamedTuple

import numpy as np

from ._model_file import ESTIMATORS as _ESTIMATORS
from ._model_file import FORMAT, VERSION, read_npz, validate_state
from ._model_params import decode_params, encode_params
from ._model_params import kernel_name as _kernel_name
from ._packed import pack_lower
from ._table_file import read_text
from ..backend import to_numpy
from ..errors import DataError

__all__ = ["DataError", "Table", "read_csv", "column_index", "numeric_columns", "save_model", "load_model"]


# --------------------------------------------------------------------------- CSV


class Table(NamedTuple):
    """A CSV table as text: column names and cells.

    Attributes
    ----------
    path : str
        The file it was read from.
    names : list of str
        Header cells (stripped).
    cells : numpy.ndarray of str, shape (n_rows, n_columns)
        The data cells (stripped), as text.
    lines : list of int, optional
        Line number in the file of each data row (for error messages).
    """

    path: str
    names: list
    cells: np.ndarray
    lines: list = None


def _csv_rows(reader, path):
    """The rows of ``reader``; a malformed line (such as a field over ``csv.field_size_limit()``
    characters) raises :class:`DataError` naming the file and the line."""
    try:
        yield from reader
    except csv.Error as exc:
        raise DataError(f"{path}, line {reader.line_num}: unreadable CSV ({exc})") from None


def _fspath(path):
    """``path`` as a str (``os.fspath``), or a ``TypeError`` naming the argument."""
    try:
        path = os.fspath(path)
    except TypeError:
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}") from None
    return path if isinstance(path, str) else os.fsdecode(path)


def read_csv(path, delimiter=None) -> Table:
    """Read a CSV file with a header row, plain or compressed.

    Parameters
    ----------
    path : str or path-like
        UTF-8 text; a name ending in ``.gz``, ``.bz2``, ``.xz`` or ``.zip``
        (one file inside) is decompressed first, as pandas does.
    delimiter : str, optional
        Field separator; by default guessed among ``,``, ``;``, tab and space
        from the header line.

    Returns
    -------
    Table

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    DataError
        Empty file, no data rows, duplicated or empty column names, rows
        whose number of fields differs from the header, a damaged compressed
        file, or a file that is not text (the message says what it seems to
        be: an Excel workbook, a Parquet file, a gzip file named ``.csv``, ...).

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "toy.csv")
    >>> with open(path, "w") as f:
    ...     _ = f.write("a,b,y\\n1,2,3\\n4,5,6\\n")
    >>> t = read_csv(path)
    >>> t.names, t.cells.shape
    (['a', 'b', 'y'], (2, 3))
    """
    path = _fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"file not found: {path}")
    if os.path.isdir(path):
        raise DataError(f"{path} is a folder, not a CSV file")
    lines = read_text(path).splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise DataError(f"{path} is empty")
    if delimiter is None:
        header_line = lines[first]
        counts = {d: header_line.count(d) for d in (",", ";", "\t")}
        best = max(counts, key=counts.get)
        delimiter = best if counts[best] > 0 else (" " if " " in header_line.strip() else ",")
    reader = csv.reader(lines, delimiter=delimiter, skipinitialspace=(delimiter == " "))
    rows = []
    header = None
    for lineno, row in enumerate(_csv_rows(reader, path), start=1):
        if not row or all(not c.strip() for c in row):
            continue  # blank line
        row = [c.strip() for c in row]
        if header is None:
            header = row
            if any(not name for name in header):
                raise DataError(f"{path}, line {lineno}: the header has an empty column name")
            dup = sorted({name for name in header if header.count(name) > 1})
            if dup:
                raise DataError(f"{path}, line {lineno}: duplicated column name(s) {dup}")
            continue
        if len(row) != len(header):
            raise DataError(
                f"{path}, line {lineno}: {len(row)} field(s) but the header has {len(header)} "
                f"(delimiter {delimiter!r})"
            )
        rows.append((lineno, row))
    if not rows:
        raise DataError(f"{path} has a header but no data rows")
    cells = np.array([r for _, r in rows], dtype=str)
    return Table(path, header, cells, [ln for ln, _ in rows])


def _line_of(table: Table, row: int) -> int:
    """Line number of data row ``row`` (1-based, counting the header)."""
    if table.lines is not None and row < len(table.lines):
        return table.lines[row]
    return row + 2


def column_index(table: Table, key) -> int:
    """Index of a column given by name, or by 0-based index (int or digits).

    A name takes precedence over an index: in a table whose header has a
    column called ``"0"``, the key ``"0"`` means that column.

    Raises
    ------
    DataError
        If no column has that name and it is not a valid index.

    Examples
    --------
    >>> t = Table("t.csv", ["a", "y"], np.array([["1", "2"]]))
    >>> column_index(t, "y"), column_index(t, 0), column_index(t, "-1")
    (1, 0, 1)
    """
    if isinstance(key, str) and key in table.names:
        return table.names.index(key)
    try:
        idx = int(key)
    except (TypeError, ValueError):
        idx = None
    if idx is not None and -len(table.names) <= idx < len(table.names):
        return idx % len(table.names)
    raise DataError(
        f"{table.path}: no column {key!r}; the columns are {table.names}"
        + (" (or an index from 0 to %d)" % (len(table.names) - 1))
    )


def numeric_columns(table: Table, columns, dtype=np.float64) -> np.ndarray:
    """Convert the given columns to a float array, or say which cell is not a number.

    Parameters
    ----------
    table : Table
    columns : list of int
        Column indices.
    dtype : numpy dtype, default float64

    Returns
    -------
    numpy.ndarray of shape (n_rows, len(columns))

    Raises
    ------
    DataError
        For an empty (missing) cell, text that is not a number, or NaN/infinity.

    Examples
    --------
    >>> t = Table("t.csv", ["a", "b"], np.array([["1", "x"], ["2.5", "y"]]))
    >>> numeric_columns(t, [0]).ravel().tolist()
    [1.0, 2.5]
    """
    columns = list(columns)
    out = np.empty((table.cells.shape[0], len(columns)), dtype=np.float64)
    for k, j in enumerate(columns):
        col = table.cells[:, j]
        try:
            out[:, k] = col.astype(np.float64)
            bad = ~np.isfinite(out[:, k])
        except ValueError:
            bad = None
        if bad is None or bad.any():
            for i, cell in enumerate(col.tolist()):
                try:
                    v = float(cell)
                except ValueError:
                    v = None
                if v is None or not np.isfinite(v):
                    what = "an empty (missing) value" if cell == "" else f"{cell!r}, which is not a finite number"
                    raise DataError(
                        f"{table.path}, line {_line_of(table, i)}, column {table.names[j]!r}: "
                        f"{what}; every feature must be numeric (encode categories as numbers first)"
                    )
    return out.astype(dtype, copy=False)


# --------------------------------------------------------------------------- models

def _labels_array(classes):
    """Class labels as a NumPy array that needs no pickle (numbers or unicode)."""
    arr = to_numpy(classes)
    if arr.dtype.kind in "biuf":
        return arr
    return arr.astype(str)


def _intercept_of(model):
    from ..estimator import _intercept_of as of

    c = of(model)
    p = 1 if model.alpha_.ndim == 1 else model.alpha_.shape[1]
    return np.broadcast_to(c, (p,)).astype(np.float64)


def _model_state(model, std=True) -> dict:
    """The arrays that describe a fitted estimator (see the module notes); ``std``: with the variance factor."""
    name = type(model).__name__
    if name not in _ESTIMATORS:
        raise ValueError(f"cannot save a {name}: save_model writes one of nyhopt's estimators {list(_ESTIMATORS)}; "
                         f"save a scikit-learn Pipeline (or any other object) with joblib: "
                         f'joblib.dump(pipeline, "model.joblib"), read back by joblib.load("model.joblib")')
    hyper = name.startswith("Hyperopt")
    inner = getattr(model, "model_", None) if hyper else model
    if inner is None or not hasattr(inner, "alpha_"):
        raise ValueError(f"this {name} is not fitted; call fit before saving it")
    alpha = to_numpy(inner.alpha_, dtype=np.float64)
    d = int(inner.n_features_in_)
    was_1d = alpha.ndim == 1
    p = 1 if was_1d else alpha.shape[1]
    y_mean = to_numpy(getattr(inner, "y_mean_", np.zeros(p)), dtype=np.float64).reshape(-1)
    y_scale = to_numpy(getattr(inner, "y_scale_", np.ones(p)), dtype=np.float64).reshape(-1)
    scaled = hyper and bool(model.standardize) or getattr(inner, "input_mean_", None) is not None
    x_mean, x_scale = ((model.x_mean_, model.x_scale_) if hyper else
                       (inner.input_mean_, inner.input_scale_) if scaled else (np.zeros(d), np.ones(d)))
    x_mean = to_numpy(x_mean, dtype=np.float64).reshape(-1)
    x_scale = to_numpy(x_scale, dtype=np.float64).reshape(-1)
    state = {
        "estimator": np.array(name),
        "kernel": np.array(_kernel_name(inner.kernel_)),
        "lengthscale": inner.kernel_.lengthscale_array(d),
        "penalty": np.array(float(inner.penalty), dtype=np.float64),
        "centers": to_numpy(inner.centers_, dtype=np.float64),
        "alpha": alpha.reshape(alpha.shape[0], -1),
        "y_was_1d": np.array(was_1d),
        "x_mean": x_mean,
        "x_scale": x_scale,
        "y_mean": y_mean,
        "y_scale": y_scale,
        "normalize_y": np.array(bool(getattr(inner, "normalize_y", False))),
        "standardize": np.array(scaled),
        "dtype": np.array(str(np.dtype(inner.centers_.dtype))),
        "intercept": _intercept_of(inner),
        "fit_intercept": np.array(bool(getattr(inner, "fit_intercept", False))),
    }
    warp = getattr(model, "x_warp_", None) if hyper else getattr(inner, "input_warp_", None)
    if warp is not None:
        state["x_warp_features"] = np.asarray(warp.features, dtype=np.int64)
        for key in ("center", "scale", "mean", "std"):
            state["x_warp_" + key] = np.asarray(getattr(warp, key), dtype=np.float64)
    if getattr(inner, "target_transform_", None) == "log":
        state["target_transform"] = np.array("log")
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        state["feature_names"] = np.asarray(names, dtype=str)
    classes = getattr(inner, "classes_", None)
    if classes is not None:
        state["classes"] = _labels_array(classes)
    vm = getattr(inner, "variance_model_", None)
    if vm is not None and not std:
        state["variance_left_out"] = np.array(True)
    elif vm is not None:
        state["var_chol_packed"] = pack_lower(to_numpy(vm.C, dtype=np.float64))
        state["var_n_lam"] = np.array(float(vm.n_lam), dtype=np.float64)
        state["var_amplitude"] = np.array(float(vm.amplitude), dtype=np.float64)
    if hyper:
        state["objective"] = np.array(str(model.objective))
        state["ard"] = np.array(bool(model.ard))
        state["amplitude"] = np.array(float(getattr(model, "amplitude_", 1.0)), dtype=np.float64)
    state["params"] = np.array(encode_params(model.get_params(deep=False)))
    return state


def _inner_from_state(state, classifier, params=None):
    """A fitted NystromKRR / NystromKRRClassifier from the checked fields of a file.

    ``params``: the estimator's own constructor parameters (a ``NystromKRR*``
    file's ``params`` field), which replace the ones rebuilt from the fields.
    """
    from ..posterior._predictive import set_variance
    from ..estimator import NystromKRR, NystromKRRClassifier, _as_intercept
    from ..kernels import make_kernel

    lengthscale = state["lengthscale"]
    kernel = make_kernel(state["kernel"], lengthscale if lengthscale.size > 1 else float(lengthscale[0]))
    centers = state["centers"].astype(state["dtype"])
    alpha = state["alpha"]
    kw = dict(kernel=kernel, penalty=float(state["penalty"]), centers=centers, solver="direct",
              fit_intercept=state["fit_intercept"])
    if params is not None:  # the constructor parameters it was fitted with
        kw.update(params)
    intercept = state["intercept"]
    if classifier:
        model = NystromKRRClassifier(**kw)
        model.classes_ = state["classes"]
        alpha = alpha[:, 0] if alpha.shape[1] == 1 else alpha
        model.intercept_ = _as_intercept(np.zeros(alpha.shape[-1] if alpha.ndim == 2 else 1)
                                         if intercept is None else intercept, alpha.ndim == 1)
    else:
        model = NystromKRR(**{"normalize_y": state["normalize_y"], **kw})
        model.y_mean_ = state["y_mean"]
        model.y_scale_ = state["y_scale"]
        alpha = alpha[:, 0] if state["y_was_1d"] else alpha
        if intercept is None:  # written before intercept_ existed
            intercept = state["y_mean"] if state["normalize_y"] else np.zeros(state["y_mean"].shape)
        model.intercept_ = _as_intercept(intercept, state["y_was_1d"])
        model.target_transform_ = state["target_transform"]
    model.kernel_ = kernel
    model.centers_ = centers
    model.alpha_ = alpha
    model.n_features_in_ = centers.shape[1]
    model.solve_ = None
    model.converged_ = True
    scaled = state["standardize"] and not state["estimator"].startswith("Hyperopt")  # a tune model's scaling
    model.input_mean_, model.input_scale_ = (state["x_mean"], state["x_scale"]) if scaled else (None, None)
    model.input_warp_ = state["warp"] if scaled else None
    vm, reason = None, None
    if "var_chol" in state:
        from ..posterior import VarianceModel, kmm_lower

        L = kmm_lower(kernel, centers, centers.dtype, np)  # as at fit: the same kernel, centers and jitter
        vm = VarianceModel(L, state["var_chol"], float(state["var_n_lam"]), float(state["var_amplitude"]))
    elif state["variance_left_out"]:
        reason = ("it was saved by save_model(..., std=False), which leaves out the variance factor; save the "
                  "fitted model with save_model(path, model, std=True) for return_std and predict_proba")
    else:
        model.predictive_variance = False
    set_variance(model, vm, reason)
    return model


def _model_from_state(state, path):
    """Rebuild the saved estimator (fitted) from the checked fields of a file."""
    from ..hyperopt import HyperoptKRR, HyperoptKRRClassifier

    from ..estimator import NystromKRR, NystromKRRClassifier

    name = state["estimator"]
    classifier = name.endswith("Classifier")
    hyper = name.startswith("Hyperopt")
    cls = {"HyperoptKRR": HyperoptKRR, "HyperoptKRRClassifier": HyperoptKRRClassifier,
           "NystromKRR": NystromKRR, "NystromKRRClassifier": NystromKRRClassifier}[name]
    params = None
    if "params" in state:  # files written before it load with the parameters rebuilt from the fields
        params = decode_params(state["params"], cls._get_param_names(), path)
    inner = _inner_from_state(state, classifier, None if hyper else params)
    if not hyper:
        return inner
    kw = dict(objective=state["objective"], centers=inner.centers_.shape[0], ard=state["ard"],
              standardize=state["standardize"])
    kw.update(params or {})
    model = cls(**kw)
    model.model_ = inner
    model.x_mean_ = state["x_mean"]
    model.x_scale_ = state["x_scale"]
    model.x_warp_ = state["warp"] if state["standardize"] else None
    model.n_features_in_ = inner.n_features_in_
    model.amplitude_ = float(state["amplitude"])
    model.noise_variance_ = inner.noise_variance_
    model.intercept_ = inner.intercept_
    if classifier:
        model.classes_ = inner.classes_
    return model


def save_model(path, model, meta=None, std=True) -> str:
    r"""Save a fitted estimator to ``path`` (a compressed ``.npz``, no pickle).

    The file holds what ``predict`` and ``predict(X, return_std=True)`` need:
    the kernel, penalty, centers, coefficients, the input and target scalings
    and, with ``std``, the lower triangle of the variance factor :math:`C`
    (:math:`m(m+1)/2` numbers, :mod:`nyhopt.io._packed`), which is most of the
    file: 8.8 MB at :math:`m = 1500`, :math:`d = 16`, 0.2 MB without it
    (``docs/cli.md``, "Model files").

    Parameters
    ----------
    path : str or path-like
        Destination; ``.npz`` is appended when missing (as :func:`numpy.savez` does).
    model : HyperoptKRR, HyperoptKRRClassifier, NystromKRR or NystromKRRClassifier
        A fitted estimator.  A scikit-learn ``Pipeline`` (or any other object)
        is saved with joblib instead: ``joblib.dump(pipeline, "model.joblib")``.
    meta : dict, optional
        Extra values (numbers, strings or arrays of them) stored as ``meta_<key>``
        and given back by :func:`load_model` in ``model.meta_``.
    std : bool, default True
        Keep the variance factor.  False writes a small file (centers and
        coefficients, :math:`O(md)`) whose loaded model predicts but refuses
        ``return_std``, ``return_cov`` and ``predict_proba`` with an error
        that names ``save_model(..., std=True)``.

    Returns
    -------
    str
        The path written.

    Raises
    ------
    ValueError
        If the model is not fitted or not one of the supported estimators
        (the message names joblib for a Pipeline or any other object).
    TypeError
        ``meta`` is not a dict, or ``std`` not a bool.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> from nyhopt.io import save_model, load_model
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2)); y = X[:, 0] ** 2
    >>> model = nh.NystromKRR(nh.GaussianKernel(1.0), penalty=1e-4, centers=10, random_state=0).fit(X, y)
    >>> path = save_model(os.path.join(tempfile.mkdtemp(), "model"), model)
    >>> path.endswith(".npz"), bool(np.allclose(load_model(path).predict(X), model.predict(X)))
    (True, True)
    """
    path = _fspath(path)
    if meta is not None and not isinstance(meta, dict):
        raise TypeError(f"meta must be a dict of names to values, got {type(meta).__name__}")
    if not isinstance(std, (bool, np.bool_)):
        raise TypeError(f"std must be True or False, got {std!r}")
    state = _model_state(model, bool(std))
    arrays = {"format": np.array(FORMAT), "version": np.array(VERSION)}
    arrays.update(state)
    for key, value in (meta or {}).items():
        arr = np.asarray(value)
        if arr.dtype.kind == "O":
            arr = arr.astype(str)
        arrays[f"meta_{key}"] = arr
    if not path.endswith(".npz"):
        path += ".npz"
    np.savez_compressed(path, **arrays)
    return path


def load_model(path):
    """Load an estimator saved by :func:`save_model`.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    estimator
        A fitted estimator of the saved class, on the host (NumPy), ready to
        ``predict``; ``meta_`` holds the saved extra values, and
        ``feature_names_in_`` the column names of a model fitted on a
        DataFrame (or tuned by the command line).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    DataError
        If the file is not an nyhopt model file, is damaged (a truncated or
        corrupted archive), is from a newer format version, or has a field
        that is missing or of the wrong kind, shape or value (NaN, infinity,
        a non-positive penalty or scale ...); the message names the field.
        Nothing in the file is unpickled.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> X = np.random.default_rng(0).uniform(-1, 1, (100, 2)); y = np.sin(3 * X[:, 0])
    >>> model = nh.NystromKRR(nh.GaussianKernel(0.5), penalty=1e-6, centers=20, solver="direct",
    ...                       random_state=0).fit(X, y)
    >>> path = os.path.join(tempfile.mkdtemp(), "model.npz")
    >>> loaded = nh.load_model(nh.save_model(path, model))
    >>> bool(np.allclose(loaded.predict(X), model.predict(X)))
    True
    """
    path = _fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"file not found: {path}")
    state = read_npz(path)
    model = _model_from_state(validate_state(state, path), path)
    model.meta_ = {k[5:]: (v.item() if v.ndim == 0 else v) for k, v in state.items() if k.startswith("meta_")}
    # Column names: the file's own, else those the command line kept in its summary (older files).
    names = state.get("feature_names")
    if names is None:
        names = model.meta_.get("feature_names")
    names = None if names is None else np.atleast_1d(np.asarray(names))
    if names is not None and names.dtype.kind == "U" and names.shape == (model.n_features_in_,):
        model.feature_names_in_ = names.astype(object)
    return model
