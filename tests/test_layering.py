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
