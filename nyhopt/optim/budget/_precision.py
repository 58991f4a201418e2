r"""The grown stages of a budgeted run tune in float32 on the CPU.

An exact epoch (``prop``, ``sgpr``, ``gcv``, ...) at :math:`n` rows and
:math:`m` centers is four :math:`n m^2` BLAS products (the triangular
solve :math:`A = L^{-1}K^\top`, the Gram product :math:`S = AA^\top` and the
product :math:`A^\top W` of the gradient, twice the flops) and
:math:`O(m^3)` work in float64 (``docs/performance-ops.md``).  The
:math:`n \times m` products dominate at thousands of centers, and float32
BLAS runs them at twice the float64 rate: at :math:`n = 36\,000`,
:math:`m = 3000`, :math:`d = 8` one ``sgpr`` value and gradient took
14.4 s on float64 data and 9.2 s on float32 data (2-core AMD EPYC, DGEMM
130 and SGEMM 248 GFLOP/s; ``docs/tuning.md``, "Precision of the grown
stages").

So a budgeted run on float64 data (``dtype`` not given) on the CPU tunes its
grown stages on a float32 copy of the tuning rows: the objective then takes
its float32 route (the ``n x m`` arrays in float32, every ``m x m`` matrix
and every reduction in float64, the jitter of float32 data,
:func:`nyhopt.solvers.jitter`).  What chooses among the stages stays in
float64: each stage's validation fit, its held-out error and the final
model are computed on the float64 rows, so a stage whose float32 tuning
lost accuracy is measured as such.  Stage 0 (the default run) keeps the
data's dtype.  A grown stage whose factorization fails in float32 (nearly
noise-free data can tune :math:`n\lambda` below float32's rounding of
:math:`S`) is run again from its best point in float64, and the run stays
in float64 (:meth:`EpochRows.fall_back`).

Not on the GPU: an H100's float64 and float32 rates of the products are
alike, and no card was at hand to measure it (``docs/tuning.md``).
``dtype="float64"`` keeps every stage in float64; ``dtype="float32"``
tunes and fits everything in float32, as before.
"""
from __future__ import annotations

import numpy as np

from ...backend import get_namespace, is_cupy_namespace

__all__ = ["GROWN_FLOAT32", "grown_in_float32", "EpochRows"]

#: Whether the grown stages of a budgeted run on float64 CPU data tune on a float32 copy of the rows.
GROWN_FLOAT32 = True


def grown_in_float32(dtype, X) -> bool:
    """Whether a budgeted run's grown stages tune in float32 (module notes).

    Parameters
    ----------
    dtype : numpy.dtype or None
        ``tune``'s checked ``dtype`` argument (None: not given).
    X : array
        The tuning rows as the run holds them (after ``dtype`` was applied).

    Examples
    --------
    >>> import numpy as np
    >>> grown_in_float32(None, np.zeros((3, 2))), grown_in_float32(np.dtype("float64"), np.zeros((3, 2)))
    (True, False)
    >>> grown_in_float32(None, np.zeros((3, 2), dtype=np.float32))
    False
    """
    if not GROWN_FLOAT32 or dtype is not None or X.dtype != np.float64:
        return False
    return not is_cupy_namespace(get_namespace(X))


class EpochRows:
    """The rows the grown stages' epochs run on: a float32 copy of the tuning rows, made once per row set.

    Parameters
    ----------
    enabled : bool
        From :func:`grown_in_float32`; when False :meth:`__call__` returns its argument.
    """

    def __init__(self, enabled):
        self.enabled = bool(enabled)
        self.fell_back = False
        self._source = self._copy = None

    def __call__(self, X):
        """``X`` as the grown stages tune on it (float32 when enabled; the last copy is reused for the same ``X``)."""
        if not self.enabled:
            return X
        if self._source is not X:
            self._source, self._copy = X, np.ascontiguousarray(X, dtype=np.float32)
        return self._copy

    def holds(self, obj) -> bool:
        """Whether the objective ``obj`` tunes on rows of the grown stages' dtype (float64 again after :meth:`fall_back`)."""
        if self.enabled:
            return obj.X.dtype == np.float32
        return not (self.fell_back and obj.X.dtype == np.float32)

    def fall_back(self, obj) -> bool:
        """After a float32 stage of ``obj`` failed: tune in the data's dtype from now on; True when that is a change.

        A factorization fails in float32 where :math:`n\lambda` is below the
        rounding of :math:`S` (nearly noise-free data tunes the penalty that
        low); float64 may still factor it.
        """
        if not self.enabled or obj.X.dtype != np.float32:
            return False
        self.enabled, self.fell_back = False, True
        return True
