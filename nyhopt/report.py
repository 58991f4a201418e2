"""A one-page picture of a tuning run (matplotlib, imported only when used).

:func:`plot_history` draws four panels from a :class:`~nyhopt.optim.History`:
the objective, the penalty, the lengthscales and the train/validation errors
(or, when no error was tracked, the objective's terms) against the epoch.
:func:`save_report` writes it to a PNG (or any format matplotlib knows) without
touching pyplot's global state, so it is safe inside other programs.

matplotlib is an optional dependency (``pip install "nyhopt[plot]"``).
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["plot_history", "save_report"]


def _require_matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(
            'the report needs matplotlib: pip install "nyhopt[plot]" (or pip install matplotlib)'
        ) from exc
    return Figure, FigureCanvasAgg


def _positive(values) -> bool:
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    return finite.size > 0 and bool(np.all(finite > 0))


def _maybe_log(ax, values, ratio=20.0):
    """Log scale when the values are positive and span more than ``ratio``."""
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if _positive(finite) and finite.max() > ratio * finite.min():
        ax.set_yscale("log")


def plot_history(history, title=None, best_epoch=None, error_name="error"):
    """Figure with the objective, penalty, lengthscales and errors per epoch.

    Parameters
    ----------
    history : History
        From :func:`nyhopt.tune` (``result.history``) or ``HyperoptKRR.history_``.
    title : str, optional
        Figure title.
    best_epoch : int, optional
        Marked with a vertical line on every panel.
    error_name : str, default "error"
        Label of the error axis (e.g. "RMSE" or "error rate").

    Returns
    -------
    matplotlib.figure.Figure
        Not attached to pyplot (save it with ``fig.savefig`` or :func:`save_report`).

    Raises
    ------
    ImportError
        If matplotlib is not installed.
    ValueError
        If the history is empty.
    """
    Figure, FigureCanvasAgg = _require_matplotlib()
    if len(history) == 0:
        raise ValueError("history is empty: nothing to plot")
    epoch = history.epoch
    fig = Figure(figsize=(10, 7), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 2, sharex=True)
    (ax_obj, ax_pen), (ax_ell, ax_err) = axes

    obj = history.objective
    ax_obj.plot(epoch, obj, color="C0")
    _maybe_log(ax_obj, obj)
    ax_obj.set_ylabel("objective")
    ax_obj.set_title("objective")

    ax_pen.plot(epoch, history.penalty, color="C1")
    _maybe_log(ax_pen, history.penalty, ratio=3.0)
    ax_pen.set_ylabel("penalty $\\lambda$")
    ax_pen.set_title("penalty")

    ell = history.lengthscale
    ax_ell.plot(epoch, ell, linewidth=0.8, alpha=0.8 if ell.shape[1] > 1 else 1.0)
    _maybe_log(ax_ell, ell, ratio=3.0)
    ax_ell.set_ylabel("lengthscale $\\ell$")
    ax_ell.set_title(f"lengthscales ({ell.shape[1]})")

    train, val = history.train_error, history.validation_error
    if np.isfinite(train).any() or np.isfinite(val).any():
        if np.isfinite(train).any():
            ax_err.plot(epoch, train, label="train", color="C2")
        if np.isfinite(val).any():
            ax_err.plot(epoch, val, label="validation", color="C3")
        ax_err.set_ylabel(error_name)
        ax_err.set_title(error_name)
        ax_err.legend()
    else:
        names = sorted({k for t in history.terms for k in t})
        for name in names:
            ax_err.plot(epoch, history.term(name), label=name)
        if names:
            _maybe_log(ax_err, np.concatenate([history.term(n) for n in names]))
            ax_err.legend()
        ax_err.set_title("objective terms" if names else "(no errors or terms recorded)")
    for ax in axes[1]:
        ax.set_xlabel("epoch")
    for ax in axes.ravel():
        ax.grid(True, alpha=0.3)
        if best_epoch is not None:
            ax.axvline(best_epoch, color="gray", linestyle=":", linewidth=1)
    if title:
        fig.suptitle(title)
    return fig


def save_report(history, path, title=None, best_epoch=None, error_name="error", dpi=110) -> str:
    """Draw :func:`plot_history` and save it to ``path``.

    Parameters
    ----------
    history : History
    path : str or path-like
        Output file; the format follows the extension (``.png``, ``.pdf``, ``.svg``...).
    title, best_epoch, error_name
        As for :func:`plot_history`.
    dpi : int, default 110

    Returns
    -------
    str
        The path written.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from nyhopt.optim import History, TuneRecord
    >>> h = History([TuneRecord(k, 1.0 / (k + 1), {}, 0.1, np.ones(2), np.nan, np.nan, 0.0)
    ...              for k in range(5)])
    >>> path = save_report(h, os.path.join(tempfile.mkdtemp(), "report.png"))
    >>> os.path.getsize(path) > 0
    True
    """
    fig = plot_history(history, title=title, best_epoch=best_epoch, error_name=error_name)
    path = os.fspath(path)
    fig.savefig(path, dpi=dpi)
    return path
