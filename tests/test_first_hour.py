"""What a new user meets first: names kept, one set of defaults, a talkative first run, clear errors."""
from __future__ import annotations

import inspect
import io
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import nyhopt as nh
from nyhopt import cli
from nyhopt.cli import _demo
from nyhopt.io import load_model, save_model

pd = pytest.importorskip("pandas")

NAMES = ["age", "income", "height"]


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(4)
    X = rng.uniform(-1, 1, size=(120, 3))
    y = np.sin(3 * X[:, 0]) + X[:, 1] + 0.05 * rng.normal(size=120)
    return pd.DataFrame(X, columns=NAMES), pd.Series(y, name="target")


def _no_warning(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args)


def _check_names(model, df):
    """Same names: no warning; other names: scikit-learn's error; no names: scikit-learn's warning."""
    assert model.feature_names_in_.tolist() == NAMES
    pred = _no_warning(model.predict, df)
    with pytest.raises(ValueError, match="feature names should match"):
        model.predict(df.rename(columns={"age": "years"}))
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        model.predict(df.to_numpy())
    return pred


# ----------------------------------------------------------------------------- 1. names kept


def test_dataframe_names_survive_tune_fit_save_and_load(frame, tmp_path):
    df, y = frame
    res = nh.tune(df, y, centers=15, epochs=3, progress=False)
    pred = _check_names(res.model, df)
    est = nh.HyperoptKRR(centers=15, epochs=3).fit(df, y)
    _check_names(est, df)
    for model in (res.model, est):
        loaded = load_model(save_model(tmp_path / f"{type(model).__name__}.npz", model))
        np.testing.assert_array_equal(_check_names(loaded, df), model.predict(df))
    np.testing.assert_array_equal(pred, res.model.predict(df))
    for validation in (0.25, 3):  # candidates chosen by validation
        chosen = nh.tune(df, y, objective=["prop", "gcv"], validation=validation, centers=10, epochs=2, progress=False)
        _check_names(chosen.model, df)


def test_files_of_the_command_line_give_their_names_back(frame, tmp_path):
    df, y = frame
    path = tmp_path / "data.csv"
    df.assign(target=y).to_csv(path, index=False)
    model = tmp_path / "m.npz"
    assert cli.main(["tune", str(path), "--target", "target", "--centers", "15", "--epochs", "2", "--out",
                     str(model), "--quiet"]) == 0
    loaded = load_model(model)
    _check_names(loaded, df)
    # a file written before models kept their names: the command line's summary has them
    est = nh.HyperoptKRR(centers=15, epochs=2).fit(df.to_numpy(), y.to_numpy())
    old = save_model(tmp_path / "old.npz", est, meta={"feature_names": np.array(NAMES)})
    _check_names(load_model(old), df)


def test_names_of_a_dask_array_built_from_a_dataframe(frame):
    distributed = pytest.importorskip("distributed")
    da = pytest.importorskip("dask.array")
    df, y = frame
    Xd = da.from_array(df.to_numpy(), chunks=(60, 3))
    yd = da.from_array(y.to_numpy(), chunks=(60,))
    options = dict(n_probes=3, tol=1e-6, maxiter=50)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as c, \
            distributed.Client(c):
        res = nh.tune(Xd, yd, objective="stoch-prop", centers=10, epochs=2, progress=False,
                      objective_options=options, feature_names=list(df.columns))
        est = nh.HyperoptKRR(objective="stoch-prop", centers=10, epochs=2, objective_options=options).fit(
            Xd, yd, feature_names=list(df.columns))
    _check_names(res.model, df)
    _check_names(est, df)
    with pytest.raises(ValueError, match="feature_names has 2 names but X has 3 columns"):
        nh.tune(df.to_numpy(), y, feature_names=["a", "b"])
    with pytest.raises(ValueError, match="differ from the column names"):
        nh.tune(df, y, feature_names=["a", "b", "c"])


# ----------------------------------------------------------------------------- 3. one set of defaults


def _default(fn, name):
    return inspect.signature(fn).parameters[name].default


def test_one_set_of_defaults():
    parser = cli.build_parser()
    tune_cli = parser._subparsers._group_actions[0].choices["tune"]
    cli_defaults = {a.dest: a.default for a in tune_cli._actions}
    assert _default(nh.tune, "random_state") == _default(nh.HyperoptKRR.__init__, "random_state") == 0
    assert cli_defaults["seed"] == 0
    # X standardized by the estimator and the command line (tune works in the coordinates given)
    assert _default(nh.HyperoptKRR.__init__, "standardize") is True and cli_defaults["no_standardize"] is False
    for name in ("centers", "epochs", "lr", "objective", "kernel", "patience"):
        assert _default(nh.tune, name) == _default(nh.HyperoptKRR.__init__, name) == cli_defaults[name], name


def test_integer_targets_are_not_silently_taken_for_classes():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 2))
    counts = np.round(3 + 2 * X[:, 0]).clip(0, 6).astype(int)
    with pytest.warns(UserWarning, match="task='regression'"):
        res = nh.tune(X, counts, centers=10, epochs=1, progress=False)
    assert res.task == "classification"
    res = _no_warning(lambda: nh.tune(X, counts, centers=10, epochs=1, progress=False, task="regression"))
    assert res.task == "regression"
    assert nh.HyperoptKRR(centers=10, epochs=1).fit(X, counts).model_.__class__.__name__ == "NystromKRR"
    res = _no_warning(lambda: nh.tune(X, np.where(counts > 3, "hi", "lo"), centers=10, epochs=1, progress=False))
    assert res.task == "classification"  # text labels are plainly classes: no warning


def test_more_centers_than_rows_uses_every_row_with_a_warning():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(50, 2))
    y = X[:, 0] - X[:, 1]
    match = "centers=100 is more than the 50 training rows: using all 50"
    with pytest.warns(UserWarning, match=match):
        assert nh.tune(X, y, epochs=1, progress=False).params.centers.shape == (50, 2)
    with pytest.warns(UserWarning, match=match):
        assert nh.HyperoptKRR(epochs=1).fit(X, y).params_.centers.shape == (50, 2)
    with pytest.warns(UserWarning, match=match):
        assert nh.NystromKRR(penalty=1e-3).fit(X, y).centers_.shape == (50, 2)
    with pytest.warns(UserWarning, match="more than the 40 training rows"):  # the rows left after the split
        nh.tune(X, y, epochs=1, progress=False, validation=0.2)


# ----------------------------------------------------------------------------- 6. small things


def test_tune_result_repr_is_a_short_summary():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 12))
    res = nh.tune(X, X[:, 0], centers=200, epochs=1, progress=False)
    text = repr(res)
    assert text.startswith("TuneResult(task='regression', objective='prop'") and len(text) < 400, text
    assert "centers=<array of shape (200, 12)>" in text and "lengthscale=<12 values" in text


def test_offline_download_leaves_no_folder_and_says_it_in_one_line(tmp_path, monkeypatch):
    pytest.importorskip("pooch")
    from nyhopt.datasets import DatasetNotAvailableError, load_dataset

    from nyhopt import datasets

    monkeypatch.delenv("NYHOPT_DATA", raising=False)
    monkeypatch.delenv("NYHOPT_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(datasets, "_repo_root", lambda: tmp_path / "nowhere" / "repo")  # no ../shared/data
    monkeypatch.setenv("NYHOPT_DATA_URL", "http://127.0.0.1:9")  # the discard port: connection refused
    cache = tmp_path / "cache" / "nyhopt"
    with pytest.raises(DatasetNotAvailableError) as info:
        load_dataset("mg", cache_dir=cache, data_dir=None)
    msg = str(info.value)
    assert "\n" not in msg and "Caused by" not in msg and "no connection" in msg and len(msg) < 500, msg
    assert info.value.__suppress_context__ and info.value.__cause__ is None  # no chained traceback
    assert not cache.exists() and (tmp_path / "cache").exists() is False


# ----------------------------------------------------------------------------- 2. the first run


def test_a_cache_that_cannot_be_written_never_breaks_the_import(tmp_path):
    code = ("import numba.core.caching as c\n"
            "c.FunctionCache._impl_class._locator_classes = []  # no writable place anywhere\n"
            "import numpy as np, nyhopt as nh\n"
            "from nyhopt.ops import _numba\n"
            "from nyhopt.backend._compile_notice import notice_text\n"
            "print(_numba.DISK_CACHE, _numba._chunk(1, 4, 100))  # a loop compiles and runs without the cache\n"
            "print(notice_text())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env=dict(os.environ, NUMBA_DISABLE_JIT="0"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, second = proc.stdout.splitlines()
    assert first == "False (25, 50)" and "NUMBA_CACHE_DIR" in second


def test_compile_notice_once_and_only_when_nyhopt_compiles():
    import numba

    from nyhopt.backend._compile_notice import compile_notice
    from nyhopt.ops import _numba

    out = io.StringIO()
    with compile_notice(out):
        assert numba.njit(lambda a: a + 1)(1) == 2  # not nyhopt's: nothing said
        assert out.getvalue() == ""
        fresh = numba.njit(cache=False)(_numba._chunk.py_func)  # a new dispatcher: compiled on first call
        assert fresh(1, 4, 100) == (25, 50)
        assert fresh(1.0, 4.0, 100.0) == (25.0, 50.0)  # a second signature: compiled again, said once
    assert out.getvalue().count("compiling") == 1 and "first run only" in out.getvalue()
    quiet = io.StringIO()
    with compile_notice(quiet, enabled=False):
        numba.njit(cache=False)(_numba._chunk.py_func)(0, 2, 10)
    assert quiet.getvalue() == ""


def test_demo_speaks_before_the_slow_imports(monkeypatch):
    out = io.StringIO()

    def split(*args, **kwargs):  # the data loading (importing scikit-learn) comes after the first line
        assert out.getvalue().startswith("nyhopt demo: ")
        raise cli.CLIError("stop here")

    monkeypatch.setattr(_demo, "digits_split", split)
    with pytest.raises(cli.CLIError, match="stop here"):
        cli.run_demo(centers=10, epochs=0, stream=out)
