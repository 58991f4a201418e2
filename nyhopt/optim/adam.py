r"""Adam, written as two pure functions on :class:`~nyhopt.params.Params`.

The update is Algorithm 1 of Kingma & Ba, *Adam: A Method for Stochastic
Optimization* (ICLR 2015).  With gradient :math:`g_t` at step :math:`t = 1, 2, \dots`:

.. math::
    m_t &= \beta_1 m_{t-1} + (1 - \beta_1)\, g_t, \\
    v_t &= \beta_2 v_{t-1} + (1 - \beta_2)\, g_t^2, \\
    \hat m_t &= m_t / (1 - \beta_1^t), \qquad \hat v_t = v_t / (1 - \beta_2^t), \\
    \theta_t &= \theta_{t-1} - \eta\, \hat m_t / (\sqrt{\hat v_t} + \epsilon),

elementwise, with :math:`m_0 = v_0 = 0`.  This is also the form of the common
deep-learning libraries (``eps`` added *after* the square root, no weight decay),
so a run here follows the same path as the paper's reference implementation.

Nothing is stored in an object: :func:`init` builds the state, :func:`update`
returns new parameters and a new state and never modifies its inputs.  The
state (and the parameters) stay on the device of the centers: NumPy or CuPy.
"""
from __future__ import annotations

import math
import numbers
from typing import NamedTuple


from ..backend import get_namespace
from ..params import Params

__all__ = ["AdamState", "init", "update"]

_FIELDS = ("log_penalty", "log_lengthscale", "centers", "log_amplitude")


class AdamState(NamedTuple):
    """State of Adam after ``step`` updates.

    Attributes
    ----------
    step : int
        Number of updates done so far (:math:`t`); 0 after :func:`init`.
    m : Params
        First-moment estimate :math:`m_t` (float64, same shapes and device as the parameters).
    v : Params
        Second-moment estimate :math:`v_t`.
    """

    step: int
    m: Params
    v: Params


def _zeros_like(a):
    xp = get_namespace(a)
    return xp.zeros(xp.asarray(a).shape, dtype=xp.float64)


def init(params: Params) -> AdamState:
    """Adam state for ``params``: step 0 and zero moments.

    Parameters
    ----------
    params : Params
        The parameters to optimize (only shapes and devices are used).

    Returns
    -------
    AdamState

    Raises
    ------
    TypeError
        If ``params`` is not a :class:`~nyhopt.params.Params`.

    Examples
    --------
    >>> import numpy as np
    >>> from nyhopt.params import Params
    >>> from nyhopt.optim import adam
    >>> p = Params.from_natural(1e-3, [1.0, 2.0], np.zeros((3, 2)))
    >>> state = adam.init(p)
    >>> state.step, state.m.centers.shape, float(state.v.log_penalty)
    (0, (3, 2), 0.0)
    """
    if not isinstance(params, Params):
        raise TypeError(f"params must be a nyhopt Params, got {type(params).__name__}")
    zeros = params.map(_zeros_like)
    return AdamState(0, zeros, params.map(_zeros_like))


def _real(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    return float(value)


def _check_hyper(lr, b1, b2, eps):
    """Validate Adam's constants; return them as floats."""
    lr, b1, b2, eps = (_real(v, n) for v, n in ((lr, "lr"), (b1, "b1"), (b2, "b2"), (eps, "eps")))
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    for name, b in (("b1", b1), ("b2", b2)):
        if not 0.0 <= b < 1.0:
            raise ValueError(f"{name} must be in [0, 1), got {b!r}")
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    return lr, b1, b2, eps


def _normalize_mask(mask):
    """Return a tuple of one mask entry per field (None means "update everything")."""
    if mask is None:
        return (None,) * len(_FIELDS)
    if isinstance(mask, Params):
        return tuple(mask)
    if isinstance(mask, dict):
        unknown = set(mask) - set(_FIELDS)
        if unknown:
            raise ValueError(f"mask has unknown fields {sorted(unknown)}; expected some of {list(_FIELDS)}")
        return tuple(mask.get(f, None) for f in _FIELDS)
    raise TypeError("mask must be None, a Params of booleans, or a dict {field: bool or boolean array}")


def _as_field(a, xp):
    """Field value as a float64 array of ``xp`` (0-d arrays stay arrays)."""
    return xp.asarray(a, dtype=xp.float64)


def update(grads: Params, state: AdamState, params: Params, lr=0.05, b1=0.9, b2=0.999,
           eps=1e-8, mask=None):
    r"""One Adam step.

    Parameters
    ----------
    grads : Params
        Gradient of the objective at ``params`` (same shapes and device).
    state : AdamState
        State returned by :func:`init` or by the previous call.
    params : Params
        Current parameters.
    lr : float, default 0.05
        Learning rate :math:`\eta > 0` (the paper's value).
    b1, b2 : float, default 0.9, 0.999
        Decay rates of the moment estimates, in [0, 1).
    eps : float, default 1e-8
        :math:`\epsilon \ge 0` added to :math:`\sqrt{\hat v_t}`.
    mask : None, Params or dict, optional
        Which entries to update.  ``None`` updates everything.  A ``Params`` or a
        dict ``{"log_penalty": ..., "log_lengthscale": ..., "centers": ...,
        "log_amplitude": ...}``
        whose values are booleans or boolean arrays broadcastable to the
        field's shape (``True`` = update; missing dict keys are ``True``).
        Masked-out entries keep their value and their moments unchanged, as if
        they were not part of the optimization; the step counter is shared.

    Returns
    -------
    params : Params
        Updated parameters (new arrays).
    state : AdamState
        Updated state (new arrays), ``step`` increased by one.

    Raises
    ------
    TypeError, ValueError
        Bad hyperparameters, mask, or shapes that do not match.

    Notes
    -----
    With :math:`t` = ``state.step + 1``:

    .. math::
        m_t = \beta_1 m_{t-1} + (1-\beta_1) g, \quad
        v_t = \beta_2 v_{t-1} + (1-\beta_2) g^2, \quad
        \theta \leftarrow \theta - \eta \frac{m_t / (1-\beta_1^t)}{\sqrt{v_t / (1-\beta_2^t)} + \epsilon}.

    At the first step the move of every coordinate with a nonzero gradient is
    exactly :math:`\eta\,\operatorname{sign}(g)` (up to :math:`\epsilon`).

    Examples
    --------
    >>> import numpy as np
    >>> from nyhopt.params import Params
    >>> from nyhopt.optim import adam
    >>> p = Params(np.asarray(0.0), np.zeros(1), np.zeros((1, 1)))
    >>> g = Params(np.asarray(2.0), np.asarray([-0.5]), np.zeros((1, 1)))
    >>> p1, s1 = adam.update(g, adam.init(p), p, lr=0.1)
    >>> round(float(p1.log_penalty), 9), round(float(p1.log_lengthscale[0]), 9), s1.step
    (-0.1, 0.1, 1)
    """
    if not isinstance(grads, Params):
        raise TypeError(f"grads must be a nyhopt Params, got {type(grads).__name__}")
    if not isinstance(params, Params):
        raise TypeError(f"params must be a nyhopt Params, got {type(params).__name__}")
    if not isinstance(state, AdamState):
        raise TypeError(f"state must be an AdamState (from adam.init), got {type(state).__name__}")
    lr, b1, b2, eps = _check_hyper(lr, b1, b2, eps)
    masks = _normalize_mask(mask)
    t = int(state.step) + 1
    c1 = 1.0 - b1**t
    c2 = 1.0 - b2**t

    new_p, new_m, new_v = [], [], []
    for name, p, g, m, v, keep in zip(_FIELDS, params, grads, state.m, state.v, masks):
        xp = get_namespace(p, g, m, v)
        p = _as_field(p, xp)
        g = _as_field(g, xp)
        m = _as_field(m, xp)
        v = _as_field(v, xp)
        if not (p.shape == g.shape == m.shape == v.shape):
            raise ValueError(
                f"shape mismatch in field {name!r}: params {p.shape}, grads {g.shape}, "
                f"state {m.shape}/{v.shape}"
            )
        if keep is False:  # a frozen field (e.g. the amplitude of an objective that ignores it)
            new_p.append(p.copy()), new_m.append(m.copy()), new_v.append(v.copy())
            continue
        m1 = b1 * m + (1.0 - b1) * g
        v1 = b2 * v + (1.0 - b2) * (g * g)
        m_hat = m1 / c1
        v_hat = v1 / c2
        p1 = p - lr * m_hat / (xp.sqrt(v_hat) + eps)
        if keep is not None:
            keep_arr = xp.asarray(keep, dtype=bool)
            try:
                keep_arr = xp.broadcast_to(keep_arr, p.shape)
            except ValueError as exc:
                raise ValueError(f"mask for {name!r} does not broadcast to shape {p.shape}") from exc
            p1 = xp.where(keep_arr, p1, p)
            m1 = xp.where(keep_arr, m1, m)
            v1 = xp.where(keep_arr, v1, v)
        new_p.append(_as_field(p1, xp))
        new_m.append(_as_field(m1, xp))
        new_v.append(_as_field(v1, xp))
    return Params(*new_p), AdamState(t, Params(*new_m), Params(*new_v))
