"""Trainings that stop early: regret against epochs spent, bojax and its peers side by side.

Problems: the LCBench surrogate (YAHPO Gym's ONNX model of Zimmer et al. 2021's learning
curves: funnel MLPs on OpenML tasks, epochs 1-52), read at run time from
``../shared/data/lcbench/`` (or ``--lcbench``; skipped when absent). The value is the
validation error ``1 - val_accuracy / 100`` after each epoch; the surrogate is
deterministic, so no noise is added. Six tasks, chosen as the first six of its
configuration space's list before any result was seen.

And ``mnist1d``, a real training task of bojax's own: the MNIST-1D MLP of
``bojax.objectives.mixednet`` (optimiser, momentum for SGD, activation, layer norm,
depth, width and learning rate: a mixed, conditional space) trained epoch by epoch, at
most 20 epochs, with 20 full trainings' worth of epochs (400); its best known error is
the lowest any arm reached, and the SMAC3 arm sits it out (this script builds numeric
configuration spaces only).

Budget: what ``FULL`` = 40 full trainings of 52 epochs cost (2,080 epochs). Every arm
spends it epoch by epoch; an arm's incumbent after ``e`` epochs is the lowest validation
error any training had reported by then (a training keeps its best epoch's weights), and
its regret is that minus the lowest error known for the task (a 20,000-design random
sample's curves and every arm's reports). Arms:

* ``bojax-full``: ``bojax.minimize`` as before this issue: 40 designs (10 of them a Sobol
  design), each trained to epoch 52, the default fully Bayesian GP and LogEI;
* ``bojax-hyperband`` / ``bojax-asha``: the same objective written as ``train(point,
  report)`` with ``early_stopping="hyperband"`` / ``"asha"`` (``min_step=1, eta=3``) and new
  designs from the GP at the highest milestone with enough values (BOHB's rule);
* ``bojax-freeze-thaw``: ``early_stopping="freeze-thaw"``: a GP over (design, step)
  pauses trainings at milestones and thaws the one with the most expected improvement at
  epoch 52 per epoch still needed, or starts a new design (the objective continues from
  a checkpoint, as the surrogate's curves allow); the seconds of each decision against
  the (design, epoch) values observed are kept;
* ``bojax-freeze-thaw-seconds``: the same with ``cost_aware=True``: each choice priced in
  seconds (a design's epochs at its own seconds per epoch so far; a new one's at what a
  GP on the log seconds per epoch predicts), not epochs. On LCBench the training passes
  each epoch's simulated seconds as ``report(..., seconds=s)``; on MNIST-1D bojax times
  the epochs;
* ``random-asha``: ``proposer="random"``, ASHA: random search with successive halving;
* ``top-k``: the plain baseline: a quarter of the budget trains that many random designs
  one epoch each, and the rest continues the best of them to epoch 52;
* ``tpe-hyperband`` / ``tpe-median``: Optuna's TPE with its ``HyperbandPruner``
  (``min_resource=1, max_resource=52, reduction_factor=3``) / ``MedianPruner``
  (defaults: 5 startup trials);
* ``smac-mf``: SMAC3's multi-fidelity facade (random forest, Hyperband, ``eta=3``,
  budgets 1-52); SMAC trains a promoted design again from its first epoch, so every
  epoch it asks for is charged;
* ``random``: random designs trained to the end.

Printed: per task the median regret (quartiles) at 10, 25, 50 and 100 % of the budget,
and the epochs each arm needed to reach ``bojax-full``'s final median regret. Then the
same against seconds: each run keeps a clock, epoch by epoch, of its training seconds
(the LCBench surrogate predicts each epoch's; MNIST-1D's are real) plus the arm's own
(its decisions: fits, acquisitions, samplers), read at 10-100 % of ``bojax-full``'s
median seconds, over the seeds every arm ran with a clock (runs kept before the clock
have none; delete such a run to run it again with one). Each
(task, arm, seed) run is kept in ``<out>/multifidelity_runs/`` (gzipped JSON, small enough
to commit, so seeds run in different sessions add up) and reused.

    uv run --group bench python benchmarks/multifidelity.py [--quick] [--seeds N]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import bojax  # noqa: E402
from bojax.parameters import Categorical, Integer, Ordinal, Real  # noqa: E402

LCBENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "lcbench"
TASKS = ["3945", "7593", "34539", "126025", "126026", "126029"]
EPOCHS = 52
FULL = 40
ARMS = [
    "bojax-full",
    "bojax-hyperband",
    "bojax-asha",
    "bojax-freeze-thaw",
    "bojax-freeze-thaw-seconds",
    "random-asha",
    "top-k",
    "tpe-hyperband",
    "tpe-median",
    "smac-mf",
    "random",
]
FRACTIONS = (0.1, 0.25, 0.5, 1.0)

SPACE = bojax.Space(
    [
        Integer("batch_size", 16, 512, log=True),
        Real("learning_rate", 1e-4, 1e-1, log=True),
        Real("momentum", 0.1, 0.99),
        Real("weight_decay", 1e-5, 1e-1),
        Integer("num_layers", 1, 5),
        Integer("max_units", 64, 1024, log=True),
        Real("max_dropout", 0.0, 1.0),
    ]
)
# The ONNX model's continuous inputs after the epoch, in its order.
COLUMNS = ("batch_size", "learning_rate", "momentum", "weight_decay", "num_layers", "max_units")


class Curve:
    """A training's validation errors, trained as far as they are read (``curve[e]``, 0-based
    epochs); ``cost(e)``: the seconds epoch ``e`` took where they are simulated (the
    LCBench surrogate's), 0 where the training really runs (its seconds are on the clock)."""

    def __init__(self, errors, epochs: int, seconds=None):
        self.errors, self.epochs, self.values, self.seconds = errors, epochs, [], seconds

    def __len__(self) -> int:
        return self.epochs

    def __getitem__(self, epoch):
        if isinstance(epoch, slice):
            return [self[e] for e in range(*epoch.indices(self.epochs))]
        epoch = epoch % self.epochs
        while len(self.values) <= epoch:
            self.values.append(next(self.errors))
        return self.values[epoch]

    def __iter__(self):
        return (self[e] for e in range(self.epochs))

    def cost(self, epoch: int) -> float:
        return 0.0 if self.seconds is None else float(self.seconds[epoch % self.epochs])


class LCBench:
    """One task's learning curves from the surrogate: ``curves(points)``, each a
    :class:`Curve` of validation errors that also knows each epoch's training seconds."""

    epochs, space, trainings = EPOCHS, SPACE, FULL

    def __init__(self, task: str, folder: Path = LCBENCH):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(str(folder / "model.onnx"), options)
        codes = json.loads((folder / "encoding.json").read_text())["OpenML_task_id"]
        self.code = codes[task]

    def _predict(self, points: list[dict]) -> tuple[np.ndarray, np.ndarray]:
        """``(errors, seconds)``, each ``(B, 52)``: the validation error after each epoch and
        the seconds each epoch took (the surrogate's cumulative time, made non-decreasing)."""
        rows = np.array([[p[c] for c in COLUMNS] + [p["max_dropout"]] for p in points], np.float32)
        b = len(points)
        x = np.concatenate(
            [np.tile(np.arange(1, EPOCHS + 1, dtype=np.float32), b)[:, None],
             np.repeat(rows, EPOCHS, axis=0)],
            axis=1,
        )  # fmt: skip
        codes = np.full((b * EPOCHS, 1), self.code, np.int32)
        out = self.session.run(None, {"x_cat": codes, "x_cont": x})[0]
        errors = (1.0 - out[:, 1].reshape(b, EPOCHS) / 100.0).astype(np.float64)
        elapsed = np.maximum.accumulate(np.maximum(out[:, 0].reshape(b, EPOCHS), 0.0), axis=1)
        return errors, np.diff(elapsed.astype(np.float64), axis=1, prepend=0.0)

    def errors(self, points: list[dict]) -> np.ndarray:
        """The validation errors of ``points``' whole curves, ``(B, 52)``."""
        return self._predict(points)[0]

    def curves(self, points: list[dict]) -> list[Curve]:
        errors, seconds = self._predict(points)
        return [Curve(iter(e), EPOCHS, s) for e, s in zip(errors, seconds, strict=True)]

    def curve(self, point: dict) -> Curve:
        return self.curves([point])[0]


class MNIST1D:
    """bojax's own training task: the MNIST-1D MLP of :mod:`bojax.objectives.mixednet`
    (optimiser, momentum for SGD, activation, layer norm, depth, width, learning rate),
    trained epoch by epoch for up to 20 epochs; the value is the validation error."""

    epochs, trainings = 20, 20

    def __init__(self, task: str = "mnist1d"):
        from bojax.objectives.mixednet import MixedNetObjective, Training

        self.objective = MixedNetObjective(training=Training(epochs=self.epochs), seed=0)
        self.space = self.objective.space

    def curve(self, point: dict) -> Curve:
        return Curve(self.objective.curve(point), self.epochs)

    def curves(self, points: list[dict]) -> list[Curve]:
        return [self.curve(p) for p in points]


def make_bench(task: str):
    return MNIST1D() if task == "mnist1d" else LCBench(task)


class Log:
    """Every reported epoch of a run, in order: its validation error, and the run's clock
    then: the arm's own seconds since it began (its decisions and, for a real training,
    the training itself) plus the simulated seconds of every epoch trained so far."""

    def __init__(self, budget: int):
        self.values: list[float] = []
        self.clock: list[float] = []
        self.budget = budget
        self.started, self.simulated = time.perf_counter(), 0.0

    def spend(self, curve: Curve, epoch: int) -> bool:
        """Record ``curve``'s epoch ``epoch`` (0-based) and its simulated seconds; False once
        the budget is spent (the epoch is not recorded)."""
        if len(self.values) >= self.budget:
            return False
        self.simulated += curve.cost(epoch)
        self.values.append(float(curve[epoch]))
        self.clock.append(round(time.perf_counter() - self.started + self.simulated, 2))
        return True


def stepwise_train(bench, log: Log | None = None):
    """``bench``'s curves as ``train(point, report, checkpoint=None)``: a training that can
    continue from a checkpoint (freeze-thaw thaws from it, the other schedulers never
    pause): the paused curve goes on, so MNIST-1D trains only the epochs after it, as a
    checkpointed training would; ``log`` gets every epoch trained."""

    paused: dict[str, Curve] = {}  # a thawed training goes on from where it was paused

    def train(point, report, checkpoint=None):
        key = json.dumps(point, sort_keys=True, default=str)
        curve = paused.get(key) if checkpoint is not None else None
        curve = paused[key] = curve or bench.curve(point)
        for epoch in range(1 + (checkpoint or 0), bench.epochs + 1):
            if log is not None:
                log.spend(curve, epoch - 1)
            # A simulated epoch's seconds (read only by cost-aware freeze-thaw); a real
            # training's are timed.
            seconds = {} if curve.seconds is None else {"seconds": curve.cost(epoch - 1)}
            report(epoch, curve[epoch - 1], checkpoint=epoch, **seconds)
        return curve[-1]

    return train


def _bojax(bench, seed: int, budget: int, log: Log, **settings) -> dict:
    result = bojax.minimize(
        stepwise_train(bench, log), bench.space, seed=seed, max_step=bench.epochs,
        step_budget=budget, progress=False, **settings,
    )  # fmt: skip
    observed, decisions = 0, []
    for record in result.history:  # freeze-thaw: each decision's cost against the data
        observed += len(record["curve"])
        if "decision_seconds" in record:
            decisions.append((observed, record["decision_seconds"]))
    return {"decisions": decisions} if decisions else {}


def run_bojax_full(bench, seed, budget, log):
    def full(point):
        curve = bench.curve(point)
        for epoch in range(len(curve)):
            log.spend(curve, epoch)
        return curve[-1]

    trainings = budget // bench.epochs
    initial = max(2, trainings // 4)
    bojax.minimize(full, bench.space, seed=seed, initial=initial, iterations=trainings - initial,
                   progress=False)  # fmt: skip


def run_top_k(bench, seed, budget, log):
    rng = np.random.default_rng(seed)
    first = budget // 4
    points = [bench.space.from_unit(u) for u in rng.random((first, bench.space.dim))]
    curves = bench.curves(points)
    for curve in curves:
        log.spend(curve, 0)
    for j in np.argsort([curve[0] for curve in curves], kind="stable"):
        for epoch in range(1, bench.epochs):
            if not log.spend(curves[j], epoch):
                return


def run_random(bench, seed, budget, log):
    rng = np.random.default_rng(seed)
    while len(log.values) < budget:
        curve = bench.curve(bench.space.from_unit(rng.random(bench.space.dim)))
        for epoch in range(len(curve)):
            if not log.spend(curve, epoch):
                return


def _optuna_point(trial, space) -> dict:
    """The trial's point, define-by-run: a conditional parameter is suggested only where
    its condition holds, categoricals and ordinals as Optuna's categoricals."""
    point = {}
    for p in space.parameters:
        c = p.condition
        if c is not None and not bool(c.holds(np.array([point[c.parent]], dtype=object))[0]):
            continue
        if isinstance(p, Categorical):
            point[p.name] = trial.suggest_categorical(p.name, list(p.choices))
        elif isinstance(p, Ordinal):
            point[p.name] = trial.suggest_categorical(p.name, list(p.values))
        elif isinstance(p, Integer):
            point[p.name] = trial.suggest_int(p.name, p.low, p.high, log=p.log)
        else:
            point[p.name] = trial.suggest_float(p.name, p.low, p.high, log=p.log)
    return point


def run_tpe(bench, seed, budget, log, pruner: str):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    pruners = {
        "hyperband": lambda: optuna.pruners.HyperbandPruner(1, bench.epochs, 3),
        "median": lambda: optuna.pruners.MedianPruner(),
    }
    study = optuna.create_study(  # named: Hyperband's brackets hash the study's name
        study_name=f"tpe-{pruner}-{seed}",
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=pruners[pruner](),
    )
    while len(log.values) < budget:
        trial = study.ask()
        curve = bench.curve(_optuna_point(trial, bench.space))
        pruned = False
        for epoch in range(1, bench.epochs + 1):
            if not log.spend(curve, epoch - 1):
                return
            trial.report(float(curve[epoch - 1]), epoch)
            if trial.should_prune():
                pruned = True
                break
        if pruned:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            study.tell(trial, float(curve[-1]))


def run_smac(bench, seed, budget, log):
    import logging
    import tempfile

    import ConfigSpace as cs
    from smac import MultiFidelityFacade, Scenario
    from smac.intensifier.hyperband import Hyperband
    from smac.runhistory.dataclasses import TrialValue

    logging.getLogger("smac").setLevel(logging.ERROR)
    configspace = cs.ConfigurationSpace(seed=seed)
    for p in bench.space.parameters:
        kind = cs.Integer if isinstance(p, Integer) else cs.Float
        configspace.add(kind(p.name, (p.low, p.high), log=p.log))
    scenario = Scenario(
        configspace, deterministic=True, n_trials=10**6, seed=seed, min_budget=1,
        max_budget=bench.epochs, output_directory=Path(tempfile.mkdtemp()) / "smac",
    )  # fmt: skip

    def never(config, seed: int = 0, budget: float = 1.0) -> float:
        raise RuntimeError("driven by ask and tell")

    smac = MultiFidelityFacade(
        scenario, never, intensifier=Hyperband(scenario, eta=3), overwrite=True,
        logging_level=40,
    )  # fmt: skip
    while len(log.values) < budget:
        info = smac.ask()
        epochs = max(1, min(bench.epochs, round(info.budget)))
        curve = bench.curve(dict(info.config))
        for epoch in range(epochs):  # from the first epoch again: every one is charged
            if not log.spend(curve, epoch):
                return
        smac.tell(info, TrialValue(cost=float(curve[epochs - 1])))


RUNNERS = {
    "bojax-full": run_bojax_full,
    "bojax-hyperband": lambda b, s, n, log: _bojax(b, s, n, log, early_stopping="hyperband"),
    "bojax-asha": lambda b, s, n, log: _bojax(b, s, n, log, early_stopping="asha"),
    "bojax-freeze-thaw": lambda b, s, n, log: _bojax(b, s, n, log, early_stopping="freeze-thaw"),
    "bojax-freeze-thaw-seconds": lambda b, s, n, log: _bojax(
        b, s, n, log, early_stopping="freeze-thaw", cost_aware=True
    ),
    "random-asha": lambda b, s, n, log: _bojax(
        b, s, n, log, early_stopping="asha", proposer="random"
    ),
    "top-k": run_top_k,
    "tpe-hyperband": lambda b, s, n, log: run_tpe(b, s, n, log, "hyperband"),
    "tpe-median": lambda b, s, n, log: run_tpe(b, s, n, log, "median"),
    "smac-mf": run_smac,
    "random": run_random,
}


def run_one(task: str, arm: str, seed: int, budget: int) -> dict:
    bench, log = make_bench(task), Log(budget)
    extra = RUNNERS[arm](bench, seed, budget, log) or {}
    seconds = time.perf_counter() - log.started
    return {"values": log.values, "clock": log.clock, "seconds": seconds, **extra}


def reference(task: str, count: int = 20000) -> float:
    """The lowest validation error of ``count`` random designs' whole curves (LCBench;
    a real training task's best known is the lowest any arm reached: inf here)."""
    if task == "mnist1d":
        return math.inf
    bench = LCBench(task)
    rng = np.random.default_rng(12345)
    best = math.inf
    for start in range(0, count, 1000):
        points = [SPACE.from_unit(u) for u in rng.random((min(1000, count - start), SPACE.dim))]
        best = min(best, float(bench.errors(points).min()))
    return best


def decision_speed(task: str = "3945", observations: int = 2000, seed: int = 0, **settings) -> dict:
    """Seconds of a freeze-thaw decision with ``observations`` (design, epoch) values:
    random designs' LCBench curves cut at random milestones until they hold that many,
    then 12 decisions in a row (the first fits from scratch; the median of the last 10,
    warm, is the steady cost). ``settings``: more run settings (``samples=16``;
    ``cost_aware=True`` prices in the curves' simulated seconds)."""
    from bojax.bo.freezethaw import Design, FreezeThaw

    bench, rng = LCBench(task), np.random.default_rng(seed)
    designs, held = [], 0
    while held < observations:
        u = rng.random(SPACE.dim)
        point = SPACE.from_unit(u)
        cut = min(int(rng.choice([1, 3, 9, 27, 52])), observations - held)
        curve = bench.curve(point)
        seconds = sum(curve.cost(e) for e in range(cut))
        designs.append(Design(u, point, [[e + 1, float(v)] for e, v in enumerate(curve[:cut])],
                              complete=cut == EPOCHS, charged=cut, seconds=seconds))  # fmt: skip
        held += cut
    model = FreezeThaw(
        SPACE, bojax.Settings(max_step=EPOCHS, early_stopping="freeze-thaw", **settings)
    )
    seconds = []
    for k in range(12):
        tick = time.perf_counter()
        model.decide(designs, k)
        seconds.append(time.perf_counter() - tick)
    return {"observations": held, "designs": len(designs), "first": seconds[0],
            "steady": float(np.median(seconds[2:])), "max_steady": max(seconds[2:])}  # fmt: skip


def resume_speed(task: str = "3945", budget: int = EPOCHS * FULL, seed: int = 0) -> dict:
    """Seconds to resume a finished freeze-thaw run of ``budget`` epochs (journal in a
    temporary folder): with the chains each decision keeps in ``sampler.json``, and with
    the file removed (every decision's fit replayed, as before it was kept)."""
    import shutil
    import tempfile

    train = stepwise_train(LCBench(task))
    settings = dict(max_step=EPOCHS, step_budget=budget, early_stopping="freeze-thaw",
                    seed=seed, progress=False)  # fmt: skip
    row = {"task": task, "budget": budget}
    with tempfile.TemporaryDirectory() as folder:
        tick = time.perf_counter()
        run = bojax.minimize(train, SPACE, out=Path(folder) / "kept", **settings)
        row["run_s"], row["decisions"] = time.perf_counter() - tick, len(run.history)
        shutil.copytree(Path(folder) / "kept", Path(folder) / "replayed")
        (Path(folder) / "replayed" / "sampler.json").unlink()
        for name in ("kept", "replayed"):
            tick = time.perf_counter()
            resumed = bojax.minimize(train, SPACE, out=Path(folder) / name, resume=True,
                                     **settings)  # fmt: skip
            row[f"resume_{name}_s"] = time.perf_counter() - tick
            keys = ("x", "y", "status", "curve", "phase")  # the same records either way
            assert [[r[k] for k in keys] for r in resumed.history] == [
                [r[k] for k in keys] for r in run.history
            ]
    return row


def _trainer(name: str, epochs: int):
    """``(objective, steps, epochs per step)`` of a step-wise trainer to time: MNIST-1D's
    MLPs (an epoch a step) or the ensemble-design report's ensembles on its Experiment 1
    data (30 members of up to 5 x 15 units; ``epochs`` in steps of 100, every member
    training all of them)."""
    if name == "mnist1d":
        from bojax.objectives.mixednet import MixedNetObjective, Training

        return MixedNetObjective(training=Training(epochs=epochs)), epochs, 1
    from bojax.objectives import datasets, ensemble

    space = ensemble.design_space(max_layers=5, max_width=15, max_members=30)
    training = ensemble.Training(min_epochs=epochs, max_epochs=epochs)
    objective = ensemble.EnsembleObjective(
        space, datasets.experiment1(seed=0).arrays, training, epochs_per_step=100
    )
    return objective, objective.max_step, 100


def batched_speed(sizes=(1, 2, 4, 8, 16), trainer: str = "mnist1d", seed: int = 0) -> list[dict]:
    """(design x epoch) per second of step-wise trainings, ``size`` random designs one at
    a time (``objective.train``) against one vmapped batch (``train_batch``), each timed
    after a warm-up call that compiles it. ``trainer``: ``mnist1d`` (5 epochs) or
    ``ensemble`` (500 epochs)."""
    objective, steps, per_step = _trainer(trainer, 5 if trainer == "mnist1d" else 500)
    rng = np.random.default_rng(seed)
    rows = []

    def quiet(step, value, checkpoint=None):
        return None

    for size in sizes:
        points = [objective.space.from_unit(u) for u in rng.random((size, objective.space.dim))]
        objective.train_batch(points, [quiet] * size)  # compile
        objective.train(points[0], quiet)
        tick = time.perf_counter()
        for point in points:
            objective.train(point, quiet)
        alone = time.perf_counter() - tick
        tick = time.perf_counter()
        objective.train_batch(points, [quiet] * size)
        together = time.perf_counter() - tick
        work = size * steps * per_step
        rows.append({"trainer": trainer, "designs": size, "epochs": steps * per_step,
                     "alone_per_s": work / alone, "batched_per_s": work / together,
                     "speedup": alone / together,
                     "device": jax.devices()[0].device_kind})  # fmt: skip
    return rows


def available(arm: str, task: str | None = None) -> bool:
    """Whether ``arm`` runs (its peer installed) on ``task``: this SMAC3 arm builds
    numeric configuration spaces only, so it sits out MNIST-1D's categorical choices."""
    if arm == "smac-mf" and task == "mnist1d":
        return False
    module = {"tpe-hyperband": "optuna", "tpe-median": "optuna", "smac-mf": "smac"}.get(arm)
    if module is None:
        return True
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def budget_of(task: str, quick: bool) -> int:
    """Epochs of a run: what ``trainings`` full trainings cost (8 in the quick mode)."""
    kind = MNIST1D if task == "mnist1d" else LCBench
    return (8 if quick else kind.trainings) * kind.epochs


def run_path(runs: Path, task: str, arm: str, seed: int) -> Path:
    """Where the run of ``arm`` on ``task`` with ``seed`` is kept."""
    return runs / f"{task}_{arm}_{seed}.json.gz"


def read_run(path: Path) -> dict:
    with gzip.open(path, "rt") as file:
        return json.load(file)


def write_run(path: Path, run: dict) -> None:
    """Atomically (a stopped benchmark leaves no half-written run); mtime 0 in the gzip
    header, so the same run gives the same bytes."""
    part = path.with_suffix(".part")
    with open(part, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as file:
        file.write(json.dumps(run, separators=(",", ":")).encode())
    part.replace(path)


def existing(tasks, arms, seeds, runs: Path, every: bool = False) -> dict:
    """The kept runs of each task at the seeds every arm ran (``--existing``: a table of
    what is there, computing nothing; a seed some arm lacks is left out for all), or with
    ``every`` each arm's own kept seeds below ``seeds`` (the table's counts then differ)."""
    results: dict = {}
    for task in tasks:
        playing = [arm for arm in arms if available(arm, task)]
        for seed in range(seeds):
            paths = [run_path(runs, task, arm, seed) for arm in playing]
            if every:
                for arm, path in zip(playing, paths, strict=True):
                    if path.exists():
                        results.setdefault(task, {}).setdefault(arm, []).append(read_run(path))
            elif all(path.exists() for path in paths):
                for arm, path in zip(playing, paths, strict=True):
                    runs_of = results.setdefault(task, {}).setdefault(arm, [])
                    runs_of.append(read_run(path))
    return results


def collect(tasks, arms, seeds, quick: bool, runs: Path, console) -> dict:
    runs.mkdir(parents=True, exist_ok=True)
    results: dict = {}
    for seed in range(seeds):  # seed-major: a stopped benchmark has every arm at equal seeds
        for task in tasks:
            budget = budget_of(task, quick)
            for arm in arms:
                if not available(arm, task):
                    continue
                path = run_path(runs, task, arm, seed)
                if not path.exists():
                    tick = time.perf_counter()
                    command = [sys.executable, __file__, "--run-one", task, arm, str(seed),
                               "--budget", str(budget), "--to", str(path)]  # fmt: skip
                    subprocess.run(command, check=True)
                    console.print(f"{task} {arm} seed {seed}: {time.perf_counter() - tick:.0f} s")
                results.setdefault(task, {}).setdefault(arm, []).append(read_run(path))
    return results


def _median_and_quartiles(at: dict) -> dict:
    """``{fraction: [median, q1, q3]}`` of the regrets ``at[fraction]`` across seeds; inf
    (a run with no value yet) where the quantile falls on or beside such a run."""
    with np.errstate(invalid="ignore"):  # inf - inf between two such runs: nan, read as inf
        quantiles = {f: np.quantile(v, [0.5, 0.25, 0.75]) for f, v in at.items()}
    return {str(f): np.where(np.isnan(q), np.inf, q).tolist() for f, q in quantiles.items()}


def _reach(rows: dict, key: str, xs: np.ndarray) -> None:
    """``row[key]``: the first of ``xs`` (epochs or seconds) where the arm's median regret
    is at most bojax-full's final median (None if never; nothing without bojax-full)."""
    if "bojax-full" in rows:
        target = rows["bojax-full"]["regret"]["1.0"][0]
        for row in rows.values():
            reached = np.nonzero(np.array(row["median_curve"]) <= target)[0]
            row[key] = xs[reached[0]].item() if reached.size else None


def summarise(results: dict, references: dict, quick: bool) -> dict:
    summary = {}
    for task, arms in results.items():
        budget = budget_of(task, quick)
        known = min([references[task]] + [min(r["values"]) for runs in arms.values() for r in runs])
        rows = {}
        for arm, runs in arms.items():
            curves = np.array(
                [np.minimum.accumulate(_padded(r["values"], budget)) - known for r in runs]
            )
            at = {f: curves[:, int(f * budget) - 1] for f in FRACTIONS}
            rows[arm] = {
                "regret": _median_and_quartiles(at),
                "median_curve": np.median(curves, axis=0).tolist(),
                "seconds": float(np.median([r["seconds"] for r in runs])),
                "seeds": len(runs),
            }
            late = [s for r in runs for n, s in r.get("decisions", []) if n >= 0.9 * budget]
            if late:  # freeze-thaw: a decision's seconds once ~90 % of the epochs are data
                rows[arm]["decision_seconds_late"] = float(np.median(late))
                rows[arm]["decision_seconds_max"] = float(np.max(late))
        _reach(rows, "epochs_to_full", np.arange(1, budget + 1))
        summary[task] = {"known_best": known, "budget": budget, "arms": rows,
                         **against_seconds(arms, known)}  # fmt: skip
    return summary


def _regret_at(run: dict, known: float, times: np.ndarray) -> np.ndarray:
    """A run's regret at each of ``times`` on its clock (inf before its first epoch ends)."""
    best = np.minimum.accumulate(np.asarray(run["values"], np.float64)) - known
    ended = np.searchsorted(np.asarray(run["clock"]), times, side="right")  # epochs done by t
    return np.where(ended > 0, best[np.maximum(ended - 1, 0)], np.inf)


def against_seconds(arms: dict, known: float, points: int = 400) -> dict:
    """Regret against the seconds on each run's clock (simulated training plus the arm's own
    seconds), over the seeds every arm ran with its clock kept. The table reads it at
    fractions of a budget, bojax-full's median seconds for its epochs (every clocked run's
    median without it); the curves run on ``points`` times up to the slowest arm's median
    seconds. An arm that spent its epochs sooner keeps its last incumbent after. ``{}``
    when no seed has clocks."""
    clocked = [
        i for i in range(min(len(runs) for runs in arms.values()))
        if all("clock" in runs[i] for runs in arms.values())
    ]  # fmt: skip
    if not clocked:
        return {}
    ends = {arm: [runs[i]["clock"][-1] for i in clocked] for arm, runs in arms.items()}
    spent = {arm: float(np.median(seconds)) for arm, seconds in ends.items()}
    budget = spent.get("bojax-full", float(np.median(list(ends.values()))))
    horizon = max(budget, *spent.values())
    times = horizon * np.arange(1, points + 1) / points
    rows = {}
    for arm, runs in arms.items():
        curves = np.array([_regret_at(runs[i], known, times) for i in clocked])
        table = np.array(
            [_regret_at(runs[i], known, budget * np.array(FRACTIONS)) for i in clocked]
        )
        rows[arm] = {
            "regret": _median_and_quartiles(dict(zip(FRACTIONS, table.T, strict=True))),
            "median_curve": np.median(curves, axis=0).tolist(),
            "spent": spent[arm],
        }
    _reach(rows, "seconds_to_full", times)
    return {"seconds": {"budget": budget, "horizon": horizon, "seeds": len(clocked), "arms": rows}}


def _without_curve(row: dict) -> dict:
    """``row`` for the JSON: no median curve, and null for a regret before any value
    (JSON has no infinity)."""
    regret = {f: [None if math.isinf(q) else q for q in qs] for f, qs in row["regret"].items()}
    return {**{k: v for k, v in row.items() if k != "median_curve"}, "regret": regret}


def _slim(entry: dict) -> dict:
    """A task's summary without its median curves (the JSON keeps the tables)."""
    slim = {**entry, "arms": {arm: _without_curve(row) for arm, row in entry["arms"].items()}}
    if "seconds" in entry:
        arms = {arm: _without_curve(row) for arm, row in entry["seconds"]["arms"].items()}
        slim["seconds"] = {**entry["seconds"], "arms": arms}
    return slim


def _quartiles(rows: dict, row: dict, f: float) -> str:
    """``median [q1, q3]``, bold where the median is the lowest of ``rows``; ``-`` before
    a run has any value."""
    best = min(other["regret"][str(f)][0] for other in rows.values())
    m, lo, hi = row["regret"][str(f)]
    if math.isinf(m):
        return "-"
    text = f"{m:.3g} [{lo:.3g}, {hi:.3g}]".replace("inf", "-")
    return f"[bold]{text}[/bold]" if m == best else text


def _padded(values: list[float], budget: int) -> np.ndarray:
    values = np.asarray(values, np.float64)
    if len(values) < budget:  # an arm that stopped early keeps its last incumbent
        values = np.concatenate([values, np.full(budget - len(values), np.inf)])
    return values[:budget]


TITLES = {
    False: "median regret (quartiles) at % of each task's epochs; epochs to bojax-full's final "
    "median; seconds per run",
    True: "median regret (quartiles) at % of bojax-full's median seconds (LCBench: the "
    "surrogate's training seconds plus the arm's own); seconds to bojax-full's final median; "
    "median seconds each run took for its epochs",
}


def table(summary: dict, seconds: bool = False) -> Table | None:
    """Median regret (quartiles) at each fraction of the epochs (``seconds``: of bojax-full's
    median seconds, for the tasks with clocks; None if none has), the lowest in bold; then
    ``to full`` and the seconds per run (``seconds``: each arm's median seconds spent)."""
    entries = {task: entry["seconds"] if seconds else entry for task, entry in summary.items()
               if not seconds or "seconds" in entry}  # fmt: skip
    if not entries:
        return None
    out = Table(title=TITLES[seconds])
    out.add_column(f"task ({'seconds' if seconds else 'epochs'}) / arm (seeds)")
    for f in FRACTIONS:
        out.add_column(f"{f:.0%}", justify="right")
    out.add_column("to full", justify="right")
    out.add_column("spent" if seconds else "s/run", justify="right")
    for task, entry in entries.items():
        rows = entry["arms"]
        span = f"{entry['budget']:.0f} s" if seconds else str(entry["budget"])
        for arm, row in rows.items():
            to_full = row.get("seconds_to_full" if seconds else "epochs_to_full")
            out.add_row(
                f"{task} ({span}) {arm} ({entry['seeds'] if seconds else row['seeds']})",
                *(_quartiles(rows, row, f) for f in FRACTIONS),
                "-" if to_full is None else f"{to_full:.0f}",
                f"{row['spent'] if seconds else row['seconds']:.0f}",
            )
        out.add_section()
    return out


def plot(summary: dict, path: Path, seconds: bool = False) -> None:
    """The median regret against epochs spent (``seconds``: against the seconds on the
    runs' clocks, for the tasks that have them)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [task for task in summary if not seconds or "seconds" in summary[task]]
    fig, axes = plt.subplots(2, math.ceil(len(tasks) / 2), figsize=(15, 8), squeeze=False)
    # One colour per arm everywhere: the ten of the default cycle, then black (an eleventh
    # "C10" would repeat the first).
    colours = {arm: f"C{k}" if k < 10 else "black" for k, arm in enumerate(ARMS)}
    for ax in axes.flat[len(tasks) :]:
        ax.set_visible(False)
    for ax, task in zip(axes.flat, tasks, strict=False):
        entry = summary[task]["seconds"] if seconds else summary[task]
        span = entry["horizon"] if seconds else entry["budget"]
        for arm, row in entry["arms"].items():
            curve = np.maximum(np.array(row["median_curve"]), 1e-5)  # regret 0 drawn at 1e-5
            x = span * np.arange(1, len(curve) + 1) / len(curve)
            ax.plot(x, curve, label=arm, lw=1.4, color=colours[arm])
        title = "MNIST-1D (bojax's trainer)" if task == "mnist1d" else f"LCBench task {task}"
        if seconds:
            title += f" ({entry['seeds']} seeds)"
        xlabel = "seconds (training + the arm's own)" if seconds else "epochs spent"
        ax.set(title=title, xlabel=xlabel, ylabel="median regret", yscale="log")
        ax.axvline(entry["budget"] / (1 if seconds else 3), color="grey", ls=":", lw=0.8)
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 tasks, 1 seed, 8 trainings")
    parser.add_argument("--seeds", type=int, help="seeds (default 10; quick 1)")
    parser.add_argument("--tasks", nargs="+", help="LCBench tasks or mnist1d (default: all)")
    parser.add_argument("--arms", nargs="+", default=ARMS, choices=ARMS)
    parser.add_argument("--lcbench", type=Path, default=LCBENCH)
    parser.add_argument(
        "--existing", action="store_true", help="tabulate the kept runs only (complete seeds)"
    )
    parser.add_argument(
        "--every-seed",
        action="store_true",
        help="with --existing: each arm's own kept seeds, not only those all arms share",
    )
    parser.add_argument(
        "--decision", action="store_true", help="time a freeze-thaw decision at 2,000 values"
    )
    parser.add_argument(
        "--resume", action="store_true", help="time resuming a finished freeze-thaw run"
    )
    parser.add_argument(
        "--batched", action="store_true", help="design-epochs/s: vmapped batch vs alone"
    )
    parser.add_argument(
        "--trainer",
        choices=("mnist1d", "ensemble"),
        default="mnist1d",
        help="with --batched: MNIST-1D MLPs or the ensemble-design report's ensembles",
    )
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[1, 2, 4, 8, 16], help="designs per batch"
    )
    parser.add_argument("--run-one", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--to", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    console = Console(width=200)
    if args.run_one:
        task, arm, seed = args.run_one
        write_run(args.to, run_one(task, arm, int(seed), args.budget))
        return {}
    if args.decision:
        row = {"steps": decision_speed(), "seconds": decision_speed(cost_aware=True)}
        console.print(row)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "multifidelity_decision.json").write_text(json.dumps(row, indent=1))
        return row
    if args.resume:
        row = resume_speed(budget=args.budget or EPOCHS * FULL)
        console.print(row)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "multifidelity_resume.json").write_text(json.dumps(row, indent=1))
        return row
    if args.batched:
        rows = batched_speed(tuple(args.sizes), args.trainer)
        device, label = rows[0]["device"], {"mnist1d": "MNIST-1D", "ensemble": "ensemble"}
        speeds = Table(
            title=f"{label[args.trainer]} trainings: (design x epoch) per second ({device})"
        )
        for column in ("designs", "alone /s", "batched /s", "batched / alone"):
            speeds.add_column(column, justify="right")
        for row in rows:
            speeds.add_row(str(row["designs"]), f"{row['alone_per_s']:.1f}",
                          f"{row['batched_per_s']:.1f}", f"{row['speedup']:.2f}x")  # fmt: skip
        console.print(speeds)
        args.out.mkdir(parents=True, exist_ok=True)
        name = "multifidelity_batched" + ("_ensemble" if args.trainer == "ensemble" else "")
        name += "_gpu" if jax.default_backend() == "gpu" else ""
        (args.out / f"{name}.json").write_text(json.dumps(rows, indent=1))
        return {"batched": rows}
    seeds = args.seeds or (1 if args.quick else 10)
    tasks = args.tasks or (TASKS[:2] if args.quick else [*TASKS, "mnist1d"])
    if not (args.lcbench / "model.onnx").exists():
        console.print(f"[yellow]no LCBench surrogate at {args.lcbench}: its tasks skipped[/yellow]")
        tasks = [task for task in tasks if task == "mnist1d"]
    if not tasks:
        return {}
    arms = [arm for arm in args.arms if available(arm)]
    for arm in sorted(set(args.arms) - set(arms)):  # smac-mf sits out mnist1d (collect)
        console.print(f"[yellow]{arm} is not installed: skipped[/yellow]")
    name = "multifidelity_quick" if args.quick else "multifidelity"
    runs = args.out / f"{name}_runs"
    if args.existing:
        results = existing(tasks, arms, seeds, runs, args.every_seed)
    else:
        results = collect(tasks, arms, seeds, args.quick, runs, console)
    cache = runs / "references.json"
    references = json.loads(cache.read_text()) if cache.exists() else {}
    for task in results:
        if task not in references:
            references[task] = reference(task)
    cache.write_text(json.dumps(references, indent=1))
    summary = summarise(results, references, args.quick)
    console.print(table(summary))
    timed = table(summary, seconds=True)
    if timed is not None:
        console.print(timed)
    for task, entry in summary.items():
        for arm, row in entry["arms"].items():
            if "decision_seconds_late" in row:
                console.print(
                    f"{task} {arm}: a decision with >= 90 % of {entry['budget']} epochs "
                    f"observed took {row['decision_seconds_late']:.3f} s (median; max "
                    f"{row['decision_seconds_max']:.3f} s)"
                )
    args.out.mkdir(parents=True, exist_ok=True)
    slim = {task: _slim(entry) for task, entry in summary.items()}
    (args.out / f"{name}.json").write_text(json.dumps(slim, indent=1))
    plot(summary, args.out / f"{name}.png")
    if timed is not None:
        plot(summary, args.out / f"{name}_seconds.png", seconds=True)
    return summary


if __name__ == "__main__":
    from bojax.reports.peers import fixed_hash_seed

    fixed_hash_seed()  # SMAC3's runs follow Python's string hashes
    main()
