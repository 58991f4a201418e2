"""The estimators' machinery: fitted state, the scikit-learn parameter protocol, centers,
the unpenalized constant and overflow-safe standardization.

The estimator classes themselves are public in :mod:`nyhopt.estimator` and :mod:`nyhopt.hyperopt`.
"""
