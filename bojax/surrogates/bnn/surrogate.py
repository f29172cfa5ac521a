"""The Bayesian neural network as a BO surrogate (Agrawal 2016, sec. 5).

The model (network, priors, log joint, Gibbs conditionals) is
:mod:`bojax.surrogates.bnn.model`; its weights are drawn by the sampler registered as
``"hmc-gibbs"`` in :data:`bojax.inference.SAMPLERS` (HMC of ``theta`` given the
precisions, then a Gibbs draw of the precisions given ``theta``). The mass matrix is
the identity (the report's) or the current prior precision ``diag(s_i tau_g(i))``, so
each parameter moves on its prior's scale; the step size adapts during burn-in only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
import numpy as np

from bojax import gp, inference
from bojax.errors import SettingsError, is_count, require_positive_counts
from bojax.inference import DualAveraging, StepAdaptation
from bojax.parameters.base import is_number
from bojax.surrogates.bnn.model import (
    DEFAULT_HYPERPRIOR,
    LAYERWISE_HYPERPRIOR,
    PRIORS,
    REPORT_HYPERPRIOR,
    Hyperprior,
    Network,
    PrecisionGroups,
    energy,
    gibbs_precisions,
    network,
    precision_groups,
    predictive,
    trained_start,
)

MASSES = ("prior", "unit")
WARM_STARTS = ("trained", "held")
DEFAULT_ADAPTATION = StepAdaptation()


class SamplerState(NamedTuple):
    """Where a chain stands: parameters, precisions ``tau_p`` (G,), noise, step size."""

    theta: jax.Array
    tau_p: jax.Array
    tau_n: jax.Array
    step_size: jax.Array


class Draws(NamedTuple):
    """Kept draws (leading axis S) and the chain's diagnostics."""

    theta: jax.Array  # (S, k)
    tau_p: jax.Array  # (S, G)
    tau_n: jax.Array  # (S,)
    last: SamplerState
    diagnostics: dict[str, jax.Array]


def sample(
    key: jax.Array,
    net: Network,
    state: SamplerState,
    data: gp.Data,
    *,
    num_samples: int,
    burn_in: int | jax.Array,
    thin: int = 1,
    leapfrog_steps: int = 50,
    hyper: Hyperprior = DEFAULT_HYPERPRIOR,
    adaptation: StepAdaptation | DualAveraging = DEFAULT_ADAPTATION,
    groups: PrecisionGroups | None = None,
    mass: str = "unit",
    update_precisions: bool = True,
    sampler: str = "hmc-gibbs",
) -> Draws:
    """The network's posterior drawn by the registered HMC-within-Gibbs ``sampler``:
    ``burn_in`` sweeps adapting the step size (may be traced), then ``num_samples *
    thin`` sweeps at the frozen step keeping every ``thin``-th. A sweep is one HMC
    transition of ``theta`` under ``-E(theta)`` given the precisions and, if
    ``update_precisions``, one Gibbs draw of the precisions given ``theta``. ``groups``
    defaults to one shared precision. Bounded: exactly ``(burn_in + num_samples thin)
    (leapfrog_steps + 1)`` gradient evaluations."""
    if groups is None:
        groups = precision_groups(net, state.theta, "shared")
    if mass not in MASSES:
        raise SettingsError(f"mass must be one of {MASSES}, got {mass!r}")

    def logdensity(theta, precisions):
        tau_p, tau_n = precisions
        return -energy(net, theta, groups.precision(tau_p), tau_n, data)

    def gibbs(key, theta):
        return gibbs_precisions(key, net, theta, data, hyper, groups)

    def prior_mass(precisions):
        return 1.0 / groups.precision(precisions[0])

    chain = inference.SAMPLERS.get(sampler).run(
        key, logdensity, state.theta, num_samples, burn_in=burn_in, thin=thin, burn=True,
        tuning=state.step_size, reference=None, conditions=(state.tau_p, state.tau_n),
        gibbs=gibbs if update_precisions else None,
        inverse_mass=prior_mass if mass == "prior" else None,
        leapfrog_steps=leapfrog_steps, adaptation=adaptation,
    )  # fmt: skip
    theta, (tau_p, tau_n) = chain.positions
    last = SamplerState(theta[-1], tau_p[-1], tau_n[-1], chain.tuning)
    return Draws(theta, tau_p, tau_n, last, chain.diagnostics)


class BNNState(NamedTuple):
    """What the BNN surrogate carries between BO iterations (all arrays: it is saved)."""

    chain: SamplerState  # where the chains stand (leading axis C); the next fit continues
    fits: int
    theta: jax.Array | None = None  # kept networks (S, k)
    tau_n: jax.Array | None = None  # their noise precisions (S,)
    diagnostics: dict | None = None
    y: np.ndarray | None = None  # the outputs the last fit saw (its real rows)


@dataclass(frozen=True)
class BNNSurrogate:
    """A Bayesian neural network as a BO surrogate (Agrawal 2016, sec. 5).

    Inputs ``u`` in the unit cube are mapped to ``sqrt(12) (u - 1/2)`` (zero mean, unit
    variance when spread evenly); the loop warps outputs by ``warping`` (rank-based normal
    scores by default: a heavy-tailed objective's basin stays resolvable).

    The defaults: ``"layerwise"`` precisions (hidden weights at ``gain^2 / fan-in``, the
    output weights at ``output_gain^2 / fan-in``, biases at ``bias_sd^2``; ``gain`` 5/3
    is the usual tanh gain, and ``output_gain`` 2 makes the prior's functions vary across
    the input box by about the warped outputs' unit scale instead of being nearly flat),
    the mass matrix the prior precision, a dual-averaged step size, and ``chains`` chains
    side by side (vmapped) whose kept networks are pooled. On the first fit each chain
    draws ``theta`` from the prior at ``tau_g = 1`` and trains it on the data
    (``warm_start_steps`` Adam steps, :func:`trained_start`), so each starts where a
    network explains the data, not where noise does, and in its own mode; then it burns
    in ``burn_in`` sweeps. :data:`REPORT_BNN` is the report's set-up instead: one chain,
    one shared ``tau_p``, unit masses, the report's step rule, flax's initialisation and
    the first half of burn-in with the precisions held at ``tau_p = 1``, ``tau_n = 1 /
    start_noise^2`` (``warm_start="held"``), outputs standardised.

    Later fits continue the chains, burning in ``burn_in_later`` sweeps on the grown data,
    or ``burn_in // 4`` when an output the last fit saw moved by more than
    ``rescale_tolerance`` (the warping or standardisation changed its scale). Every fit
    keeps ``num_samples`` networks per chain, ``thin`` sweeps apart, and reports
    acceptance, divergences, the mean noise sd and the effective sample size of the
    network outputs at the data. ``predict`` returns eqs. 5.8-5.9 over the pooled networks
    as one Gaussian (S = 1), so every acquisition and policy applies unchanged.
    """

    hidden: tuple[int, ...] = (50, 50, 50)
    chains: int = 2
    num_samples: int = 25  # per chain
    thin: int = 2
    burn_in: int = 400
    burn_in_later: int = 50
    leapfrog_steps: int = 30
    start_noise: float = 0.1
    prior: str = "layerwise"
    hyper: Hyperprior = LAYERWISE_HYPERPRIOR
    adaptation: StepAdaptation | DualAveraging = field(default_factory=DualAveraging)
    mass: str = "prior"
    warm_start: str = "trained"
    warm_start_steps: int = 1000
    rescale_tolerance: float = 0.25
    warping: str = "rank"
    gain: float = 5 / 3
    bias_sd: float = 0.5
    output_gain: float = 2.0
    sampler: str = "hmc-gibbs"  # an HMC-within-Gibbs record of bojax.inference.SAMPLERS

    def __post_init__(self) -> None:
        """SettingsError (a ValueError) for a setting the sampler cannot use: a zero
        ``gain`` divided by zero and a NaN one fitted NaN everywhere, a fractional count
        failed inside JAX (review BW)."""
        hidden = self.hidden
        if (
            not isinstance(hidden, tuple | list)
            or not hidden
            or not all(is_count(w) and w >= 1 for w in hidden)
        ):
            raise SettingsError(f"hidden must be positive whole layer widths, got {hidden!r}")
        require_positive_counts(self, "chains", "num_samples", "thin", "leapfrog_steps")
        for name in ("burn_in", "burn_in_later", "warm_start_steps"):
            if not is_count(getattr(self, name)):
                raise SettingsError(
                    f"{name} must be a whole number >= 0, got {getattr(self, name)!r}"
                )
        for name in ("start_noise", "gain", "bias_sd", "output_gain"):
            value = getattr(self, name)
            if isinstance(value, np.ndarray | jax.Array) and value.shape == ():
                value = value.item()  # (a NumPy or JAX scalar array)
            if not (is_number(value) and value > 0):
                raise SettingsError(f"{name} must be a finite number > 0, got {value!r}")
        tolerance = self.rescale_tolerance  # (infinite: never burn in longer)
        if not (tolerance == math.inf or (is_number(tolerance) and tolerance >= 0)):
            raise SettingsError(f"rescale_tolerance must be a number >= 0, got {tolerance!r}")
        for name, allowed in [("prior", PRIORS), ("mass", MASSES), ("warm_start", WARM_STARTS)]:
            if getattr(self, name) not in allowed:
                raise SettingsError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        inference.SAMPLERS.get(self.sampler)  # a typed error now for an unknown sampler

    def groups(self, dim: int) -> PrecisionGroups:
        net, theta = network(self.hidden, dim)
        return precision_groups(net, theta, self.prior, self.gain, self.bias_sd, self.output_gain)

    def init(self, dim: int) -> BNNState:
        _, theta = network(self.hidden, dim)
        groups, c = self.groups(dim), self.chains
        one = jnp.ones(c)
        chain = SamplerState(
            jnp.tile(theta, (c, 1)),
            jnp.ones((c, groups.count)),
            one / self.start_noise**2,
            0.01 * one,
        )
        return BNNState(chain, 0)

    def refit_burn_in(self, previous: np.ndarray | None, y: np.ndarray) -> int:
        """Burn-in sweeps of a later fit: ``burn_in_later``, or ``burn_in // 4`` when an
        output seen by the previous fit has moved by more than ``rescale_tolerance``."""
        if previous is None or len(previous) == 0:
            return self.burn_in_later
        m = min(len(previous), len(y))
        moved = float(np.max(np.abs(np.asarray(y[:m]) - np.asarray(previous[:m]))))
        if moved > self.rescale_tolerance:
            return max(self.burn_in_later, self.burn_in // 4)
        return self.burn_in_later

    def fit(self, key: jax.Array, state: BNNState, data: gp.Data) -> BNNState:
        y = np.asarray(data.y)[np.asarray(data.mask)]
        first = state.fits == 0
        burn_in = self.burn_in if first else self.refit_burn_in(state.y, y)
        draws, ess = _fit(self, first, key, state.chain, data, jnp.asarray(burn_in, jnp.int32))
        diagnostics = {k: float(v) for k, v in draws.diagnostics.items()}
        diagnostics |= {"burn_in": burn_in, "ess_min": float(ess[0]), "ess_median": float(ess[1])}
        diagnostics["noise_sd"] = float(jnp.mean(draws.tau_n**-0.5))
        return BNNState(draws.last, state.fits + 1, draws.theta, draws.tau_n, diagnostics, y)

    def conditioned(self, state: BNNState) -> jax.Array:
        if state.theta is None:
            raise RuntimeError("predict() before fit(): the surrogate has no data yet")
        return state.theta

    def predictive(self, theta: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Eqs. 5.8-5.9 at unit-cube ``x`` (M, d) as ``(1, M)`` mean and variance."""
        net, _ = network(self.hidden, x.shape[-1])
        mean, var = predictive(net, theta, _scaled(x))
        return mean[None], var[None]

    def screening_draws(self) -> None:
        """None: the candidate grid is ranked under every kept network (one Gaussian)."""
        return None

    def predict(self, state: BNNState, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        return _predict(self, self.conditioned(state), jnp.asarray(x))

    def outputs(self, state: BNNState, x: jax.Array) -> jax.Array:
        """``f(x, theta_s)`` of every kept network at unit-cube ``x``: ``(S, M)``."""
        net, _ = network(self.hidden, x.shape[-1])
        return jax.vmap(net, in_axes=(0, None))(self.conditioned(state), _scaled(jnp.asarray(x)))

    def configured(self, samples: int | None = None, burn_in: int | None = None) -> BNNSurrogate:
        """This surrogate keeping ``samples`` networks per fit (over all chains, rounded
        up to a multiple of ``chains``) and burning in ``burn_in`` sweeps on the first fit,
        where given."""
        return replace(
            self,
            num_samples=self.num_samples if samples is None else -(-samples // self.chains),
            burn_in=self.burn_in if burn_in is None else burn_in,
        )

    def pack(self, state: BNNState) -> dict[str, Any]:
        chain = {name: jnp.asarray(value).tolist() for name, value in state.chain._asdict().items()}
        seen = None if state.y is None else np.asarray(state.y).tolist()
        return {"fits": state.fits, **chain, "y": seen}

    def unpack(self, dim: int, saved: dict[str, Any]) -> BNNState:
        template = self.init(dim).chain
        try:
            chain = SamplerState(
                *(jnp.asarray(saved[name], dtype=jnp.float64) for name in SamplerState._fields)
            )
        except KeyError as missing:
            raise ValueError(f"saved BNN chain lacks {missing}: saved by another version") from None
        for name, what in [("theta", "parameters"), ("tau_p", "precision groups")]:
            got, want = getattr(chain, name).shape, getattr(template, name).shape
            if got != want:
                raise ValueError(
                    f"saved chains hold {got} (chains, {what}); this surrogate {want}: "
                    "the journal was written by another network or set-up"
                )
        seen = saved.get("y")
        return BNNState(chain, int(saved["fits"]), y=None if seen is None else np.asarray(seen))


# The report's BNN (Agrawal 2016, sec. 5.1), registered as "bnn-report".
REPORT_BNN = BNNSurrogate(
    chains=1,
    num_samples=50,
    thin=4,
    burn_in=1000,
    burn_in_later=100,
    leapfrog_steps=50,
    prior="shared",
    hyper=REPORT_HYPERPRIOR,
    adaptation=StepAdaptation(),
    mass="unit",
    warm_start="held",
    rescale_tolerance=float("inf"),
    warping="standardise",
)


def _scaled(u: jax.Array) -> jax.Array:
    return jnp.sqrt(12.0) * (u - 0.5)


@partial(jax.jit, static_argnums=(0, 1))
def _fit(surrogate: BNNSurrogate, first: bool, key, chains: SamplerState, data: gp.Data, burn_in):
    """One fit of every chain (vmapped): the first fit's start (warm start or held
    precisions), then sampling. The kept networks of all chains are pooled, and the
    effective sample size (min, median over data points) of their outputs comes with them."""
    dim = data.x.shape[1]
    net, _ = network(surrogate.hidden, dim)
    groups = surrogate.groups(dim)
    data = data._replace(x=_scaled(data.x))
    settings = dict(
        leapfrog_steps=surrogate.leapfrog_steps,
        hyper=surrogate.hyper,
        adaptation=surrogate.adaptation,
        groups=groups,
        mass=surrogate.mass,
        sampler=surrogate.sampler,
    )

    def run(key, chain: SamplerState) -> Draws:
        _, theta = network(surrogate.hidden, dim, jax.random.fold_in(key, 1))  # flax's init
        start_key, key = jax.random.split(key)
        count = burn_in
        if first and surrogate.warm_start == "held":
            # Precisions held while the network first fits the data (Neal 1996, sec. 3.3
            # does the same); then Gibbs. A chain started from noise otherwise tends to
            # settle on "everything is noise" (tau_n small, f flat) and stay there.
            chain = chain._replace(theta=theta)
            warm = burn_in // 2
            chain = sample(
                start_key, net, chain, data, num_samples=1, burn_in=warm,
                update_precisions=False, **settings,
            ).last  # fmt: skip
            count = burn_in - warm
        elif first:
            # A draw from the prior at the initialisation scale (tau_g = 1), trained on the
            # data; each chain from its own draw, so the chains start in different modes.
            draw_key, gibbs_key = jax.random.split(start_key)
            precision = groups.precision(chain.tau_p)
            theta = jax.random.normal(draw_key, theta.shape, theta.dtype) / jnp.sqrt(precision)
            theta = trained_start(net, theta, data, surrogate.warm_start_steps)
            tau_p, tau_n = gibbs_precisions(gibbs_key, net, theta, data, surrogate.hyper, groups)
            chain = chain._replace(theta=theta, tau_p=tau_p, tau_n=tau_n)
        return sample(
            key, net, chain, data, num_samples=surrogate.num_samples, burn_in=count,
            thin=surrogate.thin, **settings,
        )  # fmt: skip

    draws = jax.vmap(run)(jax.random.split(key, surrogate.chains), chains)
    outputs = jax.vmap(jax.vmap(net, in_axes=(0, None)), in_axes=(0, None))(draws.theta, data.x)
    if outputs.shape[1] > 1:
        ess = blackjax.diagnostics.effective_sample_size(outputs, chain_axis=0, sample_axis=1)
        ess = jnp.where(data.mask, ess, jnp.nan)
    else:  # one draw per chain (samples <= chains) has no autocorrelation to estimate
        ess = jnp.full(outputs.shape[2:], jnp.nan)
    d = draws.diagnostics
    pooled = Draws(
        draws.theta.reshape(-1, draws.theta.shape[-1]),
        draws.tau_p.reshape(-1, draws.tau_p.shape[-1]),
        draws.tau_n.reshape(-1),
        draws.last,
        {
            "acceptance": jnp.mean(d["acceptance"]),
            "burn_in_acceptance": jnp.mean(d["burn_in_acceptance"]),
            "divergences": jnp.sum(d["divergences"]),
            "step_size": jnp.mean(d["step_size"]),
        },
    )
    return pooled, jnp.stack([jnp.nanmin(ess), jnp.nanmedian(ess)])


@partial(jax.jit, static_argnums=0)
def _predict(surrogate: BNNSurrogate, theta, x):
    return surrogate.predictive(theta, x)
