"""Hyperparameters of N-KRR in unconstrained coordinates.

The optimizer works on

.. math:: \\theta = (\\log \\lambda,\\; \\log \\ell,\\; Z,\\; \\log a),

so that the penalty :math:`\\lambda`, the lengthscales :math:`\\ell` and the
kernel amplitude :math:`a` stay positive by construction.  The amplitude (the
signal variance of the GP model behind ``sgpr``) is 1 unless set; only the
objectives whose value depends on it use it (``docs/objectives.md``).  A
gradient with respect to natural values maps to these coordinates by
:math:`\\partial/\\partial \\log\\lambda = \\lambda\\,\\partial/\\partial\\lambda`,
:math:`\\partial/\\partial \\log\\ell = \\ell\\,\\partial/\\partial\\ell` and
:math:`\\partial/\\partial \\log a = a\\,\\partial/\\partial a`; this is the only
place where the transform lives.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .inputs._validation import check_lengthscale, check_positive

__all__ = ["Params"]


@dataclass(frozen=True)
class Params:
    """Penalty, lengthscales, centers and kernel amplitude in unconstrained coordinates.

    Attributes
    ----------
    log_penalty : numpy.ndarray, shape ()
        :math:`\\log\\lambda`, float64.
    log_lengthscale : numpy.ndarray, shape (1,) or (d,)
        :math:`\\log\\ell`, float64; shape (1,) means one lengthscale for all features.
        A 2-D value is refused (``ValueError``), as by the kernels.
    centers : array, shape (m, d)
        Nystrom centers :math:`Z`, float64 (NumPy or CuPy).
    log_amplitude : numpy.ndarray, shape (), default 0
        :math:`\\log a`, float64: the kernel amplitude (signal variance)
        :math:`a = 1` unless given.  Objectives whose value does not depend on
        it return a zero gradient for it.

    A gradient is returned as a ``Params`` too: its fields are the partial
    derivatives with respect to the same coordinates.  Iterating over a
    ``Params`` gives the four fields in the order above.

    Examples
    --------
    >>> import numpy as np
    >>> p = Params.from_natural(penalty=1e-3, lengthscale=[1.0, 2.0], centers=np.zeros((5, 2)))
    >>> round(p.penalty, 12), p.lengthscale.tolist(), p.centers.shape, p.amplitude
    (0.001, [1.0, 2.0], (5, 2), 1.0)
    >>> round(p.replace(log_amplitude=np.log(2.0)).amplitude, 12)
    2.0
    """

    log_penalty: object
    log_lengthscale: object
    centers: object
    log_amplitude: object = field(default_factory=lambda: np.zeros(()))

    def __post_init__(self):
        shape = tuple(np.shape(self.log_lengthscale))
        if len(shape) > 1:  # a (1, 1) value would pass for one lengthscale; make_kernel refuses it too
            raise ValueError(f"log_lengthscale must be a scalar or 1-D array (one per feature), got shape {shape}")

    @classmethod
    def from_natural(cls, penalty, lengthscale, centers, amplitude=1.0):
        """Build from the natural values ``penalty > 0``, ``lengthscale > 0``, centers and ``amplitude > 0``."""
        from .backend import get_namespace

        penalty = check_positive(penalty, "penalty")
        amplitude = check_positive(amplitude, "amplitude")
        ell = check_lengthscale(lengthscale)
        xp = get_namespace(centers)
        Z = xp.asarray(centers)
        if Z.dtype.kind not in "biufO":
            raise TypeError(f"centers must hold real numbers, got dtype {Z.dtype}")
        try:
            Z = Z.astype(xp.float64, copy=False)
        except (TypeError, ValueError) as exc:  # an object array of non-numbers
            raise TypeError(f"centers must hold real numbers ({exc})") from None
        if Z.ndim != 2:
            raise ValueError(f"centers must be 2-D (m, d), got shape {tuple(Z.shape)}")
        if ell.size not in (1, Z.shape[1]):
            raise ValueError(f"lengthscale has {ell.size} entries but centers have {Z.shape[1]} features")
        if not bool(xp.all(xp.isfinite(Z))):
            raise ValueError("centers contains NaN or infinity")
        return cls(np.asarray(np.log(penalty)), np.log(ell), Z.copy(), np.asarray(np.log(amplitude)))

    @property
    def penalty(self) -> float:
        """:math:`\\lambda = e^{\\log\\lambda}` as a Python float."""
        return float(np.exp(self.log_penalty))

    @property
    def lengthscale(self) -> np.ndarray:
        """:math:`\\ell = e^{\\log\\ell}`, shape (1,) or (d,)."""
        return np.exp(np.asarray(self.log_lengthscale))

    @property
    def amplitude(self) -> float:
        """Kernel amplitude (signal variance) :math:`a = e^{\\log a}` as a Python float; 1.0 where unused."""
        return float(np.exp(self.log_amplitude))

    @property
    def n_centers(self) -> int:
        return int(self.centers.shape[0])

    def replace(self, **fields) -> "Params":
        """A copy with some fields replaced."""
        values = {"log_penalty": self.log_penalty, "log_lengthscale": self.log_lengthscale,
                  "centers": self.centers, "log_amplitude": self.log_amplitude}
        unknown = set(fields) - set(values)
        if unknown:
            raise ValueError(f"unknown Params fields {sorted(unknown)}")
        values.update(fields)
        return Params(**values)

    def map(self, fn, *others: "Params") -> "Params":
        """Apply ``fn`` field by field (to ``self`` and matching fields of ``others``)."""
        return Params(
            fn(self.log_penalty, *(o.log_penalty for o in others)),
            fn(self.log_lengthscale, *(o.log_lengthscale for o in others)),
            fn(self.centers, *(o.centers for o in others)),
            fn(self.log_amplitude, *(o.log_amplitude for o in others)),
        )

    def __iter__(self):
        yield self.log_penalty
        yield self.log_lengthscale
        yield self.centers
        yield self.log_amplitude
