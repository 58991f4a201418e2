"""tune(..., checkpoint=path): saved after every step, a resumed run equals an uninterrupted one."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import nyhopt as nh


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, size=(160, 2))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=160)
    return X, y


KW = {
    "prop": dict(objective="prop", centers=12, progress=False, patience=None),
    "stoch-prop": dict(objective="stoch-prop", centers=12, progress=False, patience=None,
                       objective_options=dict(n_probes=3, tol=1e-6, maxiter=50)),  # warm start on
}


def _same(a, b):
    """Bitwise equal params and history (times excepted)."""
    for f in ("log_penalty", "log_lengthscale", "centers", "log_amplitude"):
        np.testing.assert_array_equal(getattr(a.params, f), getattr(b.params, f))
    assert len(a.history) == len(b.history)
    for ra, rb in zip(a.history, b.history):
        np.testing.assert_equal(ra._replace(time=0.0)._asdict(), rb._replace(time=0.0)._asdict())  # NaN == NaN
    assert (a.best_epoch, a.stop_reason) == (b.best_epoch, b.stop_reason)
    np.testing.assert_array_equal(a.model.alpha_, b.model.alpha_)


@pytest.mark.parametrize("name", sorted(KW))
def test_resumed_run_equals_uninterrupted(tmp_path, data, name):
    X, y = data
    full = nh.tune(X, y, epochs=6, **KW[name])
    path = tmp_path / "run.npz"
    nh.tune(X, y, epochs=3, checkpoint=path, **KW[name])
    assert path.exists() and not [p for p in os.listdir(tmp_path) if p != "run.npz"]  # no temp file left
    resumed = nh.tune(X, y, epochs=6, checkpoint=path, **KW[name])
    _same(resumed, full)
    # the file now holds step 6: calling again redoes only the last evaluation
    _same(nh.tune(X, y, epochs=6, checkpoint=path, **KW[name]), full)


def test_stoch_prop_checkpoint_holds_the_warm_start(tmp_path, data):
    X, y = data
    path = tmp_path / "w.npz"
    nh.tune(X, y, epochs=2, checkpoint=path, **KW["stoch-prop"])
    with np.load(path, allow_pickle=False) as f:
        assert f["warm_start"].shape == (12, 4)  # 3 probes and y
        meta = json.loads(str(f["meta"]))
    assert meta["next_epoch"] == 2 and meta["adam_step"] == 2 and len(meta["history"]) == 2


def test_generator_seed_is_restored(tmp_path, data):
    X, y = data
    kw = dict(KW["stoch-prop"], random_state=None)
    path = tmp_path / "g.npz"
    first = nh.tune(X, y, epochs=2, checkpoint=path, **kw)
    again = nh.tune(X, y, epochs=2, checkpoint=path, **kw)  # same centers and probes, not new draws
    _same(again, first)


def test_checkpoint_of_another_call_is_refused(tmp_path, data):
    X, y = data
    path = tmp_path / "c.npz"
    nh.tune(X, y, epochs=3, checkpoint=path, **KW["prop"])
    with pytest.raises(ValueError, match=r"checkpoint=.*objective"):
        nh.tune(X, y, epochs=3, checkpoint=path, **KW["stoch-prop"])
    with pytest.raises(ValueError, match=r"checkpoint=.*data_shape"):
        nh.tune(X[:100], y[:100], epochs=3, checkpoint=path, **KW["prop"])
    with pytest.raises(ValueError, match=r"checkpoint=.*random_state"):
        nh.tune(X, y, epochs=3, checkpoint=path, random_state=1, **KW["prop"])
    with pytest.raises(ValueError, match=r"checkpoint=.*initial hyperparameters"):
        nh.tune(X + 1e-3, y, epochs=3, checkpoint=path, **KW["prop"])
    with pytest.raises(ValueError, match=r"checkpoint=.*past epochs=2"):
        nh.tune(X, y, epochs=2, checkpoint=path, **KW["prop"])


def test_bad_checkpoint_arguments(tmp_path, data):
    X, y = data
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="checkpoint=.*not an nyhopt tune checkpoint"):
        nh.tune(X, y, epochs=1, checkpoint=bad, **KW["prop"])
    with pytest.raises(ValueError, match="checkpoint: the folder"):
        nh.tune(X, y, epochs=1, checkpoint=tmp_path / "nowhere" / "c.npz", **KW["prop"])
    with pytest.raises(TypeError, match="checkpoint must be a path"):
        nh.tune(X, y, epochs=1, checkpoint=3, **KW["prop"])


def test_checkpoint_refused_with_a_list_of_objectives(tmp_path, data):
    X, y = data
    with pytest.raises(ValueError, match="checkpoint is not available with a list"):
        nh.tune(X, y, objective=["prop", "gcv"], validation=0.3, epochs=1, progress=False,
                checkpoint=tmp_path / "c.npz")
