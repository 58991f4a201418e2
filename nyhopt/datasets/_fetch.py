"""Download the paper's datasets into a per-user cache, checksummed (with Pooch).

Every file that :func:`nyhopt.datasets.load_dataset` reads has an entry in
:data:`REGISTRY`: a commit-pinned download URL and the SHA-256 of the file.
A file is fetched at most once into ``<cache>/<dataset>/<file>`` (the same
layout as a local data folder), verified, and read from there afterwards.

Sources (the paper's original source and its license, then where the exact
bytes are fetched from):

* spacega, mg, cpusmall: LIBSVM regression data sets (``*_scale`` versions;
  space_ga originally from StatLib, mg from the Mackey-Glass series, cpusmall
  from the Delve "comp-activ" data); dense CSV conversion from GitHub
  Karlmyh/RTER (no license stated for the data there).
* abalone: UCI Machine Learning Repository, CC BY 4.0; fetched from UCI.
* energy: UCI "Energy Efficiency" (ENB2012), CC BY 4.0; CSV export from
  GitHub tatianaesc/datasets.
* protein: UCI "Physicochemical Properties of Protein Tertiary Structure"
  (CASP.csv), CC BY 4.0; from GitHub himabindu26/BioInformatics.
* svmguide1: LIBSVM binary data sets; from GitHub lxcnju/svm_gradient_descent
  (no license stated there).
* higgs_small: 7000 + 500 events of UCI HIGGS (Baldi et al. 2014, CC BY 4.0),
  as shipped with LightGBM's examples (MIT license), GitHub microsoft/LightGBM.

Every loader file has a pinned URL, so :data:`UNAVAILABLE` is empty; a file
listed there has no pinned source and must be provided locally.

``NYHOPT_DATA_URL`` (a base URL) replaces every registry URL by
``<base>/<dataset>/<file>``, for a mirror with the layout of a data folder;
the checksums stay those of the registry.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "REGISTRY",
    "UNAVAILABLE",
    "DatasetNotAvailableError",
    "DatasetChecksumError",
    "cache_root",
    "fetch",
]

CACHE_ENV = "NYHOPT_CACHE"
BASE_URL_ENV = "NYHOPT_DATA_URL"


class _Remote(NamedTuple):
    url: str
    sha256: str


def _github(repo: str, commit: str, path: str) -> str:
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


_RTER = ("Karlmyh/RTER", "9ff0d98802566df00fc243edee53556071fce954")
_LIGHTGBM = ("microsoft/LightGBM", "bae0b7ba953341a32b2a9c5c5c437a1b976f576f")
_SVMGUIDE = ("lxcnju/svm_gradient_descent", "ffd8d329ca82435a6eff537c1e69ba66f8d61152")

#: ``"<dataset>/<file>"`` -> pinned URL and SHA-256 of the exact bytes the loader reads.
REGISTRY = {
    "spacega/space_ga_scale.csv": _Remote(
        _github(*_RTER, "data/real_data_cleaned/space_ga_scale.csv"),
        "53477e45da7489af6eaf4d05ae6f770a0b53260e3be72988e0c97c0d9574cf19"),
    "mg/mg_scale.csv": _Remote(
        _github(*_RTER, "data/real_data_cleaned/mg_scale.csv"),
        "eacd501e082717b4a5238760c6cf8ea2b17ed98d3a18071c3328760439177dd1"),
    "cpusmall/cpusmall_scale.csv": _Remote(
        _github(*_RTER, "data/real_data_cleaned/cpusmall_scale.csv"),
        "1800ee7b67ecdbeee5028cd221867135cbf070d5d3d307c355994eb8c74dc903"),
    "abalone/abalone.data": _Remote(
        "https://archive.ics.uci.edu/ml/machine-learning-databases/abalone/abalone.data",
        "de37cdcdcaaa50c309d514f248f7c2302a5f1f88c168905eba23fe2fbc78449f"),
    "energy/ENB2012_data.csv": _Remote(
        _github("tatianaesc/datasets", "bb87e2860ab71b6735246bb261a190b4ade24993", "ENB2012_data.csv"),
        "bdfca445861098e12469ae37f5365b038652e5787112b03a26d4a02900f7d884"),
    "protein/CASP.csv": _Remote(
        _github("himabindu26/BioInformatics", "4331e93121287d4300991ebe9de49ce62b3b93a1", "CASP.csv"),
        "712d2759f8113622a3ba93a47e451397147df946111f6ffdd8c655385d564aef"),
    "svmguide1/svmguide1": _Remote(
        _github(*_SVMGUIDE, "data/svmguide1"),
        "672e1a467b3f59589a6f1f3d43f93940d88589675ededb52090140fc1dc83971"),
    "svmguide1/svmguide1.t": _Remote(
        _github(*_SVMGUIDE, "data/svmguide1.t"),
        "f9c2fd4c725172aeb4476fc1e2327d537f7fbc2f53f49dfd073f80efbe1ba8f7"),
    "higgs_small/binary.train": _Remote(
        _github(*_LIGHTGBM, "examples/binary_classification/binary.train"),
        "41c42dc14f86960256bf872fc8ae6286c688b44f43b4057b29428787fc1e0444"),
    "higgs_small/binary.test": _Remote(
        _github(*_LIGHTGBM, "examples/binary_classification/binary.test"),
        "d99ebec91acd99638f00c727c251c947a1d17ddfcbea27bfef6b0dc5e5fb1db3"),
}

#: ``"<dataset>/<file>"`` -> why no pinned URL can provide it (none at present).
UNAVAILABLE: dict[str, str] = {}


class DatasetNotAvailableError(FileNotFoundError):
    """A dataset file is not cached and cannot be downloaded (offline, no pinned URL).

    A ``FileNotFoundError``, as raised for a missing local data file. The
    message names the file, the URL tried and where to put a copy.

    Examples
    --------
    >>> from nyhopt.datasets import DatasetNotAvailableError
    >>> issubclass(DatasetNotAvailableError, FileNotFoundError)
    True
    """


class DatasetChecksumError(ValueError):
    """A downloaded file does not match its registered SHA-256; it was not kept.

    Examples
    --------
    >>> from nyhopt.datasets import DatasetChecksumError
    >>> issubclass(DatasetChecksumError, ValueError)
    True
    """


def cache_root(cache_dir=None) -> Path:
    """The download cache: ``cache_dir``, else ``$NYHOPT_CACHE``, else the per-user cache.

    Parameters
    ----------
    cache_dir : str or path-like, optional
        Folder to download into (created when needed).

    Returns
    -------
    pathlib.Path
        ``cache_dir``, else the environment variable ``NYHOPT_CACHE``, else
        ``pooch.os_cache("nyhopt")`` (e.g. ``~/.cache/nyhopt`` on Linux).

    Raises
    ------
    TypeError
        If ``cache_dir`` is not a str or path-like.
    """
    if cache_dir is not None:
        if not isinstance(cache_dir, (str, os.PathLike)):
            raise TypeError(f"cache_dir must be a str or path-like, got {type(cache_dir).__name__}")
        return Path(cache_dir).expanduser()
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    import pooch

    return Path(pooch.os_cache("nyhopt"))


def _url(rel: str) -> str:
    base = os.environ.get(BASE_URL_ENV)
    if base:
        return f"{base.rstrip('/')}/{rel}"
    return REGISTRY[rel].url


def fetch(rel: str, root: Path) -> Path:
    """Return ``root / rel``, downloading and verifying it first if it is not there.

    Parameters
    ----------
    rel : str
        ``"<dataset>/<file>"``, a key of :data:`REGISTRY`.
    root : pathlib.Path
        The cache folder (see :func:`cache_root`).

    Returns
    -------
    pathlib.Path
        The verified file in the cache.

    Raises
    ------
    DatasetNotAvailableError
        If the file has no pinned URL, or the download failed (offline,
        server error); the message names the file, the URL and where to put
        a copy.
    DatasetChecksumError
        If the downloaded bytes do not match the registered SHA-256 (the
        download is deleted, nothing is cached).
    """
    target = root / rel
    if rel in UNAVAILABLE:
        raise DatasetNotAvailableError(
            f"dataset file {rel!r} cannot be downloaded ({UNAVAILABLE[rel]}); put a copy at "
            f"{str(target)!r}, or pass data_dir=... / set NYHOPT_DATA to a folder holding {rel!r}"
        )
    import pooch
    import requests

    remote = REGISTRY[rel]
    url = _url(rel)
    created = _missing_folders(target.parent)  # removed again when the download fails
    try:
        downloader = pooch.downloaders.choose_downloader(url)
    except ValueError as exc:
        raise ValueError(f"cannot download {url} (check {BASE_URL_ENV}): {exc}") from None
    try:
        path = pooch.retrieve(url, known_hash=f"sha256:{remote.sha256}", fname=target.name,
                              path=target.parent, downloader=downloader)
    except ValueError as exc:  # pooch's hash mismatch; its temporary file is already deleted
        _remove_empty(created)
        raise DatasetChecksumError(
            f"dataset file {rel!r} downloaded from {url} does not match its SHA-256 "
            f"{remote.sha256} (corrupted or truncated download, or the source changed); "
            f"it was not saved. {exc}"
        ) from None
    except (requests.exceptions.RequestException, OSError) as exc:
        _remove_empty(created)
        stale = " (the copy there fails the checksum)" if target.exists() else ""
        # ``from None``: the chain of connection errors below says no more than the reason given here.
        raise DatasetNotAvailableError(
            f"dataset file {rel!r} is not in the cache and could not be downloaded from {url} "
            f"({_reason(exc)}). Put a copy at {str(target)!r}{stale}, or pass "
            f"data_dir=... / set NYHOPT_DATA to a folder holding {rel!r}"
        ) from None
    return Path(path)


def _missing_folders(folder: Path) -> list:
    """``folder`` and those of its parents that do not exist yet, deepest first."""
    out = []
    folder = Path(folder)
    while not folder.exists() and folder != folder.parent:
        out.append(folder)
        folder = folder.parent
    return out


def _remove_empty(folders) -> None:
    """Remove the folders a failed download created, deepest first, as long as they are empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty (something else wrote there) or already gone
            return


def _reason(exc) -> str:
    """Why a download failed, in a few words (a connection error's text is a long chain)."""
    import requests

    if isinstance(exc, requests.exceptions.HTTPError) and exc.response is not None:
        return f"HTTP {exc.response.status_code} {exc.response.reason or ''}".strip()
    if isinstance(exc, requests.exceptions.Timeout):
        return "the connection timed out"
    if isinstance(exc, requests.exceptions.ConnectionError):
        text = str(exc)
        if "NameResolution" in text or "name resolution" in text or "getaddrinfo" in text:
            return "no connection: the host name could not be resolved (offline?)"
        if "Connection refused" in text:
            return "no connection: connection refused"
        return "no connection (offline?)"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = text if len(text) <= 160 else text[:157] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
