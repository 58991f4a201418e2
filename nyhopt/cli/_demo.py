"""``nyhopt demo``: tune on scikit-learn's digits and report the test error."""
from __future__ import annotations

import sys
import time

import numpy as np

from ..backend._compile_notice import compile_notice
from . import _paths
from ._common import CLIError, require
from ._device import array_module, to_host


#: Initial hyperparameters of the demo: those of the reference notebook (lengthscale 1 for
#: every pixel, penalty 1e-5). The paper's median heuristic (about 10 here) starts at a test
#: error of 0.8% that L_Prop then drives up to 4-5% in 50 epochs (measured; see docs/cli.md).
DEMO_INIT = {"penalty": 1e-5, "lengthscale": 1.0}


def digits_split(seed=0, test_fraction=0.2, dtype=np.float64):
    """scikit-learn's digits, split at random and scaled as in the reference notebook.

    The pixels share one unit (gray levels 0-16), so they are standardized
    together: minus the mean and over the standard deviation of all training
    pixels (per-pixel scaling would blow up the nearly always blank border
    pixels).

    Parameters
    ----------
    seed : int, default 0
        Seed of the permutation; its first ``round(test_fraction * 1797)`` rows are the test set.
    test_fraction : float, default 0.2
    dtype : numpy dtype, default float64

    Returns
    -------
    X_train, y_train, X_test, y_test : numpy.ndarray
        Scaled pixels (n, 64) and the digits 0-9.

    Raises
    ------
    CLIError
        Without scikit-learn.

    Examples
    --------
    >>> X_tr, y_tr, X_te, y_te = digits_split(0)
    >>> X_tr.shape, X_te.shape, round(float(X_tr.mean()), 12), round(float(X_tr.std()), 12)
    ((1438, 64), (359, 64), 0.0, 1.0)
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise CLIError('the demo uses scikit-learn\'s bundled digits: pip install "nyhopt[demo]"') from None

    X, y = load_digits(return_X_y=True)
    perm = np.random.default_rng(seed).permutation(X.shape[0])
    n_test = int(round(test_fraction * X.shape[0]))
    tr, te = np.sort(perm[n_test:]), np.sort(perm[:n_test])
    X_tr, X_te = X[tr].astype(np.float64), X[te].astype(np.float64)
    mean, std = X_tr.mean(), X_tr.std()
    return ((X_tr - mean) / std).astype(dtype), y[tr], ((X_te - mean) / std).astype(dtype), y[te]


def _blas_threads(n):
    """Context limiting the BLAS thread pools to ``n`` threads (no-op for 0 or without threadpoolctl)."""
    import contextlib

    if not n:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits  # installed with scikit-learn
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext()
    return threadpool_limits(limits=int(n), user_api="blas")


def run_demo(seed=0, objective="prop", centers=500, epochs=50, lr=0.1, dtype=np.float32, report=None,
             quiet=False, stream=None, blas_threads=0, device="cpu") -> dict:
    """Tune on scikit-learn's digits and report the test error (the ``nyhopt demo`` command).

    Parameters
    ----------
    seed : int, default 0
        Seed of the 80/20 split, of the initial centers and of the objective.
    objective : str, default "prop"
    centers : int, default 500
    epochs : int, default 50
    lr : float, default 0.1
    dtype : numpy dtype, default float32
    report : str, optional
        Path of a picture of the run (needs matplotlib).
    quiet : bool, default False
        Print only the final line.
    stream : file-like, default sys.stdout
    blas_threads : int, default 0
        Limit of the BLAS thread pools while tuning (through threadpoolctl,
        which comes with scikit-learn); 0 leaves them alone.
    device : {"cpu", "gpu", "auto"}, default "cpu"
        Where to compute; "auto" takes the GPU when CuPy sees one.

    Returns
    -------
    dict
        ``test_error``, ``wrong`` and ``n_test`` (misclassified and total test
        images), ``seconds`` (tuning and final fit), ``epochs_run``,
        ``penalty`` and ``result`` (the :class:`~nyhopt.optim.TuneResult`).

    Examples
    --------
    >>> import io
    >>> out = run_demo(centers=20, epochs=1, quiet=True, stream=io.StringIO())
    >>> out["n_test"], out["epochs_run"], 0 <= out["test_error"] < 0.5
    (359, 1, True)
    """
    stream = sys.stdout if stream is None else stream
    if report:
        _paths.check_output(report, "--report")
        require("matplotlib", "--report", "plot")
    require("sklearn", "the demo (it uses scikit-learn's bundled digits)", "demo")
    xp = array_module(device)

    def say(text):
        if not quiet:
            print(text, file=stream, flush=True)

    # The first line comes before the slow imports (scikit-learn takes seconds the first time).
    say(f"nyhopt demo: N-KRR tuned with {objective} on scikit-learn's digits (8x8 images of handwritten digits)")
    from ..optim import tune

    X_tr, y_tr, X_te, y_te = digits_split(seed, dtype=dtype)
    say(f"digits: {X_tr.shape[0]} training and {X_te.shape[0]} test images, "
        f"{X_tr.shape[1]} pixels, 10 classes (one-hot targets)")
    say(f"tuning penalty, {X_tr.shape[1]} lengthscales and {centers} centers with {objective}: "
        f"{epochs} Adam epochs, lr {lr}, {np.dtype(dtype).name}, starting from penalty "
        f"{DEMO_INIT['penalty']:g} and lengthscale {DEMO_INIT['lengthscale']:g}")

    def show(epoch, record):
        say(f"  epoch {epoch:3d}  objective {record.objective:.5f}  penalty {record.penalty:.3g}  "
            f"lengthscale median {float(np.median(record.lengthscale)):.3g}  {record.time:6.1f} s")

    t0 = time.perf_counter()
    with _blas_threads(blas_threads), compile_notice(enabled=not quiet):
        result = tune(xp.asarray(X_tr), xp.asarray(y_tr), objective=objective, centers=centers, epochs=epochs, lr=lr,
                      task="classification", random_state=seed, progress=False, record_terms=False,
                      patience=None, callback=show, standardize=False, **DEMO_INIT)
        seconds = time.perf_counter() - t0
        pred = to_host(result.model.predict(xp.asarray(X_te)), xp)
    wrong = int(np.sum(pred != y_te))
    test_error = wrong / y_te.shape[0]
    print(f"test error: {100 * test_error:.2f}% ({wrong} of {y_te.shape[0]} test digits wrong); "
          f"time {seconds:.1f} s (best epoch {result.best_epoch})", file=stream, flush=True)
    if report:
        from ..report import save_report

        path = save_report(result.history, report, best_epoch=result.best_epoch,
                           title=f"digits, {objective}: test error {100 * test_error:.2f}%")
        say(f"report saved to {path}")
    return {"test_error": test_error, "wrong": wrong, "n_test": int(y_te.shape[0]), "seconds": seconds,
            "epochs_run": len(result.history) - 1, "penalty": result.params.penalty, "result": result}


def cmd_demo(args) -> int:
    run_demo(seed=args.seed, objective=args.objective, centers=args.centers, epochs=args.epochs,
             lr=args.lr, dtype=np.float64 if args.float64 else np.float32, report=args.report,
             quiet=args.quiet, blas_threads=args.blas_threads, device=args.device)
    return 0
