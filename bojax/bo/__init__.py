"""The Bayesian-optimisation layer: everything between a surrogate and a finished run.

* :mod:`bojax.bo.acquisition`: EI, log-EI, PI, LCB, max-variance, integrated over samples.
* :mod:`bojax.bo.policies`: exploration policies (hybrid, variable threshold), early stop.
* :mod:`bojax.bo.optimize`: acquisition maximisers (random search, Sobol grid + gradient).
* :mod:`bojax.bo.warping`: what the surrogate sees of the outputs (standardised, ranks).
* :mod:`bojax.bo.settings`: :class:`Settings`, every run setting with its help and check.
* :mod:`bojax.bo.loop`: ``init`` / ``ask`` / ``ask_batch`` / ``tell``.
* :mod:`bojax.bo.evaluation`: the one place the objective is called.
* :mod:`bojax.bo.driver`: :func:`minimize`, sequential or over an executor.
* :mod:`bojax.bo.journal`: the crash-safe run journal.
* :mod:`bojax.bo.cluster`: Dask clusters for the driver.

Names load on first access, so that reading :class:`Settings` (the ``bojax`` command's
options) does not import JAX.
"""

import importlib

_NAMES = {
    "Settings": "bojax.bo.settings",
    "Result": "bojax.bo.driver",
    "minimize": "bojax.bo.driver",
    **{
        name: "bojax.bo.loop" for name in ("BOState", "ask", "ask_batch", "init", "predict", "tell")
    },
}


def __getattr__(name: str):
    if name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name]), name)
    elif name == "cluster":
        value = importlib.import_module("bojax.bo.cluster")
    else:
        raise AttributeError(f"module 'bojax.bo' has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = [
    "BOState",
    "Result",
    "Settings",
    "ask",
    "ask_batch",
    "cluster",
    "init",
    "minimize",
    "predict",
    "tell",
]
