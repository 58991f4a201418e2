"""The scikit-learn estimator protocol, shared by every nyhopt estimator.

scikit-learn is not a run-time dependency: :class:`ParamsMixin` provides
``get_params``/``set_params`` (with nested ``kernel__<name>`` parameters) and
a compact ``repr`` from the signature of ``__init__``, which is all that
``sklearn.base.clone`` and the model-selection tools need;
:class:`EstimatorMixin` adds the estimator tags and the ``feature_names_in_``
bookkeeping of DataFrame inputs, with scikit-learn's messages.
"""
from __future__ import annotations

import inspect
import numpy as np
from ..errors import warn_user

__all__ = ["ParamsMixin", "EstimatorMixin", "feature_names", "check_feature_names_arg"]


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


def feature_names(X):
    """Column names of a DataFrame-like ``X`` as an object array, or None.

    Names are recorded only when every column name is a string (as
    scikit-learn does); arrays and frames with non-string names give None.

    Raises
    ------
    TypeError
        If string and non-string column names are mixed.

    Examples
    --------
    >>> import numpy as np
    >>> feature_names(np.ones((2, 2))) is None
    True
    """
    if isinstance(X, np.ndarray) or getattr(X, "columns", None) is None or len(getattr(X, "shape", ())) != 2:
        return None
    names = np.asarray(list(X.columns), dtype=object)
    if names.size == 0:
        return None
    kinds = sorted({type(v).__qualname__ for v in names})
    if kinds == ["str"]:
        return names
    if "str" in kinds:
        raise TypeError(
            "X: feature names are only supported if all column names are strings, got column name types "
            f"{kinds}; convert them with X.columns = X.columns.astype(str), or use no names"
        )
    return None


def check_feature_names_arg(given, X):
    """Feature names from an explicit ``feature_names=`` argument or from a DataFrame ``X``, as an object array.

    Parameters
    ----------
    given : sequence of str or None
        The user's ``feature_names=`` (for arrays without names, such as dask arrays).
    X : array-like
        The input: its own names (:func:`feature_names`) and its number of columns.

    Raises
    ------
    TypeError, ValueError
        ``given`` is not a sequence of strings, has the wrong length or
        differs from the DataFrame's own names.

    Examples
    --------
    >>> check_feature_names_arg(["a", "b"], np.zeros((3, 2))).tolist()
    ['a', 'b']
    >>> check_feature_names_arg(None, np.zeros((3, 2))) is None
    True
    """
    found = feature_names(X)
    shape = getattr(X, "shape", ())
    n_features = shape[1] if len(shape) == 2 else None
    if given is None:
        return found
    if isinstance(given, str) or not all(isinstance(v, str) for v in given):
        raise TypeError(f"feature_names must be a sequence of strings, got {given!r}")
    names = np.asarray(list(given), dtype=object)
    if n_features is not None and names.size != n_features:
        raise ValueError(f"feature_names has {names.size} names but X has {n_features} columns")
    if found is not None and not np.array_equal(found, names):
        raise ValueError(f"feature_names {names.tolist()} differ from the column names of X {found.tolist()}")
    return names


def check_validation_names(names, X_val):
    """The columns of a validation DataFrame must be those of ``X`` (``names``), in the same order.

    Validation rows are used by position: a frame with its columns in another
    order would be scored on the wrong features.  Nothing is checked when
    either side has no names.

    Raises
    ------
    ValueError
        The names differ or are reordered (the message lists how).

    Examples
    --------
    >>> check_validation_names(np.array(["a", "b"], dtype=object), np.zeros((3, 2))) is None
    True
    """
    found = feature_names(X_val)
    if names is None or found is None or (len(found) == len(names) and bool(np.all(found == names))):
        return None
    raise ValueError(_names_differ(
        names, found, "validation X: its column names must be those of X, in the same order (they are used by "
        "position).\n", "Names not in X:\n", "Names of X that are missing:\n",
        f"Same names in another order: X has {list(names)}, validation X has {list(found)}\n"))


def _names_differ(expected, found, head, unseen_head, missing_head, reordered):
    """The message for ``found`` names that are not ``expected``: those unseen, those missing, or the order."""
    unseen = sorted(set(found) - set(expected))
    missing = sorted(set(expected) - set(found))
    msg = head
    if unseen:
        msg += unseen_head + _listed(unseen)
    if missing:
        msg += missing_head + _listed(missing)
    if not unseen and not missing:
        msg += reordered
    return msg


def _listed(names, most=5):
    lines = [f"- {n}" for n in names[:most]] + (["- ..."] if len(names) > most else [])
    return "".join(line + "\n" for line in lines)


class EstimatorMixin(ParamsMixin):
    """:class:`ParamsMixin` plus scikit-learn's tags and feature-name checks.

    Subclasses set ``_estimator_type`` to ``"regressor"`` or ``"classifier"``.

    Examples
    --------
    >>> import numpy as np
    >>> class Model(EstimatorMixin):
    ...     _estimator_type = "regressor"
    ...     def __init__(self, penalty=1.0):
    ...         self.penalty = penalty
    >>> m = Model()
    >>> m._check_feature_names(None, reset=True)
    >>> hasattr(m, "feature_names_in_")
    False
    """

    _estimator_type = None

    # scikit-learn is imported only when it asks for the tags
    def __sklearn_tags__(self):
        from sklearn.utils import ClassifierTags, InputTags, RegressorTags, Tags, TargetTags

        regressor = self._estimator_type == "regressor"
        return Tags(
            estimator_type=self._estimator_type,
            target_tags=TargetTags(required=True, multi_output=regressor, single_output=True),
            regressor_tags=RegressorTags() if regressor else None,
            classifier_tags=None if regressor else ClassifierTags(multi_class=True, multi_label=False),
            input_tags=InputTags(two_d_array=True, sparse=False, allow_nan=False),
        )

    def _more_tags(self):  # scikit-learn < 1.6
        return {"requires_y": True, "multioutput": self._estimator_type == "regressor"}

    def _check_feature_names(self, names, reset):
        """Record (``reset``) or check the feature names ``names`` of an input (see :func:`feature_names`).

        Checking warns when only one of fit and this input had names, and
        raises ``ValueError`` when the names differ or are reordered.
        """
        if reset:
            if names is not None:
                self.feature_names_in_ = names
            elif hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
            return
        fitted = getattr(self, "feature_names_in_", None)
        if fitted is None and names is None:
            return
        cls = type(self).__name__
        if fitted is None:
            warn_user(f"X has feature names, but {cls} was fitted without feature names", UserWarning)
            return
        if names is None:
            warn_user(f"X does not have valid feature names, but {cls} was fitted with feature names",
                      UserWarning)
            return
        if len(names) == len(fitted) and bool(np.all(names == fitted)):
            return
        raise ValueError(_names_differ(
            fitted, names, "The feature names should match those that were passed during fit.\n",
            "Feature names unseen at fit time:\n", "Feature names seen at fit time, yet now missing:\n",
            "Feature names must be in the same order as they were in fit.\n"))
