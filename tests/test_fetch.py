"""Tests of the dataset download cache (nyhopt.datasets._fetch) against a local HTTP server.

The server runs on 127.0.0.1 and serves the project's data folder, so no test
touches the internet.
"""
import hashlib
import http.server
import re
import socket
import threading
from pathlib import Path

import numpy as np
import pooch
import pytest

from conftest import DATA_DIR
from nyhopt.datasets import _fetch
from nyhopt import datasets
from nyhopt.datasets._fetch import DatasetChecksumError, DatasetNotAvailableError
from nyhopt.datasets import load_dataset

DATA = DATA_DIR
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} not found (set NYHOPT_DATA)")


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves DATA; records each GET; ``mode`` "flip" or "truncate" corrupts the body."""

    requests: list = []
    mode = "ok"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=str(DATA), **kwargs)

    def do_GET(self):  # noqa: N802 - http.server API
        type(self).requests.append(self.path)
        if self.mode == "ok":
            return super().do_GET()
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            return self.send_error(404)
        body = bytearray(path.read_bytes())
        if self.mode == "flip":
            body[len(body) // 2] ^= 0x01
        else:
            del body[len(body) // 2:]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(bytes(body))

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    handler = type("Handler", (_Handler,), {"requests": [], "mode": "ok"})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    handler.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield handler
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=10)


@pytest.fixture
def no_local_data(tmp_path, monkeypatch):
    """No data_dir, NYHOPT_DATA or ../shared/data: load_dataset must use the cache."""
    monkeypatch.delenv("NYHOPT_DATA", raising=False)
    monkeypatch.delenv("NYHOPT_CACHE", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(datasets, "_repo_root", lambda: tmp_path / "nowhere" / "repo")
    return tmp_path / "cache"


def _refused_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_registry_lists_every_loader_file_with_a_pinned_url():
    needed = {rel for spec in datasets._SPECS.values() for rel in spec.files}
    assert needed == set(_fetch.REGISTRY) | set(_fetch.UNAVAILABLE)
    for rel, remote in _fetch.REGISTRY.items():
        assert re.fullmatch(r"[0-9a-f]{64}", remote.sha256), rel
        pinned = re.fullmatch(r"https://raw\.githubusercontent\.com/[\w.-]+/[\w.-]+/[0-9a-f]{40}/.+",
                              remote.url)
        uci = remote.url.startswith("https://archive.ics.uci.edu/")
        assert pinned or uci, remote.url


@needs_data
def test_registry_checksums_match_the_local_copies():
    for rel, remote in _fetch.REGISTRY.items():
        assert _sha256(DATA / rel) == remote.sha256, rel


@needs_data
def test_download_verify_cache_then_no_second_download(server, no_local_data, monkeypatch):
    monkeypatch.setenv("NYHOPT_DATA_URL", server.url)
    cache = no_local_data
    ds = load_dataset("svmguide1", cache_dir=cache)
    assert sorted(server.requests) == ["/svmguide1/svmguide1", "/svmguide1/svmguide1.t"]
    for rel in ("svmguide1/svmguide1", "svmguide1/svmguide1.t"):
        assert _sha256(cache / rel) == _fetch.REGISTRY[rel].sha256
    local = load_dataset("svmguide1", data_dir=DATA)
    np.testing.assert_array_equal(ds.X_train, local.X_train)
    np.testing.assert_array_equal(ds.y_test, local.y_test)
    again = load_dataset("svmguide1", cache_dir=cache, seed=3)
    assert len(server.requests) == 2  # read from the cache
    np.testing.assert_array_equal(again.X_test, ds.X_test)


@needs_data
def test_cache_from_environment_and_offline_reuse(server, no_local_data, monkeypatch):
    cache = no_local_data
    monkeypatch.setenv("NYHOPT_CACHE", str(cache))
    monkeypatch.setenv("NYHOPT_DATA_URL", server.url)
    load_dataset("mg")
    assert server.requests == ["/mg/mg_scale.csv"]
    assert (cache / "mg" / "mg_scale.csv").is_file()
    monkeypatch.setenv("NYHOPT_DATA_URL", _refused_url())
    ds = load_dataset("mg", seed=1)  # offline, but cached
    assert ds.X_train.shape == (969, 6)


@needs_data
def test_local_copies_are_read_in_place_not_cached(server, tmp_path, monkeypatch):
    monkeypatch.setenv("NYHOPT_DATA_URL", server.url)
    cache = tmp_path / "cache"
    load_dataset("mg", data_dir=DATA, cache_dir=cache)
    monkeypatch.setenv("NYHOPT_DATA", str(DATA))
    load_dataset("energy", cache_dir=cache)
    assert server.requests == [] and not cache.exists()


@needs_data
@pytest.mark.parametrize("mode", ["flip", "truncate"])
def test_corrupted_download_is_rejected_and_not_cached(server, no_local_data, monkeypatch, mode):
    monkeypatch.setenv("NYHOPT_DATA_URL", server.url)
    cache = no_local_data
    server.mode = mode
    with pytest.raises(DatasetChecksumError, match=r"'mg/mg_scale.csv'.*SHA-256.*not saved") as info:
        load_dataset("mg", cache_dir=cache)
    assert isinstance(info.value, ValueError)
    assert server.url + "/mg/mg_scale.csv" in str(info.value)
    # no file, no temporary, and no empty folder left behind
    assert not (cache / "mg").exists()
    server.mode = "ok"
    load_dataset("mg", cache_dir=cache)
    assert _sha256(cache / "mg" / "mg_scale.csv") == _fetch.REGISTRY["mg/mg_scale.csv"].sha256


@needs_data
def test_corrupted_cached_file_is_downloaded_again(server, no_local_data, monkeypatch):
    monkeypatch.setenv("NYHOPT_DATA_URL", server.url)
    cache = no_local_data
    target = cache / "mg" / "mg_scale.csv"
    target.parent.mkdir(parents=True)
    target.write_text("1,2,3\n")
    ds = load_dataset("mg", cache_dir=cache)
    assert server.requests == ["/mg/mg_scale.csv"] and ds.X_train.shape == (969, 6)


def test_offline_and_not_cached_names_file_url_and_where_to_put_it(no_local_data, monkeypatch):
    base = _refused_url()
    monkeypatch.setenv("NYHOPT_DATA_URL", base)
    cache = no_local_data
    with pytest.raises(FileNotFoundError) as info:
        load_dataset("mg", cache_dir=cache)
    assert isinstance(info.value, DatasetNotAvailableError)
    msg = str(info.value)
    assert "'mg/mg_scale.csv'" in msg
    assert f"{base}/mg/mg_scale.csv" in msg
    assert str(cache / "mg" / "mg_scale.csv") in msg
    assert "data_dir" in msg and "NYHOPT_DATA" in msg
    assert not (cache / "mg" / "mg_scale.csv").exists()


def test_file_without_pinned_url_is_reported(no_local_data, monkeypatch):
    monkeypatch.setattr(_fetch, "UNAVAILABLE", {"mg/mg_scale.csv": "no public copy"})
    with pytest.raises(DatasetNotAvailableError, match="no public copy.*NYHOPT_DATA"):
        load_dataset("mg", cache_dir=no_local_data)


def test_cache_location(tmp_path, monkeypatch):
    monkeypatch.delenv("NYHOPT_CACHE", raising=False)
    assert _fetch.cache_root() == Path(pooch.os_cache("nyhopt"))
    monkeypatch.setenv("NYHOPT_CACHE", str(tmp_path))
    assert _fetch.cache_root() == tmp_path
    assert _fetch.cache_root(tmp_path / "x") == tmp_path / "x"
    with pytest.raises(TypeError, match="cache_dir"):
        load_dataset("mg", cache_dir=3)
    with pytest.raises(TypeError, match="data_dir"):
        load_dataset("mg", data_dir=3)


def test_bad_mirror_url_names_the_variable(no_local_data, monkeypatch):
    monkeypatch.setenv("NYHOPT_DATA_URL", "gopher://example.invalid")
    with pytest.raises(ValueError, match="NYHOPT_DATA_URL"):
        load_dataset("mg", cache_dir=no_local_data)
