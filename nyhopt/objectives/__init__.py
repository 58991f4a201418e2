"""Model-selection objectives for Nystrom KRR, with hand-written gradients.

Every objective is minimized over :math:`(\\log\\lambda, \\log\\ell, Z)` and
divided by :math:`np` so that its value is a per-sample number.

=============  ==============================================================
name           objective
=============  ==============================================================
``holdout``    validation error of a fit on a fixed random training split
``loocv``      exact leave-one-out error
``gcv``        generalized cross-validation
``creg``       complexity-regularized training error (:math:`C_p`-like)
``sgpr``       negative log marginal likelihood of Titsias' sparse GP
``prop``       the paper's L_Prop (exact, :math:`O(nm^2)`)
``stoch-prop`` L_Prop estimated stochastically (Falkon solves, no n x m)
=============  ==============================================================

The math and the gradient of each objective are in its module docstring
and in ``docs/objectives.md``.
"""
from __future__ import annotations

import importlib
import inspect

from ..placement import as_placed, check_objective

from ._base import Cotangents, EvalContext, Evaluation, KernelCotangent, Objective, params_gradient
from .creg import CReg
from .gcv import GCV
from .holdout import Holdout
from .loocv import LOOCV
from .prop import Prop
from .sgpr import SGPR

__all__ = [
    "make_objective",
    "available_objectives",
    "Objective",
    "Cotangents",
    "KernelCotangent",
    "Evaluation",
    "EvalContext",
    "params_gradient",
    "Holdout",
    "LOOCV",
    "GCV",
    "CReg",
    "SGPR",
    "Prop",
]

#: name -> (module, class); modules are imported on first use.
_REGISTRY = {
    "holdout": ("nyhopt.objectives.holdout", "Holdout"),
    "loocv": ("nyhopt.objectives.loocv", "LOOCV"),
    "gcv": ("nyhopt.objectives.gcv", "GCV"),
    "creg": ("nyhopt.objectives.creg", "CReg"),
    "sgpr": ("nyhopt.objectives.sgpr", "SGPR"),
    "prop": ("nyhopt.objectives.prop", "Prop"),
    "stoch-prop": ("nyhopt.objectives.stoch_prop", "StochasticProp"),
}

_FIXED = {"self", "X", "y", "kernel"}


def available_objectives() -> list:
    """Names accepted by :func:`make_objective`."""
    return list(_REGISTRY)


def _lookup(name):
    if not isinstance(name, str):
        raise TypeError(f"objective name must be a string, got {type(name).__name__}")
    key = name.strip().lower().replace("_", "-")
    if key not in _REGISTRY:
        raise ValueError(f"unknown objective {name!r}; expected one of {available_objectives()}")
    module, cls = _REGISTRY[key]
    return getattr(importlib.import_module(module), cls)


def make_objective(name, X, y, kernel="gaussian", **options) -> Objective:
    """Build an objective by name.

    Parameters
    ----------
    name : str
        One of "holdout", "loocv", "gcv", "creg", "sgpr", "prop",
        "stoch-prop" (case-insensitive; "_" may replace "-").
    X : array of shape (n, d)
        Training inputs (NumPy or CuPy, float32 or float64; a DataFrame or
        any DLPack array is converted without a copy where possible).
    y : array of shape (n,) or (n, p)
        Targets.
    kernel : str or Kernel, default "gaussian"
        Kernel family (its lengthscale is replaced by the params').
    **options
        Options of the objective: every objective takes ``noise_variance``
        (default 1.0), ``random_state`` and ``mean`` ("zero" or
        "constant": an unpenalized constant per output, profiled in closed
        form at every evaluation, see ``docs/objectives.md``; default
        "constant" for ``sgpr``, "zero" for the others); ``holdout`` takes
        ``val_fraction`` (default 0.6); ``prop`` takes ``normalization``
        ("released" or "paper"); ``sgpr`` takes ``amplitude`` ("profile" or
        "learn"); ``stoch-prop`` takes the options of
        :class:`~nyhopt.objectives.stoch_prop.StochasticProp`.

    Returns
    -------
    Objective

    Raises
    ------
    ValueError
        Unknown objective name or option, or an invalid option value.

    Examples
    --------
    >>> import numpy as np
    >>> import nyhopt as nh
    >>> X = np.random.default_rng(0).normal(size=(40, 3)); y = X[:, 0]
    >>> obj = make_objective("gcv", X, y, kernel="matern52")
    >>> obj.name, obj.n, obj.p
    ('gcv', 40, 1)
    >>> make_objective("holdout", X, y, folds=3)
    Traceback (most recent call last):
    ...
    ValueError: unknown option(s) ['folds'] for objective 'holdout'; valid options: ['mean', 'noise_variance', 'random_state', 'val_fraction']
    """
    cls = _lookup(name)
    check_objective(cls.name, X, y)  # the exact objectives need the rows on one machine
    sig = inspect.signature(cls.__init__)
    if not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        valid = sorted(set(sig.parameters) - _FIXED)
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise ValueError(f"unknown option(s) {unknown} for objective {cls.name!r}; valid options: {valid}")
    X, y = as_placed(X, y)
    return cls(X, y, kernel=kernel, **options)

