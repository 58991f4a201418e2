"""Argument checks of nyhopt.inputs._validation and their use at the public entry points (issue #15)."""
from __future__ import annotations

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.inputs._validation import check_labels, check_lengthscale, check_positive, check_real, is_bool

BOOLS = [True, False, np.True_, np.array(True)]


@pytest.fixture(scope="module")
def data():
    X = np.random.default_rng(0).normal(size=(40, 2))
    return X, X[:, 0].copy()


# ----------------------------------------------------------------------------- booleans are not numbers (case 12)


@pytest.mark.parametrize("value", BOOLS)
def test_numeric_checks_reject_booleans(value):
    assert is_bool(value)
    with pytest.raises(ValueError, match="penalty must be a number, not a boolean"):
        check_positive(value, "penalty")
    with pytest.raises(ValueError, match="tol must be a number, not a boolean"):
        check_real(value, "tol", low=0.0)
    with pytest.raises(ValueError, match="lengthscale must hold numbers, not booleans"):
        check_lengthscale(value)
    with pytest.raises(ValueError, match="lengthscale must hold numbers, not booleans"):
        check_lengthscale([1.0, value])


def test_numeric_checks_still_accept_numbers():
    assert check_positive(np.float32(2.0), "p") == 2.0 and check_positive(3, "p") == 3.0
    assert check_real(np.array(0.0), "tol", low=0.0) == 0.0
    assert not is_bool(1) and not is_bool(np.int64(1)) and not is_bool(np.ones(2))
    with pytest.raises(TypeError, match="tol must be a real number"):
        check_real("1e-3", "tol")
    with pytest.raises(ValueError, match="tol must be a finite number >= 0"):
        check_real(-1.0, "tol", low=0.0)


@pytest.mark.parametrize("flag", [True, np.True_])
def test_public_entry_points_reject_boolean_numbers(data, flag):
    X, y = data
    calls = {
        "penalty": lambda: nh.Params.from_natural(flag, 1.0, X[:3]),
        "lengthscale": lambda: nh.Params.from_natural(1e-3, flag, X[:3]),
        "penalty ": lambda: nh.NystromKRR(penalty=flag, centers=5).fit(X, y),
        "tol": lambda: nh.NystromKRR(tol=flag, centers=5).fit(X, y),
        "lengthscale ": lambda: nh.NystromKRR(nh.GaussianKernel(flag), centers=5).fit(X, y),
        "centers": lambda: nh.NystromKRR(centers=flag).fit(X, y),
        "noise_variance": lambda: nh.make_objective("prop", X, y, noise_variance=flag),
        "random_state": lambda: nh.make_objective("holdout", X, y, random_state=flag),
        "min_delta": lambda: nh.tune(X, y, centers=5, epochs=1, min_delta=flag, progress=False),
        "lengthscale  ": lambda: nh.tune(X, y, centers=5, epochs=1, lengthscale=flag, progress=False),
        "penalty  ": lambda: nh.tune(X, y, centers=5, epochs=1, penalty=flag, progress=False),
        "centers ": lambda: nh.tune(X, y, centers=flag, epochs=1, progress=False),
        "tol ": lambda: nh.solvers.falkon_solve(nh.GaussianKernel(1.0), X, X[:5], y, 1e-3, tol=flag),
    }
    for name, call in calls.items():
        with pytest.raises((ValueError, TypeError), match=name.strip()):
            call()


# ----------------------------------------------------------------------------- label kinds (case 07)


@pytest.mark.parametrize("y", [[1, "a", 2.0], np.array([1, "a"] * 3, dtype=object), [[1, "a"], [2, "b"]]])
def test_check_labels_rejects_mixed_kinds(y):
    with pytest.raises(TypeError, match="y mixes label types"):
        check_labels(y)


@pytest.mark.parametrize("y", [[1, None], [[1, 2], [3]], np.array([object(), 1], dtype=object)])
def test_check_labels_rejects_non_labels(y):
    with pytest.raises(TypeError, match="y must hold numbers or strings"):
        check_labels(y)


def test_check_labels_converts_uniform_objects_and_passes_arrays_through():
    a = np.array([2.0, 1.0])
    assert check_labels(a) is a
    obj = np.array(["b", "a"], dtype=object)
    out = check_labels(obj)
    assert out.dtype.kind == "U" and out.tolist() == ["b", "a"] and obj.dtype == object
    assert check_labels(np.array([3, 1], dtype=object)).dtype.kind == "i"
    assert check_labels([1, 2.5]).tolist() == [1.0, 2.5]
    assert check_labels(None) is None


def test_mixed_labels_fail_before_any_work(data):
    X, _ = data
    y = np.array([1 if i % 2 else "a" for i in range(X.shape[0])], dtype=object)
    calls = [lambda: nh.NystromKRRClassifier(centers=5).fit(X, y),
             lambda: nh.NystromKRRClassifier(centers=5).fit(X, list(y)),
             lambda: nh.HyperoptKRRClassifier(centers=5, epochs=2).fit(X, y),
             lambda: nh.HyperoptKRRClassifier(centers=5, epochs=2).fit(X, list(y)),
             lambda: nh.tune(X, y, centers=5, epochs=2, task="classification", progress=False,
                             callback=_must_not_run),
             lambda: nh.tune(X, list(y), centers=5, epochs=2, progress=False, callback=_must_not_run)]
    for call in calls:
        with pytest.raises(TypeError, match="y mixes label types"):
            call()


def _must_not_run(epoch, record):
    raise AssertionError("the optimization started before the labels were checked")


def test_uniform_object_labels_fit_like_strings(data):
    X, _ = data
    labels = np.array(["no", "yes"])[np.arange(X.shape[0]) % 2]
    a = nh.NystromKRRClassifier(centers=5, random_state=0).fit(X, labels)
    b = nh.NystromKRRClassifier(centers=5, random_state=0).fit(X, labels.astype(object))
    assert b.classes_.tolist() == ["no", "yes"]
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
