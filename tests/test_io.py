"""CSV reading and model files (nyhopt.io)."""
from __future__ import annotations

import gc
import warnings

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


def test_loaded_estimator_has_the_parameters_it_was_fitted_with(tmp_path, data):
    # get_params() of a loaded model used to show defaults (kernel "gaussian", epochs 200, solver
    # "direct", random_state None): clone(load_model(path)).fit refitted something else
    from sklearn.base import clone

    X, y = data
    est = nh.HyperoptKRR(objective="sgpr", centers=12, epochs=2, kernel=nh.MaternKernel(2.0, nu=0.5),
                         lengthscale=[1.0, 2.0, 3.0], freeze=("amplitude",), patience=None, random_state=3,
                         objective_options={"mean": "zero"}, dtype=np.float32, solver="direct").fit(X, y)
    loaded = _roundtrip(tmp_path, est, X)
    got, want = loaded.get_params(deep=False), est.get_params(deep=False)
    assert got["kernel"].nu == 0.5 and got["kernel"].lengthscale == 2.0 and type(got.pop("kernel")) is nh.MaternKernel
    want.pop("kernel")
    assert got == dict(want, dtype="float32")
    assert clone(loaded).get_params()["epochs"] == 2
    for model in (nh.NystromKRR(penalty=1e-3, centers=10, random_state=4, tol=1e-6).fit(X, y),
                  nh.NystromKRRClassifier(nh.GaussianKernel([1.0, 5.0, 0.5]), centers=10, maxiter=20,
                                          random_state=1).fit(X, y > np.median(y))):
        got = _roundtrip(tmp_path, model, X).get_params(deep=False)
        want = model.get_params(deep=False)
        if want["kernel"] is None:
            assert got.pop("kernel") is None
        else:
            np.testing.assert_array_equal(got.pop("kernel").lengthscale, want["kernel"].lengthscale)
        want.pop("kernel")
        assert got == want  # centers an int, solver "falkon", random_state ... as given
    # a Generator cannot be stored: random_state falls back to the default; a file without the
    # field (written before it existed) loads with the parameters the other fields give
    path = save_model(tmp_path / "g.npz", nh.HyperoptKRR(centers=10, epochs=1, kernel="laplacian",
                                                         random_state=np.random.default_rng(0)).fit(X, y))
    assert load_model(path).get_params()["random_state"] == 0
    with np.load(path) as f:
        state = {k: f[k] for k in f.files}
    assert load_model(_variant(tmp_path, state, params=None)).get_params()["kernel"] == "gaussian"
    for bad, match in (("{", "not JSON"), ("[1]", "JSON object"), ('{"kernel": {"x": 1}}', "unknown value"),
                       ('{"kernel": {"kernel": "gaussian", "lengthscale": -1}}', "lengthscale")):
        with pytest.raises(DataError, match=f"'params' {match}|'params' .*{match}"):
            load_model(_variant(tmp_path, state, params=np.array(bad)))


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


# ----------------------------------------------------------------------------- damaged model files (issue #15)


@pytest.fixture(scope="module")
def saved_state(tmp_path_factory, data):
    """The fields of a saved HyperoptKRR (standardized) and the model itself."""
    X, y = data
    est = nh.HyperoptKRR(centers=10, epochs=2, standardize=True, random_state=0).fit(X, y)
    path = save_model(tmp_path_factory.mktemp("saved") / "m", est)
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}, est


def _variant(tmp_path, state, **changes):
    """Save ``state`` with fields replaced (a value) or removed (None)."""
    s = {k: v for k, v in state.items() if not (k in changes and changes[k] is None)}
    s.update({k: v for k, v in changes.items() if v is not None})
    path = tmp_path / "variant.npz"
    np.savez(path, **s)
    return path


@pytest.mark.parametrize("key", ["version", "estimator", "kernel", "lengthscale", "penalty", "centers", "alpha",
                                 "y_was_1d", "x_mean", "x_scale", "y_mean", "y_scale", "normalize_y",
                                 "standardize", "dtype", "objective", "ard"])
def test_load_missing_field_names_it(tmp_path, saved_state, key):
    state, _ = saved_state
    with pytest.raises(DataError, match=f"no '{key}' field"):
        load_model(_variant(tmp_path, state, **{key: None}))


@pytest.mark.parametrize("key, value, match", [
    ("lengthscale", np.array([]), "'lengthscale' must not be empty"),
    ("lengthscale", np.array([1.0, -2.0, 1.0]), "'lengthscale' must be > 0"),
    ("lengthscale", np.array([1.0, 2.0]), "'lengthscale' has 2 entries"),
    ("penalty", np.array([1e-3, 2e-3]), r"'penalty' must have shape \(\)"),
    ("penalty", np.array(0.0), "'penalty' must be > 0"),
    ("penalty", np.array(np.nan), "'penalty' contains NaN"),
    ("alpha", np.ones((5, 1)), r"'alpha' must have shape \(10, n\)"),
    ("alpha", np.full((10, 1), np.nan), "'alpha' contains NaN"),
    ("centers", np.ones((10, 3), dtype=np.int64), "'centers' must hold floating-point"),
    ("centers", np.ones(10), r"'centers' must have shape \(n, n\)"),
    ("x_mean", np.zeros(2), r"'x_mean' must have shape \(3,\)"),
    ("x_scale", np.array([1.0, 0.0, 1.0]), "'x_scale' must be > 0"),
    ("y_scale", np.array([np.inf]), "'y_scale' contains NaN or infinity"),
    ("y_mean", np.zeros(2), r"'y_mean' must have shape \(1,\)"),
    ("y_was_1d", np.array(1), "'y_was_1d' must be a boolean"),
    ("standardize", np.array("yes"), "'standardize' must be a boolean"),
    ("dtype", np.array("int8"), "'dtype' must be one of"),
    ("kernel", np.array("cosine"), "'kernel' must be one of"),
    ("estimator", np.array("SVC"), "'estimator' must be one of"),
    ("objective", np.array(3.0), "'objective' must be a text value"),
    ("version", np.array("abc"), "'version' must be an integer"),
    ("version", np.array(0), "'version' must be >= 1"),
])
def test_load_bad_field_names_it(tmp_path, saved_state, key, value, match):
    state, _ = saved_state
    with pytest.raises(DataError, match=match) as info:
        load_model(_variant(tmp_path, state, **{key: value}))
    assert "variant.npz" in str(info.value)


def test_load_checks_classifier_labels(tmp_path, data):
    X, _ = data
    y = np.array(["a", "b", "c"])[np.arange(X.shape[0]) % 3]
    clf = nh.NystromKRRClassifier(centers=10, random_state=0).fit(X, y)
    with np.load(save_model(tmp_path / "c", clf), allow_pickle=False) as f:
        state = {k: f[k] for k in f.files}
    for value, match in [(None, "no 'classes' field"), (np.array(["a", "b"]), "has 2 labels but 'alpha' has 3"),
                         (np.array(["b", "a", "c"]), "sorted order"), (np.array([[1, 2, 3]]), "1-D array")]:
        with pytest.raises(DataError, match=match):
            load_model(_variant(tmp_path, state, classes=value))


def test_load_valid_variant_still_loads(tmp_path, saved_state, data):
    """The checks do not reject what save_model writes (extra unknown fields are ignored)."""
    state, est = saved_state
    X, _ = data
    loaded = load_model(_variant(tmp_path, state, comment=np.array("kept for later versions")))
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))


def test_load_non_model_files_say_what_they_are(tmp_path, saved_state):
    csv = _write(tmp_path, "a,b,y\n1,2,3\n")
    with pytest.raises(DataError, match="not an nyhopt model file") as info:
        load_model(csv)
    assert str(csv) in str(info.value) and "pickle" not in str(info.value)
    np.save(tmp_path / "array.npy", np.ones(3))
    with pytest.raises(DataError, match="not an nyhopt model file"):
        load_model(tmp_path / "array.npy")
    with pytest.raises(DataError, match="folder"):
        load_model(tmp_path)
    objects = tmp_path / "objects.npz"
    np.savez(objects, format=np.array("nyhopt-model"), version=np.array(1), x=np.array([{}, 1], dtype=object))
    with pytest.raises(DataError, match="'x' holds pickled Python objects") as info:
        load_model(objects)
    assert "allow_pickle" not in str(info.value)


@pytest.mark.parametrize("cut", [0.3, 0.9])
def test_load_truncated_archive_says_damaged(tmp_path, saved_state, cut):
    state, _ = saved_state
    whole = _variant(tmp_path, state).read_bytes()
    path = tmp_path / "truncated.npz"
    path.write_bytes(whole[: int(cut * len(whole))])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        with pytest.raises(DataError, match="is damaged") as info:
            load_model(path)
        gc.collect()
    assert "pickle" not in str(info.value)
    # the archive's file is closed on failure too (no "unclosed file")
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)], [str(w.message) for w in caught]


def test_load_corrupted_entry_says_damaged(tmp_path, saved_state):
    state, _ = saved_state
    raw = bytearray(_variant(tmp_path, state).read_bytes())
    start = raw.index(b"\x93NUMPY", raw.index(b"alpha.npy"))
    raw[start:start + 6] = b"garbag"  # the .npy magic of 'alpha' inside the (stored) zip
    path = tmp_path / "corrupt.npz"
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError, match="is damaged"):
        load_model(path)


# --------------------------------------------------------------------------- compressed tables

_TSV = "a\tb\ty\n1\t2\t3\n4\t5\t6\n"


def _compressed(tmp_path, ext):
    import bz2
    import gzip
    import lzma
    import zipfile

    path = tmp_path / f"data.tsv{ext}"
    data = _TSV.encode()
    if ext == ".zip":
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("data.tsv", data)
    else:
        path.write_bytes({".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}[ext](data))
    return path


@pytest.mark.parametrize("ext", [".gz", ".bz2", ".xz", ".zip", ".GZ"])
def test_read_csv_decompresses_by_extension(tmp_path, ext):
    path = _compressed(tmp_path, ext.lower())
    if ext != ext.lower():
        path = path.rename(tmp_path / f"data.tsv{ext}")
    t = read_csv(path)
    assert t.names == ["a", "b", "y"] and t.cells.tolist() == [["1", "2", "3"], ["4", "5", "6"]]
    assert t.lines == [2, 3]


def test_compressed_file_problems_are_named(tmp_path):
    import zipfile

    whole = _compressed(tmp_path, ".gz").read_bytes()
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DataError, match=r"cut.csv.gz is a damaged gzip file"):
        read_csv(cut)
    plain = tmp_path / "plain.csv.gz"
    plain.write_text(_TSV)
    with pytest.raises(DataError, match=r"named .gz but is not a gzip file: it seems to be text"):
        read_csv(plain)
    two = tmp_path / "two.zip"
    with zipfile.ZipFile(two, "w") as zf:
        zf.writestr("a.csv", "x\n1\n")
        zf.writestr("b.csv", "x\n2\n")
    with pytest.raises(DataError, match=r"exactly one file, this one holds 2: a.csv, b.csv"):
        read_csv(two)


@pytest.mark.parametrize("content,seems", [
    (None, "a gzip-compressed file (name it with .gz"),
    (b"PAR1\x15\x04\x15\xa0\x9c\x01", "a Parquet file"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1\x00\x00", "Excel .xls"),
    ("prix;température\n1;2\n".encode("latin-1"), "not UTF-8 (perhaps Latin-1"),
    (b"\x00\x01\x02\xff\xfe\x00", "binary data"),
])
def test_a_file_that_is_not_text_says_what_it_seems_to_be(tmp_path, content, seems):
    path = tmp_path / "data.csv"
    path.write_bytes(_compressed(tmp_path, ".gz").read_bytes() if content is None else content)
    with pytest.raises(DataError) as info:
        read_csv(path)
    msg = str(info.value)
    assert msg.startswith(f"{path} is not a text table: it seems to be ") and seems in msg
    assert "codec" not in msg


def test_an_xlsx_workbook_is_named(tmp_path):
    import zipfile

    path = tmp_path / "book.csv"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("xl/workbook.xml", "<workbook/>")
        zf.writestr("[Content_Types].xml", "<Types/>")
    with pytest.raises(DataError, match="an Excel .xlsx workbook"):
        read_csv(path)
