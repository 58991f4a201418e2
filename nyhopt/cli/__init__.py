"""The ``nyhopt`` command line: ``demo``, ``tune``, ``predict``, ``score`` and ``info``.

Run ``nyhopt --help`` or ``nyhopt <command> --help``.  Errors in the input
(missing file, unknown column, text where a number is needed, an unknown
objective...) are reported in one line on stderr with exit status 2; add
``--debug`` to see the Python traceback instead.

The package holds one module per job: ``_parser`` (the argument parser),
``_demo``, ``_tune``, ``_predict``, ``_score`` and ``_info`` (the commands),
``_scores`` (what ``score`` computes), ``_columns`` (a table's feature
columns), ``_device`` (``--device``), ``_paths`` (output paths checked before
any work), ``_common`` (argument types and messages) and ``_main`` (dispatch
and the one-line errors).
"""
from __future__ import annotations

from ._common import EXIT_USAGE, CLIError
from ._demo import DEMO_INIT, digits_split, run_demo
from ._main import main
from ._parser import build_parser

__all__ = ["main", "build_parser", "run_demo", "digits_split", "DEMO_INIT", "CLIError", "EXIT_USAGE"]
