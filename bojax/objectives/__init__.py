"""What bojax is tested on: objectives for BO, never imported by the library itself.

* :mod:`bojax.objectives.problems`: analytic test functions with known optima.
* :mod:`bojax.objectives.datasets`: the reports' data sets from recorded seeds.
* :mod:`bojax.objectives.ensemble`: DropConnect MLP ensembles (the ensemble-design report).
* :mod:`bojax.objectives.deepnet`: conditional deep nets on digits (the arc-kernel report).
* :mod:`bojax.objectives.archnet`: architecture vectors (the architecture-search report).
* :mod:`bojax.objectives.forest`: random-forest tree counts (the hybrid-exploration report).
* :mod:`bojax.objectives.mixed`: test problems with categorical parameters.
* :mod:`bojax.objectives.mixednet`: MLPs on MNIST-1D over every parameter kind.
* :mod:`bojax.objectives.multiobjective`: test problems with several objectives.
* :mod:`bojax.objectives.batching`: several step-wise trainings as one vmapped program.

Each trains its networks in one jitted, padded program, so a BO run compiles once.
"""

import importlib

_SUBMODULES = (
    "problems", "datasets", "ensemble", "deepnet", "archnet", "forest",
    "mixed", "mixednet", "multiobjective", "batching",
)  # fmt: skip


def __getattr__(name: str):
    """``bojax.objectives.problems`` and the others load on first access (as the README
    uses them), without importing every report's networks up front."""
    if name in _SUBMODULES:
        return importlib.import_module(f"bojax.objectives.{name}")
    raise AttributeError(f"module 'bojax.objectives' has no attribute {name!r}")
