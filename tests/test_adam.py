"""Adam (nyhopt.optim.adam) against the published update rule (Kingma & Ba 2015, Alg. 1)."""
from __future__ import annotations

import numpy as np
import pytest

from nyhopt.backend import cupy_or_none
from nyhopt.optim import adam
from nyhopt.params import Params

# Gradients of four steps for three scalar coordinates (penalty, lengthscale, center),
# starting at theta0 = (0, 0.3, -1), lr = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8.
GRADS = [(1.0, -0.5, 0.0), (-2.0, 0.25, 3.0), (0.5, 0.25, -1.0), (0.0, -4.0, 1e-3)]
THETA0 = (0.0, 0.3, -1.0)
# The iterates, worked out by hand from the published formulas with 50-digit decimal
# arithmetic (m_t, v_t, bias corrections 1 - b^t, theta -= lr * m_hat / (sqrt(v_hat) + eps)).
# Step 1 by hand: m = 0.1 g, v = 0.001 g^2, m_hat = g, v_hat = g^2, so the move is
# lr * sign(g) * |g| / (|g| + eps): -0.1 / (1 + 1e-8) = -0.0999999990000000100 for g = 1,
# and exactly 0 for a zero gradient.
EXPECTED = [
    (-9.99999990000000100000e-2, 3.99999998000000040000e-1, -1.0),
    (-6.33896465279249117945e-2, 4.26633701292153837441e-1, -1.07441368200599698166e00),
    (-4.97205803261782744067e-2, 4.19325973407100647371e-1, -1.10877094763230437290e00),
    (-3.85237130436051920964e-2, 4.75866422258900209397e-1, -1.13693272199113351597e00),
]


def _params(a, b, c, xp=np):
    return Params(np.asarray(a, dtype=np.float64), np.asarray([b], dtype=np.float64),
                  xp.asarray([[c]], dtype=xp.float64))


def _flat(p):
    from nyhopt.backend import to_numpy

    return (float(p.log_penalty), float(p.log_lengthscale[0]), float(to_numpy(p.centers)[0, 0]))


def _run(xp=np):
    p = _params(*THETA0, xp=xp)
    state = adam.init(p)
    out = []
    for g in GRADS:
        p, state = adam.update(_params(*g, xp=xp), state, p, lr=0.1, b1=0.9, b2=0.999, eps=1e-8)
        out.append(_flat(p))
    return out, state


def test_matches_hand_computed_sequence():
    got, state = _run()
    assert state.step == len(GRADS)
    for step, (g, e) in enumerate(zip(got, EXPECTED), start=1):
        # float64 rounding: a few ulps of the iterates (cancellation in theta - step).
        np.testing.assert_allclose(g, e, rtol=1e-15, atol=1e-15, err_msg=f"step {step}")


def test_first_step_moves_by_lr_times_sign():
    p = Params.from_natural(1e-3, [1.0, 2.0, 3.0], np.zeros((2, 3)))
    g = Params(np.asarray(-7.0), np.array([1e-6, -3.0, 0.0]), np.full((2, 3), 50.0))
    with np.errstate(invalid="ignore"):
        p1, _ = adam.update(g, adam.init(p), p, lr=0.05, eps=0.0)
    np.testing.assert_allclose(p1.log_penalty - p.log_penalty, 0.05, atol=2e-15)
    np.testing.assert_allclose(p1.log_lengthscale[:2] - p.log_lengthscale[:2], [-0.05, 0.05], atol=2e-15)
    assert np.isnan(p1.log_lengthscale[2])  # 0/0 with eps = 0, as the formula says
    np.testing.assert_allclose(p1.centers, -0.05)


def test_state_shapes_dtypes_and_purity():
    p = Params.from_natural(0.5, [1.0, 2.0], np.arange(6.0).reshape(3, 2))
    g = p.map(lambda a: np.ones_like(np.asarray(a, dtype=np.float64)))
    snapshot = [np.array(a, copy=True) for a in p] + [np.array(a, copy=True) for a in g]
    s0 = adam.init(p)
    assert s0.step == 0
    for field in s0.m:
        assert field.dtype == np.float64 and not field.any()
    p1, s1 = adam.update(g, s0, p)
    # Inputs are untouched and the outputs are new arrays.
    for a, b in zip(list(p) + list(g), snapshot):
        np.testing.assert_array_equal(a, b)
    assert all(not field.any() for field in s0.m) and all(not field.any() for field in s0.v)
    assert p1.centers is not p.centers
    assert np.shape(p1.log_penalty) == () and isinstance(p1.log_penalty, np.ndarray)
    assert p1.log_lengthscale.shape == (2,) and p1.centers.shape == (3, 2)
    assert s1.step == 1 and s1.m.centers.dtype == np.float64


def test_mask_freezes_fields_and_their_moments():
    p = Params.from_natural(0.5, [1.0, 2.0], np.zeros((3, 2)))
    g = Params(np.asarray(1.0), np.array([1.0, 1.0]), np.ones((3, 2)))
    state = adam.init(p)
    full, _ = adam.update(g, state, p)
    for mask in (Params(True, np.array([True, False]), False),
                 {"log_lengthscale": np.array([True, False]), "centers": False}):
        p1, s1 = adam.update(g, state, p, mask=mask)
        assert float(p1.log_penalty) == float(full.log_penalty)
        assert p1.log_lengthscale[0] == full.log_lengthscale[0]
        assert p1.log_lengthscale[1] == p.log_lengthscale[1]
        np.testing.assert_array_equal(p1.centers, p.centers)
        assert not s1.m.centers.any() and not s1.v.centers.any() and s1.m.log_lengthscale[1] == 0
    # Per-row mask on the centers (freeze the first center only).
    p2, _ = adam.update(g, state, p, mask={"centers": np.array([[False], [True], [True]])})
    np.testing.assert_array_equal(p2.centers[0], 0.0)
    np.testing.assert_array_equal(p2.centers[1:], full.centers[1:])


def test_minimizes_a_quadratic():
    target = Params(np.asarray(-2.0), np.array([0.5, -0.5]), np.array([[1.0, 2.0], [3.0, 4.0]]))
    p = Params(np.asarray(0.0), np.zeros(2), np.zeros((2, 2)))
    state = adam.init(p)
    for _ in range(2000):
        g = p.map(lambda a, b: 2.0 * (a - b), target)
        p, state = adam.update(g, state, p, lr=0.05)
    for a, b in zip(p, target):
        np.testing.assert_allclose(a, b, atol=1e-3)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"lr": 0.0}, ValueError, "lr"),
        ({"lr": float("nan")}, ValueError, "lr"),
        ({"b1": 1.0}, ValueError, "b1"),
        ({"b2": -0.1}, ValueError, "b2"),
        ({"eps": -1.0}, ValueError, "eps"),
        ({"lr": "0.1"}, TypeError, "lr"),
        ({"mask": ["centers"]}, TypeError, "mask"),
        ({"mask": {"center": False}}, ValueError, "unknown"),
        ({"mask": {"centers": np.array([True, False, True])}}, ValueError, "broadcast"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    p = Params.from_natural(0.5, [1.0], np.zeros((2, 2)))
    with pytest.raises(exc, match=match):
        adam.update(p, adam.init(p), p, **kwargs)


def test_bad_types_and_shapes():
    p = Params.from_natural(0.5, [1.0], np.zeros((2, 2)))
    with pytest.raises(TypeError, match="params"):
        adam.init((1, 2, 3))
    with pytest.raises(TypeError, match="state"):
        adam.update(p, None, p)
    with pytest.raises(TypeError, match="grads"):
        adam.update(tuple(p), adam.init(p), p)
    bad = p.replace(centers=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="centers"):
        adam.update(bad, adam.init(p), p)


@pytest.mark.gpu
def test_cupy_matches_numpy():
    cp = cupy_or_none()
    got, state = _run(xp=cp)
    assert type(state.m.centers).__module__.startswith("cupy")
    expected, _ = _run()
    np.testing.assert_allclose(got, expected, rtol=1e-15, atol=0)
