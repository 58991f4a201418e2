"""``nyhopt score``: the scores of a saved model on a table with targets, against NumPy computations."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import nyhopt as nh
from nyhopt.cli import main
from nyhopt.io import load_model

from _tables import write_csv as _write_csv




def _tune(tmp, train, target, *extra):
    out = str(tmp / f"{target}.npz")
    assert main(["tune", train, "--target", target, "--centers", "15", "--epochs", "8", "--quiet",
                 "--out", out, *extra]) == 0
    return out


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("score")
    rng = np.random.default_rng(4)
    X = rng.uniform(-2, 2, size=(260, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=260)
    two = np.where(X[:, 0] + 0.4 * rng.normal(size=260) > 0, "yes", "no")
    three = np.where(X[:, 0] > 0.5, 3, np.where(X[:, 1] > 0, 2, 1))
    header = ["x1", "price", "x2", "answer", "level"]
    rows = [[a, t, b, c, k] for (a, b), t, c, k in zip(X.tolist(), y.tolist(), two.tolist(), three.tolist())]
    train = _write_csv(tmp / "train.csv", header, rows[:200])
    test = _write_csv(tmp / "test.csv", header, rows[200:])
    models = {"price": _tune(tmp, train, "price", "--features", "x1,x2"),
              "answer": _tune(tmp, train, "answer", "--features", "x1,x2"),
              "level": _tune(tmp, train, "level", "--features", "x1,x2")}
    X = pd.DataFrame(X, columns=["x1", "x2"])  # the models know their columns by name
    return tmp, test, X.iloc[200:], {"price": y[200:], "answer": two[200:], "level": three[200:]}, models


def _score(capsys, *args):
    assert main(["score", *args]) == 0
    return capsys.readouterr().out


def _text_values(out):
    """``label  value`` lines of the text output as a dict of the first number after the label."""
    values = {}
    for line in out.splitlines()[1:]:
        label, rest = line[:23].strip(), line[23:].split()
        values[label] = float(rest[0].rstrip("%"))
    return values


def test_regression_text_and_json_against_numpy(tables, capsys):
    tmp, test, X, y, models = tables
    model = load_model(models["price"])
    mean = model.predict(X)
    want = {"rmse": np.sqrt(np.mean((y["price"] - mean) ** 2)), "mae": np.mean(np.abs(y["price"] - mean)),
            "r2": 1 - np.sum((y["price"] - mean) ** 2) / np.sum((y["price"] - y["price"].mean()) ** 2)}
    out = _score(capsys, models["price"], test)  # the target: the model's own ('price'), by default
    assert out.splitlines()[0] == f"{models['price']} on {test}: 60 rows, target 'price' (regression)"
    text = _text_values(out)
    for key, label in (("rmse", "RMSE"), ("mae", "MAE"), ("r2", "R2")):
        assert text[label] == pytest.approx(want[key], rel=1e-5)
    summary = json.loads(_score(capsys, models["price"], test, "--json", "--target", "price"))
    assert summary["task"] == "regression" and summary["rows"] == 60 and summary["target"] == "price"
    for key in want:
        assert summary[key] == pytest.approx(want[key], rel=1e-12)
    assert "nlpd" not in summary


def test_regression_std_against_numpy(tables, capsys):
    tmp, test, X, y, models = tables
    mean, std = load_model(models["price"]).predict(X, return_std=True)
    err = y["price"] - mean
    coverage = np.mean(np.abs(err) <= 1.959963984540054 * std)
    nlpd = np.mean(0.5 * np.log(2 * np.pi * std ** 2) + err ** 2 / (2 * std ** 2))
    summary = json.loads(_score(capsys, models["price"], test, "--std", "--json"))
    assert summary["coverage_95"] == pytest.approx(coverage, abs=1e-12)
    assert summary["nlpd"] == pytest.approx(nlpd, rel=1e-10)
    out = _score(capsys, models["price"], test, "--std")
    assert f"95% interval coverage  {coverage:.4f} ({round(coverage * 60)} of 60 rows)" in out
    assert _text_values(out)["NLPD"] == pytest.approx(nlpd, rel=1e-5) and out.rstrip().endswith("nats")


def _ece(p, hit, bins=10):
    """Expected calibration error, written another way: bin edges and a histogram."""
    edges = np.linspace(0, 1, bins + 1)
    which = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    counts = np.bincount(which, minlength=bins)
    p_sum, hit_sum = np.bincount(which, p, minlength=bins), np.bincount(which, hit.astype(float), minlength=bins)
    full = counts > 0
    return np.sum(np.abs(hit_sum[full] - p_sum[full])) / p.size


@pytest.mark.parametrize("target", ["answer", "level"])
def test_classification_text_and_json_against_numpy(tables, capsys, target):
    tmp, test, X, y, models = tables
    model = load_model(models[target])
    classes = list(model.classes_)
    truth = np.array([classes.index(v) for v in y[target].tolist()])
    proba = model.predict_proba(X)
    wrong = int(np.sum(model.predict(X) != y[target]))
    log_loss = -np.mean(np.log(np.clip(proba[np.arange(60), truth], 1e-15, 1)))
    if len(classes) == 2:
        ece, about = _ece(proba[:, 1], truth == 1), "probability of 'yes'"
    else:
        ece, about = _ece(proba.max(axis=1), proba.argmax(axis=1) == truth), "probability of the most probable class"
    summary = json.loads(_score(capsys, models[target], test, "--json"))
    assert summary["task"] == "classification" and summary["classes"] == classes
    assert summary["errors"] == wrong and summary["error_rate"] == pytest.approx(wrong / 60)
    assert summary["log_loss"] == pytest.approx(log_loss, rel=1e-10)
    assert summary["ece"] == pytest.approx(ece, abs=1e-12) and summary["calibration"] == about
    assert sum(b["rows"] for b in summary["calibration_bins"]) == 60
    out = _score(capsys, models[target], test)
    assert out.splitlines()[0].endswith(f"target {target!r} (classification, {len(classes)} classes)")
    assert f"error rate             {100 * wrong / 60:.2f}% ({wrong} of 60 rows wrong)" in out
    assert f"calibration (ECE)      {ece:.4f} over 10 bins of the {about}" in out
    assert _text_values(out)["log loss"] == pytest.approx(log_loss, rel=1e-5)


def test_a_python_saved_model_without_names_takes_the_other_columns(tables, capsys):
    tmp, test, X, y, models = tables
    X = X.to_numpy()
    model = nh.NystromKRR(centers=10, random_state=0).fit(X, y["price"])
    path = nh.save_model(str(tmp / "bare.npz"), model)
    rows = [[a, t, b] for (a, b), t in zip(X.tolist(), y["price"].tolist())]
    table = _write_csv(tmp / "bare.csv", ["x1", "price", "x2"], rows)
    assert main(["score", path, table]) == 2
    assert "names no target column: give --target" in capsys.readouterr().err
    summary = json.loads(_score(capsys, path, table, "--target", "price", "--json"))
    assert summary["rmse"] == pytest.approx(np.sqrt(np.mean((model.predict(X) - y["price"]) ** 2)), rel=1e-12)
    wide = _write_csv(tmp / "wide.csv", ["x1", "price", "x2", "x3"], [r + [0.0] for r in rows])
    assert main(["score", path, wide, "--target", "price"]) == 2
    assert "the model expects 2 feature columns but" in capsys.readouterr().err


def test_errors_are_one_line(tables, capsys):
    tmp, test, X, y, models = tables

    def error(*args):
        assert main(["score", *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("nyhopt score: error: ")
        return err

    assert "no column 'cost'; the columns are" in error(models["price"], test, "--target", "cost")
    assert "is not an nyhopt model file" in error(test, test)
    narrow = _write_csv(tmp / "narrow.csv", ["x1", "price"], [[0.1, 1.0]])
    assert "lacks the column(s) ['x2'] that the model was trained on" in error(models["price"], narrow)
    assert "--std is for regression models" in error(models["answer"], test, "--std")
    assert "labels the model was not fitted on" not in error(models["price"], test, "--target", "answer")
    other = _write_csv(tmp / "other.csv", ["x1", "x2", "answer"], [[0.1, 0.2, "maybe"], [0.3, 0.1, "yes"]])
    assert "holds label(s) the model was not fitted on: ['maybe']; its classes are ['no', 'yes']" in \
        error(models["answer"], other)
    gap = _write_csv(tmp / "gap.csv", ["x1", "x2", "price"], [[0.1, "", 1.0]])
    assert "column 'x2': an empty (missing) value; every feature needs a value" in error(models["price"], gap)
    assert "file not found" in error(str(tmp / "none.npz"), test)


def test_help_lists_score(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "nyhopt score model.npz test.csv --std" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["score", "--help"])
    out = capsys.readouterr().out
    assert "usage: nyhopt score" in out and "--std" in out and "--json" in out and "--target" in out


class _Device:
    """Stands in for CuPy (host arrays): counts the transfers back; refuses text, as CuPy does."""

    def __init__(self):
        self.to_host = 0

    def asarray(self, a):
        a = np.asarray(a)
        if a.dtype.kind in "OUS":
            raise TypeError("CuPy holds no text")
        return a

    def asnumpy(self, a):
        self.to_host += 1
        return np.asarray(a)


@pytest.mark.parametrize("target, extra", [("price", ["--std"]), ("answer", [])])
def test_the_gpu_path_scores_as_the_cpu(tables, capsys, monkeypatch, target, extra):
    from nyhopt.cli import _device

    tmp, test, X, y, models = tables
    cpu = json.loads(_score(capsys, models[target], test, "--json", "--device", "cpu", *extra))
    device = _Device()
    monkeypatch.setattr(_device, "gpu_module", lambda: device)
    gpu = json.loads(_score(capsys, models[target], test, "--json", "--device", "gpu", *extra))
    assert device.to_host >= 1 and gpu.keys() == cpu.keys()
    for key, value in cpu.items():
        assert gpu[key] == (pytest.approx(value, rel=1e-12) if isinstance(value, float) else value), key
