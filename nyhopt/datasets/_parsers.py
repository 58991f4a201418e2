"""Parsers of the real datasets' file formats (CSV variants, LIBSVM); used by :mod:`nyhopt.datasets`.

Each parser returns ``(X, y)`` float64 with the original labels.
"""
from __future__ import annotations

import numpy as np

__all__ = ["read_dense_csv", "read_abalone", "read_energy", "read_libsvm"]


def read_dense_csv(path, delimiter=",", skip_header=0):
    data = np.loadtxt(path, delimiter=delimiter, skiprows=skip_header, dtype=np.float64, ndmin=2)
    return data[:, 1:], data[:, 0]


def read_abalone(path):
    rows = []
    sex_codes = {"F": 0, "I": 1, "M": 2}
    with open(path, encoding="ascii") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            fields = line.split(",")
            if len(fields) != 9 or fields[0] not in sex_codes:
                raise ValueError(f"{path}:{lineno}: unexpected abalone row {line!r}")
            onehot = [0.0, 0.0, 0.0]
            onehot[sex_codes[fields[0]]] = 1.0
            rows.append(onehot + [float(v) for v in fields[1:]])
    data = np.asarray(rows, dtype=np.float64)
    return data[:, :-1], data[:, -1]


def read_energy(path):
    rows = []
    with open(path, encoding="utf-8-sig") as fh:
        header = fh.readline().strip().split(";")
        if header[:1] != ["X1"] or "Y1" not in header:
            raise ValueError(f"{path}: unexpected energy header {header!r}")
        n_cols = len(header)
        for line in fh:
            fields = line.strip().split(";")
            if not any(fields):  # trailing ';;;;' rows of the spreadsheet export
                continue
            if len(fields) != n_cols:
                raise ValueError(f"{path}: unexpected energy row {line!r}")
            rows.append([float(v.replace(",", ".")) for v in fields])
    data = np.asarray(rows, dtype=np.float64)
    y_col = header.index("Y1")
    x_cols = [i for i, h in enumerate(header) if h.startswith("X")]
    return data[:, x_cols], data[:, y_col]


def read_libsvm(path, n_features=None):
    labels, rows = [], []
    with open(path, encoding="ascii") as fh:
        for lineno, line in enumerate(fh, 1):
            fields = line.split()
            if not fields:
                continue
            labels.append(float(fields[0]))
            entries = {}
            for item in fields[1:]:
                idx, sep, val = item.partition(":")
                if not sep:
                    raise ValueError(f"{path}:{lineno}: bad LIBSVM entry {item!r}")
                entries[int(idx)] = float(val)
            rows.append(entries)
    d = max((max(r) for r in rows if r), default=0)
    d = max(d, n_features or 0)
    X = np.zeros((len(rows), d), dtype=np.float64)
    for i, entries in enumerate(rows):
        for idx, val in entries.items():
            if idx < 1:
                raise ValueError(f"{path}: LIBSVM feature indices start at 1, got {idx}")
            X[i, idx - 1] = val
    return X, np.asarray(labels, dtype=np.float64)
