"""The columns of a DataFrame given after fit against ``feature_names_in_``: what differs, in full.

scikit-learn's message for columns that differ from those of fit heads the
text (its estimator checks match it); below it come the names unseen at fit,
those now missing, and, when the shared names are in another order, which
columns moved, with the selection that puts them back (docs/pipelines.md,
"pandas in").

Examples
--------
>>> import numpy as np
>>> fitted = np.array(["age", "dose", "weight"], dtype=object)
>>> print(names_differ(fitted, np.array(["dose", "age", "weight"], dtype=object)), end="")
The feature names should match those that were passed during fit.
Feature names must be in the same order as they were in fit.
- 'dose': column 0 here, column 1 at fit
- 'age': column 1 here, column 0 at fit
Select the columns of fit in their order: X[list(model.feature_names_in_)]
"""
from __future__ import annotations

import numpy as np

__all__ = ["names_differ", "check_names"]

_HEAD = "The feature names should match those that were passed during fit.\n"
_MOST = 5  # names listed under each heading


def _listed(lines):
    shown = lines[:_MOST] + (["..."] if len(lines) > _MOST else [])
    return "".join(f"- {line}\n" for line in shown)


def names_differ(fitted, given) -> str:
    """The message for the column names ``given`` that are not the ``fitted`` ones (both object arrays of str).

    Lists the names unseen at fit, those seen at fit and now missing, and,
    when the names both have are in another order, the columns that moved
    (their position here and at fit).
    """
    fitted, given = [str(s) for s in fitted], [str(s) for s in given]
    unseen = sorted(set(given) - set(fitted))
    missing = sorted(set(fitted) - set(given))
    msg = _HEAD
    if unseen:
        msg += "Feature names unseen at fit time:\n" + _listed(unseen)
    if missing:
        msg += "Feature names seen at fit time, yet now missing:\n" + _listed(missing)
    shared = set(fitted) & set(given)
    if [s for s in given if s in shared] != [s for s in fitted if s in shared]:
        at_fit = {s: k for k, s in enumerate(fitted)}
        moved = [f"{s!r}: column {k} here, column {at_fit[s]} at fit" for k, s in enumerate(given)
                 if s in shared and at_fit[s] != k]
        msg += "Feature names must be in the same order as they were in fit.\n" + _listed(moved)
    if not missing:
        msg += "Select the columns of fit in their order: X[list(model.feature_names_in_)]\n"
    return msg


def check_names(est, names, reset: bool) -> None:
    """Record (``reset``) or check the column names ``names`` of an input of the estimator ``est``.

    Names that differ from ``est.feature_names_in_`` raise a ``ValueError``
    with :func:`names_differ`'s message; everything else (recording, the
    warning when only one side has names) is ``est._check_feature_names``.

    Raises
    ------
    ValueError
        Names unseen at fit, missing, or in another order.
    """
    fitted = None if reset else getattr(est, "feature_names_in_", None)
    if fitted is not None and names is not None:
        if len(names) != len(fitted) or not bool(np.all(np.asarray(names) == np.asarray(fitted))):
            raise ValueError(names_differ(fitted, names))
    est._check_feature_names(names, reset)
