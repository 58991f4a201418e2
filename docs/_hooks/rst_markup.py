"""MkDocs hook: render the reStructuredText bits of numpydoc docstrings.

The docstrings are written for numpydoc/Sphinx: cross-reference roles such as
``:func:`name```, inline math ``:math:`x```, and ``.. math::`` blocks.
mkdocstrings renders the backticked part as ``<code>`` and leaves the role
name in front of it. This hook, run on every page's HTML, drops the role
names and turns math into MathJax input (``\\( \\)`` and ``\\[ \\]`` inside
``arithmatex`` elements, as ``pymdownx.arithmatex`` with ``generic: true``
produces for the markdown pages).
"""
from __future__ import annotations

import re

_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|obj|data|exc|const|ref|term):(<code>)")
_INLINE_MATH = re.compile(r":math:<code>(.*?)</code>", re.DOTALL)
_BLOCK_MATH = re.compile(r"<p>\.\. math::\s*(.*?)</p>", re.DOTALL)


def _inline(match):
    return f'<span class="arithmatex">\\({match.group(1)}\\)</span>'


def _block(match):
    body = match.group(1).strip()
    # an aligned block (several lines with &) needs an aligned environment
    if "&amp;" in body or "\\\\" in body:
        body = "\\begin{aligned}" + body + "\\end{aligned}"
    return f'<div class="arithmatex">\\[{body}\\]</div>'


def rewrite(text: str) -> str:
    """The HTML of a page with RST roles and math converted."""
    text = _BLOCK_MATH.sub(_block, text)
    text = _INLINE_MATH.sub(_inline, text)
    text = _ROLE.sub(r"\1", text)
    return text


def on_page_content(html_text, page, config, files):  # noqa: ARG001 - MkDocs hook signature
    return rewrite(html_text)

