"""Run the command line: parse, dispatch, and report input errors in one line (exit status 2)."""
from __future__ import annotations

import csv
import os
import sys
import warnings

import numpy as np

from ._common import EXIT_USAGE, CLIError
from ._parser import build_parser


#: Exit status when stdout is closed by its reader, as a shell reports a tool killed by SIGPIPE.
EXIT_BROKEN_PIPE = 141


def _silence_stdout():
    """Point stdout at the null device, so that flushing it at exit raises nothing more."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # an in-memory stream (tests): nothing to redirect
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def main(argv=None) -> int:
    """Run the command line; returns the exit status (0 on success, 2 on bad input).

    Output piped into a reader that stops early (``| head``) ends the
    command quietly with status 141, as other command-line tools do.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name (default ``sys.argv[1:]``).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    from ..io import DataError

    def one_line(message, category, filename, lineno, file=None, line=None):
        print(f"nyhopt {args.command}: warning: {message}", file=sys.stderr, flush=True)

    try:
        with warnings.catch_warnings():
            warnings.showwarning = one_line  # a warning in one line, not with a file name and source line
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("nyhopt: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout stopped early (``nyhopt predict ... | head``)
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except (OSError, csv.Error, DataError, CLIError, ValueError, TypeError, ImportError,
            np.linalg.LinAlgError) as exc:
        if getattr(args, "debug", False):
            raise
        msg = str(exc) or type(exc).__name__
        if isinstance(exc, OSError) and exc.filename:
            msg = f"{exc.strerror.lower() if exc.strerror else 'cannot open'}: {exc.filename}"
        print(f"nyhopt {args.command}: error: {msg}", file=sys.stderr)
        return EXIT_USAGE
