"""The ``n x m`` arrays of an exact objective, kept from one evaluation to the next (CPU).

Each evaluation of an exact objective writes one or two ``n x m`` arrays
(the kernel matrix :math:`K^\\top`, :math:`A = L^{-1}K^\\top`; ``loocv``
also :math:`V = C^{-1}A`, ``holdout`` the validation block).  A fresh
array costs more than its arithmetic suggests: the operating system maps
and zeroes every page on first touch (about 3 ms for 32 MB on one core of
the workplace's machine, ``docs/performance-ops.md``).  A :class:`Workspace`
owned by the objective hands the same arrays to the next evaluation.

Safety: an array is handed out again only when nothing but the workspace
references it (:func:`sys.getrefcount`; a view keeps its base alive, so a
slice, a transpose or an unfinished evaluation in another thread counts),
otherwise a new array is made.  The arrays never reach the user: values
are floats and gradients are computed into arrays of their own.  Arrays
larger than the memory budget (:func:`nyhopt.get_memory_budget`) are not
kept.  A copied or pickled workspace is empty; objectives sharing one (a
shallow copy) take only its free arrays.
"""
from __future__ import annotations

import sys
import threading

import numpy as np

from ..backend._config import get_memory_budget
from ..backend import is_cupy_namespace

__all__ = ["Workspace", "workspace_of"]

# references to a free array inside Workspace.empty: the dict, the local name, getrefcount's argument
_FREE_REFS = 3


class Workspace:
    """Named NumPy arrays reused across evaluations when nothing else references them.

    Examples
    --------
    >>> import numpy as np
    >>> ws = Workspace()
    >>> a = ws.empty("A", (3, 4), np.float64)
    >>> ws.empty("A", (3, 4), np.float64) is a        # still referenced by ``a``: a new array
    False
    >>> b = ws.empty("A", (3, 4), np.float64); ident = id(b); del a, b
    >>> id(ws.empty("A", (3, 4), np.float64)) == ident  # free again: the same array
    True
    """

    def __init__(self):
        self._arrays = {}
        self._lock = threading.Lock()

    def __reduce__(self):  # pickling and copying give an empty workspace (a lock does not pickle)
        return (Workspace, ())

    def empty(self, name, shape, dtype):
        """An uninitialized C-contiguous array ``(shape, dtype)``: the kept ``name`` when free."""
        shape, dtype = tuple(int(s) for s in shape), np.dtype(dtype)
        with self._lock:
            a = self._arrays.get(name)
            if a is not None and a.shape == shape and a.dtype == dtype and sys.getrefcount(a) <= _FREE_REFS:
                return a
            a = np.empty(shape, dtype=dtype)
            if a.nbytes <= get_memory_budget():
                self._arrays[name] = a
            else:
                self._arrays.pop(name, None)
            return a

    def clear(self):
        """Forget the kept arrays (their memory is freed once no evaluation holds them)."""
        with self._lock:
            self._arrays.clear()

    @property
    def nbytes(self) -> int:
        """Bytes held by the kept arrays."""
        return sum(a.nbytes for a in self._arrays.values())


def workspace_of(obj, xp):
    """The :class:`Workspace` of the objective ``obj`` (made on first use); None on the GPU."""
    if is_cupy_namespace(xp):
        return None
    ws = obj.__dict__.get("_workspace")
    if ws is None:
        ws = obj.__dict__["_workspace"] = Workspace()
    return ws
