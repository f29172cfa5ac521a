"""The Bayesian neural network surrogate (Agrawal 2016): a tanh MLP whose weights are
drawn by HMC-within-Gibbs.

* :mod:`bojax.surrogates.bnn.model`: the network, its priors, log joint and the Gibbs
  conditionals of its precisions;
* :mod:`bojax.surrogates.bnn.surrogate`: :class:`BNNSurrogate` (and the report's set-up
  :data:`REPORT_BNN`), which hands the model's posterior to the sampler registered as
  ``"hmc-gibbs"`` (:mod:`bojax.inference.hmc_gibbs`, with the step-size rules).
"""

from bojax.inference.hmc_gibbs import DualAveraging, StepAdaptation
from bojax.surrogates.bnn.model import (
    DEFAULT_HYPERPRIOR,
    LAYERWISE_HYPERPRIOR,
    MLP,
    PRIORS,
    REPORT_HYPERPRIOR,
    Hyperprior,
    Network,
    PrecisionGroups,
    energy,
    gibbs_precisions,
    log_joint,
    mixture_log_likelihood,
    network,
    precision_conditionals,
    precision_groups,
    predictive,
    trained_start,
)
from bojax.surrogates.bnn.surrogate import (
    DEFAULT_ADAPTATION,
    MASSES,
    REPORT_BNN,
    WARM_STARTS,
    BNNState,
    BNNSurrogate,
    Draws,
    SamplerState,
    sample,
)

__all__ = [
    "DEFAULT_ADAPTATION",
    "DEFAULT_HYPERPRIOR",
    "LAYERWISE_HYPERPRIOR",
    "MASSES",
    "MLP",
    "PRIORS",
    "REPORT_BNN",
    "REPORT_HYPERPRIOR",
    "WARM_STARTS",
    "BNNState",
    "BNNSurrogate",
    "Draws",
    "DualAveraging",
    "Hyperprior",
    "Network",
    "PrecisionGroups",
    "SamplerState",
    "StepAdaptation",
    "energy",
    "gibbs_precisions",
    "log_joint",
    "mixture_log_likelihood",
    "network",
    "precision_conditionals",
    "precision_groups",
    "predictive",
    "sample",
    "trained_start",
]
