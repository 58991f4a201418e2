"""The documentation: the site builds in strict mode, every public name is documented."""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import pathlib
import re
import subprocess
import sys

import pytest


ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# modules whose __all__ is public API besides the top-level package
PUBLIC_MODULES = ["nyhopt", "nyhopt.datasets"]


def _public_objects():
    for modname in PUBLIC_MODULES:
        mod = importlib.import_module(modname)
        for name in getattr(mod, "__all__", []):
            yield f"{modname}.{name}", getattr(mod, name)


def _nav_pages(text):
    return re.findall(r":\s*([\w\-/]+\.md)\s*$", text, flags=re.MULTILINE)


def test_nav_pages_exist():
    text = (ROOT / "mkdocs.yml").read_text()
    pages = _nav_pages(text)
    assert "index.md" in pages and "api.md" in pages
    missing = [p for p in pages if not (DOCS / p).is_file()]
    assert not missing, f"pages listed in mkdocs.yml nav but missing in docs/: {missing}"


@pytest.mark.parametrize("qualname,obj", [pytest.param(q, o, id=q) for q, o in _public_objects()])
def test_public_name_has_docstring_with_example(qualname, obj):
    doc = inspect.getdoc(obj)
    assert doc, f"{qualname} has no docstring"
    if inspect.isclass(obj) or inspect.isfunction(obj):
        assert "Examples" in doc and ">>>" in doc, f"{qualname}: docstring has no Examples section"


def test_rst_markup_hook():
    spec = importlib.util.spec_from_file_location("rst_markup", DOCS / "_hooks" / "rst_markup.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    assert hook.rewrite("see :func:<code>f</code> and :class:<code>C</code>") == "see <code>f</code> and <code>C</code>"
    assert hook.rewrite(":math:<code>a &gt; b</code>") == '<span class="arithmatex">\\(a &gt; b\\)</span>'
    block = hook.rewrite("<p>.. math::\n    x &amp;= 1 \\\\\n    y &amp;= 2</p>")
    assert block.startswith('<div class="arithmatex">\\[\\begin{aligned}') and block.endswith("\\]</div>")
    assert hook.rewrite("<p>plain</p>") == "<p>plain</p>"


def test_every_public_name_is_in_the_api_reference():
    api = (DOCS / "api.md").read_text()
    for qualname, obj in _public_objects():
        short = qualname.rsplit(".", 1)[1]
        assert re.search(rf"\b{re.escape(short)}\b", api), f"{qualname} is missing from docs/api.md"


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None,
    reason="mkdocs and mkdocstrings[python] are not installed (pip install '.[docs]')",
)
def test_site_builds_in_strict_mode(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert "WARNING" not in output, output[-4000:]
    html = (tmp_path / "site" / "api.html").read_text()
    # mkdocstrings rendered the docstrings (not just the page skeleton)
    assert "load_dataset" in html and "Examples" in html
    for png in sorted((DOCS / "results").glob("*.png")):
        assert (tmp_path / "site" / "results" / png.name).is_file()


def _quick_start_commands():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```\n(.*?)```", section, flags=re.S)]


def test_readme_quick_start_is_two_commands_and_ci_runs_them_literally():
    commands = _quick_start_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    install_demo, install_test = commands
    assert install_demo.startswith("pip install ") and install_demo.endswith("nyhopt demo")
    assert install_test.startswith("pip install ") and "pytest" in install_test
    assert "-e" not in install_test.split()  # a plain install, as users get it
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert install_test in ci, "CI must run the README's test command literally"
    assert "python3 -m venv" in "\n".join(ci)  # in a fresh environment


def test_gpu_extras_name_one_cuda_each():
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [r.split(">")[0] for r in extras["cuda12"]] == ["cupy-cuda12x"]
    assert [r.split(">")[0] for r in extras["cuda13"]] == ["cupy-cuda13x"]
    assert extras["gpu"] == extras["cuda12"]
    assert {"cupy-cuda12x", "nvidia-cuda-nvrtc-cu12"} <= {r.split(">")[0] for r in extras["test"]}
    readme = (ROOT / "README.md").read_text()
    assert '".[cuda12]"' in readme and '".[cuda13]"' in readme
