"""A conditional deep-net objective: MLP classifiers of 0 to 5 hidden layers on real data.

The arc-kernel report (sec. 3.2) tunes feed-forward classifiers with up to 5 hidden
layers (6 architectures, up to 23 hyperparameters): the learning rate, and per layer the
number of units, the dropout rate and an L2 weight constraint. Layer ``k``'s values are
relevant only when the net has at least ``k`` hidden layers. Here (the report's Deepnet
and MNIST are not available offline) the data are scikit-learn's handwritten digits
(1,797 8x8 images, shipped with scikit-learn), and the space is

    layers in {0..5}, learning_rate (log), momentum,
    per hidden layer k <= layers: units_k (log), dropout_k, max_norm_k (log), decay_k (log)

= 3 + 4 x 5 = 23 hyperparameters. Training is minibatch SGD with momentum (optax) on the
cross-entropy plus ``sum_k decay_k / 2 ||W_k||^2``; after each step every unit's incoming
weight vector is projected onto the ball of radius ``max_norm_k`` (the max-norm
constraint of dropout nets, Hinton et al. 2012); dropout is inverted dropout on the
hidden units. The objective is ``log`` of the validation error, as the report uses on
MNIST, with the error floored at half a validation example so a perfect score stays finite.

All architectures are embedded in one padded network (hidden width ``max_units``, input
padded to it; absent units are masked, an absent layer is skipped), and every
hyperparameter is a traced number, so a BO run compiles the trainer once.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from bojax.compilation import jit_quick_compile
from bojax.errors import SettingsError, require_batch_fits, require_positive_counts
from bojax.spaces import Condition, Integer, Real, Space


def deepnet_space(max_layers: int = 5, max_units: int = 128) -> Space:
    """The conditional space above: 3 + 4 * ``max_layers`` parameters."""
    parameters = [
        Integer("layers", 0, max_layers),
        Real("learning_rate", 1e-3, 1.0, log=True),
        Real("momentum", 0.0, 0.95),
    ]
    for k in range(1, max_layers + 1):
        exists = Condition("layers", ">=", k)
        parameters += [
            Integer(f"units{k}", 16, max_units, log=True, condition=exists),
            Real(f"dropout{k}", 0.0, 0.8, condition=exists),
            Real(f"max_norm{k}", 0.5, 20.0, log=True, condition=exists),
            Real(f"decay{k}", 1e-6, 1e-2, log=True, condition=exists),
        ]
    return Space(parameters)


def depth(point: Mapping[str, Any]) -> int:
    """The architecture of a point: its number of hidden layers."""
    return int(point["layers"])


@dataclass(frozen=True)
class Classification:
    """A classification data set split into train, validation and test arrays."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_valid: np.ndarray
    y_valid: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: int


def digits(seed: int = 0, train: int = 1000, valid: int = 400) -> Classification:
    """scikit-learn's 8x8 digits, pixels scaled to [0, 1], split at random by ``seed``
    into ``train`` / ``valid`` / the rest (397 by default) for test."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng([seed, 7]).permutation(len(x))
    x, y = (x[order] / 16.0).astype(np.float32), y[order].astype(np.int32)
    a, b = train, train + valid
    return Classification("digits", x[:a], y[:a], x[a:b], y[a:b], x[b:], y[b:], 10)


def mnist1d(seed: int = 0, valid: int = 1000) -> Classification:
    """MNIST-1D (Greydanus 2020, the ``mnist1d`` package): ten 1-D digit templates of 12
    points, randomly padded, scaled, sheared, translated, smoothed-noised and resampled to
    40 inputs. Made procedurally (no download): the package's published settings (5,000
    examples, generator seed 42), its 4,000 / 1,000 train / test split, and ``valid``
    of the training examples held out for validation, chosen at random by ``seed``.

    A linear classifier reaches ~32 % accuracy and an MLP ~68 % on it (the package's
    figures), so unlike the 8x8 digits the architecture matters."""
    x, y, x_test, y_test = _mnist1d_package_split()
    order = np.random.default_rng([seed, 7]).permutation(len(x))
    x, y = x[order], y[order]  # copies: the shared arrays below stay untouched
    x_test, y_test = x_test.copy(), y_test.copy()
    return Classification("mnist1d", x[valid:], y[valid:], x[:valid], y[:valid], x_test, y_test, 10)


@functools.cache
def _mnist1d_package_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The package's 4,000 training and 1,000 test examples (float32 inputs, int32 labels),
    made once per process: the generator takes seconds and its seed is fixed, so every
    call would make the same arrays. Read-only, as they are shared."""
    from mnist1d.data import get_dataset_args, make_dataset

    args = get_dataset_args()
    # The generator seeds NumPy's global state; put it back so callers' streams are unmoved.
    state, python_state = np.random.get_state(), random.getstate()  # noqa: NPY002
    try:
        data = make_dataset(args)
    finally:
        np.random.set_state(state)  # noqa: NPY002
        random.setstate(python_state)
    arrays = (
        data["x"].astype(np.float32),
        data["y"].astype(np.int32),
        data["x_test"].astype(np.float32),
        data["y_test"].astype(np.int32),
    )
    for array in arrays:
        array.flags.writeable = False
    return arrays


DATASETS = {"digits": digits, "mnist1d": mnist1d}


@dataclass(frozen=True)
class Training:
    """Fixed training settings (not searched)."""

    epochs: int = 30
    batch_size: int = 100
    max_layers: int = 5
    max_units: int = 128

    def __post_init__(self) -> None:
        require_positive_counts(self, "epochs", "batch_size", "max_layers", "max_units")


class NetConfig(NamedTuple):
    """One point's hyperparameters as traced arrays (irrelevant layers: placeholders)."""

    layers: jax.Array  # ()
    learning_rate: jax.Array  # ()
    momentum: jax.Array  # ()
    units: jax.Array  # (max_layers,)
    dropout: jax.Array
    max_norm: jax.Array
    decay: jax.Array


def net_config(point: Mapping[str, Any], max_layers: int = 5) -> NetConfig:
    """The arrays of a (validated, relevant-only) point."""
    per_layer = {
        name: [point.get(f"{name}{k}", fill) for k in range(1, max_layers + 1)]
        for name, fill in (("units", 1), ("dropout", 0.0), ("max_norm", 1.0), ("decay", 0.0))
    }
    return NetConfig(
        jnp.asarray(int(point["layers"]), jnp.int32),
        jnp.asarray(point["learning_rate"], jnp.float32),
        jnp.asarray(point["momentum"], jnp.float32),
        jnp.asarray(per_layer["units"], jnp.int32),
        *(jnp.asarray(per_layer[n], jnp.float32) for n in ("dropout", "max_norm", "decay")),
    )


class Weights(NamedTuple):
    hidden: jax.Array  # (L, H, H): layer k maps H -> H (absent rows/columns zero)
    hidden_bias: jax.Array  # (L, H)
    out: jax.Array  # (H, C)
    out_bias: jax.Array  # (C,)


def _masks(config: NetConfig, width: int, inputs: int):
    """Unit masks (L, H) of each hidden layer, and the input mask (H,) of the output layer."""
    units = jnp.arange(width)
    hidden = units[None, :] < config.units[:, None]
    layer_on = jnp.arange(len(config.units)) < config.layers
    hidden = hidden & layer_on[:, None]
    last = jnp.where(config.layers > 0, config.units[jnp.maximum(config.layers - 1, 0)], inputs)
    return hidden, units < last


def init_weights(key, config: NetConfig, width: int, inputs: int, classes: int) -> Weights:
    """He-normal weights with each layer's real fan-in; absent units and layers are zero.
    Float32 whether or not JAX's x64 mode is on (the CLI and the experiments turn it on,
    which made these networks train in float64: other numbers than a plain script's, and
    slow on a GPU)."""
    hidden_mask, out_mask = _masks(config, width, inputs)
    fan_in = jnp.concatenate([jnp.asarray([inputs]), config.units[:-1]]).astype(jnp.float32)
    k_hidden, k_out = jax.random.split(key)
    normal = jax.random.normal(k_hidden, (len(config.units), width, width), jnp.float32)
    in_mask = jnp.concatenate([(jnp.arange(width) < inputs)[None], hidden_mask[:-1]])
    hidden = normal * jnp.sqrt(2.0 / fan_in)[:, None, None]
    hidden = hidden * in_mask[:, :, None] * hidden_mask[:, None, :]
    out_fan = jnp.sum(out_mask).astype(jnp.float32)
    out = jax.random.normal(k_out, (width, classes), jnp.float32)
    out = out * jnp.sqrt(1.0 / out_fan) * out_mask[:, None]
    zeros = functools.partial(jnp.zeros, dtype=jnp.float32)
    return Weights(hidden, zeros((len(config.units), width)), out, zeros(classes))


def forward(weights: Weights, config: NetConfig, x, key=None):
    """Logits of ``x`` (B, H) (inputs padded to width H); dropout when ``key`` is given."""
    hidden_mask, _ = _masks(config, weights.hidden.shape[-1], x.shape[-1])
    h = x
    keys = jax.random.split(key if key is not None else jax.random.key(0), len(config.units))
    for k in range(len(config.units)):
        z = jax.nn.relu(h @ weights.hidden[k] + weights.hidden_bias[k]) * hidden_mask[k]
        if key is not None:
            keep = 1.0 - config.dropout[k]
            z = z * jax.random.bernoulli(keys[k], keep, z.shape) / keep
        h = jnp.where(k < config.layers, z, h)  # an absent layer passes h through
    return h @ weights.out + weights.out_bias


def _max_norm(weights: Weights, config: NetConfig) -> Weights:
    """Project each hidden unit's incoming weight vector onto ``||w|| <= max_norm_k``."""
    norms = jnp.sqrt(jnp.sum(weights.hidden**2, axis=1, keepdims=True))  # (L, 1, H)
    scale = jnp.minimum(1.0, config.max_norm[:, None, None] / jnp.maximum(norms, 1e-12))
    return weights._replace(hidden=weights.hidden * scale)


def _optimiser(config: NetConfig):
    return optax.inject_hyperparams(optax.sgd)(
        learning_rate=config.learning_rate, momentum=config.momentum
    )


def start(key, training: Training, config: NetConfig, inputs: int, classes: int):
    """``(carry, epoch_keys)``: the initial weights and optimiser state, and the key of
    each of the ``training.epochs`` epochs."""
    init_key, loop_key = jax.random.split(key)
    weights = init_weights(init_key, config, training.max_units, inputs, classes)
    return (weights, _optimiser(config).init(weights)), jax.random.split(loop_key, training.epochs)


def _epoch(carry, k, training: Training, config: NetConfig, x, y):
    """One epoch of minibatch SGD with momentum, dropout, L2 decay and max-norm from
    ``carry`` (weights, optimiser state); ``x`` padded to width H."""
    n = x.shape[0]
    layer_on = (jnp.arange(len(config.units)) < config.layers).astype(jnp.float32)
    optimiser = _optimiser(config)
    batches = n // training.batch_size

    def loss(w, xb, yb, k):
        logits = forward(w, config, xb, k)
        nll = optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()
        l2 = jnp.sum(config.decay * layer_on * jnp.sum(w.hidden**2, axis=(1, 2)))
        return nll + 0.5 * l2

    def step(carry, batch):
        w, state = carry
        xb, yb, k = batch
        grads = jax.grad(loss)(w, xb, yb, k)
        updates, state = optimiser.update(grads, state, w)
        return (_max_norm(optax.apply_updates(w, updates), config), state), None

    perm_key, drop_key = jax.random.split(k)
    order = jax.random.permutation(perm_key, n)[: batches * training.batch_size]
    xb = x[order].reshape(batches, training.batch_size, -1)
    yb = y[order].reshape(batches, training.batch_size)
    return jax.lax.scan(step, carry, (xb, yb, jax.random.split(drop_key, batches)))[0]


def _padded(x, width: int):
    return jnp.pad(x, ((0, 0), (0, width - x.shape[1])))


def train(key, training: Training, config: NetConfig, x, y, classes: int) -> Weights:
    """``training.epochs`` epochs of :func:`_epoch` from :func:`start`."""
    carry, keys = start(key, training, config, x.shape[1], classes)
    x = _padded(x, training.max_units)

    def epoch(carry, k):
        return _epoch(carry, k, training, config, x, y), None

    return jax.lax.scan(epoch, carry, keys)[0][0]


def _train_epoch(carry, k, training: Training, config: NetConfig, x, y, valid):
    """One epoch, and the misclassified count on ``valid`` after it."""
    carry = _epoch(carry, k, training, config, _padded(x, training.max_units), y)
    return carry, misclassified(carry[0], config, *valid)


train_epoch = jit_quick_compile(_train_epoch, static_argnums=(2,))


def misclassified(weights: Weights, config: NetConfig, x, y) -> jax.Array:
    """How many examples are misclassified; a diverged net (non-finite logits) gets all wrong."""
    x = jnp.pad(x, ((0, 0), (0, weights.hidden.shape[-1] - x.shape[1])))
    logits = forward(weights, config, x)
    right = (jnp.argmax(logits, axis=-1) == y) & jnp.all(jnp.isfinite(logits), axis=-1)
    return jnp.sum(~right)


def _train_and_score(key, training: Training, config: NetConfig, x, y, valid, test, classes):
    """Train on ``(x, y)``; the misclassified counts on ``valid`` and ``test`` (``(x, y)`` each)."""
    weights = train(key, training, config, x, y, classes)
    return misclassified(weights, config, *valid), misclassified(weights, config, *test)


train_and_score = jit_quick_compile(_train_and_score, static_argnums=(1, 7))


def point_key(seed: int, point: Mapping[str, Any]) -> jax.Array:
    """A key that depends on the seed and the point only (any order, any resume)."""
    text = json.dumps({k: point[k] for k in sorted(point)}, sort_keys=True)
    digest = int.from_bytes(hashlib.sha256(f"{seed}:{text}".encode()).digest()[:4], "little")
    return jax.random.fold_in(jax.random.key(seed), digest)


class DeepNetObjective:
    """``point -> log(validation error)`` for :func:`bojax.minimize` on :func:`deepnet_space`.

    :meth:`evaluate` also gives the test error. Deterministic per (seed, point).
    """

    def __init__(
        self, data: Classification | None = None, training: Training = Training(), seed: int = 0
    ):
        self.data = digits() if data is None else data
        self.training, self.seed = training, seed
        self.space = deepnet_space(training.max_layers, training.max_units)
        if self.data.x_train.shape[1] > training.max_units:
            raise SettingsError(
                f"max_units ({training.max_units}) must be at least the input dimension "
                f"({self.data.x_train.shape[1]}): inputs are padded to the hidden width"
            )
        require_batch_fits(training.batch_size, len(self.data.x_train))

    def train(self, point: Mapping[str, Any], report, checkpoint=None) -> float:
        """A step-wise training for early stopping (``minimize(objective.train, ...,
        max_step=training.epochs)``): :meth:`evaluate`'s epochs one at a time, reporting
        the log validation error after each with the checkpoint ``(epoch, weights and
        optimiser state)`` a paused training continues from."""
        point = self.space.validate(point)
        d, config = self.data, net_config(point, self.training.max_layers)
        carry, keys = start(point_key(self.seed, point), self.training, config,
                            d.x_train.shape[1], d.classes)  # fmt: skip
        epoch, value = 0, None
        if checkpoint is not None:
            epoch, carry = checkpoint
        data = (jnp.asarray(d.x_train), jnp.asarray(d.y_train))
        valid = (jnp.asarray(d.x_valid), jnp.asarray(d.y_valid))
        while epoch < self.training.epochs:
            carry, wrong = train_epoch(carry, keys[epoch], self.training, config, *data, valid)
            epoch += 1
            value = self._log_error(int(wrong) / len(d.y_valid))
            if report(epoch, value, checkpoint=(epoch, carry)) is False:
                break  # complete at the run's max_step
        return value

    def _log_error(self, error: float) -> float:
        return math.log(max(error, 0.5 / len(self.data.y_valid)))

    def evaluate(self, point: Mapping[str, Any]) -> dict[str, float]:
        point = self.space.validate(point)
        d = self.data
        config = net_config(point, self.training.max_layers)
        valid, test = train_and_score(
            point_key(self.seed, point),
            self.training,
            config,
            jnp.asarray(d.x_train),
            jnp.asarray(d.y_train),
            (jnp.asarray(d.x_valid), jnp.asarray(d.y_valid)),
            (jnp.asarray(d.x_test), jnp.asarray(d.y_test)),
            d.classes,
        )
        valid_error, test_error = int(valid) / len(d.y_valid), int(test) / len(d.y_test)
        return {
            "log_error": self._log_error(valid_error),
            "validation_error": valid_error,
            "test_error": test_error,
        }

    def __call__(self, point: Mapping[str, Any]) -> float:
        return self.evaluate(point)["log_error"]
