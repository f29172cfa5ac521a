"""The Gaussian-process layer: pure functions on arrays, no BO.

* :mod:`bojax.gp.kernels`: kernels on one pair of points, the arc kernel, a registry.
* :mod:`bojax.gp.means`: prior means (zero, constant, the exploration mean).
* :mod:`bojax.gp.linalg`: the jitter-ladder Cholesky.
* :mod:`bojax.gp.core`: padded :class:`Data`, the :class:`GP` model, its posterior, log
  marginal likelihood, predictive and block extension (re-exported here: ``gp.GP``,
  ``gp.predict``, ...).
* :mod:`bojax.gp.priors`: hyperparameter priors and their bijections.
* :mod:`bojax.gp.fantasies`: conditioning on fantasised outcomes of pending points.
"""

from bojax.gp.core import (
    GP,
    INVERSE_LIMIT,
    Data,
    Posterior,
    bucket_size,
    condition,
    extend,
    log_marginal_likelihood,
    make_data,
    posterior,
    predict,
    predict_cov,
)

__all__ = [
    "GP",
    "INVERSE_LIMIT",
    "Data",
    "Posterior",
    "bucket_size",
    "condition",
    "extend",
    "log_marginal_likelihood",
    "make_data",
    "posterior",
    "predict",
    "predict_cov",
]
