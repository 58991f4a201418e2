"""The ``nyhopt`` command line (nyhopt.cli)."""
from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

from nyhopt.cli import main
from nyhopt.io import load_model


def _write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return str(path)


@pytest.fixture(scope="module")
def regression_csv(tmp_path_factory):
    rng = np.random.default_rng(11)
    X = rng.uniform(-1.5, 1.5, size=(150, 3)) * [1.0, 50.0, 0.01] + [0.0, 1000.0, 0.0]
    y = 20 + 5 * np.sin(2 * X[:, 0]) + 0.05 * (X[:, 1] - 1000)
    path = tmp_path_factory.mktemp("cli") / "train.csv"
    return _write_csv(path, ["x1", "price", "x2", "x3"],
                      [[a, t, b, c] for (a, b, c), t in zip(X.tolist(), y.tolist())]), X, y


def _read_predictions(path):
    with open(path) as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def test_help_for_a_newcomer(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for word in ("demo", "tune", "predict", "examples:"):
        assert word in out
    for cmd in ("demo", "tune", "predict"):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        assert "usage: nyhopt " + cmd in capsys.readouterr().out
    assert main([]) == 2  # no command: help, and a usage error status


def test_tune_then_predict_regression(tmp_path, regression_csv, capsys):
    path, X, y = regression_csv
    model, report, summary = tmp_path / "m.npz", tmp_path / "r.png", tmp_path / "s.json"
    args = [path, "--target", "price", "--centers", "20", "--epochs", "15", "--out", str(model),
            "--json", str(summary), "--validation-fraction", "0.2", "--quiet"]
    have_mpl = True
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        have_mpl = False
    if have_mpl:
        args += ["--report", str(report)]
    assert main(["tune"] + args) == 0
    assert capsys.readouterr().out == ""  # --quiet
    assert model.is_file() and (report.is_file() or not have_mpl)
    s = json.loads(summary.read_text())
    assert s["task"] == "regression" and s["target"] == "price" and s["features"] == ["x1", "x2", "x3"]
    assert len(s["history"]["objective"]) == s["epochs_run"] + 1
    assert set(s["history"]["terms"]) and s["history"]["validation_error"][-1] is not None
    assert s["validation_error"] < np.std(y)
    est = load_model(model)
    assert est.standardize and est.meta_["target_name"] == "price"

    # predict: columns found by name (in another order, with the target present or not).
    new = _write_csv(tmp_path / "new.csv", ["x3", "x2", "x1"], [[c, b, a] for a, b, c in X[:7].tolist()])
    out = tmp_path / "pred.csv"
    assert main(["predict", str(model), new, "--out", str(out)]) == 0
    header, rows = _read_predictions(out)
    assert header == ["price"] and len(rows) == 7
    np.testing.assert_array_equal([float(r[0]) for r in rows], est.predict(X[:7]))  # full precision
    assert main(["predict", str(model), path]) == 0  # to stdout; the target column is ignored
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "price" and len(lines) == 151


def test_tune_classification_with_text_labels(tmp_path, capsys):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(120, 2))
    labels = np.where(X[:, 0] + X[:, 1] > 0, "spam", "ham")
    path = _write_csv(tmp_path / "c.csv", ["a", "b", "label"], [[p, q, s] for (p, q), s in zip(X.tolist(), labels)])
    model = tmp_path / "c.npz"
    assert main(["tune", path, "--target", "label", "--centers", "15", "--epochs", "5", "--out", str(model)]) == 0
    out = capsys.readouterr().out
    assert "classification, 2 classes" in out and "train error rate" in out and "model saved" in out
    pred_path = tmp_path / "p.csv"
    assert main(["predict", str(model), path, "--out", str(pred_path)]) == 0
    header, rows = _read_predictions(pred_path)
    assert header == ["label"] and {r[0] for r in rows} <= {"spam", "ham"}
    assert np.mean(np.array([r[0] for r in rows]) == labels) > 0.9


def _error_run(args, capsys):
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err and err.startswith("nyhopt ")
    return err


def test_clear_errors(tmp_path, regression_csv, capsys):
    path, X, _ = regression_csv
    err = _error_run(["tune", str(tmp_path / "missing.csv"), "--target", "y"], capsys)
    assert "file not found" in err and "missing.csv" in err
    err = _error_run(["tune", path, "--target", "cost"], capsys)
    assert "no column 'cost'" in err and "'price'" in err
    bad = _write_csv(tmp_path / "bad.csv", ["x", "color", "y"], [[1, 2, 3], [4, "red", 6]])
    err = _error_run(["tune", bad, "--target", "y"], capsys)
    assert "line 3, column 'color': 'red'" in err and "numeric" in err
    txt = _write_csv(tmp_path / "txt.csv", ["x", "y"], [[1, "a"], [2, "b"]])
    err = _error_run(["tune", txt, "--target", "y", "--task", "regression"], capsys)
    assert "column 'y'" in err and "must be numeric" in err
    err = _error_run(["tune", path, "--target", "price", "--centers", "1000"], capsys)
    assert "--centers 1000" in err
    err = _error_run(["predict", str(tmp_path / "nomodel.npz"), path], capsys)
    assert "nomodel.npz" in err
    err = _error_run(["predict", path, path], capsys)  # a CSV is not a model
    assert "not an nyhopt model file" in err


def test_unknown_objective_is_a_usage_error(regression_csv, capsys):
    path, _, _ = regression_csv
    with pytest.raises(SystemExit) as exc:
        main(["tune", path, "--target", "price", "--objective", "magic"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'magic'" in err and "prop" in err


def test_missing_column_at_predict(tmp_path, regression_csv, capsys):
    path, _, _ = regression_csv
    model = tmp_path / "m.npz"
    assert main(["tune", path, "--target", "price", "--centers", "10", "--epochs", "1", "--out", str(model),
                 "--quiet"]) == 0
    other = _write_csv(tmp_path / "o.csv", ["x1", "x2"], [[1, 2]])
    err = _error_run(["predict", str(model), other], capsys)
    assert "lacks the column(s) ['x3']" in err


def test_entry_point_subprocess(tmp_path):
    """Run as a program: usage errors exit with 2 and print no traceback."""
    proc = subprocess.run([sys.executable, "-m", "nyhopt.cli", "tune", str(tmp_path / "none.csv"),
                           "--target", "y"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "none.csv" in proc.stderr
    assert proc.stdout == ""


def test_demo_runs_small(capsys):
    pytest.importorskip("sklearn")
    from nyhopt.cli import run_demo

    out = run_demo(seed=1, centers=40, epochs=3, quiet=False)
    text = capsys.readouterr().out
    assert "epoch   0" in text and "test error:" in text
    assert 0 <= out["test_error"] < 0.2 and out["epochs_run"] == 3
    assert main(["demo", "--centers", "30", "--epochs", "1", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("test error:") and text.count("\n") == 1


def test_features_option_and_python_saved_model(tmp_path, regression_csv, capsys):
    import nyhopt as nh
    from nyhopt.io import save_model

    path, X, y = regression_csv
    model = tmp_path / "f.npz"
    assert main(["tune", path, "--target", "1", "--features", "x1,x3", "--centers", "10", "--epochs", "2",
                 "--no-standardize", "--out", str(model), "--quiet"]) == 0
    est = load_model(model)
    assert est.n_features_in_ == 2 and not est.standardize
    assert est.meta_["feature_names"].tolist() == ["x1", "x3"] and est.meta_["target_name"] == "price"
    err = _error_run(["tune", path, "--target", "price", "--features", "x1,price"], capsys)
    assert "also listed in --features" in err
    # A model saved from Python has no column names: the CSV must have exactly its features.
    plain = nh.NystromKRR(nh.GaussianKernel(1.0), penalty=1e-3, centers=10, random_state=0).fit(X[:, :2], y)
    saved = save_model(tmp_path / "plain.npz", plain)
    two = _write_csv(tmp_path / "two.csv", ["u", "v"], X[:4, :2].tolist())
    out = tmp_path / "p2.csv"
    assert main(["predict", saved, two, "--out", str(out)]) == 0
    header, rows = _read_predictions(out)
    assert header == ["prediction"]
    np.testing.assert_array_equal([float(r[0]) for r in rows], plain.predict(X[:4, :2]))
    assert "4 predictions written" in capsys.readouterr().err
    err = _error_run(["predict", saved, path], capsys)
    assert "expects 2 feature columns" in err
