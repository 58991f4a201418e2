"""R^2 from partial sums of row blocks (nyhopt.metrics._r2): any split of the rows gives the value of one block."""
from __future__ import annotations

import numpy as np
import pytest

from nyhopt.metrics._r2 import r2_combine, r2_from_sums, r2_partials


def _reference(Y, P, w):
    mean = (w[:, None] * Y).sum(axis=0) / w.sum()
    ss_res = (w[:, None] * (Y - P) ** 2).sum(axis=0)
    ss_tot = (w[:, None] * (Y - mean) ** 2).sum(axis=0)
    return float(np.mean(1 - ss_res / ss_tot))


def _split(n, k, rng):
    cuts = np.sort(rng.choice(np.arange(1, n), k - 1, replace=False))
    return np.split(np.arange(n), cuts)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("blocks", [1, 2, 7])
def test_blocks_combine_to_the_one_block_value(weighted, blocks):
    rng = np.random.default_rng(blocks)
    n = 300
    Y = rng.normal(size=(n, 2)) * [1.0, 30.0] + [5.0, -2.0]
    P = Y + 0.3 * rng.normal(size=(n, 2))
    w = rng.uniform(0.0, 2.0, n) if weighted else None
    parts = [r2_partials(Y[i], P[i], None if w is None else w[i]) for i in _split(n, blocks, rng)]
    got = r2_from_sums(*r2_combine(parts)[:2])
    assert got == pytest.approx(_reference(Y, P, np.ones(n) if w is None else w), rel=1e-13)


def test_blocks_of_very_different_magnitudes_combine_exactly():
    """Each block is scaled by its own power of two; a block near the float64 limit overflows nothing."""
    rng = np.random.default_rng(3)
    Y = np.concatenate([rng.normal(size=(50, 1)) * 1e-150, rng.normal(size=(50, 1)) * 1e300])
    P = Y * (1 + 1e-3 * rng.normal(size=Y.shape))
    one = r2_from_sums(*r2_combine([r2_partials(Y, P)])[:2])
    two = r2_from_sums(*r2_combine([r2_partials(Y[:50], P[:50]), r2_partials(Y[50:], P[50:])])[:2])
    assert np.isfinite(one) and two == pytest.approx(one, rel=1e-13)
    assert one == pytest.approx(_reference(Y / 2.0 ** 997, P / 2.0 ** 997, np.ones(100)), rel=1e-13)


def test_flags_and_weight_of_a_block():
    Y = np.array([[1.0], [np.nan], [2.0]])
    part = r2_partials(Y, np.zeros_like(Y), np.array([1.0, 2.0, np.inf]))
    assert not part.finite_y and not part.finite_w
    zero = r2_partials(np.ones((2, 1)), np.ones((2, 1)), np.zeros(2))  # a block of zero weight adds nothing
    assert zero.weight == 0 and np.isfinite(zero.mean).all()
    assert r2_combine([zero])[2] == 0


def test_constant_targets_score_one_if_fitted_exactly_else_zero():
    Y = np.full((4, 2), 3.0)
    P = np.c_[Y[:, 0], Y[:, 1] + 1.0]
    assert r2_from_sums(*r2_combine([r2_partials(Y, P)])[:2]) == pytest.approx(0.5)
