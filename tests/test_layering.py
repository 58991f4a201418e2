"""Imports run one way: the kernel classes may use nyhopt.ops, never the reverse."""
from __future__ import annotations

import ast
import pathlib
import pickle

import pytest

import nyhopt
import nyhopt.kernels
import nyhopt.ops

ROOT = pathlib.Path(nyhopt.__file__).resolve().parent.parent
FORBIDDEN = "nyhopt.kernels"


def _imported_modules(path, root=ROOT):
    """Absolute names of every module an ``import`` statement in ``path`` names."""
    package = ".".join(path.relative_to(root).parent.parts)
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module
            yield stem
            # ``from .. import kernels`` names the package in the alias
            yield from (f"{stem}.{alias.name}" for alias in node.names)


def _is_forbidden(name):
    return name == FORBIDDEN or name.startswith(FORBIDDEN + ".")


def test_import_resolver_sees_relative_and_absolute_forms(tmp_path):
    pkg = tmp_path / "nyhopt" / "ops"
    pkg.mkdir(parents=True)
    for source in [
        "from ..kernels import KernelGrad",
        "from .. import kernels",
        "from ..kernels.matern import S_CAP",
        "import nyhopt.kernels",
        "from nyhopt.kernels import Kernel",
    ]:
        f = pkg / "probe.py"
        f.write_text(source + "\n")
        assert any(_is_forbidden(n) for n in _imported_modules(f, tmp_path)), source
    (pkg / "probe.py").write_text("from . import _reference\nfrom .._config import block_rows\n")
    assert not any(_is_forbidden(n) for n in _imported_modules(pkg / "probe.py", tmp_path))


OPS_FILES = sorted((ROOT / "nyhopt" / "ops").rglob("*.py"))


@pytest.mark.parametrize("path", OPS_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_ops_does_not_import_the_kernel_classes(path):
    bad = sorted({n for n in _imported_modules(path) if _is_forbidden(n)})
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}: nyhopt.ops must not depend on nyhopt.kernels"


def test_kernel_grad_keeps_its_public_names():
    assert nyhopt.KernelGrad is nyhopt.kernels.KernelGrad is nyhopt.ops.KernelGrad
    g = nyhopt.KernelGrad(None, None, None)
    assert pickle.loads(pickle.dumps(g)) == g


# -- no import circles among nyhopt's modules ---------------------------------------------------------
PACKAGE = ROOT / "nyhopt"
ALL_FILES = sorted(PACKAGE.rglob("*.py"))


def _module_graph(files=ALL_FILES, root=ROOT):
    """Edges module -> the nyhopt modules its imports name, top-level and inside functions alike.

    ``from a.b import c`` points at the module ``a.b.c`` when there is one, else at ``a.b``.  Every
    import counts, including the ones inside functions that load dask only when dask arrays are given
    (``nyhopt.placement``, ``nyhopt.estimator``): dask is an optional dependency and is imported late,
    but the late import must still run downward, so it is no exception here.
    """
    names = {".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p for p in files}
    graph = {}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        out = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                # ``from pkg import mod`` imports the module; ``from pkg import name`` the package
                targets = [f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in names else stem
                           for alias in node.names]
            else:
                continue
            for target in targets:
                while target and target not in names:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    out.add(target)
        graph[name] = out
    return graph


def _circles(graph):
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_circle_finder_sees_a_function_level_circle(tmp_path):
    pkg = tmp_path / "nyhopt"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import a\n")
    (pkg / "sub" / "c.py").write_text("from . import b\n")
    graph = _module_graph(sorted(pkg.rglob("*.py")), tmp_path)
    assert _circles(graph) == [["nyhopt.a", "nyhopt.sub.b"]]


def test_no_import_circles():
    circles = _circles(_module_graph())
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)


# -- one module decides where the data live -------------------------------------------------------------
DETECTORS = {"nyhopt.distributed._detect"}
DETECTOR_NAMES = {"is_dask_array", "any_dask_array", "refuse_dask_objective"}


def _asks_array_kind(path, root=ROOT):
    """Whether ``path`` imports the dask-array detection (the module, or its names from ``nyhopt.distributed``)."""
    package = ".".join(path.relative_to(root).parent.parts)
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            stem = node.module or ""
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            names = {alias.name for alias in node.names}
            if stem in DETECTORS or any(f"{stem}.{n}" in DETECTORS for n in names):
                return True
            if stem == "nyhopt.distributed" and names & DETECTOR_NAMES:
                return True
            if stem == "nyhopt.backend" and "is_dask_array" in names:  # the array-module helpers' own test
                return True
        elif isinstance(node, ast.Import) and any(alias.name in DETECTORS for alias in node.names):
            return True
    return False


def test_detector_finder_sees_the_import_forms(tmp_path):
    pkg = tmp_path / "nyhopt" / "optim"
    pkg.mkdir(parents=True)
    for source, asks in [("from ..distributed._detect import is_dask_array", True),
                         ("from ..distributed import _detect", True),
                         ("from ..distributed import any_dask_array", True),
                         ("import nyhopt.distributed._detect", True),
                         ("from ..placement import on_cluster", False),
                         ("from ..distributed.tune import setup_dask", False)]:
        (pkg / "probe.py").write_text(source + "\n")
        assert _asks_array_kind(pkg / "probe.py", tmp_path) is asks, source


def test_only_placement_asks_what_kind_of_array_it_holds():
    """Outside ``nyhopt.distributed`` (and the array-module helpers of ``nyhopt.backend``), only
    ``nyhopt.placement`` looks at the arrays' kind: every other module asks it (docs/dev/architecture.md,
    "Adding a placement")."""
    allowed = {PACKAGE / "placement.py"}
    bad = sorted(str(p.relative_to(ROOT)) for p in ALL_FILES
                 if p not in allowed and (PACKAGE / "distributed") not in p.parents
                 and (PACKAGE / "backend") not in p.parents and _asks_array_kind(p))
    assert not bad, f"{bad} import the dask-array detection: ask nyhopt.placement instead"


def test_backend_detection_counts_as_asking_the_kind(tmp_path):
    pkg = tmp_path / "nyhopt" / "metrics"
    pkg.mkdir(parents=True)
    (pkg / "probe.py").write_text("from ..backend import as_native, is_dask_array\n")
    assert _asks_array_kind(pkg / "probe.py", tmp_path)


# -- the layout: a small ground floor, subpackages by concern -------------------------------------------
def test_the_package_root_keeps_its_public_face_only():
    """At most 8 modules at the root of ``nyhopt/`` (docs/dev/architecture.md, "The floors")."""
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(modules) <= 8, f"{len(modules)} modules at the package root: {modules}"


@pytest.mark.parametrize("package", sorted(p.parent for p in PACKAGE.rglob("__init__.py")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_subpackage_says_what_it_owns_and_stays_small(package):
    init = package / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text()))
    assert doc and len(doc.split()) >= 5, f"{init.relative_to(ROOT)} needs a docstring saying what it owns"
    modules = list(package.glob("*.py"))
    assert len(modules) <= 20, f"{package.relative_to(ROOT)} holds {len(modules)} modules: split it by concern"


# -- no circles among the benchmark and GPU scripts either -----------------------------------------------
BENCH = ROOT / "asv_bench"


def _script_graph(folder=BENCH):
    """Edges script -> the other scripts of ``folder`` (and of its ``benchmarks`` package) that it imports."""
    files = sorted(folder.glob("*.py")) + sorted((folder / "benchmarks").glob("*.py"))
    names = {p.stem if p.parent == folder else f"benchmarks.{p.stem}".removesuffix(".__init__"): p for p in files}
    graph = {}
    for name, path in names.items():
        out = set()
        package = "benchmarks" if name.startswith("benchmarks") else ""
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                stem = node.module or ""
                if node.level:
                    stem = ".".join(filter(None, [package, stem]))
                targets = [f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in names else stem for alias in node.names]
            else:
                continue
            out.update(t for t in targets if t in names and t != name)
        graph[name] = out
    return graph


def test_no_import_circles_among_the_benchmark_scripts():
    circles = _circles(_script_graph())
    assert not circles, "import circles in asv_bench/: " + "; ".join(" <-> ".join(c) for c in circles)


def test_script_circle_finder_sees_a_circle(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "a.py").write_text("def f():\n    import b\n")
    (tmp_path / "b.py").write_text("from a import f\n")
    assert _circles(_script_graph(tmp_path)) == [["a", "b"]]
