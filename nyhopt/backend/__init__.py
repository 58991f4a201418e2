"""Array-module selection: NumPy on the CPU, CuPy on the GPU.

The array module (``xp``) is decided once, at a public entry point, from the
arrays the user passed; every function below that entry takes ``xp``
explicitly.  Nothing is ever copied between host and device behind the user's
back: mixing NumPy and CuPy arrays is an error.

Examples
--------
>>> import numpy as np
>>> from nyhopt.backend import get_namespace
>>> get_namespace(np.ones(3)) is np
True
"""
from __future__ import annotations

import contextlib

import numpy as np

__all__ = ["get_namespace", "as_native", "is_cupy_namespace", "to_numpy", "to_namespace", "cupy_or_none",
           "gpu_available", "device_memory_advice", "DeviceMemoryError",
           "format_bytes"]

# DLPack device types (``DLDeviceType`` in dlpack.h)
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_ROCM, _DL_ROCM_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 10, 11, 13
_DL_HOST = (_DL_CPU, _DL_CUDA_HOST, _DL_ROCM_HOST)
_DL_DEVICE = (_DL_CUDA, _DL_ROCM, _DL_CUDA_MANAGED)


def cupy_or_none():
    """Return the ``cupy`` module if it can be imported, else ``None``."""
    try:
        import cupy  # noqa: F401
    except Exception:  # ImportError, or a broken CUDA install
        return None
    return cupy


def gpu_available() -> bool:
    """True when CuPy is importable and a CUDA device is usable."""
    cp = cupy_or_none()
    if cp is None:
        return False
    try:
        return bool(cp.is_available())
    except Exception:
        return False


def _is_cupy_array(a) -> bool:
    return type(a).__module__.split(".")[0] == "cupy"


def get_namespace(*arrays):
    """Return the array module (``numpy`` or ``cupy``) shared by ``arrays``.

    ``None`` entries and Python scalars are ignored.  Anything that is not a
    CuPy array is treated as host data (NumPy).

    Raises
    ------
    TypeError
        If host (NumPy) and device (CuPy) arrays are mixed.
    """
    kinds = set()
    for a in arrays:
        if a is None or np.isscalar(a):
            continue
        kinds.add("cupy" if _is_cupy_array(a) else "numpy")
    if len(kinds) > 1:
        raise TypeError(
            "inputs mix NumPy (host) and CuPy (device) arrays; move them to one "
            "device first (cupy.asarray / cupy.asnumpy)"
        )
    if kinds == {"cupy"}:
        import cupy

        return cupy
    return np


def as_native(a, name="array"):
    """Return ``a`` as a NumPy or CuPy array when it comes from another library.

    Called once on every array argument at a public entry point, before
    :func:`get_namespace`.  NumPy and CuPy arrays, ``None`` and anything
    unrecognized are returned unchanged (later checks report bad input).

    * pandas objects become ``np.asarray(a)`` (no copy for a frame that is
      one float block);
    * a dask array (at an entry point without a cluster path, or a result
      such as ``predict``'s) is computed: a NumPy or CuPy array, as its chunks;
    * any other object with ``__dlpack__`` is exchanged without a copy:
      ``numpy.from_dlpack`` for host memory, ``cupy.from_dlpack`` for a CUDA
      device (a PyTorch or JAX GPU array gives a CuPy view, so results are
      CuPy arrays on the same device).

    Parameters
    ----------
    a : object
    name : str
        The argument's name, for error messages.

    Returns
    -------
    numpy.ndarray, cupy.ndarray or ``a`` itself

    Raises
    ------
    TypeError
        A DLPack array on a device nyhopt cannot use, or on a GPU while CuPy
        is not installed.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.arange(3.0)
    >>> as_native(a) is a
    True
    >>> class Wrapped:  # any DLPack producer, here backed by NumPy
    ...     def __dlpack__(self, **kwargs): return a.__dlpack__(**kwargs)
    ...     def __dlpack_device__(self): return a.__dlpack_device__()
    >>> b = as_native(Wrapped()); type(b).__name__, np.shares_memory(a, b)
    ('ndarray', True)
    """
    if a is None or isinstance(a, np.ndarray) or _is_cupy_array(a):
        return a
    if type(a).__module__.split(".")[0] == "pandas":
        return np.asarray(a)
    if is_dask_array(a):  # np.asarray would compute it too, and fails on CuPy chunks
        return as_native(a.compute(), name)
    if not (hasattr(a, "__dlpack__") and hasattr(a, "__dlpack_device__")):
        return a
    device_type = int(a.__dlpack_device__()[0])
    if device_type in _DL_HOST:
        return np.from_dlpack(a)
    if device_type in _DL_DEVICE:
        cp = cupy_or_none()
        if cp is None:
            raise TypeError(f"{name} is a GPU array (DLPack device type {device_type}); install CuPy to use it")
        return cp.from_dlpack(a)
    raise TypeError(f"{name} lives on DLPack device type {device_type}; nyhopt supports the CPU and CUDA GPUs")


def is_dask_array(a) -> bool:
    """True if ``a`` is a ``dask.array.Array`` (checked by type, dask is never imported).

    Examples
    --------
    >>> import numpy as np
    >>> is_dask_array(np.ones(3))
    False
    """
    cls = type(a)
    return cls.__name__ == "Array" and cls.__module__.split(".")[0] == "dask"


def is_cupy_namespace(xp) -> bool:
    """True if ``xp`` is the CuPy module."""
    return getattr(xp, "__name__", "") == "cupy"


def to_numpy(a, dtype=None):
    """Return ``a`` as a NumPy array (copies device arrays to the host).

    Parameters
    ----------
    a : array-like
        A NumPy or CuPy array (copied to the host), or anything
        :func:`numpy.asarray` takes: a list, a scalar, a Dask array of NumPy
        chunks (computed).
    dtype : data-type, optional
        The dtype of the result.  The host array is cast only when its dtype
        differs: a NumPy array that has it already is returned as it is, and
        a CuPy array is copied to the host once (then cast there, so the
        device holds no cast copy).

    Returns
    -------
    numpy.ndarray
        ``a`` itself when it is a NumPy array of that dtype (do not modify it
        in place unless the caller owns ``a``).

    Examples
    --------
    >>> import numpy as np
    >>> from nyhopt.backend import to_numpy
    >>> a = np.arange(3.0)
    >>> to_numpy(a) is a, to_numpy(a, dtype=np.float64) is a
    (True, True)
    >>> to_numpy([1, 2], dtype=np.float64)
    array([1., 2.])
    >>> to_numpy(np.float32(0.5), dtype=np.float64).dtype
    dtype('float64')
    """
    if _is_cupy_array(a):
        a = a.get()
    return np.asarray(a, dtype=dtype)


def to_namespace(a, xp, dtype=None):
    """``a`` as an array of the module ``xp`` (NumPy or CuPy): host data go to the device, or the reverse.

    An array of ``xp`` already is not copied unless ``dtype`` differs.

    Examples
    --------
    >>> import numpy as np
    >>> from nyhopt.backend import to_namespace
    >>> to_namespace([1, 2], np, dtype=np.float64)
    array([1., 2.])
    """
    return xp.asarray(to_numpy(a) if get_namespace(a) is not xp else a, dtype=dtype)


def format_bytes(nbytes) -> str:
    """``nbytes`` for a reader: GiB, MiB or KiB with two decimals."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20)):
        if nbytes >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes / 2**10:.2f} KiB"


class DeviceMemoryError(MemoryError):
    """Out of GPU memory, with what was being done and the settings that make it fit (a :class:`MemoryError`)."""

    def __init__(self, steps, room, tips):
        self.steps, self.room, self.tips = list(steps), room, list(tips)
        lines = [f"out of GPU memory while {' > '.join(self.steps)} ({room})."]
        if self.tips:
            lines.append("To make it fit:")
            lines.extend(f"  - {tip}" for tip in self.tips)
        super().__init__("\n".join(lines))


@contextlib.contextmanager
def device_memory_advice(xp, what, advice):
    """Turn CuPy's out-of-memory error inside the block into one that says what did not fit and what to change.

    On a GPU, a problem that does not fit (the ``n x m`` row blocks, the
    Gram matrix, the factors of the exact objectives) stops with CuPy's
    ``OutOfMemoryError``, which names a byte count and nothing the user can
    set.  Inside this block it becomes a :class:`DeviceMemoryError` (a
    :class:`MemoryError`, as CuPy's is, so ``except MemoryError`` still
    catches it, with CuPy's error as its cause) that names ``what`` was being
    done, the device's memory, and ``advice``: the settings to change
    (``docs/scaling-out.md``, "Out of GPU memory").  Blocks nest: an outer
    one adds its ``what`` in front and its advice after the inner one's.
    Nothing changes for NumPy.

    Parameters
    ----------
    xp : module
        The array module of the data.
    what : str
        What the block does, e.g. ``"forming the Gram matrix G = K^T K (m = 5000 centers)"``.
    advice : callable returning a list of str
        The settings that make it fit, one tip each; called on the error path only.

    Examples
    --------
    >>> import numpy as np
    >>> with device_memory_advice(np, "adding", lambda: ["nothing to change"]):
    ...     int(np.ones(3).sum())
    3
    """
    if not is_cupy_namespace(xp):
        yield
        return
    try:
        yield
    except DeviceMemoryError as exc:
        tips = exc.tips + [tip for tip in advice() if tip not in exc.tips]
        raise DeviceMemoryError([what] + exc.steps, exc.room, tips).with_traceback(exc.__traceback__) \
            from exc.__cause__
    except xp.cuda.memory.OutOfMemoryError as exc:
        try:
            free, total = xp.cuda.Device().mem_info
            used = xp.get_default_memory_pool().used_bytes()
            room = (f"{exc}; the device has {format_bytes(total)}, {format_bytes(free)} free, "
                    f"{format_bytes(used)} in use by CuPy's pool")
        except Exception:  # the device may be in a bad state after the failure
            room = f"{exc}; the device's free memory could not be read"
        raise DeviceMemoryError([what], room, advice()) from exc
