"""Architecture vectors and the sigmoid network of the architecture-search report (Twist
2019, secs. 2 and 4).

A design is the vector ``[n_1, ..., n_L, E, eta]``: units per hidden layer, epochs and
learning rate. ``n_l = 0`` means "no layer l"; zero entries are dropped and the later
layers still exist, as in the report's code, so ``[5, 0, 3]`` is the network 2-5-3-2.
Every coordinate is scaled to the unit cube by the space (:func:`architecture_space`);
a point given to the objective directly is checked (whole numbers of units within
``max_units``, a finite learning rate) and normalised, so ``1`` and ``1.0`` are one design.

The network: sigmoid activations on every layer, the output included (two units, one
per class, one-hot targets), quadratic cost ``C = 1/N sum_i 1/2 |y_i - a^L(x_i)|^2``
(report eq. 4), weights and biases drawn from N(0, 1) as in the report's code, and
mini-batch SGD (Algorithm 3 with the gradient averaged over a batch; JAX autodiff
computes what the report's back-propagation eqs. 11-14 do by hand).

Every architecture is padded to ``max_layers`` hidden layers of ``max_units`` units with
masks, and the learning rate and number of epochs are traced, so a BO run compiles the
trainer once. An absent layer passes its input through unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bojax.compilation import jit_quick_compile
from bojax.errors import MissingParameterError, require_batch_fits, require_positive_counts
from bojax.objectives.deepnet import point_key
from bojax.spaces import Integer, Real, Space

DTYPE = jnp.float32


def architecture_space(
    max_layers: int = 4,
    max_units: int = 20,
    epochs: tuple[int, int] = (50, 500),
    learning_rate: tuple[float, float] = (0.05, 5.0),
) -> Space:
    """``[n_1 .. n_L, E, eta]`` with ``0 <= n_l <= max_units`` (0: no layer)."""
    layers = [Integer(f"n{l}", 0, max_units) for l in range(1, max_layers + 1)]
    return Space([*layers, Integer("epochs", *epochs), Real("learning_rate", *learning_rate)])


def hidden_layers(point: Mapping[str, Any]) -> tuple[int, ...]:
    """The hidden layers a point describes: its non-zero ``n_l`` in order."""
    units = [int(point[f"n{l}"]) for l in range(1, 1 + sum(k[0] == "n" for k in point))]
    return tuple(n for n in units if n > 0)


class Classes(NamedTuple):
    """A two-class problem in the plane: inputs (n, 2), one-hot targets (n, 2)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def moons(seed: int = 0, n_train: int = 200, n_val: int = 200, n_test: int = 200) -> Classes:
    """scikit-learn's two interleaving half-moons, noise sd 0.3, scaled into [0, 1]^2.

    The report does not name its data; this is our choice: not linearly separable, noisy
    enough that a large network can over-fit 200 training points.
    """
    from sklearn.datasets import make_moons

    x, labels = make_moons(n_train + n_val + n_test, noise=0.3, random_state=seed)
    x = (x - np.array([-1.5, -1.2])) / np.array([4.0, 2.9])  # the moons' range into [0, 1]
    y = np.eye(2)[labels]
    cut = np.cumsum([n_train, n_val])
    xs, ys = np.split(x, cut), np.split(y, cut)
    return Classes(xs[0], ys[0], xs[1], ys[1], xs[2], ys[2])


class Net(NamedTuple):
    """Padded weights: ``hidden[l]`` is (W, W) with W = max_units, ``out`` is (W, 2)."""

    hidden_w: jax.Array  # (L, W, W)
    hidden_b: jax.Array  # (L, W)
    out_w: jax.Array  # (W, 2)
    out_b: jax.Array  # (2,)


class Shape(NamedTuple):
    """Which layers and units exist, as traced masks."""

    present: jax.Array  # (L,) bool
    units: jax.Array  # (L, W) bool


def shape_of(hidden: tuple[int, ...], max_layers: int, max_units: int) -> Shape:
    if len(hidden) > max_layers or any(not 0 < n <= max_units for n in hidden):
        raise ValueError(f"{hidden} does not fit {max_layers} layers of {max_units} units")
    units = np.zeros((max_layers, max_units), dtype=bool)
    for l, n in enumerate(hidden):
        units[l, :n] = True
    present = np.arange(max_layers) < len(hidden)
    return Shape(jnp.asarray(present), jnp.asarray(units))


def init_net(key: jax.Array, max_layers: int, max_units: int) -> Net:
    """N(0, 1) weights and biases (the report's ``randn``)."""
    if max_units < 2:
        raise ValueError("max_units must be at least 2 (the inputs share the padded width)")
    k1, k2, k3, k4 = jax.random.split(key, 4)
    w, size = max_units, (max_layers, max_units)
    return Net(
        jax.random.normal(k1, (max_layers, w, w), DTYPE),
        jax.random.normal(k2, size, DTYPE),
        jax.random.normal(k3, (w, 2), DTYPE),
        jax.random.normal(k4, (2,), DTYPE),
    )


def forward(net: Net, shape: Shape, x: jax.Array) -> jax.Array:
    """``a^L(x)`` for a batch ``x`` (n, 2): sigmoid layers, absent ones passed through."""
    width = net.hidden_w.shape[-1]
    a = jnp.pad(x.astype(net.out_w.dtype), ((0, 0), (0, width - x.shape[1])))

    def layer(a, params):
        w, b, present, units = params
        h = jax.nn.sigmoid(a @ w + b) * units  # padded units stay exactly 0
        return jnp.where(present, h, a), None

    a, _ = jax.lax.scan(layer, a, (net.hidden_w, net.hidden_b, shape.present, shape.units))
    return jax.nn.sigmoid(a @ net.out_w + net.out_b)


@jax.jit
def cost(net: Net, shape: Shape, x: jax.Array, y: jax.Array) -> jax.Array:
    """``1/N sum_i 1/2 |y_i - a^L(x_i)|^2`` (report eq. 4)."""
    return jnp.mean(0.5 * jnp.sum((y - forward(net, shape, x)) ** 2, axis=-1))


@jax.jit  # called eagerly after every epoch: an eager scan would compile on every call
def accuracy(net: Net, shape: Shape, x, y) -> jax.Array:
    return jnp.mean(jnp.argmax(forward(net, shape, x), -1) == jnp.argmax(y, -1))


def _epoch(net, shape, x, y, learning_rate, batch_size, key):
    """One pass over a fresh permutation in batches (the last partial batch is dropped)."""
    batches = x.shape[0] // batch_size
    order = jax.random.permutation(key, x.shape[0])[: batches * batch_size]
    order = order.reshape(batches, batch_size)

    def step(net, rows):
        grads = jax.grad(cost)(net, shape, x[rows], y[rows])
        return jax.tree.map(lambda p, g: p - learning_rate * g, net, grads), None

    return jax.lax.scan(step, net, order)[0]


@partial(jit_quick_compile, static_argnums=(6,))
def train(key, net: Net, shape: Shape, data: Classes, epochs, learning_rate, batch_size: int):
    """``epochs`` epochs of mini-batch SGD (epochs and learning rate traced)."""
    x, y = jnp.asarray(data.x_train, DTYPE), jnp.asarray(data.y_train, DTYPE)
    rate = jnp.asarray(learning_rate, DTYPE)

    def body(e, net):
        return _epoch(net, shape, x, y, rate, batch_size, jax.random.fold_in(key, e))

    return jax.lax.fori_loop(0, epochs, body, net)


@partial(jit_quick_compile, static_argnums=(6,))
def train_epoch(key, net: Net, shape: Shape, data: Classes, epoch, learning_rate, batch_size: int):
    """Epoch number ``epoch`` (from 0) of :func:`train`, alone: the same batches."""
    x, y = jnp.asarray(data.x_train, DTYPE), jnp.asarray(data.y_train, DTYPE)
    rate = jnp.asarray(learning_rate, DTYPE)
    return _epoch(net, shape, x, y, rate, batch_size, jax.random.fold_in(key, epoch))


@partial(jax.jit, static_argnums=(4, 6))
def train_recorded(
    key, net: Net, shape: Shape, data: Classes, epochs: int, learning_rate, batch_size: int
):
    """As :func:`train`, also returning the training and validation cost after each epoch
    (the report's Figures 3b and 4b)."""
    x, y = jnp.asarray(data.x_train, DTYPE), jnp.asarray(data.y_train, DTYPE)
    xv, yv = jnp.asarray(data.x_val, DTYPE), jnp.asarray(data.y_val, DTYPE)
    rate = jnp.asarray(learning_rate, DTYPE)

    def body(net, e):
        net = _epoch(net, shape, x, y, rate, batch_size, jax.random.fold_in(key, e))
        return net, (cost(net, shape, x, y), cost(net, shape, xv, yv))

    return jax.lax.scan(body, net, jnp.arange(epochs))


@dataclass(frozen=True)
class ArchitectureObjective:
    """Validation accuracy of the network a design describes (to maximise).

    ``evaluate`` returns validation and test accuracy and the final training cost. The
    initial weights and batch order come from ``(seed, design)``, ``epochs`` left out (a
    design trained longer is the same network), so a design's score is deterministic
    (the report's networks are seeded by ``randn``'s global state).
    """

    data: Classes
    max_layers: int = 4
    max_units: int = 20
    batch_size: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        require_positive_counts(self, "max_layers", "max_units", "batch_size")
        require_batch_fits(self.batch_size, len(self.data.x_train))

    def design(self, point: Mapping[str, Any]) -> dict[str, float | int]:
        """``point`` checked and normalised: units ``n1 .. nk`` (``k <= max_layers``),
        whole numbers in ``[0, max_units]``; ``epochs`` (optional) at least 1; a finite
        ``learning_rate`` in ``[0, 1e6]``. A :class:`~bojax.errors.ParameterError` names
        what does not fit."""
        layers = sum(isinstance(k, str) and k[:1] == "n" and k[1:].isdigit() for k in point)
        layers = min(layers, self.max_layers)  # an n5 of a 4-layer objective: unknown
        space = Space(
            [Integer(f"n{l}", 0, self.max_units) for l in range(1, layers + 1)]
            + ([Integer("epochs", 1, 10**9)] if "epochs" in point else [])
            + [Real("learning_rate", 0.0, 1e6)]
        )  # fmt: skip
        return space.validate(point)

    def _start(self, point: Mapping[str, Any]) -> tuple[Shape, jax.Array, Net]:
        """The padded shape, the training key and the initial weights of ``point``. The
        key leaves ``epochs`` out: a design trained E epochs is the same network as the
        design trained longer, stopped at E, so :meth:`train`'s curve passes through
        :meth:`evaluate`'s error at every E (with the epochs keyed, a space without them
        optimised other networks than the ones evaluate scores)."""
        shape = shape_of(hidden_layers(point), self.max_layers, self.max_units)
        design = {name: value for name, value in point.items() if name != "epochs"}
        init_key, train_key = jax.random.split(point_key(self.seed, design))
        return shape, train_key, init_net(init_key, self.max_layers, self.max_units)

    def train(self, point: Mapping[str, Any], report, checkpoint=None) -> float:
        """A step-wise training for early stopping (``minimize(objective.train, ...,
        max_step=E)``): one epoch at a time, the epochs and batches of :meth:`evaluate`,
        reporting the validation error ``1 - accuracy`` after each with the checkpoint
        ``(epoch, weights)`` a paused training continues from. Trains until the run's
        ``max_step`` stops it, or to the point's ``epochs`` where the space has them."""
        point = self.design(point)
        shape, key, net = self._start(point)
        epoch, error = 0, None
        if checkpoint is not None:
            epoch, net = checkpoint
        last = int(point["epochs"]) if "epochs" in point else None
        rate = float(point["learning_rate"])
        while last is None or epoch < last:
            net = train_epoch(key, net, shape, self.data, epoch, rate, self.batch_size)
            epoch += 1
            error = 1.0 - float(accuracy(net, shape, self.data.x_val, self.data.y_val))
            if report(epoch, error, checkpoint=(epoch, net)) is False:
                break  # complete at the run's max_step
        return error

    def evaluate(self, point: Mapping[str, Any]) -> dict[str, float]:
        """Accuracies and training cost after the point's ``epochs``, which this (unlike
        the step-wise :meth:`train`) needs."""
        point = self.design(point)
        if "epochs" not in point:  # (a bare KeyError before)
            raise MissingParameterError(
                "epochs", "a whole training needs its epochs (train(point, report) runs without)"
            )
        shape, train_key, net = self._start(point)
        net = train(
            train_key, net, shape, self.data, int(point["epochs"]),
            float(point["learning_rate"]), self.batch_size,
        )  # fmt: skip
        return {
            "validation_accuracy": float(accuracy(net, shape, self.data.x_val, self.data.y_val)),
            "test_accuracy": float(accuracy(net, shape, self.data.x_test, self.data.y_test)),
            "train_cost": float(cost(net, shape, self.data.x_train, self.data.y_train)),
        }

    def __call__(self, point: Mapping[str, Any]) -> float:
        return self.evaluate(point)["validation_accuracy"]
