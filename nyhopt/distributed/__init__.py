"""nyhopt on a Dask cluster: row-sharded data, driver-side solvers.

Dask is imported only by the submodules of this package, never by
``import nyhopt`` nor by ``import nyhopt.distributed``; the public entry points
(:class:`nyhopt.NystromKRR`, :func:`nyhopt.solvers.falkon_solve`) import them
when they are given a ``dask.array.Array``.

* :mod:`nyhopt.distributed.reducer` -- the :class:`Reducer` interface (a sum
  of float64 ``m x k`` partials) and its Dask tree-reduction implementation;
* :mod:`nyhopt.distributed.sharded` -- :class:`ShardedData` (``X``, ``y``
  persisted once on the workers, by row blocks) and the block products
  ``kmv``, ``kmtv``, ``normal_matvec`` over it; a pass interrupted by the
  loss of a worker is run again, with its lost blocks rebuilt;
* :mod:`nyhopt.distributed._handles` -- operands of a pass that outlive a
  lost worker (broadcast objects, per-block results kept between passes);
* :mod:`nyhopt.distributed.falkon` -- Falkon with its CG loop, preconditioner
  and every ``m x m`` operation on the driver;
* :mod:`nyhopt.distributed.estimator` -- ``NystromKRR.fit``/``predict`` on dask arrays.

See ``docs/scaling-out.md``.
"""
from __future__ import annotations

import importlib

from ._detect import any_dask_array, is_dask_array

__all__ = [
    "is_dask_array",
    "any_dask_array",
    "Reducer",
    "LocalReducer",
    "DaskTreeReducer",
    "ShardedData",
    "falkon_solve_sharded",
]

_LAZY = {
    "Reducer": "reducer",
    "LocalReducer": "reducer",
    "DaskTreeReducer": "reducer",
    "ShardedData": "sharded",
    "falkon_solve_sharded": "falkon",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
