"""Surrogates: the :class:`Surrogate` protocol, its implementations and their registry.

* :mod:`bojax.surrogates.protocol`: ``init`` / ``fit`` / ``predict`` (and the pure
  ``conditioned`` / ``predictive`` pair the loop jits), ``pack`` / ``unpack`` for journals.
* :mod:`bojax.surrogates.gaussian_process`: :class:`GPSurrogate`, a GP with sampled
  (slice, NUTS), MAP or fixed hyperparameters.
* :mod:`bojax.surrogates.bnn`: the Bayesian neural network (Agrawal 2016).
* :mod:`bojax.surrogates.classifier`: :class:`GPClassifier`, where evaluations succeed
  (failure-aware BO; Gelbart et al. 2014), registered in :data:`FAILURE_MODELS`.

A new surrogate is a class with the protocol's methods and one register call; a GP with
other priors, kernel or mean is one call::

    SURROGATES.register(GPSurrogate(model=gp.GP(kernel="rq"), prior=my_prior_fn), "gp-rq")
"""

from __future__ import annotations

from bojax import gp
from bojax.registry import Registry
from bojax.surrogates.bnn import REPORT_BNN, BNNState, BNNSurrogate
from bojax.surrogates.classifier import ClassifierState, GPClassifier
from bojax.surrogates.gaussian_process import GPState, GPSurrogate, fixed_se
from bojax.surrogates.protocol import Surrogate, for_space

_BUILT_IN: dict[str, Surrogate] = {
    # The default: Spearmint's sampler, one coordinate-slice chain burning in 256 sweeps on
    # the first fit and continuing by 16 sweeps per fit, each kept (Spearmint kept 10,
    # BoTorch keeps 16); Half-Cauchy priors but a small-noise prior on the noise variance
    # (bojax.gp.priors.small_noise_prior). Against 128 kept sweeps under the reports'
    # Half-Cauchy priors: 1/8 of the fit and acquisition cost, and lower median regret on
    # 5 of 6 functions (benchmarks/README.md, engine v2 part 3).
    "gp-slice": GPSurrogate(method="slice", num_samples=16, prior="small-noise"),
    # The fast one: 16 elliptical slice chains side by side in two groups, each continued
    # by 8 steps per fit keeping every second draw (64 draws), Half-Cauchy priors.
    "gp-ess": GPSurrogate(
        method="elliptical", chains=16, num_samples=64, thin=2, burn_in=128, prior="half-cauchy"
    ),
    "gp-hmc": GPSurrogate(method="nuts"),
    "gp-map": GPSurrogate(method="map"),
    # The ensemble-design report's model: Matern-5/2 ARD, exploration mean (eq. 7), slice.
    "gp-slice-exploration": GPSurrogate(model=gp.GP(mean="exploration"), method="slice"),
    # The arc-kernel report's models for conditional spaces: the arc kernel (Matern-5/2 on
    # the embedding) and its baseline, Matern-5/2 ARD on randomly filled inputs.
    "gp-slice-arc": GPSurrogate(model=gp.GP(kernel="arc"), method="slice"),
    "gp-slice-filled": GPSurrogate(model=gp.GP(kernel="matern52-filled"), method="slice"),
    # The hybrid-exploration report's GP: squared exponential ARD, fitted by maximum
    # evidence; and the architecture-search report's: SE with hand-fixed alpha, sigma, ell
    # (on unit-cube inputs and standardised outputs), beside it the same kernel sampled.
    "gp-map-se": GPSurrogate(model=gp.GP(kernel="se"), method="map"),
    "gp-fixed-se": GPSurrogate(
        model=gp.GP(kernel="se", mean="zero"), method="fixed", fixed=fixed_se(1.0, 0.3, 0.1)
    ),
    "gp-slice-se": GPSurrogate(model=gp.GP(kernel="se"), method="slice"),
    # A Bayesian neural network, 3 x 50 tanh, HMC with Gibbs precisions (bojax.surrogates.bnn):
    # layerwise fan-in-scaled precisions, prior-matched masses, dual-averaged step size, a
    # least-squares warm start (not the MAP: docs/design.md) and rank-warped outputs.
    "bnn-hmc": BNNSurrogate(),
    # The BNN report's own set-up (Agrawal 2016): one shared weight precision, unit masses,
    # its step-size rule, precisions held for half the first burn-in, standardised outputs.
    "bnn-report": REPORT_BNN,
}


SURROGATES: Registry[Surrogate] = Registry("surrogate")
for _name, _surrogate in _BUILT_IN.items():
    SURROGATES.register(_surrogate, _name)


class DropFailures:
    """The failure model ``"none"``: failed evaluations are journalled and never proposed
    again, and that is all (no classifier, no weighting of the acquisition)."""

    name = "none"


# What learns where evaluations fail; the loop weights its acquisition by P(success).
FAILURE_MODELS: Registry[GPClassifier | DropFailures] = Registry("failure model")
# A probit GP classifier (Matern-5/2 ARD, failure_region_prior), latents and
# hyperparameters sampled by elliptical slice (bojax.surrogates.classifier).
FAILURE_MODELS.register(GPClassifier(), "gp-probit")
FAILURE_MODELS.register(DropFailures())


def get_failure_model(name: str) -> GPClassifier | None:
    """The registered failure model ``name``; None for ``"none"`` (failures only dropped)."""
    model = FAILURE_MODELS.get(name)
    return None if isinstance(model, DropFailures) else model


def get_surrogate(name: str | Surrogate) -> Surrogate:
    """The registered surrogate ``name``; a surrogate object passes through."""
    return SURROGATES.get(name) if isinstance(name, str) else name


__all__ = [
    "FAILURE_MODELS",
    "SURROGATES",
    "BNNState",
    "BNNSurrogate",
    "ClassifierState",
    "DropFailures",
    "GPClassifier",
    "GPState",
    "GPSurrogate",
    "Surrogate",
    "fixed_se",
    "for_space",
    "get_failure_model",
    "get_surrogate",
]
