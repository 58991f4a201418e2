"""The options of ``stoch-prop`` and their defaults: checked once, at construction.

Constants (the defaults, the stream numbers of the seeded random quantities),
:class:`SolveRecord`, the trace-gap row sample (:func:`trace_rows`,
:func:`row_sample`) and :func:`set_options`; all named again by
:mod:`nyhopt.objectives.stoch_prop`.
"""
from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

from ..inputs._validation import check_real
from ..ops.cached import check_cache_policy
from ._trace import PROBE_KINDS, keyed_generator, sample_rows

__all__ = ["DEFAULT_TOL", "DEFAULT_MIN_ROWS", "DEFAULT_MAXITER", "EXPECTED_ITERATIONS", "STREAM_PROBES",
           "STREAM_ROWS", "STREAM_HUTCHPP", "STREAM_SKETCH", "SolveRecord", "trace_rows", "row_sample",
           "set_options"]

#: Default relative residual tolerance of the Falkon solve (see docs/stochastic.md).
DEFAULT_TOL = 1e-4
#: Rows sampled for T unless ``n_rows`` is given: ``q = min(n, max(m, DEFAULT_MIN_ROWS))``
#: (MATH.md suggested 1000; see docs/stochastic.md for why 5000).
DEFAULT_MIN_ROWS = 5000
#: Default maximal number of CG iterations per step.
DEFAULT_MAXITER = 200
#: CG iterations expected of a step before the first one has run (a cold solve at the default tol).
EXPECTED_ITERATIONS = 20

#: Streams of the objective's seed (:func:`~nyhopt.objectives._trace.keyed_generator`).
STREAM_PROBES, STREAM_ROWS, STREAM_HUTCHPP, STREAM_SKETCH = 0, 1, 2, 3

_NORMALIZATIONS = ("released", "paper")
_TRACE_ESTIMATORS = ("rows", "hutchinson")
_DEFF_ESTIMATORS = ("hutchinson", "hutch++")
_VALUE_FORMS = ("energy", "plain")
_GRADIENT_FORMS = ("whitened", "direct")


class SolveRecord(NamedTuple):
    """What the Falkon solve of the last evaluation did.

    Attributes
    ----------
    iterations : int
        CG iterations (passes over the data beyond the right-hand side).
    residual : float
        Final relative residual (max over the right-hand sides).
    converged : bool
        False when CG stopped at ``maxiter`` above ``tol``.
    warm_started : bool
        Whether the solve started from the previous step's CG variable.
    n_rhs : int
        Number of right-hand sides (probe columns plus target columns).
    passes : int
        Sweeps over the ``n x m`` kernel of the whole evaluation: the
        kernel's evaluation when it is held, the Gram pass or the solve's
        passes, the pass for ``u = Knm a`` (none on the Gram route, whose
        sums come from the Gram matrix) and, with a gradient, the adjoint
        pass (:mod:`nyhopt.ops.operator`); 0 on a Dask cluster.
    """

    iterations: int
    residual: float
    converged: bool
    warm_started: bool
    n_rhs: int
    passes: int = 0


SolveRecord.__module__ = "nyhopt.objectives.stoch_prop"  # its public home (and the path in pickles)


def _count(value, name, low=1):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)


def _policy(value, name):
    """``"auto"``, True or False."""
    if isinstance(value, str) and value == "auto":
        return value
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be 'auto', True or False, got {value!r}")
    return bool(value)


def _choice(value, name, options):
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value


def trace_rows(n, m, n_rows=None):
    """Rows ``q`` of the trace-gap sample: ``n_rows``, or ``max(m, DEFAULT_MIN_ROWS)``, at most ``n``."""
    return min(n, max(m, DEFAULT_MIN_ROWS)) if n_rows is None else min(n, n_rows)


def row_sample(seed, n, q):
    """The sorted trace-gap rows (int64, host) of a stoch-prop seed: ``O(q)`` memory, no permutation."""
    return sample_rows(n, q, keyed_generator(seed, STREAM_ROWS))


def set_options(self, n_probes, probes, trace_estimator, effective_dimension_estimator, sketch_size, n_rows, tol,
                maxiter, warm_start, normalization, value_form, gradient, kernel_cache, gram="auto"):
    """Validate the options of :class:`~nyhopt.objectives.stoch_prop.StochasticProp` and store them on ``self``.

    ``self.n`` must be set (it bounds the Hutch++ sketch).
    """
    self.n_probes = _count(n_probes, "n_probes")
    self.probe_kind = _choice(probes, "probes", PROBE_KINDS)
    self.trace_estimator = _choice(trace_estimator, "trace_estimator", _TRACE_ESTIMATORS)
    self.effective_dimension_estimator = _choice(
        effective_dimension_estimator, "effective_dimension_estimator", _DEFF_ESTIMATORS
    )
    self.normalization = _choice(normalization, "normalization", _NORMALIZATIONS)
    self.value_form = _choice(value_form, "value_form", _VALUE_FORMS)
    self.gradient = _choice(gradient, "gradient", _GRADIENT_FORMS)
    self.n_rows = None if n_rows is None else _count(n_rows, "n_rows")
    self.tol = check_real(tol, "tol", low=0.0)
    self.maxiter = _count(maxiter, "maxiter", 0)
    if isinstance(warm_start, str):
        if warm_start != "extrapolate":
            raise ValueError(f"warm_start must be True, False or 'extrapolate', got {warm_start!r}")
    elif not isinstance(warm_start, (bool, np.bool_)):
        raise TypeError(f"warm_start must be True, False or 'extrapolate', got {warm_start!r}")
    self.warm_start = warm_start if isinstance(warm_start, str) else bool(warm_start)
    self.kernel_cache = check_cache_policy(kernel_cache, "kernel_cache")
    self.gram = _policy(gram, "gram")
    if self.effective_dimension_estimator == "hutch++":
        if sketch_size is None:
            k = max(1, min(self.n_probes // 2, self.n))
        else:
            k = _count(sketch_size, "sketch_size")
        if not 1 <= k < self.n_probes or k > self.n:
            raise ValueError(
                f"hutch++ needs 1 <= sketch_size < n_probes and sketch_size <= n; got sketch_size={k}, "
                f"n_probes={self.n_probes}, n={self.n}"
            )
        self.sketch_size = k
    else:
        self.sketch_size = 0
