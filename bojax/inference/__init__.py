"""Posterior inference over an unconstrained pytree: one sampler family.

Every sampler follows one contract (:mod:`bojax.inference.contract`): a
:class:`SamplingAlgorithm` of ``init(position) -> state`` and ``step(key, state) ->
(state, info)`` as in BlackJAX, run by the shared driver :func:`run_kernel` (burn-in,
thinning, kept draws with a leading sample axis ``S``, a bounded number of steps), and
a :class:`SamplerRecord` in :data:`SAMPLERS` that the surrogates look up by name:

* ``"slice"``: coordinate-wise slice sampling (:mod:`~bojax.inference.slice`);
* ``"elliptical"``: elliptical slice, and two-group parallel elliptical slice for
  several chains (:mod:`~bojax.inference.elliptical`);
* ``"nuts"``: BlackJAX NUTS after window adaptation (:mod:`~bojax.inference.nuts`);
* ``"hmc-gibbs"``: HMC of one block given the others, then Gibbs draws of the others
  (the BNN's; :mod:`~bojax.inference.hmc_gibbs`);
* ``"map"`` and ``"fixed"``: one point, by multi-start L-BFGS (optax) or as given
  (:mod:`~bojax.inference.map`).

The samplers are meant to run inside a jitted function whose traced arguments (the
data) the log density closes over, so a BO run compiles once per data bucket.
"""

from bojax.inference.contract import (
    SAMPLERS,
    Chain,
    LogDensity,
    SamplerRecord,
    SamplingAlgorithm,
    effective_sample_size,
    run_kernel,
    safe_logdensity,
)
from bojax.inference.elliptical import (
    elliptical_kernel,
    elliptical_slice_chain,
    elliptical_step,
    parallel_elliptical_slice,
)
from bojax.inference.hmc_gibbs import (
    DualAveraging,
    HMCGibbsState,
    StepAdaptation,
    hmc_gibbs_chain,
    hmc_gibbs_kernel,
)
from bojax.inference.map import map_fit
from bojax.inference.nuts import nuts_chain
from bojax.inference.slice import slice_chain, slice_kernel

__all__ = [
    "SAMPLERS",
    "Chain",
    "DualAveraging",
    "HMCGibbsState",
    "LogDensity",
    "SamplerRecord",
    "SamplingAlgorithm",
    "StepAdaptation",
    "effective_sample_size",
    "elliptical_kernel",
    "elliptical_slice_chain",
    "elliptical_step",
    "hmc_gibbs_chain",
    "hmc_gibbs_kernel",
    "map_fit",
    "nuts_chain",
    "parallel_elliptical_slice",
    "run_kernel",
    "safe_logdensity",
    "slice_chain",
    "slice_kernel",
]
