"""What ``nyhopt info`` reports: versions, the device, the CUDA compiler, the thread settings.

The first thing to paste into a bug report.  Every probe is guarded: a missing package, a
machine without a GPU or without NVRTC gives a line that says so, never an exception.

Examples
--------
>>> from nyhopt.cli._report import gather, format_text
>>> info = gather(compile_cuda=False)
>>> info["nyhopt"] == __import__("nyhopt").__version__
True
>>> format_text({"python": "3.11.2", "cupy": None})
'python: 3.11.2\\ncupy: not installed'
"""
from __future__ import annotations

import importlib
import importlib.metadata
import platform

__all__ = ["gather", "format_text", "gpu_problem"]

#: Packages reported by version (``None`` when not installed), besides Python and nyhopt.
PACKAGES = ("numpy", "scipy", "numba", "cupy", "scikit-learn", "pooch", "threadpoolctl")

_DISTRIBUTIONS = {"cupy": ("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x")}


def _first_line(exc) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _version(name):
    """Installed version of ``name``, ``None`` when absent (read from metadata: imports nothing)."""
    for dist in _DISTRIBUTIONS.get(name, (name,)):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


#: What a CUDA error usually means, by the name CUDA gives it.
_CUDA_HINTS = {
    "cudaErrorInsufficientDriver": ("no NVIDIA driver is loaded, or one older than the CUDA of this CuPy: "
                                    "update the driver, or install the CuPy of the CUDA that nvidia-smi "
                                    "shows (nyhopt[cuda12] or nyhopt[cuda13])"),
    "cudaErrorNoDevice": "no NVIDIA GPU is visible to this process (see nvidia-smi and CUDA_VISIBLE_DEVICES)",
    "cudaErrorInvalidDevice": "CUDA_VISIBLE_DEVICES names a device that does not exist",
    "cudaErrorSystemDriverMismatch": ("the kernel driver and the user-space driver library differ "
                                      "(reboot, or reinstall the driver)"),
    "cudaErrorDevicesUnavailable": "every GPU is busy or in a prohibited/exclusive compute mode",
    "cudaErrorInitializationError": "the CUDA driver failed to initialize (see nvidia-smi and dmesg)",
}


def _unusable(cupy, why):
    hint = next((text for name, text in _CUDA_HINTS.items() if name in why), None)
    version = getattr(cupy, "__version__", "")
    _, _, rest = why.partition(": ")
    if rest.startswith("cudaError"):  # the CUDA error's own name says more than the exception type
        why = rest
    return (f"CuPy {version} is installed but no CUDA device is usable: {why}".replace("CuPy  ", "CuPy ")
            + (f"; likely {hint}" if hint else ""))


def gpu_problem():
    """Why CuPy cannot run on a GPU here (one line), or ``None`` when it sees a CUDA device.

    Says whether CuPy is missing, fails to import, or is installed without a
    usable device, with the CUDA error (such as ``cudaErrorInsufficientDriver``)
    and what it usually means.
    """
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed"
    except Exception as exc:  # a broken CUDA install fails at import
        return f"CuPy is installed but fails to import ({_first_line(exc)})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver, an old driver, no device
        return _unusable(cupy, _first_line(exc))
    if count < 1:
        import os

        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        return _unusable(cupy, "it sees no CUDA device" + (f" (CUDA_VISIBLE_DEVICES={visible!r})"
                                                            if visible is not None else ""))
    return None


def _device(cupy_installed):
    """``"<name>, <memory> GiB (CUDA device 0 of N)"``, or ``"none"`` with the reason."""
    if not cupy_installed:
        return "none (CuPy is not installed)"
    problem = gpu_problem()
    if problem is not None:
        return f"none: {problem}"
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        gib = props["totalGlobalMem"] / 2**30
        return f"{name}, {gib:.1f} GiB (CUDA device 0 of {count})"
    except Exception as exc:  # no driver, no device, broken install
        return f"none ({_first_line(exc)})"


#: What ``cuda_compile`` says without CuPy: a CPU-only install, not an error.
NO_GPU_SUPPORT = ('no GPU support installed (CPU only; for a GPU: pip install "nyhopt[cuda12]" or '
                  '"nyhopt[cuda13]", see the README)')


def _cuda_compile(cupy_installed=True):
    """``"ok"`` when NVRTC compiles every CUDA source of nyhopt, else the first line of the error."""
    if not cupy_installed:
        return NO_GPU_SUPPORT
    try:
        from ..ops import _cuda_compile as cc

        for source in sorted(cc.SOURCES):
            cc.nvrtc_compile(cc.read_source(source), cc.name_expressions(source, "float64"))
        return "ok"
    except Exception as exc:  # no CuPy, no NVRTC, or a broken source
        return _first_line(exc)


def _numba_cache():
    """Where Numba keeps nyhopt's compiled CPU loops across processes, or why it does not."""
    try:
        from numba.core.caching import FunctionCache

        from ..ops import _numba

        if not _numba.DISK_CACHE:
            return "off (no writable cache folder: the loops are compiled in every process; set NUMBA_CACHE_DIR)"
        return FunctionCache(_numba._disk_cache_works)._cache_path
    except Exception as exc:
        return f"unknown ({_first_line(exc)})"


def _threads():
    out = {}
    try:
        import numba

        out["numba_threads"] = numba.get_num_threads()
        try:
            out["numba_threading_layer"] = numba.threading_layer()
        except ValueError:  # no parallel function has run yet: the layer is chosen at first use
            out["numba_threading_layer"] = f"not chosen yet (config: {numba.config.THREADING_LAYER})"
    except Exception as exc:
        out["numba_threads"] = _first_line(exc)
    try:
        from threadpoolctl import threadpool_info

        pools = [f"{p.get('internal_api')} {p.get('version') or ''} ({p.get('num_threads')} threads, "
                 f"{p.get('threading_layer', 'n/a')})".replace("  ", " ")
                 for p in threadpool_info() if p.get("user_api") == "blas"]
        out["blas"] = "; ".join(pools) or "none found"
    except ImportError:
        out["blas"] = "unknown (threadpoolctl is not installed)"
    except Exception as exc:
        out["blas"] = _first_line(exc)
    return out


def _nyhopt_config():
    import os

    from .. import get_memory_budget
    from ..backend._threads import pool_workers

    out = {"memory_budget_bytes": get_memory_budget()}
    try:
        out["pool_workers"] = pool_workers()
    except Exception as exc:
        out["pool_workers"] = _first_line(exc)
    out["thread_policy"] = "off" if os.environ.get("NYHOPT_THREAD_POLICY", "1") == "0" else "on"
    return out


def gather(compile_cuda=True) -> dict:
    """Collect the report.

    Parameters
    ----------
    compile_cuda : bool, default True
        Try to compile nyhopt's CUDA sources with NVRTC (a few seconds); False reports
        ``"not checked"``.

    Returns
    -------
    dict
        Flat mapping of item to value (str, int or ``None`` for a package that is not installed).
    """
    from .. import __version__

    info = {"python": f"{platform.python_version()} ({platform.python_implementation()}, {platform.platform()})",
            "nyhopt": __version__}
    for name in PACKAGES:
        info[name] = _version(name)
    info["device"] = _device(info["cupy"] is not None)
    if info["cupy"] is None:
        info["cuda_compile"] = NO_GPU_SUPPORT
    else:
        info["cuda_compile"] = _cuda_compile() if compile_cuda else "not checked"
    info["numba_cache"] = _numba_cache()
    info.update(_threads())
    info.update(_nyhopt_config())
    return info


def format_text(info) -> str:
    """One ``item: value`` per line; ``None`` reads "not installed"."""
    return "\n".join(f"{key}: {'not installed' if value is None else value}" for key, value in info.items())
