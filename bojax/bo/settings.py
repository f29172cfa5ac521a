"""Run settings, spelled once: :class:`Settings`.

Every setting is one field below, with its default, its help text and its check.
:func:`bojax.minimize` takes a ``Settings`` (or keyword overrides of its fields), the
``bojax optimize`` command generates one option per field from the same help texts,
the journal records :meth:`Settings.identity`, and the Optuna sampler builds one. A new
setting is one field here; nothing else lists them.

Field metadata (see :func:`setting`):

* ``help``: one line, for the CLI and the generated docs below;
* ``check``: ``check(name, value)`` raises :class:`SettingsError` for a bad value;
* ``identity``: whether a resume must match it (``iterations`` may be extended, the
  driver's limits and concurrency may change between sessions);
* ``omit_at_default``: settings added after journals existed are left out of the
  identity at their default, so older journals stay resumable;
* ``flag``: the CLI option's name where it differs from the field's.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import numbers
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from bojax.errors import SettingsError, is_count

Check = Callable[[str, Any], None]


def _imported(module: str, name: str) -> Callable[[], Any]:
    """``module.name``, imported when first needed: the fields below are read by the
    ``bojax`` command's help and by ``bojax problems``, which must not wait for JAX."""
    return lambda: getattr(importlib.import_module(module), name)


SURROGATES = _imported("bojax.surrogates", "SURROGATES")
FAILURE_MODELS = _imported("bojax.surrogates", "FAILURE_MODELS")
ACQUISITIONS = _imported("bojax.bo.acquisition", "ACQUISITIONS")
POLICIES = _imported("bojax.bo.policies", "POLICIES")
SCALINGS = _imported("bojax.bo.policies", "SCALINGS")
STRATEGIES = _imported("bojax.gp.fantasies", "STRATEGIES")
WARPINGS = _imported("bojax.bo.warping", "WARPINGS")
MANY_OBJECTIVES = 4  # from this many objectives the default acquisition is ParEGO


# -- checks: each raises SettingsError naming the setting ---------------------------------
def count(minimum: int = 0, optional: bool = False, maximum: int | None = None) -> Check:
    """An integer ``>= minimum`` (not a bool), and ``<= maximum`` where given; None too
    where ``optional``."""

    def check(name: str, value: Any) -> None:
        if optional and value is None:
            return
        if not (is_count(value) and value >= minimum and (maximum is None or value <= maximum)):
            kind = "a non-negative integer" if minimum == 0 else f"an integer >= {minimum}"
            kind += "" if maximum is None else f" and <= {maximum}"
            raise SettingsError(
                f"{name} must be {kind}{' or None' if optional else ''}, got {value!r}"
            )

    return check


def number(low: float, high: float = math.inf, *, open_low=False, open_high=False, optional=False):
    """A finite real in ``[low, high]`` (either end open), not a bool; None where ``optional``."""

    def check(name: str, value: Any) -> None:
        if optional and value is None:
            return
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
        ok = ok and math.isfinite(value)
        ok = ok and (value > low if open_low else value >= low)
        ok = ok and (value < high if open_high else value <= high)
        if not ok:
            closed_low = not open_low and math.isfinite(low)  # inf is never accepted
            closed_high = not open_high and math.isfinite(high)
            bounds = f"{'[' if closed_low else '('}{low:g}, {high:g}{']' if closed_high else ')'}"
            wanted = (
                "finite number" if math.isinf(low) and math.isinf(high) else f"number in {bounds}"
            )
            raise SettingsError(
                f"{name} must be a {wanted}{' or None' if optional else ''}, got {value!r}"
            )

    return check


def boolean(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise SettingsError(f"{name} must be True or False, got {value!r}")


def one_of(choices: tuple | Callable[[], tuple], optional: bool = False) -> Check:
    """One of ``choices`` (or of what a callable returns when checked); None where optional."""

    def check(name: str, value: Any) -> None:
        if optional and value is None:
            return
        known = choices() if callable(choices) else choices
        if not isinstance(value, str) or value not in known:
            extra = " or None" if optional else ""
            raise SettingsError(f"{name} must be one of {tuple(known)}{extra}, got {value!r}")

    return check


def registered(registry: Callable[[], Any]) -> Check:
    """A name registered in ``registry()`` (an UnknownNameError lists the known ones)."""

    def check(name: str, value: Any) -> None:
        if not isinstance(value, str):  # an object: `get_*` takes one, a run's settings not
            names = registry()
            where = names.plural.upper().replace(" ", "_")
            raise SettingsError(
                f"{name} takes the name of a registered {names.kind}, got a "
                f"{type(value).__name__}: register it first ({where}.register, "
                "docs/extending.md) and pass its name (a run's journal keeps the name)"
            )
        registry().get(value)

    return check


def setting(
    default: Any,
    help: str,
    check: Check | None = None,
    *,
    identity: bool = True,
    omit_at_default: bool = False,
    flag: str | None = None,
):
    """A :class:`Settings` field with its help text, check and journal behaviour."""
    metadata = {
        "help": help,
        "check": check,
        "identity": identity,
        "omit_at_default": omit_at_default,
        "flag": flag,
    }
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Settings:
    """Everything that defines a run; a resume must use the same settings (its
    :meth:`identity`). Each field's help text is listed at the end of this docstring."""

    surrogate: str = setting(
        "gp-slice", "the surrogate model (`bojax list surrogates`)", registered(SURROGATES)
    )
    acquisition: str = setting(
        "log_ei", "the acquisition function (`bojax list acquisitions`)", registered(ACQUISITIONS)
    )
    optimizer: str = setting(
        "sobol",
        "candidates of the acquisition optimiser: sobol or random",
        one_of(("sobol", "random")),
    )
    iterations: int = setting(20, "BO steps after the initial design", count(), identity=False)
    initial: int = setting(5, "Sobol points before BO starts", count(1))
    # JAX keys take a C long: a larger seed was an OverflowError at the first key.
    seed: int = setting(0, "random seed", count(maximum=2**63 - 1))
    maximize: bool = setting(False, "maximise the objective instead of minimising", boolean)
    num_candidates: int = setting(
        2048, "acquisition candidates per step", count(1), flag="candidates"
    )
    kappa: float = setting(2.0, "LCB's exploration weight", number(0.0))
    incumbent: str = setting(
        "observed",
        "the incumbent of EI/PI: observed (best output) or posterior_mean",
        one_of(("observed", "posterior_mean")),
    )
    samples: int | None = setting(
        None,
        "hyperparameter draws per fit (default: the surrogate's)",
        count(1, optional=True),
        omit_at_default=True,
    )
    burn_in: int | None = setting(
        None,
        "burn-in steps of the first fit (default: the surrogate's)",
        count(0, optional=True),
        omit_at_default=True,
    )
    policy: str = setting(
        "acquisition",
        "exploration policy (bojax.bo.policies): acquisition, hybrid, variable-threshold",
        registered(POLICIES),
        omit_at_default=True,
    )
    tau: float | None = setting(
        None, "the policy's threshold (default: the policy's)", omit_at_default=True
    )
    scaling: str = setting(
        "pseudocode",
        "variable threshold: the report's pseudocode or prose direction",
        one_of(SCALINGS),
        omit_at_default=True,
    )
    stop_tolerance: float | None = setting(
        None,
        "stop once the best acquisition value is below this (log EI: once EI is; "
        "cost_aware: the acquisition's own best, not per second)",
        number(0.0, open_low=True, optional=True),
        omit_at_default=True,
    )
    stop_sd: float | None = setting(
        None,
        "... and, for exploring policies, the largest posterior sd below this",
        number(0.0, open_low=True, optional=True),
        omit_at_default=True,
    )
    stop_noise: float | None = setting(
        None,
        "... or that sd below stop_noise times the fitted noise sd",
        number(0.0, open_low=True, optional=True),
        omit_at_default=True,
    )
    fantasy: str = setting(
        "integrated",
        "pending points: integrated (Snoek et al. 2012) or believer",
        one_of(STRATEGIES),
        omit_at_default=True,
    )
    fantasies: int | None = setting(
        None,
        "integrated fantasies per hyperparameter draw (default: enough for 128 in all; "
        "log_nehvi: sampled fronts, 32 in all)",
        count(1, optional=True),
        omit_at_default=True,
    )
    failure_model: str = setting(
        "gp-probit",
        "what learns where evaluations fail: gp-probit, or none (failures only dropped)",
        registered(FAILURE_MODELS),
        omit_at_default=True,
    )
    warping: str | None = setting(
        None,
        "outputs the surrogate sees: standardise, rank or power (default: the surrogate's)",
        one_of(WARPINGS, optional=True),
        omit_at_default=True,
    )
    cost_aware: bool = setting(
        False,
        "maximise the acquisition per second of evaluation (EI per second, Snoek et al. "
        "2012): a GP fitted to the log of each evaluation's measured seconds predicts them; "
        "with early_stopping='freeze-thaw', decisions are priced in seconds, not steps",
        boolean,
        omit_at_default=True,
    )
    # Large runs (bojax.bo.trust): a local GP in a trust region past exact_limit.
    exact_limit: int | None = setting(
        300,
        "successful evaluations a GP conditions on all at once; past them each proposal "
        "fits a local GP (MAP) to the local_points nearest the best (a quarter of them the "
        "region's latest proposals) and searches a trust region around it (None, or a "
        "number above the run's size: always exact)",
        count(1, optional=True),
        omit_at_default=True,
    )
    local_points: int = setting(
        256,
        "evaluations a local GP sees once exact_limit is passed",
        count(8),
        omit_at_default=True,
    )
    # Step-wise objectives (bojax.bo.stepwise, bojax.bo.schedulers): train(point, report).
    max_step: int | None = setting(
        None,
        "steps (epochs) of a full training; a step-wise objective, one with a report "
        "parameter, needs it",
        count(1, optional=True),
        omit_at_default=True,
    )
    min_step: int = setting(
        1, "the first step where a training may be stopped", count(1), omit_at_default=True
    )
    eta: int = setting(
        3,
        "successive halving's reduction factor: the best 1/eta of a milestone go on",
        count(2),
        omit_at_default=True,
    )
    early_stopping: str = setting(
        "hyperband",
        "which step-wise trainings go on: hyperband, asha (successive halving), "
        "freeze-thaw (a GP over the curves pauses and thaws them) or none",
        one_of(("hyperband", "asha", "freeze-thaw", "none")),
        omit_at_default=True,
    )
    proposer: str = setting(
        "model",
        "new designs of a step-wise run: model (the surrogate at the highest milestone with "
        "enough values, as BOHB) or random (Sobol)",
        one_of(("model", "random")),
        omit_at_default=True,
    )
    step_budget: int | None = setting(
        None,
        "steps a step-wise run may spend in all (default: (initial + iterations) * max_step, "
        "what as many full trainings cost)",
        count(1, optional=True),
        identity=False,
    )
    # Several metrics per evaluation (bojax.bo.metrics, bojax.bo.multiobjective).
    objectives: tuple[str, ...] | None = setting(
        None,
        "optimise several metrics, each name:min or name:max (repeatable); the objective "
        "then returns a dict of metrics",
        omit_at_default=True,
        flag="objective",
    )
    constraints: tuple[str, ...] | None = setting(
        None,
        "outcome constraints on returned metrics, each name<=bound or name>=bound "
        "(repeatable; needs objectives)",
        omit_at_default=True,
        flag="constraint",
    )
    reference_point: tuple[float, ...] | None = setting(
        None,
        "hypervolume reference point, one value per objective in its units (default: the "
        "front's worst values moved out by 10% of its range for the reported hypervolume; "
        "the acquisition searches against the wider worst-value rule)",
        omit_at_default=True,
    )
    # The driver's limits and concurrency: a resumed run may change them.
    max_failures: int | None = setting(
        None,
        "stop after this many failed evaluations (default: no limit)",
        count(1, optional=True),
        identity=False,
    )
    min_success_probability: float | None = setting(
        None,
        "stop once P(success) is below this everywhere the optimiser looks",
        number(0.0, 1.0, open_low=True, open_high=True, optional=True),
        identity=False,
    )
    q: int | None = setting(
        None,
        "evaluations in flight (default: the executor's workers; 1 without one)",
        count(1, optional=True),
        identity=False,
    )
    retries: int = setting(
        1,
        "resubmissions of an evaluation that was lost (its worker or the driver died) "
        "before it is recorded as failed",
        count(),
        identity=False,
    )
    isolate: bool = setting(
        False,
        "evaluate each point in a fresh process, so a crash or a kill fails that "
        "evaluation and not the run (costs a process start)",
        boolean,
        identity=False,
    )
    timeout: float | None = setting(
        None,
        "seconds an evaluation may take before it is killed and recorded as failed "
        "(evaluates in a fresh process, as isolate)",
        number(0.0, open_low=True, optional=True),
        identity=False,
    )

    time_budget: float | None = setting(
        None,
        "seconds this call may run: after them it starts no new evaluation or training "
        "segment, lets those running finish and stops, resumable (default: no limit)",
        number(0.0, open_low=True, optional=True),
        identity=False,
    )

    @property
    def batch(self) -> int:
        """The points the run adds at a time, ``q`` (1 unset): the data's buckets widen for
        it (:func:`bojax.compilation.bucket_size`), read here rather than from each ask so
        a resume's replayed fits pad as the run's did."""
        return self.q or 1

    @property
    def isolated(self) -> bool:
        """Whether evaluations run in a process of their own (``isolate`` or a ``timeout``)."""
        return self.isolate or self.timeout is not None

    def _check_unused_policy_settings(self) -> None:
        """SettingsError for a setting that would do nothing here (:func:`inert_settings`):
        it would still enter the run's identity, so a resume without it is refused (runs
        journalled before this check resume through :func:`without_inert`)."""
        inert = inert_settings({spec.name: getattr(self, spec.name) for spec in fields(self)})
        if inert:
            raise SettingsError(next(iter(inert.values())))

    def __post_init__(self) -> None:
        self._normalise_metrics()
        for spec in fields(self):
            check = spec.metadata.get("check")
            if check is not None:
                check(spec.name, getattr(self, spec.name))
        from bojax.bo import policies

        policies.check(self.policy, self.tau, self.scaling)  # tau's range is the policy's
        self._check_unused_policy_settings()
        record = ACQUISITIONS().get(self.acquisition)
        outputs = record.outputs
        if outputs == 1:
            from bojax.bo.acquisition import check_scores

            check_scores(record)
        if self.objectives is None and outputs != 1:
            raise SettingsError(
                f"acquisition {self.acquisition!r} is for several metrics; name them with "
                "objectives (--objective name:min)"
            )
        if self.objectives is not None:
            self._check_several(outputs)
        if self.cost_aware and (self.objectives is not None or self.policy != "acquisition"):
            raise SettingsError(
                "cost_aware divides one acquisition by the predicted seconds: not with "
                "objectives or an exploration policy"
            )
        if self.max_step is not None and self.min_step > self.max_step:
            raise SettingsError(f"min_step = {self.min_step} exceeds max_step = {self.max_step}")

    def _normalise_metrics(self) -> None:
        """``objectives``/``constraints`` as texts (dicts accepted), the reference point as
        a tuple of floats, and ``log_ei``, the default, read as noisy EHVI (``log_nehvi``)
        once there are several objectives, or as ``log_ehvi`` for one objective with
        constraints and for a surrogate that samples no fronts (not a GP)."""
        from bojax.bo.metrics import constraint_texts, objective_texts

        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        for name in ("objectives", "constraints", "reference_point"):
            value = getattr(self, name)
            if isinstance(value, list | tuple) and len(value) == 0:  # the CLI's "not given"
                put(name, None)
        put("objectives", objective_texts(self.objectives))
        put("constraints", constraint_texts(self.constraints))
        if self.constraints is not None and self.objectives is None:
            raise SettingsError("constraints need objectives naming what to optimise")
        reference = self.reference_point
        if reference is not None:
            names = [text.split(":")[0] for text in self.objectives or ()]
            if isinstance(reference, dict):
                if sorted(reference) != sorted(names):
                    raise SettingsError(
                        f"reference_point must give one value per objective {names}, "
                        f"got {sorted(reference)}"
                    )
                reference = [reference[name] for name in names]
            if isinstance(reference, str) or not isinstance(reference, list | tuple):
                raise SettingsError(f"reference_point must be a list of numbers, got {reference!r}")
            for value in reference:
                number(-math.inf)("reference_point", value)
            if len(reference) != len(names):
                raise SettingsError(
                    f"reference_point has {len(reference)} value(s); there are "
                    f"{len(names)} objectives"
                )
            put("reference_point", tuple(float(v) for v in reference))
        if self.objectives is not None and self.acquisition == "log_ei":
            # Noisy EHVI samples fronts from a GP; other surrogates keep exact EHVI, and so
            # does one objective with constraints (constrained EI, as without them). From
            # MANY_OBJECTIVES on, ParEGO: EHVI's boxes grow as the front's size to the
            # power objectives - 1 (minutes an ask at 4, out of memory at 5).
            noisy = len(self.objectives) > 1 and hasattr(
                SURROGATES().get(self.surrogate), "fantasize"
            )
            put("acquisition", "log_nehvi" if noisy else "log_ehvi")
            if len(self.objectives) >= MANY_OBJECTIVES:
                put("acquisition", "parego")
        elif self.acquisition == "log_nehvi" and not hasattr(
            SURROGATES().get(self.surrogate), "fantasize"
        ):
            raise SettingsError(
                f"log_nehvi samples fronts from a GP; surrogate {self.surrogate!r} has none: "
                "use log_ehvi"
            )

    def _check_several(self, outputs: int | None) -> None:
        if outputs is not None:
            raise SettingsError(
                f"acquisition {self.acquisition!r} models one objective; with objectives use "
                "log_ehvi, log_nehvi or parego"
            )
        if self.maximize:
            raise SettingsError("with objectives, say name:max for each metric to maximise")
        if self.policy != "acquisition" or self.stop_tolerance is not None:
            raise SettingsError(
                "exploration policies and stop_tolerance are for one objective; a run with "
                "objectives uses its acquisition alone"
            )
        if self.warping not in (None, "standardise"):
            raise SettingsError(
                f"warping {self.warping!r} is for one objective; with objectives each metric "
                "is standardised (the fronts and thresholds are read in its units)"
            )

    @property
    def metrics(self):
        """The parsed :class:`bojax.bo.metrics.Metrics`, or None for one objective."""
        if self.objectives is None:
            return None
        from bojax.bo.metrics import Metrics

        return Metrics.parse(self.objectives, self.constraints)

    def replace(self, **overrides: Any) -> Settings:
        """These settings with ``overrides``; an unknown name is a SettingsError."""
        unknown = sorted(set(overrides) - {spec.name for spec in fields(self)})
        if unknown:
            raise SettingsError(
                f"unknown setting(s) {', '.join(map(repr, unknown))}; known: "
                f"{', '.join(spec.name for spec in fields(self))}"
            )
        return dataclasses.replace(self, **overrides)

    def make_surrogate(self, space=None):
        """The named surrogate, with ``samples`` draws per fit and ``burn_in`` if set,
        adapted to ``space``'s inputs where given (categorical parameters)."""
        from bojax.surrogates import for_space

        surrogate = SURROGATES().get(self.surrogate).configured(self.samples, self.burn_in)
        return surrogate if space is None else for_space(surrogate, space)

    def make_failure_model(self, space=None):
        """The failure classifier, or None where failures are only dropped; adapted to
        ``space``'s inputs where given."""
        from bojax.surrogates import for_space, get_failure_model

        model = get_failure_model(self.failure_model)
        return model if model is None or space is None else for_space(model, space)

    def options(self) -> dict[str, Any]:
        """The settings outside :meth:`identity` (``iterations``, ``q``, ``timeout``...):
        each call chooses them; a journal keeps the last call's for the CLI's resume."""
        return {
            spec.name: _plain(getattr(self, spec.name))
            for spec in fields(self)
            if not spec.metadata["identity"]
        }

    def identity(self) -> dict[str, Any]:
        """What a journal records and a resume must match: the settings marked
        ``identity``; those added after journals existed are omitted at their default, so
        adding one keeps older journals resumable."""
        specs = {spec.name: spec for spec in fields(self)}
        return {
            name: _plain(value)
            for name, value in asdict(self).items()
            if specs[name].metadata["identity"]
            and not (specs[name].metadata["omit_at_default"] and value == specs[name].default)
        }


def _plain(value: Any) -> Any:
    """``value`` as JSON writes it: a NumPy or other number type (``np.int64(20)`` from
    a sweep, which the checks accept) as Python's int or float."""
    if isinstance(value, tuple | list):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    return float(value) if isinstance(value, numbers.Real) else value


def help_texts() -> dict[str, str]:
    """``{field: help}`` of every setting, in declaration order."""
    return {spec.name: spec.metadata["help"] for spec in fields(Settings)}


Settings.__doc__ += "\n\n" + "\n".join(
    f"* ``{name}`` (default ``{spec.default!r}``): {spec.metadata['help']}"
    for name, spec in ((spec.name, spec) for spec in fields(Settings))
)


def inert_settings(settings: dict[str, Any]) -> dict[str, str]:
    """Those of ``settings`` (a :class:`Settings`' fields, or a journal's) that would do
    nothing, each with why: ``stop_tolerance`` in a step-wise run (``max_step``), then
    ``stop_sd``/``stop_noise`` without a stopping rule or an exploring policy, ``tau``
    without an exploring policy, ``scaling`` without a policy that reads it, ``samples``
    and ``burn_in`` with a surrogate that fits a point estimate."""
    from bojax.bo import policies
    from bojax.errors import UnknownNameError

    inert = {}
    if settings.get("max_step") is not None and settings.get("stop_tolerance") is not None:
        inert["stop_tolerance"] = (
            "a step-wise run ends when its step budget is spent; stop_tolerance (the "
            "policy's stopping rule) is for plain objectives"
        )
    policy = settings.get("policy", "acquisition")
    try:
        record = policies.POLICIES.get(policy)
        explores, reads_scaling = record.explores, record.reads_scaling
    except UnknownNameError:  # a plugin's policy, not loaded: its settings stand
        explores = reads_scaling = True
    no_rule = settings.get("stop_tolerance") is None or "stop_tolerance" in inert
    for name in ("stop_sd", "stop_noise"):
        if settings.get(name) is None:
            continue
        if not explores:  # whether stop_tolerance is set or not: it would not help
            inert[name] = (
                f"stop_sd and stop_noise bound an exploring policy's largest posterior sd "
                f"(hybrid, variable-threshold); policy={policy!r} stops on stop_tolerance "
                "alone"
            )
        elif no_rule:
            inert[name] = (
                "stop_sd and stop_noise refine the stopping rule that stop_tolerance sets; "
                "set stop_tolerance too"
            )
    if not explores and settings.get("tau") is not None:
        inert["tau"] = (
            f"tau sets an exploring policy's threshold (hybrid, variable-threshold); "
            f"policy={policy!r} has none"
        )
    if not reads_scaling and settings.get("scaling", "pseudocode") != "pseudocode":
        inert["scaling"] = (
            f"scaling chooses how the variable threshold reads its improvement "
            f"(policy='variable-threshold'); policy={policy!r} does not read it"
        )
    # (a value that is no count is the count check's to refuse, not dropped as inert)
    drawn = [name for name in ("samples", "burn_in") if is_count(settings.get(name))]
    surrogate = settings.get("surrogate", Settings.__dataclass_fields__["surrogate"].default)
    if drawn and _point_estimate(surrogate):
        for name in drawn:
            inert[name] = (
                f"{name} sets the hyperparameter draws of a sampled surrogate; surrogate="
                f"{surrogate!r} fits one point estimate (leave samples and "
                "burn_in out, or choose a sampled surrogate such as gp-slice)"
            )
    return inert


def _point_estimate(surrogate: str) -> bool:
    """Whether the surrogate named ``surrogate`` fits its hyperparameters by a point
    estimate (MAP, or fixed), so ``samples`` and ``burn_in`` do nothing (review CQ);
    False for one not registered here (a plugin's, not loaded: its settings stand)."""
    from bojax.errors import UnknownNameError

    try:
        model = SURROGATES().get(surrogate)
    except UnknownNameError:
        return False
    sampler = getattr(model, "sampler", None)
    return bool(getattr(sampler, "point", False))


def without_inert(stored: dict[str, Any]) -> dict[str, Any]:
    """A journalled run's settings less those :func:`inert_settings` names, which it
    journalled before they were refused: it then resumes and plots as it ran."""
    inert = inert_settings(stored)
    return {name: value for name, value in stored.items() if name not in inert}
