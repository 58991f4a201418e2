"""Datasets of the paper's experiments, a seeded synthetic problem, and error metrics.

The real datasets are read in place from a local data folder (one sub-folder
per dataset, the files kept exactly as obtained; see ``shared/data/README.md``)
or, when there is none, downloaded once into a per-user cache from pinned URLs
and checked against their SHA-256 (``nyhopt.datasets._fetch`` lists the sources and
licenses: UCI, LIBSVM, StatLib). They are preprocessed as in the paper's
appendix:

* random train/test split seeded by ``seed`` (70/30 or 80/20), or the fixed
  split that comes with the data;
* the design matrix is standardized with the training mean and standard
  deviation (a constant training column is only centered);
* regression labels are standardized with the training mean and standard
  deviation (``Dataset.y_mean``, ``Dataset.y_std`` keep the statistics);
* binary labels are -1/+1.

The test error the paper reports is computed by :meth:`Dataset.error` from
predictions on the standardized scale: NRMSE on the original label scale for
regression, classification error for classification.

| name        | files                           | rows       | d  | split | metric  |
|-------------|---------------------------------|------------|----|-------|---------|
| spacega     | spacega/space_ga_scale.csv      | 3107       | 6  | 70/30 | nrmse   |
| mg          | mg/mg_scale.csv                 | 1385       | 6  | 70/30 | nrmse   |
| cpusmall    | cpusmall/cpusmall_scale.csv     | 8192       | 12 | 70/30 | nrmse   |
| abalone     | abalone/abalone.data            | 4177       | 10 | 70/30 | nrmse   |
| energy      | energy/ENB2012_data.csv         | 768        | 8  | 80/20 | nrmse   |
| protein     | protein/CASP.csv                | 45730      | 9  | 80/20 | nrmse   |
| svmguide1   | svmguide1/svmguide1{,.t}        | 3089+4000  | 4  | fixed | c-error |
| higgs_small | higgs_small/binary.{train,test} | 7000+500   | 28 | fixed | c-error |

Abalone's first column (sex: M, F or I) is one-hot encoded into three 0/1
columns (in the order F, I, M) placed first, so abalone has 10 features here
(the paper's LIBSVM version has 8, with sex coded as one number). Energy's
label is Y1 (heating load); Y2 is dropped. SpaceGA is read from the
LIBSVM-scaled file (its features are standardized again; its label agrees
with the raw ``space_ga.csv`` to 6 digits).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from . import _fetch
from ..metrics._error_metrics import c_error, nrmse, rmse
from ._parsers import read_abalone as _read_abalone
from ._parsers import read_dense_csv as _read_dense_csv
from ._parsers import read_energy as _read_energy
from ._parsers import read_libsvm as _read_libsvm
from ._fetch import DatasetChecksumError, DatasetNotAvailableError

__all__ = [
    "DatasetNotAvailableError",
    "DatasetChecksumError",
    "Dataset",
    "available_datasets",
    "load_dataset",
    "synthetic",
    "nrmse",
    "rmse",
    "c_error",
    "find_data_dir",
]


class _Spec(NamedTuple):
    files: tuple  # relative paths inside data_dir
    task: str
    metric: str
    test_fraction: float | None  # None: fixed split (two files)


_SPECS = {
    "spacega": _Spec(("spacega/space_ga_scale.csv",), "regression", "nrmse", 0.3),
    "mg": _Spec(("mg/mg_scale.csv",), "regression", "nrmse", 0.3),
    "cpusmall": _Spec(("cpusmall/cpusmall_scale.csv",), "regression", "nrmse", 0.3),
    "abalone": _Spec(("abalone/abalone.data",), "regression", "nrmse", 0.3),
    "energy": _Spec(("energy/ENB2012_data.csv",), "regression", "nrmse", 0.2),
    "protein": _Spec(("protein/CASP.csv",), "regression", "nrmse", 0.2),
    "svmguide1": _Spec(("svmguide1/svmguide1", "svmguide1/svmguide1.t"), "binary", "c-error", None),
    "higgs_small": _Spec(("higgs_small/binary.train", "higgs_small/binary.test"), "binary", "c-error", None),
}

_ENV_VAR = "NYHOPT_DATA"


# --------------------------------------------------------------------------- metrics (nyhopt.metrics._error_metrics)
_METRICS = {"nrmse": nrmse, "c-error": c_error, "rmse": rmse}


# --------------------------------------------------------------------------- Dataset


class Dataset(NamedTuple):
    """A train/test split, preprocessed, with the statistics needed to report errors.

    Attributes
    ----------
    name : str
        Dataset name (see :func:`available_datasets`) or ``"synthetic"``.
    X_train, X_test : ndarray of shape (n_train, d), (n_test, d)
        Standardized design matrices (training statistics).
    y_train, y_test : ndarray of shape (n_train,), (n_test,)
        Standardized targets (regression) or -1/+1 labels (binary).
    task : str
        ``"regression"``, ``"binary"`` or ``"multiclass"``.
    metric : str
        ``"nrmse"``, ``"c-error"`` or ``"rmse"`` (synthetic data).
    y_mean, y_std : float
        Label standardization: original labels are ``y * y_std + y_mean``
        (0 and 1 for classification and synthetic data).

    Examples
    --------
    >>> from nyhopt.datasets import synthetic
    >>> ds = synthetic(200, n_test=50)
    >>> ds.X_train.shape, ds.y_test.shape, ds.metric
    ((200, 8), (50,), 'rmse')
    >>> round(ds.error(ds.y_test), 12)
    0.0
    """

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    task: str
    metric: str
    y_mean: float = 0.0
    y_std: float = 1.0

    def to_original(self, y):
        """Map standardized targets or predictions back to the original label scale.

        Parameters
        ----------
        y : array_like
            Values on the standardized scale.

        Returns
        -------
        ndarray
            ``y * y_std + y_mean`` (a new float64 array).

        Examples
        --------
        >>> from nyhopt.datasets import Dataset
        >>> import numpy as np
        >>> ds = Dataset("toy", np.zeros((1, 1)), np.zeros(1), np.zeros((1, 1)),
        ...              np.zeros(1), "regression", "nrmse", y_mean=3.0, y_std=2.0)
        >>> ds.to_original([0.0, 1.0])
        array([3., 5.])
        """
        from ..backend import to_numpy

        return to_numpy(y, dtype=np.float64) * self.y_std + self.y_mean

    def error(self, y_pred, y_true=None) -> float:
        """The paper's test error of standardized predictions.

        Parameters
        ----------
        y_pred : array_like of shape (n,) or (n, 1)
            Predictions on the standardized scale (as returned by a model
            fitted on ``X_train, y_train``).
        y_true : array_like, optional
            Standardized targets; default ``self.y_test``.

        Returns
        -------
        float
            NRMSE on the original label scale (regression), classification
            error (binary, multiclass) or RMSE (synthetic data).

        Examples
        --------
        >>> from nyhopt.datasets import load_dataset
        >>> ds = load_dataset("mg")
        >>> round(ds.error(ds.y_test), 12)
        0.0
        """
        if y_true is None:
            y_true = self.y_test
        metric = _METRICS[self.metric]
        if self.metric == "nrmse":
            return metric(self.to_original(y_true), self.to_original(y_pred))
        return metric(y_true, y_pred)


def available_datasets() -> list[str]:
    """Names accepted by :func:`load_dataset`.

    Returns
    -------
    list of str
        The dataset names, in the order of the paper's tables.

    Examples
    --------
    >>> from nyhopt.datasets import available_datasets
    >>> available_datasets()[:3]
    ['spacega', 'mg', 'cpusmall']
    """
    return list(_SPECS)


# --------------------------------------------------------------------------- locating data


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def find_data_dir(data_dir=None) -> Path:
    """Locate the folder that holds one sub-folder per dataset.

    Parameters
    ----------
    data_dir : str or path-like, optional
        Used as is when given. Otherwise the environment variable
        ``NYHOPT_DATA``, else the first existing of ``../shared/data``
        relative to the current directory and relative to the repository root
        (the parent of the package directory).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    FileNotFoundError
        If no candidate exists; the message lists where it looked.

    Examples
    --------
    >>> from nyhopt.datasets import find_data_dir
    >>> (find_data_dir() / "mg").is_dir()
    True
    """
    path = _local_data_dir(data_dir)
    if path is None:
        looked = ", ".join(str(p) for p in _shared_candidates())
        raise FileNotFoundError(
            f"no dataset folder found: pass data_dir=..., set {_ENV_VAR}, "
            f"or provide ../shared/data (looked in: {looked})"
        )
    return path


def _shared_candidates():
    return [Path.cwd() / ".." / "shared" / "data", _repo_root() / ".." / "shared" / "data"]


def _local_data_dir(data_dir=None):
    """The local data folder as :func:`find_data_dir` finds it, or None if there is none."""
    if data_dir is not None:
        if not isinstance(data_dir, (str, os.PathLike)):
            raise TypeError(f"data_dir must be a str or path-like, got {type(data_dir).__name__}")
        path = Path(data_dir).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"data_dir {str(path)!r} is not a directory")
        return path
    env = os.environ.get(_ENV_VAR)
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(
                f"environment variable {_ENV_VAR}={env!r} is not a directory"
            )
        return path
    for path in _shared_candidates():
        if path.is_dir():
            return path.resolve()
    return None


# --------------------------------------------------------------------------- reading (nyhopt.datasets._parsers)


def _read_one(name, path):
    if name == "abalone":
        return _read_abalone(path)
    if name == "energy":
        return _read_energy(path)
    if name == "protein":
        return _read_dense_csv(path, skip_header=1)
    if name == "svmguide1":
        return _read_libsvm(path, n_features=4)
    if name == "higgs_small":
        return _read_dense_csv(path, delimiter="\t")
    return _read_dense_csv(path)


@functools.lru_cache(maxsize=16)
def _read_raw(name: str, data_dir: str):
    """Parsed raw arrays of one dataset, cached; every array is read-only."""
    spec = _SPECS[name]
    parts = []
    for rel in spec.files:
        path = Path(data_dir) / rel
        if not path.is_file():
            raise FileNotFoundError(f"dataset {name!r}: file {str(path)!r} not found")
        X, y = _read_one(name, path)
        X.setflags(write=False)
        y.setflags(write=False)
        parts.append((X, y))
    return tuple(parts)


# --------------------------------------------------------------------------- loading


def _check_dtype(dtype):
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be float32 or float64, got {dtype!r}") from None
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    return dtype


def _check_seed(seed):
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")


def _split(n, test_fraction, seed):
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    n_train = int(round((1.0 - test_fraction) * n))
    return perm[:n_train], perm[n_train:]


def _standardize_columns(X_train, X_test):
    mean = X_train.mean(axis=0)
    std = X_train.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    return (X_train - mean) / std, (X_test - mean) / std


def load_dataset(name, data_dir=None, seed=0, dtype=np.float64, cache_dir=None) -> Dataset:
    """Load one of the paper's datasets, split and preprocessed as in the paper.

    Parameters
    ----------
    name : str
        One of :func:`available_datasets` (case-insensitive; ``"space_ga"``
        and ``"higgs"`` are accepted aliases).
    data_dir : str or path-like, optional
        Folder with one sub-folder per dataset, read in place; see
        :func:`find_data_dir`. Without it, ``NYHOPT_DATA`` and
        ``../shared/data`` are tried; when none exists the files are
        downloaded into the cache (see ``cache_dir``).
    seed : int, default 0
        Seed of the random train/test split (``numpy.random.default_rng(seed)
        .permutation(n)``; the first ``round((1 - f) n)`` rows train). Ignored
        for datasets with a fixed split (svmguide1, higgs_small).
    dtype : {numpy.float64, numpy.float32}, default numpy.float64
        dtype of the returned arrays (preprocessing is done in float64).
    cache_dir : str or path-like, optional
        Download cache, used only when no local data folder is found:
        default the environment variable ``NYHOPT_CACHE``, else
        ``pooch.os_cache("nyhopt")`` (e.g. ``~/.cache/nyhopt``). Each file is
        downloaded once from a pinned URL, checked against its SHA-256 and
        kept as ``<cache_dir>/<name>/<file>``.

    Returns
    -------
    Dataset
        Standardized data; regression labels standardized with the training
        statistics (kept in ``y_mean``, ``y_std``), binary labels -1/+1. The
        arrays are fresh copies: modifying them does not affect later loads.

    Raises
    ------
    ValueError
        If ``name`` or ``dtype`` is not supported or ``seed`` is negative.
    TypeError
        If ``name`` is not a str, ``seed`` not an int, ``dtype`` not a
        dtype, or ``data_dir`` / ``cache_dir`` not path-like.
    FileNotFoundError
        If the given data folder or a file in a local data folder is missing;
        :class:`DatasetNotAvailableError` (a subclass) if a file is not
        cached and cannot be downloaded (offline).
    DatasetChecksumError
        A ``ValueError``: a downloaded file does not match its checksum (it
        is not kept).

    Examples
    --------
    >>> from nyhopt.datasets import load_dataset
    >>> ds = load_dataset("energy", seed=0)
    >>> ds.X_train.shape, ds.X_test.shape, ds.task, ds.metric
    ((614, 8), (154, 8), 'regression', 'nrmse')
    >>> round(float(ds.y_train.mean()), 12), round(float(ds.y_train.std()), 12)
    (0.0, 1.0)
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_")
    key = {"space_ga": "spacega", "higgs": "higgs_small", "smallhiggs": "higgs_small"}.get(key, key)
    if key not in _SPECS:
        raise ValueError(f"unknown dataset name {name!r}; available: {available_datasets()}")
    dtype = _check_dtype(dtype)
    _check_seed(seed)
    spec = _SPECS[key]
    root = _local_data_dir(data_dir)
    if root is None:
        root = _fetch.cache_root(cache_dir)
        for rel in spec.files:
            _fetch.fetch(rel, root)
    elif cache_dir is not None:
        _fetch.cache_root(cache_dir)  # type check only: local copies are read in place
    parts = _read_raw(key, str(root))

    if spec.test_fraction is None:
        (X_tr, y_tr), (X_te, y_te) = parts
    else:
        ((X, y),) = parts
        tr, te = _split(X.shape[0], spec.test_fraction, int(seed))
        X_tr, y_tr, X_te, y_te = X[tr], y[tr], X[te], y[te]

    X_tr, X_te = _standardize_columns(X_tr, X_te)
    y_mean, y_std = 0.0, 1.0
    if spec.task == "regression":
        y_mean = float(y_tr.mean())
        y_std = float(y_tr.std()) or 1.0
        y_tr = (y_tr - y_mean) / y_std
        y_te = (y_te - y_mean) / y_std
    else:
        y_tr = np.where(y_tr > 0, 1.0, -1.0)
        y_te = np.where(y_te > 0, 1.0, -1.0)

    def cast(a):
        return np.ascontiguousarray(a, dtype=dtype).copy()

    return Dataset(key, cast(X_tr), cast(y_tr), cast(X_te), cast(y_te),
                   spec.task, spec.metric, y_mean, y_std)


# --------------------------------------------------------------------------- synthetic


def _synthetic_target(X):
    x = X
    return (np.sin(3 * x[:, 0]) + np.cos(2 * x[:, 1]) + 0.5 * x[:, 2] * x[:, 3]
            + 0.3 * x[:, 4] ** 2 + 0.2 * np.sin(5 * x[:, 5]) + 0.1 * x[:, 6])


def synthetic(n, d=8, n_test=5000, seed=1234, dtype=np.float64) -> Dataset:
    """The problem of nyhopt's benchmarks (``docs/benchmarks.md``): a smooth function of 7 features.

    ``f(x) = sin(3 x0) + cos(2 x1) + 0.5 x2 x3 + 0.3 x4^2 + 0.2 sin(5 x5) + 0.1 x6``;
    features from index 7 on are irrelevant.

    Parameters
    ----------
    n : int
        Number of training rows (>= 1).
    d : int, default 8
        Number of features (>= 7).
    n_test : int, default 5000
        Number of test rows (>= 0).
    seed : int, default 1234
        Seed (>= 0) of the single generator ``numpy.random.default_rng(seed)``.
    dtype : {numpy.float64, numpy.float32}, default numpy.float64
        dtype of the returned arrays (the draws are float64, then cast).

    Returns
    -------
    Dataset
        ``name="synthetic"``, ``task="regression"``, ``metric="rmse"``; the
        data are not standardized (``y_mean=0``, ``y_std=1``).

    Raises
    ------
    TypeError
        If ``n``, ``d``, ``n_test`` or ``seed`` is not an int (bools are
        rejected) or ``dtype`` is not a dtype.
    ValueError
        If one of them is out of range or ``dtype`` is not float32/float64.

    Notes
    -----
    Exact draw order, all from one generator ``rng``:

    1. ``X_train = rng.uniform(-1.5, 1.5, size=(n, d))``
    2. ``noise = rng.standard_normal(n)``; ``y_train = f(X_train) + 0.1 * noise``
    3. ``X_test = rng.uniform(-1.5, 1.5, size=(n_test, d))``;
       ``y_test = f(X_test)`` (noiseless, no draw).

    Examples
    --------
    >>> from nyhopt.datasets import synthetic
    >>> ds = synthetic(1000, n_test=10)
    >>> ds.X_train.shape, ds.X_test.shape
    ((1000, 8), (10, 8))
    >>> bool(abs(ds.X_train).max() <= 1.5)
    True
    """
    for value, label, low in ((n, "n", 1), (d, "d", 7), (n_test, "n_test", 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{label} must be an int, got {type(value).__name__}")
        if value < low:
            raise ValueError(f"{label} must be >= {low}, got {value}")
    dtype = _check_dtype(dtype)
    _check_seed(seed)
    rng = np.random.default_rng(seed)
    X_train = rng.uniform(-1.5, 1.5, size=(int(n), int(d)))
    y_train = _synthetic_target(X_train) + 0.1 * rng.standard_normal(int(n))
    X_test = rng.uniform(-1.5, 1.5, size=(int(n_test), int(d)))
    y_test = _synthetic_target(X_test)
    return Dataset("synthetic", X_train.astype(dtype), y_train.astype(dtype),
                   X_test.astype(dtype), y_test.astype(dtype), "regression", "rmse", 0.0, 1.0)
