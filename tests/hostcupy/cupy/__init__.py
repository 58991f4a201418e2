"""Host CuPy: a stand-in for CuPy that keeps "device" arrays in host memory.

Nothing here runs on a GPU.  It exists so that nyhopt's CuPy code paths (the
``gpu`` tests, ``nyhopt demo --device gpu``) can run on a machine without
one, and fail there for the reasons they would fail on a GPU:

* :class:`ndarray` wraps a NumPy array and is *not* a NumPy array: mixing it
  with NumPy arrays in arithmetic or in a ``cupy`` function raises
  ``TypeError``, ``numpy.asarray(a)`` raises ``TypeError`` (use ``.get()`` or
  :func:`asnumpy`), as CuPy does;
* reductions give 0-d arrays, not Python or NumPy scalars;
* ``linalg.cholesky`` of a matrix that is not positive definite gives NaNs
  instead of raising (CuPy does not check cuSOLVER's status by default);
* :class:`RawModule` runs nyhopt's CUDA kernels through NumPy versions of
  their contracts (``_kernels.py``), :class:`ElementwiseKernel` the two
  elementwise kernels nyhopt defines, and ``cupy_backends.cuda.libs.cublas``
  the extended GEMMs on host memory.

What it does not model: speed, streams and asynchrony, device memory
limits, the numerics of tensor cores.  Use it from the ``tests`` folder:
``NYHOPT_HOST_CUPY=1 python -m pytest -m gpu`` (``conftest.py`` puts this
folder first on ``sys.path``); ``tests/test_host_cupy.py`` checks the
stand-in itself.
"""
from __future__ import annotations

import builtins
import numbers

import numpy as _np

__version__ = "14.2.0+host"
_HOST = True  # lets a test tell the stand-in from CuPy

_MIXING = ("Unsupported type <class 'numpy.ndarray'>: nyhopt host CuPy, like CuPy, does not mix "
           "host (NumPy) arrays with device arrays")


# ------------------------------------------------------------------ wrapping
def _unwrap(x, strict=True):
    """NumPy view of ``x`` (recursing into lists and tuples); a NumPy array raises when ``strict``."""
    if isinstance(x, ndarray):
        return x._a
    if isinstance(x, _np.ndarray):
        if strict and x.ndim > 0:
            raise TypeError(_MIXING)
        return x
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v, strict) for v in x)
    return x


def _wrap(x):
    """Device array of a NumPy result; NumPy scalars become 0-d arrays; containers recurse."""
    if isinstance(x, _np.ndarray):
        return ndarray._of(x)
    if isinstance(x, _np.generic) and not isinstance(x, (_np.str_, _np.bytes_)):
        return ndarray._of(_np.asarray(x))
    if isinstance(x, tuple):
        return type(x)(_wrap(v) for v in x) if not hasattr(x, "_fields") else type(x)(*(_wrap(v) for v in x))
    if isinstance(x, list):
        return [_wrap(v) for v in x]
    return x


def _basic_index(key):
    """True for an index of integers, slices, ``None`` and ``...`` only (a view, no gather or scatter)."""
    keys = key if isinstance(key, tuple) else (key,)
    return all(k is None or k is Ellipsis or isinstance(k, (slice, numbers.Integral)) for k in keys)


def _check_fill(value):
    """As CuPy's ``fill``: a NumPy array that is not 0-d is a ``ValueError``."""
    if isinstance(value, _np.ndarray) and value.ndim > 0:
        raise ValueError("non-scalar numpy.ndarray cannot be used for fill")


def _unwrap_kwargs(kwargs, strict=True):
    return {k: _unwrap(v, strict) for k, v in kwargs.items()}


def _call(fn, args, kwargs):
    """``fn(*args, **kwargs)`` on the NumPy arrays behind device arrays; the result wrapped or written to ``out``."""
    out = kwargs.pop("out", None)
    if out is not None and not isinstance(out, ndarray):
        raise TypeError(_MIXING)
    result = fn(*_unwrap(args), **_unwrap_kwargs(kwargs))
    if out is not None:
        out._a[...] = result
        return out
    return _wrap(result)


def _device_function(fn, name=None):
    """``fn`` (a NumPy function) on device arrays: NumPy arrays in the arguments raise."""

    def call(*args, **kwargs):
        return _call(fn, args, kwargs)

    call.__name__ = name or getattr(fn, "__name__", "function")
    call.__doc__ = f"Host CuPy version of numpy.{call.__name__}."
    return call


class _MemoryPointer:
    __slots__ = ("ptr",)

    def __init__(self, ptr):
        self.ptr = int(ptr)


class _Device:
    id = 0


# ------------------------------------------------------------------- ndarray
class ndarray:
    """A "device" array: a NumPy array behind CuPy's interface (host memory)."""

    __slots__ = ("_a", "__weakref__")
    __array_priority__ = 100.0

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        if memptr is not None or strides is not None:
            raise NotImplementedError("host CuPy: ndarray(memptr=, strides=) is not modelled")
        self._a = _np.empty(shape, dtype=dtype, order=order)
        cuda.memory.track(self._a)

    @classmethod
    def _of(cls, a):
        obj = object.__new__(cls)
        obj._a = a
        cuda.memory.track(a)
        return obj

    # -- NumPy interop: explicit only
    def __array__(self, *args, **kwargs):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct "
                        "a NumPy array explicitly.")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(_unwrap(o) for o in out)
        result = getattr(ufunc, method)(*_unwrap(inputs), **_unwrap_kwargs(kwargs))
        if out is not None:
            return out[0] if len(out) == 1 else out
        return _wrap(result)

    def __array_function__(self, func, types, args, kwargs):
        # numpy.f(device array) runs CuPy's f, as with CuPy's __array_function__
        return _call(func, args, dict(kwargs))

    def __dlpack__(self, **kwargs):
        raise TypeError("host CuPy arrays cannot be exported through DLPack")

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0

    # -- attributes
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: ndarray._of(self._a.T))
    real = property(lambda self: ndarray._of(self._a.real))
    imag = property(lambda self: ndarray._of(self._a.imag))
    data = property(lambda self: _MemoryPointer(self._a.ctypes.data))
    device = property(lambda self: _Device())
    base = property(lambda self: None if self._a.base is None else ndarray._of(self._a.base))

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (ndarray._of(v) if isinstance(v, _np.ndarray) else _wrap(v) for v in self._a)

    def __repr__(self):
        return "host-cupy " + repr(self._a)

    __str__ = lambda self: str(self._a)  # noqa: E731

    def __getitem__(self, key):
        return _wrap(self._a[_unwrap(key, strict=False)])

    def __setitem__(self, key, value):
        if _basic_index(key):  # CuPy fills a basic-index view with a value that is not a device array
            _check_fill(value)
        self._a[_unwrap(key, strict=False)] = _unwrap(value)

    def __bool__(self):
        return bool(self._a)

    def __float__(self):
        return float(self._a)

    def __int__(self):
        return int(self._a)

    def __index__(self):
        return self._a.__index__()

    def __complex__(self):
        return complex(self._a)

    def __format__(self, spec):
        return format(self._a.item() if self._a.ndim == 0 else self._a, spec)

    def __hash__(self):
        raise TypeError("unhashable type: 'cupy.ndarray'")

    def __reduce__(self):  # as CuPy: through host memory
        return (asarray, (self._a.copy(),))

    # -- methods
    def get(self, stream=None, order="C", out=None, blocking=True):
        if out is not None:
            out[...] = self._a
            return out
        return _np.array(self._a, order=order)

    def set(self, arr, stream=None):
        self._a[...] = arr

    def item(self):
        return self._a.item()

    def tolist(self):
        return self._a.tolist()

    def copy(self, order="C"):
        return ndarray._of(self._a.copy(order=order))

    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        return ndarray._of(self._a.astype(dtype, order=order, copy=copy))

    def view(self, dtype=None):
        return ndarray._of(self._a.view() if dtype is None else self._a.view(dtype))

    def fill(self, value):
        _check_fill(value)
        self._a.fill(_unwrap(value))

    def reshape(self, *shape, order="C"):
        return ndarray._of(self._a.reshape(*shape, order=order))

    def ravel(self, order="C"):
        return ndarray._of(self._a.ravel(order=order))

    def flatten(self, order="C"):
        return ndarray._of(self._a.flatten(order=order))

    def transpose(self, *axes):
        return ndarray._of(self._a.transpose(*axes))

    def swapaxes(self, a, b):
        return ndarray._of(self._a.swapaxes(a, b))

    def squeeze(self, axis=None):
        return ndarray._of(self._a.squeeze(axis))

    def diagonal(self, offset=0, axis1=0, axis2=1):
        return ndarray._of(self._a.diagonal(offset, axis1, axis2))

    def conj(self):
        return ndarray._of(self._a.conj())

    def toDlpack(self):
        raise NotImplementedError("host CuPy: no DLPack")


def _method(name):
    def method(self, *args, **kwargs):
        return _call(getattr(self._a, name), args, kwargs)

    method.__name__ = name
    return method


for _name in ("sum", "mean", "max", "min", "argmax", "argmin", "std", "var", "prod", "any", "all", "dot",
              "cumsum", "clip", "round", "nonzero", "trace", "argsort", "sort", "repeat"):
    setattr(ndarray, _name, _method(_name))


def take(a, indices, axis=None, out=None):
    """As ``cupy.take``: the indices may be host data (CuPy copies them to the device), ``a`` may not."""
    if not isinstance(a, ndarray):
        raise TypeError(_MIXING)
    result = _np.take(a._a, _unwrap(indices, strict=False), axis=axis)
    if out is not None:
        out._a[...] = result
        return out
    return ndarray._of(result)


ndarray.take = lambda self, indices, axis=None, out=None: take(self, indices, axis, out)


def _operator(name):
    ufunc_method = getattr(_np.ndarray, name)

    def op(self, other):
        if isinstance(other, _np.ndarray) and other.ndim > 0:
            raise TypeError(_MIXING)
        if not isinstance(other, (ndarray, numbers.Number, _np.generic, _np.ndarray)):
            return NotImplemented
        result = ufunc_method(self._a, _unwrap(other))
        if result is NotImplemented:
            return result
        if name.startswith("__i"):
            return self
        return _wrap(result)

    op.__name__ = name
    return op


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
              "lshift", "rshift"):
    for _form in ("__{}__", "__r{}__", "__i{}__"):
        setattr(ndarray, _form.format(_name), _operator(_form.format(_name)))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(ndarray, f"__{_name}__", _operator(f"__{_name}__"))
ndarray.__neg__ = lambda self: ndarray._of(-self._a)
ndarray.__pos__ = lambda self: ndarray._of(+self._a)
ndarray.__abs__ = lambda self: ndarray._of(abs(self._a))
ndarray.__invert__ = lambda self: ndarray._of(~self._a)
ndarray.__module__ = "cupy"  # nyhopt.backend recognizes CuPy arrays by their module


# ---------------------------------------------------------- array creation
def asarray(a, dtype=None, order=None, *, blocking=False):
    """Device copy of host data; a device array of the right dtype is returned as it is."""
    if isinstance(a, ndarray):
        if (dtype is None or _np.dtype(dtype) == a.dtype) and order in (None, "K", "A"):
            return a
        return ndarray._of(_np.asarray(a._a, dtype=dtype, order=order))
    return ndarray._of(_np.array(_unwrap(a, strict=False), dtype=dtype, order=order or "K", copy=True))


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, blocking=False):
    if isinstance(obj, ndarray):
        return ndarray._of(_np.array(obj._a, dtype=dtype, copy=copy, order=order, ndmin=ndmin))
    return ndarray._of(_np.array(_unwrap(obj, strict=False), dtype=dtype, copy=True, order=order, ndmin=ndmin))


def ascontiguousarray(a, dtype=None):
    if not isinstance(a, ndarray):
        raise TypeError(_MIXING if isinstance(a, _np.ndarray) else f"Unsupported type {type(a)}")
    return ndarray._of(_np.ascontiguousarray(a._a, dtype=dtype))


def asfortranarray(a, dtype=None):
    if not isinstance(a, ndarray):
        raise TypeError(_MIXING)
    return ndarray._of(_np.asfortranarray(a._a, dtype=dtype))


def asnumpy(a, stream=None, order="C", out=None, blocking=True):
    """Host copy of a device array (host data is returned as NumPy)."""
    if isinstance(a, ndarray):
        return a.get(order=order, out=out)
    return _np.asarray(a, order=order)


def get_array_module(*args):
    import sys

    return sys.modules[__name__] if any(isinstance(a, ndarray) for a in args) else _np


def is_available():
    return True


def from_dlpack(obj):
    raise TypeError("host CuPy: no DLPack exchange with device memory")


fromDlpack = from_dlpack


def _creation(name):
    fn = getattr(_np, name)

    def create(*args, **kwargs):
        kwargs.pop("order", None) if name.endswith("_like") else None
        return _wrap(fn(*_unwrap(args), **_unwrap_kwargs(kwargs)))

    create.__name__ = name
    return create


for _name in ("empty", "zeros", "ones", "full", "eye", "identity", "arange", "linspace", "empty_like",
              "zeros_like", "ones_like", "full_like", "tri"):
    globals()[_name] = _creation(_name)


def fill_diagonal(a, val, wrap=False):
    _np.fill_diagonal(a._a, _unwrap(val), wrap=wrap)


# dtypes and constants are NumPy's own, as in CuPy
for _name in ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "bool_", "complex64", "complex128", "dtype", "pi", "e", "inf", "nan", "newaxis",
              "finfo", "iinfo", "result_type", "can_cast", "promote_types", "integer", "floating", "number",
              "generic", "signedinteger", "unsignedinteger", "isscalar", "ndim", "shape", "intp", "float_",
              "complex_", "int_"):
    if hasattr(_np, _name):
        globals()[_name] = getattr(_np, _name)


def __getattr__(name):
    """Every other NumPy function, on device arrays (``cupy.exp``, ``cupy.sum``, ``cupy.einsum``...)."""
    if name.startswith("__"):
        raise AttributeError(name)
    target = getattr(_np, name, None)
    if target is None or not callable(target) or isinstance(target, type):
        raise AttributeError(f"module 'cupy' (host stand-in) has no attribute {name!r}")
    fn = _device_function(target, name)
    if not hasattr(builtins, name):  # cached, except where it would shadow a builtin this module calls
        globals()[name] = fn          # (``all``, ``any``, ``abs``: they would return device arrays)
    return fn


# --------------------------------------------------------------- submodules
from . import cuda, linalg, random  # noqa: E402
from ._kernels import ElementwiseKernel, RawKernel, RawModule  # noqa: E402
from .cuda import get_default_memory_pool, get_default_pinned_memory_pool  # noqa: E402
