"""MLP ensembles with fixed DropConnect masks, trained in parallel: the ensemble-design
report's objective (Wilton 2020, sections 3.3, 4 and 5).

A design ``theta = (L, D, N, p)`` is an ensemble of ``N`` MLPs, each with ``L`` ReLU
hidden layers of width ``D`` and a linear output. Every weight and bias of a member is
kept with probability ``p``; the Bernoulli mask is drawn once and fixed, so it makes the
member a sparse network rather than a dropout regulariser. Members are trained by
Adadelta on the full-batch mean squared error, and the ensemble predicts the mean of
its kept members (eq. 12). The report's test loss is the Euclidean distance
``||g(X') - y'||_2`` between predictions and test responses; the MSE is recorded too.

**One compilation per run.** Every design is padded to the run's
:class:`Architecture` ``(L_max, D_max, N_max)`` with structural masks: units beyond
``D`` have zero weights (ReLU(0) = 0, so they carry nothing), a hidden layer beyond
``L`` passes its input through, a member beyond ``N`` never trains and never votes. The
design enters as traced numbers, so every design of a run shares one XLA program, on
CPU, GPU or TPU alike. Padded and unpadded networks agree in outputs and gradients
(tested); the price is that a small design costs as much compute as the largest.

**Training and stopping.** An epoch computes each member's training loss ``l_e`` and
takes one Adadelta step (PyTorch's defaults: ``rho = 0.9``, ``eps = 1e-6``, learning
rate 1). Member ``i`` stops after epoch ``e`` once ``e >= min_epochs`` and
``|l_e - l_{e-1}| < tolerance``, or at ``max_epochs``; the others keep training.

**Step by step.** :meth:`EnsembleObjective.train` is the same training for early
stopping: the test loss reported every ``epochs_per_step`` epochs, the training so far
(:class:`Progress`) its checkpoint; :meth:`EnsembleObjective.train_batch` steps several
designs as one vmapped program (:mod:`bojax.objectives.batching`).

**Excluding degenerate members.** The report drops members "on the basis of
variability in predictions": when too many weights are cut, a ReLU network collapses
to (nearly) a constant and under-fits. bojax's rule: member ``i`` is excluded when the
standard deviation of its predictions over the training inputs is below
``min_spread * std(y_train)`` (default 1 %). If every member is excluded, all are kept:
the design then predicts (nearly) a constant, and its test loss says so.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float

from bojax.bo.stepwise import takes
from bojax.compilation import jit_quick_compile
from bojax.errors import DataError, SettingsError, is_count, require_positive_counts
from bojax.objectives.batching import stacked, train_live_rows
from bojax.spaces import Integer, Real, Space

Params = dict[str, jax.Array]


@dataclass(frozen=True)
class Architecture:
    """The padded shape every design of a run is embedded in (a static jit argument)."""

    max_layers: int
    max_width: int
    max_members: int
    inputs: int = 1

    def __post_init__(self) -> None:
        require_positive_counts(self, "max_layers", "max_width", "max_members", "inputs")


@dataclass(frozen=True)
class Training:
    """How members are trained and which are kept (the report's section 5 settings)."""

    min_epochs: int = 1000
    max_epochs: int = 5000
    tolerance: float = 1e-4
    min_spread: float = 0.01

    def __post_init__(self) -> None:
        if not 1 <= self.min_epochs <= self.max_epochs:
            raise SettingsError(
                f"need 1 <= min_epochs <= max_epochs, got {self.min_epochs}, {self.max_epochs}"
            )
        for name in ("tolerance", "min_spread"):
            value = getattr(self, name)
            if not (isinstance(value, numbers.Real) and math.isfinite(value) and value >= 0):
                raise SettingsError(f"{name} must be a finite non-negative number, got {value!r}")


class Design(NamedTuple):
    """``theta = (L, D, N, p)``; as traced scalars inside jit."""

    layers: Any
    width: Any
    members: Any
    keep: Any


def design_space(max_layers: int, max_width: int, max_members: int) -> Space:
    """The report's search space: ``L``, ``D``, ``N`` uniform integers from 1, ``p`` in (0, 1)."""
    return Space(
        [
            Integer("layers", 1, max_layers),
            Integer("width", 1, max_width),
            Integer("members", 1, max_members),
            Real("keep", 0.0, 1.0),
        ]
    )


# -- one padded member ---------------------------------------------------------------------


def init_member(key: jax.Array, arch: Architecture, design: Design) -> tuple[Params, Params]:
    """Weights and DropConnect keep-masks of one member, padded to ``arch``.

    Weights and biases are ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` with the design's real
    fan-in (PyTorch's ``nn.Linear`` default, the report's implementation). Each entry of
    the mask is ``Bernoulli(p)``. Structural zeros (units beyond ``D``) are applied in
    :func:`member_forward`, so the same draws serve any width.
    """
    shapes = _shapes(arch)
    sizes = [math.prod(shape) for shape in shapes.values()]
    # One draw for everything: each random call is a threefry kernel that costs compile time.
    draws = jax.random.uniform(key, (2, sum(sizes)), jnp.float32)
    width = jnp.asarray(design.width, jnp.float32)
    params, masks, start = {}, {}, 0
    for (name, shape), size in zip(shapes.items(), sizes, strict=True):
        weights, keeps = (row[start : start + size].reshape(shape) for row in draws)
        fan_in = arch.inputs if name in ("w_in", "b_in") else width
        params[name] = (2.0 * weights - 1.0) / jnp.sqrt(fan_in)
        masks[name] = (keeps < design.keep).astype(jnp.float32)
        start += size
    return params, masks


def _shapes(arch: Architecture) -> dict[str, tuple[int, ...]]:
    hidden, width = arch.max_layers - 1, arch.max_width
    return {
        "w_in": (arch.inputs, width),
        "b_in": (width,),
        "w_hidden": (hidden, width, width),
        "b_hidden": (hidden, width),
        "w_out": (width,),
        "b_out": (),
    }


def structural_masks(arch: Architecture, design: Design) -> Params:
    """1 on the entries a design of width ``D`` has, 0 on the padding (shaped like params)."""
    units = (jnp.arange(arch.max_width) < design.width).astype(jnp.float32)
    return {
        "w_in": jnp.broadcast_to(units, (arch.inputs, arch.max_width)),
        "b_in": units,
        "w_hidden": jnp.broadcast_to(
            units[:, None] * units[None, :], (arch.max_layers - 1, arch.max_width, arch.max_width)
        ),
        "b_hidden": jnp.broadcast_to(units, (arch.max_layers - 1, arch.max_width)),
        "w_out": units,
        "b_out": jnp.ones((), jnp.float32),
    }


def member_forward(params: Params, masks: Params, layers, x: Float[Array, "B i"]):
    """Predictions ``(B,)`` of one member: ``L`` ReLU layers, then a linear output.

    ``masks`` multiplies every weight and bias (DropConnect times structure), so masked
    entries get zero gradient. Hidden layer ``l >= L`` is skipped (its input passes
    through), which ``jnp.where`` also does for the gradient. Activations are kept as
    ``(D, B)``, batch last: on CPU this layout trains twice as fast as ``(B, D)``.
    """
    w = {name: params[name] * masks[name] for name in params}
    h = jax.nn.relu(w["w_in"].T @ x.T + w["b_in"][:, None])
    for l in range(w["w_hidden"].shape[0]):
        layer = jax.nn.relu(w["w_hidden"][l].T @ h + w["b_hidden"][l][:, None])
        h = jnp.where(l + 1 < layers, layer, h)
    return w["w_out"] @ h + w["b_out"]


def _mse(params, masks, layers, x, y):
    return jnp.mean((member_forward(params, masks, layers, x) - y) ** 2)


# -- the ensemble --------------------------------------------------------------------------


class Ensemble(NamedTuple):
    """Trained members (leading axis ``N_max``) and how their training went."""

    params: Params
    masks: Params  # DropConnect x structure, what the forward pass multiplies by
    members: jax.Array  # (N_max,) bool: real members of the design
    epochs: jax.Array  # (N_max,) epochs each member trained (0 for padding)
    train_loss: jax.Array  # (N_max,) last training MSE of each member


def init_ensemble(key: jax.Array, arch: Architecture, design: Design) -> tuple[Params, Params]:
    """Parameters and combined masks of ``N_max`` members, each with its own key."""
    keys = jax.random.split(key, arch.max_members)
    params, dropconnect = jax.vmap(lambda k: init_member(k, arch, design))(keys)
    structure = structural_masks(arch, design)
    masks = jax.tree.map(lambda d, s: d * s, dropconnect, structure)
    return params, masks


class Progress(NamedTuple):
    """A training part-way: what :func:`advance` carries from one call to the next (and a
    step-wise training's checkpoint)."""

    epoch: jax.Array  # epochs trained
    params: Params
    masks: Params
    opt_state: Any
    previous: jax.Array  # (N_max,) each member's last training loss (inf before any)
    epochs: jax.Array  # (N_max,) epochs each member trained
    active: jax.Array  # (N_max,) bool: members still training


_OPTIMISER = optax.adadelta(learning_rate=1.0, rho=0.9, eps=1e-6)


def start_training(key: jax.Array, arch: Architecture, design: Design) -> Progress:
    """A fresh ensemble of ``design``: initial members, no epoch trained."""
    params, masks = init_ensemble(key, arch, design)
    return Progress(
        jnp.asarray(0),
        params,
        masks,
        jax.vmap(_OPTIMISER.init)(params),
        jnp.full(arch.max_members, jnp.inf, jnp.float32),
        jnp.zeros(arch.max_members, jnp.int32),
        jnp.arange(arch.max_members) < design.members,
    )


def advance(training: Training, progress: Progress, design: Design, x, y, until) -> Progress:
    """Train every still-active member on (one ``vmap`` inside one ``while_loop``) until
    epoch ``min(until, max_epochs)`` or until every member has stopped (see the module
    docstring); a stopped member's parameters no longer change. Training in several
    calls takes the same steps as in one."""
    x, y = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)
    loss_and_grad = jax.vmap(jax.value_and_grad(_mse), in_axes=(0, 0, None, None, None))
    update = jax.vmap(_OPTIMISER.update)
    masks = progress.masks

    def body(p: Progress) -> Progress:
        loss, grads = loss_and_grad(p.params, masks, design.layers, x, y)
        # A stopped member gets zero gradients, and Adadelta then moves it by exactly 0
        # (its step is proportional to the gradient): cheaper than freezing the state.
        grads = jax.tree.map(
            lambda g: jnp.where(p.active.reshape((-1,) + (1,) * (g.ndim - 1)), g, 0.0), grads
        )
        updates, opt_state = update(grads, p.opt_state, p.params)
        params = optax.apply_updates(p.params, updates)
        epoch = p.epoch + 1
        settled = jnp.abs(loss - p.previous) < training.tolerance
        converged = (epoch >= training.min_epochs) & settled
        return Progress(
            epoch, params, masks, opt_state,
            jnp.where(p.active, loss, p.previous),
            jnp.where(p.active, epoch, p.epochs),
            p.active & ~converged,
        )  # fmt: skip

    def running(p: Progress):
        return (p.epoch < jnp.minimum(until, training.max_epochs)) & jnp.any(p.active)

    return jax.lax.while_loop(running, body, progress)


def finished(progress: Progress, design: Design) -> Ensemble:
    """The :class:`Ensemble` a training so far amounts to."""
    members = progress.epochs.shape[0]
    real = jnp.arange(members) < design.members
    return Ensemble(progress.params, progress.masks, real, progress.epochs,
                    jnp.where(real, progress.previous, jnp.nan))  # fmt: skip


def train_ensemble(
    key: jax.Array, arch: Architecture, training: Training, design: Design, x, y
) -> Ensemble:
    """Train all members of ``design`` at once, until every real member has stopped (see
    the module docstring) or ``max_epochs``."""
    progress = advance(training, start_training(key, arch, design), design, x, y,
                       training.max_epochs)  # fmt: skip
    return finished(progress, design)


def member_predictions(ensemble: Ensemble, layers, x) -> Float[Array, "N_max B"]:
    x = jnp.asarray(x, jnp.float32)
    return jax.vmap(member_forward, in_axes=(0, 0, None, None))(
        ensemble.params, ensemble.masks, layers, x
    )


def passes_spread_rule(ensemble: Ensemble, layers, x_train, y_train, min_spread: float):
    """The exclusion rule: real members whose predictions vary by at least
    ``min_spread * std(y_train)`` over the training inputs."""
    spread = jnp.std(member_predictions(ensemble, layers, x_train), axis=1)
    floor = min_spread * jnp.std(jnp.asarray(y_train, jnp.float32))
    return ensemble.members & (spread >= floor)


def kept_members(ensemble: Ensemble, layers, x_train, y_train, min_spread: float):
    """Members that predict: those passing :func:`passes_spread_rule`, or every real
    member if none does."""
    alive = passes_spread_rule(ensemble, layers, x_train, y_train, min_spread)
    return jnp.where(jnp.any(alive), alive, ensemble.members)


def ensemble_predict(ensemble: Ensemble, kept, layers, x) -> Float[Array, " B"]:
    """``g(x) = mean of the kept members' predictions`` (report eq. 12)."""
    weights = kept.astype(jnp.float32)
    return weights @ member_predictions(ensemble, layers, x) / jnp.sum(weights)


def test_loss(prediction, y) -> jax.Array:
    """The report's test loss: the Euclidean distance ``||g(X') - y'||_2``."""
    return jnp.sqrt(jnp.sum((jnp.asarray(prediction) - jnp.asarray(y, prediction.dtype)) ** 2))


test_loss.__test__ = False  # its name starts with "test": keep pytest from collecting it


class Evaluation(NamedTuple):
    """Everything one design evaluation produced, as arrays (:meth:`EnsembleObjective.evaluate`
    returns them as Python values)."""

    test_loss: jax.Array
    test_mse: jax.Array
    train_mse: jax.Array
    kept: jax.Array  # (N_max,) bool: members passing the exclusion rule
    epochs: jax.Array  # (N_max,)
    grid_prediction: jax.Array  # ensemble prediction at the caller's grid


jit_train_ensemble = jit_quick_compile(train_ensemble, static_argnums=(1, 2))


def tested(training: Training, ensemble: Ensemble, design: Design, data, grid) -> Evaluation:
    """Prune ``ensemble`` by the exclusion rule and score it on ``data = (x, y, x_test,
    y_test)``."""
    x, y, x_test, y_test = data
    alive = passes_spread_rule(ensemble, design.layers, x, y, training.min_spread)
    kept = jnp.where(jnp.any(alive), alive, ensemble.members)
    test_prediction = ensemble_predict(ensemble, kept, design.layers, x_test)
    train_prediction = ensemble_predict(ensemble, kept, design.layers, x)
    y_test = jnp.asarray(y_test, jnp.float32)
    return Evaluation(
        test_loss(test_prediction, y_test),
        jnp.mean((test_prediction - y_test) ** 2),
        jnp.mean((train_prediction - jnp.asarray(y, jnp.float32)) ** 2),
        alive,
        ensemble.epochs,
        ensemble_predict(ensemble, kept, design.layers, grid),
    )


def evaluate_design(arch: Architecture, training: Training, key, design: Design, data, grid):
    """Train, prune and test one design; ``data = (x, y, x_test, y_test)``. Jitted once per
    (architecture, training settings, data shapes): designs are traced numbers."""
    ensemble = train_ensemble(key, arch, training, design, data[0], data[1])
    return tested(training, ensemble, design, data, grid)


def advance_and_score(training: Training, progress: Progress, design: Design, data, until):
    """A step of a step-wise training: :func:`advance` to epoch ``until``, then the test
    loss the ensemble has there and whether its training is over (every member stopped,
    or ``max_epochs``)."""
    progress = advance(training, progress, design, data[0], data[1], until)
    score = tested(training, finished(progress, design), design, data, data[2][:1])
    over = ~jnp.any(progress.active) | (progress.epoch >= training.max_epochs)
    return progress, score.test_loss, over


def evaluate_designs(arch: Architecture, training: Training, keys, designs: Design, data, grid):
    """:func:`evaluate_design` for a batch of designs (leading axis of ``keys`` and of each
    field of ``designs``) in one program. Every design is already padded to ``arch``, so
    the batch is a plain ``vmap``; the training loop runs until the batch's slowest
    member stops, and a finished design's state no longer changes."""
    return jax.vmap(_evaluate_one, in_axes=(None, None, 0, 0, None, None))(
        arch, training, keys, designs, data, grid
    )


_evaluate_one = evaluate_design  # the traced function, before it is jitted on its own
evaluate_design = jit_quick_compile(evaluate_design, static_argnums=(0, 1))
evaluate_designs = jit_quick_compile(evaluate_designs, static_argnums=(0, 1))
# A step-wise training's programs: one design, a batch of designs (axis 0), a fresh batch.
_advance_one = jit_quick_compile(advance_and_score, static_argnums=(0,))
_advance_many = jit_quick_compile(
    jax.vmap(advance_and_score, in_axes=(None, 0, 0, None, None)), static_argnums=(0,)
)
_start_one = jit_quick_compile(start_training, static_argnums=(1,))
_start_many = jit_quick_compile(jax.vmap(start_training, in_axes=(0, None, 0)), static_argnums=(1,))


def batch_size(count: int, devices: int) -> int:
    """Designs per batched call for ``count`` designs on ``devices`` devices: the next power
    of two (one compilation per size a run uses), at least one per device."""
    return max(devices, 1 << max(0, count - 1).bit_length())


# -- the objective bojax.minimize calls ------------------------------------------------------


def design_key(seed: int, point: Mapping[str, Any]) -> jax.Array:
    """A key that depends on the seed and the design only, so a design's loss is the same
    whenever (and in whichever run order, or after a resume) it is evaluated."""
    packed = struct.pack(
        "<qqqqd",
        seed,
        int(point["layers"]),
        int(point["width"]),
        int(point["members"]),
        float(point["keep"]),
    )
    digest = int.from_bytes(hashlib.sha256(packed).digest()[:4], "little")
    return jax.random.fold_in(jax.random.key(seed), digest)


class EnsembleObjective:
    """``objective(point) -> test loss`` for :func:`bojax.minimize` over :func:`design_space`.

    ``data = (x_train, y_train, x_test, y_test)``, inputs ``(n, inputs)`` or ``(n,)``.
    ``grid`` (optional) is where :meth:`evaluate` also returns the ensemble's prediction,
    for plots.
    """

    def __init__(
        self,
        space: Space,
        data,
        training: Training = Training(),
        seed: int = 0,
        grid=None,
        epochs_per_step: int = 100,
    ):
        names = [p.name for p in space.parameters]
        if names != ["layers", "width", "members", "keep"]:
            raise SettingsError(f"expected a design_space(...), got parameters {names}")
        x, y, x_test, y_test = (np.asarray(a, np.float64) for a in data)
        x, x_test = x.reshape(len(x), -1), x_test.reshape(len(x_test), -1)
        if len(x) < 2 or len(x_test) < 1 or len(y) != len(x) or len(y_test) != len(x_test):
            raise DataError("need matching (x, y) train (n >= 2) and test (n >= 1) sets")
        if x.shape[1] != x_test.shape[1]:
            raise DataError(f"train inputs have {x.shape[1]} columns, test {x_test.shape[1]}")
        if not all(np.all(np.isfinite(a)) for a in (x, y, x_test, y_test)):
            raise DataError("training or test data contain NaN or inf")
        if np.std(y) == 0:
            raise DataError("constant training responses: there is nothing to learn")
        if not is_count(epochs_per_step) or epochs_per_step < 1:
            raise SettingsError(
                f"epochs_per_step must be a positive integer, got {epochs_per_step!r}"
            )
        self.space, self.training, self.seed = space, training, seed
        self.epochs_per_step = int(epochs_per_step)
        bounds = {p.name: p.high for p in space.parameters}
        self.architecture = Architecture(
            int(bounds["layers"]), int(bounds["width"]), int(bounds["members"]), x.shape[1]
        )
        self.data = tuple(jnp.asarray(a, jnp.float32) for a in (x, y, x_test, y_test))
        grid = x_test[:1] if grid is None else np.asarray(grid, np.float64)
        self.grid = jnp.asarray(grid.reshape(len(grid), -1), jnp.float32)

    def _design(self, point: Mapping[str, Any]) -> Design:
        return Design(
            jnp.asarray(point["layers"], jnp.int32),
            jnp.asarray(point["width"], jnp.int32),
            jnp.asarray(point["members"], jnp.int32),
            jnp.asarray(point["keep"], jnp.float32),
        )

    def evaluate(self, point: Mapping[str, Any]) -> dict[str, Any]:
        """Train and test one design; a dict of Python numbers and lists."""
        point = self.space.validate(point)
        result = evaluate_design(
            self.architecture,
            self.training,
            design_key(self.seed, point),
            self._design(point),
            self.data,
            self.grid,
        )
        return _summary(point, result)

    def evaluate_batch(self, points: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Train and test several designs in one vmapped call, the batch split across the
        local devices (``jax.sharding``) when there are several. Each design gets the key
        :meth:`evaluate` would give it, so the results are the same up to float32
        rounding. The batch is padded (repeating its last design) to :func:`batch_size`."""
        points = [self.space.validate(p) for p in points]
        if not points:
            return []
        devices = jax.local_devices()
        size = batch_size(len(points), len(devices))
        padded = points + [points[-1]] * (size - len(points))
        keys = jnp.stack([design_key(self.seed, p) for p in padded])
        designs = jax.tree.map(lambda *f: jnp.stack(f), *[self._design(p) for p in padded])
        if len(devices) > 1:
            mesh = jax.sharding.Mesh(np.array(devices), ("designs",))
            spread = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("designs"))
            keys, designs = jax.device_put((keys, designs), spread)
        results = evaluate_designs(
            self.architecture, self.training, keys, designs, self.data, self.grid
        )
        return [
            _summary(p, jax.tree.map(lambda a, i=i: a[i], results)) for i, p in enumerate(points)
        ]

    def __call__(self, point: Mapping[str, Any]) -> float:
        return self.evaluate(point)["test_loss"]

    @property
    def max_step(self) -> int:
        """The steps of a full training (``max_epochs`` in steps of ``epochs_per_step``):
        the ``max_step`` of a step-wise run of :meth:`train`."""
        return -(-self.training.max_epochs // self.epochs_per_step)

    def _until(self, step: int) -> jax.Array:
        return jnp.asarray(min(step * self.epochs_per_step, self.training.max_epochs))

    def train(self, point: Mapping[str, Any], report, checkpoint=None) -> float:
        """A step-wise training for early stopping (``minimize(objective.train, ...,
        max_step=objective.max_step)``): :meth:`evaluate`'s training in steps of
        ``epochs_per_step`` epochs, reporting the test loss after each with the
        checkpoint ``(step, training so far)`` a paused training continues from. It ends
        by itself once every member has stopped (the module docstring's rule); its last
        value is :meth:`evaluate`'s test loss."""
        point = self.space.validate(point)
        design = self._design(point)
        if checkpoint is None:
            step, progress = 0, _start_one(design_key(self.seed, point), self.architecture, design)
        else:
            step, progress = checkpoint
        value = float("nan")
        says_last = takes(report, "last")  # bojax's reports; a plain function is called as it was
        while step < self.max_step:
            step += 1
            progress, loss, over = _advance_one(
                self.training, progress, design, self.data, self._until(step)
            )
            value = float(loss)
            # Every member stopped: the training is complete here (last=True), even at a
            # milestone where the scheduler would stop it.
            ended = {"last": True} if bool(over) and says_last else {}
            if report(step, value, checkpoint=(step, progress), **ended) is False or bool(over):
                break
        return value

    def train_batch(self, points: Sequence[Mapping[str, Any]], reports: Sequence) -> list[float]:
        """:meth:`train` for several designs at once (``q > 1`` without an executor):
        each step of every design still training is one vmapped program
        (:func:`bojax.objectives.batching.train_live_rows`). Same keys and, up to float32
        rounding, the same losses as :meth:`train`. One design trains as :meth:`train`
        does: a batch of one ran at 0.6-0.8x its speed (benchmarks/README.md)."""
        if len(points) == 1:
            return [self._train_alone(points[0], reports[0])]
        points = [self.space.validate(p) for p in points]
        keys = jnp.stack([design_key(self.seed, p) for p in points])
        designs = stacked([self._design(p) for p in points])
        progress = _start_many(keys, self.architecture, designs)

        def step_rows(rows, step: int):
            progress, design = rows
            progress, loss, over = _advance_many(
                self.training, progress, design, self.data, self._until(step + 1)
            )
            return (progress, design), loss, over

        return train_live_rows((progress, designs), reports, step_rows, self.max_step)

    def _train_alone(self, point: Mapping[str, Any], report) -> float:
        """:meth:`train` called as a batch's member: ``report(step, value)`` (``last=True``
        where it takes it) may stop it by returning False or raising ``StopTraining``."""
        from bojax.bo.stepwise import StopTraining

        says_last = takes(report, "last")
        value = float("nan")

        def passed(step, reported, checkpoint=None, last=False):
            nonlocal value
            value = reported
            return (
                report(step, reported, last=True) if last and says_last else report(step, reported)
            )

        try:
            return self.train(point, passed)
        except StopTraining:
            return value

    def batch(self, points: Sequence[Mapping[str, Any]]) -> list[float]:
        """Test losses of ``points`` from one :meth:`evaluate_batch`; :func:`bojax.minimize`
        calls it for batches of ``q`` proposals when it has no executor."""
        return [r["test_loss"] for r in self.evaluate_batch(points)]


def _summary(point: Mapping[str, Any], result: Evaluation) -> dict[str, Any]:
    n = point["members"]
    kept = int(np.sum(np.asarray(result.kept)[:n]))
    return {
        "design": dict(point),
        "test_loss": float(result.test_loss),
        "test_mse": float(result.test_mse),
        "train_mse": float(result.train_mse),
        "kept": kept,
        "excluded": n - kept,
        "epochs": np.asarray(result.epochs)[:n].tolist(),
        "grid_prediction": np.asarray(result.grid_prediction, np.float64).tolist(),
    }
