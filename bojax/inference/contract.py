"""The one contract every sampler follows, its registry, and the driver that runs it.

A sampler is, as in BlackJAX, a pair of pure functions over a state pytree:

* ``init(position) -> state`` (the state has a ``.position``), and
* ``step(key, state) -> (state, info)``, one transition that leaves the target invariant,

bundled as a :class:`SamplingAlgorithm` by a factory that closes over the log density
(``kernel(logdensity_fn, ...)``). An optional ``tune(state, info, burning, last) ->
state`` adapts the state during burn-in (slice widths); it runs after every step and
must leave the state as it is once ``burning`` is false.

:func:`run_kernel` is the shared driver: ``burn_in`` steps (if ``burn``, which may be
traced) then ``num_samples * thin`` steps in **one** loop with a traced trip count (the
log density is compiled once, not once per phase), keeping every ``thin``-th state's
draw in a leading sample axis ``S``. Every call is bounded: a fixed number of steps,
each with capped expansions, shrinkages or tree doublings inside.

A :class:`SamplerRecord` in :data:`SAMPLERS` is what the surrogates look up by name:
its ``run`` (draws with a leading axis, as a :class:`Chain`) and what the callers must
know of it (gradients, one point or draws, whether its chain continues across fits).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import blackjax
import jax
import jax.numpy as jnp

from bojax.errors import SettingsError
from bojax.registry import Registry

PyTree = Any
LogDensity = Callable[[PyTree], jax.Array]


class SamplingAlgorithm(NamedTuple):
    """``init(position) -> state`` and ``step(key, state) -> (state, info)`` (BlackJAX's
    shape), and ``tune(state, info, burning, last) -> state`` for burn-in adaptation."""

    init: Callable[[PyTree], Any]
    step: Callable[[jax.Array, Any], tuple[Any, Any]]
    tune: Callable[[Any, Any, jax.Array, jax.Array], Any] | None = None


class Chain(NamedTuple):
    """Draws (leading axis ``S``) and what is needed to continue or judge the chain."""

    positions: PyTree
    tuning: PyTree  # sampler tuning carried to the next call (slice widths; a step size)
    diagnostics: dict[str, jax.Array]

    @property
    def last(self) -> PyTree:
        """The final draw: where the next call continues the chain."""
        return jax.tree.map(lambda a: a[-1], self.positions)


def safe_logdensity(logdensity_fn: LogDensity) -> LogDensity:
    """Map NaN to ``-inf`` so that no sampler or optimiser ever accepts a NaN point."""

    def wrapped(*args):
        value = logdensity_fn(*args)
        return jnp.where(jnp.isnan(value), -jnp.inf, value)

    return wrapped


def effective_sample_size(positions: PyTree, chains: bool = False) -> jax.Array:
    """Smallest ESS over all coordinates (BlackJAX's estimator) of one chain's draws, or
    with ``chains`` of several chains' (leading axes: chain, draw). With fewer than four
    draws per chain there is nothing to estimate from, and the number of draws is returned."""
    ravel = jax.vmap(lambda z: jax.flatten_util.ravel_pytree(z)[0])
    flat = jax.vmap(ravel)(positions) if chains else ravel(positions)[None]
    if flat.shape[1] < 4:
        return jnp.asarray(flat.shape[0] * flat.shape[1], dtype=flat.dtype)
    return jnp.min(blackjax.ess(flat, chain_axis=0, sample_axis=1))


def _position(state) -> PyTree:
    return state.position


def run_kernel(
    key: jax.Array,
    algorithm: SamplingAlgorithm,
    state: Any,
    num_samples: int,
    *,
    burn_in: int | jax.Array = 0,
    thin: int = 1,
    burn: bool | jax.Array = True,
    keys: Callable[[jax.Array], jax.Array] | None = None,
    keep: Callable[[Any], PyTree] = _position,
) -> tuple[Any, PyTree, Any]:
    """``B = burn_in`` (0 unless ``burn``; both may be traced) + ``num_samples * thin``
    steps of ``algorithm`` from ``state`` in one loop. Step ``i`` draws with
    ``fold_in(key, i)`` (or ``keys(i)``); ``tune`` runs after each step with ``burning =
    i < B`` and ``last = i == B - 1``. Returns the final state, ``keep(state)`` after
    steps ``B + t thin - 1`` for ``t = 1..num_samples`` (leading axis ``S``), and the
    ``info`` of every step after burn-in, shaped ``(num_samples, thin, ...)`` (the kept
    steps' are ``[:, -1]``)."""
    burn_steps = jnp.where(burn, burn_in, 0)
    total = burn_steps + num_samples * thin
    key_of = (lambda i: jax.random.fold_in(key, i)) if keys is None else keys
    tune = getattr(algorithm, "tune", None)  # BlackJAX's own algorithms have none
    draw, info = jax.eval_shape(lambda s: (keep(s), algorithm.step(key_of(0), s)[1]), state)

    def empty(leaf, *shape):
        return jnp.zeros((*shape, *leaf.shape), leaf.dtype)

    def body(i, carry):
        state, kept, infos = carry
        state, info = algorithm.step(key_of(i), state)
        burning = i < burn_steps
        if tune is not None:
            state = tune(state, info, burning, i == burn_steps - 1)
        after = i - burn_steps  # the sampling step's index, negative while burning in
        slot = jnp.clip(after // thin, 0, num_samples - 1)
        within = after % thin
        kept = jax.tree.map(
            lambda a, new: a.at[slot].set(jnp.where(~burning & (within == thin - 1), new, a[slot])),
            kept,
            keep(state),
        )
        infos = jax.tree.map(
            lambda a, new: a.at[slot, within].set(jnp.where(burning, a[slot, within], new)),
            infos,
            info,
        )
        return state, kept, infos

    carry = (
        state,
        jax.tree.map(lambda leaf: empty(leaf, num_samples), draw),
        jax.tree.map(lambda leaf: empty(leaf, num_samples, thin), info),
    )
    return jax.lax.fori_loop(0, total, body, carry)


@dataclass(frozen=True)
class SamplerRecord:
    """A sampler as the rest of bojax sees it.

    ``run`` is called the same way for every record of a kind. Draw records (``point``
    false): ``run(key, logdensity_fn, position, num_samples, *, burn_in, thin, burn,
    tuning, reference) -> Chain`` for one chain from ``position``, where ``burn`` (may be
    traced) says whether to burn in, ``tuning`` is what the previous call returned in
    ``Chain.tuning`` (initially ones shaped like the flat position), and ``reference`` a
    flat Gaussian ``(mean, sd)`` near the target (the prior's) for samplers that use one.
    Point records: ``run(key, logdensity_fn, starts, *, count, steps) -> Chain`` with
    ``S = 1`` from the first ``count`` of ``starts`` (leading axis).

    ``kernel`` is the :class:`SamplingAlgorithm` factory where the sampler has one;
    ``population`` a run that moves several chains jointly (leading axis of
    ``position``; an even number, at least 4), which callers prefer for such chains.
    """

    name: str
    run: Callable[..., Chain]
    kernel: Callable[..., SamplingAlgorithm] | None = None
    gradients: bool = False  # needs the gradient of the log density
    point: bool = False  # one point (S = 1, no chains) instead of draws
    continues: bool = True  # burns in on a run's first fit only; later fits continue
    moves: bool = True  # False: the start is the answer (hyperparameters given by hand)
    population: Callable[..., Chain] | None = None


def _check(record: Any) -> None:
    if not isinstance(record, SamplerRecord) or not callable(record.run):
        raise SettingsError(f"a sampler is registered as a SamplerRecord, got {record!r}")


# Filled by each sampler module at import (bojax.inference imports them all).
SAMPLERS: Registry[SamplerRecord] = Registry("sampler", check=_check)
