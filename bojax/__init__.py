"""bojax: Bayesian optimisation of neural-network designs in JAX.

The package is layered; each layer imports only those above it in this list:

* ``bojax.errors``, ``bojax.spaces``, ``bojax.compilation``: typed errors, search spaces,
  compilation counting.
* ``bojax.gp``: kernels, means, the jitter-ladder Cholesky, the GP core, priors, fantasies.
* ``bojax.inference``: MAP, slice sampling and NUTS over any log density.
* ``bojax.surrogates``: the surrogate protocol, GP surrogates, the Bayesian neural network.
* ``bojax.bo``: acquisitions, policies, acquisition optimisers, the ``init``/``ask``/``tell``
  loop, ``minimize``, journals, Dask clusters.
* ``bojax.objectives``: what BO is tested on (test functions, the reports' networks and
  data sets); library code never imports it.
* ``bojax.reports``, ``bojax.cli``: the reports' reproductions and the ``bojax`` command.

bojax does not enable float64 on import; entry points (CLI, experiments) do, and so
should scripts that fit GPs.
"""

import importlib
import os


def _avoid_cpu_scheduler_deadlock() -> None:
    """Turn off XLA's concurrency-optimised CPU scheduler unless ``XLA_FLAGS`` sets it.

    With it on, a fit of 16 vmapped slice chains (d = 6, n = 60) never returned on this
    2-core machine, every XLA thread asleep, on every try (jax 0.10.2); pinned to one
    core, or with this scheduler off, it finished every time (5 of 5), and so did every
    other fit tried. ``--xla_cpu_multi_thread_eigen=false``, the cure PyAutoFit found for
    a similar wedge (PyAutoLabs/PyAutoFit#1528), did not help here. XLA reads the flags
    when its CPU backend starts, so this works whenever bojax is imported before the
    first JAX computation (docs/design.md).
    """
    flag = "xla_cpu_enable_concurrency_optimized_scheduler"
    flags = os.environ.get("XLA_FLAGS", "")
    if flag not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --{flag}=false".strip()


_avoid_cpu_scheduler_deadlock()

from bojax import errors, spaces  # noqa: E402
from bojax.errors import BojaxError  # noqa: E402
from bojax.spaces import Condition, Integer, Real, Space  # noqa: E402

# Loaded on first access, so that ``import bojax`` (and ``bojax --help``, ``bojax
# problems``) does not pay for JAX, BlackJAX, flax or Dask until they are used.
_LAZY_NAMES = {
    "Result": "bojax.bo.driver",
    "minimize": "bojax.bo.driver",
    **{name: "bojax.bo.loop" for name in ("Settings", "ask", "ask_batch", "init", "tell")},
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
        for name in ("acquisition", "policies", "optimize", "loop", "driver", "journal", "cluster")
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
    "BojaxError",
    "Condition",
    "Integer",
    "Real",
    "Result",
    "Settings",
    "Space",
    "ask",
    "ask_batch",
    "errors",
    "gp",
    "init",
    "minimize",
    "spaces",
    "tell",
]
__version__ = "0.1.0"
