"""The scikit-learn parameter protocol, shared by every nyhopt estimator.

scikit-learn is not a run-time dependency: this mixin provides
``get_params``/``set_params`` (with nested ``kernel__<name>`` parameters) and
a compact ``repr`` from the signature of ``__init__``, which is all that
``sklearn.base.clone`` and the model-selection tools need.
"""
from __future__ import annotations

import inspect

__all__ = ["ParamsMixin"]


class ParamsMixin:
    """``get_params``/``set_params``/``repr`` from the constructor signature.

    Examples
    --------
    >>> class Model(ParamsMixin):
    ...     def __init__(self, penalty=1.0, centers=10):
    ...         self.penalty, self.centers = penalty, centers
    >>> Model(penalty=2.0).set_params(centers=5).get_params()
    {'centers': 5, 'penalty': 2.0}
    >>> Model(penalty=2.0)
    Model(penalty=2.0)
    """

    @classmethod
    def _get_param_names(cls):
        sig = inspect.signature(cls.__init__)
        return sorted(p.name for p in sig.parameters.values() if p.name != "self")

    def get_params(self, deep=True):
        """Constructor parameters (and, with ``deep``, a nested object's as ``<name>__<param>``).

        Parameters
        ----------
        deep : bool, default True

        Returns
        -------
        dict
        """
        out = {}
        for name in self._get_param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{name}__{k}", v) for k, v in value.get_params().items())
            out[name] = value
        return out

    def set_params(self, **params):
        """Set constructor parameters; ``kernel__lengthscale=...`` reaches into the kernel.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            For a name that is not a constructor parameter.
        """
        valid = self._get_param_names()
        nested = {}
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; valid: {valid}")
            if sub:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
        for name, sub_params in nested.items():
            target = getattr(self, name)
            if not hasattr(target, "set_params"):
                raise ValueError(f"parameter {name!r} is {target!r}, which has no parameters to set")
            target.set_params(**sub_params)
        return self

    def __repr__(self):
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        parts = []
        for name in self._get_param_names():
            value = getattr(self, name)
            if getattr(value, "ndim", 0) > 0:  # an array: show its shape only
                parts.append(f"{name}=<array of shape {tuple(value.shape)}>")
                continue
            default = defaults.get(name)
            try:
                same = type(value) is type(default) and bool(value == default)
            except Exception:
                same = False
            if not same:
                parts.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(parts)})"
