"""nyhopt: Nystrom kernel ridge regression that tunes its own hyperparameters.

The penalty, the kernel lengthscales (one per feature if asked) and the
Nystrom centers are learned by gradient descent on a model-selection
objective whose gradient is written by hand (no autodiff framework).
Runs on NumPy/SciPy/Numba on the CPU and on CuPy on the GPU.
"""
from ._config import get_memory_budget, memory_budget, set_memory_budget
from .kernels import GaussianKernel, Kernel, KernelGrad, LaplacianKernel, MaternKernel, make_kernel

__version__ = "0.1.0"

__all__ = [
    "GaussianKernel",
    "LaplacianKernel",
    "MaternKernel",
    "Kernel",
    "KernelGrad",
    "make_kernel",
    "get_memory_budget",
    "set_memory_budget",
    "memory_budget",
]


def _optional(module, names):
    """Re-export names from submodules that may not exist yet in a partial build."""
    import importlib

    try:
        mod = importlib.import_module(f"nyhopt.{module}")
    except ImportError as exc:  # pragma: no cover - only during development
        if f"nyhopt.{module}" not in str(exc):
            raise
        return
    for name in names:
        if hasattr(mod, name):
            globals()[name] = getattr(mod, name)
            __all__.append(name)


_optional("params", ["Params"])
_optional("estimator", ["NystromKRR", "NystromKRRClassifier"])
_optional("objectives", ["make_objective"])
_optional("optim", ["tune", "TuneResult"])
_optional("hyperopt", ["HyperoptKRR", "HyperoptKRRClassifier"])
