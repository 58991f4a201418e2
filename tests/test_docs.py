"""The documentation: the site builds in strict mode, every public name is documented."""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import pathlib
import re
import subprocess
import sys

import numpy as np
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


def test_ci_installs_the_docs_extra_and_builds_the_site():
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install -q ".[docs]"' in ci
    after = ci.split('pip install -q ".[docs]"', 1)[1]
    assert "tests/test_docs.py -k strict" in after


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


# ----------------------------------------------------------------------------- the code blocks run
#
# Every ```python block of README.md and docs/*.md runs, page by page in one namespace (a page's
# blocks build on each other), in a temporary folder.  Names a page leaves to the reader's data
# (X, y, X_test, ...) come from _reader_data: small generated data, so that the blocks run in
# seconds (a number of centers above the rows uses every row, with a warning).  A block runs
# unchanged except for being skipped when
#   * an HTML comment "<!-- skip: <reason> -->" stands right before it (a GPU, a cluster, files
#     the reader has), or
#   * it loads a dataset (load_dataset("name")) that is not available locally (NYHOPT_DATA or
#     ../shared/data): downloading is not done in tests, or
#   * it imports an optional package that is not installed.

_FENCE = re.compile(r"(?:<!--\s*skip:\s*(?P<skip>.*?)\s*-->\s*\n)?```python\n(?P<code>.*?)```", re.S)
_PAGES = [ROOT / "README.md"] + sorted(DOCS.glob("*.md"))


def _blocks():
    for page in _PAGES:
        text = page.read_text()
        for index, m in enumerate(_FENCE.finditer(text)):
            line = text[: m.start("code")].count("\n") + 1
            yield page, index, line, m.group("code"), m.group("skip")


_BLOCKS = list(_blocks())


def _reader_data():
    """The names the pages use for the reader's own data, small."""
    import numpy as np

    import nyhopt as nh

    rng = np.random.default_rng(0)
    n, d = 60, 3

    def regression(rows):
        X = rng.uniform(-1, 1, size=(rows, d))
        return X, np.sin(3 * X[:, 0]) + X[:, 1] + 0.05 * rng.normal(size=rows)

    X, y = regression(n)
    X_test, y_test = regression(30)
    X_val, y_val = regression(20)
    kernel = nh.GaussianKernel(1.0)
    Z = X[:10].copy()
    Y = y.reshape(-1, 1)
    est = nh.HyperoptKRR(centers=10, epochs=2).fit(X, y)
    est.feature_names_in_ = np.array(["x1", "x2", "x3"], dtype=object)
    nh.save_model("model.npz", est)  # the file `nyhopt tune` would have written
    X_new = X_test[:5]
    if importlib.util.find_spec("pandas") is not None:
        import pandas as pd

        X_new = pd.DataFrame(X_new, columns=["x1", "x2", "x3"])
    params = nh.Params.from_natural(penalty=1e-3, lengthscale=np.ones(d), centers=Z)
    return dict(__name__="__main__", np=np, nh=nh, X=X, y=y, X_test=X_test, y_test=y_test, X_val=X_val, y_val=y_val,
                X_new=X_new, labels=np.where(X[:, 0] > 0, "yes", "no"), d=d, n=n, Z=Z, Y=Y,
                kernel=kernel, penalty=1e-3, penalty2=2e-3, KtY=Y[:10].copy(), params=params,
                obj=nh.make_objective("prop", X, y))


def _skip_reason(code, marked):
    if marked:
        return marked
    for name in re.findall(r"load_dataset\(\s*[\"'](\w+)[\"']", code):
        from nyhopt.datasets import _local_data_dir

        root = _local_data_dir()
        if root is None or not (root / name).is_dir():
            return f"needs the dataset {name!r} (downloaded on first use; set NYHOPT_DATA for a local copy)"
    for module in re.findall(r"^\s*(?:import|from)\s+(\w+)", code, flags=re.M):
        if importlib.util.find_spec(module) is None:
            return f"needs {module}, which is not installed"
    return None


_STATE = {}  # page -> [namespace, index of the next block to run, folder]

#: Adam steps of every tuning run in the blocks (the pages ask for up to 200): the blocks show calls.
DOCS_EPOCHS = 3


@contextlib.contextmanager
def _settings_restored():
    """The process-wide settings a block may change (budgets, CPU implementations) are put back."""
    import nyhopt as nh
    from nyhopt import ops

    memory, cache, impl = nh.get_memory_budget(), nh.get_cache_budget(), dict(ops.CPU_IMPL)
    try:
        yield
    finally:
        nh.set_memory_budget(None)
        nh.set_cache_budget(None)
        if nh.get_memory_budget() != memory:
            nh.set_memory_budget(memory)
        if nh.get_cache_budget() != cache:
            nh.set_cache_budget(cache)
        for op, name in impl.items():
            if ops.CPU_IMPL.get(op) != name:
                ops.set_cpu_impl(op, name)


def _few_epochs(monkeypatch):
    """``tune`` (and so ``HyperoptKRR.fit``) with at most DOCS_EPOCHS steps while the blocks run."""
    import nyhopt
    import nyhopt.optim

    real = nyhopt.optim.tune

    def tune(*args, epochs=200, **kwargs):
        return real(*args, epochs=min(epochs, DOCS_EPOCHS), **kwargs)

    monkeypatch.setattr(nyhopt.optim, "tune", tune)
    monkeypatch.setattr(nyhopt, "tune", tune)


def _run(page, index, code, line):
    exec(compile(code, f"{page.relative_to(ROOT)}:{line}", "exec"), _STATE[page][0])


@pytest.mark.parametrize("page,index,line,code,marked",
                         [pytest.param(*b, id=f"{b[0].relative_to(ROOT)}:{b[2]}") for b in _BLOCKS])
def test_code_block_runs(page, index, line, code, marked, tmp_path_factory, monkeypatch):
    import warnings

    reason = _skip_reason(code, marked)
    if reason:
        pytest.skip(reason)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    _few_epochs(monkeypatch)
    if page not in _STATE:
        folder = tmp_path_factory.mktemp(page.stem)
        monkeypatch.chdir(folder)
        _STATE[page] = [_reader_data(), 0, folder]
    state = _STATE[page]
    monkeypatch.chdir(state[2])
    with warnings.catch_warnings(), _settings_restored():
        warnings.simplefilter("ignore")  # small data: more centers than rows, early stops
        # the page's earlier blocks, when this one runs alone (pytest -k)
        for p, i, ln, c, m in _BLOCKS:
            if p == page and state[1] <= i < index and not _skip_reason(c, m):
                _run(p, i, c, ln)
        state[1] = index + 1
        namespace = state[0]
        before = {k: id(v) for k, v in namespace.items()}
        _run(page, index, code, line)
    # the numbers a block binds are finite: a NaN shown to a reader is a defect of the page or the library
    bound = {k: v for k, v in namespace.items() if before.get(k) != id(v)}
    for name, value in bound.items():
        if isinstance(value, (float, np.floating)) or (isinstance(value, np.ndarray) and value.dtype.kind == "f"):
            assert np.all(np.isfinite(value)), f"{page.name}:{line}: {name} = {value!r} is not finite"


def test_skip_markers_are_read():
    text = "<!-- skip: needs a GPU -->\n```python\nimport cupy\n```\n\n```python\nx = 1\n```\n"
    found = [(m.group("skip"), m.group("code")) for m in _FENCE.finditer(text)]
    assert found == [("needs a GPU", "import cupy\n"), (None, "x = 1\n")]
