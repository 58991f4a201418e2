"""The tuning loop: Adam's update, tune() per epoch, and the digits demo.

* ``AdamUpdate``: one :func:`nyhopt.optim.adam.update` on m = 1000 centers in
  d = 8 (pure overhead of the optimizer; should be negligible next to an
  objective step).
* ``TuneEpochs``: ``tune`` for 5 epochs (6 evaluations) on the synthetic data of
  BENCHMARKS.md, n = 5000, d = 8, m = 100, terms and errors not recorded;
  divide by 6 for the cost per epoch, compare with one ``value_and_grad`` in
  ``bench_objectives``.
* ``TuneValidation``: ``tune`` for 10 epochs on n = 10000, d = 8, m = 100
  without and with ``validation=0.2`` (errors and error bars tracked): the
  cost of tracking, compared within one objective (``docs/tuning.md``,
  "Tracking the errors"; the run with validation tunes on 8000 rows).
* ``DigitsDemo``: the ``nyhopt demo`` setting (scikit-learn digits, 1438
  training images, 500 centers, float32) for 5 epochs, and the test error
  after the full 50 epochs as a tracked number (skipped without scikit-learn).

Every ``tune`` call passes ``standardize=False``: the data are standardized
already or of one scale (the synthetic problem's uniform features, the demo's
pixels), and the numbers stay comparable with the history from before ``tune``
standardized ``X`` by default.
"""
import numpy as np


class AdamUpdate:
    number = 20
    repeat = (5, 20, 20.0)

    def setup(self):
        from nyhopt.optim import adam
        from nyhopt.params import Params

        rng = np.random.default_rng(0)
        self.adam = adam
        self.params = Params.from_natural(1e-3, np.ones(8), rng.normal(size=(1000, 8)))
        self.grads = self.params.map(lambda a: np.ones(np.shape(a)))
        self.state = adam.init(self.params)

    def time_update(self):
        self.adam.update(self.grads, self.state, self.params)


class TuneEpochs:
    params = [["prop", "gcv", "stoch-prop"]]
    param_names = ["objective"]
    number = 1
    repeat = (3, 10, 60.0)
    timeout = 300

    def setup(self, objective):
        from nyhopt.datasets import synthetic

        ds = synthetic(5000, d=8, n_test=10, seed=1234)
        self.X, self.y = ds.X_train, ds.y_train
        self._run(objective)  # warm up (imports, compilation)

    def _run(self, objective):
        from nyhopt import tune

        return tune(self.X, self.y, objective=objective, centers=100, epochs=5, progress=False,
                    record_terms=False, patience=None, random_state=0, standardize=False)

    def time_tune_5_epochs(self, objective):
        self._run(objective)


class TuneValidation:
    params = [["prop", "sgpr", "holdout"], ["none", "0.2"]]
    param_names = ["objective", "validation"]
    number = 1
    repeat = (3, 10, 60.0)
    timeout = 300

    def setup(self, objective, validation):
        from nyhopt.datasets import synthetic

        ds = synthetic(10000, d=8, n_test=10, seed=1234)
        self.X, self.y = ds.X_train, ds.y_train
        self._run(objective, validation)  # warm up (imports, compilation)

    def _run(self, objective, validation):
        from nyhopt import tune

        return tune(self.X, self.y, objective=objective, centers=100, epochs=10, progress=False,
                    record_terms=False, patience=None, random_state=0, standardize=False,
                    validation=None if validation == "none" else float(validation))

    def time_tune_10_epochs(self, objective, validation):
        self._run(objective, validation)


class DigitsDemo:
    number = 1
    repeat = (2, 5, 120.0)
    timeout = 900

    def setup(self):
        try:
            from nyhopt.cli import digits_split

            self.data = digits_split(seed=0, dtype=np.float32)
        except Exception as exc:  # scikit-learn missing
            raise NotImplementedError(f"digits not available: {exc}")

    def _run(self, epochs):
        from nyhopt import tune

        X_tr, y_tr, X_te, y_te = self.data
        res = tune(X_tr, y_tr, objective="prop", centers=500, epochs=epochs, lr=0.1,
                   task="classification", random_state=0, progress=False, record_terms=False,
                   patience=None, standardize=False, **_demo_init(X_tr))
        return float(np.mean(res.model.predict(X_te) != y_te))

    def time_demo_5_epochs(self):
        self._run(5)

    def track_demo_test_error_percent(self):
        return 100 * self._run(50)

    track_demo_test_error_percent.unit = "%"
    track_demo_test_error_percent.timeout = 900


def _demo_init(X):
    """The demo's initial hyperparameters (as ``nyhopt demo`` sets them)."""
    from nyhopt.cli import DEMO_INIT

    return dict(DEMO_INIT)


class TimeBudget:
    """``tune(..., time_budget=T)`` (issue 35): how much of its budget a call uses, and its test RMSE.

    The synthetic data of BENCHMARKS.md, n = 20000, d = 8, budgets of 10 and 30 s.
    ``track_wall_over_budget`` is the wall time of the call over ``T`` (the
    final fit included; it should stay at or below 1.1); ``track_test_rmse``
    the test RMSE of the same call, beside ``track_default_test_rmse``, today's
    default run (100 centers, up to 200 epochs).
    """

    params = [[10.0, 30.0]]
    param_names = ["budget"]
    number = 1
    repeat = 1
    timeout = 600

    def setup(self, budget):
        import time

        from nyhopt import tune
        from nyhopt.datasets import synthetic

        ds = synthetic(20000, d=8, n_test=5000, seed=1234)
        tune(ds.X_train[:500], ds.y_train[:500], time_budget=2.0, progress=False, standardize=False)  # compilation
        t0 = time.perf_counter()
        res = tune(ds.X_train, ds.y_train, time_budget=budget, progress=False, standardize=False)
        self.ratio = (time.perf_counter() - t0) / budget
        self.rmse = float(np.sqrt(np.mean((res.model.predict(ds.X_test) - ds.y_test) ** 2)))
        self.ds = ds

    def track_wall_over_budget(self, budget):
        return self.ratio

    def track_test_rmse(self, budget):
        return self.rmse

    def track_default_test_rmse(self, budget):
        from nyhopt import tune

        res = tune(self.ds.X_train, self.ds.y_train, progress=False, standardize=False)
        return float(np.sqrt(np.mean((res.model.predict(self.ds.X_test) - self.ds.y_test) ** 2)))
