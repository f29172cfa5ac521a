"""The No-U-Turn sampler (BlackJAX) after Stan-style window adaptation, registered as
``"nuts"``: it needs gradients and warms up afresh on every call (step size and
diagonal mass), so its chain does not continue across fits the way slice chains do."""

from __future__ import annotations

from typing import Any

import blackjax
import jax
import jax.numpy as jnp

from bojax.inference.contract import (
    SAMPLERS,
    Chain,
    LogDensity,
    SamplerRecord,
    effective_sample_size,
    run_kernel,
    safe_logdensity,
)

PyTree = Any


def nuts_chain(
    key: jax.Array,
    logdensity_fn: LogDensity,
    position: PyTree,
    num_samples: int,
    *,
    warmup: int = 256,
    thin: int = 1,
    max_num_doublings: int = 6,
    target_acceptance: float = 0.8,
) -> Chain:
    """NUTS with ``warmup`` steps of window adaptation (step size and diagonal mass),
    then ``num_samples * thin`` steps keeping every ``thin``-th.

    At most ``2^max_num_doublings`` leapfrog steps per draw (6 as BoTorch's NUTS): with
    8, one fit at d = 6, n = 60 ran past ten minutes with every tree at its cap.
    """
    if not warmup >= 1:  # (BlackJAX's window adaptation fails on 0 steps)
        raise ValueError(f"warmup must be at least 1, got {warmup!r}")
    logdensity_fn = safe_logdensity(logdensity_fn)
    warm_key, sample_key = jax.random.split(key)
    adaptation = blackjax.window_adaptation(
        blackjax.nuts,
        logdensity_fn,
        target_acceptance_rate=target_acceptance,
        max_num_doublings=max_num_doublings,
    )
    (state, parameters), _ = adaptation.run(warm_key, position, num_steps=warmup)
    parameters = {**parameters, "max_num_doublings": max_num_doublings}
    algorithm = blackjax.nuts(logdensity_fn, **parameters)
    keys = jax.random.split(sample_key, num_samples * thin)
    _, positions, infos = run_kernel(
        sample_key, algorithm, state, num_samples, thin=thin, keys=lambda i: keys[i]
    )
    diagnostics = {
        "acceptance": jnp.mean(infos.acceptance_rate),
        "divergences": jnp.sum(infos.is_divergent),
        "ess": effective_sample_size(positions),
    }
    tuning = {"step_size": parameters["step_size"], "mass": parameters["inverse_mass_matrix"]}
    return Chain(positions, tuning, diagnostics)


def _run(key, logdensity_fn, position, num_samples, *, burn_in, thin, burn, tuning, reference):
    chain = nuts_chain(key, logdensity_fn, position, num_samples, warmup=burn_in, thin=thin)
    return chain._replace(tuning=tuning)  # the next call adapts afresh


SAMPLERS.register(
    SamplerRecord("nuts", _run, kernel=blackjax.nuts, gradients=True, continues=False)
)
