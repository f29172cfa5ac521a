"""Trainings that stop early: the driver of step-wise objectives ``train(point, report)``.

A step-wise objective calls ``report(step, value)`` after each step (an epoch, say) and
returns its final value. At each report the run's scheduler (:mod:`bojax.bo.schedulers`:
Hyperband, ASHA, or ``none``) decides whether the training goes on; if not, ``report``
raises :class:`StopTraining`, which ends ``train`` where it stands with no code in the
objective (it derives from ``BaseException``, so an objective's ``except Exception`` does
not swallow it). ``report`` returns whether the training goes on: False once it has
reported ``max_step``, so a loop with no end of its own can stop there (``if not
report(...): break``) rather than train a step that is never recorded. A run spends
``step_budget`` steps in all (default: what ``initial + iterations`` full trainings of
``max_step`` steps cost).

New designs come from the Sobol design until some milestone holds ``max(initial, d + 2)``
values; then (``proposer="model"``, after BOHB, Falkner et al. 2018) from the run's
surrogate and acquisition fitted to the values at the highest such milestone; the designs
proposed since that milestone's data last grew (all stopped below it) are pending
Kriging believers, so a design is not proposed twice because the data did not change
(and no other stopped design is proposed again: it is excluded, not believed),
and failed trainings are the failure classifier's labels, as in a plain run (before,
four in ten proposals went on into a region where every training failed), while the
believers stay few (about eta^k designs at the k-th milestone under
ASHA; every stopped design as a believer made an ASHA run on LCBench 7x slower, 648 s
against 87 s). At the last milestone, which few designs reach, their count would grow
without bound (564 on one LCBench run, a proposal's cost growing with them), so only the
latest ``max(least, 32, min(eta^(K - 1), 128))`` of them are kept, K the number of
milestones: a proposal's model holds at most that many believers beside its milestone's
values and the designs in training (benchmarks/README.md).
``proposer="random"`` keeps to the Sobol design (random search with ASHA or Hyperband).
Each proposal fits afresh from the records, so a resumed run proposes what the
uninterrupted one did without any saved chain state.

Every design's whole curve is journalled when its training ends: status ``ok`` (it ended
by itself, saying so with ``report(step, value, last=True)`` where that may fall on a
milestone, or reached ``max_step``; ``y`` is its returned value), ``stopped`` (the scheduler
or the budget ended it; ``y`` is its last reported value) or ``failed`` (it raised, or
reported a value that is not a finite number). The trainings in flight are journalled
as they report (``pending.json``: proposal and curve so far; a checkpoint passed to
``report(step, value, checkpoint=state)`` is pickled to ``checkpoints/<design>.pkl``), so
on ``resume`` a training that was in flight continues from its last checkpoint (curve,
steps spent and milestone decisions restored) if the objective takes a ``checkpoint``
parameter, and otherwise starts again from its first step, with the proposal and bracket
it had. A training the scheduler or the budget had stopped (and, under
:class:`Trainings`, one complete or failed) that was not yet journalled is journalled on
resume from its pending curve, as it ended; under ``minimize`` one that ended itself
trains again, its value being what ``train`` returns. The curve is written at each
checkpoint, milestone and end (a freeze-thaw segment's also at its first report), and
otherwise at most every ``PROGRESS_SECONDS``: rewriting every open curve at every
step made a run's cost grow with the square of its curves' length (5.7 ms a step at
step 4,000), and between checkpoints only ``bojax show`` reads it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import numbers
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from bojax.bo import schedulers
from bojax.bo.deadline import Deadline
from bojax.bo.evaluation import (
    as_executor,
    failure_text,
    finite_number,
    pickled,
    short_repr,
    unsendable,
    unwrapped,
)
from bojax.bo.journal import Journal, objective_name, run_header
from bojax.bo.loop import ask_batch, init, tell
from bojax.bo.records import ENDED, curve_ok
from bojax.bo.runs import design_counts, stepwise_best
from bojax.bo.settings import Settings
from bojax.errors import (
    DataError,
    JournalError,
    ObjectiveError,
    SettingsError,
    SpaceExhaustedError,
    is_count,
)
from bojax.spaces import Space

# The most pending believers a model proposal conditions on, whatever eta and the
# milestones: its GP holds at most this many beside its milestone's values (a proposal
# took 0.25 s at 81 on LCBench, 0.96 s at 388; benchmarks/README.md).
MOST_BELIEVERS = 128
# and at least this many: with few milestones eta^(K - 1) is small (9 for 1, 3, 9), and a
# window that short forgot stopped designs within a few proposals, which went back to
# them (a 62-design ASHA run ended at 0.09; 0.006 with this floor and the exclusion)
FEWEST_BELIEVERS = 32

# How stale the curves in pending.json may grow between checkpoints, milestones and ends
# (seconds): only `bojax show` reads them there.
PROGRESS_SECONDS = 1.0


# The most segments a parallel freeze-thaw run may have in flight, as far as a resume's
# check of its journal's design numbers goes (a tampered one would allocate them all).
MOST_IN_FLIGHT = 65536


class StopTraining(BaseException):
    """Raised by ``report`` when the scheduler ends a training (or the budget is spent)."""


def parameter(objective: Callable, name: str) -> inspect.Parameter | None:
    """``objective``'s parameter called ``name``, or None. A decorator's own signature
    decides, and the function it wraps (``__wrapped__``) only behind one that passes
    ``*args``/``**kwargs`` on: a wrapper that supplies ``report`` itself takes a point
    alone, though the function it wraps has a report."""
    try:
        own = inspect.signature(objective, follow_wrapped=False).parameters
    except (TypeError, ValueError):  # a builtin or a C callable: one argument, unless
        own = {}  # it wraps one (functools.lru_cache), whose signature is read below
        if not hasattr(objective, "__wrapped__"):
            return None
    if name in own:
        return own[name]
    passes_on = {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}
    if own and not passes_on & {p.kind for p in own.values()}:
        return None
    try:
        return inspect.signature(objective).parameters.get(name)
    except (TypeError, ValueError):
        return None


def takes(objective: Callable, name: str) -> bool:
    """Whether ``objective`` has a parameter called ``name`` (:func:`parameter`)."""
    return parameter(objective, name) is not None


def takes_report(objective: Callable) -> bool:
    """Whether ``objective`` is step-wise: it has a parameter named ``report``."""
    return takes(objective, "report")


def call_train(train: Callable, point: dict, report: Callable, **kwargs: Any) -> Any:
    """``train(point, report, **kwargs)``, passing ``report`` by name where ``train``
    takes it only so (``def train(point, *, report)``)."""
    said = parameter(train, "report")
    if said is not None and said.kind is inspect.Parameter.KEYWORD_ONLY:
        return train(point, report=report, **kwargs)
    return train(point, report, **kwargs)


def unbindable(objective: Callable, *args: Any, **kwargs: Any) -> str | None:
    """Why ``objective(*args, **kwargs)`` cannot bind to ``objective``'s signature (a
    parameter too many or too few), or None; None as well where there is no signature to
    read (a builtin is tried instead)."""
    try:  # (the function called, not one a decorator wraps and hands arguments of its own)
        signature = inspect.signature(objective, follow_wrapped=False)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*args, **kwargs)
    except TypeError as error:
        return str(error)
    return None


def unbindable_train(train: Callable) -> str | None:
    """Why ``train`` cannot be called as :func:`call_train` calls it, or None."""
    try:
        report = inspect.signature(train, follow_wrapped=False).parameters.get("report")
    except (TypeError, ValueError):
        return None
    if report is not None and report.kind is inspect.Parameter.KEYWORD_ONLY:
        return unbindable(train, {}, report=None)
    return unbindable(train, {}, None)


def batch_of(train: Callable) -> Callable | None:
    """How ``train`` trains several designs in one call: its ``batch(points, reports)``
    method, or for a bound method ``obj.train`` the object's ``train_batch``; else None."""
    batch = getattr(train, "batch", None)
    if batch is None and hasattr(train, "__self__"):
        batch = getattr(train.__self__, f"{train.__name__}_batch", None)
    return batch if callable(batch) else None


def step_budget(settings: Settings) -> int:
    """The steps a step-wise run may spend: ``step_budget``, or what ``initial +
    iterations`` full trainings cost."""
    return settings.step_budget or (settings.initial + settings.iterations) * settings.max_step


def rung_values(steps: tuple[int, ...], curve: list[list[float]]) -> dict[int, float]:
    """``{milestone index: value}`` of a curve: the value of its first report at or past
    each milestone it reached (what the scheduler decided on)."""
    values: dict[int, float] = {}
    rung = 0
    for step, value in curve:
        while rung < len(steps) and step >= steps[rung]:
            values[rung] = value
            rung += 1
    return values


class Checkpoint(NamedTuple):
    """The ``state`` a training passed to ``report`` at ``step``. A training continued
    from it resumes there: the steps it reports again, up to its curve's last, are
    charged to the budget and not recorded twice (a training may checkpoint less often
    than it reports)."""

    step: int | None  # None: a checkpoint journalled before bojax kept its step
    state: Any

    def resumes_at(self, recorded: int) -> int:
        """The step a training continued from this checkpoint reports after."""
        return recorded if self.step is None else self.step


def starts_after(checkpoint: Checkpoint | None, recorded: int) -> int:
    """The step a training whose curve ends at ``recorded`` trains from: its
    ``checkpoint``'s, or 0 without one (it starts again)."""
    return 0 if checkpoint is None else checkpoint.resumes_at(recorded)


def kept_charge(charged: int, checkpoint: Checkpoint | None, recorded: int) -> int:
    """A killed training's ``charged`` steps less those its resume trains again (past
    the ``checkpoint`` it continues from, all of them without one): those are charged
    when trained again, so the resumed run spends its budget as the uninterrupted one
    (review BB: freeze-thaw charged them twice for an objective taking a checkpoint and
    passing none)."""
    return max(int(charged) - (recorded - starts_after(checkpoint, recorded)), 0)


# Why a training ended that makes it complete, not stopped: it reached max_step, or
# reported its last step itself (report(..., last=True)).
COMPLETE = ("max_step", "last")


@dataclass
class _Training:
    """One design's training in progress: its curve and the next milestone it meets."""

    design: int
    bracket: int
    rung: int  # next milestone index where a decision is due
    curve: list[list[float]] = field(default_factory=list)
    over: str | None = None  # why it ended ("scheduler", "budget"; or COMPLETE's)
    checkpoint: Checkpoint | None = None  # the last one the training passed to report
    charged: int = 0  # steps trained so far, repeats included
    reported: int = 0  # the last step this call of train reported
    error: str | None = None  # why it failed (over == "failed")
    closed: bool = False  # journalled: a late report (a stashed report, a thread) is refused
    refused: str | None = None  # a report refused (its step or value): the training fails
    # its batch call returned: (status, y, error) of its record, which a batch run
    # killed while journalling the batch's records journals on resume
    returned: tuple[str, float | None, str | None] | None = None

    @property
    def recorded(self) -> int:
        return int(self.curve[-1][0]) if self.curve else 0


def raise_late_report(design: int | None) -> None:
    """Refuse a report made after its training ended: it would charge steps and feed the
    scheduler a value the journal never holds (review: a stashed ``report`` called from
    the next training spent the run's budget)."""
    which = "a training" if design is None else f"design {design}'s training"
    raise RuntimeError(
        f"report called after {which} ended (train returned, failed or was stopped): "
        "each call of train has its own report, valid until it returns"
    )


class ReportMisuse(ValueError):
    """``report`` called in a way no design can make right (a step that is not a whole
    number above the last, a value that is not a number, none at all): the objective's
    code, so a run whose every training so far failed so starts no more of them."""


_NO_VALUE = object()


class _Reporter:
    """The ``report(step, value)`` a step-wise objective calls."""

    def __init__(self, run: StepRun, training: _Training):
        self.run, self.training = run, training

    def _charge(self, step: int) -> None:
        """Charge the steps the training ran since its last report, up to ``step``."""
        run, training = self.run, self.training
        run.spent += step - training.reported
        training.charged += step - training.reported
        training.reported = step

    def __call__(
        self, step: Any, value: Any = _NO_VALUE, checkpoint=None, seconds=None, last=False
    ) -> bool:
        """Record ``value`` at ``step`` (and the training's ``checkpoint``, from which a
        resumed run continues it); whether the training goes on (False at ``max_step``).
        ``seconds`` (the step's cost) is checked; only cost-aware freeze-thaw reads it.
        ``last=True``: the training ends here by itself (its own early stopping), so it
        is complete: the value counts at its milestone, and nothing stops it."""
        run, training = self.run, self.training
        if training.closed:
            raise_late_report(training.design)
        if training.over == "last":
            raise StopTraining("the training said its last step was its last")
        if training.over is not None:  # it caught the stop (a trainer thread's report)
            raise StopTraining(f"stopped ({training.over}): no report is taken after it")
        with remembered(training):
            if value is _NO_VALUE:
                raise ReportMisuse(
                    f"report(step, value) was given one argument ({short_repr(step)}): "
                    "pass the step and its value, as in report(epoch, loss)"
                )
            step = check_step(step, training.reported)
            if step > run.max_step:
                past_max_step(step, run.max_step, training.recorded)
        if step > run.max_step:
            training.over = "max_step"
            raise StopTraining(f"past max_step = {run.max_step}")
        with remembered(training):
            if diverged(value):  # the step was trained: it is charged, then the training fails
                self._charge(step)
            value = checked_value(value)
            checked_seconds(seconds)
        self._charge(step)
        if checkpoint is not None:
            training.checkpoint = Checkpoint(step, checkpoint)
        stopped, decided = False, False
        grew = step > training.recorded  # (not trained again from an earlier checkpoint)
        if grew:
            training.curve.append([step, value])
            rung = training.rung
            stopped = not run.decide(training, step, value) and not last
            decided = training.rung != rung
        if last:
            training.over = "last"
        elif stopped:
            training.over = "scheduler"
        elif run.spent >= run.budget and step < run.max_step:
            training.over = "budget"
        # The ended state goes to pending.json before the training is journalled, and a
        # checkpoint with the curve it continues (a resume needs both); the rest, often
        # enough to be seen.
        if checkpoint is not None or training.over is not None or decided:
            run.save_progress(training.design if checkpoint is not None else None)
        elif grew and run.progress_stale():
            run.save_progress()
        if training.over == "last":
            return False
        if training.over == "scheduler":
            raise StopTraining(f"stopped at step {step} by the scheduler")
        if training.over == "budget":
            raise StopTraining("the step budget is spent")
        return step < run.max_step


class StepRun:
    """A step-wise run's scheduler, budget, records and proposals."""

    def __init__(
        self, train, space: Space, settings: Settings, journal, history, progress,
        continues: bool = True,
    ):  # fmt: skip
        self.train, self.space, self.settings = train, space, settings
        self.continues = continues  # whether a resumed training may go on from a checkpoint
        self.journal, self.history = journal, history
        self.max_step = settings.max_step
        self.steps = schedulers.milestones(settings.min_step, settings.max_step, settings.eta)
        self.rungs = schedulers.SCHEDULERS[settings.early_stopping](self.steps, settings.eta)
        self.budget = step_budget(settings)
        self.spent = 0
        self.least = max(settings.initial, space.dim + 2)  # values a milestone's model needs
        # the most believers a proposal conditions on: about what ASHA proposes between
        # two promotions to its top rung, eta^(K - 1) for K milestones, and never more
        # than MOST_BELIEVERS (eta = 2 to max_step = 1000 would allow 1,024)
        top_rung = settings.eta ** (len(self.steps) - 1)
        self.most_believers = max(self.least, FEWEST_BELIEVERS, min(top_rung, MOST_BELIEVERS))
        self.progress = progress
        self.in_flight: dict[int, Opened] = {}  # trainings begun and not ended
        self.restored: dict[int, Opened] = {}  # a killed run's, until trained again
        self._saved_at = -math.inf  # when pending.json was last written
        for number, record in enumerate(history):  # replay the scheduler's records
            training = self._start(int(record.get("proposal", number)))
            for step, value in record["curve"]:
                # Every milestone the curve reached was recorded by the run, even one the
                # replay would stop at: a parallel run journals trainings in the order they
                # end, not the order they reached their milestones.
                self.decide(training, step, value)
            curve = record["curve"]
            self.spent += record["diagnostics"].get("charged", curve[-1][0] if curve else 0)
        self.restored = self._restored()
        for design in sorted(self.restored):  # ended, not journalled: journalled now
            training = self.restored[design].training
            if training.returned is not None:  # in its batch's order, as it returned
                self.end(self.restored.pop(design), *training.returned)
            elif training.over is not None:
                self.end_ended(self.restored.pop(design))

    # -- trainings in flight: journalled as they report, restored on resume ------------
    def save_progress(self, checkpointed: int | None = None) -> None:
        """Write the trainings in flight (their curves so far, and why each that ended
        did) to ``pending.json``, and design ``checkpointed``'s new checkpoint to
        ``checkpoints/<design>.pkl``."""
        if self.journal is None:
            return
        entries = []
        # (a killed run's trainings not yet trained again stay, until they are)
        for design, o in sorted({**self.restored, **self.in_flight}.items()):
            training = o.training
            entry = {
                "proposal": design, "u": np.asarray(o.u).tolist(), "x": o.point,
                "info": o.info, "curve": training.curve, "charged": training.charged,
            }  # fmt: skip
            if training.over is not None:
                entry["over"] = training.over
            if training.over is not None or training.returned is not None:
                entry["seconds"] = time.perf_counter() - o.started  # for its record
            if training.error is not None:
                entry["error"] = training.error
            if training.returned is not None:
                status, y, error = training.returned
                entry["returned"] = {"status": status, "y": y, "error": error}
            entries.append(entry)
        self.journal.save_pending(entries)
        self._saved_at = time.monotonic()
        # The curve first, then its checkpoint: killed between the two, the resume
        # continues from the checkpoint before (one step again), where a checkpoint past
        # the curve would be refused and the training started again from step 1.
        if checkpointed is not None and checkpointed in self.in_flight:
            checkpoint = self.in_flight[checkpointed].training.checkpoint
            save_checkpoint(self.journal, checkpointed, checkpoint)

    def progress_stale(self) -> bool:
        """Whether ``pending.json`` was written over ``PROGRESS_SECONDS`` ago."""
        return time.monotonic() - self._saved_at >= PROGRESS_SECONDS

    def end_ended(self, opened: Opened) -> dict[str, Any]:
        """Journal a training that ended (``opened.training.over`` set) as it ended:
        failed with its error, complete with its last value, or stopped."""
        training = opened.training
        if training.over == "failed":
            return self.end(opened, "failed", None, training.error)
        status = "ok" if training.over in COMPLETE else "stopped"
        repeated = training.charged > training.recorded
        return self.end(opened, status, None, None, training.charged if repeated else None)

    def _restored(self) -> dict[int, Opened]:
        """The trainings a killed run had in flight (``pending.json``): with a checkpoint
        file and an objective that takes one, each continues from it (its curve, charged
        steps and milestone decisions restored); otherwise it starts again from step 1."""
        if self.journal is None:
            return {}
        finished = {int(r.get("proposal", j)) for j, r in enumerate(self.history)}
        resumable = self.continues and self.train is not None and takes(self.train, "checkpoint")
        restored = {}
        entries = [e for e in self.journal.load_pending(self.space)
                   if int(e["proposal"]) not in finished]  # fmt: skip
        # (else killed between the record and the pending file's update)
        # A batch run's batch that had not returned (its trainings may all have ended by
        # their reports, one stopped and one at its last step, with batch still running).
        batch_open = not self.continues and not any(e.get("returned") for e in entries)
        for entry in entries:
            design = int(entry["proposal"])
            if design in restored:
                raise JournalError(
                    f"{self.journal.pending_path}: design {design} is in flight twice"
                )
            u = np.asarray(entry["u"], np.float64)
            training = self._start(design)
            opened = Opened(design, u, self.space.from_unit(u), dict(entry["info"]),
                            training, time.perf_counter())  # fmt: skip
            curve = entry.get("curve", [])
            last = curve[-1][0] if curve and curve_ok(curve, self.max_step) else 0
            charged = entry.get("charged", last)
            if resumable and curve and not (curve_ok(curve, self.max_step) and is_count(charged)):
                raise JournalError(
                    f"{self.journal.pending_path}: design {design}'s 'curve' must be a "
                    "list of [step, value] pairs, steps rising within max_step, and its "
                    "'charged' a whole number"
                )
            # Its batch had returned (a batch run killed while journalling the batch's
            # records): journalled by the caller with the record the batch gave it, in
            # the batch's order. Trained again, a complete one came after a stopped one
            # journalled at once, and the run parted from the uninterrupted one (review).
            if isinstance(entry.get("returned"), dict) and self.train is not None:
                self._returned(entry, training)
                started = time.perf_counter() - float(entry["seconds"])
                restored[design] = opened._replace(started=started)
                continue
            # It had ended: journalled as it ended (by the caller). A training that ended
            # by itself (last=True, max_step) under minimize trains again: its record's
            # value is what train returns, not its last report. A batch run's trainings
            # start again from step 1, so while its batch had not returned an ended one
            # trains again beside the others: journalled at once, it came before them
            # and a new design joined them, and the resumed run parted from the
            # uninterrupted one (review).
            if entry.get("over") is not None and (
                self.train is None
                or (not batch_open and entry["over"] not in (*COMPLETE, "failed"))
            ):
                self._ended(entry, training)
                started = time.perf_counter() - float(entry["seconds"])
                restored[design] = opened._replace(started=started)
                continue
            checkpoint = None
            if resumable and curve:
                checkpoint = load_checkpoint(self.journal, design, int(curve[-1][0]))
            if checkpoint is not None:
                training.checkpoint = checkpoint
                training.curve.extend([int(s), float(v)] for s, v in curve)
                training.reported = checkpoint.resumes_at(training.recorded)
                training.charged = kept_charge(charged, checkpoint, training.recorded)
                self.spent += training.charged
                for step, value in training.curve:
                    self.decide(training, step, value)
            restored[design] = opened
        return restored

    def _ended(self, entry: dict[str, Any], training: _Training) -> None:
        """Restore a pending ``entry`` whose training had ended into ``training``: its
        curve, steps charged, milestone decisions and why it ended."""
        over, curve, charged = entry["over"], entry.get("curve", []), entry.get("charged")
        error = entry.get("error")
        last = curve[-1][0] if curve and curve_ok(curve, self.max_step) else None
        if not (
            over in ENDED and curve_ok(curve, self.max_step) and is_count(charged)
            and _seconds_ok(entry.get("seconds"))
            and (last is not None or over == "failed") and charged >= (last or 0)
            and (last == self.max_step if over == "max_step" else True)
            and (isinstance(error, str) if over == "failed" else error is None)
        ):  # fmt: skip
            raise JournalError(
                f"{self.journal.pending_path}: design {training.design}'s entry ended "
                f"('over' {over!r}): 'over' must be one of {', '.join(ENDED)}, with a "
                "'curve' of [step, value] pairs (steps rising within max_step, ending "
                "there for 'max_step'; empty only for 'failed'), a whole number 'charged' "
                "not below its last step, 'seconds' a finite number >= 0 and, for "
                "'failed' only, a text 'error'"
            )
        training.over, training.error = over, error
        self._replay(training, curve, charged)

    def _returned(self, entry: dict[str, Any], training: _Training) -> None:
        """Restore a pending ``entry`` of a batch that had returned into ``training``: its
        curve, steps charged, milestone decisions and the record the batch gave it."""
        returned, curve = entry["returned"], entry.get("curve", [])
        status, y, error = (returned.get(k) for k in ("status", "y", "error"))
        charged = entry.get("charged")
        if not (
            set(returned) == {"status", "y", "error"} and curve_ok(curve, self.max_step)
            and is_count(charged) and _seconds_ok(entry.get("seconds"))
            and (status == "failed" or (curve and charged >= curve[-1][0]))
            and ((y is None or finite(y)) if status == "ok" else y is None)
            and (isinstance(error, str) if status == "failed" else error is None)
            and status in ("ok", "stopped", "failed")
        ):  # fmt: skip
            raise JournalError(
                f"{self.journal.pending_path}: design {training.design}'s entry of a "
                "returned batch must hold 'returned' {'status': ok|stopped|failed, 'y': "
                "null or, for ok, a finite number, 'error': a text for failed (else "
                "null)}, a 'curve' of [step, value] pairs (steps rising within max_step; "
                "empty only for failed), a whole number 'charged' not below its last step "
                "and 'seconds' a finite number >= 0"
            )
        if entry.get("over") is not None:
            training.over = entry["over"]
        training.returned = (status, None if y is None else float(y), error)
        self._replay(training, curve, charged)

    def _replay(self, training: _Training, curve: list, charged: int) -> None:
        """A restored training's curve, steps charged and milestone decisions."""
        training.curve.extend([int(step), float(value)] for step, value in curve)
        training.charged = int(charged)
        training.reported = training.recorded
        self.spent += training.charged
        for step, value in training.curve:
            self.decide(training, step, value)

    def decide(self, training: _Training, step: int, value: float) -> bool:
        """Record ``value`` at each milestone ``step`` reaches (in ``training``'s
        bracket); False if the scheduler stops the training at any of them.

        A report past several milestones is recorded at all of them, however the first
        decides: the training reached each (as :func:`rung_values` reads a curve). So
        a milestone's records are a function of the curves alone, which a resume replays
        in the order trainings ended: stopping at the first refusal left the later
        milestones' records to the order of the calls, and a parallel run resumed to
        other decisions than the uninterrupted run's (review)."""
        stopped = False
        while training.rung < len(self.steps) and step >= self.steps[training.rung]:
            keep = self.rungs.keep(training.bracket, training.rung, value)
            training.rung += 1
            stopped = stopped or (not keep and training.rung < len(self.steps))
        return not stopped

    def _start(self, design: int) -> _Training:
        bracket = self.rungs.bracket(design)
        return _Training(design, bracket, self.rungs.start(bracket))

    # -- proposals -----------------------------------------------------------------
    def propose(self, design: int, training=None) -> tuple[np.ndarray, dict[str, Any]]:
        """Design ``design``'s unit point and diagnostics; ``training``: the unit points
        of designs in training (pending points)."""
        dim = self.space.dim
        started = np.array([r["u"] for r in self.history], np.float64).reshape(-1, dim)
        training = np.zeros((0, dim)) if training is None else np.reshape(training, (-1, dim))
        chosen = self._model_milestone() if self.settings.proposer == "model" else None
        if chosen is None:  # the Sobol design: point number `design`
            taken = np.concatenate([started, training])
            points, _, infos = ask_batch(init(self.space, self.settings), 1, taken)
            return points[0], {"phase": "initial"}
        rung, observed = chosen
        state = init(self.space, self.settings.replace(fantasy="believer"))
        # Failed trainings are the failure classifier's labels, as in a plain run (one
        # that reached the milestone and failed later is data there already). They are
        # told in the order they ended, with the values: past exact_limit the trust
        # region counts misses in that order, and failures told last read as a run of
        # misses that ended its episodes (a review saw 28 random proposals in a row).
        failed = {j for j, r in enumerate(self.history) if r["status"] == "failed"}
        failed -= set(observed)
        for j in sorted(failed | set(observed)):
            value = math.nan
            if j not in failed:
                value = rung_values(self.steps, self.history[j]["curve"])[rung]
            state = tell(state, started[j], value)
        # proposed since the milestone's data last grew (the latest `most_believers`), or
        # in training now
        since = [j for j in range(max(observed) + 1, len(started)) if j not in failed]
        kept = since[-self.most_believers :]
        pending = np.concatenate([started[kept], training])
        # Every other design (stopped below the milestone before its data last grew, or
        # out of the believers' window) is never proposed again: forgotten, a stopped
        # corner came back exactly, one trained 7 times in a 62-design run (0.09 at the
        # end, against 0.006 with this rule). As data at their last values instead, an
        # epoch-1 loss swamped the milestone's scale and an LCBench run ended worse.
        forgotten = sorted(set(range(len(started))) - set(observed) - failed - set(kept))
        points, _, infos = ask_batch(state, 1, pending, exclude=started[forgotten])
        info = {k: v for k, v in infos[0].items() if k == "phase" or math.isfinite(float(v))}
        return points[0], {
            **info, "model_step": self.steps[rung], "model_points": len(observed),
            "believers": len(pending), "excluded": len(forgotten),
        }  # fmt: skip

    def _model_milestone(self) -> tuple[int, list[int]] | None:
        """The highest milestone with at least ``least`` values, and the designs that have
        one there; None while no milestone has enough."""
        reached: dict[int, list[int]] = {}
        for j, record in enumerate(self.history):
            for rung in rung_values(self.steps, record["curve"]):
                reached.setdefault(rung, []).append(j)
        enough = [rung for rung, designs in reached.items() if len(designs) >= self.least]
        return None if not enough else (max(enough), reached[max(enough)])

    # -- one training --------------------------------------------------------------
    def evaluate(self, design: int, go_on: Callable[[], bool] | None = None) -> dict | None:
        """Propose design ``design``, train it under the scheduler, journal its record;
        None, training nothing, where ``go_on()`` says after the proposal that nothing
        more may start (its fit outlasted the time budget: a resume proposes it again)."""
        opened = self.restored.pop(design, None)
        if opened is None:
            opened = self.begin(design)
            if go_on is not None and not go_on():
                return None
        self.in_flight[design] = opened
        training = opened.training
        kwargs = {} if training.checkpoint is None else {"checkpoint": training.checkpoint.state}
        y, error = None, None
        try:  # a copy: a training that edits its point must not edit the record
            returned = call_train(
                self.train, dict(opened.point), _Reporter(self, training), **kwargs
            )
            if training.over not in (None, *COMPLETE):  # it caught the stop and returned
                raise StopTraining(training.over)
            status, y, error = outcome(returned, opened.training.curve)
        except StopTraining:
            status = "ok" if opened.training.over in COMPLETE else "stopped"
        except KeyboardInterrupt:  # Ctrl-C stops the run; the training stays pending
            raise
        except BaseException as raised:  # user code, sys.exit too: this design fails
            status, error = "failed", failure_text(raised)
        if training.refused is not None:  # it caught the ValueError and went on
            status, y, error = "failed", None, training.refused
        repeated = training.charged > training.recorded  # continued from an older checkpoint
        return self.end(opened, status, y, error, training.charged if repeated else None)

    def next_designs(self, count: int) -> list[int]:
        """The numbers of the next ``count`` trainings: a killed run's trainings in flight
        first, then new numbers past every one used (a parallel run journals trainings in
        the order they end, so the records' count may be a number already taken)."""
        restored = sorted(self.restored)[:count]
        used = [int(r.get("proposal", j)) for j, r in enumerate(self.history)]
        start = max([*used, *self.restored, *self.in_flight], default=-1) + 1
        return restored + list(range(start, start + count - len(restored)))

    def evaluate_batch(
        self, designs: list[int], batch: Callable, go_on: Callable[[], bool] | None = None
    ) -> list[dict[str, Any]]:
        """``designs`` trained together by one ``batch(points, reports)`` call (a vmapped
        trainer); each design's decisions are taken at its own reports. If the call
        raises, every design of it fails. Nothing is trained where ``go_on()`` says after
        the proposals that nothing more may start (as :meth:`evaluate`)."""
        opened: list[Opened] = []
        for design in designs:
            pending = np.array([o.u for o in opened], np.float64)
            try:
                opened.append(self.restored.pop(design, None) or self.begin(design, pending))
            except SpaceExhaustedError:  # a smaller batch, unless not even one is left
                if not opened:
                    raise
                break
        if go_on is not None and not go_on():
            return []
        for o in opened:
            self.in_flight[o.design] = o
        count = len(opened)
        failed: dict[int, str] = {}

        def reporter(o: Opened):
            inner = _Reporter(self, o.training)

            def report(step: Any, value: Any, checkpoint: Any = None, seconds=None, last=False):
                try:
                    return inner(step, value, seconds=seconds, last=last)
                except ValueError as error:  # this design fails; the others go on
                    failed[o.design] = failure_text(error)
                    raise StopTraining(str(error)) from None

            return report

        try:
            returned = list(batch([dict(o.point) for o in opened], [reporter(o) for o in opened]))
            if len(returned) != count:
                raise ValueError(f"batch returned {len(returned)} values for {count} designs")
        except KeyboardInterrupt:
            raise
        except BaseException as raised:  # (StopTraining escaping a batch fails it too)
            why = failure_text(raised)
            failed.update({o.design: failed.get(o.design, why) for o in opened})
            returned = [None] * count
        for o, value in zip(opened, returned, strict=True):
            if o.design in failed:
                o.training.returned = ("failed", None, failed[o.design])
            elif o.training.over not in (None, *COMPLETE):
                o.training.returned = ("stopped", None, None)
            else:
                o.training.returned = outcome(value, o.training.curve)
        self.save_progress()  # killed while journalling them, the resume journals the rest
        return [self.end(o, *o.training.returned) for o in opened]

    def begin(self, design: int, training=None) -> Opened:
        """Design ``design``'s proposal and its training's scheduler state (``training``:
        the unit points of designs in training elsewhere)."""
        u, info = self.propose(design, training)
        training = self._start(design)
        return Opened(design, u, self.space.from_unit(u), info, training, time.perf_counter())

    def end(self, opened: Opened, status: str, y, error: str | None, charged=None) -> dict:
        """Journal the ended training's record (``y`` defaults to its last value;
        ``charged``: steps trained, kept when more than its last step)."""
        curve = opened.training.curve
        if charged is None and opened.training.charged > (curve[-1][0] if curve else 0):
            charged = opened.training.charged  # (a repeat, or the step it diverged at)
        if status != "failed" and y is None:
            y = curve[-1][1]
        if status == "failed" and not (charged or opened.training.charged):
            # Failing before its first step still costs one, so a run whose trainings all
            # fail at once spends its budget and ends instead of proposing forever.
            charged = 1
            self.spent += 1
        opened.training.closed = True
        info = dict(opened.info)
        record = {
            "iteration": len(self.history),  # the journal's line: trainings end out of order
            "proposal": opened.design,
            "phase": info.pop("phase"),
            "x": opened.point,
            "u": np.asarray(opened.u).tolist(),
            "y": float(y) if status != "failed" else None,
            "status": status,
            "error": error,
            "seconds": time.perf_counter() - opened.started,
            "diagnostics": {**info, "bracket": opened.training.bracket}
            | ({} if charged is None else {"charged": int(charged)}),
            "curve": curve,
        }
        self.history.append(record)
        self.in_flight.pop(opened.design, None)
        if self.journal is not None:
            self.journal.append(record)
            self.save_progress()
            if status != "ok":  # never continued again; a complete one's is its model
                drop_checkpoint(self.journal, opened.design)
        return record


class Opened(NamedTuple):
    design: int
    u: np.ndarray
    point: dict[str, Any]
    info: dict[str, Any]
    training: _Training
    started: float


def outcome(returned: Any, curve: list) -> tuple[str, float | None, str | None]:
    """``(status, y, error)`` of a training that returned ``returned`` after ``curve``
    (a training that reported no step failed: the scheduler had nothing to decide on)."""
    if not curve:
        return (
            "failed",
            None,
            (
                f"train returned {short_repr(returned)} without reporting a step: call "
                "report(step, value) after each step (epoch)"
            ),
        )
    if (y := finite_number(returned)) is not None:
        return "ok", y, None
    if returned is not None:
        return "failed", None, f"train returned {returned!r}, not a finite number"
    return "ok", None, None  # its last reported value


def _locked(method):
    """``method`` under the instance's lock."""

    @functools.wraps(method)
    def under_lock(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return under_lock


class Trainings:
    """Step-wise runs by ask and tell, for training loops bojax does not call.

        trainings = Trainings(space, max_step=52, early_stopping="asha", out="run")
        while not trainings.done:
            design, point = trainings.ask()
            for epoch in range(1, 53):
                loss = train_one_epoch(point)
                if not trainings.tell(design, epoch, loss):
                    break  # stopped by the scheduler (or the step budget)
            trainings.finish(design)
        trainings.close()

    Several trainings may be open at once (your own workers, threads included: ``ask``,
    ``tell`` and ``finish`` hold a lock): each ``ask`` proposes with the open designs as
    pending points, and ``tell`` decides at once from the values
    recorded so far. One at a time, it makes :func:`bojax.minimize`'s proposals,
    decisions and records (``history``). ``finish(design, value)`` takes the training's
    final value (default: its last reported one) or ``error=`` for a failed training.
    Hyperband, ASHA and ``none``; freeze-thaw, which pauses and resumes trainings itself,
    runs through :func:`bojax.minimize`.

    With ``out`` the run is journalled there as :func:`bojax.minimize` journals one
    (``bojax show`` and ``bojax plot`` read it; the summary is written once the budget
    is spent and every training finished), and the folder is held until :meth:`close`
    (or the end of a ``with`` block, or of the process). ``resume=True`` continues the
    run journalled in ``out``: trainings that had ended (told False) but were not
    finished are journalled as ``finish(design)`` would have, and the first ``ask``
    calls hand out again, with their points, the trainings that were still going, to be
    trained from their first step."""

    def __init__(
        self, space: Space, settings: Settings | None = None, *, out=None, resume: bool = False,
        **overrides: Any,
    ):  # fmt: skip
        settings = (Settings() if settings is None else settings).replace(**overrides)
        # Limits on how trainings run: your loop starts, times and ends them here.
        driven = {"q": (None, 1), "time_budget": (None,), "max_failures": (None,),
                  "isolate": (False,), "timeout": (None,)}  # fmt: skip
        named = [name for name, unset in driven.items() if getattr(settings, name) not in unset]
        if named:
            raise SettingsError(
                f"{', '.join(named)}: for runs bojax drives (minimize); with Trainings your "
                "own loop starts, times and ends the trainings (open as many as you like)"
            )
        check_stepwise(settings, None)
        if settings.early_stopping == "freeze-thaw":
            raise SettingsError("freeze-thaw pauses and thaws trainings: run it by minimize")
        if resume and out is None:
            raise SettingsError("resume continues the run journalled in a folder: pass out=")
        self._started = time.perf_counter()
        self._lock = threading.RLock()  # one call at a time: workers' threads share a run
        self._journal = Journal(out) if out is not None else None
        self._held = contextlib.ExitStack()  # the folder's lock, until close()
        history = []
        if self._journal is not None:
            self._held.enter_context(self._journal.lock())
            try:
                history = open_journal(self._journal, space, settings, resume)
            except BaseException:
                self._held.close()
                raise
        self._run = StepRun(None, space, settings, self._journal, history, False)
        # A killed run's trainings still going stay in self._run.restored (and in
        # pending.json) until the first asks hand them out again, from step 1.
        self._open: dict[int, Opened] = {}
        self._stopped: set[int] = set()
        numbered = [int(r.get("proposal", j)) for j, r in enumerate(history)]
        numbered += [*self._run.restored]
        self._next = max(numbered, default=-1) + 1
        self._summarise()  # a finished run resumed: its summary stands again

    @property
    def done(self) -> bool:
        """Whether the step budget is spent."""
        return self._run.spent >= self._run.budget

    @property
    def spent(self) -> int:
        return self._run.spent

    @property
    def history(self) -> list[dict[str, Any]]:
        return self._run.history

    @property
    def training(self) -> list[int]:
        """The designs asked for and not finished."""
        return sorted(self._open)

    @_locked
    def ask(self) -> tuple[int, dict[str, Any]]:
        """``(design, point)`` of the next training to start."""
        if self.done:
            raise SettingsError(f"the step budget ({self._run.budget}) is spent")
        if self._run.restored:  # a killed run's first, from step 1
            opened = self._run.restored.pop(min(self._run.restored))
        else:
            pending = [opened.u for opened in self._open.values()]
            opened = self._run.begin(self._next, np.array(pending, np.float64))
            self._next += 1
        self._open[opened.design] = self._run.in_flight[opened.design] = opened
        self._run.save_progress()
        return opened.design, dict(opened.point)  # yours to change: the record keeps its own

    @_locked
    def tell(self, design: int, step: int, value: float, last: bool = False) -> bool:
        """Record ``value`` at ``step``; whether the training goes on (False once it is
        stopped, or complete at ``max_step`` or, with ``last=True``, at this step: your
        loop ended it by its own rule). A number that is not finite (NaN, inf: a diverged
        training) fails the training (False); a value that is no number at all (text,
        None, a bool, a list) or a step not above the last is a :class:`DataError`."""
        opened = self._opened(design)
        if design in self._stopped:
            raise SettingsError(
                f"design {design} is stopped or complete: finish it, then ask again"
            )
        training = opened.training
        try:
            going = _Reporter(self._run, training)(step, value, last=last)
        except StopTraining:
            self._stopped.add(design)
            return False
        except ValueError as error:
            if finite(value):
                raise DataError(str(error)) from None
            number = unwrapped(value)
            if isinstance(number, bool) or not isinstance(number, numbers.Real):
                raise DataError(  # the caller's slip, not the training's: nothing is lost
                    f"tell({design}, {step!r}, value): value must be a number (NaN or inf "
                    f"fails the training), got {short_repr(value)}"
                ) from None
            training.over, training.error = "failed", failure_text(error)  # as minimize has it
            self._stopped.add(design)
            self._run.save_progress()  # ended: a resume journals it as it ended
            return False
        if not going:  # complete: at max_step, or its last step
            if training.over is None:
                training.over = "max_step"
                self._run.save_progress()
            self._stopped.add(design)
            return False
        return True

    @_locked
    def finish(self, design: int, value: float | None = None, error: str | None = None) -> dict:
        """End design ``design``'s training; its journal record."""
        opened = self._opened(design)
        training = opened.training
        error = error or training.error
        if error is not None:
            status, y = "failed", None
        elif design in self._stopped and training.over not in COMPLETE:
            status, y = "stopped", None
        else:
            status, y, error = outcome(value, training.curve)
            if not training.curve:  # in Trainings' words, not a step-wise objective's
                error = (
                    f"finish({design}) came with no step told: call tell(design, step, "
                    "value) after each step (epoch) first"
                )
            elif error is not None:
                error = f"finish({design}, value={value!r}): the value is not a finite number"
        del self._open[design]
        self._stopped.discard(design)
        record = self._run.end(opened, status, y, error)
        self._summarise()
        return record

    def _summarise(self) -> None:
        """Write the run's summary once its budget is spent and no training is open."""
        if self._journal is not None and self.done and not (self._open or self._run.restored):
            seconds = time.perf_counter() - self._started
            with contextlib.suppress(ObjectiveError):  # every training failed: said there
                finished(self._journal, self.history, self.spent, seconds, None)

    def close(self) -> None:
        """Release the run folder (a later ``Trainings(..., resume=True)`` continues it)."""
        self._held.close()

    def __enter__(self) -> Trainings:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _opened(self, design: int) -> Opened:
        if design not in self._open:
            raise SettingsError(f"design {design} is not training (ask for one first)")
        return self._open[design]


class _FreezeThawRun:
    """A freeze-thaw run (:mod:`bojax.bo.freezethaw`): one segment of training per
    record. Each decision here first keeps the chains it starts from in ``sampler.json``,
    so a resume fits at most the one decision journalled since, and its chains are those
    of the uninterrupted run (without the file it replays every decision's fit). A
    segment trained here (not on an executor or in a process of its own) is journalled
    as it reports (``pending.json`` and the design's checkpoint), so a resumed run
    finishes the segment a killed one was training, from its last checkpoint (or its
    first step), and journals it as the uninterrupted run would."""

    def __init__(self, train, space: Space, settings: Settings, journal, history):
        from bojax.bo import freezethaw

        self.train, self.space, self.settings = train, space, settings
        self.journal, self.history = journal, history
        self.budget = step_budget(settings)
        self.model = freezethaw.FreezeThaw(space, settings)
        self.designs = []
        start = self._saved_chains(len(history))
        for k, record in enumerate(history):
            if k >= start and record["phase"] != "initial":
                self.model.decide(self.designs, k)  # the fit this decision made
            freezethaw.add_record(self.designs, record, space)
        self.designs = freezethaw.replay(history, space, journal)
        self.spent = sum(int(r["diagnostics"].get("charged", 0)) for r in history)
        self.in_flight = self._in_flight()

    def _saved_chains(self, done: int) -> int:
        """Load the chains ``sampler.json`` kept for decision ``k <= done`` (what replaying
        records ``0 .. k - 1`` fits); ``k``, where the replay of the fits starts. 0 when it
        is missing, from the future or not this run's: it is a cache, and replaying every
        fit reaches the same chains."""
        saved = None if self.journal is None else self.journal.load_sampler(done)
        if saved is None:
            return 0
        try:
            self.model.unpack_chains(saved)
        except Exception:  # a tampered or foreign file: any failure to unpack means replay
            return 0
        return saved["iteration"]

    def _in_flight(self) -> dict[str, Any] | None:
        """The ``pending.json`` entry of the segment a killed run was training (the next
        record's), or None."""
        if self.journal is None:
            return None
        for entry in self.journal.load_pending(self.space):
            info = entry["info"]
            if int(entry["proposal"]) != self.next_proposal():
                continue  # killed between the record and the pending file's update
            design, curve = info.get("design"), entry.get("curve", [])
            if not (
                is_count(design) and design <= len(self.designs) and is_count(info.get("until"))
                and curve_ok(curve, self.settings.max_step) and is_count(entry.get("charged"))
                and _seconds_ok(entry.get("seconds", 0.0))
            ):  # fmt: skip
                raise JournalError(
                    f"{self.journal.pending_path}: a freeze-thaw segment needs 'design' (at "
                    f"most {len(self.designs)}) and 'until' in its info, a 'curve' of [step, "
                    f"value] pairs within max_step, a whole number 'charged' and 'seconds' "
                    f"a finite number >= 0 where given"
                )
            return entry
        return None

    def next_proposal(self) -> int:
        """The next decision's number: past every journalled one (a parallel run's records
        are in the order its segments ended, and a segment lost with its driver leaves a
        gap)."""
        numbers = (int(r.get("proposal", i)) for i, r in enumerate(self.history))
        return max(numbers, default=-1) + 1

    def _continued(self, entry: dict[str, Any]):
        """The killed run's decision, its steps so far applied to the design (curve,
        charged steps and their seconds, the checkpoint saved with them): ``(decision,
        curve, charged, seconds)``."""
        from bojax.bo import freezethaw

        info = dict(entry["info"])
        j, until, phase = int(info.pop("design")), int(info.pop("until")), info.pop("phase")
        u = np.asarray(entry["u"], np.float64)
        if j == len(self.designs):
            self.designs.append(freezethaw.Design(u, self.space.from_unit(u)))
        design = self.designs[j]
        curve = [[int(step), float(value)] for step, value in entry["curve"]]
        if curve and curve[0][0] <= design.step:
            raise JournalError(
                f"{self.journal.pending_path}: the segment's curve starts at step "
                f"{curve[0][0]}, not past design {j}'s step {design.step}"
            )
        design.curve.extend(curve)
        charged, seconds = int(entry["charged"]), float(entry.get("seconds", 0.0))
        resumes = None  # the checkpoint the segment continues from
        if takes(self.train, "checkpoint"):
            resumes = design.checkpoint = load_checkpoint(self.journal, j, design.step)
        if design.step < min(until, self.settings.max_step):  # (else killed at its end)
            kept = kept_charge(charged, resumes, design.step)
            charged, seconds = kept, seconds * kept / charged if charged else 0.0
        self.spent += charged
        return freezethaw.Decision(j, u, until, phase, info), curve, charged, seconds

    def _journalled(self, k: int, decision, before: list, charged: int):
        """``on_report`` for decision ``k``'s segment: its steps so far to
        ``pending.json``, then its newest checkpoint to the design's file."""
        if self.journal is None:
            return None
        saved: list = [None]  # the checkpoint last written (compared by identity)
        written: list = [None]  # when pending.json was last written (None: not yet)

        def save(report) -> None:
            # As a StepRun's: the segment's first report (its decision), checkpoints and
            # its end, else at most every PROGRESS_SECONDS (rewriting the curve at each
            # report was quadratic in it). Steps past the last write are trained again
            # on resume, from the checkpoint written with them, as after a SIGKILL.
            ending = report.complete or report.last >= report.until
            if not (written[0] is None or ending or report.checkpoint is not saved[0]
                    or time.monotonic() - written[0] >= PROGRESS_SECONDS):  # fmt: skip
                return
            written[0] = time.monotonic()
            design = self.designs[decision.design]
            # The segment's end as the budget cut it (report.until), so a resumed run
            # trains to where this one would have.
            info = {"phase": decision.phase, "design": decision.design,
                    "until": report.until, **decision.diagnostics}  # fmt: skip
            self.journal.save_pending([{
                "proposal": k, "u": np.asarray(decision.u).tolist(), "x": design.point,
                "info": info, "curve": before + report.curve,
                "charged": charged + report.charged, "seconds": report.seconds,
            }])  # fmt: skip
            if report.checkpoint is not None and report.checkpoint is not saved[0]:
                save_checkpoint(self.journal, decision.design, report.checkpoint)
                saved[0] = report.checkpoint

        return save

    def next_designs(self, count: int) -> list[int]:
        """Decision numbers (one per record; the designs are numbered by the model)."""
        return list(range(len(self.history), len(self.history) + count))

    def evaluate(self, k: int, go_on: Callable[[], bool] | None = None) -> dict[str, Any] | None:
        """Take decision ``k`` and train its segment; None, training nothing, where
        ``go_on()`` says after the decision that nothing more may start (its fit outlasted
        the time budget: a resume decides again)."""
        from bojax.bo import freezethaw

        tick = time.perf_counter()
        packed = self.model.packed_chains()
        if self.journal is not None and packed is not None:  # so a resume need not replay
            self.journal.save_sampler(k, packed)
        decision = self.model.decide(self.designs, k)  # on resume, the fit it made
        if self.in_flight is None and go_on is not None and not go_on():
            return None
        before, charged, seconds = [], 0, 0.0
        if self.in_flight is not None:
            decision, before, charged, seconds = self._continued(self.in_flight)
            self.in_flight = None
        proposal = self.next_proposal()
        hook = self._journalled(proposal, decision, before, charged)
        record = {"iteration": k, "proposal": proposal}
        step = self.designs[decision.design].step if before else 0
        if step >= min(decision.until, self.settings.max_step):  # killed at its end
            from bojax.bo.segments import Segment

            status = "complete" if step >= self.settings.max_step else "paused"
            ended = Segment([], 0, status, seconds=seconds)
            record.update(freezethaw.close_segment(self, decision, self.designs, ended, 0.0))
        else:  # its seconds count on from the killed run's, in the same order
            record.update(freezethaw.train_segment(self, decision, self.designs, hook, seconds))
        record["curve"] = before + record["curve"]
        record["diagnostics"]["charged"] += charged
        freezethaw.add_cost(self.designs[decision.design], record)
        record["decision_seconds"] = decision.seconds = (
            time.perf_counter() - tick - record["seconds"]
        )
        self.history.append(record)
        if self.journal is not None:
            self.journal.append(record)
            self.journal.save_pending([])  # the segment is journalled: none in flight
        return record


def save_checkpoint(journal: Journal, design: int, checkpoint: Checkpoint) -> None:
    """Pickle design ``design``'s checkpoint (its step and state) to ``checkpoints/``
    (atomically: a run killed mid-write keeps the previous one). A state that cannot be
    pickled (one holding a lock, an open file) is not saved, with a warning: the run goes
    on with it in memory, and a resume trains that design again from its last saved
    checkpoint, or its first step."""
    payload, why = pickled(checkpoint)
    if payload is None:
        warnings.warn(
            f"a training's checkpoint cannot be saved to {journal.folder} ({why}); a resume "
            "trains such a design again from its last saved checkpoint, or its first step",
            stacklevel=2,
        )
        return
    folder = Path(journal.folder) / "checkpoints"
    folder.mkdir(exist_ok=True)
    partial = folder / f"{design}.pkl.tmp"
    partial.write_bytes(payload)
    partial.replace(folder / f"{design}.pkl")


def drop_checkpoint(journal: Journal, design: int) -> None:
    """Remove design ``design``'s checkpoint file, once its training is journalled
    stopped or failed: no resume continues it, and a run of thousands of designs kept
    one file (a network's weights) per design."""
    with contextlib.suppress(OSError):
        (Path(journal.folder) / "checkpoints" / f"{design}.pkl").unlink(missing_ok=True)


def load_checkpoint(journal: Journal, design: int, recorded: int) -> Checkpoint | None:
    """Design ``design``'s saved checkpoint, or None: also for one past the ``recorded``
    curve's last step (saved just before a kill, the steps between never journalled), so
    the training starts again. A bare state, as journals before checkpoints kept their
    step, resumes at the curve's last step. One that cannot be read back (a truncated
    file, a class since renamed) is also None, with a warning: the training starts again,
    and nothing the journal holds is lost."""
    import cloudpickle

    path = Path(journal.folder) / "checkpoints" / f"{design}.pkl"
    if not path.exists():
        return None
    try:
        saved = cloudpickle.loads(path.read_bytes())
        saved = saved if isinstance(saved, Checkpoint) else Checkpoint(None, saved)
        if not (saved.step is None or is_count(saved.step)):
            raise ValueError(f"its step is {saved.step!r}, not a whole number")
    except Exception as error:  # unpickling runs arbitrary code: any failure means unusable
        warnings.warn(
            f"{path} cannot be read back ({failure_text(error)}); design {design}'s "
            "training starts again from its first step",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return None if saved.step is not None and saved.step > recorded else saved


@contextlib.contextmanager
def remembered(holder: Any):
    """Keep the first refused report's reason on ``holder`` (its ``refused``): a training
    that catches the ValueError (an ``except Exception`` that logs and goes on) fails all
    the same, instead of ending ``ok`` with the step missing from its curve (review)."""
    try:
        yield
    except ValueError as error:
        holder.refused = holder.refused or failure_text(error)
        raise


def check_step(step: Any, last: int) -> int:
    """A reported step as an int: a whole number (an int, or a float such as 3.0) above
    the training's ``last`` (ValueError: the training fails, saying why)."""
    step = unwrapped(step)
    if isinstance(step, float | np.floating) and float(step).is_integer():  # 3.0, not 3.5
        step = int(step)
    if not (is_count(step) and step > last):
        raise ReportMisuse(
            f"report(step, value): step must be a whole number above the last one "
            f"({last}), got {step!r}"
        )
    return int(step)


def past_max_step(step: int, max_step: int, reached: int) -> None:
    """A report at ``step`` past ``max_step``, once the curve ``reached`` it: a loop that
    ran on is complete (the caller stops it). Before that, ValueError: the training
    skipped its last steps (an epoch count off by one?), so it is not complete."""
    if reached < max_step:
        raise ValueError(
            f"step {step} is past max_step = {max_step}, and the training reported only up "
            f"to step {reached}: report every step up to max_step (is max_step right?)"
        )


def diverged(value: Any) -> bool:
    """Whether a reported value is a number, NaN or inf: the training ran the step and
    diverged, so the step is charged before the training fails (else a design that always
    diverged at step ``k`` cost ``k - 1``; review CW)."""
    plain = unwrapped(value)
    number = isinstance(plain, numbers.Real) and not isinstance(plain, bool)
    return number and finite_number(value) is None


def checked_value(value: Any) -> float:
    """A reported value as a float; ValueError (the training fails) unless finite."""
    y = finite_number(value)
    if y is None:
        raise (ValueError if diverged(value) else ReportMisuse)(
            f"report(step, value): value must be a finite number, got {short_repr(value)}"
        )
    return y


def checked_seconds(seconds: Any) -> float | None:
    """A reported step's seconds (``report(..., seconds=s)``) as a float, None when not
    given; ValueError (the training fails) unless a finite number >= 0."""
    if seconds is None:
        return None
    s = finite_number(seconds)
    if s is None or s < 0:
        raise ValueError(
            f"report(step, value, seconds=s): s must be a finite number >= 0 (the step's "
            f"cost), got {seconds!r}"
        )
    return s


def finite(value: Any) -> bool:
    return finite_number(value) is not None


def check_stepwise(settings: Settings, executor: Any, batched: bool = False) -> None:
    """A step-wise run needs ``max_step``; q > 1 needs an executor or a batch method."""
    if settings.max_step is None:
        raise SettingsError(
            "the objective takes a report parameter (a step-wise training): set max_step, "
            "the steps (epochs) of a full training"
        )
    if settings.maximize or settings.objectives is not None:
        raise SettingsError(
            "a step-wise run minimises one reported value (report the error, or the negated "
            "score); maximize and objectives are for plain objectives"
        )
    if settings.cost_aware and settings.early_stopping != "freeze-thaw":
        raise SettingsError(
            "cost_aware in a step-wise run prices freeze-thaw's decisions in seconds; "
            f"early_stopping={settings.early_stopping!r} has no decision to price: use "
            "early_stopping='freeze-thaw' or leave cost_aware off"
        )
    if executor is None and settings.batch > 1 and settings.early_stopping == "freeze-thaw":
        raise SettingsError(
            "freeze-thaw trains q > 1 designs at once on an executor only: pass executor= "
            "(a thread or process pool, a Dask client; --workers or --scheduler on the "
            "command line)"
        )
    if executor is None and settings.batch > 1 and not batched:
        raise SettingsError(
            "q > 1 trains several designs at once: on an executor (pass executor=, a "
            "thread or process pool or a Dask client; --workers or --scheduler on the "
            "command line), or in one call of the objective's batch(points, reports) "
            "method (obj.train_batch for a method obj.train)"
        )


def minimize_steps(
    train: Callable[..., Any],
    space: Space,
    settings: Settings,
    *,
    executor: Any = None,
    out=None,
    resume: bool = False,
    progress: bool = True,
):
    """Minimise the value a step-wise ``train(point, report)`` reports, under the run's
    scheduler, in ``step_budget`` steps (:func:`bojax.minimize` calls this for an
    objective with a ``report`` parameter). With an ``executor`` (``q`` trainings at
    once, default its workers) or ``isolate``/``timeout`` the trainings run as segments
    between milestones (:mod:`bojax.bo.segments`). Returns a :class:`bojax.bo.driver.Result`
    whose best is the best design trained to the end (the best stopped one while none
    was), with ``steps`` the steps spent."""
    if (why := unbindable_train(train)) is not None:
        raise ObjectiveError(f"a step-wise objective is called as train(point, report): {why}")
    if executor is not None and (why := unsendable(train, as_executor(executor))) is not None:
        raise ObjectiveError(f"the objective cannot be sent to the executor's workers: {why}")
    batch = batch_of(train) if executor is None and settings.batch > 1 else None
    check_stepwise(settings, executor, batched=batch is not None)
    journal = Journal(out) if out is not None else None
    started = time.perf_counter()
    lock = journal.lock() if journal is not None else contextlib.nullcontext()
    with lock:
        history = open_journal(journal, space, settings, resume, objective_name(train))
        if settings.early_stopping == "freeze-thaw":
            run = _FreezeThawRun(train, space, settings, journal, history)
        else:
            run = StepRun(train, space, settings, journal, history, progress, batch is None)
        limits = Limits(run, settings, started)
        before = (len(history), run.spent)  # what a resume found
        with _StepProgress(progress, run) as bar:
            if executor is not None or (settings.isolated and isinstance(run, StepRun)):
                from bojax.bo.segments import pooled

                pooled(run, executor, limits).loop(bar)
            elif batch is not None:
                while run.spent < run.budget and limits.why() is None:
                    # No more designs than steps left: each costs at least its first step.
                    count = min(settings.q, run.budget - run.spent)
                    with limits.exhaustion():
                        designs = run.next_designs(count)
                        for record in run.evaluate_batch(designs, batch, limits.allows):
                            bar.update(record)
            else:
                while run.spent < run.budget and limits.why() is None:
                    with limits.exhaustion():  # (freeze-thaw: once none is left to thaw)
                        record = run.evaluate(run.next_designs(1)[0], limits.allows)
                        if record is not None:
                            bar.update(record)
        ended = limits.why() if run.spent < run.budget else None  # the loops end at the budget
        idle = None
        if before[0] and before == (len(history), run.spent):  # a resume that trained nothing
            idle = (
                f"the run's step budget ({run.budget}) was spent before it; pass a larger "
                "step_budget (on the command line, more --iterations) to go on"
                if run.spent >= run.budget
                else "it stopped at once, for the reason given before"
            )
        seconds = time.perf_counter() - started
        return finished(journal, history, run.spent, seconds, ended, idle)


def open_journal(
    journal: Journal | None, space: Space, settings: Settings, resume: bool, objective=None
):
    """The records of the step-wise run journalled in ``journal`` (checked against this
    run's header and settings; ``objective``, its name, only warned about) with
    ``resume``; else a fresh journal, and no records."""
    if journal is None:
        return []
    header = run_header(space, settings, objective)
    if not (resume and journal.exists()):
        journal.start(header)
        return []
    journal.check(header)
    history = journal.read(space=space)  # (each record's curve checked there)
    designs = 0  # freeze-thaw: designs numbered so far
    for number, record in enumerate(history):
        if settings.early_stopping == "freeze-thaw":
            design = record["diagnostics"].get("design")
            # A parallel run's records come in the order segments end, and its driver's
            # death loses the first segments in flight, so design numbers may skip
            # ahead, by no more than a run has in flight.
            most = designs + MOST_IN_FLIGHT
            if not (is_count(design) and design <= most):
                raise JournalError(
                    f"{journal.records_path}:{number + 1}: a freeze-thaw record needs "
                    f"diagnostics 'design', a whole number up to {most}, got {design!r}"
                )
            designs = max(designs, design + 1)
    journal.reopen()
    journal.keep_options(header)
    return history


def finished(journal: Journal | None, history: list, spent: int, seconds: float, ended, idle=None):
    """The :class:`~bojax.bo.driver.Result` of a step-wise run that spent ``spent`` steps
    (``ended``: why it stopped before its budget), also written to the journal's
    summary; :class:`ObjectiveError` when every training failed (``idle``: why a resume
    trained nothing, said with it: the journalled error is not news; review CJ)."""
    from bojax.bo.driver import Result

    best = stepwise_best(history)
    if best is None:
        if history:
            why = f"every training failed ({len(history)}); last error: {history[-1]['error']}"
        else:  # (an executor that ran nothing, or a time budget spent before any ended)
            why = "no training ended"
        idle = f". This call trained nothing: {idle}" if idle else ""
        error = ObjectiveError(why + (f"; {ended}" if ended else "") + idle)
        if journal is not None:
            journal.write_failed_summary(history, error)
        raise error
    # Designs trained, not freeze-thaw's segments (a record each).
    evaluations, failures = design_counts(history) or (
        len(history),
        sum(r["status"] == "failed" for r in history),
    )
    result = Result(
        best["x"], best["y"], history, evaluations, failures, seconds, ended, steps=spent
    )
    if journal is not None:
        journal.write_summary(
            {k: v for k, v in result.__dict__.items() if k != "history" and v is not None}
        )
    return result


class Limits:
    """What ends a step-wise run before its budget is spent: its ``time_budget``
    (:mod:`bojax.bo.deadline`) or ``max_failures`` failed trainings (or segments)."""

    def __init__(self, run, settings: Settings, started: float):
        self.run, self.max_failures = run, settings.max_failures
        self.deadline = Deadline(settings.time_budget, started)
        self.first = len(run.history)  # records journalled before this call
        self.refused: str | None = None  # why the executor took no more work, once it did

    @contextlib.contextmanager
    def exhaustion(self):
        """A space with no new point left ends the run there, as it ends a plain run
        (every design of a small discrete space trained), not with an error."""
        try:
            yield
        except SpaceExhaustedError as error:
            self.refused = str(error)

    def allows(self) -> bool:
        """Whether a training or segment may start now (asked again after a proposal or
        decision: a fit that outlasts the time budget must not start what it chose)."""
        return self.why() is None

    def why(self) -> str | None:
        """Why ``run`` starts nothing more, or None while it may go on."""
        if self.refused is not None:
            return self.refused
        history = self.run.history
        if self.deadline.reached(len(history) - self.first):
            return self.deadline.why(f"{self.run.spent} steps of {self.run.budget}")
        if _misused(history[i]["error"] or "" for i in range(self.first, len(history))):
            return (
                "every training so far called report wrongly (its error says how), so no "
                "further training is started: the objective's code, not its designs"
            )
        if self.max_failures is not None:
            failed = sum(r["status"] == "failed" for r in history)
            if failed >= self.max_failures:
                return f"{failed} trainings failed (max_failures={self.max_failures})"
        return None


def _misused(errors) -> bool:
    """Whether ``errors`` (those of a call's records, in order) say that the objective
    calls report wrongly: each one a :class:`ReportMisuse`, and either one of them a step
    or a missing value (no design makes those right) or three of them a value that is not
    a number (one design may lack its metric). Stops at the first other error."""
    count, whatever_the_design = 0, False
    for error in errors:
        if not error.startswith("ReportMisuse: "):
            return False
        count += 1
        whatever_the_design = whatever_the_design or "value must be" not in error
    return whatever_the_design or count >= 3


def _seconds_ok(seconds: Any) -> bool:
    try:
        return checked_seconds(seconds) is not None
    except ValueError:
        return False


class _StepProgress:
    """A live line: steps spent of the budget, designs, best complete value."""

    def __init__(self, enabled: bool, run: StepRun):
        self.enabled, self.run = enabled, run

    def __enter__(self):
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.progress = Progress(
                TextColumn("[bold]steps"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("designs {task.fields[designs]}  best {task.fields[best]}"),
            )
            self.progress.__enter__()
            self.task = self.progress.add_task(
                "steps", total=self.run.budget, completed=self.run.spent, designs=0, best="-"
            )
        return self

    def update(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        done = [r["y"] for r in self.run.history if r["status"] == "ok"]
        best = f"{min(done):.6g}" if done else "-"
        # freeze-thaw journals a record per segment: count its designs, not its records
        designs = (design_counts(self.run.history) or (len(self.run.history),))[0]
        self.progress.update(
            self.task, completed=min(self.run.spent, self.run.budget), designs=designs, best=best,
        )  # fmt: skip

    def __exit__(self, *exc):
        if self.enabled:
            self.progress.__exit__(*exc)
        return False
