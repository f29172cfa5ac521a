"""Bayesian neural network: a tanh MLP whose weights are sampled by HMC (Agrawal 2016, sec. 5.1).

Model, with ``theta`` every weight and bias of a flax MLP ``f(x, theta)`` (tanh hidden
layers, linear output) and ``k`` their number:

* prior ``theta_i ~ N(0, 1 / tau_p)``, likelihood ``y_c ~ N(f(x_c, theta), 1 / tau_n)``;
* precisions ``tau_p ~ Gamma(a_p, b_p)``, ``tau_n ~ Gamma(a_n, b_n)`` (shape, rate).

The HMC energy is the report's ``E(theta) = tau_p sum theta_i^2 / 2 + tau_n sum_c (y_c -
f(x_c, theta))^2 / 2`` (its sec. 5.1; the precisions are held fixed during a trajectory).
The precisions are then drawn from their Gamma conditionals (Gibbs),

    tau_p | theta    ~ Gamma(a_p + k / 2, b_p + sum_i theta_i^2 / 2)
    tau_n | theta, D ~ Gamma(a_n + n / 2, b_n + sum_c (y_c - f(x_c, theta))^2 / 2),

so one sweep is one BlackJAX HMC transition (unit masses, ``L`` leapfrog steps, the step
size jittered by +-20% against periodic trajectories) and one Gibbs update. The step
size adapts as in the report (its sec. 3.2, after the code of its ref. [37]): an
exponential moving average of the acceptance probability, and the step multiplied by
``1.02`` when the average is above target, by ``0.98`` below. It adapts during burn-in
only and is frozen while samples are kept, so the kept chain is a valid MCMC chain.
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
from jax.flatten_util import ravel_pytree

from bojax import gp

PyTree = Any


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


class Hyperprior(NamedTuple):
    """Gamma (shape, rate) priors of the weight precision ``tau_p``, noise precision ``tau_n``."""

    weight_shape: float = 1.0
    weight_rate: float = 1.0
    noise_shape: float = 1.0
    noise_rate: float = 0.01


def _sum_squares(net: Network, theta: jax.Array, data: gp.Data) -> jax.Array:
    residual = jnp.where(data.mask, data.y - net(theta, data.x), 0.0)
    return jnp.sum(residual**2)


def energy(net: Network, theta, tau_p, tau_n, data: gp.Data) -> jax.Array:
    """The report's HMC potential ``E(theta)``, up to terms free of ``theta``."""
    return 0.5 * tau_p * jnp.sum(theta**2) + 0.5 * tau_n * _sum_squares(net, theta, data)


def log_joint(net: Network, theta, tau_p, tau_n, data: gp.Data, hyper: Hyperprior) -> jax.Array:
    """``log p(theta, tau_p, tau_n, y | X)`` with every normalising constant."""
    k, n = theta.shape[0], jnp.sum(data.mask)
    log_2pi = jnp.log(2 * jnp.pi)
    prior_theta = 0.5 * k * (jnp.log(tau_p) - log_2pi)
    likelihood = 0.5 * n * (jnp.log(tau_n) - log_2pi)
    return (
        prior_theta
        + likelihood
        - energy(net, theta, tau_p, tau_n, data)
        + _log_gamma_density(tau_p, hyper.weight_shape, hyper.weight_rate)
        + _log_gamma_density(tau_n, hyper.noise_shape, hyper.noise_rate)
    )


def _log_gamma_density(x, shape, rate):
    return (
        shape * jnp.log(rate)
        - jax.scipy.special.gammaln(shape)
        + (shape - 1) * jnp.log(x)
        - rate * x
    )


def precision_conditionals(net: Network, theta, data: gp.Data, hyper: Hyperprior):
    """Shapes and rates of the Gamma conditionals of ``tau_p`` and ``tau_n``."""
    k, n = theta.shape[0], jnp.sum(data.mask)
    weight = (hyper.weight_shape + 0.5 * k, hyper.weight_rate + 0.5 * jnp.sum(theta**2))
    noise = (hyper.noise_shape + 0.5 * n, hyper.noise_rate + 0.5 * _sum_squares(net, theta, data))
    return weight, noise


def gibbs_precisions(key, net: Network, theta, data: gp.Data, hyper: Hyperprior):
    """One draw of ``(tau_p, tau_n)`` from their Gamma conditionals given ``theta``."""
    (a_p, b_p), (a_n, b_n) = precision_conditionals(net, theta, data, hyper)
    key_p, key_n = jax.random.split(key)
    return jax.random.gamma(key_p, a_p) / b_p, jax.random.gamma(key_n, a_n) / b_n


class StepAdaptation(NamedTuple):
    """The report's step-size rule: EMA of acceptance, multiplicative increase/decrease."""

    target: float = 0.8
    slowness: float = 0.9  # EMA weight of the past
    increase: float = 1.02
    decrease: float = 0.98
    min_step: float = 1e-6
    max_step: float = 0.5
    jitter: float = 0.2  # each transition uses step * U(1 - jitter, 1 + jitter)

    def update(self, step, average, acceptance):
        average = self.slowness * average + (1 - self.slowness) * acceptance
        step = step * jnp.where(average > self.target, self.increase, self.decrease)
        return jnp.clip(step, self.min_step, self.max_step), average


DEFAULT_HYPERPRIOR = Hyperprior()
DEFAULT_ADAPTATION = StepAdaptation()


class SamplerState(NamedTuple):
    """Where a chain stands: parameters, precisions, step size and its running acceptance."""

    theta: jax.Array
    tau_p: jax.Array
    tau_n: jax.Array
    step_size: jax.Array
    acceptance: jax.Array  # the step rule's moving average


class Draws(NamedTuple):
    """Kept draws (leading axis S) and the chain's diagnostics."""

    theta: jax.Array  # (S, k)
    tau_p: jax.Array  # (S,)
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
    burn_in: int,
    thin: int = 1,
    leapfrog_steps: int = 50,
    hyper: Hyperprior = DEFAULT_HYPERPRIOR,
    adaptation: StepAdaptation = DEFAULT_ADAPTATION,
    update_precisions: bool = True,
) -> Draws:
    """``burn_in`` sweeps adapting the step size, then ``num_samples * thin`` sweeps keeping
    every ``thin``-th. A sweep is one HMC transition of ``theta`` given the precisions and,
    if ``update_precisions``, one Gibbs draw of the precisions given ``theta``. Bounded:
    exactly ``(burn_in + num_samples thin) (leapfrog_steps + 1)`` gradient evaluations."""
    kernel = blackjax.mcmc.hmc.build_kernel()

    def sweep(carry: SamplerState, key, adapt: bool):
        hmc_key, gibbs_key, jitter_key = jax.random.split(key, 3)
        # A fixed trajectory length can match a period of the target and make the chain
        # return where it started; a random step size breaks that (Neal 2011, sec. 5.4.2.2).
        jitter = adaptation.jitter * jax.random.uniform(jitter_key, minval=-1.0, maxval=1.0)

        def logdensity(theta):
            return -energy(net, theta, carry.tau_p, carry.tau_n, data)

        hmc_state = blackjax.mcmc.hmc.init(carry.theta, logdensity)
        hmc_state, info = kernel(
            hmc_key,
            hmc_state,
            logdensity,
            carry.step_size * (1.0 + jitter),
            jnp.ones_like(carry.theta),
            leapfrog_steps,
        )
        theta = hmc_state.position
        tau_p, tau_n = carry.tau_p, carry.tau_n
        if update_precisions:
            tau_p, tau_n = gibbs_precisions(gibbs_key, net, theta, data, hyper)
        acceptance = jnp.where(jnp.isfinite(info.acceptance_rate), info.acceptance_rate, 0.0)
        step, average = carry.step_size, carry.acceptance
        if adapt:
            step, average = adaptation.update(step, average, acceptance)
        new = SamplerState(theta, tau_p, tau_n, step, average)
        return new, (acceptance, info.is_divergent)

    burn_key, keep_key = jax.random.split(key)
    state, (burn_accept, _) = jax.lax.scan(
        lambda c, k: sweep(c, k, True), state, jax.random.split(burn_key, burn_in)
    )

    def keep(carry, key):
        carry, (accept, divergent) = jax.lax.scan(
            lambda c, k: sweep(c, k, False), carry, jax.random.split(key, thin)
        )
        return carry, (carry.theta, carry.tau_p, carry.tau_n, accept, divergent)

    state, (theta, tau_p, tau_n, accept, divergent) = jax.lax.scan(
        keep, state, jax.random.split(keep_key, num_samples)
    )
    diagnostics = {
        "acceptance": jnp.mean(accept),
        "burn_in_acceptance": jnp.mean(burn_accept) if burn_in else jnp.nan,
        "divergences": jnp.sum(divergent),
        "step_size": state.step_size,
    }
    return Draws(theta, tau_p, tau_n, state, diagnostics)


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

    chain: SamplerState  # where the chain stands; the next fit continues from here
    fits: int
    theta: jax.Array | None = None  # kept networks (S, k)
    tau_n: jax.Array | None = None  # their noise precisions (S,)
    diagnostics: dict | None = None


@dataclass(frozen=True)
class BNNSurrogate:
    """A Bayesian neural network as a BO surrogate (Agrawal 2016, sec. 5).

    Inputs ``u`` in the unit cube are mapped to ``sqrt(12) (u - 1/2)`` (zero mean, unit
    variance when spread evenly) and the loop standardises outputs. The first fit starts
    from flax's initialisation and burns in ``burn_in`` sweeps: the first half with the
    precisions held at ``tau_p = 1`` and ``tau_n = 1 / start_noise^2`` (so the network
    first fits the data rather than explaining it as noise), the second half with Gibbs
    updates. Later fits continue the chain from where it stopped, burning in
    ``burn_in_later`` sweeps on the grown data. Every fit keeps ``num_samples`` networks,
    ``thin`` sweeps apart. ``predict`` returns the report's eqs. 5.8-5.9 as one Gaussian
    (S = 1): every acquisition and policy then applies unchanged.
    """

    hidden: tuple[int, ...] = (50, 50, 50)
    num_samples: int = 50
    thin: int = 4
    burn_in: int = 1000
    burn_in_later: int = 100
    leapfrog_steps: int = 50
    start_noise: float = 0.1
    hyper: Hyperprior = field(default_factory=Hyperprior)
    adaptation: StepAdaptation = field(default_factory=StepAdaptation)

    def __post_init__(self) -> None:
        if not self.hidden or any(int(w) < 1 for w in self.hidden):
            raise ValueError(f"hidden must be positive layer widths, got {self.hidden!r}")
        for name in ("num_samples", "thin", "leapfrog_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.burn_in < 0 or self.burn_in_later < 0:
            raise ValueError("burn_in and burn_in_later must be non-negative")
        if not self.start_noise > 0:
            raise ValueError("start_noise must be positive")

    def init(self, dim: int) -> BNNState:
        _, theta = network(self.hidden, dim)
        one = jnp.ones(())
        chain = SamplerState(theta, one, one / self.start_noise**2, 0.01 * one, 0.8 * one)
        return BNNState(chain, 0)

    def fit(self, key: jax.Array, state: BNNState, data: gp.Data) -> BNNState:
        draws = _fit(self, state.fits == 0, key, state.chain, data)
        return BNNState(
            draws.last,
            state.fits + 1,
            draws.theta,
            draws.tau_n,
            {k: float(v) for k, v in draws.diagnostics.items()},
        )

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
        """This surrogate keeping ``samples`` networks per fit and burning in ``burn_in``
        sweeps on the first fit, where given."""
        return replace(
            self,
            num_samples=self.num_samples if samples is None else samples,
            burn_in=self.burn_in if burn_in is None else burn_in,
        )

    def pack(self, state: BNNState) -> dict[str, Any]:
        chain = {name: jnp.asarray(value).tolist() for name, value in state.chain._asdict().items()}
        return {"fits": state.fits, **chain}

    def unpack(self, dim: int, saved: dict[str, Any]) -> BNNState:
        template = self.init(dim).chain
        chain = SamplerState(
            *(jnp.asarray(saved[name], dtype=jnp.float64) for name in SamplerState._fields)
        )
        if chain.theta.shape != template.theta.shape:
            raise ValueError(
                f"saved network has {chain.theta.shape[0]} parameters, "
                f"this surrogate {template.theta.shape[0]}"
            )
        return BNNState(chain, int(saved["fits"]))


def _scaled(u: jax.Array) -> jax.Array:
    return jnp.sqrt(12.0) * (u - 0.5)


@partial(jax.jit, static_argnums=(0, 1))
def _fit(surrogate: BNNSurrogate, first: bool, key, chain: SamplerState, data: gp.Data) -> Draws:
    net, theta = network(surrogate.hidden, data.x.shape[1], jax.random.fold_in(key, 1))
    data = data._replace(x=_scaled(data.x))
    settings = dict(
        leapfrog_steps=surrogate.leapfrog_steps,
        hyper=surrogate.hyper,
        adaptation=surrogate.adaptation,
    )
    fixed_key, key = jax.random.split(key)
    if first:
        # Precisions held while the network first fits the data (Neal 1996, sec. 3.3 does
        # the same); then Gibbs. A chain started from noise otherwise tends to settle on
        # "everything is noise" (tau_n small, f flat) and stay there.
        chain = chain._replace(theta=theta)
        warm = surrogate.burn_in // 2
        chain = sample(
            fixed_key,
            net,
            chain,
            data,
            num_samples=1,
            burn_in=warm,
            update_precisions=False,
            **settings,
        ).last
        burn_in = surrogate.burn_in - warm
    else:
        burn_in = surrogate.burn_in_later
    return sample(
        key,
        net,
        chain,
        data,
        num_samples=surrogate.num_samples,
        burn_in=burn_in,
        thin=surrogate.thin,
        **settings,
    )


@partial(jax.jit, static_argnums=0)
def _predict(surrogate: BNNSurrogate, theta, x):
    return surrogate.predictive(theta, x)
