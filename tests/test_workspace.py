"""The n x m arrays the exact objectives keep across evaluations (nyhopt.objectives._workspace)."""
import copy
import pickle
import threading
import weakref

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.objectives._workspace import Workspace

EXACT = ["holdout", "loocv", "gcv", "creg", "sgpr", "prop"]


def test_an_array_is_handed_out_again_only_when_free():
    ws = Workspace()
    a = ws.empty("A", (3, 4), np.float64)
    b = ws.empty("A", (3, 4), np.float64)
    assert b is not a  # a is still referenced
    view = b.T
    del b
    c = ws.empty("A", (3, 4), np.float64)
    assert not np.shares_memory(c, view)  # a view keeps its base busy
    ident = id(c)
    del a, c, view
    assert id(ws.empty("A", (3, 4), np.float64)) == ident
    assert ws.empty("A", (4, 3), np.float64).shape == (4, 3)  # another shape: a new array
    assert ws.empty("A", (4, 3), np.float32).dtype == np.float32


def test_arrays_over_the_memory_budget_are_not_kept():
    ws = Workspace()
    with nh.memory_budget(1024):
        ws.empty("big", (100, 100), np.float64)
        assert ws.nbytes == 0
        ws.empty("small", (4, 4), np.float64)
        assert ws.nbytes == 128
    ws.clear()
    assert ws.nbytes == 0


def test_pickle_and_copy_give_an_empty_workspace():
    ws = Workspace()
    ws.empty("A", (3, 4), np.float64)
    for other in (pickle.loads(pickle.dumps(ws)), copy.deepcopy(ws), copy.copy(ws)):
        assert isinstance(other, Workspace) and other.nbytes == 0


def _problem(rng, n=300, d=3, m=20):
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=n)
    return X, y, nh.Params.from_natural(1e-3, np.linspace(0.8, 1.4, d), X[:m])


def _flat(g):
    return np.concatenate([np.ravel(g.log_penalty), np.ravel(g.log_lengthscale), np.ravel(g.centers),
                           np.ravel(g.log_amplitude)])


@pytest.mark.parametrize("mean", ["zero", "constant"])
@pytest.mark.parametrize("name", EXACT)
def test_reused_arrays_change_nothing(rng, name, mean):
    X, y, params = _problem(rng)
    X0, y0 = X.copy(), y.copy()
    obj = nh.make_objective(name, X, y, random_state=0, mean=mean)
    v1, g1 = obj.value_and_grad(params)
    kept = {k: weakref.ref(a) for k, a in obj._workspace._arrays.items()}  # no reference: they stay free
    assert kept, "the gradient keeps its n x m arrays"
    w1 = obj.value(params)
    v2, g2 = obj.value_and_grad(params)
    assert v2 == v1 and w1 == pytest.approx(v1, rel=1e-12, abs=1e-300)
    np.testing.assert_array_equal(_flat(g2), _flat(g1))
    assert all(obj._workspace._arrays.get(k) is a() for k, a in kept.items())  # the same arrays were reused
    for a in obj._workspace._arrays.values():  # nothing returned is a view into them
        for field in (g2.log_penalty, g2.log_lengthscale, g2.centers, g2.log_amplitude):
            assert not np.shares_memory(np.asarray(field), a)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    fresh = nh.make_objective(name, X, y, random_state=0, mean=mean)  # a new workspace: same numbers
    v3, g3 = fresh.value_and_grad(params)
    assert v3 == v1
    np.testing.assert_array_equal(_flat(g3), _flat(g1))


@pytest.mark.parametrize("name", ["prop", "loocv", "holdout"])
def test_concurrent_evaluations_of_one_objective(rng, name):
    """Threads evaluating the same objective never share an array in use."""
    X, y, params = _problem(rng)
    obj = nh.make_objective(name, X, y, random_state=0)
    want_v, want_g = obj.value_and_grad(params)
    results, errors = [], []

    def work():
        try:
            for _ in range(4):
                v, g = obj.value_and_grad(params)
                results.append((v, _flat(g)))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 12
    for v, g in results:
        assert v == pytest.approx(want_v, rel=1e-13)
        np.testing.assert_allclose(g, _flat(want_g), rtol=1e-12, atol=1e-14 * np.abs(_flat(want_g)).max())


def test_objectives_sharing_a_workspace(rng):
    """A shallow copy shares the workspace: still safe, each takes only free arrays."""
    X, y, params = _problem(rng)
    obj = nh.make_objective("prop", X, y)
    v, g = obj.value_and_grad(params)
    other = copy.copy(obj)
    assert other._workspace is obj._workspace
    v2, g2 = other.value_and_grad(params)
    assert v2 == v
    np.testing.assert_array_equal(_flat(g2), _flat(g))


def test_numba_cache_is_keyed_by_all_loop_sources():
    """An edit of a helper in one _numba module must invalidate the cached loops of the others."""
    from nyhopt.ops import _numba_base, _numba_loops, _numba_rows

    if not _numba_base.DISK_CACHE:
        pytest.skip("no on-disk cache here")
    stamps = {_numba_rows._profile_row._cache._cache_file._source_stamp,
              _numba_loops._kernel_matrix.threaded._cache._cache_file._source_stamp,
              _numba_base._exp._cache._cache_file._source_stamp}
    assert len(stamps) == 1
    (stamp,) = stamps
    assert isinstance(stamp, tuple) and len(stamp) == len(_numba_base.CACHE_SOURCES)


@pytest.mark.parametrize("impl", ["numba", "numpy"])
@pytest.mark.parametrize("kernel", [nh.GaussianKernel(0.9), nh.MaternKernel(1.3, nu=1.5)])
def test_kernel_matrix_out_and_copy(rng, impl, kernel):
    from nyhopt import ops

    X, Z = rng.normal(size=(300, 3)), rng.normal(size=(7, 3))
    want = ops.kernel_matrix(kernel, Z, X)
    saved = ops.CPU_IMPL["kernel_matrix"]
    ops.set_cpu_impl("kernel_matrix", impl)
    try:
        out, copy_ = np.full((7, 300), np.nan), np.full((7, 300), np.nan)
        got = ops.kernel_matrix(kernel, Z, X, out=out, copy=copy_)
        assert got is out
        np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-15)
        np.testing.assert_array_equal(copy_, out)
        with pytest.raises(ValueError, match="out must be"):
            ops.kernel_matrix(kernel, Z, X, out=np.empty((300, 7)))
        with pytest.raises(ValueError, match="copy must be"):
            ops.kernel_matrix(kernel, Z, X, copy=np.empty((7, 300), dtype=np.float32))
        with pytest.raises(ValueError, match="out must be"):
            ops.kernel_matrix(kernel, Z, X, out=np.empty((300, 7)).T)  # not C-contiguous
    finally:
        ops.set_cpu_impl("kernel_matrix", saved)


def test_factorize_with_a_workspace_matches_without(rng):
    from nyhopt.objectives import _exact

    X, Z = rng.normal(size=(400, 3)), rng.normal(size=(15, 3))
    kernel = nh.GaussianKernel(np.array([0.8, 1.0, 1.3]))
    ws = Workspace()
    for keep in (True, False):
        plain = _exact.factorize(kernel, X, Z, 1e-3, np, keep_kernel=keep)
        for _ in range(2):
            fac = _exact.factorize(kernel, X, Z, 1e-3, np, keep_kernel=keep, workspace=ws)
            np.testing.assert_array_equal(fac.At, plain.At)
            np.testing.assert_array_equal(fac.S, plain.S)
            if keep:
                np.testing.assert_array_equal(fac.KT, plain.KT)
            else:
                assert fac.KT is None
            del fac
