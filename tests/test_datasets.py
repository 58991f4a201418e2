"""Tests of nyhopt.datasets: loaders, splits, preprocessing, synthetic data, metrics."""
import numpy as np
import pytest

from nyhopt import datasets
from nyhopt.datasets import (
    Dataset,
    available_datasets,
    c_error,
    find_data_dir,
    load_dataset,
    nrmse,
    rmse,
    synthetic,
)

EXPECTED = {
    # name: (n_train, n_test, d, task)
    "spacega": (2175, 932, 6, "regression"),
    "mg": (969, 416, 6, "regression"),
    "cpusmall": (5734, 2458, 12, "regression"),
    "abalone": (2924, 1253, 10, "regression"),
    "energy": (614, 154, 8, "regression"),
    "protein": (36584, 9146, 9, "regression"),
    "svmguide1": (3089, 4000, 4, "binary"),
    "higgs_small": (7000, 500, 28, "binary"),
}


def _have_data():
    """Every dataset of :data:`EXPECTED` in the folder nyhopt finds ($NYHOPT_DATA, else ../shared/data)."""
    try:
        root = find_data_dir()
    except FileNotFoundError:
        return False
    return all((root / name).is_dir() for name in EXPECTED)


needs_data = pytest.mark.skipif(not _have_data(), reason="datasets missing from $NYHOPT_DATA (else ../shared/data)")


def test_available_datasets_lists_all():
    assert available_datasets() == list(EXPECTED)


@needs_data
@pytest.mark.parametrize("name", list(EXPECTED))
def test_shapes_task_and_standardization(name):
    n_train, n_test, d, task = EXPECTED[name]
    ds = load_dataset(name, seed=0)
    assert isinstance(ds, Dataset)
    assert ds.name == name
    assert ds.X_train.shape == (n_train, d)
    assert ds.X_test.shape == (n_test, d)
    assert ds.y_train.shape == (n_train,) and ds.y_test.shape == (n_test,)
    assert ds.task == task
    for a in (ds.X_train, ds.y_train, ds.X_test, ds.y_test):
        assert a.dtype == np.float64 and np.all(np.isfinite(a))
    mean = ds.X_train.mean(axis=0)
    std = ds.X_train.std(axis=0)
    np.testing.assert_allclose(mean, 0.0, atol=1e-10)
    # constant training columns are only centered (std stays 0)
    assert np.all((np.abs(std - 1.0) < 1e-10) | (std == 0.0))
    if task == "regression":
        assert ds.metric == "nrmse"
        assert abs(ds.y_train.mean()) < 1e-10 and abs(ds.y_train.std() - 1.0) < 1e-10
        assert ds.y_std > 0
    else:
        assert ds.metric == "c-error"
        assert set(np.unique(ds.y_train)) == {-1.0, 1.0}
        assert set(np.unique(ds.y_test)) == {-1.0, 1.0}
        assert (ds.y_mean, ds.y_std) == (0.0, 1.0)


@needs_data
def test_raw_values_are_parsed_correctly():
    # energy: first row "0,98;514,50;294,00;110,25;7,00;2;0,00;0;15,55;21,33"
    (X, y), = datasets._read_raw("energy", str(find_data_dir()))
    np.testing.assert_allclose(X[0], [0.98, 514.5, 294.0, 110.25, 7.0, 2.0, 0.0, 0.0])
    assert y[0] == 15.55 and X.shape == (768, 8)
    # abalone: "M,0.455,...,15" -> one-hot (F, I, M) first, rings last
    (X, y), = datasets._read_raw("abalone", str(find_data_dir()))
    np.testing.assert_allclose(X[0, :4], [0.0, 0.0, 1.0, 0.455])
    assert y[0] == 15.0 and np.all(X[:, :3].sum(axis=1) == 1.0)
    # svmguide1: 0/1 labels, 4 dense features
    (Xtr, ytr), (Xte, yte) = datasets._read_raw("svmguide1", str(find_data_dir()))
    np.testing.assert_allclose(Xtr[0], [26.173, 58.867, -0.1894697, 125.1225])
    assert set(np.unique(ytr)) == {0.0, 1.0} and Xte.shape == (4000, 4)
    # protein: header skipped, label = RMSD
    (X, y), = datasets._read_raw("protein", str(find_data_dir()))
    assert y[0] == 17.284 and X[0, 0] == 13558.3 and X.shape == (45730, 9)


@needs_data
def test_split_is_seeded_and_covers_all_rows():
    a = load_dataset("mg", seed=3)
    b = load_dataset("mg", seed=3)
    c = load_dataset("mg", seed=4)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    assert not np.array_equal(a.y_train, c.y_train)
    # train + test together are the whole raw label set
    (_, y_raw), = datasets._read_raw("mg", str(find_data_dir()))
    y_all = np.sort(np.concatenate([a.to_original(a.y_train), a.to_original(a.y_test)]))
    np.testing.assert_allclose(y_all, np.sort(y_raw), rtol=1e-12, atol=1e-12)
    # fixed split ignores the seed
    h1, h2 = load_dataset("higgs_small", seed=0), load_dataset("higgs_small", seed=7)
    np.testing.assert_array_equal(h1.X_test, h2.X_test)


@needs_data
def test_returned_arrays_are_copies_of_the_cache():
    ds = load_dataset("mg")
    ds.X_train[:] = 123.0
    ds.y_train[:] = 5.0
    again = load_dataset("mg")
    assert not np.any(again.X_train == 123.0)
    assert not np.any(again.y_train == 5.0)
    (X, y), = datasets._read_raw("mg", str(find_data_dir()))
    assert not X.flags.writeable and not y.flags.writeable


@needs_data
def test_float32_and_aliases():
    ds = load_dataset("Space_GA", dtype=np.float32)
    assert ds.name == "spacega" and ds.X_train.dtype == np.float32
    assert ds.y_test.dtype == np.float32
    assert load_dataset("higgs").name == "higgs_small"


@needs_data
def test_error_metric_on_original_scale():
    ds = load_dataset("energy")
    y_orig = ds.to_original(ds.y_test)
    pred = ds.y_test + 0.1
    expected = np.sqrt(np.mean((0.1 * ds.y_std) ** 2)) / abs(y_orig.mean())
    assert ds.error(pred) == pytest.approx(expected, rel=1e-12)
    assert ds.error(pred[:, None]) == pytest.approx(expected, rel=1e-12)
    cls = load_dataset("svmguide1")
    assert cls.error(cls.y_test) == 0.0
    assert cls.error(-cls.y_test) == 1.0


def test_bad_arguments(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="unknown dataset name 'nope'"):
        load_dataset("nope")
    with pytest.raises(TypeError, match="name"):
        load_dataset(3)
    with pytest.raises(FileNotFoundError, match="data_dir"):
        load_dataset("mg", data_dir=tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="mg_scale.csv"):
        load_dataset("mg", data_dir=tmp_path)
    monkeypatch.setenv("NYHOPT_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="NYHOPT_DATA"):
        load_dataset("mg")
    with pytest.raises(ValueError, match="dtype"):
        synthetic(10, dtype=np.int64)
    with pytest.raises(ValueError, match="d must be >= 7"):
        synthetic(10, d=5)
    with pytest.raises(TypeError, match="n must be an int"):
        synthetic(10.5)


def test_data_dir_search_order(tmp_path, monkeypatch):
    monkeypatch.delenv("NYHOPT_DATA", raising=False)
    work = tmp_path / "proj"
    work.mkdir()
    shared = tmp_path / "shared" / "data"
    shared.mkdir(parents=True)
    monkeypatch.chdir(work)
    assert find_data_dir() == shared.resolve()
    monkeypatch.setenv("NYHOPT_DATA", str(tmp_path))
    assert find_data_dir() == tmp_path
    monkeypatch.delenv("NYHOPT_DATA")
    monkeypatch.setattr(datasets, "_repo_root", lambda: tmp_path / "a" / "b")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="looked in"):
        find_data_dir()


def test_data_dir_env_variable_with_custom_folder(tmp_path, monkeypatch):
    folder = tmp_path / "mg"
    folder.mkdir()
    folder.joinpath("mg_scale.csv").write_text(
        "\n".join(f"{i % 7 + 1.0},{i * 0.1},{-i * 0.2},1,2,3,{i % 3}" for i in range(20)) + "\n"
    )
    monkeypatch.setenv("NYHOPT_DATA", str(tmp_path))
    ds = load_dataset("mg", seed=1)
    assert ds.X_train.shape == (14, 6) and ds.X_test.shape == (6, 6)
    # constant columns: centered only
    np.testing.assert_array_equal(ds.X_train[:, 2], 0.0)


def test_synthetic_follows_the_documented_draw_order():
    ds = synthetic(50, d=9, n_test=20, seed=7)
    rng = np.random.default_rng(7)
    X = rng.uniform(-1.5, 1.5, size=(50, 9))
    noise = rng.standard_normal(50)
    Xt = rng.uniform(-1.5, 1.5, size=(20, 9))

    def f(x):
        return (np.sin(3 * x[:, 0]) + np.cos(2 * x[:, 1]) + 0.5 * x[:, 2] * x[:, 3]
                + 0.3 * x[:, 4] ** 2 + 0.2 * np.sin(5 * x[:, 5]) + 0.1 * x[:, 6])

    np.testing.assert_array_equal(ds.X_train, X)
    np.testing.assert_array_equal(ds.y_train, f(X) + 0.1 * noise)
    np.testing.assert_array_equal(ds.X_test, Xt)
    np.testing.assert_array_equal(ds.y_test, f(Xt))
    assert ds.metric == "rmse" and ds.task == "regression"
    # training rows do not depend on n_test; float32 is a cast of the same draws
    np.testing.assert_array_equal(synthetic(50, d=9, n_test=3, seed=7).X_train, X)
    np.testing.assert_array_equal(synthetic(50, d=9, n_test=3, seed=7, dtype=np.float32).X_train,
                                  X.astype(np.float32))
    # the irrelevant feature does not change the target
    assert ds.error(f(Xt)) == 0.0


def test_metrics():
    assert rmse([0.0, 0.0], [3.0, 4.0]) == pytest.approx(np.sqrt(12.5))
    assert nrmse([1.0, 3.0], [1.0, 3.0]) == 0.0
    assert nrmse([-1.0, -3.0], [-2.0, -4.0]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="mean"):
        nrmse([1.0, -1.0], [0.0, 0.0])
    with pytest.raises(ValueError, match="shape"):
        nrmse([1.0, 2.0], [1.0, 2.0, 3.0])
    assert c_error([1, -1, 1], [1.0, 1.0, 0.0]) == pytest.approx(2 / 3)
    assert c_error([0, 1, 1, 0], [0.2, 0.9, 0.4, 0.7]) == 0.5
    onehot = np.eye(3)[[0, 1, 2, 2]]
    assert c_error(onehot, onehot[[0, 1, 2, 0]]) == 0.25
    y = np.array([1.0, -1.0])
    c_error(y, np.array([0.5, 0.5]))
    np.testing.assert_array_equal(y, [1.0, -1.0])  # inputs untouched


@pytest.mark.parametrize("metric", [rmse, nrmse, c_error])
def test_metrics_reject_nan_inf_complex_and_bad_shapes(metric):
    # issue #15 case 13: NaN/inf passed through, imaginary parts were dropped
    ok = [1.0, -1.0, 2.0]
    for bad in ([1.0, np.nan, 2.0], [1.0, np.inf, 2.0], [-np.inf, 1.0, 2.0]):
        with pytest.raises(ValueError, match="y_true contains NaN or infinity"):
            metric(bad, ok)
        with pytest.raises(ValueError, match="y_pred contains NaN or infinity"):
            metric(ok, bad)
    with pytest.raises(TypeError, match="y_true must hold real numbers"):
        metric(np.array([1 + 5j, 1.0, 2.0]), ok)
    with pytest.raises(TypeError, match="y_pred must hold real numbers"):
        metric(ok, np.array([1.0, 2.0, 3.0], dtype=complex))
    with pytest.raises(TypeError, match="y_pred"):
        metric(ok, ["a", "b", "c"])
    with pytest.raises(ValueError, match="same shape"):
        metric(ok, ok[:2])
    with pytest.raises(ValueError, match="y_true must be 1-D"):
        metric(np.ones((2, 2, 2)), np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="empty"):
        metric([], [])
    y = np.array([1.0, np.nan, 2.0])
    with pytest.raises(ValueError):
        metric(y, ok)
    assert np.isnan(y[1]) and y[0] == 1.0  # input untouched


def test_metrics_do_not_overflow_or_underflow():
    assert rmse([1e200], [-1e200]) == pytest.approx(2e200, rel=1e-15)
    assert rmse([1.7e308, -1.7e308], [-1.7e308, 1.7e308]) == pytest.approx(3.4e308, rel=1e-15)
    assert rmse([3e-200, 0.0], [0.0, 4e-200]) == pytest.approx(np.sqrt(12.5) * 1e-200, rel=1e-15)
    assert nrmse([1.5e308, 1.5e308], [1.5e308, 0.0]) == pytest.approx(np.sqrt(0.5), rel=1e-15)
    assert rmse([1.0, 2.0], [1.0, 4.0]) == 1.4142135623730951  # ordinary values: the plain formula


def test_synthetic_validates_sizes_and_seed():
    # issue #15 case 14: numpy errors that did not name the argument
    with pytest.raises(ValueError, match="seed must be >= 0, got -1"):
        synthetic(10, seed=-1)
    for seed in (1.5, True, "1", None, [1, 2]):
        with pytest.raises(TypeError, match="seed must be an int"):
            synthetic(10, seed=seed)
    assert synthetic(10, n_test=1, seed=np.int64(3)).X_train.shape == (10, 8)
    for kwargs, exc, pattern in (
        ({"n": 0}, ValueError, "n must be >= 1"),
        ({"n": True}, TypeError, "n must be an int"),
        ({"n": 10, "d": 6}, ValueError, "d must be >= 7"),
        ({"n": 10, "d": 8.0}, TypeError, "d must be an int"),
        ({"n": 10, "n_test": -1}, ValueError, "n_test must be >= 0"),
        ({"n": 10, "n_test": False}, TypeError, "n_test must be an int"),
        ({"n": 10, "dtype": "nonsense"}, TypeError, "dtype"),
    ):
        with pytest.raises(exc, match=pattern):
            synthetic(**kwargs)


def test_load_dataset_validates_seed_name_and_dtype():
    # checked before any file is looked for
    with pytest.raises(ValueError, match="seed must be >= 0"):
        load_dataset("mg", seed=-1)
    for seed in (1.5, True, None):
        with pytest.raises(TypeError, match="seed must be an int"):
            load_dataset("mg", seed=seed)
    with pytest.raises(TypeError, match="dtype"):
        load_dataset("mg", dtype="nonsense")
    with pytest.raises(ValueError, match="dtype must be float32 or float64"):
        load_dataset("mg", dtype=np.int32)
    with pytest.raises(ValueError, match="unknown dataset name"):
        load_dataset("")
    with pytest.raises(TypeError, match="name must be a str"):
        load_dataset(b"mg")
