"""User kernels of the host stand-in: nyhopt's CUDA kernels by their contracts, in NumPy.

A :class:`RawModule` is built from CUDA source and name expressions, as with
CuPy; the source is not compiled (``tests/test_cuda_sources.py`` compiles it
with NVRTC and runs it on a host emulation of CUDA).  ``get_function(name)``
gives a launcher that reads the name expression (``nh_kernel_dot<float, 0,
1>``: kernel, data type, kind, form) and runs the NumPy version of that
kernel's contract, as written at the top of its ``.cu`` file, on the raw
memory behind the pointer arguments: a launch sees pointers, strides and
counts exactly as the device would, so a wrong stride, count, dtype or
argument order gives wrong numbers here too.

The grid and block are checked the way CUDA checks them (at most 1024
threads per block, grid y and z at most 65535, shared memory at most 48 KiB
without opting in) and must cover the work as the kernel's launch comment
says; ``nh_adjoint``, written for blocks of exactly (32, 8) threads, needs
those and its (32 d + d) doubles of dynamic shared memory.  The thread
layout itself is not modelled.
"""
from __future__ import annotations

import ctypes
import re

import numpy as np

_C_TYPES = {"float": np.float32, "double": np.float64}
_NAME = re.compile(r"^\s*(\w+)\s*<\s*([^>]*)>\s*$")
_SQRT3, _SQRT5, _S_CAP = 1.7320508075688772, 2.23606797749979, 1e6


# ------------------------------------------------------------ raw memory
def _host(arg):
    """The NumPy array behind a device array (a NumPy array is accepted too: the tests run both)."""
    base = getattr(arg, "_a", arg)
    if not isinstance(base, np.ndarray):
        raise TypeError(f"a pointer argument must be a device array, got {type(arg).__name__}")
    return base


def _flat(arg, dtype, count):
    """The ``count`` elements of ``dtype`` at the address of device array ``arg`` (a writable view)."""
    base = _host(arg)
    dtype = np.dtype(dtype)
    count = int(count)
    if count <= 0:
        return np.empty(0, dtype)
    lo, hi = _extent(base)
    need = count * dtype.itemsize
    if base.ctypes.data + need > hi:
        raise IndexError(f"kernel reads {need} bytes from an array of {hi - base.ctypes.data} (out of bounds)")
    buf = (ctypes.c_char * need).from_address(base.ctypes.data)
    return np.frombuffer(buf, dtype=dtype, count=count)


def _extent(a):
    """Lowest and highest address of the memory block that holds ``a``."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    return root.ctypes.data, root.ctypes.data + root.nbytes


def _int(v, ctype=np.int32):
    """A scalar argument of C type ``int`` (``np.int32``) or ``long long`` (``np.int64``), as the device reads it.

    CuPy passes a Python ``int`` as 64 bits: given for an ``int`` parameter it would shift every
    argument after it, so only NumPy integers of the declared width are accepted.
    """
    if hasattr(v, "_a") or isinstance(v, np.ndarray):
        raise TypeError("a scalar kernel argument must be a host number, not a device array")
    if type(v) is not ctype:
        raise TypeError(f"a kernel argument of C type {'int' if ctype is np.int32 else 'long long'} must be "
                        f"{ctype.__name__}, got {type(v).__name__}")
    return int(v)


# --------------------------------------------------------------- profiles
def profile(s, kind):
    """phi(s) in the dtype of ``s`` (``_cuda/common.cuh``)."""
    t = s.dtype.type
    if kind == 0:
        return np.exp(t(-0.5) * s)
    if kind == 1:
        return np.exp(-np.sqrt(s))
    sc = np.where(s > t(_S_CAP), t(_S_CAP), s)
    if kind == 2:
        a = t(_SQRT3) * np.sqrt(sc)
        return (t(1) + a) * np.exp(-a)
    a = t(_SQRT5) * np.sqrt(sc)
    return (t(1) + a + t(5.0 / 3.0) * sc) * np.exp(-a)


def derivative(s, kind):
    """phi'(s) in the dtype of ``s``; the Laplacian's is 0 at s = 0."""
    t = s.dtype.type
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == 0:
            return t(-0.5) * np.exp(t(-0.5) * s)
        if kind == 1:
            r = np.sqrt(s)
            return np.where(r > 0, t(-0.5) * np.exp(-r) / r, t(0)).astype(s.dtype)
        if kind == 2:
            return t(-1.5) * np.exp(t(-_SQRT3) * np.sqrt(s))
        a = t(_SQRT5) * np.sqrt(np.where(s > t(_S_CAP), t(_S_CAP), s))
        return t(-5.0 / 6.0) * (t(1) + a) * np.exp(-a)


def _clamped(xn, zn, g):
    s = xn[:, None] + zn[None, :] - g.dtype.type(2) * g
    return np.where(s < 0, s.dtype.type(0), s)


def _sqdist(Xs, Zt):
    """(b, m) squared distances from coordinate differences, summed over k in order, in the data dtype."""
    s = np.zeros((Xs.shape[0], Zt.shape[1]), Xs.dtype)
    for k in range(Xs.shape[1]):
        t = Xs[:, k, None] - Zt[k][None, :]
        s += t * t
    return s


def _half_bits(x32):
    return x32.astype(np.float16).view(np.uint16)


# ---------------------------------------------------------------- kernels
def _kernel_block(T, kind, args):
    Xs, Zt, out, b, m, d = args
    b, m, d = _int(b), _int(m), _int(d)
    X = _flat(Xs, T, b * d).reshape(b, d)
    Z = _flat(Zt, T, d * m).reshape(d, m)
    _flat(out, T, b * m).reshape(b, m)[...] = profile(_sqdist(X, Z), kind)
    return m, b


def _kernel_dot(T, kind, form, args):
    g, xn, zn, out, b, m = args
    b, m = _int(b), _int(m)
    k = profile(_clamped(_flat(xn, T, b), _flat(zn, T, m), _flat(g, T, b * m).reshape(b, m)), kind)
    if form == 0:
        _flat(out, T, b * m).reshape(b, m)[...] = k
    else:
        o = _flat(out, np.uint16, 2 * b * m).reshape(b, 2 * m)
        kf = k.astype(np.float32)
        hi = _half_bits(kf)
        o[:, :m] = hi
        o[:, m:] = _half_bits((kf - hi.view(np.float16).astype(np.float32)) * np.float32(2048.0))
    return m, b


def _digits3(k):
    """The three signed digits of ``nh::digits3`` (float64, ties to even)."""
    k = np.where(k > 1.0, 1.0, np.where(k >= 0.0, k, 0.0))
    v = k * 127.0
    d0 = np.rint(v)
    v = (v - d0) * 254.0
    d1 = np.rint(v)
    v = (v - d1) * 254.0
    d2 = np.rint(v)
    return d0.astype(np.int8), d1.astype(np.int8), d2.astype(np.int8)


def _kernel_digits(T, kind, form, args):
    kt, xn, zn, digits, b, m, ld, plane = args
    b, m, ld, plane = _int(b), _int(m), _int(ld), _int(plane, np.int64)
    values = _flat(kt, T, m * b).reshape(m, b)
    if form == 0:
        k = profile(_clamped(_flat(zn, T, m), _flat(xn, T, b), values), kind)
        values[...] = k
    else:
        k = values.copy()
    planes = _flat(digits, np.int8, 2 * plane + m * ld)
    for p, digit in enumerate(_digits3(k.astype(np.float64))):
        rows = planes[p * plane: p * plane + m * ld].reshape(m, ld)
        rows[:, :b] = digit
        rows[:, b:] = 0
    return ld, m


def _adjoint(T, kind, lowrank, args):
    Xs, Zt, C, Qt, n, m, d, r, wanted, gz, gell, gx = args
    n, m, d, r, wanted = (_int(v) for v in (n, m, d, r, wanted))
    X = _flat(Xs, T, n * d).reshape(n, d)
    Z = _flat(Zt, T, d * m).reshape(d, m)
    c = _flat(C, T, n * r).reshape(n, r) @ _flat(Qt, T, r * m).reshape(r, m) if lowrank else \
        _flat(C, T, n * m).reshape(n, m)
    W = (c * derivative(_sqdist(X, Z), kind)).astype(np.float64)
    X64, Z64 = X.astype(np.float64), Z.astype(np.float64).T  # (m, d)
    if wanted & 1:  # sum_i W_ij (Z_jk - X_ik)
        _flat(gz, np.float64, d * m).reshape(d, m)[...] += (W.sum(0)[:, None] * Z64 - W.T @ X64).T
    if wanted & 2:  # sum_ij W_ij (Z_jk - X_ik)^2
        _flat(gell, np.float64, d)[...] += (W.sum(1) @ X64**2 - 2 * np.einsum("ij,ik,jk->k", W, X64, Z64)
                                            + W.sum(0) @ Z64**2)
    if wanted & 4:  # sum_j W_ij (X_ik - Z_jk)
        _flat(gx, np.float64, n * d).reshape(n, d)[...] += W.sum(1)[:, None] * X64 - W @ Z64
    return m, (n + 31) // 32 * 32, 33 * d * 8  # its layout: (32, 8) threads, (32 d + d) doubles shared


def _adjoint_dot(T, kind, args):
    g, c, xn, zn, W, b, m = args
    b, m = _int(b), _int(m)
    s = _clamped(_flat(xn, T, b), _flat(zn, T, m), _flat(g, T, b * m).reshape(b, m))
    cd = _flat(c, T, b * m).reshape(b, m).astype(np.float64)
    _flat(W, np.float64, b * m).reshape(b, m)[...] = cd * derivative(s, kind).astype(np.float64)
    return m, b


_KERNELS = {
    "nh_kernel_block": (2, lambda T, K, F, a: _kernel_block(T, K, a)),
    "nh_kernel_dot": (3, lambda T, K, F, a: _kernel_dot(T, K, F, a)),
    "nh_kernel_digits": (3, lambda T, K, F, a: _kernel_digits(T, K, F, a)),
    "nh_adjoint": (3, lambda T, K, F, a: _adjoint(T, K, F, a)),
    "nh_adjoint_dot": (2, lambda T, K, F, a: _adjoint_dot(T, K, a)),
}


def _parse(name):
    match = _NAME.match(name)
    if not match or match.group(1) not in _KERNELS:
        raise KeyError(f"host CuPy knows no kernel {name!r}")
    base = match.group(1)
    params = [p.strip() for p in match.group(2).split(",")]
    n_params = _KERNELS[base][0]
    if len(params) != n_params or params[0] not in _C_TYPES:
        raise ValueError(f"bad template arguments in {name!r}")
    form = None
    if n_params == 3:
        form = {"true": True, "false": False}.get(params[2], None)
        form = int(params[2]) if form is None else form
    return base, _C_TYPES[params[0]], int(params[1]), form


def _check_launch(name, grid, block, shared_mem, covered):
    grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
    block = tuple(int(b) for b in block) + (1,) * (3 - len(block))
    if min(grid + block) < 1:
        raise ValueError(f"{name}: empty grid or block {grid} {block}")
    if block[0] * block[1] * block[2] > 1024:
        raise ValueError(f"{name}: {block} is more than 1024 threads per block")
    if grid[1] > 65535 or grid[2] > 65535:
        raise ValueError(f"{name}: grid {grid} exceeds 65535 in y or z")
    if int(shared_mem) > 48 * 1024:
        raise ValueError(f"{name}: {shared_mem} bytes of dynamic shared memory (at most 48 KiB)")
    x_work = covered[0]
    if grid[0] * block[0] < x_work:
        raise ValueError(f"{name}: grid x ({grid[0]} blocks of {block[0]}) does not cover {x_work} columns")
    if len(covered) > 2:  # a kernel written for blocks of exactly (32, 8) threads, with shared memory
        if block != (32, 8, 1):
            raise ValueError(f"{name}: its layout needs blocks of (32, 8) threads, got {block}")
        if int(shared_mem) < covered[2]:
            raise ValueError(f"{name}: needs {covered[2]} bytes of dynamic shared memory, got {shared_mem}")


class _Launcher:
    """One kernel instantiation; ``launcher(grid, block, args, shared_mem=0)``."""

    def __init__(self, name):
        self.name = name
        self.base, self.dtype, self.kind, self.form = _parse(name)

    def __call__(self, grid, block, args, shared_mem=0, **kwargs):
        run = _KERNELS[self.base][1]
        covered = run(self.dtype, self.kind, self.form, tuple(args))
        _check_launch(self.name, grid, block, shared_mem, covered)


class RawModule:
    """A module of nyhopt kernels: ``get_function(name_expression)`` (the source is not compiled)."""

    def __init__(self, code=None, *, path=None, options=(), backend="nvrtc", translate_cucomplex=False,
                 enable_cooperative_groups=False, name_expressions=None, jitify=False):
        if code is None:
            raise ValueError("host CuPy: RawModule needs code")
        self.code, self.options = code, tuple(options)
        self.name_expressions = list(name_expressions or [])

    def compile(self, log_stream=None):
        return None

    def get_function(self, name):
        if self.name_expressions and name not in self.name_expressions:
            raise KeyError(f"{name!r} is not one of the module's name expressions {self.name_expressions}")
        base = _NAME.match(name)
        if base is None or base.group(1) not in self.code:
            raise KeyError(f"{name!r} is not defined in the module's source")
        return _Launcher(name)


class RawKernel(_Launcher):
    def __init__(self, code, name, options=(), backend="nvrtc", translate_cucomplex=False,
                 enable_cooperative_groups=False, jitify=False):
        super().__init__(name)
        self.code = code


# ------------------------------------------------------ elementwise kernels
def _split_half(k, hi, lo):
    k, hi, lo = _host(k).astype(np.float32), _host(hi), _host(lo)
    hi[...] = k.astype(np.float16)
    lo[...] = ((k - hi.astype(np.float32)) * np.float32(2048.0)).astype(np.float16)


def _add_digit_products(operation):
    weights = [float(w) for w in re.findall(r"([-+0-9.eE]+) \* \(double\)", operation)][:2]
    w2 = float(re.search(r"([-+0-9.eE]+) \* \(\(double\)c", operation).group(1))

    def run(a, b, c, e, g):
        (a, b, c, e), g = (_host(v).astype(np.float64) for v in (a, b, c, e)), _host(g)
        g[...] += weights[0] * a + weights[1] * b + w2 * (c + 2.0 * e)

    return run


class ElementwiseKernel:
    """The elementwise kernels nyhopt defines, known by name (others raise ``NotImplementedError``)."""

    def __init__(self, in_params, out_params, operation, name="kernel", **kwargs):
        self.in_params, self.out_params, self.operation, self.name = in_params, out_params, operation, name
        if name == "nh_split_half":
            self._run = _split_half
        elif name == "nh_add_digit_products":
            self._run = _add_digit_products(operation)
        else:
            raise NotImplementedError(f"host CuPy has no version of the elementwise kernel {name!r}")

    def __call__(self, *args, **kwargs):
        for a in args:
            _host(a)
        shape = np.broadcast_shapes(*(a.shape for a in args))
        if any(a.shape != shape for a in args[len(self.in_params.split(",")):]):
            raise ValueError(f"{self.name}: output shapes must match the broadcast shape {shape}")
        self._run(*args)
        return args[-1]
