"""Where the time goes: the first GPU call's compilations, and the pieces of an exact step.

Two modes, each printing a table (run on the GPU machine from the repository root;
``--tiny`` runs toy sizes, on the CPU where no GPU is at hand)::

    PYTHONPATH=. python asv_bench/gpu_profile.py first-call [--tiny]
    PYTHONPATH=. python asv_bench/gpu_profile.py exact [--tiny]

``first-call`` runs ``nyhopt demo --device gpu --epochs 5`` in this process
with CuPy's compiler wrapped: every compilation (NVRTC, a cache miss) and
every load from the on-disk cache is logged with its kernel's name and its
seconds, beside the time to import CuPy and to create the cuBLAS and
cuSOLVER handles.  Run it with an empty ``CUPY_CACHE_DIR`` to see what a
fresh machine pays.

``exact`` profiles ``value_and_grad`` of exact ``prop`` at n = 10^6, m = 1000,
d = 28, ARD, float32 (n = 20000, m = 200, d = 8, float64 with ``--tiny``):
every function and method defined in ``nyhopt`` is wrapped by a timer that
synchronizes the device on entry and exit, and the table gives each one's
own time (its children's removed) and its number of calls, over ``repeat``
steps after one warm-up.  The synchronizations cost a little and remove
overlap between pieces; the total is printed beside an unwrapped step.  Only
calls on the main thread are timed: work a thread pool does counts in the
function that waits for it.
"""
import functools
import inspect
import os
import re
import sys
import threading
import time
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_report import _median_time  # noqa: E402


def _sync_for(xp):
    if xp is np:
        return lambda: None
    return xp.cuda.Device().synchronize


class PieceTimer:
    """Own (exclusive) time and call count of wrapped functions, synchronized by ``sync``."""

    def __init__(self, sync):
        self.sync = sync
        self.own = defaultdict(float)
        self.calls = defaultdict(int)
        self._stack = []

    def wrap(self, fn, name):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            if threading.current_thread() is not threading.main_thread():
                return fn(*args, **kwargs)  # work of a thread pool counts in its caller on the main thread
            self.sync()
            self._stack.append(0.0)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.sync()
                total = time.perf_counter() - t0
                children = self._stack.pop()
                self.own[name] += total - children
                self.calls[name] += 1
                if self._stack:
                    self._stack[-1] += total

        timed.__wrapped_piece__ = fn
        return timed

    def instrument(self, prefix="nyhopt"):
        """Wrap every plain function and method defined under ``prefix``, in every module that holds it.

        Returns an undo function.
        """
        wrappers, undo = {}, []

        def wrapper_for(fn, name):
            if id(fn) not in wrappers:
                wrappers[id(fn)] = self.wrap(fn, name)
            return wrappers[id(fn)]

        def ours(fn):
            return (inspect.isfunction(fn) and (fn.__module__ or "").startswith(prefix)
                    and not hasattr(fn, "__wrapped_piece__") and not fn.__name__.startswith("__"))

        for modname, mod in list(sys.modules.items()):
            if not modname.startswith(prefix) or mod is None:
                continue
            for attr, obj in list(vars(mod).items()):
                if ours(obj):
                    undo.append((mod, attr, obj))
                    setattr(mod, attr, wrapper_for(obj, f"{obj.__module__}.{obj.__qualname__}"))
                elif inspect.isclass(obj) and obj.__module__ == modname:
                    for cattr, cobj in list(vars(obj).items()):
                        if ours(cobj) and not _is_namedtuple_method(obj, cattr):
                            undo.append((obj, cattr, cobj))
                            setattr(obj, cattr, wrapper_for(cobj, f"{cobj.__module__}.{cobj.__qualname__}"))

        def restore():
            for owner, attr, obj in reversed(undo):
                setattr(owner, attr, obj)

        return restore

    def table(self, steps, top=30):
        rows = sorted(self.own.items(), key=lambda kv: -kv[1])
        total = sum(self.own.values())
        lines = [f"{'own ms/step':>12} {'share':>6} {'calls/step':>10}  function"]
        for name, sec in rows[:top]:
            lines.append(f"{sec / steps * 1e3:12.2f} {sec / total:6.1%} {self.calls[name] / steps:10.1f}  {name}")
        lines.append(f"{total / steps * 1e3:12.2f} {1:6.0%} {'':>10}  total inside nyhopt functions")
        return "\n".join(lines)


def _is_namedtuple_method(cls, attr):
    return issubclass(cls, tuple) and attr in ("_make", "_replace", "_asdict", "__new__", "__getnewargs__")


def exact_profile(tiny=False, repeat=5):
    import nyhopt as nh

    if tiny:
        xp, n, m, d, dtype = np, 20_000, 200, 8, np.float64
    else:
        import cupy as xp

        n, m, d, dtype = 1_000_000, 1000, 28, np.float32
    rng = np.random.default_rng(1234)
    X = xp.asarray(rng.standard_normal((n, d)).astype(dtype))
    y = xp.asarray(np.sin(X[:, 0].get() if xp is not np else X[:, 0]).astype(dtype))
    theta = nh.Params.from_natural(penalty=1.0 / n, lengthscale=np.full(d, 4.0), centers=X[:m])
    obj = nh.make_objective("prop", X, y, random_state=0)
    sync = _sync_for(xp)
    step = functools.partial(obj.value_and_grad, theta)
    plain, _ = _median_time(step, sync, repeat)  # after one warm-up call
    timer = PieceTimer(sync)
    restore = timer.instrument()
    try:
        t0 = time.perf_counter()
        for _ in range(repeat):
            step()
        sync()
        wrapped = (time.perf_counter() - t0) / repeat
    finally:
        restore()
    where = "CPU (NumPy)" if xp is np else xp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"exact prop value_and_grad n={n} m={m} d={d} ARD {np.dtype(dtype).name} on {where}: "
          f"median {plain * 1e3:.2f} ms unwrapped, {wrapped * 1e3:.2f} ms wrapped")
    print(timer.table(repeat))


_KERNEL_NAME = re.compile(r"__global__\s+void\s+(\w+)")


def _kernel_name(source, name_expressions):
    if name_expressions:
        return ",".join(name_expressions)[:90]
    found = _KERNEL_NAME.findall(source or "")
    return (",".join(found) or "?")[:90]


def first_call_profile(tiny=False):
    from nyhopt.cli._device import prefer_precompiled_headers

    prefer_precompiled_headers()  # as the command line does, before CuPy is imported
    t0 = time.perf_counter()
    import cupy
    from cupy.cuda import compiler

    t_import = time.perf_counter() - t0
    log = []

    def logged(fn, kind):
        @functools.wraps(fn)
        def inner(source, *args, **kwargs):
            s = time.perf_counter()
            try:
                return fn(source, *args, **kwargs)
            finally:
                log.append((kind, time.perf_counter() - s,
                            _kernel_name(source, kwargs.get("name_expressions"))))
        return inner

    compiler.compile_using_nvrtc = logged(compiler.compile_using_nvrtc, "nvrtc")
    compiler._compile_module_with_cache = logged(compiler._compile_module_with_cache, "module")
    handles = {}
    for what, make in (("device and context", lambda: cupy.zeros(1).sum()),
                       ("cuBLAS handle", lambda: cupy.cuda.device.get_cublas_handle()),
                       ("cuSOLVER handle", lambda: cupy.cuda.device.get_cusolver_handle())):
        s = time.perf_counter()
        make()
        cupy.cuda.Device().synchronize()
        handles[what] = time.perf_counter() - s
    from nyhopt.cli import main

    s = time.perf_counter()
    rc = main(["demo", "--device", "gpu", "--epochs", "2" if tiny else "5", "--quiet"])
    demo = time.perf_counter() - s
    nvrtc = [row for row in log if row[0] == "nvrtc"]
    modules = [row for row in log if row[0] == "module"]
    print(f"first call (CUPY_NVRTC_USE_PCH={os.environ.get('CUPY_NVRTC_USE_PCH')}): import cupy {t_import:.2f} s; "
          + "; ".join(f"{k} {v:.2f} s" for k, v in handles.items()))
    print(f"demo rc={rc}: {demo:.2f} s; {len(nvrtc)} NVRTC compilations, {sum(r[1] for r in nvrtc):.2f} s; "
          f"{len(modules)} modules built or loaded, {sum(r[1] for r in modules):.2f} s")
    by_name = defaultdict(lambda: [0, 0.0])
    for _, sec, name in nvrtc:
        by_name[name][0] += 1
        by_name[name][1] += sec
    print(f"{'NVRTC s':>8} {'count':>5}  kernel")
    for name, (count, sec) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:40]:
        print(f"{sec:8.3f} {count:5d}  {name}")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    tiny = "--tiny" in sys.argv
    if mode == "exact":
        exact_profile(tiny)
    elif mode == "first-call":
        first_call_profile(tiny)
    else:
        sys.exit("usage: gpu_profile.py {first-call | exact} [--tiny]")
