"""Hyperparameter priors as numpyro distributions, and the unconstrained parametrisation.

A prior is a pytree shaped like the GP's parameters whose leaves are numpyro
distributions; a scalar distribution on a vector leaf (the length-scales) applies to
each element independently. Samplers move in unconstrained space ``z`` with
``params = T(z)``, ``T`` the bijection onto each distribution's support
(``numpyro.distributions.transforms.biject_to``), and target

    log p(z | data) = log p(y | X, T(z)) + sum_leaves [log p(T(z)) + log |det dT/dz|].

Named prior sets (:data:`PRIOR_SETS`; a new one is a ``(model, dim) -> prior`` function
and one ``PRIOR_SETS.register(fn, "name")`` call):

* ``half-cauchy``: Half-Cauchy(1) on the amplitude, every length-scale and the noise
  variance, the ensemble-design report's eq. 14 (Snoek et al. 2012's choice). Every
  report reproduction that specifies it keeps it.
* ``lognormal``: dimension-scaled LogNormal length-scales, ``log ell ~ N(sqrt 2 +
  log(d) / 2, 3)`` (Hvarfner, Hellsten & Nardi 2024, BoTorch's default since 0.12), with
  ``log sigma_n^2 ~ N(-4, 1)`` (BoTorch's noise prior) and ``log alpha ~ N(0, 1)`` on
  the amplitude of standardised outputs. Gaussian in the sampler's coordinates, which
  elliptical slice sampling uses as its reference exactly.

* ``small-noise``: Half-Cauchy(1) on amplitude and length-scales, ``Gamma(1.1, 30)`` on
  the noise variance (Optuna's noise prior); the engine's default (``gp-slice``).

All put a standard normal on a constant mean (outputs are standardised before fitting)
and Uniform(0, 1) on the arc kernel's ``rho``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from jax.scipy.special import digamma, polygamma
from numpyro.distributions.transforms import biject_to

from bojax.gp.core import GP
from bojax.registry import Registry

Prior = Any  # pytree of numpyro distributions, shaped like the parameters


def _is_distribution(leaf: Any) -> bool:
    return isinstance(leaf, dist.Distribution)


def map_prior(fn, prior: Prior, *trees):
    """``tree_map`` over a prior whose leaves are distributions (not their internals)."""
    return jax.tree.map(fn, prior, *trees, is_leaf=_is_distribution)


#: The prior of the additive categorical part's amplitude (:class:`~bojax.gp.kernels.
#: Overlap`), the same in every prior set: narrow, so a choice's own effect must show in
#: the data before it counts. Against Half-Cauchy(1), as the amplitude has, the median
#: final value of bojax went from -0.0018 to -0.0246 on Func2C (20 seeds, optimum -0.206)
#: and from 13.95 to 13.68 on pest control (6 seeds); ``docs/design.md``.
ADDITIVE_PRIOR = dist.HalfCauchy(0.1)


def _prior_by_name(model: GP, dim: int, positive: Callable[[str], dist.Distribution]) -> Prior:
    """N(0, 1) on mean parameters, Uniform(0, 1) on ``rho``, :data:`ADDITIVE_PRIOR` on
    ``additive``, ``positive(name)`` elsewhere."""
    params = model.init_params(dim)

    def choose(path, value):
        # Kernels name positive parameters ("amplitude", "lengthscales"); the arc kernel's
        # "rho" lies in [0, 1] (arc-kernel report, eq. 3). A future kernel with another
        # bounded or real-valued parameter should pass its own prior.
        if _is_mean_path(path):
            return dist.Normal(0.0, 1.0)
        name = getattr(path[-1], "key", None)
        if name == "rho":
            return dist.Uniform(0.0, 1.0)
        if name == "additive":
            return ADDITIVE_PRIOR
        return positive(name)

    return jax.tree_util.tree_map_with_path(choose, params)


def half_cauchy_prior(model: GP, dim: int) -> Prior:
    """Half-Cauchy(1) on every positive hyperparameter (ensemble-design report, eq. 14)."""
    return _prior_by_name(model, dim, lambda name: dist.HalfCauchy(1.0))


def lognormal_prior(model: GP, dim: int) -> Prior:
    """Dimension-scaled LogNormal length-scales (Hvarfner et al. 2024): ``log ell ~
    N(sqrt 2 + log(d) / 2, sqrt 3^2)``; noise variance ``LogNormal(-4, 1)``; amplitude
    ``LogNormal(0, 1)``."""
    lengthscale = dist.LogNormal(math.sqrt(2.0) + 0.5 * math.log(dim), math.sqrt(3.0))

    def positive(name):
        if name == "lengthscales":
            return lengthscale
        return dist.LogNormal(-4.0, 1.0) if name == "noise" else dist.LogNormal(0.0, 1.0)

    return _prior_by_name(model, dim, positive)


def small_noise_prior(model: GP, dim: int) -> Prior:
    """Half-Cauchy(1) on the amplitude and length-scales (as :func:`half_cauchy_prior`),
    ``Gamma(1.1, rate 30)`` on the noise variance of the standardised outputs (Optuna's
    ``GPSampler``: mode 0.003, mean 0.037). Half-Cauchy(1) on the noise variance puts half
    its mass above the outputs' whole variance; with this prior the likelihood still
    raises the noise where the data are noisy (a variance of 0.3 costs 9 nats). With it
    the default chain's median regret was lower than with Half-Cauchy noise on all six
    benchmark functions, same seeds (``benchmarks/README.md``, engine v2 part 3)."""
    noise = dist.Gamma(1.1, 30.0)
    return _prior_by_name(
        model, dim, lambda name: noise if name == "noise" else dist.HalfCauchy(1.0)
    )


PRIOR_SETS: Registry[Callable[[GP, int], Prior]] = Registry("prior")
PRIOR_SETS.register(half_cauchy_prior, "half-cauchy")
PRIOR_SETS.register(lognormal_prior, "lognormal")
PRIOR_SETS.register(small_noise_prior, "small-noise")

default_prior = (
    half_cauchy_prior  # the reports' prior; the engine's default is chosen in surrogates
)


def get_prior(name: str | Callable[[GP, int], Prior]) -> Callable[[GP, int], Prior]:
    """A prior set by name (:data:`PRIOR_SETS`), or a ``(model, dim) -> prior`` as given."""
    if callable(name):
        return name
    return PRIOR_SETS.get(name)


def _is_mean_path(path) -> bool:
    return bool(path) and getattr(path[0], "key", None) == "mean"


def to_unconstrained(prior: Prior, params) -> Any:
    """``z = T^{-1}(params)``."""
    return map_prior(lambda d, p: biject_to(d.support).inv(jnp.asarray(p)), prior, params)


def to_constrained(prior: Prior, z) -> Any:
    """``params = T(z)``."""
    return map_prior(lambda d, u: biject_to(d.support)(u), prior, z)


def log_prior_unconstrained(prior: Prior, z) -> jax.Array:
    """``sum [log p(T(z)) + log |det dT/dz|]`` over all leaves and elements."""

    def term(d, u):
        transform = biject_to(d.support)
        value = transform(u)
        return jnp.sum(d.log_prob(value) + transform.log_abs_det_jacobian(u, value))

    return sum(jax.tree.leaves(map_prior(term, prior, z)))


def sample_unconstrained(key: jax.Array, prior: Prior, like) -> Any:
    """A draw from the prior, in unconstrained space, with the shapes of ``like``."""
    leaves = jax.tree.leaves(prior, is_leaf=_is_distribution)
    keys = iter(jax.random.split(key, len(leaves)))
    return map_prior(
        lambda d, p: biject_to(d.support).inv(d.sample(next(keys), jnp.shape(p))), prior, like
    )


def gaussian_reference(prior: Prior, like) -> tuple[Any, Any]:
    """Mean and standard deviation of a Gaussian close to the prior in unconstrained
    coordinates, leaf by leaf (shapes of ``like``): the reference of elliptical slice
    sampling. Exact where the prior is Gaussian there (Normal; LogNormal under ``log``);
    moment-matched otherwise: Half-Cauchy(s) under ``log`` is the hyperbolic secant law
    centred at ``log s`` with sd ``pi / 2``, Gamma(a, b) under ``log`` has mean
    ``digamma(a) - log b`` and sd ``sqrt(trigamma(a))``, Uniform(a, b) under the logit
    its logistic law with sd ``pi / sqrt 3``; any other prior gets N(0, 2^2)."""

    def moments(d, p):
        shape = jnp.shape(p)
        if isinstance(d, dist.LogNormal | dist.Normal):
            loc, scale = d.loc, d.scale
        elif isinstance(d, dist.HalfCauchy):
            loc, scale = jnp.log(d.scale), math.pi / 2
        elif isinstance(d, dist.Gamma):
            # log X for X ~ Gamma(a, rate b): mean digamma(a) - log b, variance trigamma(a).
            loc = digamma(d.concentration) - jnp.log(d.rate)
            scale = jnp.sqrt(polygamma(1, d.concentration))
        elif isinstance(d, dist.Uniform):
            loc, scale = 0.0, math.pi / math.sqrt(3.0)
        else:
            loc, scale = 0.0, 2.0
        return (
            jnp.broadcast_to(jnp.asarray(loc, float), shape),
            jnp.broadcast_to(jnp.asarray(scale, float), shape),
        )

    pairs = map_prior(moments, prior, like)
    is_pair = lambda x: isinstance(x, tuple)  # noqa: E731
    return (
        jax.tree.map(lambda m: m[0], pairs, is_leaf=is_pair),
        jax.tree.map(lambda m: m[1], pairs, is_leaf=is_pair),
    )
