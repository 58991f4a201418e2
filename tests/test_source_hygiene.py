"""Every Python source of the project compiles with warnings as errors.

An invalid escape in a docstring (``"\\alpha"`` outside a raw string) is only a
``SyntaxWarning`` at import, but it changes the text: ``\\a`` is a bell character.
"""
import pathlib
import warnings

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = sorted(p for folder in ("nyhopt", "tests", "asv_bench", "examples") for p in (ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_source_compiles_without_warnings(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code = compile(path.read_text(encoding="utf-8"), str(path), "exec")
    assert code.co_filename == str(path)
