"""Messages a new user met (issue 46, item 7): missing values, columns in another order, the index of a 1-D y."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

import nyhopt as nh
from nyhopt.cli import main
from nyhopt.inputs._missing import X_ADVICE, Y_ADVICE, advice_for, is_missing

CATEGORIES = "encode"  # the advice for text columns, never for missing values


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 3))
    return X, np.sin(X[:, 0]) + 0.1 * X[:, 1]


def _fit(X, y):
    return nh.NystromKRR(centers=5).fit(X, y)


# ----------------------------------------------------------------------------- missing values in X: impute them


def test_a_nan_in_an_array_suggests_imputing_not_encoding(data):
    X, y = data
    Xn = X.copy()
    Xn[4, 2] = np.nan
    with pytest.raises(ValueError) as info:
        _fit(Xn, y)
    assert str(info.value) == f"X contains NaN or infinity (first at X[4, 2]); a NaN is a missing value: {X_ADVICE}"
    assert "SimpleImputer" in str(info.value) and CATEGORIES not in str(info.value)
    assert np.isnan(Xn[4, 2])  # nothing the user gave is modified


def test_infinity_alone_gives_no_advice_about_missing_values(data):
    X, y = data
    Xi = X.copy()
    Xi[4, 2] = np.inf
    with pytest.raises(ValueError, match=r"^X contains NaN or infinity \(first at X\[4, 2\]\)$"):
        _fit(Xi, y)


@pytest.mark.parametrize("cell", [np.nan, None, "", "NA", pd.NA])
def test_a_missing_cell_of_a_frame_suggests_imputing(data, cell):
    X, y = data
    df = pd.DataFrame(X, columns=["a", "b", "c"]).astype(object)
    df.iloc[2, 1] = cell
    with pytest.raises((TypeError, ValueError)) as info:
        _fit(df, y)
    msg = str(info.value)
    assert msg.startswith("X contains NaN or infinity: column 'b', first at row 2") and msg.endswith(X_ADVICE)
    assert CATEGORIES not in msg


def test_text_in_a_frame_still_suggests_encoding(data):
    X, y = data
    df = pd.DataFrame(X, columns=["a", "b", "c"]).astype(object)
    df.iloc[2, 1] = "red"
    with pytest.raises((TypeError, ValueError), match=r"'red' at row 2; .*encode text columns"):
        _fit(df, y)


def test_an_empty_string_in_an_object_array_is_a_missing_value(data):
    X, y = data
    Xo = X.astype(object)
    Xo[1, 0] = ""
    with pytest.raises(ValueError) as info:
        _fit(Xo, y)
    assert str(info.value) == f"X holds a missing value ('') at X[1, 0]; {X_ADVICE}"


def test_missing_markers_and_advice():
    assert all(is_missing(v) for v in ("", " NA ", "nan", "NULL", None, float("nan"), np.float32("nan"), pd.NA))
    assert not any(is_missing(v) for v in ("red", "0", 0.0, "N"))
    assert advice_for("validation X") == advice_for("X (row block 2)") == X_ADVICE
    assert advice_for("y") == Y_ADVICE and advice_for("sample_weight") == ""


# ----------------------------------------------------------------------------- the index of a NaN in y


def test_a_nan_in_a_1d_y_is_at_y_i(data):
    X, y = data
    yn = y.copy()
    yn[3] = np.nan
    for fit in (_fit, lambda X, y: nh.tune(X, y, centers=5, epochs=1, progress=False)):
        with pytest.raises(ValueError, match=r"^y contains NaN or infinity \(first at y\[3\]\); .*drop the rows"):
            fit(X, yn)
    with pytest.raises(ValueError, match=r"^y contains NaN or infinity \(first at y\[3, 1\]\)"):
        _fit(X, np.c_[y, yn])  # 2-D y keeps [i, j]


# ----------------------------------------------------------------------------- columns of a frame at predict time


@pytest.fixture(scope="module")
def frame_model(data):
    X, y = data
    df = pd.DataFrame(X, columns=["age", "dose", "weight"])
    return df, nh.HyperoptKRR(centers=5, epochs=1, progress=False).fit(df, y)


def _predict_error(model, frame):
    with pytest.raises(ValueError) as info:
        model.predict(frame)
    return str(info.value)


def test_reordered_columns_are_listed_with_their_positions(frame_model):
    df, model = frame_model
    msg = _predict_error(model, df[["dose", "age", "weight"]])
    assert msg == ("The feature names should match those that were passed during fit.\n"
                   "Feature names must be in the same order as they were in fit.\n"
                   "- 'dose': column 0 here, column 1 at fit\n"
                   "- 'age': column 1 here, column 0 at fit\n"
                   "Select the columns of fit in their order: X[list(model.feature_names_in_)]\n")
    np.testing.assert_array_equal(model.predict(df[["dose", "age", "weight"]][list(model.feature_names_in_)]),
                                  model.predict(df))


def test_missing_and_unexpected_columns_are_listed(frame_model):
    df, model = frame_model
    msg = _predict_error(model, df.rename(columns={"age": "years"})[["dose", "years", "weight"]])
    assert "Feature names unseen at fit time:\n- years\n" in msg
    assert "Feature names seen at fit time, yet now missing:\n- age\n" in msg
    assert "Select the columns" not in msg  # a missing column cannot be selected
    extra = _predict_error(model, df.assign(site=1.0)[["site", "weight", "age", "dose"]])
    assert "unseen at fit time:\n- site\n" in extra and "missing" not in extra
    assert "same order" in extra and "- 'weight': column 1 here, column 2 at fit\n" in extra
    assert re.search(r"yet now missing:\n- weight\n$", _predict_error(model, df[["age", "dose"]]))


def test_many_moved_columns_are_cut_after_five(data):
    X, y = data
    rng = np.random.default_rng(0)
    wide = pd.DataFrame(rng.normal(size=(30, 8)), columns=[f"c{k}" for k in range(8)])
    model = nh.NystromKRR(centers=5).fit(wide, y)
    msg = _predict_error(model, wide[wide.columns[::-1]])
    assert msg.count("here, column") == 5 and "- ...\n" in msg


def test_a_bare_array_still_only_warns(frame_model, data):
    _, model = frame_model
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.predict(data[0])
    assert any("X does not have valid feature names" in str(w.message) for w in caught)


# ----------------------------------------------------------------------------- the command line


def _csv(path, text):
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("cell, shown", [("", "an empty (missing) value"), ("NA", "'NA', a missing value"),
                                         ("nan", "'nan', a missing value")])
def test_cli_missing_feature_cell_suggests_imputing(tmp_path, capsys, cell, shown):
    path = _csv(tmp_path / "d.csv", f"a,b,y\n1,2,3\n4,{cell},6\n7,8,9\n")
    assert main(["tune", path, "--target", "y", "--quiet", "--out", str(tmp_path / "m.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"nyhopt tune: error: {path}, line 3, column 'b': {shown}; every feature needs a value: "
                          "impute the missing values first")
    assert CATEGORIES not in err


def test_cli_text_feature_cell_still_suggests_encoding(tmp_path, capsys):
    path = _csv(tmp_path / "d.csv", "a,b,y\n1,2,3\n4,red,6\n7,8,9\n")
    assert main(["tune", path, "--target", "y", "--quiet", "--out", str(tmp_path / "m.npz")]) == 2
    assert "'red', which is not a finite number; every feature must be numeric (encode categories" in \
        capsys.readouterr().err


def test_cli_missing_and_text_targets(tmp_path, capsys):
    out = str(tmp_path / "m.npz")
    path = _csv(tmp_path / "d.csv", "a,b,y\n1,2,3\n4,5,NA\n7,8,9\n")
    assert main(["tune", path, "--target", "y", "--quiet", "--out", out]) == 2
    assert capsys.readouterr().err.strip() == (f"nyhopt tune: error: {path}, line 3, column 'y': the target is 'NA', "
                                               f"a missing value; {Y_ADVICE}")
    path = _csv(tmp_path / "e.csv", "a,b,y\n1,2,3\n4,5,\n7,8,9\n")
    assert main(["tune", path, "--target", "y", "--quiet", "--out", out]) == 2
    assert "line 3, column 'y': the target is empty (a missing value); drop the rows" in capsys.readouterr().err
    path = _csv(tmp_path / "f.csv", "a,b,y\n1,2,3\n4,5,abc\n7,8,9\n")
    assert main(["tune", path, "--target", "y", "--task", "regression", "--quiet", "--out", out]) == 2
    assert ("line 3, column 'y': 'abc' is not a finite number; the target of a regression must be numeric"
            in capsys.readouterr().err)


def test_cli_text_labels_may_be_spelled_like_a_marker(tmp_path, capsys):
    rows = "".join(f"{k},{k % 3},{['NA', 'EU', 'ASIA'][k % 3]}\n" for k in range(12))
    path = _csv(tmp_path / "d.csv", "a,b,region\n" + rows)
    assert main(["tune", path, "--target", "region", "--centers", "4", "--epochs", "1", "--quiet",
                 "--out", str(tmp_path / "m.npz")]) == 0
    assert nh.load_model(str(tmp_path / "m.npz")).classes_.tolist() == ["ASIA", "EU", "NA"]
