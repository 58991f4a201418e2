"""One door for data: an array checked at a public entry point is not checked again below it.

A public entry point (``tune``, the estimators' ``fit``/``predict``/``score``,
an objective's evaluation) checks ``X`` once (:func:`nyhopt.inputs._validation.check_matrix`:
shape, dtype, NaN and infinity, an ``O(n d)`` pass and, on a GPU, a wait for
the device) and then :func:`trust` s the array it got back.  For the rest of
that call, :func:`~nyhopt.inputs._validation.check_matrix` returns a trusted
array as it is (when the dtype and width asked for match), so the solvers,
kernels and block operations below, which are public functions with checks
of their own, never check the same array again.

Trust is kept per call: :func:`entry_point` runs the entry in a copy of the
caller's :mod:`contextvars` context, so what it trusts is forgotten when it
returns (and never crosses to another thread of the user's; nyhopt's own
worker threads run with the submitting thread's context).  Arrays are
trusted by identity: a new array (a slice, a conversion) is checked again.

Examples
--------
>>> import numpy as np
>>> X = np.ones((3, 2))
>>> @entry_point
... def door(X):
...     trust(X)
...     return trusted(X)
>>> door(X), trusted(X)
(True, False)
"""
from __future__ import annotations

import contextlib
import contextvars
import functools

__all__ = ["entry_point", "trust", "trusted", "trusting", "remember", "recall"]

_trusted = contextvars.ContextVar("nyhopt_trusted_inputs", default=())
_converted = contextvars.ContextVar("nyhopt_converted_inputs", default=())
_in_call = contextvars.ContextVar("nyhopt_in_entry_point", default=False)


def trust(*arrays) -> None:
    """Trust ``arrays`` (checked by the caller) until the current :func:`entry_point` call returns.

    Outside an entry point it does nothing: trust never outlives the call
    that checked (an array the user changes in place between two calls is
    checked again by the second).
    """
    if _in_call.get():
        _trusted.set(_trusted.get() + tuple(a for a in arrays if a is not None))


def trusted(a) -> bool:
    """Whether ``a`` itself (by identity) was checked at the door of the current call."""
    return any(a is t for t in _trusted.get())


def remember(given, checked) -> None:
    """Keep, for the rest of the call, the array ``checked`` that the door made of what the user ``given``.

    A DataFrame or list converted once is not converted and checked again by
    a nested public call on the same object (``predict(X, return_std=True)``
    calls ``predict(X)``).  Outside an entry point it does nothing.
    """
    if _in_call.get():
        _converted.set(_converted.get() + ((given, checked),))
        trust(checked)


def recall(given):
    """The checked array remembered for ``given`` (by identity) in the current call, or None."""
    for g, checked in _converted.get():
        if g is given:
            return checked
    return None


@contextlib.contextmanager
def trusting(*arrays):
    """Trust ``arrays`` inside the block only (an object's own checked data, e.g. an objective's ``X``).

    Inside, :func:`trust` records too (what the block derives from them, a row sample).
    """
    tokens = (_trusted.set(_trusted.get() + tuple(a for a in arrays if a is not None)), _in_call.set(True))
    try:
        yield
    finally:
        _in_call.reset(tokens[1])
        _trusted.reset(tokens[0])


def entry_point(fn):
    """Run ``fn`` in a copy of the caller's context: what it :func:`trust` s ends with the call.

    A public entry point called inside another (``tune`` fits a
    ``NystromKRR``; ``predict(X, return_std=True)`` calls ``predict(X)``)
    shares the outer call's door: what either checked is trusted by both.
    """

    def run(*args, **kwargs):
        _in_call.set(True)
        return fn(*args, **kwargs)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if _in_call.get():
            return fn(*args, **kwargs)
        return contextvars.copy_context().run(run, *args, **kwargs)

    return call
