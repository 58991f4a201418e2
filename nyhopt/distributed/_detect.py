"""Recognize dask arrays without importing dask."""
from __future__ import annotations

from ..backend import is_dask_array

__all__ = ["is_dask_array", "any_dask_array", "refuse_dask_objective"]


def any_dask_array(*arrays) -> bool:
    """True if any of ``arrays`` is a dask array."""
    return any(is_dask_array(a) for a in arrays)


def refuse_dask_objective(name):
    """Raise the error for an exact objective given dask arrays.

    The exact objectives need ``n x m`` work on one machine; the message
    names "stoch-prop", the objective for data on a cluster (it returns
    without raising for "stoch-prop").

    Raises
    ------
    ValueError
        For every objective but "stoch-prop".
    """
    if str(name).strip().lower().replace("_", "-") == "stoch-prop":
        return
    raise ValueError(
        f"objective {name!r} is exact (O(n m^2) work on one machine) and does not take dask arrays; "
        "the objective for data on a cluster is 'stoch-prop'"
    )
