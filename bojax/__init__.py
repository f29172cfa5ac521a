"""bojax: Bayesian optimisation of neural-network designs in JAX.

Modules: ``spaces`` (search spaces), ``kernels`` and ``means`` (GP building blocks),
``linalg`` (jitter-ladder Cholesky), ``gp`` (the GP core), ``problems`` (test
functions), ``compilation`` (compile counting). bojax does not enable float64 on
import; entry points (CLI, experiments) do, and so should scripts that fit GPs.
"""

from bojax import cluster, errors, gp, kernels, means, problems
from bojax.driver import Result, minimize
from bojax.errors import BojaxError
from bojax.loop import Settings, ask, ask_batch, init, tell
from bojax.spaces import Condition, Integer, Real, Space

__all__ = [
    "BojaxError",
    "Condition",
    "Integer",
    "Real",
    "Result",
    "Settings",
    "Space",
    "ask",
    "ask_batch",
    "cluster",
    "errors",
    "gp",
    "init",
    "kernels",
    "means",
    "minimize",
    "problems",
    "tell",
]
__version__ = "0.1.0"
