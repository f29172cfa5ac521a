"""Hyperparameter priors as numpyro distributions, and the unconstrained parametrisation.

A prior is a pytree shaped like the GP's parameters whose leaves are numpyro
distributions; a scalar distribution on a vector leaf (the length-scales) applies to
each element independently. Samplers move in unconstrained space ``z`` with
``params = T(z)``, ``T`` the bijection onto each distribution's support
(``numpyro.distributions.transforms.biject_to``), and target

    log p(z | data) = log p(y | X, T(z)) + sum_leaves [log p(T(z)) + log |det dT/dz|].

The default puts Half-Cauchy(1) on the amplitude, every length-scale and the noise
variance, the ensemble-design report's eq. 14 (Snoek et al. 2012's choice), and a
standard normal on a constant mean (outputs are standardised before fitting), and
Uniform(0, 1) on the arc kernel's ``rho``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.distributions.transforms import biject_to

from bojax.gp.core import GP

Prior = Any  # pytree of numpyro distributions, shaped like the parameters


def _is_distribution(leaf: Any) -> bool:
    return isinstance(leaf, dist.Distribution)


def map_prior(fn, prior: Prior, *trees):
    """``tree_map`` over a prior whose leaves are distributions (not their internals)."""
    return jax.tree.map(fn, prior, *trees, is_leaf=_is_distribution)


def default_prior(model: GP, dim: int) -> Prior:
    """Half-Cauchy(1) on every positive hyperparameter, N(0, 1) on real-valued ones."""
    params = model.init_params(dim)

    def choose(path, value):
        # Kernels name positive parameters ("amplitude", "lengthscales"); the arc kernel's
        # "rho" lies in [0, 1] (arc-kernel report, eq. 3). A future kernel with another
        # bounded or real-valued parameter should pass its own prior.
        if _is_mean_path(path):
            return dist.Normal(0.0, 1.0)
        if getattr(path[-1], "key", None) == "rho":
            return dist.Uniform(0.0, 1.0)
        return dist.HalfCauchy(1.0)

    return jax.tree_util.tree_map_with_path(choose, params)


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
