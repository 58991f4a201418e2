"""``stoch-prop`` on data persisted on a cluster: the objective's setup.

The rows stay on the workers (a :class:`~nyhopt.distributed.sharded.ShardedData`
in ``obj.data``); the probes (and the column of ones of ``mean="constant"``)
are drawn there, block by block, and persisted with the rows, so that the
right-hand sides ``W`` of every pass are named by
:data:`nyhopt.distributed.sharded.TARGETS`.  Dask is imported only here and
only when this runs.
"""
from __future__ import annotations

import numpy as np

from ..inputs._validation import check_positive, reject_bool
from ..kernels import make_kernel
from ._base import check_mean
from ._stoch_options import STREAM_PROBES
from ._trace import TraceProbes, derive_seed as _seed

__all__ = ["init_on_cluster"]


def init_on_cluster(obj, y, kernel, n_probes, probes, trace_estimator, effective_dimension_estimator,
                    sketch_size, n_rows, tol, maxiter, warm_start, normalization, value_form, gradient,
                    kernel_cache, gram, mean, noise_variance, random_state):
    """Set up ``obj`` (a ``StochasticProp`` whose ``obj.data`` holds the rows on a cluster): options, probes, ``W``."""
    mean = check_mean(mean, obj.default_mean)
    for name, value, ok in (("effective_dimension_estimator", effective_dimension_estimator, "hutchinson"),
                            ("trace_estimator", trace_estimator, "rows")):
        if value != ok:
            raise ValueError(f"{name}={value!r} is not available on dask arrays (it needs n-sized work on "
                             f"the driver); use {name}={ok!r}")
    if kernel_cache is not False and not (isinstance(kernel_cache, str) and kernel_cache == "auto"):
        raise ValueError(f"kernel_cache={kernel_cache!r} is not available on dask arrays (the passes "
                         "stream on the workers); use kernel_cache='auto' or False")
    data = obj.data
    if data.p == 0:
        raise ValueError("y is None; stoch-prop needs targets")
    from ..distributed._blocks import block_with_ones, block_with_probes  # optional: only with data on a cluster
    from ..distributed.sharded import TARGETS

    obj.n, obj.p, obj._y_was_1d = data.n, data.p, getattr(y, "ndim", 2) == 1
    obj.xp = np
    obj.X = np.empty((0, data.d), dtype=data.dtype)  # the rows are on the workers
    obj.kernel = make_kernel(kernel)
    obj.noise_variance = check_positive(noise_variance, "noise_variance")
    obj.random_state = reject_bool(random_state, "random_state")
    obj.mean, obj.last_intercept = mean, None
    obj._set_options(n_probes, probes, trace_estimator, effective_dimension_estimator, sketch_size,
                     n_rows, tol, maxiter, warm_start, normalization, value_form, gradient, False, gram)
    if obj.mean == "constant" and obj.value_form != "energy":
        raise ValueError("mean='constant' needs value_form='energy' (the constant is profiled on the "
                         "energy forms)")
    obj.seed = _seed(random_state)
    t = obj.n_probes
    obj.data = data.derive(block_with_probes, obj.seed, t, obj.probe_kind, STREAM_PROBES,
                           per_block=[(s,) for s in data.row_starts])
    data.release()
    if obj._n_ones:
        with_probes, obj.data = obj.data, obj.data.derive(block_with_ones)
        with_probes.release()
    obj.probes = TraceProbes(None, np.full(t, 1.0 / t), "hutchinson", 0)
    obj._W = TARGETS  # [R | Y] ([R | Y | 1] with the constant), persisted with the rows
    obj._w_sums = {}  # not used here: the Gram pass sums the targets
    obj._G = None
    obj._beta = None
    obj._rows_cache = None
    obj.last_solve = None
    obj.last_terms = None
