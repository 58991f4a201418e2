"""nyhopt.backend.to_numpy: host copies of device arrays, and the dtype argument."""
from __future__ import annotations

import numpy as np
import pytest

from nyhopt.backend import gpu_available, to_numpy


class _Device:
    """An array type whose module reads as CuPy's: ``to_numpy`` reaches it only through ``.get()``."""

    __module__ = "cupy"

    def __init__(self, a):
        self._a = np.asarray(a)
        self.gets = 0

    def get(self):
        self.gets += 1
        return self._a.copy()

    def __array__(self, *args, **kwargs):
        raise TypeError("implicit conversion of a device array")


def test_numpy_is_returned_as_it_is_unless_the_dtype_differs():
    a = np.arange(6.0).reshape(2, 3)
    assert to_numpy(a) is a
    assert to_numpy(a, dtype=np.float64) is a
    assert to_numpy(a, np.float64) is a  # positional too
    b = to_numpy(a, dtype=np.float32)
    assert b.dtype == np.float32 and b.shape == (2, 3)
    np.testing.assert_array_equal(b, a)
    assert a.dtype == np.float64  # the input is not touched
    i = np.array([1, 2, 3])
    assert to_numpy(i, dtype=np.float64).dtype == np.float64 and i.dtype.kind == "i"


def test_lists_and_scalars():
    out = to_numpy([[1, 2], [3, 4]], dtype=np.float64)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64 and out.shape == (2, 2)
    assert to_numpy([1, 2]).dtype.kind == "i"
    s = to_numpy(np.float32(0.5), dtype=np.float64)
    assert s.shape == () and s.dtype == np.float64 and float(s) == 0.5
    assert to_numpy(3.0, dtype=np.float32).dtype == np.float32


def test_device_arrays_are_read_once_and_cast_on_the_host():
    d = _Device(np.arange(4, dtype=np.float32))
    out = to_numpy(d, dtype=np.float64)
    assert d.gets == 1 and out.dtype == np.float64
    np.testing.assert_array_equal(out, [0.0, 1.0, 2.0, 3.0])
    same = to_numpy(d)
    assert d.gets == 2 and same.dtype == np.float32


def test_dask_arrays_are_computed():
    da = pytest.importorskip("dask.array")
    x = da.from_array(np.arange(10, dtype=np.float32), chunks=4)
    out = to_numpy(x, dtype=np.float64)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64
    np.testing.assert_array_equal(out, np.arange(10.0))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU (CuPy with a device)")
def test_cupy_arrays():
    import cupy as cp

    a = cp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    out = to_numpy(a, dtype=np.float64)
    assert type(out) is np.ndarray and out.dtype == np.float64
    np.testing.assert_array_equal(out, np.arange(6.0).reshape(2, 3))
    assert a.dtype == np.float32
    plain = to_numpy(a)
    assert type(plain) is np.ndarray and plain.dtype == np.float32
    s = to_numpy(a.sum(), dtype=np.float64)  # a 0-d device array
    assert s.shape == () and float(s) == 15.0
    t = to_numpy(a.T, dtype=np.float64)  # a strided view
    np.testing.assert_array_equal(t, np.arange(6.0).reshape(2, 3).T)
