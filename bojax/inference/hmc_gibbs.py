"""HMC-within-Gibbs: an HMC transition of one block of variables given the others, then
a Gibbs draw of the others given it; registered as ``"hmc-gibbs"`` (the BNN's sampler).

The target is ``p(x, c)`` with ``x`` the HMC block (a flat vector) and ``c`` the
*conditions* (any pytree, e.g. precisions). A step is one BlackJAX HMC transition of
``x`` under ``log p(x | c)`` (``L`` leapfrog steps at the step size jittered by a
uniform factor ``1 +- jitter`` against periodic trajectories, Neal 2011, sec. 5.4.2.2;
a diagonal inverse mass ``inverse_mass(c)``, unit by default), then ``c ~ p(c | x)``
drawn by the caller's ``gibbs(key, x)``. Without ``gibbs`` the conditions are held and
this is plain HMC. The step size adapts during burn-in only, by the BNN report's rule
(:class:`StepAdaptation`, Agrawal 2016, sec. 3.2) or by dual averaging
(:class:`DualAveraging`, Hoffman & Gelman 2014, sec. 3.2.1), and is frozen while draws
are kept, so the kept chain is a valid MCMC chain. Bounded: exactly ``(burn_in +
num_samples thin) (L + 1)`` gradient evaluations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import blackjax
import jax
import jax.numpy as jnp

from bojax.inference.contract import (
    SAMPLERS,
    Chain,
    SamplerRecord,
    SamplingAlgorithm,
    effective_sample_size,
    run_kernel,
)

PyTree = Any


class StepAdaptation(NamedTuple):
    """The report's step-size rule: EMA of acceptance, multiplicative increase/decrease.
    Its state is ``(step, average)``; the average starts at the target each fit."""

    target: float = 0.8
    slowness: float = 0.9  # EMA weight of the past
    increase: float = 1.02
    decrease: float = 0.98
    min_step: float = 1e-6
    max_step: float = 0.5
    jitter: float = 0.2  # each transition uses step * U(1 - jitter, 1 + jitter)

    def init(self, step):
        return jnp.asarray(step, float), jnp.asarray(self.target, float)

    def current(self, state):
        return state[0]

    def update(self, state, acceptance):
        step, average = state
        average = self.slowness * average + (1 - self.slowness) * acceptance
        step = step * jnp.where(average > self.target, self.increase, self.decrease)
        return jnp.clip(step, self.min_step, self.max_step), average

    def final(self, state):
        return state[0]


class DualAveraging(NamedTuple):
    """Dual averaging of ``log step`` toward a target acceptance (Hoffman & Gelman 2014,
    sec. 3.2.1, BlackJAX's implementation); the frozen step is the averaged iterate."""

    target: float = 0.75
    jitter: float = 0.2

    def _scheme(self):
        return blackjax.adaptation.step_size.dual_averaging_adaptation(self.target)

    def init(self, step):
        state = self._scheme()[0](jnp.asarray(step, float))
        # Fixed dtypes, so the state can be a loop carry.
        zero = jnp.zeros((), float)
        return state._replace(log_step_size_avg=zero, step=jnp.ones((), jnp.int32), avg_error=zero)

    def current(self, state):
        return jnp.exp(state.log_step_size)

    def update(self, state, acceptance):
        return self._scheme()[1](state, acceptance)

    def final(self, state):
        return self._scheme()[2](state)


DEFAULT_ADAPTATION = StepAdaptation()


DUAL_AVERAGING = DualAveraging()


class HMCGibbsState(NamedTuple):
    """Where the chain stands: the HMC block, the conditions and the step size."""

    position: jax.Array
    conditions: PyTree
    step_size: jax.Array


class HMCGibbsInfo(NamedTuple):
    acceptance: jax.Array  # the HMC transition's (0 where it was not finite)
    is_divergent: jax.Array


def hmc_gibbs_kernel(
    logdensity_fn: Callable[[jax.Array, PyTree], jax.Array],
    gibbs: Callable[[jax.Array, jax.Array], PyTree] | None = None,
    inverse_mass: Callable[[PyTree], jax.Array] | None = None,
    *,
    leapfrog_steps: int = 50,
    jitter: float = 0.2,
) -> SamplingAlgorithm:
    """Steps of HMC on ``logdensity_fn(x, c)`` in ``x``, then ``c = gibbs(key, x)``;
    ``init(position, conditions=None, step_size=0.01)``."""
    kernel = blackjax.mcmc.hmc.build_kernel()

    def init(position, conditions=None, step_size=0.01):
        return HMCGibbsState(position, conditions, jnp.asarray(step_size, float))

    def step(key, state):
        hmc_key, gibbs_key, jitter_key = jax.random.split(key, 3)
        scale = jitter * jax.random.uniform(jitter_key, minval=-1.0, maxval=1.0)

        def logdensity(x):
            return logdensity_fn(x, state.conditions)

        mass = jnp.ones_like(state.position) if inverse_mass is None else None
        mass = inverse_mass(state.conditions) if inverse_mass is not None else mass
        hmc_state = blackjax.mcmc.hmc.init(state.position, logdensity)
        hmc_state, info = kernel(
            hmc_key, hmc_state, logdensity, state.step_size * (1.0 + scale), mass, leapfrog_steps
        )
        position = hmc_state.position
        conditions = state.conditions if gibbs is None else gibbs(gibbs_key, position)
        acceptance = jnp.where(jnp.isfinite(info.acceptance_rate), info.acceptance_rate, 0.0)
        state = state._replace(position=position, conditions=conditions)
        return state, HMCGibbsInfo(acceptance, info.is_divergent)

    return SamplingAlgorithm(init, step)


def hmc_gibbs_chain(
    key: jax.Array,
    logdensity_fn: Callable[[jax.Array, PyTree], jax.Array],
    position: jax.Array,
    num_samples: int,
    *,
    conditions: PyTree = None,
    gibbs: Callable[[jax.Array, jax.Array], PyTree] | None = None,
    inverse_mass: Callable[[PyTree], jax.Array] | None = None,
    step_size: jax.Array | float = 0.01,
    burn_in: int | jax.Array = 0,
    thin: int = 1,
    leapfrog_steps: int = 50,
    adaptation: StepAdaptation | DualAveraging = DUAL_AVERAGING,
) -> Chain:
    """``burn_in`` steps adapting the step size (may be traced), then ``num_samples *
    thin`` at the frozen step keeping every ``thin``-th. Draws are ``(x, c)`` pairs
    (leading axis ``S``); ``tuning`` is the frozen step size, where the next call starts.
    Burn-in steps draw with ``fold_in(k_burn, i)``, kept blocks of ``thin`` steps with
    ``split(split(k_keep, S)[s], thin)``, ``k_burn, k_keep = split(key)``."""
    algorithm = hmc_gibbs_kernel(
        logdensity_fn, gibbs, inverse_mass, leapfrog_steps=leapfrog_steps,
        jitter=adaptation.jitter,
    )  # fmt: skip
    state = algorithm.init(position, conditions, step_size)
    burn_key, keep_key = jax.random.split(key)

    def burn(i, carry):
        state, adapted, accepted = carry
        state = state._replace(step_size=adaptation.current(adapted))
        state, info = algorithm.step(jax.random.fold_in(burn_key, i), state)
        return state, adaptation.update(adapted, info.acceptance), accepted + info.acceptance

    start = (state, adaptation.init(state.step_size), jnp.zeros((), float))
    burnt, adapted, accepted = jax.lax.fori_loop(0, burn_in, burn, start)
    step = jnp.where(burn_in > 0, adaptation.final(adapted), burnt.step_size)
    keys = jax.vmap(lambda k: jax.random.split(k, thin))(jax.random.split(keep_key, num_samples))
    keys = keys.reshape(-1, *keys.shape[2:])  # (a legacy uint32 key keeps its last axis)
    state, draws, infos = run_kernel(
        keep_key, algorithm, burnt._replace(step_size=step), num_samples, thin=thin,
        keys=lambda i: keys[i], keep=lambda s: (s.position, s.conditions),
    )  # fmt: skip
    diagnostics = {
        "acceptance": jnp.mean(infos.acceptance),
        "burn_in_acceptance": jnp.where(burn_in > 0, accepted / jnp.maximum(burn_in, 1), jnp.nan),
        "divergences": jnp.sum(infos.is_divergent),
        "ess": effective_sample_size(draws),
        "step_size": step,
    }
    return Chain(draws, state.step_size, diagnostics)


def _run(
    key, logdensity_fn, position, num_samples, *, burn_in, thin, burn, tuning, reference,
    **blocks,
):  # fmt: skip
    """The uniform call; ``blocks`` (``conditions``, ``gibbs``, ``inverse_mass``,
    ``leapfrog_steps``, ``adaptation``) reach :func:`hmc_gibbs_chain`. Without
    ``conditions`` the target is ``logdensity_fn(x)`` (plain HMC, flat ``x`` or a
    pytree); ``tuning`` holds the step size (its smallest entry is used)."""
    if "conditions" not in blocks:
        flat, unravel = jax.flatten_util.ravel_pytree(position)
        chain = hmc_gibbs_chain(
            key, lambda x, _: logdensity_fn(unravel(x)), flat, num_samples,
            step_size=jnp.min(jnp.asarray(tuning, float)), burn_in=jnp.where(burn, burn_in, 0),
            thin=thin, **blocks,
        )  # fmt: skip
        step = jnp.broadcast_to(chain.tuning, jnp.shape(tuning))
        return Chain(jax.vmap(unravel)(chain.positions[0]), step, chain.diagnostics)
    return hmc_gibbs_chain(
        key, logdensity_fn, position, num_samples, step_size=tuning,
        burn_in=jnp.where(burn, burn_in, 0), thin=thin, **blocks,
    )  # fmt: skip


SAMPLERS.register(SamplerRecord("hmc-gibbs", _run, kernel=hmc_gibbs_kernel, gradients=True))
