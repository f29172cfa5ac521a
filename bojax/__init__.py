"""bojax: Bayesian optimisation of neural-network designs in JAX.

The package is layered; each layer imports only those above it in this list:

* ``bojax.errors``, ``bojax.spaces``, ``bojax.compilation``, ``bojax.user_code``: typed
  errors, search spaces (and space files), compilation counting, loading a user's
  ``module:function`` objective.
* ``bojax.gp``: kernels, means, the jitter-ladder Cholesky, the GP core, priors, fantasies.
* ``bojax.inference``: MAP, slice sampling and NUTS over any log density.
* ``bojax.surrogates``: the surrogate protocol, GP surrogates, the Bayesian neural network.
* ``bojax.bo``: acquisitions, policies, acquisition optimisers, the ``init``/``ask``/``tell``
  loop, ``minimize``, journals and run folders, Dask clusters.
* ``bojax.objectives``: what BO is tested on (test functions, the reports' networks and
  data sets); library code never imports it.
* ``bojax.reports``, ``bojax.cli``, ``bojax.integrations``: the reports' reproductions,
  run figures, the ``bojax`` command, and bojax inside other tools (an Optuna sampler).

bojax does not enable float64 on import; entry points (CLI, experiments) do, and so
should scripts that fit GPs.
"""

import importlib
import os

# JAX 0.9's CPU loader logs an ERROR and a WARNING (3 KB) for every program it reads back
# from the persistent compilation cache, over two tuning pseudo-features
# ("+prefer-no-gather") it cannot find in the host's list: some 60 of them on a second
# `bojax optimize`. XLA reads its log level when jaxlib loads, so it is set here, before
# any JAX import, unless the user chose one or turned bojax's cache off. Errors that
# matter still reach Python as exceptions.
if os.environ.get("BOJAX_COMPILATION_CACHE", "on").strip().lower() not in (
    "",
    "0",
    "off",
    "false",
    "no",
):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from bojax import errors, parameters, spaces
from bojax.errors import BojaxError
from bojax.parameters import PARAMETER_KINDS, Categorical, Ordinal, Parameter
from bojax.spaces import Condition, Integer, Real, Space

# Loaded on first access, so that ``import bojax`` (and ``bojax --help``, ``bojax
# problems``) does not pay for JAX, BlackJAX, flax or Dask until they are used.
_LAZY_NAMES = {
    "Result": "bojax.bo.driver",
    "minimize": "bojax.bo.driver",
    "Settings": "bojax.bo.settings",
    **{name: "bojax.bo.loop" for name in ("ask", "ask_batch", "init", "tell")},
    "Trainings": "bojax.bo.stepwise",
}
# Modules loaded on first access; ``bojax.problems.get_problem(...)`` and
# ``from bojax import ensemble`` keep working from before the subpackages.
_LAZY = {
    "gp": "bojax.gp",
    "bo": "bojax.bo",
    "cli": "bojax.cli",
    "compilation": "bojax.compilation",
    "inference": "bojax.inference",
    "objectives": "bojax.objectives",
    "reports": "bojax.reports",
    "surrogates": "bojax.surrogates",
    **{name: f"bojax.gp.{name}" for name in ("kernels", "means", "linalg", "priors", "fantasies")},
    **{name: f"bojax.surrogates.{name}" for name in ("bnn",)},
    **{
        name: f"bojax.bo.{name}"
        for name in (
            "acquisition",
            "policies",
            "optimize",
            "settings",
            "loop",
            "driver",
            "journal",
            "cluster",
        )
    },
    **{
        name: f"bojax.objectives.{name}"
        for name in ("problems", "datasets", "ensemble", "deepnet", "archnet", "forest")
    },
}


def __getattr__(name: str):
    if name in _LAZY_NAMES:
        value = getattr(importlib.import_module(_LAZY_NAMES[name]), name)
    elif name in _LAZY:
        value = importlib.import_module(_LAZY[name])
    else:
        raise AttributeError(f"module 'bojax' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_LAZY_NAMES))


__all__ = [
    "PARAMETER_KINDS",
    "BojaxError",
    "Categorical",
    "Condition",
    "Integer",
    "Ordinal",
    "Parameter",
    "Real",
    "Result",
    "Settings",
    "Space",
    "Trainings",
    "ask",
    "ask_batch",
    "errors",
    "gp",
    "init",
    "minimize",
    "parameters",
    "spaces",
    "tell",
]
__version__ = "0.1.0"
