"""``cupy.cuda.compiler`` of the host stand-in: nothing is compiled, so nothing is logged."""
from __future__ import annotations


def compile_using_nvrtc(source, options=(), arch=None, filename="kern.cu", name_expressions=None, **kwargs):
    raise RuntimeError("host CuPy compiles nothing")


def _compile_module_with_cache(source, options=(), arch=None, cache_dir=None, extra_source=None, backend="nvrtc",
                               **kwargs):
    raise RuntimeError("host CuPy compiles nothing")
