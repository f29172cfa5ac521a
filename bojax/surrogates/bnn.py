"""Bayesian neural network surrogate: a tanh MLP whose weights are sampled by HMC.

Model, with ``theta`` every weight and bias of a flax MLP ``f(x, theta)`` (tanh hidden
layers, linear output), split into precision groups ``g`` of ``k_g`` parameters:

* ``theta_i ~ N(0, 1 / (s_i tau_g(i)))`` and ``y_c ~ N(f(x_c, theta), 1 / tau_n)``;
* ``tau_g ~ Gamma(a_p, b_p)`` and ``tau_n ~ Gamma(a_n, b_n)`` (shape, rate).

Two prior structures (:class:`PrecisionGroups`): ``"shared"``, the report's (Agrawal
2016, sec. 5.1: one ``tau_p`` for every parameter, ``s_i = 1``), and ``"layerwise"``
(Neal 1996, sec. 2.2 and 3.2): each layer's weights are one group with ``s_i`` its
fan-in, its biases another with ``s_i = 1``. Under ``"layerwise"`` ``tau_g = 1`` is
flax's (LeCun) initialisation scale, and the prior of ``f`` keeps its scale as layers
widen. The HMC energy is the report's with these precisions,
``E(theta) = sum_i s_i tau_g(i) theta_i^2 / 2 + tau_n sum_c (y_c - f(x_c, theta))^2 / 2``,
and the precisions are then drawn from their Gamma conditionals (Gibbs):

    tau_g | theta    ~ Gamma(a_p + k_g / 2, b_p + sum_{i in g} s_i theta_i^2 / 2)
    tau_n | theta, D ~ Gamma(a_n + n / 2, b_n + sum_c (y_c - f(x_c, theta))^2 / 2).

One sweep is one BlackJAX HMC transition of ``theta`` given the precisions (``L``
leapfrog steps, the step size jittered by +-20% against periodic trajectories) and one
Gibbs update. The mass matrix is the identity (the report's) or the current prior
precision ``diag(s_i tau_g(i))``, so each parameter moves on its prior's scale. The step
size adapts during burn-in only, by the report's rule (:class:`StepAdaptation`, sec.
3.2) or by dual averaging (:class:`DualAveraging`, Hoffman & Gelman 2014, sec. 3.2.1),
and is frozen while samples are kept, so the kept chain is a valid MCMC chain.
Predictions from ``S`` kept networks follow the report's eqs. 5.8-5.9:
``mu(x) = mean_s f(x, theta_s)``, ``sigma(x)^2 = mean_s (f(x, theta_s) - mu(x))^2``.

Data arrive as :class:`bojax.gp.Data` (rows padded to a bucket, ``mask`` marks real
ones), so a growing data set reuses the compiled sampler.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, NamedTuple

import blackjax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from bojax import gp

PyTree = Any

PRIORS = ("layerwise", "shared")
MASSES = ("prior", "unit")
WARM_STARTS = ("trained", "held")


class MLP(nn.Module):
    """``f(x) = W_L tanh(... tanh(W_1 x + b_1) ...) + b_L``, one output (report eqs. 2.1-2.2)."""

    hidden: tuple[int, ...] = (50, 50, 50)

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for width in self.hidden:
            x = jnp.tanh(nn.Dense(width)(x))
        return nn.Dense(1)(x)[..., 0]


class Network(NamedTuple):
    """An MLP as a function of one flat parameter vector ``theta`` (k,)."""

    module: MLP
    unravel: Any  # flat (k,) -> flax parameter tree

    def __call__(self, theta: jax.Array, x: jax.Array) -> jax.Array:
        """``f(x, theta)`` for inputs ``x`` (M, d): ``(M,)``."""
        return self.module.apply(self.unravel(theta), x)


def network(hidden: tuple[int, ...], dim: int, key: jax.Array | None = None):
    """The network for ``dim`` inputs and a flat initial ``theta`` (flax's default init)."""
    module = MLP(tuple(hidden))
    key = jax.random.key(0) if key is None else key
    params = module.init(key, jnp.zeros((1, dim)))
    # flax initialises in float32; the chain runs in the default float (float64 under x64).
    params = jax.tree.map(lambda a: a.astype(jnp.result_type(float)), params)
    theta, unravel = ravel_pytree(params)
    return Network(module, unravel), theta


class PrecisionGroups(NamedTuple):
    """Which precision ``tau_g`` each parameter has, and its scale ``s_i``."""

    index: np.ndarray  # (k,) group of each parameter
    scale: np.ndarray  # (k,) s_i
    count: int  # number of groups G

    def precision(self, tau: jax.Array) -> jax.Array:
        """``s_i tau_g(i)`` for every parameter: ``(k,)`` from ``tau`` (G,)."""
        return jnp.asarray(tau)[self.index] * self.scale

    def sums(self, theta: jax.Array) -> jax.Array:
        """``sum_{i in g} s_i theta_i^2`` per group: ``(G,)``."""
        return jax.ops.segment_sum(self.scale * theta**2, self.index, self.count)

    def sizes(self) -> np.ndarray:
        """``k_g``: ``(G,)``."""
        return np.bincount(self.index, minlength=self.count)


def precision_groups(
    net: Network,
    theta: jax.Array,
    structure: str,
    gain: float = 1.0,
    bias_sd: float = 1.0,
    output_gain: float = 1.0,
) -> PrecisionGroups:
    """``"shared"``: one group, ``s_i = 1``. ``"layerwise"``: per layer a weight group
    with ``s_i = fan-in / gain^2`` (hidden layers; the output layer's ``gain`` is 1) and
    a bias group with ``s_i = 1 / bias_sd^2``; ``tau_g = 1`` is then that scale."""
    if structure == "shared":
        return PrecisionGroups(np.zeros(theta.shape[0], int), np.ones(theta.shape[0]), 1)
    if structure != "layerwise":
        raise ValueError(f"prior structure must be one of {PRIORS}, got {structure!r}")
    layers = net.unravel(jnp.zeros_like(theta))["params"]
    names = sorted(layers, key=lambda n: int(n.split("_")[1]))
    index, scale = {}, {}
    for number, name in enumerate(names):
        kernel = layers[name]["kernel"]
        width = kernel.shape[1]
        weight_scale = kernel.shape[0] / (output_gain if name == names[-1] else gain) ** 2
        index[name] = {
            "kernel": np.full(kernel.shape, 2 * number),
            "bias": np.full(width, 2 * number + 1),
        }
        scale[name] = {
            "kernel": np.full(kernel.shape, weight_scale),
            "bias": np.full(width, 1.0 / bias_sd**2),
        }

    def flat(tree):  # in ravel_pytree's order, as constants (this may run under jit)
        return np.concatenate([np.ravel(leaf) for leaf in jax.tree.leaves({"params": tree})])

    return PrecisionGroups(flat(index).astype(int), flat(scale).astype(float), 2 * len(layers))


class Hyperprior(NamedTuple):
    """Gamma (shape, rate) priors of each weight precision ``tau_g`` and of ``tau_n``."""

    weight_shape: float = 1.0
    weight_rate: float = 1.0
    noise_shape: float = 1.0
    noise_rate: float = 0.01


# The report's (it gives none; these are the ones this repository's figures used).
REPORT_HYPERPRIOR = Hyperprior()
# Layerwise: each tau_g has mean 1 (the initialisation scale) and sd 1 / sqrt(2). The
# noise precision has mean 100 (noise sd 0.1 of the warped outputs) and sd 32: an
# informative prior, the guard against the "everything is noise" mode. With
# Gamma(1, 0.01) or Gamma(2, 0.002) half of the chains fitted to 15 points of four
# test functions settled at noise sd 0.6-0.9 with flat networks (docs/design.md).
LAYERWISE_HYPERPRIOR = Hyperprior(
    weight_shape=2.0, weight_rate=2.0, noise_shape=10.0, noise_rate=0.1
)


def _sum_squares(net: Network, theta: jax.Array, data: gp.Data) -> jax.Array:
    residual = jnp.where(data.mask, data.y - net(theta, data.x), 0.0)
    return jnp.sum(residual**2)


def energy(net: Network, theta, precision, tau_n, data: gp.Data) -> jax.Array:
    """The HMC potential ``E(theta)`` (report sec. 5.1), up to terms free of ``theta``;
    ``precision`` is each parameter's ``s_i tau_g(i)`` (``(k,)``, or one number)."""
    return 0.5 * jnp.sum(precision * theta**2) + 0.5 * tau_n * _sum_squares(net, theta, data)


def log_joint(
    net: Network, theta, tau_p, tau_n, data: gp.Data, hyper: Hyperprior, groups: PrecisionGroups
) -> jax.Array:
    """``log p(theta, tau, tau_n, y | X)`` with every normalising constant; ``tau_p`` (G,)."""
    n = jnp.sum(data.mask)
    log_2pi = jnp.log(2 * jnp.pi)
    precision = groups.precision(tau_p)
    prior_theta = 0.5 * jnp.sum(jnp.log(precision) - log_2pi)
    likelihood = 0.5 * n * (jnp.log(tau_n) - log_2pi)
    return (
        prior_theta
        + likelihood
        - energy(net, theta, precision, tau_n, data)
        + jnp.sum(_log_gamma_density(jnp.asarray(tau_p), hyper.weight_shape, hyper.weight_rate))
        + _log_gamma_density(tau_n, hyper.noise_shape, hyper.noise_rate)
    )


def _log_gamma_density(x, shape, rate):
    return (
        shape * jnp.log(rate)
        - jax.scipy.special.gammaln(shape)
        + (shape - 1) * jnp.log(x)
        - rate * x
    )


def precision_conditionals(net: Network, theta, data: gp.Data, hyper: Hyperprior, groups):
    """Shapes and rates of the Gamma conditionals of ``tau_g`` (each ``(G,)``) and ``tau_n``."""
    n = jnp.sum(data.mask)
    weight = (
        hyper.weight_shape + 0.5 * jnp.asarray(groups.sizes(), float),
        hyper.weight_rate + 0.5 * groups.sums(theta),
    )
    noise = (hyper.noise_shape + 0.5 * n, hyper.noise_rate + 0.5 * _sum_squares(net, theta, data))
    return weight, noise


def gibbs_precisions(key, net: Network, theta, data: gp.Data, hyper: Hyperprior, groups):
    """One draw of ``(tau_g (G,), tau_n)`` from their Gamma conditionals given ``theta``."""
    (a_p, b_p), (a_n, b_n) = precision_conditionals(net, theta, data, hyper, groups)
    key_p, key_n = jax.random.split(key)
    return jax.random.gamma(key_p, a_p) / b_p, jax.random.gamma(key_n, a_n) / b_n


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


DEFAULT_HYPERPRIOR = REPORT_HYPERPRIOR
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
) -> Draws:
    """``burn_in`` sweeps adapting the step size (may be traced), then ``num_samples *
    thin`` sweeps at the frozen step keeping every ``thin``-th. A sweep is one HMC
    transition of ``theta`` given the precisions and, if ``update_precisions``, one Gibbs
    draw of the precisions given ``theta``. ``groups`` defaults to one shared precision.
    Bounded: exactly ``(burn_in + num_samples thin) (leapfrog_steps + 1)`` gradient
    evaluations."""
    if groups is None:
        groups = precision_groups(net, state.theta, "shared")
    if mass not in MASSES:
        raise ValueError(f"mass must be one of {MASSES}, got {mass!r}")
    kernel = blackjax.mcmc.hmc.build_kernel()

    def sweep(carry: SamplerState, key, step_size):
        hmc_key, gibbs_key, jitter_key = jax.random.split(key, 3)
        # A fixed trajectory length can match a period of the target and make the chain
        # return where it started; a random step size breaks that (Neal 2011, sec. 5.4.2.2).
        jitter = adaptation.jitter * jax.random.uniform(jitter_key, minval=-1.0, maxval=1.0)
        precision = groups.precision(carry.tau_p)

        def logdensity(theta):
            return -energy(net, theta, precision, carry.tau_n, data)

        inverse_mass = 1.0 / precision if mass == "prior" else jnp.ones_like(carry.theta)
        hmc_state = blackjax.mcmc.hmc.init(carry.theta, logdensity)
        hmc_state, info = kernel(
            hmc_key, hmc_state, logdensity, step_size * (1.0 + jitter), inverse_mass, leapfrog_steps
        )
        theta = hmc_state.position
        tau_p, tau_n = carry.tau_p, carry.tau_n
        if update_precisions:
            tau_p, tau_n = gibbs_precisions(gibbs_key, net, theta, data, hyper, groups)
        acceptance = jnp.where(jnp.isfinite(info.acceptance_rate), info.acceptance_rate, 0.0)
        return carry._replace(theta=theta, tau_p=tau_p, tau_n=tau_n), (
            acceptance,
            info.is_divergent,
        )

    burn_key, keep_key = jax.random.split(key)

    def burn(i, carry):
        chain, adapted, accepted = carry
        step = adaptation.current(adapted)
        chain, (acceptance, _) = sweep(chain, jax.random.fold_in(burn_key, i), step)
        return chain, adaptation.update(adapted, acceptance), accepted + acceptance

    start = (state, adaptation.init(state.step_size), jnp.zeros((), float))
    state, adapted, accepted = jax.lax.fori_loop(0, burn_in, burn, start)
    step = jnp.where(burn_in > 0, adaptation.final(adapted), state.step_size)
    state = state._replace(step_size=step)

    def keep(carry, key):
        carry, (accept, divergent) = jax.lax.scan(
            lambda c, k: sweep(c, k, step), carry, jax.random.split(key, thin)
        )
        return carry, (carry.theta, carry.tau_p, carry.tau_n, accept, divergent)

    state, (theta, tau_p, tau_n, accept, divergent) = jax.lax.scan(
        keep, state, jax.random.split(keep_key, num_samples)
    )
    diagnostics = {
        "acceptance": jnp.mean(accept),
        "burn_in_acceptance": jnp.where(burn_in > 0, accepted / jnp.maximum(burn_in, 1), jnp.nan),
        "divergences": jnp.sum(divergent),
        "step_size": step,
    }
    return Draws(theta, tau_p, tau_n, state, diagnostics)


def trained_start(net: Network, theta, data: gp.Data, steps: int, rate=1e-2):
    """``theta`` after ``steps`` full-batch Adam steps on the squared error from ``theta``
    (a prior draw): a network that explains the data, with its weights still near the
    prior's typical scale, for HMC to start from (Li et al. 2024 warm-start their BNN
    surrogates' samplers with such a fit). Not the MAP: with the prior term the weights
    shrink toward zero (the prior's mode, far from its typical set; on six Forrester
    points the prior energy fell from 2644 to 135 in 1000 steps), the Gibbs draws then
    set hidden-layer precisions ~35x the initialisation scale, and the chain left the
    data for the "everything is noise" mode."""
    optimizer = optax.adam(rate)
    gradient = jax.grad(lambda t: _sum_squares(net, t, data))

    def step(carry, _):
        theta, opt_state = carry
        updates, opt_state = optimizer.update(gradient(theta), opt_state)
        return (optax.apply_updates(theta, updates), opt_state), None

    (theta, _), _ = jax.lax.scan(step, (theta, optimizer.init(theta)), None, length=steps)
    return theta


def predictive(net: Network, theta: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Report eqs. 5.8-5.9 from kept networks ``theta`` (S, k) at ``x`` (M, d): mean and
    variance of ``f(x, theta_s)`` over the samples, each ``(M,)``."""
    outputs = jax.vmap(net, in_axes=(0, None))(theta, x)
    mean = jnp.mean(outputs, axis=0)
    return mean, jnp.mean((outputs - mean) ** 2, axis=0)


def mixture_log_likelihood(outputs, noise_var, y) -> float:
    """Mean over points of ``log mean_s N(y; f_s(x), 1 / tau_n,s)``: the held-out fit of
    kept networks ``outputs`` (S, M) with noise variances ``noise_var`` (S,) to ``y`` (M,)."""
    outputs, noise_var = jnp.asarray(outputs), jnp.asarray(noise_var)[:, None]
    log_pdf = -0.5 * (jnp.log(2 * jnp.pi * noise_var) + (y - outputs) ** 2 / noise_var)
    return float(jnp.mean(jax.scipy.special.logsumexp(log_pdf, axis=0) - jnp.log(len(outputs))))


# -- the surrogate -------------------------------------------------------------------------


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

    def __post_init__(self) -> None:
        if not self.hidden or any(int(w) < 1 for w in self.hidden):
            raise ValueError(f"hidden must be positive layer widths, got {self.hidden!r}")
        for name in ("chains", "num_samples", "thin", "leapfrog_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.burn_in < 0 or self.burn_in_later < 0 or self.warm_start_steps < 0:
            raise ValueError("burn_in, burn_in_later and warm_start_steps must be non-negative")
        if not self.start_noise > 0:
            raise ValueError("start_noise must be positive")
        for name, allowed in [("prior", PRIORS), ("mass", MASSES), ("warm_start", WARM_STARTS)]:
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")

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
    ess = blackjax.diagnostics.effective_sample_size(outputs, chain_axis=0, sample_axis=1)
    ess = jnp.where(data.mask, ess, jnp.nan)
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
