"""Helpers shared by the experiment scripts: arguments, output files, timing.

Every script writes into one output folder (default ``docs/results``):
a markdown table (``<stem>.md``), the same table as CSV (``<stem>.csv``) and a
figure (``<stem>.png``). Nothing here depends on the experiment.
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "docs" / "results"
#: The datasets beside the repository that holds these scripts; found from the scripts' own
#: location, because an installed nyhopt lives elsewhere (site-packages).
REPO_DATA_DIR = ROOT.parent / "shared" / "data"


def default_data_dir():
    """``../shared/data`` beside this repository, or ``None`` when ``$NYHOPT_DATA`` is set or it is missing.

    ``None`` lets :func:`nyhopt.datasets.find_data_dir` decide (it reads ``$NYHOPT_DATA`` and
    explains what it tried).
    """
    if os.environ.get("NYHOPT_DATA") or not REPO_DATA_DIR.is_dir():
        return None
    return REPO_DATA_DIR


def base_parser(description: str) -> argparse.ArgumentParser:
    """Argument parser with the options every experiment script has."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true",
                        help="a small, fast version of the experiment (for CI)")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output folder (default {RESULTS_DIR.relative_to(ROOT)}; "
                             "--quick writes under <out>/quick)")
    parser.add_argument("--data-dir", type=Path, default=default_data_dir(),
                        help="folder with one sub-folder per dataset (default: $NYHOPT_DATA, "
                             "else ../shared/data beside this repository)")
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
    return parser


def output_dir(args) -> Path:
    """The folder to write into, created if needed."""
    out = args.out if args.out is not None else RESULTS_DIR
    if args.quick and args.out is None:
        out = out / "quick"
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def csv_list(kind=str):
    """argparse type: comma-separated list of ``kind``."""
    def parse(text):
        return [kind(v) for v in text.split(",") if v.strip()]
    return parse


def log(args, *msg):
    """Print a progress line unless ``--quiet``."""
    if not getattr(args, "quiet", False):
        print(*msg, flush=True)


def machine_info() -> str:
    """One line describing the machine and the library versions."""
    import numpy as np

    import nyhopt

    cpus = os.cpu_count()
    return (f"{platform.machine()} {platform.processor() or ''}".strip()
            + f", {cpus} cores, Python {platform.python_version()}, NumPy {np.__version__},"
            + f" nyhopt {nyhopt.__version__}")


def _fmt(value, digits):
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if value != 0 and (abs(value) < 10 ** -(digits - 1) or abs(value) >= 1e5):
            return f"{value:.{digits - 1}e}"
        return f"{value:.{digits}g}" if abs(value) >= 1 else f"{value:.{digits}f}".rstrip("0")
    return str(value)


def write_csv(rows, columns, path: Path) -> Path:
    """Write a list of dicts as CSV with the given column order."""
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c, "") for c in columns})
    return path


def append_csv(row, columns, path: Path) -> Path:
    """Append one dict as a row to a CSV written by :func:`write_csv`."""
    with open(path, "a", newline="") as fh:
        csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore").writerow(
            {c: row.get(c, "") for c in columns})
    return path


def read_csv(path: Path):
    """Read a CSV written by :func:`write_csv` (values as strings)."""
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def markdown_table(rows, columns, digits=3, headers=None) -> str:
    """A markdown table of a list of dicts (or lists, in column order)."""
    headers = headers or columns
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        cells = row if isinstance(row, (list, tuple)) else [row.get(c, "") for c in columns]
        lines.append("| " + " | ".join(_fmt(v, digits) for v in cells) + " |")
    return "\n".join(lines) + "\n"


def write_markdown(text: str, path: Path, title: str, notes: str = "", script: str = "") -> Path:
    """Write a markdown file: table, notes and the machine it ran on.

    The title goes into an HTML comment, so that the file can be included in a
    documentation page (``--8<--``) under that page's own heading.
    """
    stamp = time.strftime("%Y-%m-%d")
    body = f"<!-- {title} -->\n\n{text}\n"
    if notes:
        body += f"\n{notes.strip()}\n"
    body += f"\n_Generated by `{script or Path(sys.argv[0]).name}` on {stamp}; {machine_info()}._\n"
    path.write_text(body)
    return path


def write_gpytorch_problem(path: Path, X, y, X_test, y_test, Z0, ell0, task) -> Path:
    """One problem in the ``.npz`` layout that ``gpytorch_sgpr_baseline.py`` reads."""
    import numpy as np

    np.savez(path, X_train=X, y_train=y, X_test=X_test, y_test=y_test, Z0=Z0, ell0=np.float64(ell0), task=task)
    return path


def save_figure(fig, path: Path) -> Path:
    """Save a matplotlib figure as PNG and close it."""
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def pyplot():
    """matplotlib.pyplot with a non-interactive backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def mean_std(values):
    """Mean and (population) standard deviation of a list of floats."""
    vals = [v for v in values if not math.isnan(v)]
    if not vals:
        return float("nan"), float("nan")
    mean = sum(vals) / len(vals)
    var = sum((v - mean) ** 2 for v in vals) / len(vals)
    return mean, math.sqrt(var)


class Timer:
    """Context manager measuring wall time in seconds (``.seconds``)."""

    def __enter__(self):
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = self.elapsed()
        return False

    def elapsed(self) -> float:
        """Seconds since the block was entered."""
        return time.perf_counter() - self._t0


def transform_label(choice) -> str:
    """A ``TuneResult.transform`` as ``"<chosen> of <candidates>"`` (empty when no choice was made)."""
    return "" if choice is None else f"{choice.chosen} of " + "/".join(choice.candidates)


def write_results(rows, columns, out: Path, stem: str, title: str, script: str) -> Path:
    """``<stem>.csv`` and ``<stem>.md`` (a 4-digit table) in ``out``; returns the markdown path."""
    write_csv(rows, columns, out / f"{stem}.csv")
    return write_markdown(markdown_table(rows, columns, digits=4), out / f"{stem}.md", title, script=script)
