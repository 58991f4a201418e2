"""``cupy.random`` of the host stand-in (NumPy generators; CuPy's streams of numbers differ)."""
from __future__ import annotations

import numpy as _np

from . import ndarray

_GLOBAL = _np.random.RandomState(0)


def _as_dtype(values, dtype):
    return ndarray._of(_np.asarray(values, dtype=dtype))


class RandomState:
    def __init__(self, seed=None):
        self._rs = _np.random.RandomState(seed)

    def seed(self, seed=None):
        self._rs.seed(seed)

    def standard_normal(self, size=None, dtype=float):
        return _as_dtype(self._rs.standard_normal(size), dtype)

    def normal(self, loc=0.0, scale=1.0, size=None, dtype=float):
        return _as_dtype(self._rs.normal(loc, scale, size), dtype)

    def randn(self, *size, dtype=float):
        return _as_dtype(self._rs.standard_normal(size), dtype)

    def rand(self, *size, dtype=float):
        return _as_dtype(self._rs.random_sample(size), dtype)

    def random_sample(self, size=None, dtype=float):
        return _as_dtype(self._rs.random_sample(size), dtype)

    random = random_sample

    def uniform(self, low=0.0, high=1.0, size=None, dtype=float):
        return _as_dtype(self._rs.uniform(low, high, size), dtype)

    def randint(self, low, high=None, size=None, dtype=int):
        return _as_dtype(self._rs.randint(low, high, size), dtype)

    def choice(self, a, size=None, replace=True, p=None):
        return _as_dtype(self._rs.choice(a, size, replace, p), None)

    def permutation(self, x):
        return _as_dtype(self._rs.permutation(x), None)

    def rademacher(self, size=None, dtype=int):
        return _as_dtype(2 * self._rs.randint(0, 2, size) - 1, dtype)


_STATE = RandomState(0)


def seed(seed=None):
    _STATE.seed(seed)


def get_random_state():
    return _STATE


for _name in ("standard_normal", "normal", "randn", "rand", "random_sample", "random", "uniform", "randint",
              "choice", "permutation"):
    globals()[_name] = getattr(_STATE, _name)
