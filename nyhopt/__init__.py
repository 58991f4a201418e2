"""nyhopt: Nystrom kernel ridge regression that tunes its own hyperparameters.

The penalty, the kernel lengthscales (one per feature if asked) and the
Nystrom centers are learned by gradient descent on a model-selection
objective whose gradient is written by hand (no autodiff framework).
Runs on NumPy/SciPy/Numba on the CPU and on CuPy on the GPU.
"""
from .backend._config import cache_budget, get_cache_budget, get_memory_budget, memory_budget, set_cache_budget, set_memory_budget
from .errors import DataError, IllConditionedError
from .estimator import NystromKRR, NystromKRRClassifier
from .hyperopt import HyperoptKRR, HyperoptKRRClassifier
from .io import load_model, save_model
from .kernels import GaussianKernel, Kernel, KernelGrad, LaplacianKernel, MaternKernel, make_kernel
from .objectives import make_objective
from .optim import TuneResult, tune
from .params import Params
from .solvers import ConvergenceWarning
from . import metrics

__version__ = "0.1.0"

__all__ = [
    "GaussianKernel",
    "LaplacianKernel",
    "MaternKernel",
    "Kernel",
    "KernelGrad",
    "make_kernel",
    "Params",
    "NystromKRR",
    "NystromKRRClassifier",
    "make_objective",
    "tune",
    "TuneResult",
    "HyperoptKRR",
    "HyperoptKRRClassifier",
    "save_model",
    "load_model",
    "ConvergenceWarning",
    "DataError",
    "IllConditionedError",
    "get_memory_budget",
    "set_memory_budget",
    "memory_budget",
    "get_cache_budget",
    "set_cache_budget",
    "cache_budget",
    "metrics",
]
