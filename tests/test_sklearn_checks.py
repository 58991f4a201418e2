"""scikit-learn's estimator checks on NystromKRR and NystromKRRClassifier.

The estimators are given few centers (5) because several checks fit on
15-30 samples and more centers than samples is an error.  No check is skipped.
"""
import pytest

sklearn = pytest.importorskip("sklearn")
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

import nyhopt as nh  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Estimator .* does not inherit from:UserWarning")


@parametrize_with_checks(
    [
        nh.NystromKRR(nh.GaussianKernel(5.0), centers=10, penalty=1e-3),
        nh.NystromKRR(nh.GaussianKernel(5.0), centers=10, penalty=1e-3, solver="direct"),
        nh.NystromKRRClassifier(centers=10, penalty=1e-3),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
