"""Output paths checked before any work (``--out``, ``--report``, ``--json``)."""
from __future__ import annotations

import os

from ._common import CLIError


def check_output(path, option):
    """Fail now, before any work, when ``path`` cannot be written; create nothing.

    The folder must exist, be a folder and be writable; ``path`` must not be a folder and,
    when it exists, must be writable.
    """
    if not path:
        raise CLIError(f"{option}: empty path")
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise CLIError(f"{option} {path}: is a folder, not a file")
    if not os.path.exists(folder):
        raise CLIError(f"{option} {path}: the folder {folder} does not exist")
    if not os.path.isdir(folder):
        raise CLIError(f"{option} {path}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise CLIError(f"{option} {path}: permission denied")


def npz_path(path):
    """The file :func:`nyhopt.io.save_model` writes for ``path``."""
    return path if path.endswith(".npz") else path + ".npz"
