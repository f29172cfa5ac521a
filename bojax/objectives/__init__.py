"""What bojax is tested on: objectives for BO, never imported by the library itself.

* :mod:`bojax.objectives.problems`: analytic test functions with known optima.
* :mod:`bojax.objectives.datasets`: the reports' data sets from recorded seeds.
* :mod:`bojax.objectives.ensemble`: DropConnect MLP ensembles (the ensemble-design report).
* :mod:`bojax.objectives.deepnet`: conditional deep nets on digits (the arc-kernel report).
* :mod:`bojax.objectives.archnet`: architecture vectors (the architecture-search report).
* :mod:`bojax.objectives.forest`: random-forest tree counts (the hybrid-exploration report).

Each trains its networks in one jitted, padded program, so a BO run compiles once.
"""
