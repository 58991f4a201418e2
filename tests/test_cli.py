"""The ``nyhopt`` command line (nyhopt.cli)."""
from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.backend import gpu_available
from nyhopt.cli import main
from nyhopt.io import load_model

from _tables import write_csv as _write_csv




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
    assert est.feature_names_in_.tolist() == ["x1", "x2", "x3"]  # the CSV's names, kept by the model file

    # predict: columns found by name (in another order, with the target present or not).
    new = _write_csv(tmp_path / "new.csv", ["x3", "x2", "x1"], [[c, b, a] for a, b, c in X[:7].tolist()])
    out = tmp_path / "pred.csv"
    assert main(["predict", str(model), new, "--out", str(out)]) == 0
    header, rows = _read_predictions(out)
    assert header == ["price"] and len(rows) == 7
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(X[:7], columns=["x1", "x2", "x3"])
    np.testing.assert_array_equal([float(r[0]) for r in rows], est.predict(frame))  # full precision
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
    err = _error_run(["predict", str(tmp_path / "nomodel.npz"), path], capsys)
    assert "nomodel.npz" in err
    err = _error_run(["predict", path, path], capsys)  # a CSV is not a model
    assert "not an nyhopt model file" in err


def test_compressed_tables_are_read_and_binary_files_named(tmp_path, regression_csv, capsys):
    import gzip

    path, X, y = regression_csv
    text = open(path).read().replace(",", "\t")
    gz = tmp_path / "data.tsv.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    model = tmp_path / "m.npz"
    assert main(["tune", str(gz), "--target", "price", "--centers", "10", "--epochs", "2", "--out", str(model),
                 "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    pred = tmp_path / "p.csv"
    assert main(["predict", str(model), str(gz), "--out", str(pred)]) == 0
    assert len(_read_predictions(pred)[1]) == len(y)
    capsys.readouterr()
    wrong = tmp_path / "data.csv"
    wrong.write_bytes(gz.read_bytes())
    err = _error_run(["tune", str(wrong), "--target", "price"], capsys)
    assert "is not a text table: it seems to be a gzip-compressed file (name it with .gz" in err
    assert "codec" not in err and len(err.strip().splitlines()) == 1


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


# ---------------------------------------------------------------------- output paths (issue #15, case 11)


@pytest.fixture
def no_work(monkeypatch):
    """Reading the data is the first piece of work: make it fail loudly."""
    import nyhopt.io

    def refuse(*args, **kwargs):
        raise AssertionError("work started before the output paths were checked")

    monkeypatch.setattr(nyhopt.io, "read_csv", refuse)
    monkeypatch.setattr(nyhopt.io, "load_model", refuse)


@pytest.mark.parametrize("option", ["--out", "--json", "--report"])
def test_unwritable_tune_outputs_fail_before_any_work(tmp_path, regression_csv, capsys, no_work, option):
    path = regression_csv[0]
    regular = tmp_path / "regular"
    regular.write_text("")
    (tmp_path / "folder.npz").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    for bad, words in [(regular / "x.out", "is a file, not a folder"),
                       (tmp_path / "no" / "such" / "x.out", "does not exist"),
                       (tmp_path / "folder.npz", "is a folder")]:
        err = _error_run(["tune", path, "--target", "price", option, str(bad)], capsys)
        assert option in err and words in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no stray files


def test_unwritable_outputs_of_predict_and_demo(tmp_path, regression_csv, capsys, no_work):
    regular = tmp_path / "regular"
    regular.write_text("")
    err = _error_run(["predict", "m.npz", regression_csv[0], "--out", str(regular / "p.csv")], capsys)
    assert "--out" in err and "is a file, not a folder" in err
    err = _error_run(["demo", "--report", str(tmp_path / "none" / "r.png")], capsys)
    assert "--report" in err and "does not exist" in err


def test_read_only_folder_is_refused(tmp_path, regression_csv, capsys, no_work):
    import os

    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        err = _error_run(["tune", regression_csv[0], "--target", "price", "--out", str(locked / "m.npz")], capsys)
        assert "permission denied" in err
    finally:
        locked.chmod(0o700)


def test_write_error_after_the_checks_is_one_line(tmp_path, regression_csv, capsys, monkeypatch):
    from nyhopt.cli import _paths

    monkeypatch.setattr(_paths, "check_output", lambda path, option: None)
    err = _error_run(["tune", regression_csv[0], "--target", "price", "--centers", "5", "--epochs", "0",
                      "--quiet", "--out", str(tmp_path / "f" / "m.npz")], capsys)
    assert "m.npz" in err and err.count("\n") == 1


def test_csv_field_over_the_csv_module_limit(tmp_path, capsys):
    path = tmp_path / "long.csv"
    path.write_text("a,b,y\n1," + "9" * 200_000 + ",3\n4,5,6\n")
    err = _error_run(["tune", str(path), "--target", "y"], capsys)
    assert "line 2" in err and "field" in err and err.count("\n") == 1


def test_subprocess_error_has_no_traceback(tmp_path):
    regular = tmp_path / "regular"
    regular.write_text("")
    proc = subprocess.run([sys.executable, "-m", "nyhopt", "predict", "m.npz", "d.csv", "--out",
                           str(regular / "p.csv")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "--out" in proc.stderr


def test_predict_reads_a_python_saved_model_columns_by_name(tmp_path, regression_csv, capsys):
    # a model fitted on named columns and saved from Python was read by position: a CSV with its
    # columns in another order gave wrong predictions, one with the target column was refused
    csv_path, X, y = regression_csv
    est = nh.HyperoptKRR(centers=10, epochs=2).fit(X, y, feature_names=["x1", "x2", "x3"])
    path = nh.save_model(tmp_path / "m.npz", est)
    out = tmp_path / "p.csv"
    assert main(["predict", path, str(csv_path), "--out", str(out)]) == 0  # columns x1, price, x2, x3
    header, rows = _read_predictions(out)
    np.testing.assert_allclose(np.array(rows, dtype=float)[:, 0], est.predict(X), rtol=1e-12)
    shuffled = _write_csv(tmp_path / "shuffled.csv", ["x3", "x1", "x2"], X[:, [2, 0, 1]].tolist())
    assert main(["predict", path, str(shuffled), "--out", str(out)]) == 0
    header, rows = _read_predictions(out)
    np.testing.assert_allclose(np.array(rows, dtype=float)[:, 0], est.predict(X), rtol=1e-12)


def test_predict_into_a_closed_pipe_ends_quietly(tmp_path, regression_csv, capsys, monkeypatch):
    # "nyhopt predict model.npz data.csv | head" printed "error: [Errno 32] Broken pipe" (status 2)
    csv_path, X, y = regression_csv
    model = nh.NystromKRR(centers=5).fit(X, y)
    model.feature_names_in_ = np.array(["x1", "x2", "x3"], dtype=object)  # as `nyhopt tune` saves them
    path = nh.save_model(tmp_path / "m.npz", model)

    class ClosedPipe:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert main(["predict", path, str(csv_path)]) == 141
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------------- --device


class _FakeDevice:
    """Stands in for CuPy: records the transfers; refuses text (as CuPy does)."""

    def __init__(self):
        self.to_device = 0
        self.to_host = 0

    def asarray(self, a):
        a = np.asarray(a)
        if a.dtype.kind in "OUS":
            raise TypeError("CuPy holds no text")
        self.to_device += 1
        return a

    def asnumpy(self, a):
        self.to_host += 1
        return np.asarray(a)


def test_device_cpu_and_auto_without_gpu(tmp_path, regression_csv, monkeypatch):
    from nyhopt.cli import _device

    monkeypatch.setattr(_device, "gpu_module", lambda: None)
    path = regression_csv[0]
    for device in ("cpu", "auto"):
        model = tmp_path / f"{device}.npz"
        assert main(["tune", path, "--target", "price", "--centers", "5", "--epochs", "1", "--quiet",
                     "--device", device, "--out", str(model)]) == 0
        assert main(["predict", str(model), path, "--device", device, "--out", str(tmp_path / "p.csv")]) == 0


def test_device_gpu_without_gpu_is_a_usage_error(regression_csv, capsys, monkeypatch):
    from nyhopt.cli import _device

    monkeypatch.setattr(_device, "gpu_module", lambda: None)
    for cmd in (["tune", regression_csv[0], "--target", "price"], ["predict", "m.npz", regression_csv[0]],
                ["demo"]):
        err = _error_run(cmd + ["--device", "gpu"], capsys)
        assert "--device gpu" in err and "no usable CUDA GPU" in err and err.count("\n") == 1


def _cupy_without_device(monkeypatch, error=None, count=0):
    """A stand-in ``cupy`` module whose CUDA runtime fails as on a machine without a (recent) driver."""
    import types

    def device_count():
        if error is not None:
            raise RuntimeError(error)
        return count

    runtime = types.SimpleNamespace(getDeviceCount=device_count)
    fake = types.SimpleNamespace(__version__="14.2.0", is_available=lambda: False,
                                 cuda=types.SimpleNamespace(runtime=runtime))
    monkeypatch.setitem(sys.modules, "cupy", fake)


def test_device_gpu_says_the_cuda_cause(regression_csv, capsys, monkeypatch):
    cause = "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version"
    _cupy_without_device(monkeypatch, error=cause)
    err = _error_run(["tune", regression_csv[0], "--target", "price", "--device", "gpu"], capsys)
    assert f"no usable CUDA GPU: CuPy 14.2.0 is installed but no CUDA device is usable: {cause}" in err
    assert "likely no NVIDIA driver is loaded" in err and err.count("\n") == 1
    assert main(["info", "--json", "--no-compile"]) == 0
    device = json.loads(capsys.readouterr().out)["device"]
    assert device.startswith(f"none: CuPy 14.2.0 is installed but no CUDA device is usable: {cause}")
    _cupy_without_device(monkeypatch, count=0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    err = _error_run(["demo", "--device", "gpu"], capsys)
    assert "CuPy 14.2.0 is installed but no CUDA device is usable: it sees no CUDA device (CUDA_VISIBLE_DEVICES='')" in err


def test_gpu_path_through_the_seam(tmp_path, monkeypatch, capsys):
    """The GPU code path with a stand-in device: text labels stay on the host, results come back."""
    from nyhopt.cli import _device

    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 2))
    labels = np.where(X[:, 0] > 0, "pos", "neg")
    path = _write_csv(tmp_path / "c.csv", ["a", "b", "label"], [[p, q, s] for (p, q), s in zip(X.tolist(), labels)])
    cpu_pred, gpu_pred = tmp_path / "cpu.csv", tmp_path / "gpu.csv"
    args = ["tune", path, "--target", "label", "--centers", "15", "--epochs", "3", "--quiet"]
    assert main(args + ["--device", "cpu", "--out", str(tmp_path / "cpu.npz")]) == 0
    assert main(["predict", str(tmp_path / "cpu.npz"), path, "--device", "cpu", "--out", str(cpu_pred)]) == 0

    fake = _FakeDevice()
    monkeypatch.setattr(_device, "gpu_module", lambda: fake)
    assert main(args + ["--device", "gpu", "--out", str(tmp_path / "gpu.npz")]) == 0
    assert fake.to_device >= 2 and fake.to_host >= 1
    assert load_model(tmp_path / "gpu.npz").classes_.tolist() == ["neg", "pos"]
    assert main(["predict", str(tmp_path / "gpu.npz"), path, "--device", "auto", "--out", str(gpu_pred)]) == 0
    assert _read_predictions(gpu_pred) == _read_predictions(cpu_pred)


# ---------------------------------------------------------------------- info


def test_info_text_and_json(capsys):
    assert main(["info", "--no-compile"]) == 0
    lines = capsys.readouterr().out.splitlines()
    keys = [line.split(": ", 1)[0] for line in lines]
    for key in ("python", "nyhopt", "numpy", "scipy", "numba", "cupy", "device", "cuda_compile",
                "numba_threads", "numba_threading_layer", "blas", "memory_budget_bytes", "pool_workers"):
        assert key in keys
    assert all(": " in line for line in lines)
    assert main(["info", "--json", "--no-compile"]) == 0
    info = json.loads(capsys.readouterr().out)
    import nyhopt

    assert info["nyhopt"] == nyhopt.__version__ and info["cuda_compile"] == "not checked"
    assert info["memory_budget_bytes"] == nyhopt.get_memory_budget()


def test_info_without_cupy_or_nvrtc(monkeypatch):
    from nyhopt.cli import _report
    from nyhopt.ops import _cuda_compile as cc

    def no_nvrtc(*args, **kwargs):
        raise RuntimeError("NVRTC could not be loaded\nsecond line")

    monkeypatch.setattr(cc, "nvrtc_compile", no_nvrtc)
    monkeypatch.setattr(_report, "_version", lambda name: None)
    info = _report.gather()  # a CPU-only install: no compile error, no pointer to the test extra
    assert info["cuda_compile"].startswith("no GPU support installed") and "test" not in info["cuda_compile"]
    assert info["device"] == "none (CuPy is not installed)"
    assert "cupy: not installed" in _report.format_text(info).splitlines()
    assert info["numba_cache"]
    monkeypatch.setattr(_report, "_version", lambda name: "14.0" if name == "cupy" else None)
    monkeypatch.setattr(_report, "_device", lambda installed: "none (no device)")
    assert _report.gather()["cuda_compile"] == "RuntimeError: NVRTC could not be loaded"  # CuPy without NVRTC


def test_python_dash_m_nyhopt():
    proc = subprocess.run([sys.executable, "-m", "nyhopt", "info", "--no-compile"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("python: ")
    proc = subprocess.run([sys.executable, "-m", "nyhopt"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "usage: nyhopt" in proc.stdout


def test_more_centers_than_rows_uses_all_rows_with_a_warning(tmp_path, capsys):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 2))
    path = _write_csv(tmp_path / "small.csv", ["a", "b", "y"], [[p, q, p - q] for p, q in X.tolist()])
    model = tmp_path / "m.npz"
    assert main(["tune", path, "--target", "y", "--epochs", "1", "--out", str(model), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "warning: --centers 100 is more than the 30 training rows: using all 30 rows" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert load_model(model).model_.centers_.shape == (30, 2)


def test_integer_target_taken_as_classes_says_how_to_choose(tmp_path, capsys):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 2))
    counts = np.round(3 + 2 * X[:, 0]).clip(0, 6).astype(int)
    path = _write_csv(tmp_path / "counts.csv", ["a", "b", "count"], [[p, q, c] for (p, q), c in zip(X.tolist(), counts)])
    assert main(["tune", path, "--target", "count", "--centers", "10", "--epochs", "1", "--out",
                 str(tmp_path / "c.npz")]) == 0
    out, err = capsys.readouterr()
    assert "(classification," in out and "--task regression" in err
    assert main(["tune", path, "--target", "count", "--task", "regression", "--centers", "10", "--epochs", "1",
                 "--out", str(tmp_path / "r.npz")]) == 0
    out, err = capsys.readouterr()
    assert "(regression)" in out and "--task" not in err


def test_zero_one_target_is_taken_as_classes_without_a_note(tmp_path, capsys):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(60, 2))
    path = _write_csv(tmp_path / "binary.csv", ["a", "b", "sick"],
                      [[p, q, int(p > 0)] for p, q in X.tolist()])
    assert main(["tune", path, "--target", "sick", "--centers", "10", "--epochs", "1", "--out",
                 str(tmp_path / "b.npz")]) == 0
    out, err = capsys.readouterr()
    assert "(classification, 2 classes)" in out
    assert "distinct integers" not in err and "--task" not in err


def test_report_without_matplotlib_fails_before_any_work(tmp_path, regression_csv, capsys, monkeypatch):
    import importlib.util

    path, _, _ = regression_csv
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    model = tmp_path / "m.npz"
    err = _error_run(["tune", path, "--target", "price", "--out", str(model), "--report", str(tmp_path / "r.png")],
                     capsys)
    assert "--report needs matplotlib" in err and 'nyhopt[plot]' in err
    assert not model.exists()
    err = _error_run(["demo", "--report", str(tmp_path / "r.png")], capsys)
    assert "--report needs matplotlib" in err
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "sklearn" else real(name, *a))
    err = _error_run(["demo"], capsys)
    assert "needs scikit-learn" in err and 'nyhopt[demo]' in err


def test_choosing_by_validation_prints_the_errors_it_has(tmp_path, regression_csv, capsys):
    path, _, _ = regression_csv
    args = ["tune", path, "--target", "price", "--objective", "prop,gcv", "--centers", "10", "--epochs", "3",
            "--out", str(tmp_path / "m.npz")]
    for validation in ("0.2", "3"):
        assert main(args + ["--validation", validation]) == 0
        out = capsys.readouterr().out
        assert "n/a" not in out, out
        last = [line for line in out.splitlines() if "RMSE on all 150 rows" in line]
        assert len(last) == 1 and "validation RMSE of" in last[0]



@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU (CuPy with a device)")
def test_predict_on_the_gpu_with_array_intercepts(tmp_path):
    """``predict --device gpu`` of models whose intercept_ and target scales are arrays (three classes, two
    outputs): only the coefficients and centers move to the device, as after a fit there (the intercept
    moved too, and np.asarray of it raised)."""
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, size=(150, 2))
    labels = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0)
    path = _write_csv(tmp_path / "c.csv", ["a", "b", "label"], [[p, q, s] for (p, q), s in zip(X.tolist(), labels)])
    assert main(["tune", path, "--target", "label", "--task", "classification", "--centers", "12", "--epochs", "2",
                 "--quiet", "--device", "cpu", "--out", str(tmp_path / "c.npz")]) == 0
    model = nh.NystromKRR(penalty=1e-3, centers=12, random_state=0, normalize_y=True).fit(
        X, np.stack([X[:, 0] + 3.0, X[:, 1] ** 2], 1))
    nh.save_model(tmp_path / "r.npz", model)
    features = _write_csv(tmp_path / "x.csv", ["a", "b"], X.tolist())  # a model saved from Python: no names
    for name, extra in (("c", []), ("r", []), ("r", ["--std"])):
        out = {}
        for device in ("cpu", "gpu"):
            out[device] = tmp_path / f"{name}-{device}.csv"
            assert main(["predict", str(tmp_path / f"{name}.npz"), path if name == "c" else features, "--device",
                         device, "--out", str(out[device])] + extra) == 0
        (head_cpu, cpu), (head_gpu, gpu) = _read_predictions(out["cpu"]), _read_predictions(out["gpu"])
        assert head_gpu == head_cpu
        if name == "c":
            assert gpu == cpu
        else:
            np.testing.assert_allclose(np.array(gpu, dtype=float), np.array(cpu, dtype=float), rtol=1e-10)


def test_the_command_line_asks_cupy_for_precompiled_headers(monkeypatch):
    """Set for the command line's process before CuPy is imported; a user's setting wins; never after."""
    import os
    import sys

    from nyhopt.cli._device import prefer_precompiled_headers

    monkeypatch.delenv("CUPY_NVRTC_USE_PCH", raising=False)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    prefer_precompiled_headers()
    assert os.environ["CUPY_NVRTC_USE_PCH"] == "1"
    monkeypatch.setenv("CUPY_NVRTC_USE_PCH", "0")
    prefer_precompiled_headers()
    assert os.environ["CUPY_NVRTC_USE_PCH"] == "0"
    monkeypatch.delenv("CUPY_NVRTC_USE_PCH")
    monkeypatch.setitem(sys.modules, "cupy", object())
    prefer_precompiled_headers()
    assert "CUPY_NVRTC_USE_PCH" not in os.environ


def test_tune_writes_progress_lines_when_stderr_is_not_a_terminal(tmp_path, regression_csv, capsys):
    path = regression_csv[0]
    args = ["tune", path, "--target", "price", "--centers", "10", "--epochs", "6", "--patience", "0",
            "--validation", "0.2", "--out", str(tmp_path / "m.npz")]
    assert main(args) == 0
    err = capsys.readouterr().err  # captured: not a terminal, so lines instead of a bar
    lines = [line for line in err.splitlines() if line.startswith("tune prop: epoch")]
    assert lines[0].startswith("tune prop: epoch 0/6,") and lines[-1].startswith("tune prop: epoch 6/6,")
    assert "val err" in lines[-1] and "\r" not in err
    assert main(args + ["--quiet"]) == 0
    assert ": epoch" not in capsys.readouterr().err
