"""Gaussian-process surrogates (:class:`GPSurrogate`) for the :class:`Surrogate` protocol.

:class:`GPSurrogate` treats the GP's hyperparameters fully Bayesian with any sampler
registered in :data:`bojax.inference.SAMPLERS`, named by ``method``: ``slice``
(Spearmint's choice, the ensemble-design and arc-kernel reports), ``elliptical`` (many
chains, ``gp-ess``), ``nuts``, or ``map`` (a point estimate, S = 1), or keeps them
``fixed`` at given values (S = 1; the architecture-search report's GP, whose alpha,
sigma and ell are chosen by hand). Chains that continue (the record says so) burn in on
the first fit only and then continue across BO iterations from their last positions, so
later fits cost only the retained steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from bojax import gp, inference
from bojax.errors import SettingsError
from bojax.gp import fantasies as fantasy
from bojax.gp import priors
from bojax.spaces import STEP

PyTree = Any


# Draws that rank a freeze-thaw decision's candidate grid (all 16 then refine and compare
# its best): the curve kernel's cross-covariance made the grid's EI under 16 draws
# about 0.1 s of a 0.45 s decision at 2,000 values (benchmarks/README.md, eleventh session).
CURVE_SCREEN_SAMPLES = 4


class GPState(NamedTuple):
    """What a GP surrogate carries between BO iterations (all arrays: it is saved to disk)."""

    prior: PyTree  # numpyro distributions shaped like the parameters
    position: PyTree  # unconstrained hyperparameters where each chain stands (leading axis)
    widths: jax.Array  # slice bracket widths per chain and coordinate (adapted in burn-in)
    fits: int  # number of completed fits (0: the next fit burns in)
    samples: PyTree | None = None  # constrained hyperparameters, leading axis S
    posteriors: gp.Posterior | None = None  # one conditioned GP per sample
    diagnostics: dict | None = None


def _log_posterior(model: gp.GP, prior, data: gp.Data, z) -> jax.Array:
    """``log p(y | X, T(z)) + log p(T(z)) + log |det dT/dz|``."""
    params = priors.to_constrained(prior, z)
    return gp.log_marginal_likelihood(model, params, data) + priors.log_prior_unconstrained(
        prior, z
    )


@dataclass(frozen=True)
class GPSurrogate:
    """A GP whose hyperparameters are sampled (``slice``, ``elliptical``, ``nuts``), fitted
    by ``map``, or ``fixed``: ``method`` names a record of :data:`bojax.inference.SAMPLERS`.

    The samplers run ``chains`` chains side by side (vmapped, one program); each burns in
    for ``burn_in`` steps on the run's first fit and continues from where it stopped on
    every later fit, taking ``thin`` steps per kept draw and keeping ``num_samples /
    chains`` draws. One chain keeping 128 consecutive sweeps is the reports' Spearmint
    set-up (``"gp-slice-exploration"``, ``"gp-slice-arc"``, ...); one keeping 16 under the
    ``small-noise`` prior set is the engine's default ``"gp-slice"``; 16 elliptical chains
    keeping 4 draws each is ``"gp-ess"`` (:data:`bojax.surrogates.SURROGATES`).
    """

    model: gp.GP = field(default_factory=gp.GP)
    method: str = "slice"  # a sampler registered in bojax.inference.SAMPLERS
    num_samples: int = 128  # draws kept per fit, over all chains
    chains: int = 1  # parallel chains (slice, elliptical, NUTS); num_samples is a multiple
    burn_in: int = 256  # steps per chain on the first fit (slice sweeps, NUTS warm-up)
    warmup_later: int = 64  # NUTS warm-up on later fits (slice needs none)
    thin: int = 1  # steps per kept draw
    map_restarts: int = 8  # L-BFGS starts on the first fit: the last position + prior draws
    map_restarts_later: int = 2  # on later fits: the previous optimum + one fresh prior draw
    map_steps: int = 200  # L-BFGS iterations at most, per start
    screen_samples: int = 16  # draws that rank the candidate grid (see screening_draws)
    # A named prior set (bojax.gp.priors.PRIOR_SETS) or (model, dim) -> prior tree.
    prior: str | Callable[[gp.GP, int], PyTree] = "half-cauchy"
    fixed: Callable[[gp.GP, int], PyTree] | None = None  # (model, dim) -> params, for "fixed"

    def __post_init__(self) -> None:
        sampler = self.sampler  # a typed error now for an unknown method
        if sampler.moves == (self.fixed is not None):
            raise SettingsError("method='fixed' needs fixed=(model, dim) -> params, and only it")
        counts = (
            "num_samples",
            "chains",
            "thin",
            "map_restarts",
            "map_restarts_later",
            "map_steps",
            "screen_samples",
        )
        for name in counts:
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise SettingsError(f"{name} must be a positive integer, got {value!r}")
        if self.burn_in < 0 or self.warmup_later < 0:
            raise SettingsError("burn_in and warmup_later must be non-negative")
        if self.adapts_every_fit and min(self.burn_in, self.warmup_later) < 1:
            raise SettingsError(  # (BlackJAX's window adaptation fails on 0 steps)
                f"method={self.method!r} adapts afresh every fit, for burn_in steps on the "
                f"first and warmup_later after: both must be at least 1, got burn_in = "
                f"{self.burn_in}, warmup_later = {self.warmup_later}"
            )
        if self.num_samples % self.chains:
            raise SettingsError(
                f"num_samples ({self.num_samples}) must be a multiple of chains ({self.chains})"
            )
        if self.chains > 1 and sampler.point:
            raise SettingsError(f"method={self.method!r} has no chains; leave chains at 1")
        priors.get_prior(self.prior)  # a typed error now for an unknown prior set

    @property
    def sampler(self) -> inference.SamplerRecord:
        """The record of ``method`` (looked up on use: a scoped registration counts)."""
        return inference.SAMPLERS.get(self.method)

    @property
    def adapts_every_fit(self) -> bool:
        """Whether the sampler warms up afresh at every fit (NUTS), for ``burn_in`` steps on
        the first and ``warmup_later`` after, rather than continue its chain or optimise."""
        return not (self.sampler.continues or self.sampler.point)

    @property
    def samples_per_fit(self) -> int:
        return 1 if self.sampler.point else self.num_samples

    def init(self, dim: int, prior: PyTree | None = None) -> GPState:
        """Fresh state; ``prior`` overrides ``self.prior(model, dim)`` for this run only."""
        prior = priors.get_prior(self.prior)(self.model, dim) if prior is None else prior
        if self.fixed is not None:
            start = self.fixed(self.model, dim)
        else:
            start = self.model.init_params(dim, noise=1e-2)
            start["kernel"] = jax.tree.map(
                lambda leaf: jnp.full_like(leaf, 0.5) if jnp.ndim(leaf) else leaf, start["kernel"]
            )
        # Strongly typed float64 leaves, like the positions a fit returns: a weak-typed
        # start would make the second fit compile again. One row per chain; the first fit
        # spreads the chains out (see _fit).
        position = jax.tree.map(
            lambda leaf: jnp.broadcast_to(
                jnp.asarray(leaf, dtype=jnp.float64), (self.chains, *jnp.shape(leaf))
            ),
            priors.to_unconstrained(prior, start),
        )
        size = jax.flatten_util.ravel_pytree(jax.tree.map(lambda a: a[0], position))[0].shape[0]
        return GPState(prior, position, jnp.ones((self.chains, size)), 0)

    def fit(self, key: jax.Array, state: GPState, data: gp.Data) -> GPState:
        """Draw hyperparameters given ``data`` and condition one GP per draw."""
        # Samplers burn in on the first fit, MAP restarts widely.
        first = state.fits == 0
        # Fits of a continuing chain differ only in whether they burn in and MAP fits in
        # how many starts they try: one program each, the flag traced. A sampler that
        # adapts afresh every fit (NUTS) warms up for a length that sets shapes.
        warmup = (self.burn_in if first else self.warmup_later) if self.adapts_every_fit else None
        samples, posteriors, position, widths, diagnostics = _fit(
            self, warmup, key, state.prior, data, state.position, state.widths, first
        )
        return state._replace(
            position=position,
            widths=widths,
            fits=state.fits + 1,
            samples=samples,
            posteriors=posteriors,
            diagnostics={k: float(v) for k, v in diagnostics.items()},
        )

    def predict(self, state: GPState, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Predictive mean and latent variance per sample, each ``(S, M)``."""
        return _predict(self.model, self.conditioned(state), jnp.asarray(x))

    def conditioned(self, state: GPState) -> gp.Posterior:
        if state.posteriors is None:
            raise RuntimeError("predict() before fit(): the surrogate has no data yet")
        return state.posteriors

    def noise_sd(self, posteriors: gp.Posterior) -> float:
        """The fitted noise standard deviation, ``E_s[sqrt(sigma_n^2)]`` over the draws."""
        return float(jnp.mean(jnp.sqrt(posteriors.params["noise"])))

    def predictive(self, posteriors: gp.Posterior, x: jax.Array):
        """``predict`` as a pure function of the conditioned GPs (traced by the loop)."""
        # Chunks of the sample axis bound memory (S N M floats at once would be 2.6 GB for
        # the ensemble report's 5000 draws x 2000 candidates); equal to a vmap otherwise.
        return jax.lax.map(lambda post: gp.predict(self.model, post, x), posteriors, batch_size=256)

    def for_space(self, space) -> GPSurrogate:
        """This surrogate with ``space``'s categorical coordinates compared for equality
        only, plus an additive part (:class:`~bojax.gp.kernels.Overlap`; one more
        hyperparameter, sampled with the others); over a freeze-thaw run's (design, step)
        space, with each design's own decaying part of its curve as well
        (:class:`~bojax.gp.kernels.LearningCurves`; three more) and, for the slice
        sampler, brackets that stop stepping out once burn-in has adapted them
        (``"slice-fixed"``, :mod:`bojax.inference.slice`) and a grid screened under
        ``CURVE_SCREEN_SAMPLES`` draws: a freeze-thaw run fits and proposes before every
        decision, and these halve the fit's sweeps and the grid's cost."""
        model, method = self.model.with_categorical(space.categorical), self.method
        screen = self.screen_samples
        if space.names[-1] == STEP:
            model = model.with_curves(space.parameters[-1].high)
            method = "slice-fixed" if method == "slice" else method
            screen = min(self.screen_samples, CURVE_SCREEN_SAMPLES)
        if model is self.model and (method, screen) == (self.method, self.screen_samples):
            return self
        return replace(self, model=model, method=method, screen_samples=screen)

    def configured(self, samples: int | None = None, burn_in: int | None = None) -> GPSurrogate:
        """This surrogate with ``samples`` draws per fit and ``burn_in`` if given (MAP and
        fixed hyperparameters have neither). ``samples`` draws come from the largest number
        of chains, at most ``chains``, that divides them (16 chains asked for 10 draws run
        10 chains; for 20 draws, 10 chains of 2)."""
        if self.sampler.point:
            return self
        samples = self.num_samples if samples is None else samples
        chains = max(k for k in range(1, min(self.chains, samples) + 1) if samples % k == 0)
        return replace(
            self,
            num_samples=samples,
            chains=chains,
            burn_in=self.burn_in if burn_in is None else burn_in,
        )

    def screening_draws(self) -> int | None:
        """``screen_samples`` evenly spaced draws rank the 2048-point candidate grid; its
        best points are then refined and compared under all draws (Spearmint's grid,
        then refinement of its best). At n = 120, EI under 128 draws over the grid cost
        0.74 s against 0.70 s for the slice fit itself."""
        return self.screen_samples if self.samples_per_fit > self.screen_samples else None

    def pack(self, state: GPState) -> dict[str, Any]:
        position = jax.flatten_util.ravel_pytree(state.position)[0]
        return {
            "fits": state.fits,
            "position": position.tolist(),
            "widths": jnp.asarray(state.widths).tolist(),
        }

    def fantasize(
        self, key, state: GPState, pending, strategy: str, fantasies: int | None, room: int = 0
    ) -> tuple[gp.Posterior, jax.Array]:
        """The conditioned GPs with ``pending`` unit points given fantasy outcomes, and
        those outcomes (see :mod:`bojax.gp.fantasies`); padded for ``room`` pending points
        if more than ``pending``'s."""
        num = fantasy.per_sample(strategy, self.samples_per_fit, fantasies)
        pending = fantasy.pending_data(pending, room)
        return fantasy.fantasize(self.model, strategy, num, key, self.conditioned(state), pending)

    def unpack(self, dim: int, saved: dict[str, Any]) -> GPState:
        template = self.init(dim)
        _, unravel = jax.flatten_util.ravel_pytree(template.position)
        position = jnp.asarray(saved["position"], dtype=jnp.float64)
        widths = jnp.asarray(saved["widths"], dtype=jnp.float64)
        if position.size != template.widths.size or widths.size != template.widths.size:
            raise ValueError(
                f"saved chain state holds {position.size} coordinates, this surrogate "
                f"{template.widths.size} ({self.chains} chain(s))"
            )
        return template._replace(
            position=unravel(position),
            widths=widths.reshape(template.widths.shape),
            fits=int(saved["fits"]),
        )


@partial(jax.jit, static_argnums=(0, 1))
def _fit(surrogate: GPSurrogate, warmup, key, prior, data, position, widths, first):
    """One fit by the sampler ``surrogate.method`` names; ``first`` (traced) is whether it
    is the run's first (continuing chains burn in, MAP tries ``map_restarts`` starts);
    ``warmup`` is the warm-up length of a sampler that adapts afresh each fit (NUTS), a
    compile-time constant because it sets the adaptation's shapes (else ``None``).
    ``position`` and ``widths`` (the chains' carried tuning) have a leading chain axis."""
    model = surrogate.model

    def logdensity(z):
        return _log_posterior(model, prior, data, z)

    record = inference.SAMPLERS.get(surrogate.method)
    if record.point:
        # Later fits start from the previous optimum, which moves little as one point
        # arrives, plus fresh prior draws so other modes keep being tried.
        start = jax.tree.map(lambda a: a[0], position)
        most = max(surrogate.map_restarts, surrogate.map_restarts_later)
        count = jnp.where(first, surrogate.map_restarts, surrogate.map_restarts_later)
        draws = jax.vmap(lambda k: priors.sample_unconstrained(k, prior, start))(
            jax.random.split(key, most - 1)
        )
        starts = jax.tree.map(lambda p, d: jnp.concatenate([p[None], d]), start, draws)
        chain = record.run(key, logdensity, starts, count=count, steps=surrogate.map_steps)
        positions, last, diagnostics = chain.positions, chain.positions, chain.diagnostics
    else:
        samples_key, spread_key = jax.random.split(key)
        chains, draws = surrogate.chains, surrogate.num_samples // surrogate.chains
        if chains > 1:
            # On the first fit every chain but the first starts a step away from the default
            # start, so the chains do not all burn in along one path. A key per leaf: one
            # key put every scalar hyperparameter (amplitude, noise, mean) the same
            # offsets, the chains' starts on one line (review).
            leaves, tree = jax.tree.flatten(position)
            leaf_keys = jax.random.split(spread_key, len(leaves))
            noise = tree.unflatten(
                [
                    jnp.where(
                        first & (jnp.arange(chains) > 0).reshape(-1, *[1] * (leaf.ndim - 1)),
                        jax.random.normal(k, leaf.shape),
                        0.0,
                    )
                    for leaf, k in zip(leaves, leaf_keys, strict=True)
                ]
            )
            position = jax.tree.map(lambda p, e: p + 0.5 * e, position, noise)
            keys = jax.random.split(samples_key, chains)
        else:
            keys = key[None]  # one chain: the key as before, so Spearmint runs are unchanged
        reference = priors.gaussian_reference(prior, jax.tree.map(lambda a: a[0], position))
        schedule = dict(
            # A chain that continues burns in on the first fit only; one that adapts
            # afresh (NUTS) warms up for ``warmup`` steps every fit.
            burn_in=surrogate.burn_in if warmup is None else warmup,
            thin=surrogate.thin,
            burn=first,
            reference=tuple(jax.flatten_util.ravel_pytree(r)[0] for r in reference),
        )

        def one_chain(k, z, w):
            return record.run(k, logdensity, z, draws, tuning=w, **schedule)

        if record.population is not None and chains >= 4 and chains % 2 == 0:
            chain = record.population(
                samples_key, logdensity, position, draws, tuning=widths, **schedule
            )
        elif chains == 1:
            # Spearmint's one chain runs as it is and gains its chain axis after: a vmap
            # over one chain gives the same draws but ~0.2 s more tracing in every run.
            alone = jax.tree.map(lambda a: a[0], (keys, position, widths))
            chain = jax.tree.map(lambda a: a[None], one_chain(*alone))
        else:
            chain = jax.vmap(one_chain)(keys, position, widths)
        positions = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), chain.positions)
        last, widths = jax.tree.map(lambda a: a[:, -1], chain.positions), chain.tuning
        diagnostics = {
            "acceptance": jnp.mean(chain.diagnostics["acceptance"]),
            "divergences": jnp.sum(jnp.asarray(chain.diagnostics["divergences"])),
            "ess": inference.effective_sample_size(chain.positions, chains=True),
        }
    samples = jax.vmap(lambda z: priors.to_constrained(prior, z))(positions)
    posteriors = jax.vmap(gp.posterior, in_axes=(None, 0, None))(model, samples, data)
    diagnostics = {
        **diagnostics,
        "cholesky_failures": jnp.sum(~posteriors.ok),
        "max_jitter": jnp.max(posteriors.jitter),
    }
    return samples, posteriors, last, widths, diagnostics


@partial(jax.jit, static_argnums=0)
def _predict(model: gp.GP, posteriors: gp.Posterior, x):
    return jax.vmap(gp.predict, in_axes=(None, 0, None))(model, posteriors, x)


def fixed_se(amplitude: float, lengthscale: float, noise_sd: float):
    """Fixed hyperparameters of the architecture-search report's GP: ``k(x, x') = alpha^2
    exp(-|x - x'|^2 / (2 ell^2))`` with ``alpha = amplitude``, ``ell = lengthscale``, and
    noise standard deviation ``sigma = noise_sd`` (Twist 2019, eq. 26 and sec. 3.5). A
    kernel with more parameters (a mixed space's, whose categoricals add an overlap term)
    keeps the others at their initial values."""

    def params(model: gp.GP, dim: int) -> PyTree:
        start = model.init_params(dim, noise=noise_sd**2)
        kernel = start["kernel"]
        start["kernel"] = {
            **kernel,
            "amplitude": jnp.asarray(amplitude**2),
            "lengthscales": jnp.full_like(kernel["lengthscales"], lengthscale),
        }
        return start

    return params
