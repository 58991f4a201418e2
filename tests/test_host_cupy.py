"""The host stand-in for CuPy (``tests/hostcupy``) checked on its own.

``NYHOPT_HOST_CUPY=1`` runs the ``gpu`` tests on the stand-in; these tests
check the stand-in in the normal run, where the real ``cupy`` package is
installed and must not be shadowed:

1. its array semantics (``cupy/__init__.py``: device arrays that are not
   NumPy arrays, 0-d reductions, NaN from a failed Cholesky...), in a child
   process with the stand-in on its path;
2. its NumPy versions of nyhopt's CUDA kernels (``cupy/_kernels.py``),
   every instantiation against the host emulation of the real CUDA source
   (``test_cuda_sources.py``) on the same launch arguments: CUDA source,
   emulation and stand-in tell the same story; its launch checks; its two
   elementwise kernels against nyhopt's host versions;
3. its cuBLAS models (``cupy_backends/cuda/libs/cublas.py``) on host
   memory, and the constants of its cuBLAS and runtime modules against
   CUDA's and CuPy's.

The modules that import nothing from the stand-in's packages are loaded
from their files under private names (:func:`host_module`); the cuBLAS
models are used that way by ``test_cuda_gram16.py`` and
``test_cuda_gram8.py``.
"""
from __future__ import annotations

import ast
import copy
import functools
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from nyhopt.ops import _cuda_compile as cc
from test_cuda_sources import KINDS, EmulatedFunction, _dot_inputs, _problem, emulator  # noqa: F401

HOSTCUPY = pathlib.Path(__file__).resolve().parent / "hostcupy"
#: The stand-in's modules that import nothing from its packages at import time: loadable by path.
STANDALONE = ("cupy/_kernels.py", "cupy/cuda/runtime.py", "cupy_backends/cuda/libs/cublas.py")


@functools.lru_cache(maxsize=None)
def host_module(path):
    """The stand-in's module ``tests/hostcupy/<path>``, loaded from its file under a private name.

    Never imported as ``cupy``: the real CuPy stays what ``import cupy`` gives.
    Cached, so every test sees one module (and one cuBLAS pointer-mode table).
    """
    if path not in STANDALONE:
        raise ValueError(f"{path} imports from the stand-in's packages; run it in a child process instead")
    name = "_nyhopt_host_cupy_" + re.sub(r"\W", "_", path[: -len(".py")])
    spec = importlib.util.spec_from_file_location(name, HOSTCUPY / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------ loading by path
@pytest.mark.parametrize("path", STANDALONE)
def test_standalone_modules_import_nothing_from_the_stand_in(path):
    """What :func:`host_module` loads must not import ``cupy``, ``cupyx``, ``cupy_backends`` or siblings."""
    tree = ast.parse((HOSTCUPY / path).read_text())
    for node in tree.body:  # module level: what runs when the file is loaded
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import at module level"
            assert node.module.split(".")[0] not in ("cupy", "cupyx", "cupy_backends"), path
        elif isinstance(node, ast.Import):
            assert all(a.name.split(".")[0] not in ("cupy", "cupyx", "cupy_backends") for a in node.names), path
    module = host_module(path)
    assert module.__name__.startswith("_nyhopt_host_cupy_")
    if not os.environ.get("NYHOPT_HOST_CUPY"):  # the stand-in is not what ``import cupy`` gives
        assert not getattr(sys.modules.get("cupy"), "_HOST", False)


def test_constants_are_cupys():
    """The stand-in's type codes and cuBLAS enums are CUDA's (as far as this CuPy defines them)."""
    runtime, cublas = host_module("cupy/cuda/runtime.py"), host_module("cupy_backends/cuda/libs/cublas.py")
    # cudaDataType_t and cublas*_t values of CUDA 12's headers
    assert (runtime.CUDA_R_32F, runtime.CUDA_R_64F, runtime.CUDA_R_16F, runtime.CUDA_R_8I, runtime.CUDA_R_32I,
            runtime.CUDA_R_16BF) == (0, 1, 2, 3, 10, 14)
    assert (cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_C) == (0, 1, 2)
    assert (cublas.CUBLAS_POINTER_MODE_HOST, cublas.CUBLAS_POINTER_MODE_DEVICE) == (0, 1)
    assert (cublas.CUBLAS_COMPUTE_32F, cublas.CUBLAS_COMPUTE_64F, cublas.CUBLAS_COMPUTE_32I) == (68, 70, 72)
    assert cublas._TYPES == {runtime.CUDA_R_16F: np.float16, runtime.CUDA_R_32F: np.float32,
                             runtime.CUDA_R_64F: np.float64, runtime.CUDA_R_8I: np.int8, runtime.CUDA_R_32I: np.int32}
    if os.environ.get("NYHOPT_HOST_CUPY"):
        return
    real = pytest.importorskip("cupy_backends.cuda.api.runtime", reason="CuPy's runtime module is not importable")
    for name in dir(runtime):
        if name.startswith("CUDA_R_") and hasattr(real, name):
            assert getattr(runtime, name) == getattr(real, name), name


# ------------------------------------------------------------- array semantics
SEMANTICS = r"""
import pickle

import numpy as np

import cupy
from nyhopt.backend import get_namespace, is_cupy_namespace, to_numpy


def raises(fn, exc=TypeError):
    try:
        fn()
    except exc:
        return True
    raise AssertionError(f"{fn} did not raise {exc.__name__}")


assert cupy._HOST and cupy.__file__.startswith(STAND_IN), cupy.__file__
h = np.arange(6.0).reshape(2, 3)
d = cupy.asarray(h)
assert type(d) is cupy.ndarray and not isinstance(d, np.ndarray)
h[0, 0] = 99.0
assert float(d[0, 0]) == 0.0  # asarray copies host data
assert cupy.asarray(d) is d  # and keeps a device array
h[0, 0] = 0.0

# host and device do not mix
raises(lambda: np.asarray(d))
raises(lambda: np.array(d))
raises(lambda: d + h)
raises(lambda: h + d)
raises(lambda: d @ h.T)
raises(lambda: cupy.add(d, h))
raises(lambda: cupy.dot(d, h.T))
raises(lambda: d.__setitem__(Ellipsis, h), ValueError)  # CuPy: "non-scalar numpy.ndarray cannot be used for fill"
raises(lambda: d.__setitem__((0, slice(None)), h[0]), ValueError)
raises(lambda: d.fill(h), ValueError)
d[0, 1:] = np.float64(0.0)
d[...] = np.array(0.0)
d.fill(np.array(1.0))
assert float(d.sum()) == 6.0
d[...] = cupy.asarray(h)
np.testing.assert_array_equal(d.get(), h)
np.testing.assert_array_equal(cupy.asnumpy(d), h)
# ... but host indices of take are copied to the device, as CuPy's
np.testing.assert_array_equal(cupy.take(d, np.array([2, 0]), axis=1).get(), h[:, [2, 0]])
assert type(d.take(np.array([5, 1]))) is cupy.ndarray and d.take(np.array([5, 1])).get().tolist() == [5.0, 1.0]

# a NumPy 0-d array or scalar mixes
for s in (np.float64(2.0), np.float32(2.0), np.array(2.0), 2.0, 2):
    for r in (d * s, s * d, d + s, cupy.multiply(d, s)):
        assert type(r) is cupy.ndarray and r.shape == (2, 3), (s, r)
    np.testing.assert_array_equal((d * s).get(), 2 * h)
e = d.copy()
e *= np.float64(3.0)
np.testing.assert_array_equal(e.get(), 3 * h)

# reductions give 0-d device arrays
for r in (d.sum(), cupy.sum(d), d.max(), d[0].min(), d.mean(), cupy.linalg.norm(d), cupy.dot(d[0], d[1]),
          d[0] @ d[1], cupy.trace(d[:, :2]), d[1, 2]):
    assert type(r) is cupy.ndarray and r.shape == (), r
assert float(d.sum()) == 15.0 and int(d.argmax()) == 5 and d.sum().item() == 15.0
assert type(d.sum(axis=0)) is cupy.ndarray and d.sum(axis=0).shape == (3,)

# views share memory; a[...] = b writes through
v = d[:, 1:]
v[...] = cupy.zeros((2, 2))
np.testing.assert_array_equal(d.get(), [[0.0, 0.0, 0.0], [3.0, 0.0, 0.0]])
d.T[2, 1] = 7.0
d.reshape(3, 2)[0, 1] = 5.0
d[0][2] = 4.0
np.testing.assert_array_equal(d.get(), [[0.0, 5.0, 4.0], [3.0, 0.0, 7.0]])
d[...] = cupy.ones(3)  # broadcast
assert float(d.sum()) == 6.0
w = d.copy()
w[0, 0] = -1.0
assert float(d[0, 0]) == 1.0  # copy does not
g = d.get()
g[0, 0] = -1.0
assert float(d[0, 0]) == 1.0  # get copies

# Cholesky: NaN, not an exception, when not positive definite (as cuSOLVER without checks)
L = cupy.linalg.cholesky(cupy.asarray([[1.0, 2.0], [2.0, 1.0]]))
assert type(L) is cupy.ndarray and bool(cupy.isnan(L).all())
L = cupy.linalg.cholesky(cupy.asarray([[4.0, 2.0], [2.0, 5.0]]))
np.testing.assert_allclose(L.get(), [[2.0, 0.0], [1.0, 2.0]])

# nyhopt sees CuPy arrays
assert get_namespace(d) is cupy and is_cupy_namespace(cupy)
assert get_namespace(d, None, 1.5, d[0]) is cupy and get_namespace(h) is np
raises(lambda: get_namespace(d, h))
assert type(to_numpy(d)) is np.ndarray

# pickling goes through host memory and gives a device array
p = pickle.loads(pickle.dumps(d[:, ::2]))
assert type(p) is cupy.ndarray and p.shape == (2, 2)
np.testing.assert_array_equal(p.get(), d.get()[:, ::2])
p[0, 0] = 9.0
assert float(d[0, 0]) == 1.0
print("ok")
"""


def test_array_semantics_in_a_child_process():
    """``cupy/__init__.py`` as ``cupy``: only in a child process with ``tests/hostcupy`` first on its path."""
    root = HOSTCUPY.parents[1]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HOSTCUPY), str(root), env.get("PYTHONPATH")) if p)
    code = SEMANTICS.replace("STAND_IN", repr(str(HOSTCUPY)))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-4000:]


# ------------------------------------- the kernels against the emulated CUDA source
def _instantiations():
    for source in sorted(cc.SOURCES):
        for dtype in ("float64", "float32"):
            yield from ((source, dtype, name) for name in cc.name_expressions(source, dtype))


def _kind_and_form(name):
    """Kernel kind and form of a name expression: ``nh_adjoint<float, 2, true>`` -> ("matern32", True)."""
    params = [p.strip() for p in name[name.index("<") + 1: -1].split(",")]
    form = None if len(params) < 3 else {"true": True, "false": False}.get(params[2], None)
    if len(params) == 3 and form is None:
        form = int(params[2])
    return KINDS[int(params[1])], form


B, M, D, R, LD, ROWS = 45, 37, 3, 2, 48, 40  # no multiple of 8 or 32; grid y 2 < ceil(B / 8): blocks stride
BLOCK = (32, 8)


def _launches(source, dtype, kind, form):
    """``(grid, args, shared_mem)`` of launches as ``nyhopt.ops._cupy`` makes them (NumPy arrays)."""
    kernel, X, Z, ell, Xs, Zt, P, Q, G = _problem(kind, dtype, n=B, m=M, d=D, r=R)
    i32 = np.int32
    grid = ((M + 31) // 32, 2)
    if source == "kernel_block":
        yield grid, (Xs, Zt, np.full((B, M), np.nan, dtype), i32(B), i32(M), i32(D)), 0
        return
    g, xn, zn = _dot_inputs(X, Z, ell, dtype)
    if source == "kernel_dot":
        if form == 0:
            yield grid, (g, xn, zn, g, i32(B), i32(M)), 0  # in place
            yield grid, (g, xn, zn, np.full_like(g, np.nan), i32(B), i32(M)), 0
        else:
            yield grid, (g, xn, zn, np.full((B, 2 * M), np.nan, np.float16), i32(B), i32(M)), 0
        return
    if source == "adjoint_dot":
        c = np.ascontiguousarray(P @ Q.T)
        yield grid, (g, c, xn, zn, np.full((B, M), np.nan), i32(B), i32(M)), 0
        return
    if source == "kernel_digits":
        digits = np.full((3, ROWS, LD), 99, np.int8)
        grid = ((LD + 31) // 32, 2)  # 2 < ceil(M / 8)
        if form == 0:
            kt = np.ascontiguousarray(g.T)
        else:  # kernel values, some out of [0, 1] (clipped) and a NaN (digits 0)
            kt = np.random.default_rng(1).random((M, B)).astype(dtype)
            kt[0, :6] = [0.0, 1.0, 0.5, -0.25, 1.5, np.nan]
        yield grid, (kt, xn, zn, digits, i32(B), i32(M), i32(LD), np.int64(ROWS * LD)), 0
        return
    assert source == "adjoint"
    C, Qt, r = (P, np.ascontiguousarray(Q.T), R) if form else (G, Zt, 0)
    for wanted, grid_y in ((7, 1), (5, 2)):  # grid y 1 < 2 row tiles of 32: blocks stride
        outs = (np.zeros((D, M)), np.zeros(D), np.zeros((B, D)))
        yield (grid[0], grid_y), (Xs, Zt, C, Qt, i32(B), i32(M), i32(D), i32(r), i32(wanted), *outs), 33 * D * 8


def _assert_ulps(got, want, dtype, ulps):
    """``got`` within ``ulps`` units in the last place of ``dtype`` of ``want``, NaN where ``want`` is NaN."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    eps = np.finfo(dtype).eps
    tiny = np.finfo(dtype).tiny
    ok = np.isnan(want) | (np.abs(got - want) <= ulps * eps * np.maximum(np.abs(want), tiny))
    assert ok.all(), f"{(~ok).sum()} entries differ by more than {ulps} ulps: {got[~ok][:5]} vs {want[~ok][:5]}"


@pytest.mark.parametrize("source,dtype,name", list(_instantiations()), ids=lambda v: str(v).replace(" ", ""))
def test_kernel_agrees_with_the_emulated_cuda_source(emulator, tmp_path, source, dtype, name):
    """Stand-in and emulated CUDA source on copies of the same launch arguments, every output compared.

    Values in ``T`` agree to a few ulps (``exp`` differs: NumPy's, the C
    library's and the device's are not correctly rounded alike); what the
    contract makes exact from a value (float16 parts, int8 digits) agrees
    bit for bit given the same value; the adjoint's float64 sums agree to
    1e-12 of their size (1e-5 for float32 data, which the source sums in
    float32 over 4 rows before its float64 sums).
    """
    kernels = host_module("cupy/_kernels.py")
    kind, form = _kind_and_form(name)
    emulated = EmulatedFunction(emulator, tmp_path, source, dtype, kind, form)
    assert emulated.name == name
    stand_in = kernels._Launcher(name)
    for grid, args, shared_mem in _launches(source, dtype, kind, form):
        host = copy.deepcopy(args)  # keeps the in-place aliasing of kernel_dot's out and g
        emulated(grid, BLOCK, args, shared_mem=shared_mem)
        stand_in(grid, BLOCK, host, shared_mem=shared_mem)
        if source in ("kernel_block", "kernel_dot", "adjoint_dot"):
            out = 4 if source == "adjoint_dot" else (2 if source == "kernel_block" else 3)
            if source != "kernel_dot" or form == 0:  # values in T (adjoint_dot: float64 of T)
                _assert_ulps(host[out], args[out], dtype, 4)
                continue
            # float16 [hi | lo] of k: the parts of equal k are equal, bit for bit
            k_host, k_emu = _values(kernels._Launcher, emulator, tmp_path, source, dtype, kind, grid, host)
            _assert_ulps(k_host, k_emu, dtype, 4)
            from nyhopt.ops.gram16 import split_block

            bits = lambda HL: HL.view(np.uint16).reshape(B, 2, M)  # noqa: E731
            np.testing.assert_array_equal(bits(host[out]), bits(split_block(k_host, np)))
            same = (k_host == k_emu)[:, None, :].repeat(2, 1)
            np.testing.assert_array_equal(bits(host[out])[same], bits(args[out])[same])
        elif source == "kernel_digits":
            _assert_ulps(host[0], args[0], dtype, 4)
            _assert_digits(host, args)
            if form == 0:  # the emulated source's digits of the stand-in's values
                again = (host[0].copy(), *args[1:3], np.full_like(args[3], 99), *args[4:])
                EmulatedFunction(emulator, tmp_path, source, dtype, kind, 1)(grid, BLOCK, again)
                np.testing.assert_array_equal(host[3], again[3])
        else:  # adjoint
            tol = 1e-12 if dtype == "float64" else 1e-5
            for h, e in zip(host[9:], args[9:]):
                np.testing.assert_allclose(h, e, rtol=0, atol=tol * max(np.abs(e).max(), 1e-300))


def _values(launcher, emulator, tmp_path, source, dtype, kind, grid, args):
    """``k`` in float32 of ``nh_kernel_dot`` with ``OUT = 0`` on ``args``'s inputs: (stand-in, emulated)."""
    got = []
    for run in (launcher(cc.kernel_name(source, dtype, kind, 0)),
                EmulatedFunction(emulator, tmp_path, source, dtype, kind, 0)):
        out = np.full((B, M), np.nan, np.float32)
        run(grid, BLOCK, (*args[:3], out, *args[4:]))
        got.append(out)
    return got


def _assert_digits(host, emu):
    """Equal digits where the two values are equal; zero columns past ``b``; rows past ``m`` untouched."""
    m, b = host[0].shape
    same = host[0] == emu[0]
    for p in range(3):
        np.testing.assert_array_equal(host[3][p, :m, :b][same], emu[3][p, :m, :b][same])
    for digits in (host[3], emu[3]):
        assert not digits[:, :m, b:].any()
        assert (digits[:, m:] == 99).all()


def test_launches_are_checked_as_cuda_checks_them():
    """Too few blocks for the columns, too many threads, grid or shared memory, reads past an array: errors."""
    kernels = host_module("cupy/_kernels.py")
    kind_block = kernels._Launcher("nh_kernel_block<double, 0>")
    X, Zt, out = np.zeros((B, D)), np.zeros((D, M)), np.zeros((B, M))
    i32 = np.int32
    args = (X, Zt, out, i32(B), i32(M), i32(D))
    kind_block((2, 1), BLOCK, args)  # grid y 1: one row of blocks strides over every row
    for grid, block, shared, match in [((1, 1), BLOCK, 0, "does not cover"), ((2, 1), (32, 33), 0, "1024"),
                                       ((2, 65536), BLOCK, 0, "65535"), ((2, 1), BLOCK, 49153, "48 KiB")]:
        with pytest.raises(ValueError, match=match):
            kind_block(grid, block, args, shared_mem=shared)
    with pytest.raises(IndexError, match="out of bounds"):
        kind_block((2, 1), BLOCK, (X, Zt, out, i32(B + 1), i32(M), i32(D)))
    with pytest.raises(IndexError, match="out of bounds"):  # a view reads its own memory, not its base's start
        kind_block((2, 1), BLOCK, (X, Zt, np.zeros((B + 1, M))[1:], i32(B + 1), i32(M), i32(D)))
    with pytest.raises(TypeError, match="scalar"):
        kind_block((2, 1), BLOCK, (X, Zt, out, np.array(B), i32(M), i32(D)))
    for wrong in (B, np.int64(B)):  # CuPy passes a Python int as 64 bits: every later argument would shift
        with pytest.raises(TypeError, match="C type int must be int32"):
            kind_block((2, 1), BLOCK, (X, Zt, out, wrong, i32(M), i32(D)))
    with pytest.raises(TypeError, match="pointer"):
        kind_block((2, 1), BLOCK, (X.tolist(), Zt, out, i32(B), i32(M), i32(D)))
    adjoint = kernels._Launcher("nh_adjoint<double, 0, false>")
    outs = (np.zeros((D, M)), np.zeros(D), np.zeros((B, D)))
    args = (X, Zt, out, out, i32(B), i32(M), i32(D), i32(0), i32(7), *outs)
    adjoint((2, 1), BLOCK, args, shared_mem=33 * D * 8)
    for block, shared, match in [((32, 8), 32 * D * 8, "shared memory"), ((64, 4), 33 * D * 8, "(32, 8)")]:
        with pytest.raises(ValueError, match=re.escape(match)):
            adjoint((2, 1), block, args, shared_mem=shared)
    with pytest.raises(KeyError, match="no kernel"):
        kernels._Launcher("nh_fused<double, 0>")
    with pytest.raises(ValueError, match="template"):
        kernels._Launcher("nh_kernel_block<half, 0>")
    module = kernels.RawModule(code=cc.read_source("kernel_block"), name_expressions=["nh_kernel_block<float, 1>"])
    assert module.get_function("nh_kernel_block<float, 1>").name == "nh_kernel_block<float, 1>"
    with pytest.raises(KeyError, match="name expressions"):
        module.get_function("nh_kernel_block<float, 0>")
    with pytest.raises(KeyError, match="not defined"):
        kernels.RawModule(code=cc.read_source("adjoint")).get_function("nh_kernel_block<float, 0>")


def test_elementwise_kernels_are_nyhopts(monkeypatch):
    """The two elementwise kernels, built from nyhopt's own definitions, against its host versions."""
    import types

    from nyhopt.ops import _cupy, gram8
    from nyhopt.ops.gram16 import split_block

    kernels = host_module("cupy/_kernels.py")
    xp = types.ModuleType("cupy")  # what nyhopt needs of the namespace: its name and ElementwiseKernel
    xp.ElementwiseKernel = kernels.ElementwiseKernel
    monkeypatch.setattr(_cupy, "_SPLIT", {})
    monkeypatch.setattr(gram8, "_ADD", {})
    rng = np.random.default_rng(2)
    k = rng.random((7, 9)).astype(np.float32)
    k[0, :4] = [0.0, 1.0, 1e-9, 0.3333]
    hi, lo = np.empty(k.shape, np.float16), np.empty(k.shape, np.float16)
    _cupy._split_kernel(xp)(k, hi, lo)
    HL = split_block(k, np)
    np.testing.assert_array_equal(hi.view(np.uint16), HL[:, :9].view(np.uint16))
    np.testing.assert_array_equal(lo.view(np.uint16), HL[:, 9:].view(np.uint16))
    m = 5
    C1 = rng.integers(-2**20, 2**20, (3, 8, 8)).astype(np.int32)
    C2 = rng.integers(-2**20, 2**20, (8, 8)).astype(np.int32)
    G, want = np.ones((m, m)), np.ones((m, m))
    gram8.add_digit_products(G, C1, C2, m, xp)
    np.testing.assert_array_equal(G, gram8._add_host(want, C1, C2, m))
    with pytest.raises(NotImplementedError, match="nh_other"):
        kernels.ElementwiseKernel("float32 x", "float32 y", "y = x", "nh_other")


# ------------------------------------------------------------ the cuBLAS models
def test_cublas_models_on_host_memory(monkeypatch):
    """``SgemmEx`` and int8 ``GemmEx`` on column-major host memory: leading dimensions, transposes, scalars, errors."""
    import ctypes

    cublas = host_module("cupy_backends/cuda/libs/cublas.py")
    monkeypatch.setattr(cublas, "_mode", {})
    N, T, h = cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_T, 5
    rng = np.random.default_rng(6)
    f32 = lambda *v: np.array(v, np.float32)  # noqa: E731
    i32 = lambda *v: np.array(v, np.int32)  # noqa: E731
    # A column-major matrix with leading dimension ld is a row-major (columns, ld) buffer, column j in row j.
    m, n, k = 7, 5, 6
    A = rng.standard_normal((m, 9)).astype(np.float16)  # A: k x m, ld 9; op(A) = A^T = A[:, :k]
    Bm = rng.standard_normal((n, 8)).astype(np.float32)  # B: k x n, ld 8; B = Bm[:, :k]^T
    C = rng.standard_normal((n, 10)).astype(np.float32)  # C: m x n, ld 10; C = C[:, :m]^T
    C0 = C.copy()
    alpha, beta = f32(0.5), f32(2.0)
    args = (h, T, N, m, n, k, alpha.ctypes.data, A.ctypes.data, 2, 9, Bm.ctypes.data, 0, 8, beta.ctypes.data,
            C.ctypes.data, 0, 10)
    with pytest.raises(cublas.CUBLASError, match="POINTER_MODE_HOST"):  # device scalars are not modelled
        cublas.sgemmEx(*args)
    cublas.setPointerMode(h, cublas.CUBLAS_POINTER_MODE_HOST)
    assert cublas.getPointerMode(h) == cublas.CUBLAS_POINTER_MODE_HOST
    cublas.sgemmEx(*args)
    want = 0.5 * (A.astype(np.float64)[:, :k] @ Bm.astype(np.float64)[:, :k].T) + 2.0 * C0[:, :m].T
    np.testing.assert_allclose(C[:, :m].T, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(C[:, m:], C0[:, m:])  # rows past m of each column untouched
    for bad, match in [({9: 5}, "leading dimension"), ({11: 1}, "SgemmEx types"), ({1: 5}, "operation"),
                       ({3: -1}, "negative")]:
        (pos, value), = bad.items()
        with pytest.raises(cublas.CUBLASError, match=match):
            cublas.sgemmEx(*(value if i == pos else a for i, a in enumerate(args)))

    # int8 GemmEx, C = A^T B exactly in int32, as nyhopt's digit products
    Ai = rng.integers(-127, 128, (8, 16)).astype(np.int8)  # A: 16 x 8, ld 16; op(A) = A^T = Ai
    Bi = rng.integers(-127, 128, (12, 16)).astype(np.int8)  # B: 16 x 12, ld 16; C: 8 x 12, ld 8
    Ci = np.full((12, 8), -1, np.int32)
    one, zero = i32(1), i32(0)
    iargs = [h, T, N, 8, 12, 16, one.ctypes.data, Ai.ctypes.data, 3, 16, Bi.ctypes.data, 3, 16, zero.ctypes.data,
             Ci.ctypes.data, 10, 8, cublas.CUBLAS_COMPUTE_32I, cublas.CUBLAS_GEMM_DEFAULT]
    cublas.gemmEx(*iargs)
    np.testing.assert_array_equal(Ci, Bi.astype(np.int64) @ Ai.astype(np.int64).T)
    for pos, value, match in [(15, 0, "int8 inputs"), (17, cublas.CUBLAS_COMPUTE_32F, "int8 inputs"),
                              (5, 14, "multiples of 4"), (16, 6, "multiples of 4"), (18, 42, "cublasGemmAlgo_t")]:
        with pytest.raises(cublas.CUBLASError, match=match):
            cublas.gemmEx(*(value if i == pos else a for i, a in enumerate(iargs)))
    big = np.full((4, 16), 127, np.int8)
    alpha_big = i32(2**16)
    with pytest.raises(cublas.CUBLASError, match="overflow"):  # the device would wrap around
        cublas.gemmEx(h, T, N, 4, 4, 16, alpha_big.ctypes.data, big.ctypes.data, 3, 16, big.ctypes.data, 3, 16,
                      zero.ctypes.data, np.zeros((4, 4), np.int32).ctypes.data, 10, 4, cublas.CUBLAS_COMPUTE_32I, -1)
    assert cublas._scalar(alpha_big.ctypes.data, ctypes.c_int32) == 2**16
