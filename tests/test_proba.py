"""predict_proba of the classifiers: the probit of the score and the multiclass quadrature."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import ndtr

import nyhopt as nh
from nyhopt.backend import gpu_available
from nyhopt.posterior._proba import class_probabilities
from nyhopt.estimator import NotFittedError


def _two_blobs(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=n) > 0, "yes", "no")
    return X, y


def _three_classes(n=300, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.digitize(X[:, 0] + 0.3 * rng.normal(size=n), [-0.5, 0.5]) * 10 + 7  # 7, 17, 27
    return X, y


def test_two_outputs_match_the_closed_form():
    # one-hot with two outputs of equal s: P(y0* > y1*) = Phi((mu0 - mu1) / (s sqrt 2)) exactly
    d = np.linspace(-30.0, 30.0, 601)
    s = 0.7
    p = class_probabilities(np.stack([d * s, np.zeros_like(d)], axis=1), s)
    np.testing.assert_allclose(p[:, 0], ndtr(d / np.sqrt(2.0)), rtol=0, atol=1e-12)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-12)


def test_multiclass_matches_monte_carlo_with_unequal_spreads():
    rng = np.random.default_rng(0)
    mu = np.array([[0.2, 0.0, -0.1, 0.4], [1.0, 0.1, 0.0, 0.0]])
    s = np.array([[0.3, 0.5, 0.4, 0.6], [0.2, 0.2, 0.2, 0.2]])
    p = class_probabilities(mu, s)
    draws = 400_000
    for row in range(2):
        y = mu[row] + s[row] * rng.standard_normal((draws, 4))
        freq = np.bincount(y.argmax(axis=1), minlength=4) / draws
        # 6 Monte Carlo standard errors
        np.testing.assert_allclose(p[row], freq, rtol=0, atol=6 * np.sqrt(0.25 / draws))


def test_multiclass_matches_adaptive_quadrature():
    from scipy.integrate import quad
    from scipy.stats import norm

    rng = np.random.default_rng(2)
    mu = rng.normal(size=(6, 5)) * np.array([[0.1], [1.0], [3.0], [0.5], [2.0], [6.0]])
    s = rng.uniform(0.1, 0.9, size=(6, 5))
    p = class_probabilities(mu, s)
    for i in range(mu.shape[0]):
        for k in range(mu.shape[1]):
            others = [j for j in range(mu.shape[1]) if j != k]

            def integrand(z):
                w = mu[i, k] + s[i, k] * z
                return norm.pdf(z) * np.prod(norm.cdf((w - mu[i, others]) / s[i, others]))

            ref = quad(integrand, -12, 12, epsabs=1e-13, epsrel=1e-11, limit=400)[0]
            assert abs(p[i, k] - ref) < 1e-6, (i, k, p[i, k], ref)


def test_zero_spread_is_the_sign_and_a_tie_is_one_half():
    p = class_probabilities(np.array([-1.0, 0.0, 2.0]), 0.0)
    np.testing.assert_array_equal(p[:, 1], [0.0, 0.5, 1.0])


def test_binary_is_the_probit_of_the_score_in_classes_order():
    X, y = _two_blobs()
    clf = nh.NystromKRRClassifier(penalty=1e-4, centers=40, random_state=0).fit(X, y)
    assert clf.classes_.tolist() == ["no", "yes"]
    p = clf.predict_proba(X[:50])
    mu = clf.decision_function(X[:50])
    np.testing.assert_allclose(p[:, 1], ndtr(mu / np.sqrt(clf.noise_variance_)), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(clf.classes_[p.argmax(axis=1)], clf.predict(X[:50]))
    # the larger the probability of "yes", the larger the score
    order = np.argsort(mu)
    assert np.all(np.diff(p[order, 1]) >= 0)
    np.testing.assert_allclose(clf.predict_log_proba(X[:50]), np.log(p), rtol=1e-12)


def test_include_latent_uses_the_pointwise_std():
    X, y = _two_blobs()
    clf = nh.NystromKRRClassifier(penalty=1e-4, centers=40, random_state=0).fit(X, y)
    far = X[:5] * 6.0
    mu, s = clf.decision_function(far, return_std=True, include_noise=True)
    p = clf.predict_proba(far, include_latent=True)
    np.testing.assert_allclose(p[:, 1], ndtr(mu / s), rtol=1e-12, atol=1e-15)
    # the latent variance only widens: probabilities move toward 1/2
    plain = clf.predict_proba(far)
    assert np.all(np.abs(p[:, 1] - 0.5) <= np.abs(plain[:, 1] - 0.5) + 1e-15)


def test_multiclass_argmax_is_predict_and_columns_follow_classes():
    X, y = _three_classes()
    clf = nh.NystromKRRClassifier(penalty=1e-4, centers=40, random_state=0).fit(X, y)
    assert clf.classes_.tolist() == [7, 17, 27]
    p = clf.predict_proba(X)
    assert p.shape == (X.shape[0], 3) and p.dtype == np.float64
    assert np.all((p > 0) & (p < 1))
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(clf.classes_[p.argmax(axis=1)], clf.predict(X))
    # the class of the largest first coordinate is the last one
    assert p[np.argmax(X[:, 0]), 2] > 0.5 and p[np.argmin(X[:, 0]), 0] > 0.5


def test_hyperopt_classifier_delegates_to_its_model():
    X, y = _three_classes()
    clf = nh.HyperoptKRRClassifier(centers=20, epochs=5, random_state=0, progress=False).fit(X, y)
    p = clf.predict_proba(X[:20])
    np.testing.assert_allclose(p, clf.model_.predict_proba(clf._transform(X[:20])), rtol=1e-12)
    np.testing.assert_array_equal(clf.classes_[p.argmax(axis=1)], clf.predict(X[:20]))
    np.testing.assert_allclose(clf.predict_log_proba(X[:20]), np.log(p), rtol=1e-12)


def test_predict_proba_errors():
    X, y = _two_blobs(100)
    clf = nh.NystromKRRClassifier(centers=10, predictive_variance=False, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="predictive_variance"):
        clf.predict_proba(X)
    clf = nh.NystromKRRClassifier(centers=10, random_state=0).fit(X, y)
    with pytest.raises(TypeError, match="include_latent"):
        clf.predict_proba(X, include_latent="yes")
    with pytest.raises(NotFittedError):
        nh.NystromKRRClassifier().predict_proba(X)


def test_dask_input_gives_the_probabilities_of_its_numpy_copy():
    da = pytest.importorskip("dask.array")
    X, y = _three_classes()
    clf = nh.NystromKRRClassifier(penalty=1e-4, centers=30, random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = np.asarray(clf.predict_proba(da.from_array(X, chunks=(100, 2))))
    np.testing.assert_allclose(p, clf.predict_proba(X), rtol=1e-10, atol=1e-14)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU (CuPy with a device)")
@pytest.mark.parametrize("classes", [2, 3])
def test_cupy_probabilities_stay_on_the_device_and_match_the_host(classes):
    import cupy as cp

    X, y = _two_blobs() if classes == 2 else _three_classes()
    y = np.unique(y, return_inverse=True)[1]  # CuPy holds no text labels
    kw = dict(penalty=1e-4, centers=X[:30], solver="direct")
    cpu = nh.NystromKRRClassifier(**kw).fit(X, y)
    gpu = nh.NystromKRRClassifier(**{**kw, "centers": cp.asarray(X[:30])}).fit(cp.asarray(X), cp.asarray(y))
    for latent in (False, True):
        p = gpu.predict_proba(cp.asarray(X[:40]), include_latent=latent)
        assert isinstance(p, cp.ndarray) and p.shape == (40, classes)
        np.testing.assert_allclose(cp.asnumpy(p), cpu.predict_proba(X[:40], include_latent=latent),
                                   rtol=1e-6, atol=1e-9)
