"""The optimisers bojax is compared with, written once for the reports and ``benchmarks/``.

A peer proposes points of a bojax :class:`~bojax.spaces.Space` as dicts (only the
parameters that exist there: a conditional parameter whose condition fails is left out)
and **minimises**::

    peer = PEERS["tpe"].make(space, seed=0, initial=5, budget=30)
    point = peer.ask()            # the next point
    peer.tell(point, value)       # its value; None for a failed evaluation

``tell`` after ``ask`` reports the asked point; a ``tell`` with no ``ask`` before it adds
a point the peer did not propose (a shared initial design) as a finished trial.
:func:`run` drives a peer over an objective and returns journal-like records.

Peers (a :class:`~bojax.registry.Registry` of :class:`Peer` records):

* ``bojax``: bojax's own ask/tell with its defaults (for benchmarks in a peer's terms);
* ``random``: uniform points of the unit cube (NumPy's generator seeded with ``seed``),
  snapped to the space, so integers and conditions hold;
* ``tpe``, ``optuna-gp``, ``optuna-bojax``: an Optuna study with its TPE sampler, its
  GP sampler, or bojax's :class:`~bojax.integrations.optuna.BojaxSampler`, each with
  ``n_startup_trials=initial``; parameters are suggested define-by-run, so a
  conditional parameter is asked for only where its condition holds;
* ``smac``: SMAC3's hyperparameter-optimisation facade (random forest, log EI, local
  and random search) on a ConfigSpace with the same conditions (``==``, ``in``, and
  ``>=`` on integers), ``initial`` random configurations first. It draws its own
  initial design.

Optuna and SMAC3 see a categorical's choices as categories and an ordinal's values as
ordered categories (Optuna has no ordinal kind); other registered kinds are refused.

Optuna and SMAC3 are optional: a peer imports its library when made and raises a
:class:`~bojax.errors.SettingsError` naming the install command when it is missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from bojax.errors import SettingsError
from bojax.parameters import Categorical, Integer, Ordinal, Real
from bojax.registry import Registry
from bojax.spaces import Space


class Optimiser(Protocol):
    def ask(self) -> dict[str, Any]: ...

    def tell(self, point: Mapping[str, Any], value: float | None) -> None: ...


@dataclass(frozen=True)
class Peer:
    """A peer: ``make(space, seed=, initial=, budget=, folder=)`` returns an
    :class:`Optimiser`; ``packages`` are the modules it imports (for availability)."""

    name: str
    make: Callable[..., Optimiser]
    label: str
    packages: tuple[str, ...] = ()

    def available(self) -> bool:
        import importlib.util

        return all(importlib.util.find_spec(package) is not None for package in self.packages)


PEERS: Registry[Peer] = Registry("peer")
OPTUNA_GP = ("optuna", "torch")  # Optuna's GPSampler runs on torch


def missing(peer: str, package: str) -> SettingsError:
    return SettingsError(
        f"the peer {peer!r} needs {package}: uv sync --group bench (or pip install {package})"
    )


class RandomSearch:
    """Uniform unit-cube draws (``numpy.random.default_rng(seed)``), snapped to ``space``."""

    def __init__(self, space: Space, seed: int, **_: Any):
        self.space, self.rng = space, np.random.default_rng(seed)

    def ask(self) -> dict[str, Any]:
        return self.space.from_unit(self.space.snap(self.rng.uniform(size=self.space.dim)))

    def tell(self, point: Mapping[str, Any], value: float | None) -> None:
        pass


class OptunaStudy:
    """An Optuna study with ``sampler`` (``tpe``, ``gp`` or ``bojax``) on ``space``."""

    def __init__(self, space: Space, seed: int, initial: int, sampler: str = "tpe", **_: Any):
        try:
            import optuna
        except ImportError:
            raise missing("tpe" if sampler == "tpe" else f"optuna-{sampler}", "optuna") from None
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        _check_kinds(space)
        if sampler == "tpe":
            made = optuna.samplers.TPESampler(seed=seed, n_startup_trials=initial)
        elif sampler == "bojax":
            from bojax.integrations.optuna import BojaxSampler

            made = BojaxSampler(seed=seed, n_startup_trials=initial)
        else:
            made = optuna.samplers.GPSampler(seed=seed, n_startup_trials=initial)
        self.optuna, self.space = optuna, space
        self.study = optuna.create_study(sampler=made)
        self.pending = None  # the trial asked last, told when its value arrives

    def _distribution(self, p):
        kinds = self.optuna.distributions
        if isinstance(p, Categorical | Ordinal):  # Optuna has no ordinal kind
            return kinds.CategoricalDistribution(_choices(p))
        kind = kinds.IntDistribution if isinstance(p, Integer) else kinds.FloatDistribution
        return kind(p.low, p.high, log=p.log)

    def ask(self) -> dict[str, Any]:
        self.pending = trial = self.study.ask()
        point: dict[str, Any] = {}
        for p in self.space.parameters:  # define-by-run: absent parameters are not asked
            c = p.condition
            if c is not None and (c.parent not in point or not c.holds(point[c.parent])):
                continue
            if isinstance(p, Categorical | Ordinal):
                point[p.name] = trial.suggest_categorical(p.name, _choices(p))
            else:
                suggest = trial.suggest_int if isinstance(p, Integer) else trial.suggest_float
                point[p.name] = suggest(p.name, p.low, p.high, log=p.log)
        return point

    def tell(self, point: Mapping[str, Any], value: float | None) -> None:
        state = self.optuna.trial.TrialState
        if self.pending is not None:
            trial, self.pending = self.pending, None
            if value is None:
                self.study.tell(trial, state=state.FAIL)
            else:
                self.study.tell(trial, float(value))
            return
        distributions = {p.name: self._distribution(p) for p in self.space.parameters}
        self.study.add_trial(
            self.optuna.trial.create_trial(
                params=dict(point),
                distributions={name: distributions[name] for name in point},
                value=None if value is None else float(value),
                state=state.FAIL if value is None else state.COMPLETE,
            )
        )


def fixed_hash_seed() -> None:
    """Run this script again with ``PYTHONHASHSEED=0`` unless the variable is set (a
    user's own value is kept). SMAC3 orders its candidates by Python's string hashes,
    which are randomised per process, so one seed gave three results in three runs
    (review). Call it first in a script's ``__main__`` block; children inherit it."""
    import os
    import sys
    import warnings

    if os.environ.get("PYTHONHASHSEED") is None:
        if sys.flags.ignore_environment or sys.argv[:1] == ["-"]:  # (-E; a script on stdin)
            warnings.warn(
                "PYTHONHASHSEED cannot be fixed for this process (python -E, or a script "
                "read from stdin): SMAC3's runs will not repeat; set it yourself",
                stacklevel=2,
            )
            return
        os.environ["PYTHONHASHSEED"] = "0"
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


class SMAC:
    """SMAC3's hyperparameter-optimisation facade through its ask-and-tell interface
    (deterministic given its seed only under a fixed ``PYTHONHASHSEED``:
    :func:`fixed_hash_seed`)."""

    def __init__(
        self, space: Space, seed: int, initial: int, budget: int, folder: Path | None = None
    ):
        try:
            import ConfigSpace as cs
            from smac import HyperparameterOptimizationFacade, Scenario
            from smac.initial_design import RandomInitialDesign
            from smac.runhistory.dataclasses import TrialValue
            from smac.runhistory.enumerations import StatusType
        except ImportError:
            raise missing("smac", "smac") from None
        import logging
        import tempfile

        logging.getLogger("smac").setLevel(logging.ERROR)
        _check_kinds(space)
        configspace = cs.ConfigurationSpace(seed=seed)
        made = {}
        for p in space.parameters:
            if isinstance(p, Categorical | Ordinal):
                made[p.name] = cs.Categorical(p.name, _choices(p), ordered=isinstance(p, Ordinal))
            else:
                kind = cs.Integer if isinstance(p, Integer) else cs.Float
                made[p.name] = kind(p.name, (p.low, p.high), log=p.log)
        configspace.add(list(made.values()))
        conditions = []
        for p in space.parameters:
            c = p.condition
            if c is None:
                continue
            child, parent = made[p.name], made[c.parent]
            if c.op == ">=" and isinstance(space[c.parent], Integer):
                conditions.append(cs.GreaterThanCondition(child, parent, c.value - 1))
            elif c.op in ("==", "in"):
                condition = cs.EqualsCondition if c.op == "==" else cs.InCondition
                conditions.append(condition(child, parent, c.value))
            else:
                raise SettingsError(f"the SMAC3 peer cannot express the condition {c}")
        configspace.add(conditions)
        folder = Path(folder) if folder is not None else Path(tempfile.mkdtemp())
        scenario = Scenario(
            configspace, deterministic=True, n_trials=budget, seed=seed,
            output_directory=folder / "smac",
        )  # fmt: skip

        def never(config, seed: int = 0) -> float:  # ask-and-tell: SMAC evaluates nothing
            raise RuntimeError("the SMAC3 peer is driven by ask and tell")

        self.smac = HyperparameterOptimizationFacade(
            scenario, never, initial_design=RandomInitialDesign(scenario, n_configs=initial),
            overwrite=True, logging_level=40,
        )  # fmt: skip
        self.value, self.crashed, self.pending = TrialValue, StatusType.CRASHED, None

    def ask(self) -> dict[str, Any]:
        self.pending = self.smac.ask()
        return dict(self.pending.config)

    def tell(self, point: Mapping[str, Any], value: float | None) -> None:
        if self.pending is None:
            raise SettingsError(
                "the SMAC3 peer draws its own initial design: tell only asked points"
            )
        trial, self.pending = self.pending, None
        if value is None:
            self.smac.tell(trial, self.value(cost=float("inf"), status=self.crashed))
        else:
            self.smac.tell(trial, self.value(cost=float(value)))


def _choices(p) -> list:
    """A categorical's choices or an ordinal's values: what the peers choose among."""
    return list(p.choices if isinstance(p, Categorical) else p.values)


class BojaxAskTell:
    """bojax's own ``init``/``ask``/``tell`` on ``space`` with its default settings
    (``gp-slice`` and LogEI), ``initial`` random points first."""

    def __init__(self, space: Space, seed: int, initial: int, **_: Any):
        import bojax

        self._bojax, self.space, self.asked = bojax, space, None
        self.state = bojax.init(space, bojax.Settings(initial=initial, seed=seed))

    def ask(self) -> dict[str, Any]:
        self.asked, self.state, _ = self._bojax.ask(self.state)
        return self.space.from_unit(self.asked)

    def tell(self, point: Mapping[str, Any], value: float | None) -> None:
        u = self.asked if self.asked is not None else self.space.to_unit(point)
        self.state = self._bojax.tell(self.state, u, np.nan if value is None else value)
        self.asked = None


def _check_kinds(space: Space) -> None:
    known = Real | Integer | Categorical | Ordinal
    for p in space.parameters:
        if not isinstance(p, known):
            raise SettingsError(f"the peers know no {type(p).__name__} parameter ({p.name!r})")


PEERS.register(Peer("random", RandomSearch, "random search"))
PEERS.register(Peer("bojax", BojaxAskTell, "bojax ask/tell (gp-slice, LogEI)"))
PEERS.register(Peer("tpe", partial(OptunaStudy, sampler="tpe"), "Optuna TPE", ("optuna",)))
PEERS.register(Peer("optuna-gp", partial(OptunaStudy, sampler="gp"), "Optuna GP", OPTUNA_GP))
PEERS.register(
    Peer(
        "optuna-bojax", partial(OptunaStudy, sampler="bojax"), "Optuna, bojax sampler", ("optuna",)
    )
)
PEERS.register(Peer("smac", SMAC, "SMAC3 random forest", ("smac", "ConfigSpace")))


def run(
    optimiser: Optimiser,
    objective: Callable[[dict[str, Any]], float],
    budget: int,
    *,
    initial: int = 0,
    design: Iterable[Mapping[str, Any]] = (),
    catch: tuple[type[BaseException], ...] = (),
) -> list[dict[str, Any]]:
    """Evaluate the points of ``design`` (told to ``optimiser``), then ``optimiser``'s
    proposals, ``budget`` evaluations in all; an exception of a type in ``catch`` is a
    failed evaluation. Returns one record per evaluation, as bojax's journal has them:
    ``iteration``, ``phase`` (``initial`` for the first ``initial``, else ``bo``), ``x``,
    ``y`` (None when failed), ``status`` (``ok``/``failed``) and ``seconds``."""
    design = list(design)
    history: list[dict[str, Any]] = []
    for k in range(budget):
        point = dict(design[k]) if k < len(design) else optimiser.ask()
        tick = time.perf_counter()
        try:
            value = objective(point)
        except catch:
            value = None
        seconds = time.perf_counter() - tick
        optimiser.tell(point, value)
        history.append({
            "iteration": k, "phase": "initial" if k < initial else "bo", "x": point, "y": value,
            "status": "ok" if value is not None else "failed", "seconds": seconds,
        })  # fmt: skip
    return history
