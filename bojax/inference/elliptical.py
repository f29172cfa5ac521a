"""Elliptical slice sampling (Murray, Adams & MacKay 2010) around a diagonal Gaussian
reference, and its two-group parallel form (Nishihara, Murray & Adams 2014), registered
as ``"elliptical"``.

The target ``pi(z)`` is split as ``N(z; mean, diag(sd^2)) L(z)`` with ``log L = log pi -
log N``. A step draws ``nu ~ N(mean, sd^2)``, a level ``log y = log L(z) + log u`` and an
angle ``theta ~ U(0, 2 pi)``, and proposes ``z' = mean + (z - mean) cos theta + (nu -
mean) sin theta``, shrinking the angle bracket ``[theta - 2 pi, theta]`` towards 0 until
``log L(z') > log y`` (Murray, Adams & MacKay 2010, fig. 2). Every coordinate moves at
once, and a step costs a handful of density evaluations whatever the dimension.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

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

PyTree = Any


def elliptical_step(key, v, logp, logdensity, mean, sd, max_shrinkage: int = 50):
    """One elliptical slice step from ``v`` (flat; ``logp = logdensity(v)``, the full
    target) with the Gaussian reference ``N(mean, sd^2)``: returns the new point, its log
    density, whether a proposal was accepted and how many were tried (at most
    ``max_shrinkage``; then it stays at ``v``). The random draws follow BlackJAX's
    ``elliptical_slice`` kernel exactly; unlike it, the shrinkage is capped, so a batch
    of vmapped chains is never held by one whose bracket collapses onto a cliff of the
    density (a failed Cholesky)."""

    def loglikelihood(x, logp_x):
        return logp_x + 0.5 * jnp.sum(((x - mean) / sd) ** 2)

    key_slice, key_momentum, key_uniform, key_theta = jax.random.split(key, 4)
    nu = mean + sd * jax.random.normal(key_momentum, v.shape, v.dtype)
    threshold = loglikelihood(v, logp) + jnp.log(jax.random.uniform(key_uniform))
    theta = 2 * jnp.pi * jax.random.uniform(key_theta)

    def propose(theta):
        x = (v - mean) * jnp.cos(theta) + (nu - mean) * jnp.sin(theta) + mean
        logp_x = logdensity(x)
        return x, logp_x, jnp.nan_to_num(loglikelihood(x, logp_x), nan=-jnp.inf)

    def shrink(carry):
        _, _, _, tries, theta, low, high = carry
        theta = jax.random.uniform(jax.random.fold_in(key_slice, tries), minval=low, maxval=high)
        low = jnp.where(theta < 0, theta, low)
        high = jnp.where(theta > 0, theta, high)
        return *propose(theta), tries + 1, theta, low, high

    def rejected(carry):
        _, _, value, tries, *_ = carry
        return (value <= threshold) & (tries < max_shrinkage)

    carry = (*propose(theta), 1, theta, theta - 2 * jnp.pi, theta)
    x, logp_x, value, tries, *_ = jax.lax.while_loop(rejected, shrink, carry)
    accepted = value > threshold
    return jnp.where(accepted, x, v), jnp.where(accepted, logp_x, logp), accepted, tries


class EllipticalState(NamedTuple):
    """A flat point, its log density, and the density evaluations spent so far."""

    position: jax.Array
    logdensity: jax.Array
    evaluations: jax.Array


class EllipticalInfo(NamedTuple):
    is_accepted: jax.Array
    evaluations: jax.Array


def elliptical_kernel(
    logdensity_fn: LogDensity, mean: jax.Array, sd: jax.Array, max_shrinkage: int = 50
) -> SamplingAlgorithm:
    """Elliptical slice steps on flat points with the reference ``N(mean, sd^2)``."""

    def init(position):
        return EllipticalState(position, logdensity_fn(position), jnp.zeros((), int))

    def step(key, state):
        v, logp, accepted, tries = elliptical_step(
            key, state.position, state.logdensity, logdensity_fn, mean, sd, max_shrinkage
        )
        return EllipticalState(v, logp, state.evaluations + tries), EllipticalInfo(accepted, tries)

    return SamplingAlgorithm(init, step)


def elliptical_slice_chain(
    key: jax.Array,
    logdensity_fn: LogDensity,
    position: PyTree,
    num_samples: int,
    *,
    mean: jax.Array,
    sd: jax.Array,
    burn_in: int = 0,
    thin: int = 1,
    burn: bool | jax.Array = True,
    max_shrinkage: int = 50,
) -> Chain:
    """``burn_in`` + ``num_samples * thin`` elliptical slice steps on ``logdensity_fn``
    with the Gaussian reference ``(mean, sd)`` (flattened like ``position``). ``burn`` may
    be traced; the ``tuning`` returned is ``sd`` (elliptical slice adapts nothing)."""
    logdensity_fn = safe_logdensity(logdensity_fn)
    flat, unravel = jax.flatten_util.ravel_pytree(position)
    mean = jnp.broadcast_to(jnp.asarray(mean, flat.dtype), flat.shape)
    sd = jnp.broadcast_to(jnp.asarray(sd, flat.dtype), flat.shape)
    algorithm = elliptical_kernel(lambda v: logdensity_fn(unravel(v)), mean, sd, max_shrinkage)
    state, kept, infos = run_kernel(
        key, algorithm, algorithm.init(flat), num_samples, burn_in=burn_in, thin=thin, burn=burn
    )
    positions = jax.vmap(unravel)(kept)
    total = jnp.where(burn, burn_in, 0) + num_samples * thin
    diagnostics = {
        "acceptance": jnp.mean(infos.is_accepted[:, -1].astype(float)),
        "divergences": jnp.asarray(0),
        "ess": effective_sample_size(positions),
        "evaluations_per_step": state.evaluations / jnp.maximum(total, 1),
    }
    return Chain(positions, sd, diagnostics)


def parallel_elliptical_slice(
    key: jax.Array,
    logdensity_fn: LogDensity,
    positions: PyTree,
    num_samples: int,
    *,
    burn_in: int = 0,
    thin: int = 1,
    burn: bool | jax.Array = True,
    max_shrinkage: int = 50,
    min_sd: float = 0.05,
) -> Chain:
    """K chains (leading axis of ``positions``, K even) by two-group elliptical slice
    sampling (Nishihara, Murray & Adams 2014, "Parallel MCMC with generalized elliptical
    slice sampling"): each step moves the first half of the chains with a Gaussian
    reference fitted to the second half's current positions (per-coordinate mean and
    standard deviation, at least ``min_sd``), then the second half with one fitted to
    the first. Given the other group the reference is fixed, so each half-step leaves
    the target invariant, and the reference follows the posterior as data arrive instead
    of staying at a prior that grows ever wider than it. Returns draws with leading axes
    (chain, draw); ``tuning`` is the last reference sd.
    """
    logdensity_fn = safe_logdensity(logdensity_fn)
    first = jax.tree.map(lambda a: a[0], positions)
    _, unravel = jax.flatten_util.ravel_pytree(first)
    flat = jax.vmap(lambda z: jax.flatten_util.ravel_pytree(z)[0])(positions)
    chains = flat.shape[0]
    if chains < 4 or chains % 2:
        raise ValueError(
            f"two-group elliptical slice needs an even number >= 4 of chains, got {chains}"
        )
    half = chains // 2

    def logdensity(v):
        return logdensity_fn(unravel(v))

    def move(key, group, logp, others):
        mean = jnp.mean(others, axis=0)
        sd = jnp.maximum(jnp.std(others, axis=0), min_sd)
        keys = jax.random.split(key, group.shape[0])
        return jax.vmap(
            lambda k, v, lp: elliptical_step(k, v, lp, logdensity, mean, sd, max_shrinkage)
        )(keys, group, logp)

    def step(key, state):
        v, logp = state.position, state.logdensity
        key_a, key_b = jax.random.split(key)
        a, logp_a, accepted_a, tries_a = move(key_a, v[:half], logp[:half], v[half:])
        b, logp_b, accepted_b, tries_b = move(key_b, v[half:], logp[half:], a)
        tries = jnp.concatenate([tries_a, tries_b])
        state = EllipticalState(
            jnp.concatenate([a, b]),
            jnp.concatenate([logp_a, logp_b]),
            state.evaluations + jnp.sum(tries),
        )
        return state, EllipticalInfo(jnp.concatenate([accepted_a, accepted_b]), tries)

    algorithm = SamplingAlgorithm(
        lambda v: EllipticalState(v, jax.vmap(logdensity)(v), jnp.zeros((), int)), step
    )
    state, kept, infos = run_kernel(
        key, algorithm, algorithm.init(flat), num_samples, burn_in=burn_in, thin=thin, burn=burn
    )
    kept = jnp.swapaxes(kept, 0, 1)  # (chain, draw, coordinates)
    draws = jax.vmap(jax.vmap(unravel))(kept)
    total = jnp.where(burn, burn_in, 0) + num_samples * thin
    diagnostics = {
        "acceptance": jnp.mean(infos.is_accepted[:, -1].astype(float)),
        "divergences": jnp.asarray(0),
        "ess": effective_sample_size(draws, chains=True),
        "evaluations_per_step": state.evaluations / jnp.maximum(total, 1) / chains,
    }
    return Chain(draws, jnp.std(state.position, axis=0), diagnostics)


def _run(key, logdensity_fn, position, num_samples, *, burn_in, thin, burn, tuning, reference):
    mean, sd = reference
    chain = elliptical_slice_chain(
        key, logdensity_fn, position, num_samples, mean=mean, sd=sd, burn_in=burn_in,
        thin=thin, burn=burn,
    )  # fmt: skip
    return chain._replace(tuning=tuning)  # nothing to carry: the reference is the prior's


def _population(
    key, logdensity_fn, positions, num_samples, *, burn_in, thin, burn, tuning, reference
):
    chain = parallel_elliptical_slice(
        key, logdensity_fn, positions, num_samples, burn_in=burn_in, thin=thin, burn=burn
    )
    return chain._replace(tuning=tuning)  # the references are refitted at every step


SAMPLERS.register(
    SamplerRecord("elliptical", _run, kernel=elliptical_kernel, population=_population)
)
