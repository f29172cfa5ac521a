"""The Bayesian neural network's model: a tanh MLP, its priors and its log joint.

With ``theta`` every weight and bias of a flax MLP ``f(x, theta)`` (tanh hidden layers,
linear output), split into precision groups ``g`` of ``k_g`` parameters:

* ``theta_i ~ N(0, 1 / (s_i tau_g(i)))`` and ``y_c ~ N(f(x_c, theta), 1 / tau_n)``;
* ``tau_g ~ Gamma(a_p, b_p)`` and ``tau_n ~ Gamma(a_n, b_n)`` (shape, rate).

Two prior structures (:class:`PrecisionGroups`): ``"shared"``, the report's (Agrawal
2016, sec. 5.1: one ``tau_p`` for every parameter, ``s_i = 1``), and ``"layerwise"``
(Neal 1996, sec. 2.2 and 3.2): each layer's weights are one group with ``s_i`` its
fan-in, its biases another with ``s_i = 1``. Under ``"layerwise"`` ``tau_g = 1`` is
flax's (LeCun) initialisation scale, and the prior of ``f`` keeps its scale as layers
widen. The HMC energy is the report's with these precisions,
``E(theta) = sum_i s_i tau_g(i) theta_i^2 / 2 + tau_n sum_c (y_c - f(x_c, theta))^2 / 2``,
and the precisions' Gamma conditionals (the Gibbs block of the sampler) are

    tau_g | theta    ~ Gamma(a_p + k_g / 2, b_p + sum_{i in g} s_i theta_i^2 / 2)
    tau_n | theta, D ~ Gamma(a_n + n / 2, b_n + sum_c (y_c - f(x_c, theta))^2 / 2).

Predictions from ``S`` kept networks follow the report's eqs. 5.8-5.9:
``mu(x) = mean_s f(x, theta_s)``, ``sigma(x)^2 = mean_s (f(x, theta_s) - mu(x))^2``.
Data arrive as :class:`bojax.gp.Data` (rows padded to a bucket, ``mask`` marks real
ones), so a growing data set reuses the compiled sampler.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from bojax import gp

PyTree = Any

PRIORS = ("layerwise", "shared")


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


DEFAULT_HYPERPRIOR = REPORT_HYPERPRIOR


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
