"""Model files hold what predict and predict(return_std=True) need, and no more (issue 46, item 4)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.io import load_model, save_model
from nyhopt.io._packed import pack_lower, packed_size, unpack_lower

M, D = 1500, 16


@pytest.fixture(scope="module")
def big():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(M + 1000, D))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=X.shape[0])
    model = nh.NystromKRR(nh.GaussianKernel(3.0), penalty=1e-4, centers=M, solver="direct", normalize_y=True,
                          random_state=0).fit(X, y)
    return model, X[:200]


def _fields(path):
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def _rel(a, b):
    return float(np.max(np.abs(a - b) / np.abs(b)))


def test_a_file_is_one_triangle_plus_centers_and_coefficients(big, tmp_path):
    model, X = big
    path = save_model(tmp_path / "m.npz", model)
    needed = packed_size(M) * 8 + M * D * 8 + M * 8  # one float64 triangle, the centers, the coefficients
    assert os.path.getsize(path) <= 1.15 * needed  # measured 0.96 of it: 8.8 MB (the square factor: 18.2 MB)
    mean, std = model.predict(X, return_std=True)
    loaded = load_model(path)
    mean2, std2 = loaded.predict(X, return_std=True)
    assert _rel(mean2, mean) <= 1e-12 and _rel(std2, std) <= 1e-12
    assert "var_chol" not in _fields(path) and _fields(path)["var_chol_packed"].shape == (packed_size(M),)


def test_std_false_writes_a_small_file_that_predicts_and_names_std_true(big, tmp_path):
    model, X = big
    path = save_model(tmp_path / "small.npz", model, std=False)
    assert os.path.getsize(path) <= 1.15 * (M * D * 8 + M * 8)
    loaded = load_model(path)
    np.testing.assert_allclose(loaded.predict(X), model.predict(X), rtol=1e-12)
    with pytest.raises(ValueError, match=r"save_model\(path, model, std=True\)"):
        loaded.predict(X, return_std=True)
    with pytest.raises(TypeError, match="std must be True or False"):
        save_model(tmp_path / "x.npz", model, std="no")


def test_a_classifier_saved_without_its_factor_names_std_true_for_probabilities(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3))
    clf = nh.NystromKRRClassifier(penalty=1e-3, centers=20, random_state=0).fit(X, X[:, 0] > 0)
    full = load_model(save_model(tmp_path / "c.npz", clf))
    np.testing.assert_allclose(full.predict_proba(X), clf.predict_proba(X), rtol=1e-12)
    small = load_model(save_model(tmp_path / "s.npz", clf, std=False))
    np.testing.assert_array_equal(small.predict(X), clf.predict(X))
    with pytest.raises(ValueError, match="std=True"):
        small.predict_proba(X)


def test_files_of_the_old_layout_still_load(big, tmp_path):
    """Format version 1: the square factor ``var_chol``, an uncompressed archive (written here by hand)."""
    model, X = big
    fields = _fields(save_model(tmp_path / "new.npz", model))
    square = unpack_lower(fields.pop("var_chol_packed"), M)
    old = dict(fields, version=np.array(1), var_chol=square)
    np.savez(tmp_path / "old.npz", **old)
    mean, std = load_model(tmp_path / "old.npz").predict(X, return_std=True)
    ref_mean, ref_std = model.predict(X, return_std=True)
    assert _rel(mean, ref_mean) <= 1e-12 and _rel(std, ref_std) <= 1e-12


def test_a_damaged_triangle_is_refused_by_name(big, tmp_path):
    from nyhopt.errors import DataError

    model, _ = big
    fields = _fields(save_model(tmp_path / "m.npz", model))
    for bad in (fields["var_chol_packed"][:-1], -np.abs(fields["var_chol_packed"])):
        np.savez(tmp_path / "bad.npz", **dict(fields, var_chol_packed=bad))
        with pytest.raises(DataError, match="var_chol_packed"):
            load_model(tmp_path / "bad.npz")


def test_pack_and_unpack_are_inverse():
    C = np.tril(np.arange(1.0, 17.0).reshape(4, 4))
    assert pack_lower(C).shape == (packed_size(4),)
    np.testing.assert_array_equal(unpack_lower(pack_lower(C), 4), C)


def test_a_pipeline_is_sent_to_joblib(tmp_path):
    pipeline = pytest.importorskip("sklearn.pipeline")
    preprocessing = pytest.importorskip("sklearn.preprocessing")
    X = np.random.default_rng(2).normal(size=(60, 2))
    pipe = pipeline.make_pipeline(preprocessing.StandardScaler(),
                                  nh.NystromKRR(centers=10, random_state=0)).fit(X, X[:, 0])
    with pytest.raises(ValueError, match=r'cannot save a Pipeline.*joblib.dump\(pipeline, "model.joblib"\)'):
        save_model(tmp_path / "p.npz", pipe)
