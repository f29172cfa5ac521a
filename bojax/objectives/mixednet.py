"""A training task with the choices network designers write: MLPs on MNIST-1D.

The space (:func:`mixednet_space`) mixes every parameter kind:

    optimizer in {sgd, adam, rmsprop}; momentum in [0.5, 0.99] (for sgd only);
    activation in {relu, tanh, gelu, silu}; normalisation in {none, layernorm};
    layers in {1, 2, 3}; width in {16, 32, 64, 128, 256} (log-spaced ordinal);
    learning_rate in [1e-4, 1] (log).

Training is ``epochs`` passes of minibatches over MNIST-1D's training split
(:func:`bojax.objectives.deepnet.mnist1d`); the objective is the validation error. Every
choice is a traced number, so one compiled trainer serves every design: the network is
padded to the widest and deepest one (absent units masked, absent layers skipped), the
activation is picked by ``lax.switch``, layer norm (over the present units only) by a
flag, and the three optimisers share one state ``(m, v)`` and are selected per step:

* sgd: ``m <- mu m + g``, ``theta <- theta - lr m``;
* adam: ``m <- 0.9 m + 0.1 g``, ``v <- 0.999 v + 0.001 g^2``, bias-corrected, ``theta <-
  theta - lr m_hat / (sqrt(v_hat) + 1e-8)`` (Kingma & Ba 2015);
* rmsprop: ``v <- 0.9 v + 0.1 g^2``, ``theta <- theta - lr g / (sqrt(v) + 1e-8)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bojax.errors import require_batch_fits, require_positive_counts
from bojax.objectives.batching import stacked, train_live_rows
from bojax.objectives.deepnet import Classification, mnist1d, point_key
from bojax.parameters import Categorical, Ordinal
from bojax.spaces import Integer, Real, Space

OPTIMIZERS = ("sgd", "adam", "rmsprop")
ACTIVATIONS = ("relu", "tanh", "gelu", "silu")
NORMALISATIONS = ("none", "layernorm")
WIDTHS = (16, 32, 64, 128, 256)


def mixednet_space(max_layers: int = 3) -> Space:
    return Space(
        [
            Categorical("optimizer", OPTIMIZERS),
            Real("momentum", 0.5, 0.99, condition=("optimizer", "==", "sgd")),
            Categorical("activation", ACTIVATIONS),
            Categorical("normalisation", NORMALISATIONS),
            Integer("layers", 1, max_layers),
            Ordinal("width", WIDTHS, log=True),
            Real("learning_rate", 1e-4, 1.0, log=True),
        ]
    )


@dataclass(frozen=True)
class Training:
    """Fixed training settings (not searched)."""

    epochs: int = 10
    batch_size: int = 128
    max_layers: int = 3

    def __post_init__(self) -> None:
        require_positive_counts(self, "epochs", "batch_size", "max_layers")


def _activation(index, z):
    return jax.lax.switch(index, [jax.nn.relu, jnp.tanh, jax.nn.gelu, jax.nn.silu], z)


def _forward(params, design, x):
    """Logits of the padded network for the design's traced choices."""
    mask = (jnp.arange(WIDTHS[-1]) < design["width"]).astype(x.dtype)
    active = jnp.sum(mask)
    h = x
    for k, (w, b) in enumerate(params["hidden"]):
        z = (h @ w + b) * mask
        mean = jnp.sum(z, -1, keepdims=True) / active
        var = jnp.sum(((z - mean) * mask) ** 2, -1, keepdims=True) / active
        z = jnp.where(design["layernorm"], (z - mean) / jnp.sqrt(var + 1e-5) * mask, z)
        z = _activation(design["activation"], z) * mask
        h = z if k == 0 else jnp.where(k < design["layers"], z, h)  # absent: skipped
    w, b = params["out"]
    return h @ w + b


def _init(key, inputs: int, classes: int, layers: int, width):
    """He-normal weights ``N(0, 2 / fan_in)`` of the padded network, with the design's own
    fan-in (``inputs``, then its traced ``width``): scaled by the padded 256, a width-16
    network started with logits some 60x smaller at three layers than a 256-wide one
    (review), a handicap that had nothing to do with its width. Float32 whether or not
    JAX's x64 mode is on (the CLI and the experiments turn it on)."""
    keys = jax.random.split(key, layers + 1)
    padded = WIDTHS[-1]

    def dense(k, n_in, fan_in, n_out):
        scale = jnp.sqrt(2.0 / jnp.asarray(fan_in, jnp.float32))
        return jax.random.normal(k, (n_in, n_out), jnp.float32) * scale, jnp.zeros(
            n_out, jnp.float32
        )

    hidden = [
        dense(keys[i], inputs if i == 0 else padded, inputs if i == 0 else width, padded)
        for i in range(layers)
    ]
    return {"hidden": hidden, "out": dense(keys[-1], padded, width, classes)}


def _update(design, step, grads, params, state):
    """One step of the design's optimiser; all three computed, one selected."""
    lr, mu, which = design["learning_rate"], design["momentum"], design["optimizer"]
    t = step + 1.0

    def leaf(g, p, m, v):
        m_sgd = mu * m + g
        m_adam, v_adam = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g**2
        v_rms = 0.9 * v + 0.1 * g**2
        adam = (m_adam / (1 - 0.9**t)) / (jnp.sqrt(v_adam / (1 - 0.999**t)) + 1e-8)
        rms = g / (jnp.sqrt(v_rms) + 1e-8)
        step_dir = jnp.select([which == 0, which == 1], [m_sgd, adam], rms)
        m_new = jnp.select([which == 0, which == 1], [m_sgd, m_adam], m)
        v_new = jnp.where(which == 1, v_adam, jnp.where(which == 2, v_rms, v))
        return p - lr * step_dir, m_new, v_new

    def part(i):
        return jax.tree.map(lambda *a: leaf(*a)[i], grads, params, state["m"], state["v"])

    return part(0), {"m": part(1), "v": part(2)}


def _loss(params, design, xb, yb):
    logits = _forward(params, design, xb)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), yb[:, None], 1))


def _steps(training: Training, design, data, order_key, first, last, carry):
    """Minibatch steps ``first .. last - 1`` (a new permutation each epoch)."""
    x, y = data
    per_epoch = x.shape[0] // training.batch_size

    def body(step, carry):
        params, state = carry
        epoch, i = step // per_epoch, step % per_epoch
        order = jax.random.permutation(jax.random.fold_in(order_key, epoch), x.shape[0])
        idx = jax.lax.dynamic_slice(order, (i * training.batch_size,), (training.batch_size,))
        grads = jax.grad(_loss)(params, design, x[idx], y[idx])
        return _update(design, step, grads, params, state)

    return jax.lax.fori_loop(first, last, body, carry)


def _wrong(params, design, valid):
    """Misclassified validation examples; all of them if the logits are not finite."""
    logits = _forward(params, design, valid[0])
    wrong = jnp.sum(jnp.argmax(logits, -1) != valid[1])
    return jnp.where(jnp.all(jnp.isfinite(logits)), wrong, valid[1].shape[0])


def _start(key, training: Training, inputs: int, classes: int, width):
    """``(order key, (params, optimiser state))`` of a fresh training of a ``width``-wide
    design."""
    init_key, order_key = jax.random.split(key)
    params = _init(init_key, inputs, classes, training.max_layers, width)
    return order_key, (params, jax.tree.map(jnp.zeros_like, {"m": params, "v": params}))


# A stack of fresh trainings as one program (eagerly, a few dozen small ops per design,
# which on a GPU cost more than an epoch).
_fresh_stack = jax.jit(jax.vmap(_start, in_axes=(0, None, None, None, 0)), static_argnums=(1, 2, 3))


@partial(jax.jit, static_argnums=(1, 5))
def _train_and_score(key, training: Training, design, data, valid, classes: int):
    order_key, carry = _start(key, training, data[0].shape[1], classes, design["width"])
    steps = training.epochs * (data[0].shape[0] // training.batch_size)
    params, _ = _steps(training, design, data, order_key, 0, steps, carry)
    return _wrong(params, design, valid)


@partial(jax.jit, static_argnums=(0,))
def _epoch_and_score(training: Training, design, data, valid, order_key, epoch, carry):
    """One more epoch (number ``epoch``, from 0) of a training; its carry and errors."""
    per_epoch = data[0].shape[0] // training.batch_size
    carry = _steps(training, design, data, order_key, epoch * per_epoch,
                   (epoch + 1) * per_epoch, carry)  # fmt: skip
    return carry, _wrong(carry[0], design, valid)


# Several trainings' epochs as one program: designs, keys and carries stacked on axis 0.
_epochs_and_scores = jax.jit(
    jax.vmap(_epoch_and_score.__wrapped__, in_axes=(None, 0, None, None, 0, 0, 0)),
    static_argnums=(0,),
)


class MixedNetObjective:
    """``point -> validation error`` of the design's MLP on MNIST-1D; deterministic per
    (seed, point). A diverged training scores as every example wrong."""

    def __init__(self, data: Classification | None = None, training: Training = Training(),
                 seed: int = 0):  # fmt: skip
        self.data = mnist1d() if data is None else data
        self.training, self.seed = training, seed
        self.space = mixednet_space(training.max_layers)
        require_batch_fits(training.batch_size, len(self.data.x_train))

    def design(self, point: Mapping[str, Any]) -> dict:
        point = self.space.validate(point)
        return {
            "optimizer": jnp.asarray(OPTIMIZERS.index(point["optimizer"])),
            "momentum": jnp.asarray(float(point.get("momentum", 0.0)), jnp.float32),
            "activation": jnp.asarray(ACTIVATIONS.index(point["activation"])),
            "layernorm": jnp.asarray(point["normalisation"] == "layernorm"),
            "layers": jnp.asarray(int(point["layers"]), jnp.int32),
            "width": jnp.asarray(int(point["width"]), jnp.int32),
            "learning_rate": jnp.asarray(float(point["learning_rate"]), jnp.float32),
        }

    def __call__(self, point: Mapping[str, Any]) -> float:
        d = self.data
        wrong = _train_and_score(
            point_key(self.seed, self.space.validate(point)),
            self.training,
            self.design(point),
            (jnp.asarray(d.x_train), jnp.asarray(d.y_train)),
            (jnp.asarray(d.x_valid), jnp.asarray(d.y_valid)),
            d.classes,
        )
        error = float(wrong) / len(d.y_valid)
        return error if math.isfinite(error) else 1.0

    def train(self, point: Mapping[str, Any], report, checkpoint=None) -> float:
        """The same training as a step-wise objective (:mod:`bojax.bo.stepwise`),
        reporting the validation error after each epoch with the checkpoint ``(epoch,
        weights and optimiser state)`` a paused training continues from (freeze-thaw);
        use it with ``max_step = training.epochs``. Same key and minibatches as
        ``objective(point)``, so the same final error wherever the training is stable; a
        diverging one may end elsewhere (XLA fuses the loop split at epochs differently:
        0.881 against 0.899 for rmsprop at learning rate 0.9)."""
        error = 1.0
        for epoch, error, carry in self._epochs(point, checkpoint):
            if report(epoch, error, checkpoint=(epoch, carry)) is False:
                break  # complete at the run's max_step
        return error

    def train_batch(self, points: list[Mapping[str, Any]], reports: list) -> list[float]:
        """:meth:`train` for several designs at once: each epoch of every design still
        training is one vmapped program (padded to a power of two of designs, so a batch
        compiles at most log2(len(points)) + 1 programs). ``reports[i](epoch, error)``
        as :meth:`train` calls it; a design whose report raises
        :class:`~bojax.bo.stepwise.StopTraining` leaves the batch and the others go on.
        Same keys, minibatches and (where stable) errors as :meth:`train`."""
        d = self.data
        points = [self.space.validate(p) for p in points]
        data = (jnp.asarray(d.x_train), jnp.asarray(d.y_train))
        valid = (jnp.asarray(d.x_valid), jnp.asarray(d.y_valid))
        designs = stacked([self.design(p) for p in points])
        keys, carries = _fresh_stack(
            jnp.stack([point_key(self.seed, p) for p in points]), self.training,
            d.x_train.shape[1], d.classes, designs["width"],
        )  # fmt: skip

        def advance(rows, epoch: int):
            design, key, carry = rows
            carry, wrong = _epochs_and_scores(
                self.training, design, data, valid, key, jnp.full(len(key), epoch), carry
            )
            return (design, key, carry), np.asarray(jax.device_get(wrong)) / len(d.y_valid), None

        return train_live_rows((designs, keys, carries), reports, advance, self.training.epochs)

    def curve(self, point: Mapping[str, Any]):
        """The validation error after each epoch, computed as it is iterated."""
        return (error for _, error, _ in self._epochs(point))

    def _epochs(self, point: Mapping[str, Any], checkpoint=None):
        """``(epoch, validation error, carry)`` after each epoch from 1, or after the
        checkpoint's ``(epoch, carry)``."""
        d = self.data
        point = self.space.validate(point)
        design = self.design(point)
        data = (jnp.asarray(d.x_train), jnp.asarray(d.y_train))
        valid = (jnp.asarray(d.x_valid), jnp.asarray(d.y_valid))
        order_key, carry = _start(point_key(self.seed, point), self.training,
                                  d.x_train.shape[1], d.classes, design["width"])  # fmt: skip
        first = 0
        if checkpoint is not None:
            first, carry = checkpoint
        for epoch in range(first, self.training.epochs):
            carry, wrong = _epoch_and_score(
                self.training, design, data, valid, order_key, jnp.asarray(epoch), carry
            )
            yield epoch + 1, float(wrong) / len(d.y_valid), carry
