"""CUDA sources of :mod:`nyhopt.ops`: reading, instantiating, compiling.

The CUDA C kernels live in ``nyhopt/ops/_cuda/*.cu`` as templates on the
data type ``T`` (float or double), the kernel kind and, for the adjoint, the
form of the cotangent (for the kernel block from a distance product, its
output: the data dtype or float16 hi/lo parts).  This module is the one place that knows

* which template instantiations (NVRTC *name expressions*) each source needs
  (:data:`SOURCES`, :func:`name_expressions`);
* how to turn a source file into one self-contained translation unit
  (:func:`read_source` inlines the ``#include "*.cuh"`` headers of the
  folder, so CuPy's compile cache sees every byte that is compiled);
* how to build the run-time modules (:func:`get_function`, through
  :class:`cupy.RawModule`): lazily, one module per instantiation and device,
  so a call compiles only the kernel it launches;
* how to compile a source *without a GPU* (:func:`nvrtc_compile`), with the
  low-level NVRTC binding of CuPy, so that CI catches a broken kernel.

What is compiled when.  Nothing at import.  The first call that launches a
kernel on a device compiles that one instantiation (source, dtype, kind and
form, e.g. ``nh_adjoint<float, 0, true>``): a Gaussian fit never compiles the
Laplacian or Matern kernels, nor the dense adjoint when it only uses the
low-rank one.  The function is then kept for the life of the process.
CuPy stores every compiled binary in its on-disk cache (``CUPY_CACHE_DIR``,
by default ``~/.cupy/kernel_cache``), keyed on the code, the options and the
name expressions, so later processes load it and skip NVRTC.  The tests, on
the other hand, compile every instantiation (:func:`name_expressions`).

CuPy is imported inside the functions only: ``import nyhopt`` never needs a
GPU or CuPy.

Examples
--------
>>> from nyhopt.ops import _cuda_compile as cc
>>> sorted(cc.SOURCES)
['adjoint', 'adjoint_dot', 'kernel_block', 'kernel_digits', 'kernel_dot']
>>> cc.name_expressions("kernel_block", "float32")[:2]
['nh_kernel_block<float, 0>', 'nh_kernel_block<float, 1>']
"""
from __future__ import annotations

import ctypes
import functools
import glob
import os
import re
import threading

import numpy as np

__all__ = [
    "SOURCES",
    "OPTIONS",
    "CompileError",
    "source_dir",
    "read_source",
    "source_files",
    "name_expressions",
    "kernel_name",
    "load_nvrtc",
    "nvrtc_compile",
    "get_function",
]

#: Kernel kinds in the order of their template codes (see ``_cuda/common.cuh``).
KINDS = ("gaussian", "laplacian", "matern32", "matern52")

#: For each source file (without ``.cu``): the template of its kernel name,
#: filled with the C type ``T``, the kind code ``K`` and the form ``L`` (the
#: cotangent of the adjoint: ``true`` for low rank; the output ``OUT`` of the
#: kernel block from a distance product: ``0`` the data dtype, ``1`` float16
#: hi/lo parts; the input ``FROM`` of the int8 digits: ``0`` a distance
#: product, ``1`` kernel values), and its forms: one tuple for every dtype, or a tuple
#: per dtype (a dict) where a form does not exist for every dtype.
SOURCES = {
    "kernel_block": ("nh_kernel_block<{T}, {K}>", (None,)),
    "adjoint": ("nh_adjoint<{T}, {K}, {L}>", ("false", "true")),
    "kernel_dot": ("nh_kernel_dot<{T}, {K}, {L}>", {"float32": ("0", "1"), "float64": ("0",)}),
    "adjoint_dot": ("nh_adjoint_dot<{T}, {K}>", (None,)),
    "kernel_digits": ("nh_kernel_digits<{T}, {K}, {L}>", ("0", "1")),
}

#: NVRTC options used at run time and in the compile test.
OPTIONS = ("-std=c++17",)

_C_TYPES = {"float32": "float", "float64": "double"}
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_.]+\.cuh)"\s*$', re.M)


class CompileError(RuntimeError):
    """A CUDA source failed to compile; the message holds the compiler log."""


def source_dir() -> str:
    """Folder holding the ``.cu``/``.cuh`` files."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_cuda")


def source_files() -> list[str]:
    """Names (without ``.cu``) of every CUDA source file in :func:`source_dir`."""
    return sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(source_dir(), "*.cu")))


def read_source(*names: str) -> str:
    """Text of ``_cuda/<name>.cu`` with its local ``#include "x.cuh"`` inlined.

    With several names, the sources are concatenated into one translation
    unit.  Each header is inlined once (later includes of the same header
    are dropped, like ``#pragma once``).
    """
    seen: set[str] = set()

    def expand(path: str) -> str:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()

        def include(match):
            header = match.group(1)
            if header in seen:
                return ""
            seen.add(header)
            return expand(os.path.join(source_dir(), header)).replace("#pragma once", "")

        return _INCLUDE.sub(include, text)

    parts = []
    for name in names:
        path = os.path.join(source_dir(), f"{name}.cu")
        if not os.path.exists(path):
            raise ValueError(f"unknown CUDA source {name!r}; expected one of {source_files()}")
        parts.append(expand(path))
    return "\n".join(parts)


def _ctype(dtype) -> str:
    key = np.dtype(dtype).name
    if key not in _C_TYPES:
        raise TypeError(f"CUDA kernels support float32 and float64 data, got {key}")
    return _C_TYPES[key]


def _forms(source: str, dtype) -> tuple:
    _ctype(dtype)
    forms = SOURCES[source][1]
    return forms[np.dtype(dtype).name] if isinstance(forms, dict) else forms


def _form(source: str, dtype, form) -> str | None:
    """Template text of ``form``: a bool for the adjoint (low rank), the output code of ``kernel_dot``."""
    forms = _forms(source, dtype)
    if forms == (None,):
        return None
    if forms == ("false", "true"):
        return "true" if form else "false"
    text = str(form)
    if text not in forms:
        raise ValueError(f"{source} has no form {form!r} for {np.dtype(dtype).name}; expected one of {forms}")
    return text


def kernel_name(source: str, dtype, kind: str, form=None, *, lowrank: bool | None = None) -> str:
    """Name expression of one instantiation, e.g. ``'nh_adjoint<double, 1, true>'``.

    ``form`` is the adjoint's low-rank flag (also accepted as ``lowrank``),
    or the output code of ``kernel_dot`` (``nh_kernel_dot<float, 0, 1>``);
    ``kernel_block`` takes none.
    """
    form = lowrank if lowrank is not None else form
    if kind not in KINDS:
        raise ValueError(f"kernel kind {kind!r} has no CUDA implementation; expected one of {KINDS}")
    return SOURCES[source][0].format(T=_ctype(dtype), K=KINDS.index(kind), L=_form(source, dtype, form))


def name_expressions(source: str, dtype, form=None) -> list[str]:
    """Every instantiation of ``source`` that the run time may ask for, for one dtype (and one form)."""
    template = SOURCES[source][0]
    forms = _forms(source, dtype) if form is None else (_form(source, dtype, form),)
    return [template.format(T=_ctype(dtype), K=k, L=f) for f in forms for k in range(len(KINDS))]


# ----------------------------------------------------------------- NVRTC (no GPU)
def _wheel_nvrtc_libraries() -> list[str]:
    """``libnvrtc.so*`` files of the ``nvidia-cuda-nvrtc-cu12`` wheel, if installed."""
    try:
        import nvidia.cuda_nvrtc as pkg
    except ImportError:
        return []
    found = []
    for root in list(getattr(pkg, "__path__", [])):
        found += sorted(glob.glob(os.path.join(root, "lib", "libnvrtc.so*")))
        found += sorted(glob.glob(os.path.join(root, "bin", "nvrtc64*.dll")))
    return [p for p in found if "builtins" not in os.path.basename(p) and ".alt." not in os.path.basename(p)]


@functools.lru_cache(maxsize=1)
def load_nvrtc():
    """CuPy's low-level NVRTC binding, with a working NVRTC library behind it.

    The library of the ``nvidia-cuda-nvrtc-cu12`` wheel (a dependency of the
    ``test`` and ``gpu`` extras), when installed, is loaded first with
    ``RTLD_GLOBAL``: CuPy's own lookup of ``libnvrtc.so.12`` by name then
    finds it whatever CuPy's version and search rules, with no environment
    variable to set.  Without the wheel, CuPy's lookup (system CUDA toolkit,
    ``CUDA_PATH``) is used as is.

    Returns
    -------
    module
        ``cupy_backends.cuda.libs.nvrtc``.

    Raises
    ------
    RuntimeError
        If no NVRTC library can be loaded (message says what was tried).
    """
    errors = []
    for lib in _wheel_nvrtc_libraries():
        try:
            ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
        except OSError as exc:
            errors.append(f"{lib}: {exc}")
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
        return nvrtc
    except Exception as exc:  # ImportError, or the library was not found
        errors.append(f"cupy_backends.cuda.libs.nvrtc: {exc}")
    raise RuntimeError(
        "no usable NVRTC library (install the 'nvidia-cuda-nvrtc-cu12' wheel, e.g. "
        "pip install -e .[test]); tried: " + "; ".join(errors)
    )


def nvrtc_compile(code: str, names, arch: str = "compute_90", options=OPTIONS, filename: str = "nyhopt.cu"):
    """Compile CUDA ``code`` with NVRTC, without a GPU, and instantiate ``names``.

    Parameters
    ----------
    code : str
        Complete translation unit (see :func:`read_source`).
    names : list of str
        Name expressions (template instantiations) to compile and look up.
    arch : str
        Virtual (``compute_XY``) or real (``sm_XY``) architecture.
    options : tuple of str
        Further NVRTC options.

    Returns
    -------
    (ptx, lowered) : (bytes or str, dict)
        The PTX and, for each name expression, its mangled name.

    Raises
    ------
    CompileError
        If NVRTC rejects the code; the message holds the compiler log.
    """
    nvrtc = load_nvrtc()
    prog = nvrtc.createProgram(code, filename, [], [])
    try:
        for name in names:
            nvrtc.addNameExpression(prog, name)
        try:
            nvrtc.compileProgram(prog, [f"-arch={arch}", *options])
        except nvrtc.NVRTCError as exc:
            log = nvrtc.getProgramLog(prog)
            raise CompileError(f"NVRTC failed on {filename} ({exc}):\n{log}") from None
        lowered = {name: nvrtc.getLoweredName(prog, name) for name in names}
        return nvrtc.getPTX(prog), lowered
    finally:
        nvrtc.destroyProgram(prog)


# ---------------------------------------------------------------- run time (GPU)
#: (device id, name expression) -> (cupy.RawModule, its function).
_modules: dict = {}
_lock = threading.Lock()


def get_function(source: str, dtype, kind: str, form=None):
    """Compiled kernel ``source`` for ``dtype``/``kind`` (and ``form``) on the current device.

    Each instantiation is a module of its own, built on first use (once per
    device) with the one name expression it needs: NVRTC takes 3 to 5 times
    as long for all four kinds of a source as for one.  CuPy keeps the
    binary in its on-disk cache (``CUPY_CACHE_DIR``), so later processes
    skip NVRTC.

    Returns
    -------
    cupy.RawKernel
    """
    import cupy

    name = kernel_name(source, dtype, kind, form)
    key = (cupy.cuda.Device().id, name)
    entry = _modules.get(key)
    if entry is None:
        with _lock:
            entry = _modules.get(key)
            if entry is None:
                load_nvrtc()
                mod = cupy.RawModule(code=read_source(source), options=OPTIONS, name_expressions=[name])
                entry = (mod, mod.get_function(name))
                _modules[key] = entry
    return entry[1]
