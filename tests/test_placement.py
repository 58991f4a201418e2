"""nyhopt.placement: the one module that asks where the data live (in-memory answers; the cluster's are
tested in tests/test_distributed.py)."""
from __future__ import annotations

import numpy as np
import pytest

import nyhopt as nh
from nyhopt import placement
from nyhopt.ops import operator


def test_in_memory_arrays_are_not_on_a_cluster():
    X = np.ones((4, 2))
    assert not placement.on_cluster(X, X[:, 0], None, [1.0])
    assert placement.place_data(X, X[:, 0]) is None


def test_check_objective_passes_every_objective_in_memory():
    X, y = np.ones((4, 2)), np.ones(4)
    for name in ("prop", "gcv", "stoch-prop"):
        placement.check_objective(name, X, y)  # no error: the rows are on this machine


def test_as_placed_converts_frames_in_memory():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]})
    X, y = placement.as_placed(frame, pd.Series([1.0, 2.0]))
    assert isinstance(X, np.ndarray) and isinstance(y, np.ndarray)
    np.testing.assert_array_equal(X, frame.to_numpy())
    rows = [[1.0, 2.0]]
    assert placement.as_placed(rows, None) == (rows, None)  # left to the later checks, as as_native does


def test_take_rows_and_driver_array_in_memory():
    X = np.arange(12.0).reshape(6, 2)
    np.testing.assert_array_equal(placement.take_rows(X, np.array([1, 4])), X[[1, 4]])
    assert placement.take_rows(X, None) is X
    Z = X[:2].copy()
    assert placement.driver_array(X, Z) is Z  # in memory: the array itself, nothing copied


def test_gram_pays_in_memory_is_the_operator_rule(monkeypatch):
    X = np.ones((10, 2))
    for m, k, p in ((100, 1, 13), (100, 1, 12), (400, 5, 20)):
        assert placement.gram_pays(X, m, k, p, np, dtype=X.dtype) == operator.gram_pays(m, k, p, np, dtype=X.dtype)
    calls = []
    monkeypatch.setattr(operator, "gram_pays", lambda *a, **kw: calls.append((a, kw)) or True)
    assert placement.gram_pays(X, 7, 3, 2, np, dtype=np.float32, held=True)
    assert calls == [((7, 3, 2, np), {"dtype": np.float32, "held": True})]


def test_kernel_operator_in_memory():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 3)), rng.normal(size=50)
    op, Y = placement.kernel_operator(nh.GaussianKernel(1.0), X, X[:5], y, cache=False, gram=False)
    assert isinstance(op, operator.KernelOperator) and Y is y and op.shape == (50, 5)
