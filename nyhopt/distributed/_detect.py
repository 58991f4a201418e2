"""Recognize dask arrays without importing dask."""
from __future__ import annotations

__all__ = ["is_dask_array", "any_dask_array", "refuse_dask_objective", "dask_objective_class"]


def is_dask_array(a) -> bool:
    """True if ``a`` is a ``dask.array.Array`` (checked by type, dask is never imported).

    Examples
    --------
    >>> import numpy as np
    >>> is_dask_array(np.ones(3))
    False
    """
    cls = type(a)
    return cls.__name__ == "Array" and cls.__module__.split(".")[0] == "dask"


def any_dask_array(*arrays) -> bool:
    """True if any of ``arrays`` is a dask array."""
    return any(is_dask_array(a) for a in arrays)


def refuse_dask_objective(name):
    """Raise the error for an objective given dask arrays (no objective runs on them yet).

    Raises
    ------
    ValueError
        For the exact objectives, which need ``n x m`` work on one machine; the
        message names "stoch-prop", the one meant for a cluster.
    NotImplementedError
        For "stoch-prop", whose distributed version is not built yet.
    """
    key = str(name).strip().lower().replace("_", "-")
    if key == "stoch-prop":
        raise NotImplementedError(
            "tuning with 'stoch-prop' on dask arrays is not built yet (issue #12); "
            "make_objective('stoch-prop', X_dask, y_dask) is, and so is NystromKRR(solver='falkon').fit on them"
        )
    _refuse_exact(name)


def dask_objective_class(name):
    """The objective class for dask arrays: ``DaskStochasticProp`` for "stoch-prop".

    Raises
    ------
    ValueError
        For the exact objectives (the message names "stoch-prop").
    """
    if str(name).strip().lower().replace("_", "-") == "stoch-prop":
        from .stoch_prop import DaskStochasticProp

        return DaskStochasticProp
    _refuse_exact(name)


def _refuse_exact(name):
    raise ValueError(
        f"objective {name!r} is exact (O(n m^2) work on one machine) and does not take dask arrays; "
        "the objective for data on a cluster is 'stoch-prop'"
    )
