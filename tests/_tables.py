"""Small CSV tables written by the command-line tests."""
from __future__ import annotations

import csv


def write_csv(path, header, rows):
    """Write ``header`` and ``rows`` to ``path`` as CSV; return the path as a string."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return str(path)
