"""Choosing the objective by validation error: tune(objective=[...], validation=...) (issue #13)."""
from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.cli import main
from nyhopt.io import load_model
from nyhopt.optim import tune
from nyhopt.optim import _select

NAMES = ["prop", "sgpr", "gcv"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.uniform(-1.5, 1.5, size=(240, 3))
    y = 4.0 + 2.0 * np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.2 * rng.normal(size=240)
    return X, y


def _quick(X, y, **kw):
    kw.setdefault("centers", 12)
    kw.setdefault("epochs", 4)
    kw.setdefault("progress", False)
    kw.setdefault("random_state", 0)
    kw.setdefault("standardize", False)  # the references below are fitted on X as it is
    return tune(X, y, **kw)


def _same_params(a, b):
    return (np.array_equal(a.log_penalty, b.log_penalty) and np.array_equal(a.log_lengthscale, b.log_lengthscale)
            and np.array_equal(a.centers, b.centers))


def _independent_model(params, X, y, objective):
    # sgpr's default mean="constant": its model has the constant (fit_intercept)
    return nh.NystromKRR(nh.GaussianKernel(params.lengthscale), penalty=params.penalty, centers=params.centers,
                         solver="direct", normalize_y=True, fit_intercept=objective == "sgpr").fit(X, y)


def _rmse(a, b):
    return float(np.sqrt(np.mean((a - b) ** 2)))


# ----------------------------------------------------------------------------- the str path is untouched


def test_single_name_has_no_candidates_and_matches_a_list_of_one(data):
    X, y = data
    val = (X[:60], y[:60])
    single = _quick(X[60:], y[60:], objective="prop", validation=val)
    assert single.candidates == () and single.objective.name == "prop"
    listed = _quick(X[60:], y[60:], objective=["prop"], validation=val)
    # Same split, start and seed: the one candidate is the str run.
    assert _same_params(single.params, listed.params)
    np.testing.assert_array_equal(single.history.objective, listed.history.objective)
    np.testing.assert_array_equal(single.model.predict(X), listed.model.predict(X))
    # The first eight fields unpack as before the new field existed.
    model, params, history, objective, best_epoch, stop_reason, task, elapsed = single[:8]
    assert params is single.params and task == "regression"


def test_list_of_one_with_a_fraction_uses_the_str_run_split_and_start(data):
    X, y = data
    single = _quick(X, y, objective="gcv", validation=0.25)  # tuned on the same 75% of the rows
    listed = _quick(X, y, objective=["gcv"], validation=0.25)
    assert _same_params(single.params, listed.candidates[0].params)
    # one prediction of the final model (direct solver) against the error tracked from gcv's own fit: the same
    # model from two factorizations (docs/tuning.md, "Tracking the errors")
    assert listed.candidates[0].validation_error == pytest.approx(
        single.history[single.best_epoch].validation_error, rel=1e-9)
    assert _same_params(listed.params, _quick(X, y, objective="gcv").params)  # then on all of them


# ----------------------------------------------------------------------------- the choice


def test_choice_is_the_lowest_validation_error_checked_by_independent_fits(data):
    X, y = data
    X_tr, y_tr, X_val, y_val = X[:180], y[:180], X[180:], y[180:]
    res = _quick(X_tr, y_tr, objective=NAMES, validation=(X_val, y_val))
    assert [c.objective for c in res.candidates] == NAMES
    errors = []
    for cand in res.candidates:
        independent = _rmse(_independent_model(cand.params, X_tr, y_tr, cand.objective).predict(X_val), y_val)
        assert cand.validation_error == pytest.approx(independent, rel=1e-8)
        assert cand.objective_value == cand.history[cand.best_epoch].objective
        assert cand.epochs == len(cand.history) - 1 and cand.elapsed > 0
        errors.append(independent)
    assert len(set(np.round(errors, 12))) > 1  # the candidates did reach different points
    chosen = res.candidates[int(np.argmin(errors))]
    assert res.objective.name == chosen.objective
    assert _same_params(res.params, chosen.params) and res.history is chosen.history
    assert res.best_epoch == chosen.best_epoch and res.stop_reason == chosen.stop_reason
    # An explicit (X_val, y_val): the model is the chosen one fitted on (X, y) as given.
    np.testing.assert_allclose(res.model.predict(X_val), _independent_model(res.params, X_tr, y_tr, res.objective.name).predict(X_val),
                               rtol=1e-9, atol=1e-12)
    assert res.elapsed >= sum(c.elapsed for c in res.candidates)


def test_fraction_refits_on_all_rows_and_candidates_share_the_start(data):
    X, y = data
    res = _quick(X, y, objective=NAMES, validation=0.25, epochs=0)
    starts = [c.params for c in res.candidates]  # epochs=0: the params are the shared start
    assert all(_same_params(starts[0], p) for p in starts[1:])
    assert starts[0].penalty == pytest.approx(1.0 / 180)  # 1/n of the training part
    full = _independent_model(res.params, X, y, res.objective.name)
    np.testing.assert_allclose(res.model.predict(X), full.predict(X), rtol=1e-9, atol=1e-12)
    part = _quick(X, y, objective=res.objective.name, validation=0.25, epochs=0)  # fitted on 75% only
    assert not np.allclose(res.model.predict(X), part.model.predict(X))


@pytest.mark.parametrize("validation", [0.25, 3], ids=["fraction", "3 folds"])
@pytest.mark.parametrize("random_state", [0, "generator"])
def test_the_chosen_objective_is_tuned_again_on_all_rows(data, random_state, validation):
    X, y = data
    seed = (lambda: np.random.default_rng(5)) if random_state == "generator" else (lambda: 0)
    res = _quick(X, y, objective=NAMES, validation=validation, random_state=seed())
    alone = _quick(X, y, objective=res.objective.name, random_state=seed())  # the chosen one, all rows
    assert _same_params(res.params, alone.params)
    np.testing.assert_array_equal(res.history.objective, alone.history.objective)
    np.testing.assert_array_equal(res.model.predict(X), alone.model.predict(X))
    assert res.best_epoch == alone.best_epoch and len(res.candidates) == 3


def test_candidates_track_only_the_best_epoch_by_default(data):
    X, y = data
    res = _quick(X, y, objective=NAMES, validation=0.25)
    for cand in res.candidates:
        errors = np.asarray(cand.history.validation_error, dtype=float)
        assert np.isnan(errors).all() and np.isfinite(cand.validation_error)
    tracked = _quick(X, y, objective=NAMES, validation=0.25, track_errors=True)
    assert all(np.isfinite(c.history.validation_error).all() for c in tracked.candidates)
    assert [c.validation_error for c in tracked.candidates] == pytest.approx(
        [c.validation_error for c in res.candidates], rel=1e-9)


def test_ties_go_to_the_first_and_a_later_lower_error_wins(data, monkeypatch):
    X, y = data
    monkeypatch.setattr(_select, "_validation_error", lambda res, X_val, y_val, task: 0.5)
    assert _quick(X, y, objective=["gcv", "prop"], validation=0.2, epochs=1).objective.name == "gcv"
    errors = iter([0.5, 0.25, 0.25])
    monkeypatch.setattr(_select, "_validation_error", lambda res, X_val, y_val, task: next(errors))
    res = _quick(X, y, objective=["gcv", "prop", "sgpr"], validation=0.2, epochs=1)
    assert res.objective.name == "prop" and [c.validation_error for c in res.candidates] == [0.5, 0.25, 0.25]


def test_failed_candidate_error_counts_as_infinite(data, monkeypatch):
    X, y = data
    errors = iter([math.nan, 0.9])
    monkeypatch.setattr(_select, "prediction_error", lambda pred, truth, task: next(errors))
    res = _quick(X, y, objective=["gcv", "prop"], validation=0.2, epochs=1, track_errors=False)
    assert [c.validation_error for c in res.candidates] == [math.inf, 0.9] and res.objective.name == "prop"


def test_deterministic_for_a_seed(data):
    X, y = data
    a = _quick(X, y, objective=NAMES, validation=0.2, random_state=4)
    b = _quick(X, y, objective=NAMES, validation=0.2, random_state=4)
    assert a.objective.name == b.objective.name
    assert [c.validation_error for c in a.candidates] == [c.validation_error for c in b.candidates]
    assert all(_same_params(p.params, q.params) for p, q in zip(a.candidates, b.candidates))
    np.testing.assert_array_equal(a.model.predict(X), b.model.predict(X))


def test_classification_uses_the_error_rate(data):
    X, _ = data
    labels = np.where(X[:, 0] * X[:, 1] > 0, "same", "diff")
    res = _quick(X, labels, objective=["prop", "gcv"], validation=0.25)
    assert res.task == "classification" and res.model.classes_.tolist() == ["diff", "same"]
    for cand in res.candidates:
        assert 0.0 <= cand.validation_error <= 1.0
        assert cand.validation_error * 60 == pytest.approx(round(cand.validation_error * 60))  # 60 rows held out


def test_inputs_are_not_modified(data):
    X, y = data
    X0, y0, names = X.copy(), y.copy(), list(NAMES)
    _quick(X, y, objective=names, validation=(X[:30], y[:30]), epochs=1)
    assert names == NAMES
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("objective, validation, error, match", [
    (NAMES, None, ValueError, "validation"),
    (["prop", "magic"], 0.2, ValueError, "unknown objective 'magic'"),
    ([], 0.2, ValueError, "empty"),
    (("prop", "sgpr", "PROP"), 0.2, ValueError, "twice"),
    (["prop", 3], 0.2, TypeError, "names"),
    (5, 0.2, TypeError, "objective must be a name"),
    (NAMES, "0.2", TypeError, "validation"),
    (NAMES, 1.5, ValueError, "validation"),
])
def test_bad_arguments(data, objective, validation, error, match):
    X, y = data
    with pytest.raises(error, match=match):
        _quick(X, y, objective=objective, validation=validation)


# ----------------------------------------------------------------------------- HyperoptKRR


def test_hyperopt_with_a_list(data):
    from sklearn.base import clone

    X, y = data
    names = ["prop", "gcv"]
    est = nh.HyperoptKRR(objective=names, validation_fraction=0.25, centers=10, epochs=3, random_state=0,
                         standardize=True)
    assert est.get_params()["objective"] is names
    copy = clone(est)
    assert copy.get_params()["objective"] == names
    est.fit(X, y)
    assert est.objective is names and names == ["prop", "gcv"]  # stored unchanged
    assert est.objective_ in names and [c.objective for c in est.candidates_] == names
    assert est.objective_ == min(est.candidates_, key=lambda c: c.validation_error).objective
    single = nh.HyperoptKRR(objective="sgpr", centers=10, epochs=2, random_state=0).fit(X, y)
    assert single.objective_ == "sgpr" and single.candidates_ == ()
    with pytest.raises(ValueError, match="give validation_fraction="):
        nh.HyperoptKRR(objective=names, centers=10, epochs=2).fit(X, y)


@pytest.mark.parametrize("objective,folds,match", [
    ("prop", 3, r"validation_fraction=3 is a number of folds, which chooses among a list"),
    (["prop", "gcv"], 1, r"validation_fraction=1 folds: give k >= 2"),
    (["prop", "gcv"], 241, r"validation_fraction=241 folds but X has only 240 rows"),
])
def test_hyperopt_fold_errors_name_validation_fraction(data, objective, folds, match):
    # they used to name tune's argument, validation=, which the estimator does not have
    X, y = data
    with pytest.raises(ValueError, match=match):
        nh.HyperoptKRR(objective=objective, validation_fraction=folds, centers=10, epochs=1).fit(X, y)


def test_hyperopt_list_in_grid_search(data):
    from sklearn.model_selection import GridSearchCV

    X, y = data
    grid = GridSearchCV(nh.HyperoptKRR(validation_fraction=0.25, centers=8, epochs=2, random_state=0),
                        {"objective": [["prop", "gcv"], "sgpr"]}, cv=2).fit(X, y)
    assert grid.best_params_["objective"] in (["prop", "gcv"], "sgpr")
    assert np.all(np.isfinite(grid.cv_results_["mean_test_score"]))


# ----------------------------------------------------------------------------- command line


def _csv(tmp_path, X, y):
    path = tmp_path / "d.csv"
    rows = ["x1,x2,x3,y"] + [",".join(repr(float(v)) for v in row) for row in np.column_stack([X, y])]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def test_cli_objective_list(tmp_path, data, capsys):
    X, y = data
    path, model, summary = _csv(tmp_path, X, y), tmp_path / "m.npz", tmp_path / "s.json"
    assert main(["tune", path, "--target", "y", "--objective", "prop,gcv", "--validation", "0.25",
                 "--centers", "10", "--epochs", "3", "--out", str(model), "--json", str(summary)]) == 0
    out = capsys.readouterr().out
    s = json.loads(summary.read_text())
    assert [c["objective"] for c in s["candidates"]] == ["prop", "gcv"]
    chosen = min(s["candidates"], key=lambda c: c["validation_error"])["objective"]
    assert s["objective"] == chosen and load_model(model).meta_["objective"] == chosen
    assert "candidate prop: validation RMSE" in out and "candidate gcv: validation RMSE" in out
    assert f"chosen: {chosen}" in out and "tuned again on all 240 rows" in out


def test_cli_objective_list_errors(tmp_path, data, capsys):
    X, y = data
    path = _csv(tmp_path, X, y)
    assert main(["tune", path, "--target", "y", "--objective", "prop,gcv", "--out", str(tmp_path / "m")]) == 2
    assert "--validation" in capsys.readouterr().err
    for bad, match in [("prop,magic", "invalid choice: 'magic'"), ("prop,gcv,prop", "twice")]:
        with pytest.raises(SystemExit) as exc:
            main(["tune", path, "--target", "y", "--objective", bad, "--validation", "0.2"])
        assert exc.value.code == 2 and match in capsys.readouterr().err


# ----------------------------------------------------------------------------- k-fold validation


def test_fold_rows_partition_the_rows_evenly_and_stratify_classes():
    n, k = 103, 5
    rows = _select.fold_rows(n, k, np.random.default_rng(3))
    assert sorted(np.concatenate(rows).tolist()) == list(range(n))
    assert {len(r) for r in rows} == {20, 21} and all(np.all(np.diff(r) > 0) for r in rows)
    again = _select.fold_rows(n, k, np.random.default_rng(3))
    assert all(np.array_equal(a, b) for a, b in zip(rows, again))  # seeded
    labels = np.array(["rare"] * 10 + ["common"] * 93)
    strat = _select.fold_rows(n, k, np.random.default_rng(3), labels)
    assert sorted(np.concatenate(strat).tolist()) == list(range(n))
    assert [int(np.sum(labels[r] == "rare")) for r in strat] == [2] * 5
    assert max(len(r) for r in strat) - min(len(r) for r in strat) <= 1


def test_kfold_choice_matches_a_hand_loop_over_the_folds(data):
    X, y = data
    k, n = 3, X.shape[0]
    Z, ell = X[:12].copy(), np.full(3, 0.8)
    res = _quick(X, y, objective=NAMES, validation=k, centers=Z, lengthscale=ell)
    # By hand: the same folds (no other draw precedes them when centers and lengthscale are
    # given), each candidate tuned on each fold's training rows from the start of all n rows.
    rng = np.random.default_rng(0)
    folds = _select.fold_rows(n, k, rng)
    errors = {name: [] for name in NAMES}
    for rows in folds:
        train = np.setdiff1d(np.arange(n), rows)
        for name in NAMES:
            run = tune(X[train], y[train], objective=name, centers=Z, lengthscale=ell, penalty=1.0 / n, epochs=4,
                       progress=False, random_state=copy.deepcopy(rng), validation=(X[rows], y[rows]),
                       standardize=False)
            fitted = _independent_model(run.params, X[train], y[train], name)
            errors[name].append(_rmse(fitted.predict(X[rows]), y[rows]))
    means = [sum(len(r) * e for r, e in zip(folds, errors[name])) / n for name in NAMES]
    assert [c.objective for c in res.candidates] == NAMES
    for cand, name, mean in zip(res.candidates, NAMES, means):
        assert len(cand.fold_errors) == k
        np.testing.assert_allclose(cand.fold_errors, errors[name], rtol=1e-8)
        assert cand.validation_error == pytest.approx(mean, rel=1e-8)
    assert len(set(np.round(means, 12))) > 1
    assert res.objective.name == NAMES[int(np.argmin(means))]


@pytest.mark.parametrize("random_state", [0, None])
def test_kfold_candidates_start_where_the_final_run_starts(data, random_state):
    X, y = data
    res = _quick(X, y, objective=NAMES, validation=3, random_state=random_state, epochs=0)
    # epochs=0: every candidate's (first fold's) params and the final run's are the start
    assert all(_same_params(c.params, res.params) for c in res.candidates)
    assert res.params.penalty == pytest.approx(1.0 / X.shape[0])  # 1/n of all the rows


def test_kfold_classification_and_fold_errors(data):
    X, _ = data
    labels = np.where(X[:, 0] * X[:, 1] > 0, "same", "diff")
    res = _quick(X, labels, objective=["prop", "gcv"], validation=4)
    assert res.task == "classification" and res.model.classes_.tolist() == ["diff", "same"]
    for cand in res.candidates:
        assert len(cand.fold_errors) == 4 and all(0.0 <= e <= 1.0 for e in cand.fold_errors)
        assert cand.validation_error == pytest.approx(np.mean(cand.fold_errors))  # 4 folds of 60 rows
        assert cand.elapsed > 0
    fraction = _quick(X, labels, objective=["prop", "gcv"], validation=0.25)
    assert all(c.fold_errors == (c.validation_error,) for c in fraction.candidates)


def test_kfold_inputs_are_not_modified_and_deterministic(data):
    X, y = data
    X0, y0, names = X.copy(), y.copy(), list(NAMES)
    a = _quick(X, y, objective=names, validation=3, epochs=2, random_state=4)
    b = _quick(X, y, objective=names, validation=3, epochs=2, random_state=4)
    assert names == NAMES
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    assert [c.fold_errors for c in a.candidates] == [c.fold_errors for c in b.candidates]


@pytest.mark.parametrize("validation, error, match", [
    (1, ValueError, "validation=1 folds"),
    (0, ValueError, "validation=0 folds"),
    (np.int64(-2), ValueError, "validation=-2 folds"),
    (True, TypeError, "validation must be"),
    (241, ValueError, "validation=241 folds but X has only 240 rows"),
])
def test_kfold_bad_number_of_folds(data, validation, error, match):
    X, y = data
    with pytest.raises(error, match=match):
        _quick(X, y, objective=NAMES, validation=validation)


def test_folds_need_a_list_of_objectives(data):
    X, y = data
    with pytest.raises(ValueError, match="validation=5 is a number of folds"):
        _quick(X, y, objective="prop", validation=5)


def test_classification_chooses_by_the_squared_error_of_the_scores(data):
    X, _ = data
    labels = np.where(X[:, 0] * X[:, 1] > 0, "same", "diff")
    X_tr, y_tr, X_val, y_val = X[:180], labels[:180], X[180:], labels[180:]
    res = _quick(X_tr, y_tr, objective=["prop", "sgpr", "gcv"], validation=(X_val, y_val))
    target = np.where(y_val == "same", 1.0, -1.0)  # classes sorted: "diff" -1, "same" +1
    scores = []
    for cand in res.candidates:
        clf = nh.NystromKRRClassifier(nh.GaussianKernel(cand.params.lengthscale), penalty=cand.params.penalty,
                                      centers=cand.params.centers, solver="direct",
                                      fit_intercept=cand.objective == "sgpr").fit(X_tr, y_tr)
        scores.append(float(np.mean((clf.decision_function(X_val) - target) ** 2)))
        assert cand.validation_score == pytest.approx(scores[-1], rel=1e-8)
        assert cand.validation_error == pytest.approx(np.mean(clf.predict(X_val) != y_val))
    assert res.objective.name == res.candidates[int(np.argmin(scores))].objective


def test_the_score_not_the_error_rate_decides(data, monkeypatch):
    X, _ = data
    labels = np.where(X[:, 0] > 0, 1, 0)
    monkeypatch.setattr(_select, "_validation_error", lambda res, X_val, y_val, task: 0.1)
    scores = iter([0.9, 0.3, 0.3])
    monkeypatch.setattr(_select, "_validation_score", lambda res, X_val, y_val, task, error: next(scores))
    res = _quick(X, labels, objective=["gcv", "prop", "sgpr"], validation=0.2, epochs=1)
    assert res.objective.name == "prop"  # the lowest score, the first of the tie
    assert [c.validation_score for c in res.candidates] == [0.9, 0.3, 0.3]


def test_multiclass_score_uses_one_hot_targets(data):
    X, _ = data
    labels = np.digitize(X[:, 0], [-0.5, 0.5])  # three classes 0, 1, 2
    X_tr, y_tr, X_val, y_val = X[:180], labels[:180], X[180:], labels[180:]
    res = _quick(X_tr, y_tr, objective=["prop", "gcv"], validation=(X_val, y_val), task="classification")
    onehot = np.eye(3)[y_val]
    for cand in res.candidates:
        clf = nh.NystromKRRClassifier(nh.GaussianKernel(cand.params.lengthscale), penalty=cand.params.penalty,
                                      centers=cand.params.centers, solver="direct").fit(X_tr, y_tr)
        expected = float(np.mean(np.sum((clf.decision_function(X_val) - onehot) ** 2, axis=1)))
        assert cand.validation_score == pytest.approx(expected, rel=1e-8)
    folds = _quick(X, labels, objective=["prop", "gcv"], validation=3, task="classification")
    assert all(len(c.fold_errors) == 3 and 0.0 < c.validation_score < np.inf for c in folds.candidates)


def test_regression_score_is_the_error(data):
    X, y = data
    res = _quick(X, y, objective=NAMES, validation=3)
    assert all(c.validation_score == c.validation_error for c in res.candidates)


def test_hyperopt_and_cli_with_folds(tmp_path, data, capsys):
    X, y = data
    est = nh.HyperoptKRR(objective=["prop", "gcv"], validation_fraction=3, centers=10, epochs=2, random_state=0,
                         standardize=True).fit(X, y)
    assert [len(c.fold_errors) for c in est.candidates_] == [3, 3]
    assert est.objective_ == min(est.candidates_, key=lambda c: c.validation_score).objective
    path, model, summary = _csv(tmp_path, X, y), tmp_path / "m.npz", tmp_path / "s.json"
    assert main(["tune", path, "--target", "y", "--objective", "prop,gcv", "--validation", "3",
                 "--centers", "10", "--epochs", "2", "--out", str(model), "--json", str(summary)]) == 0
    out = capsys.readouterr().out
    s = json.loads(summary.read_text())
    assert [len(c["fold_errors"]) for c in s["candidates"]] == [3, 3]
    assert "mean of 3 folds" in out and "tuned again on all 240 rows" in out
    assert main(["tune", path, "--target", "y", "--objective", "prop", "--validation", "3",
                 "--out", str(model)]) == 2
    assert "several --objective" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["tune", path, "--target", "y", "--objective", "prop,gcv", "--validation", "1"])
    assert exc.value.code == 2 and "number of folds" in capsys.readouterr().err
