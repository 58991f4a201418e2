"""Messages that named the wrong cause, found by fuzzing the public API (issue #33, item 4): one test per case."""
import warnings

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.datasets import c_error, nrmse


@pytest.mark.parametrize("objective", ["stoch-prop", "loocv", "gcv"])
@pytest.mark.parametrize("rows", ["equal", "subnormal"])
@pytest.mark.parametrize("lengthscale", [1.0, 3.0])
def test_huge_targets_are_named_not_the_lengthscale(objective, rows, lengthscale):
    """y near 1e300: the squares overflow, the gradient is not finite; y is the cause, not |x - z| / lengthscale."""
    X = np.full((20, 2), 1.0 if rows == "equal" else 5e-320)
    y = np.where(np.arange(20) % 2, 1e300, 9e299)
    y_saved = y.copy()
    obj = nh.make_objective(objective, X, y)
    theta = nh.Params.from_natural(1e-3, np.full(2, lengthscale), X[:5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the overflow itself warns on the way
        with pytest.raises(ValueError, match=rf"^{objective}: the objective is not finite .*the targets y reach "
                                             r"\|y\| = 1e\+300.*scale y") as info:
            obj.value_and_grad(theta)
    assert "lengthscale" not in str(info.value)
    np.testing.assert_array_equal(y, y_saved)


def test_finite_objectives_are_unaffected_by_the_target_check():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (30, 2))
    y = 1e150 * np.sin(3 * X[:, 0])  # large, but the sums of squares stay finite
    obj = nh.make_objective("loocv", X, y)
    value, grad = obj.value_and_grad(nh.Params.from_natural(1e-3, np.ones(2), X[:5]))
    assert np.isfinite(value) and all(np.all(np.isfinite(g)) for g in grad)


def test_sgpr_on_one_row_says_the_constant_mean_leaves_nothing():
    X1 = np.array([[0.3, 0.2]])
    theta = nh.Params.from_natural(1e-3, np.ones(2), X1)
    for y in ([2.0], [0.0], [-7.5]):
        with pytest.raises(ValueError, match=r"^sgpr: with one row the residual of y after the constant mean is "
                                             r"zero whatever y is, so the profiled amplitude is 0 \(too few rows"):
            nh.make_objective("sgpr", X1, np.array(y)).value_and_grad(theta)
    value, _ = nh.make_objective("sgpr", X1, np.array([2.0]), mean="zero").value_and_grad(theta)
    assert np.isfinite(value)  # the zero mean leaves the residual y itself


def test_sgpr_names_constant_zero_and_huge_targets():
    X = np.random.default_rng(1).uniform(-1, 1, (10, 2))
    theta = nh.Params.from_natural(1e-3, np.ones(2), X[:3])
    with pytest.raises(ValueError, match="targets y are constant"):
        nh.make_objective("sgpr", X, np.full(10, 4.0)).value(theta)
    with pytest.raises(ValueError, match="targets y are all zero"):
        nh.make_objective("sgpr", X, np.zeros(10), mean="zero").value(theta)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"amplitude is inf: the targets y reach \|y\| = 1e\+300"):
            nh.make_objective("sgpr", X, np.where(np.arange(10) % 2, 1e300, -1e300)).value(theta)


def test_nrmse_of_subnormal_targets_is_a_number_or_a_clear_error():
    tiny = 5e-324
    # errors and mean both subnormal: the quotient is an ordinary number (rmse tiny*sqrt(3)/2, mean tiny/4)
    assert nrmse([tiny, 0.0, 0.0, 0.0], [tiny] * 4) == pytest.approx(2 * np.sqrt(3), rel=1e-15)
    assert nrmse([tiny, 2 * tiny], [2 * tiny] * 2) == pytest.approx(np.sqrt(0.5) / 1.5, rel=1e-15)
    assert nrmse([tiny] * 3, [tiny] * 3) == 0.0
    with pytest.raises(ValueError, match=r"^nrmse is too large for float64: the rmse \(1\) is more than 1\.8e308 "
                                         r"times \|mean\(y_true\)\| \(4\.94e-324\)"):
        nrmse([tiny] * 3, [1.0] * 3)
    assert nrmse([2.0, 4.0], [2.0, 2.0]) == np.sqrt(2) / 3  # ordinary values: the plain quotient


def test_c_error_converts_object_arrays_of_numbers():
    labels, scores = [0, 1, 1, 0], [0.2, 0.7, 0.4, 0.9]
    want = c_error(labels, scores)
    assert c_error(np.array(labels, dtype=object), np.array(scores, dtype=object)) == want == 0.5
    assert nrmse(np.array([2, 4], dtype=object), [2.0, 2.0]) == nrmse([2.0, 4.0], [2.0, 2.0])
    for bad, shown in [(["a", 1], r"'a' \(str\)"), ([None, 1], r"None \(NoneType\)"), ([1j, 1], r"1j \(complex\)")]:
        with pytest.raises(TypeError, match=rf"^y_true must hold real numbers, got {shown} in an object array"):
            c_error(np.array(bad, dtype=object), [0.5, 0.5])


def test_params_refuses_a_two_dimensional_log_lengthscale():
    Z = np.zeros((2, 1))
    with pytest.raises(ValueError, match=r"^log_lengthscale must be a scalar or 1-D array .*got shape \(1, 1\)"):
        nh.Params(np.asarray(0.0), np.zeros((1, 1)), Z)
    with pytest.raises(ValueError, match=r"got shape \(1, 1\)"):
        nh.Params.from_natural(1.0, np.ones(1), Z).replace(log_lengthscale=np.zeros((1, 1)))
    with pytest.raises(ValueError, match=r"^lengthscale must be a scalar or 1-D array"):  # the kernel's rule
        nh.make_kernel("gaussian", np.ones((1, 1))).lengthscale_array()
    for ok in (np.asarray(0.0), np.zeros(1), np.zeros(3)):
        assert np.shape(nh.Params(np.asarray(0.0), ok, Z).log_lengthscale) == ok.shape
