"""scikit-learn's estimator checks on every nyhopt estimator.

The estimators are given 10 centers because several checks fit on 10-30
samples (more centers than samples uses every sample, with a warning),
the self-tuning ones 3 epochs
(the checks fit hundreds of times), and the regressors a wide Gaussian kernel
(lengthscale 5) so that ``check_regressors_train`` (R^2 > 0.5 on a linear
problem in 10 dimensions) passes with so few centers.  No check is skipped by
this file; scikit-learn itself skips the pandas checks when pandas is not
installed and the array-API checks unless SCIPY_ARRAY_API is set.
"""
import warnings

import pytest

sklearn = pytest.importorskip("sklearn")
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

import nyhopt as nh  # noqa: E402

ESTIMATORS = [
    nh.NystromKRR(nh.GaussianKernel(5.0), centers=10, penalty=1e-3),
    nh.NystromKRR(nh.GaussianKernel(5.0), centers=10, penalty=1e-3, solver="direct"),
    nh.NystromKRRClassifier(centers=10, penalty=1e-3),
    nh.HyperoptKRR(centers=10, epochs=3, lengthscale=5.0, progress=False),
    nh.HyperoptKRRClassifier(centers=10, epochs=3, progress=False),
]

with warnings.catch_warnings():
    # nyhopt does not depend on scikit-learn, so its estimators do not inherit BaseEstimator
    warnings.filterwarnings("ignore", message="Estimator .* does not inherit from", category=UserWarning)
    _checks = parametrize_with_checks(ESTIMATORS)


@_checks
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Estimator .* does not inherit from", category=UserWarning)
        check(estimator)
