"""bojax's fully Bayesian BO as an Optuna sampler.

    import optuna
    from bojax.integrations.optuna import BojaxSampler

    study = optuna.create_study(sampler=BojaxSampler(surrogate="gp-slice", seed=0))
    study.optimize(objective, n_trials=40)

Optuna keeps the storage, pruning and dashboard; bojax proposes every parameter jointly
("relative sampling"): floats and ints with their log scales, stepped floats and ints as
ordinal grids, and categorical choices (compared for equality by an overlap kernel, and
searched by switching choices). Only what it cannot model (a categorical with a ``None``
choice, the first ``n_startup_trials`` trials) goes to ``independent_sampler``
(Optuna's ``RandomSampler`` by default).

A multi-objective study (``directions=[...]``) and a constrained one (constraint values
set by ``trial.set_constraint`` or computed by the sampler's ``constraints_func``; a
trial is feasible where every value is <= 0, as Optuna has it) become a bojax run with
several metrics (:mod:`bojax.bo.multiobjective`): one surrogate per objective and per
constraint, LogEHVI (or ParEGO) weighted by the probability of feasibility.

Completed trials are observations; failed trials enter as failed evaluations, which
bojax's failure classifier learns from (its acquisition is weighted by the probability
of success, and while every trial has failed it proposes where success is likeliest).
Once trials that report intermediate values are pruned, the data are each trial's
value at the highest step that ``max(n_startup_trials, d + 2)`` trials reached, pruned
and running ones included (the reports, on one scale: as Optuna's pruners do, the
sampler then takes them for the objective; BOHB's rule, as bojax's own step-wise runs
propose,
:mod:`bojax.bo.stepwise`), and the trials pruned below that step are pending believers
(the latest 128; earlier ones are excluded), so the model does not propose their points
again. A trial pruned before it
reported a value (an invalid configuration skipped by raising ``TrialPruned``), or one
that reported a value that is not finite (a training whose loss diverged), counts as
failed. A study with constraints or several objectives keeps to completed trials: its
reports would need each metric at each step, so a pruned trial there counts as failed
whatever it reported.
:class:`BojaxPruner` stops trials by bojax's successive halving or Hyperband. A completed
trial whose value is not finite (Optuna stores ``inf``) counts as failed, as a
non-finite value does in bojax's own runs. Trials still running are pending points,
conditioned on as fantasies, so parallel workers do not propose the same place.

In a conditional study (parameters suggested in some branches only) the model sees the
parameters every completed trial suggested from one distribution, the others going to
the independent sampler, as in Optuna's GPSampler; a parameter left out because trials
suggested it from differing distributions (an added trial's wider range) is warned about
once. When those shared parameters are few and discrete (the branch choice) and each
value has been tried, later values are chosen by Thompson sampling from the model rather
than by chance: they repeat, but with other values of the branches' own parameters.

A study may hold trials bojax could not have proposed: an enqueued value outside its
distribution (Optuna warns and keeps it), a failed or running trial suggested from
another distribution (wider bounds, other choices, a float for an int), a failed trial
that stopped before suggesting every parameter. Such a trial cannot be placed in the
space, so it is left out of the model, with one warning naming the trial and the reason;
it stays in the study, and the sampler goes on.

The chain states of the surrogate and the classifier are kept between trials of one
sampler, so each trial continues them instead of burning in again; a resumed study (a
new sampler on old storage) burns in once.
"""

from __future__ import annotations

import functools
import hashlib
import math
import numbers
import re
import threading
import warnings
from typing import Any

import numpy as np

try:
    import optuna  # noqa: F401
except ModuleNotFoundError as error:  # optuna is not a bojax dependency
    raise ModuleNotFoundError(
        "bojax.integrations.optuna needs Optuna: `uv add optuna` (or `pip install optuna`)"
    ) from error
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.pruners import BasePruner
from optuna.samplers import BaseSampler, RandomSampler
from optuna.search_space import IntersectionSearchSpace
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

from bojax.bo import schedulers
from bojax.bo.stepwise import MOST_BELIEVERS
from bojax.errors import (
    MissingParameterError,
    ParameterError,
    SettingsError,
    SpaceDefinitionError,
    SpaceExhaustedError,
)
from bojax.parameters import Categorical, Ordinal, Parameter
from bojax.spaces import Integer, Real, Space


def _parameter(name: str, d: BaseDistribution) -> Parameter | None:
    """The bojax parameter an Optuna distribution stands for, or None where bojax cannot
    model it (a categorical with a ``None`` choice). Made once per (name, distribution):
    every trial asks again, and a fine stepped grid (``step=2`` up to 2e6) took 0.4 s."""
    try:
        hash(d)
    except TypeError:  # a distribution that cannot be a cache key
        return _made_parameter(name, d)
    # repr too: choices (1,) and (True,) compare equal, and are not the same parameter
    return _cached_parameter(name, d, repr(d))


def _made_parameter(name: str, d: BaseDistribution) -> Parameter | None:
    if isinstance(d, CategoricalDistribution):
        # Optuna stores a choice as its index, choices.index(value), which returns the
        # first equal choice: with 1 and True (or 0 and False, 1 and 1.0) among them it
        # records True as 1, and a model told 1 would propose True again and again.
        if any(a == b for i, a in enumerate(d.choices) for b in d.choices[i + 1 :]):
            return None  # to the independent sampler, as a None choice goes
        try:
            return Categorical(name, d.choices)
        except SpaceDefinitionError:
            return None
    try:  # a range bojax cannot model (integers past 2**53) goes to the independent sampler
        return _numeric(name, d)
    except SpaceDefinitionError:
        return None


#: Stepped grids with more values than this are modelled on their interval, proposals
#: put on the grid after (:func:`_on_step`): a grid of 10 million values as an ordinal
#: took 65 s and 2.9 GB for 7 trials (review), one of a million 2 s.
GRID_LIMIT = 2**20


def _numeric(name: str, d: BaseDistribution) -> Parameter | None:
    if isinstance(d, FloatDistribution):
        steps = _grid_steps(d)
        if steps is None or steps >= GRID_LIMIT:
            return Real(name, d.low, d.high, log=d.log)
        # The values Optuna stores (low + k * step, the top clipped to high: 0.1 * 3 is
        # 0.30000000000000004, past a high of 0.3).
        return Ordinal(name, tuple(min(d.low + k * d.step, d.high) for k in range(steps + 1)))
    if isinstance(d, IntDistribution):
        if d.step == 1 or _grid_steps(d) >= GRID_LIMIT:
            return Integer(name, d.low, d.high, log=d.log)
        return Ordinal(name, tuple(range(d.low, d.high + 1, d.step)))
    return None


def _grid_steps(d: BaseDistribution) -> int | None:
    """The index of a stepped distribution's top value (``low + k step``), None without
    a step."""
    if d.step is None:
        return None
    if isinstance(d, IntDistribution):
        return (d.high - d.low) // d.step
    return round((d.high - d.low) / d.step)


def _on_step(name: str, d: BaseDistribution, value: Any) -> Any:
    """A proposal on a large stepped grid modelled on its interval (``GRID_LIMIT``), put
    on the grid (``low + k step``, Optuna's values); any other value as it is."""
    if getattr(d, "step", None) in (None, 1) or isinstance(_parameter(name, d), Ordinal):
        return value
    k = min(max(round((value - d.low) / d.step), 0), _grid_steps(d))
    if isinstance(d, IntDistribution):
        return int(d.low + k * d.step)
    return min(d.low + k * d.step, d.high)


def _sized(value: Any) -> bool:
    """Whether ``value`` is a list, tuple, array or dict (a reference point's forms)."""
    return isinstance(value, list | tuple | dict | np.ndarray)


@functools.lru_cache(maxsize=64)
def _space_key(space) -> str:
    """A search space's text, as a cache key (a grid of a million steps: once, not per
    trial)."""
    return repr(space.to_dict())


@functools.lru_cache(maxsize=1024)
def _cached_parameter(name: str, d: BaseDistribution, text: str) -> Parameter | None:
    return _made_parameter(name, d)


def _on_grid(parameter: Parameter, value: Any) -> Any:
    """A stepped float's value as the grid holds it, where it is one within Optuna's
    tolerance (1e-8 of a step): a value typed by hand (``enqueue_trial({"x": 0.3})``)
    is not always the float ``low + k * step`` is."""
    values = getattr(parameter, "values", None)
    if not (isinstance(parameter, Ordinal) and isinstance(value, float) and len(values) > 1):
        return value
    if value in values or not all(isinstance(v, float) for v in values):
        return value
    nearest = min(values, key=lambda v: abs(v - value))
    return nearest if abs(nearest - value) <= 1e-8 * abs(values[1] - values[0]) else value


def _modelled(name: str, d: BaseDistribution) -> bool:
    return not d.single() and _parameter(name, d) is not None


def _trial_key(study: Study, trial: FrozenTrial) -> tuple:
    """A trial's key in a sampler's memory: a study made again under the same name (or
    one of the same name in another storage) has trials of the same numbers, and read
    another study's proposal as where its own trial failed (review)."""
    return (study.study_name, trial.number, trial.datetime_start)


def _failed_space(study: Study) -> dict[str, BaseDistribution]:
    """The parameters every failed trial suggested, with the same distribution: the
    search space while no trial has completed or been pruned. (Optuna's intersection
    leaves failed trials out, so a study whose every trial had failed went on drawing
    from the independent sampler instead of from the failure classifier.)"""
    space: dict[str, BaseDistribution] | None = None
    for trial in study.get_trials(deepcopy=False, states=(TrialState.FAIL,)):
        if not trial.distributions:  # failed before suggesting anything: no space of its own
            continue
        if space is None:
            space = dict(trial.distributions)
        else:
            space = {n: d for n, d in space.items() if trial.distributions.get(n) == d}
    return space or {}


def _thompson_choice(state: Any, space: Space, seed: int, number: int) -> np.ndarray | None:
    """A point of a small discrete ``space`` whose every point is evaluated, chosen by
    Thompson sampling from the pooled posterior (one independent normal draw at each
    point, the lowest wins after the sign of the direction; points the failure
    classifier finds more likely to fail than not only while every point is). For a
    conditional study, whose shared parameters repeat while the branches' own vary: the
    model keeps choosing the branch, which the "exhausted" fallback left to chance (review
    CD). None where the space cannot be listed."""
    from bojax.bo.loop import predictor, success_predictor
    from bojax.bo.optimize import ENUMERATION_LIMIT, enumeration

    points = enumeration(space, ENUMERATION_LIMIT)
    if points is None:
        return None
    mean, sd = predictor(state)(points)
    sign = -1.0 if state.settings.maximize else 1.0
    draw = sign * mean + sd * np.random.default_rng([seed, number]).standard_normal(len(points))
    succeeds = success_predictor(state)
    if succeeds is not None:
        likely = np.asarray(succeeds(points)) >= 0.5
        draw = np.where(likely | ~likely.any(), draw, np.inf)
    return points[int(np.argmin(draw))]


def _space(search_space: dict[str, BaseDistribution]) -> Space:
    return Space([_parameter(name, d) for name, d in sorted(search_space.items())])


class BojaxSampler(BaseSampler):
    """An Optuna sampler backed by a bojax surrogate and acquisition.

    ``surrogate`` and ``acquisition`` take any registered name (``gp-slice`` and
    ``log_ei`` by default, bojax's defaults); ``seed`` fixes bojax's and the independent
    sampler's randomness (``None``: a fresh seed each time); ``n_startup_trials`` trials
    (default 5) come from the independent sampler before the first fit. Further keyword
    arguments go to :class:`bojax.Settings` (``num_candidates``, ``samples``, ...). Your
    own registered entries (an acquisition, a surrogate, ...) are named as bojax's are.
    """

    def __init__(
        self,
        surrogate: str = "gp-slice",
        acquisition: str = "log_ei",
        seed: int | None = None,
        n_startup_trials: int = 5,
        independent_sampler: BaseSampler | None = None,
        constraints_func: Any = None,
        **settings: Any,
    ) -> None:
        from bojax.bo.acquisition import ACQUISITIONS
        from bojax.bo.settings import Settings

        if (
            not isinstance(n_startup_trials, int)
            or isinstance(n_startup_trials, bool)
            or n_startup_trials < 1
        ):
            raise ValueError(f"n_startup_trials must be a positive int, got {n_startup_trials!r}")
        # No seed: a fresh one, as Optuna's samplers do (bojax's own runs default to 0).
        self._seed = int(np.random.SeedSequence().entropy % 2**31) if seed is None else int(seed)
        # Built now so that a bad name or option fails at construction, not mid-study; an
        # acquisition for several metrics (ParEGO, EHVI) is checked with two objectives and
        # serves multi-objective or constrained studies only.
        self._several_only = (
            isinstance(acquisition, str)
            and acquisition in ACQUISITIONS
            and ACQUISITIONS.get(acquisition).outputs != 1
        )
        for name, instead in (("objectives", "the study's directions"),
                              ("constraints", "constraints_func")):  # fmt: skip
            if settings.get(name) is not None:
                raise SettingsError(f"BojaxSampler takes {instead}, not {name}=")
        # A reference point is for a multi-objective study: checked with as many objectives.
        count = len(settings["reference_point"]) if _sized(settings.get("reference_point")) else 2
        several = self._several_only or settings.get("reference_point") is not None
        probe = {"objectives": [f"objective_{i}:min" for i in range(count)]} if several else {}
        self._settings = Settings(
            surrogate=surrogate,
            acquisition=acquisition,
            initial=n_startup_trials,
            seed=self._seed,
            **probe,
            **settings,
        )
        self._constraints_func = constraints_func
        if independent_sampler is None and seed is not None and int(seed) >= 2**32:
            raise SettingsError(
                f"seed must be below 2**32 for the independent sampler, Optuna's "
                f"RandomSampler, got {seed!r} (or pass your own independent_sampler=)"
            )
        self._independent = independent_sampler or RandomSampler(seed=seed)
        self._intersection = IntersectionSearchSpace()
        # Until a trial completes, the pruned trials' space: their intermediate values
        # are data, and the complete trials' space alone left every trial random then.
        self._pruned_intersection = IntersectionSearchSpace(include_pruned=True)
        self._chains: dict[tuple, Any] = {}  # (surrogate, classifier) states per search space
        self._left_out: set[tuple] = set()  # trials (_trial_key) warned about
        self._exhausted: set[str] = set()  # studies warned that their space is used up
        self._differing: set[tuple[str, str]] = set()  # (study, parameter) warned about
        # Trials of this process (n_jobs threads) proposed for and not yet finished:
        # _trial_key -> (space key, unit point). A trial's parameters reach the
        # storage only as its objective suggests them, so without this two trials asking
        # at once saw the same data and were proposed the same point.
        self._proposed: dict[tuple, tuple[str, np.ndarray]] = {}
        # The same for finished trials: one that failed before suggesting a parameter (a
        # branch that raises before its own parameters) is a failure at the point proposed
        # for it; left out, the model proposed that point again and again (review).
        self._finished: dict[tuple, tuple[str, np.ndarray]] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_lock"]  # a lock does not pickle; each copy gets its own
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self.__dict__.setdefault("_differing", set())  # a sampler pickled by an older bojax

    # -- Optuna's sampler interface ---------------------------------------------------------
    def reseed_rng(self) -> None:
        self._independent.reseed_rng()

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        space = (
            self._intersection.calculate(study)
            or self._pruned_intersection.calculate(study)
            or _failed_space(study)
        )
        self._warn_of_differing(study, space)
        return {name: d for name, d in space.items() if _modelled(name, d)}

    def _warn_of_differing(self, study: Study, space: dict[str, BaseDistribution]) -> None:
        """Warn once per study and parameter that every completed trial suggested but
        from differing distributions (an added trial's wider range, a changed choice
        list): Optuna's intersection leaves it out, and the independent sampler then
        draws it for every trial, silently (review CD). All completed trials are read
        each time (about 2 ms at 2,000 of them): an offset into them missed a trial
        that completed after later-numbered ones (review CG)."""
        common: set[str] | None = None
        seen: dict[str, list[BaseDistribution]] = {}
        modelled = set(space)
        for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            names = set(trial.distributions)
            common = names if common is None else common & names
            for name in names - modelled:
                known = seen.setdefault(name, [])
                if trial.distributions[name] not in known and len(known) < 2:
                    known.append(trial.distributions[name])
        for name in sorted((common or set()) - modelled):
            if len(seen[name]) > 1 and (study.study_name, name) not in self._differing:
                self._differing.add((study.study_name, name))
                warnings.warn(
                    f"BojaxSampler: parameter {name!r} was suggested from differing "
                    f"distributions ({seen[name][0]} and {seen[name][1]}); Optuna's "
                    "intersection search space leaves it out, so the independent sampler "
                    "draws it. Suggest it from one distribution in every trial (an added "
                    "trial's too) to have it modelled",
                    stacklevel=3,
                )

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if not search_space:
            return {}
        with self._lock:  # one proposal at a time, each seeing the others' (n_jobs > 1)
            return self._propose(study, trial, search_space)

    def _propose(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        from bojax.bo.loop import ask_batch, init, model_based, tell

        space = _space(search_space)
        # One snapshot of the trials for the data and the pending points: read twice, a
        # trial that finished in between was neither, and its point was proposed again
        # (review: n_jobs=2 on sqlite). A proposal is forgotten once its trial shows as
        # finished here, not when it ends: until then the snapshot may show it running.
        trials = study.get_trials(deepcopy=False)
        for t in trials:
            if t.state.is_finished():
                self._proposed.pop(_trial_key(study, t), None)
        # (A pruned trial here reported nothing: a configuration skipped, a failure.)
        states = (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)
        finished = [t for t in trials if t.state in states]
        observed = [(t, u) for t in finished if (u := self._unit(study, space, t)) is not None]
        settings, outcome = self._study_settings(study, [t for t, _ in observed])
        stepwise = _stepwise(trials, settings)
        if stepwise:  # trials report intermediate values: BOHB's rule
            least = max(self._settings.initial, space.dim + 2)
            observed, outcome, since, excluded = _at_highest_step(
                study, trials, space, least, self._unit
            )
        if observed is None or len(observed) < self._settings.initial:
            return {}
        state = init(space, settings)
        space_key = _space_key(space)
        key = (space_key, repr(settings.identity()), stepwise)
        if key in self._chains:
            surrogate, classifier = self._chains[key]
            state = state._replace(surrogate=surrogate, classifier=classifier)
        for t, u in observed:
            state = tell(state, u, outcome(t))
        if not model_based(state):  # bojax's own rule: e.g. only failures, not modelled
            return {}
        seen = {t.number for t, _ in observed}  # a running trial may be data already
        running = []
        for t in trials:
            if t.state != TrialState.RUNNING or t.number == trial.number or t.number in seen:
                continue
            if all(n in t.params for n in space.names):
                if (u := self._unit(study, space, t)) is not None:
                    running.append(u)
            else:  # still suggesting its parameters: where this sampler proposed, if it did
                proposed = self._proposed.get(_trial_key(study, t))
                if proposed is not None and proposed[0] == space_key:
                    running.append(proposed[1])
        if stepwise:  # and the trials since that step's data last grew
            running += since
        pending = np.asarray(running).reshape(-1, space.dim) if running else None
        exclude = np.reshape(excluded, (-1, space.dim)) if stepwise and excluded else None
        try:
            points, state, _ = ask_batch(state, 1, pending, exclude=exclude)
        except SpaceExhaustedError as error:  # every point evaluated or being evaluated
            # A conditional study's space holds only the parameters every trial shares
            # (the branch choice): its points repeat, each with other branch values.
            conditional = any(set(t.params) - set(search_space) for t, _ in observed)
            if conditional and settings.metrics is None:
                u = _thompson_choice(state, space, self._seed, trial.number)
                if u is not None:
                    self._proposed[_trial_key(study, trial)] = (space_key, u)
                    return {n: _on_step(n, search_space[n], v)
                            for n, v in space.from_unit(u).items()}  # fmt: skip
            if study.study_name not in self._exhausted:
                self._exhausted.add(study.study_name)
                warnings.warn(
                    f"BojaxSampler: {error}; further trials of study {study.study_name!r} "
                    "are sampled by the independent sampler (they repeat evaluated points)",
                    stacklevel=2,
                )
            return {}
        self._chains[key] = (state.surrogate, state.classifier)
        self._proposed[_trial_key(study, trial)] = (space_key, points[0])
        proposal = space.from_unit(points[0])
        # Python ints and floats, as the parameters' kinds decode
        return {name: _on_step(name, search_space[name], v) for name, v in proposal.items()}

    def _study_settings(self, study: Study, trials: list[FrozenTrial]):
        """``(settings, outcome)``: the run settings for this study and ``outcome(trial)``,
        what a finished trial tells bojax: its value, or for several objectives or
        constraints a dict of metrics ``objective_i`` and ``constraint_<key>`` (NaN for a
        failed trial). A completed trial without a value for a key, or with ``-inf``, is
        feasible for it, as Optuna counts it, and tells bojax a value clearly satisfied;
        ``+inf``, infeasible, a value clearly violated (:func:`_satisfied`): either would
        otherwise have failed the trial, its objectives lost."""
        directions = study.directions
        keys = sorted({k for t in trials for k in _constraints(t)})
        if len(directions) == 1 and not keys:
            if self._several_only:
                raise SettingsError(
                    f"acquisition {self._settings.acquisition!r} is for studies with several "
                    "objectives or with constraints; this one has one objective"
                )
            maximize = directions[0] == StudyDirection.MAXIMIZE
            settings = self._settings.replace(maximize=maximize)

            def value(t: FrozenTrial) -> float:
                ok = t.state == TrialState.COMPLETE and t.value is not None
                return t.value if ok else math.nan

            return settings, value
        objectives = {
            f"objective_{i}": "max" if d == StudyDirection.MAXIMIZE else "min"
            for i, d in enumerate(directions)
        }
        constraints = {_constraint_name(k): ("<=", 0.0) for k in keys}
        settings = self._settings.replace(objectives=objectives, constraints=constraints or None)

        satisfied = _satisfied(trials, keys)

        def metrics(t: FrozenTrial) -> Any:
            if t.state != TrialState.COMPLETE or t.values is None:
                return math.nan
            values = {f"objective_{i}": v for i, v in enumerate(t.values)}
            given = _constraints(t)
            return {**values, **{_constraint_name(k): _bounded(given.get(k), satisfied[k])
                                 for k in keys}}  # fmt: skip

        return settings, metrics

    def _unit(self, study: Study, space: Space, trial: FrozenTrial) -> np.ndarray | None:
        """The trial's unit point, or None where bojax could not have proposed it (a
        value outside the space, a parameter missing: but a trial of this sampler that
        failed or was pruned before suggesting every parameter it was proposed is at
        that proposal). Fitting such a trial would crash
        the sampler on every later trial, and forcing it into the space would misplace an
        observation, so it is left out, with one warning per trial."""
        try:
            missing = [n for n in space.names if n not in trial.params]
            proposed = self._finished.get(_trial_key(study, trial))
            if missing and proposed is not None and proposed[0] == _space_key(space):
                return proposed[1]  # the point proposed, where the trial failed
            if missing:
                raise MissingParameterError(missing[0], "missing from the trial")
            return space.to_unit(
                {p.name: _on_grid(p, trial.params[p.name]) for p in space.parameters}
            )
        except ParameterError as error:
            if _trial_key(study, trial) not in self._left_out:
                self._left_out.add(_trial_key(study, trial))
                warnings.warn(
                    f"BojaxSampler leaves trial {trial.number} ({trial.state.name}) out of "
                    f"its model: {error}",
                    stacklevel=2,
                )
            return None

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        return self._independent.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        """Check a multi-objective study's settings as each trial begins (a setting for
        one objective, such as a warping, would otherwise fail only once the model starts,
        after the startup trials); a constrained study's constraints are known only from
        its trials, so it is checked then."""
        if len(study.directions) > 1:
            self._study_settings(study, [])
        self._independent.before_trial(study, trial)

    def after_trial(
        self,
        study: Study,
        trial: FrozenTrial,
        state: TrialState,
        values: list[float] | None,
    ) -> None:
        # (kept in _proposed until a proposal sees the trial finished, above)
        proposed = self._proposed.get(_trial_key(study, trial))
        if proposed is not None and state != TrialState.COMPLETE:
            self._finished[_trial_key(study, trial)] = proposed
        if self._constraints_func is not None:  # stored where Optuna's samplers store them
            from optuna.samplers._base import _process_constraints_after_trial

            _process_constraints_after_trial(self._constraints_func, study, trial, state)
        self._independent.after_trial(study, trial, state, values)


def _stepwise(trials: list[FrozenTrial], settings) -> bool:
    """Whether a single-objective study without constraints has pruned trials that
    reported intermediate values: the sampler then models the values at one step, as
    BOHB does (a report is one number: constraints' values at that step are unknown). Until one is
    pruned, every finished trial has its returned value, which is what the study
    optimises (a trial may report another metric, a training loss, and return accuracy:
    modelling the reports then optimised the wrong thing, review)."""
    if settings.metrics is not None:
        return False
    return any(t.intermediate_values for t in trials if t.state == TrialState.PRUNED)


def _at_highest_step(study: Study, trials: list[FrozenTrial], space: Space, least: int, unit):
    """``(observed, outcome, since, excluded)`` of ``trials`` at the highest step that ``least``
    trials reached: each trial's first intermediate value at or past that step, running
    trials' too (a completed trial without intermediate values counts its value as
    reached at every step), failed trials as failures, and so are trials that reported
    a value that is not finite (diverged), pruned ones that reported nothing (skipped)
    and complete ones whose value is not finite; ``since``, the unit points of the
    latest ``MOST_BELIEVERS`` trials pruned below that step (or complete without
    reaching it), taken as pending believers so an unchanged data set does not propose
    their points again, and ``excluded`` those of the earlier ones, never proposed again
    (as bojax's own step-wise runs exclude theirs). ``observed`` is in trial
    order (past ``exact_limit`` the trust region counts misses in that order) and None
    while no step has enough trials."""
    states = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL, TrialState.RUNNING)
    trials = sorted((t for t in trials if t.state in states), key=lambda t: t.number)
    reported = sorted({step for t in trials for step in t.intermediate_values})
    chosen, values = None, {}
    for step in reversed(reported):
        values = {}
        for t in trials:
            later = [k for k in sorted(t.intermediate_values) if k >= step]
            if later and math.isfinite(t.intermediate_values[later[0]]):
                values[t.number] = t.intermediate_values[later[0]]
            elif t.state == TrialState.COMPLETE and not t.intermediate_values:
                values[t.number] = t.value
        if len(values) >= least:
            chosen = step
            break
    if chosen is None:
        return None, None, [], []

    def failed(t: FrozenTrial) -> bool:
        reports = list(t.intermediate_values.values())
        if t.state == TrialState.FAIL or not all(math.isfinite(v) for v in reports):
            return True  # (diverged: a non-finite report fails bojax's own trainings too)
        if t.state == TrialState.COMPLETE:
            return t.value is None or not math.isfinite(t.value)
        return t.state == TrialState.PRUNED and not reports  # skipped

    observed = [
        (t, u)
        for t in trials
        if (t.number in values or (t.state != TrialState.RUNNING and failed(t)))
        and (u := unit(study, space, t)) is not None
    ]
    below = [
        t
        for t in trials
        if t.number not in values
        and t.state != TrialState.RUNNING  # running: pending anyway
        and not failed(t)
    ]
    points = [u for t in below if (u := unit(study, space, t)) is not None]
    since, excluded = points[-MOST_BELIEVERS:], points[:-MOST_BELIEVERS]

    def outcome(t: FrozenTrial) -> float:
        return values.get(t.number, math.nan)

    return observed, outcome, since, excluded


def _satisfied(trials: list[FrozenTrial], keys: list[str]) -> dict[str, float]:
    """Per constraint key, the margin a missing or infinite value stands for:
    ``max(1, |v|)`` over the key's finite values ``v`` in ``trials``, so it sits as far
    from the bound as the farthest value seen (a value at 0, the bound, would read as
    feasible by a coin flip)."""
    margins = {k: 1.0 for k in keys}
    for t in trials:
        for k, v in _constraints(t).items():
            if k in margins and isinstance(v, int | float) and math.isfinite(v):
                margins[k] = max(margins[k], abs(float(v)))
    return margins


def _bounded(value: Any, margin: float) -> Any:
    """A constraint value as bojax models it: ``-margin`` for none given or ``-inf``
    (satisfied), ``+margin`` for ``+inf`` (violated), else the value itself."""
    if value is None:
        return -margin
    if isinstance(value, int | float) and math.isinf(value):
        return margin if value > 0 else -margin
    return value


def _constraint_name(key: Any) -> str:
    """The bojax metric of the constraint Optuna keeps under ``key`` (any text): the key
    where it is a valid metric name, else its letters and a hash that keeps it distinct."""
    text = str(key)
    safe = re.sub(r"[^A-Za-z0-9_.\-]", "_", text)[:60]
    if safe != text:
        safe += "-" + hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"constraint_{safe}"


def _constraints(trial: FrozenTrial) -> dict[str, float]:
    """The trial's constraint values by key (Optuna 5's ``trial.constraints``; the list
    that ``constraints_func`` stores, by position, in older versions)."""
    given = getattr(trial, "constraints", None)
    if not isinstance(given, dict):
        stored = trial.system_attrs.get("constraints") or ()
        given = {str(i): v for i, v in enumerate(stored)}
    # Optuna stores what constraints_func returns: a NumPy number (a float32 -inf from a
    # model) is read as the Python float it stands for, and a boolean (True: violated) as
    # the number Optuna's own samplers compare with 0.
    return {k: float(v) if isinstance(v, numbers.Real | np.bool_) else v for k, v in given.items()}


__all__ = ["BojaxPruner", "BojaxSampler"]


class BojaxPruner(BasePruner):
    """bojax's early stopping for Optuna trials that ``trial.report(value, step)``.

    Milestones ``min_resource * reduction_factor^k`` up to ``max_resource`` (above
    ``min_resource``); decisions are taken where a report reaches one (the last ends the
    training: a trial at or past ``max_resource`` is never pruned). A report that is not
    finite prunes the trial before its last step (a diverged training).

    * ``early_stopping="hyperband"`` (the default) or ``"asha"``: a trial goes on if its
      value is among the best ``max(1, m // reduction_factor)`` of the ``m`` values that
      trials of its bracket reported at the milestone, its own included
      (:mod:`bojax.bo.schedulers`); Hyperband puts trial ``n`` in the bracket bojax's
      own step-wise runs would, ASHA uses one bracket.
    * ``early_stopping="freeze-thaw"``: the model may keep what successive halving
      would stop. A GP (``surrogate``, MAP by default: a decision per milestone must be
      quick) is fitted to every trial's intermediate values over the parameters and the
      step (:mod:`bojax.bo.freezethaw`), and the trial goes on if its expected
      improvement at ``max_resource`` per step it still needs is at least the best new
      design's per full training (Swersky et al. 2014; Snoek et al. 2012's EI per unit
      cost), or if ASHA's rule keeps it. The model alone does not prune: in bojax's
      own runs that best new design is trained next and its uncertainty shrinks, but
      here the study's sampler picks the next trial, the unexplored corner keeps its
      optimism, and a model-only rule pruned 21 of 21 random trials at their first step,
      those at the optimum included. Until ``max(5, d + 2)`` trials have reported,
      successive halving decides. The model's chains are carried from decision to decision.

    The decision reads the study's storage, so parallel workers agree (each pruner fits
    its own model), and the pruner's memory of the milestones it decided for each trial
    (a trial may call ``should_prune`` at some reports only; one pruner per worker, as
    Optuna has it, each judging its own trials). With :class:`BojaxSampler`, the
    intermediate values of pruned and running trials are the sampler's data (BOHB's
    rule)."""

    def __init__(
        self,
        min_resource: int = 1,
        max_resource: int = 100,
        reduction_factor: int = 3,
        early_stopping: str = "hyperband",
        surrogate: str = "gp-map",
        seed: int = 0,
    ) -> None:
        from bojax.bo.settings import Settings

        if early_stopping == "none":
            raise SettingsError("early_stopping='none' prunes nothing: use Optuna's NopPruner")
        if max_resource is None:  # a bojax run's max_step may be None; a pruner's may not
            raise SettingsError("max_resource must be an integer >= 1: the trials' last step")
        # Checked as a bojax run's settings are, the error naming this pruner's argument.
        ours = {"min_step": "min_resource", "max_step": "max_resource", "eta": "reduction_factor"}
        try:
            self._settings = Settings(
                min_step=min_resource, max_step=max_resource, eta=reduction_factor,
                early_stopping=early_stopping, surrogate=surrogate, seed=seed, initial=5,
            )  # fmt: skip
        except SettingsError as error:
            text = str(error)
            for name, argument in ours.items():
                text = re.sub(rf"\b{name}\b", argument, text)
            text = text.replace(", 'none'", "").replace("'none', ", "")  # refused above
            text = text.replace("max_resource must be an integer >= 1 or None", "max_resource "
                                "must be an integer >= 1")  # fmt: skip
            raise SettingsError(text) from None
        self._steps = schedulers.milestones(min_resource, max_resource, reduction_factor)
        if len(self._steps) < 2:  # its one milestone ends the training: nothing to decide
            raise SettingsError(
                f"max_resource ({max_resource}) must be above min_resource ({min_resource}): "
                "with one milestone, the last step, the pruner would never prune"
            )
        self._eta, self._kind = reduction_factor, early_stopping
        self._models: dict[tuple, Any] = {}  # (study, parameters) -> FreezeThaw
        # (study, trial) -> the step up to which its milestones were decided: a trial may
        # call should_prune at some reports only, and a milestone passed between two
        # calls is decided at the next (by the previous report, none was ever decided).
        self._decided: dict[tuple, int] = {}

    def prune(self, study: Study, trial: FrozenTrial) -> bool:
        step = trial.last_step
        if step is None or step >= self._steps[-1]:
            return False  # at its last step the training is over: pruning it saves nothing
        if not math.isfinite(trial.intermediate_values[step]):
            return True  # a diverged training does not go on to its next milestone either
        kind = "asha" if self._kind == "freeze-thaw" else self._kind
        rungs = schedulers.SCHEDULERS[kind](self._steps, self._eta)
        bracket = rungs.bracket(trial.number)
        sign = -1.0 if study.direction == StudyDirection.MAXIMIZE else 1.0
        key = _trial_key(study, trial)
        before = self._decided.get(key, 0)
        # The milestones passed since the last decision (the last one ends the training,
        # no decision there).
        crossed = [
            k
            for k in range(rungs.start(bracket), len(self._steps) - 1)
            if before < self._steps[k] <= step
        ]
        if not crossed:
            return False
        self._decided[key] = step
        if self._kind == "freeze-thaw" and self._model_prunes(study, trial, sign) is False:
            return False  # worth finishing; where the model would stop it, ASHA decides
        states = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
        others = [
            t
            for t in study.get_trials(deepcopy=False, states=states)
            if t.number != trial.number and rungs.bracket(t.number) == bracket
        ]
        for k in crossed:
            for t in others:
                later = [s for s in sorted(t.intermediate_values) if s >= self._steps[k]]
                if later and math.isfinite(t.intermediate_values[later[0]]):
                    rungs.keep(bracket, k, sign * t.intermediate_values[later[0]])
            reached = [s for s in sorted(trial.intermediate_values) if s >= self._steps[k]]
            at_milestone = sign * trial.intermediate_values[reached[0]]
            if not (math.isfinite(at_milestone) and rungs.keep(bracket, k, at_milestone)):
                return True
        return False

    def _model_prunes(self, study: Study, trial: FrozenTrial, sign: float) -> bool | None:
        """The model's verdict on ``trial`` (False once it reported its last step); None
        while too few trials have reported (or its parameters cannot be placed in a
        space)."""
        from bojax.bo.freezethaw import Design, FreezeThaw

        modelled = {n: d for n, d in trial.distributions.items() if _modelled(n, d)}
        if not modelled:
            return None
        space = _space(modelled)
        top = self._settings.max_step
        states = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
        designs, mine = [], None
        for t in study.get_trials(deepcopy=False, states=states):
            curve = [
                [int(s), sign * float(v)]
                for s, v in sorted(t.intermediate_values.items())
                if 1 <= s <= top and math.isfinite(v)
            ]
            try:
                u = space.to_unit({n: t.params[n] for n in space.names})
            except (KeyError, ParameterError):
                continue  # another search space: not this model's data
            if not curve:
                continue
            if t.number == trial.number:
                mine = len(designs)
            done = t.state == TrialState.COMPLETE and t.number != trial.number
            designs.append(Design(u, {}, curve, complete=done))
        key = (study.study_name, tuple(space.names))
        model = self._models.get(key) or FreezeThaw(space, self._settings)
        if mine is not None and designs[mine].step >= top:
            return False  # its last step is in: pruning it saves nothing
        if mine is None or len(designs) < model.least:
            return None
        self._models[key] = model
        _, gains, costs, _, _ = model.worth(designs, [mine])
        return bool(gains[1] / costs[1] < gains[0] / costs[0])
