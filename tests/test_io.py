"""CSV reading and model files (nyhopt.io)."""
from __future__ import annotations

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.io import DataError, Table, column_index, load_model, numeric_columns, read_csv, save_model


def _write(tmp_path, text, name="data.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


# ----------------------------------------------------------------------------- CSV


def test_read_csv_basic_and_guessed_delimiters(tmp_path):
    t = read_csv(_write(tmp_path, "a,b,y\n1,2,3\n\n4, 5 ,6\n"))
    assert t.names == ["a", "b", "y"] and t.cells.tolist() == [["1", "2", "3"], ["4", "5", "6"]]
    assert t.lines == [2, 4]
    t = read_csv(_write(tmp_path, "a;b\n1,5;2\n", "semi.csv"))
    assert t.names == ["a", "b"] and t.cells.tolist() == [["1,5", "2"]]
    t = read_csv(_write(tmp_path, "a\tb\n1\t2\n", "tab.csv"))
    assert t.cells.tolist() == [["1", "2"]]
    t = read_csv(_write(tmp_path, '"x, y",z\n"1",2\n', "quoted.csv"))
    assert t.names == ["x, y", "z"]
    t = read_csv(_write(tmp_path, "a|b\n1|2\n", "pipe.csv"), delimiter="|")
    assert t.names == ["a", "b"]


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "empty"),
        ("\n\n", "empty"),
        ("a,b\n", "no data rows"),
        ("a,b\n1,2\n3\n", "line 3: 1 field"),
        ("a,a\n1,2\n", "duplicated column"),
        ("a,\n1,2\n", "empty column name"),
    ],
)
def test_read_csv_problems(tmp_path, text, match):
    with pytest.raises(DataError, match=match):
        read_csv(_write(tmp_path, text))


def test_read_csv_missing_file_and_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        read_csv(tmp_path / "nope.csv")
    with pytest.raises(DataError, match="folder"):
        read_csv(tmp_path)


def test_column_index():
    t = Table("t.csv", ["a", "2", "y"], np.array([["1", "2", "3"]]))
    assert column_index(t, "y") == 2
    assert column_index(t, "2") == 1  # a name wins over an index
    assert column_index(t, 0) == 0 and column_index(t, "-1") == 2
    with pytest.raises(DataError, match=r"no column 'price'.*\['a', '2', 'y'\]"):
        column_index(t, "price")
    with pytest.raises(DataError, match="no column 5"):
        column_index(t, 5)


def test_numeric_columns_and_errors(tmp_path):
    t = read_csv(_write(tmp_path, "a,b,c\n1,x,\n2.5e3,y,3\n-0,z,nan\n"))
    np.testing.assert_array_equal(numeric_columns(t, [0]).ravel(), [1.0, 2500.0, -0.0])
    assert numeric_columns(t, [0], dtype=np.float32).dtype == np.float32
    with pytest.raises(DataError, match=r"line 2, column 'b': 'x', which is not a finite number"):
        numeric_columns(t, [0, 1])
    with pytest.raises(DataError, match=r"line 2, column 'c': an empty \(missing\) value"):
        numeric_columns(t, [2])
    t2 = read_csv(_write(tmp_path, "c\n1\nnan\n", "nan.csv"))
    with pytest.raises(DataError, match=r"line 3, column 'c': 'nan'"):
        numeric_columns(t2, [0])


# ----------------------------------------------------------------------------- models


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(120, 3)) * [1.0, 10.0, 0.1] + [0.0, 100.0, -5.0]
    y = 50 + np.sin(X[:, 0]) + 0.01 * X[:, 1]
    return X, y


def _roundtrip(tmp_path, model, X, **meta):
    path = save_model(tmp_path / "model", model, meta=meta or None)
    assert path.endswith(".npz")
    with np.load(path, allow_pickle=False) as f:  # readable without pickle
        assert str(f["format"]) == "nyhopt-model"
    loaded = load_model(path)
    assert type(loaded).__name__ == type(model).__name__
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    return loaded


def test_roundtrip_nystrom_regressor(tmp_path, data):
    X, y = data
    k = nh.GaussianKernel(np.array([1.0, 5.0, 0.5]))
    model = nh.NystromKRR(k, penalty=1e-4, centers=15, solver="direct", random_state=0).fit(X, y)
    loaded = _roundtrip(tmp_path, model, X)
    np.testing.assert_array_equal(loaded.alpha_, model.alpha_)
    model2 = nh.NystromKRR(nh.MaternKernel(2.0, nu=0.5), penalty=1e-3, centers=10, random_state=1).fit(
        X, np.c_[y, -y])
    loaded2 = _roundtrip(tmp_path, model2, X)
    assert loaded2.predict(X).shape == (120, 2) and loaded2.kernel_.nu == 0.5


@pytest.mark.parametrize("labels", [np.array(["no", "yes"]), np.array([3, 5, 9])])
def test_roundtrip_classifier(tmp_path, data, labels):
    X, _ = data
    y = labels[np.arange(X.shape[0]) % labels.size]
    model = nh.NystromKRRClassifier(nh.LaplacianKernel(3.0), penalty=1e-3, centers=20, random_state=0).fit(X, y)
    loaded = _roundtrip(tmp_path, model, X)
    assert loaded.classes_.tolist() == model.classes_.tolist()


def test_roundtrip_hyperopt_with_meta(tmp_path, data):
    X, y = data
    snapshot = X.copy()
    est = nh.HyperoptKRR(centers=10, epochs=3, standardize=True, random_state=0).fit(X, y)
    loaded = _roundtrip(tmp_path, est, X, objective="prop", feature_names=np.array(["a", "b", "c"]),
                        note=None)
    np.testing.assert_array_equal(X, snapshot)
    assert loaded.standardize and loaded.meta_["objective"] == "prop"
    assert loaded.meta_["feature_names"].tolist() == ["a", "b", "c"]
    np.testing.assert_array_equal(loaded.x_mean_, est.x_mean_)
    clf = nh.HyperoptKRRClassifier(centers=10, epochs=2, standardize=True, random_state=0).fit(
        X, np.where(y > np.median(y), "hi", "lo"))
    loaded = _roundtrip(tmp_path, clf, X)
    assert loaded.classes_.tolist() == ["hi", "lo"]


def test_save_errors(tmp_path):
    with pytest.raises(ValueError, match="not fitted"):
        save_model(tmp_path / "m.npz", nh.NystromKRR())
    with pytest.raises(ValueError, match="cannot save a dict"):
        save_model(tmp_path / "m.npz", {})


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "missing.npz")
    bad = _write(tmp_path, "not a zip", "bad.npz")
    with pytest.raises(DataError, match="not an nyhopt model file"):
        load_model(bad)
    np.savez(tmp_path / "other.npz", a=np.ones(2))
    with pytest.raises(DataError, match="format"):
        load_model(tmp_path / "other.npz")
    np.savez(tmp_path / "newer.npz", format=np.array("nyhopt-model"), version=np.array(99))
    with pytest.raises(DataError, match="newer"):
        load_model(tmp_path / "newer.npz")
    np.savez(tmp_path / "partial.npz", format=np.array("nyhopt-model"), version=np.array(1),
             estimator=np.array("NystromKRR"))
    with pytest.raises(DataError, match="no 'kernel'"):
        load_model(tmp_path / "partial.npz")
