"""The one-call driver :func:`minimize`: sequential, batched, or asynchronous on an executor.

The driver keeps up to ``q`` evaluations in flight. Whenever fewer are running it asks
the loop for enough new points (:func:`bojax.bo.loop.ask_batch`, with the running ones as
pending fantasies) and hands them to the executor; as each one finishes it is told to
the loop and journalled. ``executor`` is anything with ``submit(fn, *args)`` returning a
:class:`concurrent.futures.Future` (a ``ThreadPoolExecutor``, a ``ProcessPoolExecutor``
with the ``spawn`` context, a Dask ``Client`` or its ``get_executor()``); without one,
points are evaluated in the driver's process, one after another, and ``q = 1`` is the
classic sequential loop, bit for bit.

A failed evaluation (the objective raised, or returned NaN, inf or a non-number) is
journalled with its error and the run goes on: the loop learns where evaluations fail
(:mod:`bojax.surrogates.classifier`). Two optional limits end a run early, each saying
why in ``Result.stopped``: ``max_failures`` failed evaluations, or a probability of
success below ``min_success_probability`` everywhere the acquisition optimiser looked.
A ``time_budget`` (seconds) stops the issuing of new points once spent
(:mod:`bojax.bo.deadline`); those running finish. So does an objective whose every
outcome so far is of another kind than the run declares (a dict of metrics without
``objectives``, or one number with them): that is the set-up, and each evaluation more
would fail the same way.

Only the driver writes the journal: workers return ``(y, error)``. Points handed out and
not yet finished are kept in the journal's ``pending.json``, each written there as
started before it starts, so a driver killed with evaluations in flight re-issues
exactly those on ``resume``. An evaluation lost to the executor (a killed worker, a
broken pool) or to the driver's death is submitted again up to ``retries`` times and
then recorded as failed: a design that kills the process running it is not proposed
forever. The objective's own errors are recorded at once, never retried. With
``isolate`` (or a ``timeout``) every evaluation runs in a fresh process
(:mod:`bojax.bo.isolation`), so a hang or a crash fails only that evaluation. A run
holds its folder's lock (:meth:`~bojax.bo.journal.Journal.lock`) while it runs. With a
``timeout`` the driver never waits forever either: an evaluation the executor has not
answered within :func:`bojax.bo.isolation.answer_limit` of when it could start (once
enough earlier ones came back, beyond the executor's workers) counts as lost.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import math
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from bojax.bo import stepwise, trust
from bojax.bo.deadline import Deadline
from bojax.bo.evaluation import (
    Inline,
    Objective,
    SeveralValues,
    Unusable,
    as_executor,
    concurrency,
    evaluate,
    evaluate_batch,
    failure_text,
    first_done,
    refused,
    short_repr,
    unsendable,
)
from bojax.bo.interrupts import sigterm_as_interrupt
from bojax.bo.isolation import AnswerClock, evaluate_isolated
from bojax.bo.journal import Journal, objective_name, run_header
from bojax.bo.loop import BOState, ask_batch, fit_models, init, model_based
from bojax.bo.loop import tell as tell_state
from bojax.bo.settings import Settings
from bojax.errors import (
    JournalError,
    ObjectiveError,
    SettingsError,
    SpaceExhaustedError,
    is_count,
    warn_user,
)
from bojax.spaces import Space

# ``_Run.stopped`` while the evaluations running at the time budget's end finish.
TIMED_OUT = "time_budget spent"

# The longest single wait for the executor; the loop waits again after it.
MAX_WAIT = 86400.0


@dataclass(frozen=True)
class Result:
    """Outcome of :func:`minimize`: the best successful evaluation and the full history."""

    best_point: dict[str, Any]
    best_value: float
    history: list[dict[str, Any]]
    evaluations: int  # designs evaluated (freeze-thaw: trainings, not their segments)
    failures: int
    seconds: float
    stopped: str | None = None  # why the run ended before its budget, if it did
    # With several metrics (settings.objectives): best_point/best_value are the feasible
    # evaluation best in the first objective (of all, while none is feasible); the Pareto
    # set (feasible, non-dominated, with every metric), the reference point and the
    # hypervolume after each evaluation.
    pareto: list[dict[str, Any]] | None = None
    reference_point: list[float] | None = None
    hypervolume: list[float] | None = None
    # A step-wise run (bojax.bo.stepwise): the steps (epochs) its trainings spent.
    steps: int | None = None


class Flight(NamedTuple):
    """An evaluation handed out and not yet finished."""

    proposal: int  # issue order, also the source of its randomness
    u: np.ndarray
    point: dict[str, Any]
    info: dict[str, Any]
    attempts: int  # submissions so far
    issued: float  # perf_counter at the start of the ask that proposed it

    def to_json(self) -> dict[str, Any]:
        return {
            "proposal": self.proposal,
            "u": self.u.tolist(),
            "x": self.point,
            "info": {k: v for k, v in self.info.items() if k == "phase" or math.isfinite(v)},
            "attempts": self.attempts,
        }


def _record(
    n: int, flight: Flight, y: float, error: str | None, seconds: float, evaluated: float | None
) -> dict:
    diagnostics = {k: v for k, v in flight.info.items() if k != "phase" and math.isfinite(float(v))}
    return {
        "iteration": n,
        "proposal": flight.proposal,
        "phase": flight.info["phase"],
        "x": flight.point,
        "u": np.asarray(flight.u).tolist(),
        "y": None if error else y,
        "status": "failed" if error else "ok",
        "error": error,
        "seconds": seconds,
        **({} if evaluated is None else {"evaluation_seconds": evaluated}),
        "diagnostics": diagnostics,
    }


def _pack(settings: Settings, state: BOState) -> dict[str, Any]:
    """The chains' positions as JSON: the surrogate's, and the failure classifier's under
    ``"classifier"`` once something failed (absent before, as in older journals)."""
    surrogate, model = state.surrogate, settings.make_surrogate(state.space)
    if surrogate is None:
        packed = {"fits": 0}
    elif settings.metrics is not None:  # one chain per model output
        outputs = [model.pack(s) for s in surrogate]
        packed = {"fits": outputs[0].get("fits", 1), "outputs": outputs}
    else:
        packed = model.pack(surrogate)
    if state.classifier is not None:
        packed["classifier"] = settings.make_failure_model(state.space).pack(state.classifier)
    return packed


def _unpack(settings: Settings, space: Space, saved: dict[str, Any]) -> tuple[Any, Any]:
    """``(surrogate state, classifier state)`` from :func:`_pack`'s output."""
    saved = dict(saved)
    classifier = saved.pop("classifier", None)
    # Adapted to the space, as when fitted: a categorical space's kernel has more parameters.
    model = settings.make_failure_model(space)
    if classifier is not None and model is not None:
        classifier = model.unpack(space.dim, classifier)
    else:
        classifier = None
    if saved["fits"] == 0:
        return None, classifier
    surrogate = settings.make_surrogate(space)

    def unpacked(packed):
        try:
            return surrogate.unpack(space.dim, packed)
        except ValueError:  # past exact_limit, a chain of several became one MAP position
            return trust.local_surrogate(surrogate).unpack(space.dim, packed)

    if settings.metrics is not None:  # (one constrained objective goes local too)
        return tuple(unpacked(s) for s in saved["outputs"]), classifier
    return unpacked(saved), classifier


def _restore(
    state: BOState,
    journal: Journal,
    records: list[dict[str, Any]],
    flights: list[Flight],
    progress: bool = False,
) -> BOState:
    """Rebuild the state after ``records``, replaying at most the fits the file lacks: the
    fit of each ask, made with the records then told (``asked_at``), including the ask
    that proposed the ``flights`` still to finish, so the next proposal starts from the
    chains the uninterrupted run's did. With ``progress`` a bar counts the fits replayed
    (each as long as an ask's fit: a run whose ``sampler.json`` is missing or stale
    replays them all)."""
    start, surrogate_state, classifier_state = _saved_chains(state, journal, len(records))
    state = state._replace(surrogate=surrogate_state, classifier=classifier_state)
    asks = _asks(records, flights)
    n = len(records)

    def replays(n: int) -> bool:  # (model_based: not within the initial design)
        return n >= max(start, state.settings.initial) and (asks is None or n in asks)

    fits = sum(replays(k) for k in range(n)) + bool(flights and replays(n))
    with _Replay(progress and fits > 0, fits) as bar:
        for k, record in enumerate(records):
            if replays(k) and model_based(state):
                state = fit_models(state)  # the fit the ask at k made
                bar.advance()
            state = tell_record(state, record)
        if flights and replays(n) and model_based(state):
            state = fit_models(state)
            bar.advance()
    return state


class _Replay:
    """A bar over the fits a resume replays (rich), or nothing."""

    def __init__(self, enabled: bool, total: int):
        self.enabled, self.total, self.done = enabled, total, 0

    def __enter__(self):
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.progress = Progress(
                TextColumn("[bold]resume[/bold] refitting the models of past asks"),
                BarColumn(),
                MofNCompleteColumn(),
            )
            self.progress.__enter__()
            self.task = self.progress.add_task("replay", total=self.total)
        return self

    def advance(self) -> None:
        self.done += 1
        if self.enabled:
            self.progress.update(self.task, advance=1)

    def __exit__(self, *exc):
        if self.enabled:  # (the total counted asks that fit nothing: every one failed)
            self.progress.update(self.task, total=self.done)
            self.progress.__exit__(*exc)
        return False


def _asks(records: list[dict[str, Any]], flights: list[Flight]) -> set[int] | None:
    """How many evaluations each ask that proposed ``records`` and ``flights`` saw; None
    for a journal older than ``asked_at`` (then one ask per evaluation is assumed, as a
    sequential run makes)."""
    seen = [r.get("diagnostics", {}).get("asked_at") for r in records]
    seen += [f.info.get("asked_at") for f in flights]
    return None if not all(is_count(a) for a in seen) else set(seen)


def tell_record(state: BOState, record: dict[str, Any]) -> BOState:
    """``state`` told a journal ``record``: its point, its value (NaN unless ok) and, for a
    ``cost_aware`` state, its seconds."""
    y = record["y"] if record["status"] == "ok" else math.nan
    u = np.asarray(record["u"], dtype=np.float64)
    return tell_state(state, u, y, *_seconds_of(state, record))


def _seconds_of(state: BOState, record: dict[str, Any]) -> tuple[float, ...]:
    """``(seconds,)`` of a record for a ``cost_aware`` state, else ``()``: the evaluation's
    own (older records: its seconds from ask to record), at least a microsecond."""
    if state.seconds is None:
        return ()
    seconds = record.get("evaluation_seconds", record["seconds"])
    if not (isinstance(seconds, int | float) and math.isfinite(seconds)):
        raise JournalError(f"record {record['iteration']} has no usable seconds for cost_aware")
    return (max(float(seconds), 1e-6),)


def _saved_chains(state: BOState, journal: Journal, done: int) -> tuple[int, Any, Any]:
    """``(iteration, surrogate state, classifier state)`` from ``sampler.json``, or
    ``(0, None, None)`` (replay every fit) if it is missing, from the future, or does not
    unpack into finite chains of this run's shapes: it is a cache, and a replay from the
    records proposes exactly what the saved chains would have."""
    saved = journal.load_sampler(done)
    if saved is None:
        return 0, None, None
    try:
        surrogate, classifier = _unpack(state.settings, state.space, saved)
    except Exception:  # a tampered or foreign file: any failure to unpack means replay
        return 0, None, None
    return saved["iteration"], surrogate, classifier


def _resumed_flights(journal: Journal, history: list[dict], space: Space) -> list[Flight]:
    """The journal's pending evaluations that did not finish, to be issued again."""
    finished = {r.get("proposal", r["iteration"]) for r in history}
    flights = []
    for entry in journal.load_pending(space):  # checked against the space there
        if entry["proposal"] in finished:
            continue  # killed between the record and the pending file's update
        u = np.asarray(entry["u"], np.float64)
        started = entry.get("attempts", 0)  # how often it was started before
        flights.append(Flight(entry["proposal"], u, entry["x"], entry["info"], started, 0.0))
    return flights


@sigterm_as_interrupt  # a scheduler's preemption stops the run as Ctrl-C does
def minimize(
    objective: Objective,
    space: Space,
    settings: Settings | None = None,
    *,
    executor: Any = None,
    out: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
    **overrides: Any,
) -> Result:
    """Minimise (or maximise) ``objective(point: dict) -> float`` over ``space``.

    ``settings`` (:class:`bojax.bo.settings.Settings`, which lists and checks every
    setting) with keyword ``overrides`` of its fields, e.g. ``minimize(f, space,
    iterations=30, surrogate="gp-map")``: ``initial`` Sobol points, then ``iterations`` BO
    steps. With ``out``, every evaluation is journalled there as it finishes;
    ``resume=True`` continues a killed run without repeating or losing a finished
    evaluation, and re-issues those that were in flight. A failing objective (raises,
    returns NaN/inf or a non-number) is recorded and the run goes on, with the
    acquisition weighted by the probability of success (``failure_model``); the run stops
    early, saying why in ``Result.stopped``, at ``max_failures`` failures, once P(success)
    is below ``min_success_probability`` everywhere the optimiser looked, or when the
    policy's stopping rule holds. If nothing succeeded at all, :class:`ObjectiveError`.

    ``executor`` (see the module docstring) evaluates up to ``q`` points at once
    (default: its number of workers), refilled as each finishes, with pending points as
    fantasies; ``retries`` bounds the resubmissions of an evaluation it lost. Without an
    executor, ``q > 1`` evaluates batches of ``q`` proposals in turn (in one call if the
    objective has a ``batch(points) -> list`` method).
    """
    settings = (Settings() if settings is None else settings).replace(**overrides)
    if resume and out is None:  # else a fresh run would start, journalled nowhere
        raise SettingsError("resume continues the run journalled in a folder: pass out= (--out)")
    if stepwise.takes_report(objective):
        return stepwise.minimize_steps(
            objective, space, settings, executor=executor, out=out, resume=resume,
            progress=progress,
        )  # fmt: skip
    stepwise_only = [
        name
        for name in ("max_step", "min_step", "eta", "early_stopping", "proposer", "step_budget")
        if getattr(settings, name) != Settings.__dataclass_fields__[name].default
        and not (name == "early_stopping" and settings.early_stopping == "none")
    ]
    if stepwise_only:  # (else a forgotten report parameter would silently train in full)
        raise SettingsError(
            f"{', '.join(stepwise_only)} {'is' if len(stepwise_only) == 1 else 'are'} for "
            "step-wise objectives, train(point, report); this objective has no parameter "
            "named report"
        )
    if (why := stepwise.unbindable(objective, {})) is not None:  # (else each design fails)
        raise ObjectiveError(f"the objective is called as objective(point): {why}")
    pool = as_executor(executor)
    if (why := unsendable(objective, pool)) is not None:
        raise ObjectiveError(f"the objective cannot be sent to the executor's workers: {why}")
    q = (1 if executor is None else concurrency(pool)) if settings.q is None else settings.q
    if settings.iterations > 0 and q >= settings.initial + settings.iterations:
        warn_user(
            f"q = {q} evaluations at once is at least this run's initial + iterations = "
            f"{settings.initial + settings.iterations}: they are all proposed before any "
            "finishes, so all come from the initial design and none from the model"
        )
    journal = Journal(out) if out is not None else None
    with contextlib.nullcontext() if journal is None else journal.lock():
        state, history, queued = _open(
            journal, init(space, settings), resume, objective_name(objective), progress
        )
        run = _Run(objective, settings, pool, q, journal, history, progress)
        try:
            run.loop(state, queued, settings.initial + settings.iterations)
        except KeyboardInterrupt:
            run.forgive_interrupted()
            raise
        where = f" Finished evaluations are in {journal.records_path}." if journal else ""
        if run.resumed and len(history) == run.resumed:  # (reviews CI, CJ)
            # Else a resume with the objective fixed repeated the journalled error as news.
            asked = settings.initial + settings.iterations
            why = (
                f"the run's {run.resumed} journalled evaluations are its whole budget "
                f"(initial + iterations = {asked}); pass more iterations (--iterations) to go on"
                if run.resumed >= asked
                else "it stopped at once, for the reason in brackets above"
            )
            if run.resumed < asked and "max_failures" in str(run.stopped):
                why += "; raise max_failures (--max-failures) to go on"
            where = f" This call evaluated nothing: {why}.{where}"
        seconds = time.perf_counter() - run.started
        try:
            result = _result(settings, history, seconds, run.stopped, where)
        except ObjectiveError as error:
            if journal is not None:
                journal.write_failed_summary(history, error)
            raise
        if journal is not None:
            summary = {
                f.name: getattr(result, f.name) for f in fields(result) if f.name != "history"
            }
            journal.write_summary(summary)
    return result


def _open(
    journal: Journal | None,
    state: BOState,
    resume: bool,
    objective: str | None = None,
    progress: bool = False,
):
    """``(state, finished records, flights to re-issue)``: a fresh run, or with ``resume``
    the journalled run restored (after checking it is this run; ``objective``, its
    objective's name, only warned about)."""
    if journal is None:
        return state, [], []
    header = run_header(state.space, state.settings, objective)
    if not (resume and journal.exists()):
        journal.start(header)
        return state, [], []
    try:
        journal.check(header)
    except JournalError as error:
        stored = (journal.header().get("settings") or {}).get("acquisition")
        if state.settings.acquisition == "parego" and stored in ("log_ehvi", "log_nehvi"):
            raise JournalError(
                f"{error}. Runs of four or more objectives default to parego since "
                f"2026-11-28; pass acquisition={stored!r} to resume this one"
            ) from None
        raise
    # Every record checked against the space (and the declared metrics).
    history = journal.read(space=state.space, metrics=state.settings.metrics)
    asked = state.settings.initial + state.settings.iterations
    if len(history) > asked:
        raise JournalError(
            f"{journal.folder} holds {len(history)} evaluations, more than this run asks for "
            f"(initial + iterations = {asked}); pass iterations (--iterations) of at least "
            f"{len(history) - state.settings.initial} to go on"
        )
    journal.reopen()
    journal.keep_options(header)
    flights = _resumed_flights(journal, history, state.space)
    return _restore(state, journal, history, flights, progress), history, flights


class _Run:
    """One run's moving parts: issue, wait, record."""

    def __init__(self, objective, settings, pool, q, journal, history, progress):
        self.objective, self.settings, self.pool = objective, settings, pool
        self.q, self.retries, self.journal, self.history = q, settings.retries, journal, history
        self.progress = progress
        self.max_failures = settings.max_failures
        self.min_success_probability = settings.min_success_probability
        self.stopped: str | None = None  # why no more points are issued, once that holds
        self.mismatched: dict[int, int] = {}  # outcomes not as declared, by _misdeclared
        self.resumed = len(history)  # records journalled before this call
        self.started = time.perf_counter()
        self.deadline = Deadline(settings.time_budget, self.started)
        self.running: dict[cf.Future, Flight] = {}
        # With a timeout, an executor that has not answered well after an evaluation could
        # start has lost it: the evaluation's own process enforces the timeout, this only
        # catches a silent worker.
        self.clock = AnswerClock.for_pool(pool, settings.timeout)
        self.queued: list[Flight] = []  # to issue again before asking for new points
        self.refusing = False  # the executor takes no more work: the queued wait for a resume
        self.starting: list[Flight] = []  # handed to the executor, not yet running
        self.bar: _Progress | None = None
        proposals = [r.get("proposal", r["iteration"]) for r in history]
        self.next_proposal = max(proposals, default=-1) + 1

    def _check_failures(self, state: BOState, last_error: str | None = None) -> None:
        """Stop issuing points once ``max_failures`` evaluations have failed (also for a
        resumed run that reached it before)."""
        failures = int(np.sum(~np.isfinite(state.y)))
        if self.stopped is None and failures >= (self.max_failures or math.inf):
            last = f"; last: {last_error}" if last_error else ""
            self.stopped = (
                f"{failures} of {len(state.y)} evaluations failed "
                f"(max_failures={self.max_failures}){last}"
            )

    def loop(self, state: BOState, queued: list[Flight], total: int) -> BOState:
        self._check_failures(state)
        self.next_proposal = max([f.proposal + 1 for f in queued] + [self.next_proposal])
        self.queued = list(queued)  # re-issued from a resumed run, in proposal order
        self.first = len(state.y)  # evaluations journalled before this call
        with _Progress(self.progress, total, len(self.history)) as bar:
            self.bar = bar
            while True:
                room = min(self.q - len(self.running), total - len(state.y) - len(self.running))
                concluded = False
                late = room > 0 and self._out_of_time(state)  # nothing more starts
                if late and self.stopped is None:
                    self.stopped = TIMED_OUT  # (said once the running ones are in)
                if room > 0 and self.queued and not self.refusing and not late:
                    for _ in range(min(room, len(self.queued))):
                        if self._out_of_time(state):  # (an inline batch: one at a time)
                            late, self.stopped = True, self.stopped or TIMED_OUT
                            break
                        flight = self.queued.pop(0)._replace(issued=time.perf_counter())
                        if flight.attempts > self.retries:  # it was running when we died
                            state, concluded = (
                                self._conclude(state, flight, math.nan, _died(flight)),
                                True,
                            )
                        else:
                            future = self._submit(flight)
                            if future is not None and isinstance(self.pool, Inline):
                                state, concluded = self._finish(state, future), True
                    room = min(self.q - len(self.running), total - len(state.y) - len(self.running))
                # A slot the re-issued flights left free is filled now, as the run they come
                # from would have (else a resumed q = 2 run asked one evaluation late).
                if room > 0 and not (concluded or self.queued or late) and self.stopped is None:
                    state = self._issue(state, room)
                if not self.running:
                    more = room > 0 and self.queued and not self.refusing
                    if concluded or (more and not late and self.stopped is not TIMED_OUT):
                        continue  # there may be more to issue
                    break
                done = first_done(self.running, self._until_overdue())
                for future in sorted(done, key=lambda f: self.running[f].proposal):
                    state = self._finish(state, future)
                # (on every pass: evaluations that keep finishing elsewhere must not hide
                # one the executor dropped)
                state = self._give_up_overdue(state)
                # Let the finished futures go: Dask keeps a result while its future lives,
                # and computes it again if the worker that holds it dies.
                done = future = None
        kept = "kept in pending.json for a resume"
        kept = "left out (no run folder to resume)" if self.journal is None else kept
        if self.stopped is TIMED_OUT:
            self.stopped = self.deadline.why(f"{len(state.y)} evaluations of {total}")
            if self.queued:  # proposed as the budget ran out: not started
                self.stopped += f"; {len(self.queued)} proposal(s) made as it ran out are {kept}"
        elif self.refusing and self.queued:
            self.stopped += f"; {len(self.queued)} evaluation(s) it did not run are {kept}"
        return state

    def _out_of_time(self, state: BOState) -> bool:
        """Whether the time budget forbids starting anything more (checked again after
        each proposal: a fit that outlasts the budget must not start what it proposed)."""
        return self.deadline.reached(len(state.y) - self.first)

    def _until_overdue(self) -> float | None:
        """Seconds until the first running evaluation is overdue; None without a limit."""
        left = self.clock.seconds_left()
        # A lock's wait refuses a timeout past the platform's time_t (timeout=1e300):
        # wait a day at most, then look again.
        return None if left is None else min(left, MAX_WAIT)

    def _give_up_overdue(self, state: BOState) -> BOState:
        """Treat evaluations the executor has not answered within ``answer_limit`` of when
        they could start as lost (a hung worker, a task its scheduler dropped): resubmit or
        record them. One that has just answered is left to the next wait."""
        late, silent = self.clock.overdue(self.settings.timeout, "evaluation")
        for future in sorted(late, key=lambda f: self.running[f].proposal):
            flight = self.running.pop(future)
            self.clock.answered(future)
            future.cancel()
            error = self._retry(flight, silent)
            if error is not None:
                state = self._conclude(state, flight, math.nan, error)
        return state

    def _issue(self, state: BOState, count: int) -> BOState:
        """Ask for ``count`` new points and hand them out; sets ``stopped`` if the loop
        says to stop instead."""
        n, settings = len(state.y), self.settings
        if self.journal is not None and model_based(state):
            self.journal.save_sampler(n, _pack(settings, state))
        tick = time.perf_counter()
        pending = np.array([f.u for f in self.running.values()]).reshape(-1, state.space.dim)
        try:
            points, state, infos = ask_batch(state, count, pending)
        except SpaceExhaustedError as error:
            self.stopped = str(error)
            return state
        flights, threshold = [], self.min_success_probability
        for u, info in zip(points, infos, strict=True):
            done = n + len(self.running)
            if info.get("converged"):
                self.stopped = f"converged after {done} evaluations (the policy's stopping rule)"
                break
            if threshold is not None and info.get("max_success_probability", 1.0) < threshold:
                self.stopped = (
                    f"P(success) below min_success_probability={threshold:g} everywhere the "
                    f"optimiser looked (at most {info['max_success_probability']:.3g}) after "
                    f"{done} evaluations"
                )
                break
            info = {**info, "asked_at": n}  # a resume replays this ask's fit there
            flight = Flight(self.next_proposal, u, state.space.from_unit(u), info, 0, tick)
            self.next_proposal += 1
            flights.append(flight)
        batched = callable(getattr(self.objective, "batch", None))
        inline = isinstance(self.pool, Inline)
        if self._out_of_time(state):  # the fit outlasted the budget: kept, not started
            self.queued.extend(flights)
            self._save_pending()
            self.stopped = self.stopped or TIMED_OUT
        elif inline and batched and len(flights) > 1 and not self.settings.isolated:
            self._submit_batch(flights)
        elif inline:  # one by one, each journalled before the next starts (by the loop)
            self.queued.extend(flights)
            self._save_pending()
        else:
            for flight in flights:
                self._submit(flight)
        return state

    def _submit(self, flight: Flight) -> cf.Future:
        """Hand ``flight`` to the executor, after writing it down as started."""
        flight = flight._replace(attempts=flight.attempts + 1)
        self._save_pending(starting=[flight])
        if self.settings.isolated:
            task = (evaluate_isolated, self.objective, flight.point, self.settings.timeout)
        else:
            task = (evaluate, self.objective, flight.point)
        self.starting = [flight]
        tick = time.perf_counter()
        try:
            future = self.pool.submit(*task, flight.attempts)  # inline: evaluates right here
        except Exception as error:  # shut down, a Dask client closed, a pool broken
            # Never started, so no attempt: kept in pending.json for a resume, where it
            # was journalled failed, its retries spent on a pool that took nothing (review).
            # A broken process pool too: the design that was running when a process died
            # has had that attempt counted (its future failed), and those running beside
            # it, whose retries were refused, would have failed for none of their doing.
            self.starting = []
            self._not_run(flight, refused(error)[1])
            return None
        self.running[future] = flight
        self.clock.submitted(future, at=tick)
        self.starting = []
        return future

    def _submit_batch(self, flights: list[Flight]) -> None:
        """Evaluate ``flights`` in one ``objective.batch`` call (:func:`evaluate_batch`)."""
        flights = [f._replace(attempts=f.attempts + 1) for f in flights]
        self._save_pending(starting=flights)
        self.starting = flights
        tick = time.perf_counter()
        results = evaluate_batch(self.objective, [f.point for f in flights])
        share = (time.perf_counter() - tick) / len(flights)  # one call: an equal share each
        self.starting = []
        for flight, outcome in zip(flights, results, strict=True):
            future: cf.Future = cf.Future()
            future.set_result(outcome)
            self.running[future] = flight
            self.clock.submitted(future, at=time.perf_counter() - share)

    def _finish(self, state: BOState, future: cf.Future) -> BOState:
        try:
            outcome, lost = future.result(), None
        except cf.CancelledError as error:  # by the executor: shut down, its client closed
            # None of the design's doing, and it may never have run: kept in pending.json
            # for a resume as a refused one is (with retries=0 it was journalled failed).
            self.clock.answered(future)
            why = "the executor cancelled an evaluation (shut down, or its client closed)"
            why += f": {failure_text(error)}" if str(error) else ""
            self._not_run(self.running.pop(future), why)
            return state
        except Exception as error:  # the executor lost it (killed worker, broken pool)
            outcome, lost = None, error
        # (A KeyboardInterrupt raised in the evaluation ends the run here, its flight still
        # listed as running, so forgive_interrupted keeps it pending for the resume.)
        flight = self.running.pop(future)
        # (from when it could start to its end: neither its wait in the executor's queue
        # nor the driver's own work since counts as its cost)
        evaluated = self.clock.seconds(future)
        self.clock.answered(future)
        if lost is None:
            y, error = outcome
        else:
            y, error = math.nan, self._retry(flight, lost)
            if error is None:
                return state
        declared, why = _declared(self.settings, y, error)
        several = int(isinstance(error, SeveralValues))
        misdeclared = _misdeclared(self.settings, y) if error is None else several
        if misdeclared:
            # A dict where one number is declared, one number where metrics are, several
            # values (a tuple) where either is (at the first), or metrics lacking a
            # declared name, a misspelt --objective (at the third: one design may lack a
            # metric it could not measure). While every evaluation has come back so, it
            # is the run's set-up, not a point's outcome: none more is started, rather
            # than failing the whole budget.
            self.mismatched[misdeclared] = self.mismatched.get(misdeclared, 0) + 1
            this_call = len(self.history) - self.resumed + 1  # a resume counts its own
            if self.mismatched[misdeclared] == this_call >= misdeclared and not self.stopped:
                self.stopped = f"{why}; no further evaluation started"
        return self._conclude(state, flight, declared, why, evaluated)

    def _conclude(
        self, state: BOState, flight: Flight, y: float, error: str | None, evaluated=None
    ) -> BOState:
        """Tell the loop, journal the record and take it off the pending list.
        ``evaluated``: the seconds from when the evaluation could start (handed over, or
        once a worker was free for it) to seeing its result (what a ``cost_aware`` run's
        cost model learns; None for a lost one)."""
        n = len(state.y)
        seconds = time.perf_counter() - flight.issued
        if self.settings.cost_aware:
            evaluated = seconds if evaluated is None else evaluated
            state = tell_state(state, flight.u, y, max(evaluated, 1e-6))
        else:
            state = tell_state(state, flight.u, y)
        record = _record(n, flight, y, error, seconds, evaluated)
        self.history.append(record)
        if self.journal is not None:
            self.journal.append(record)
            self._save_pending()
        self.bar.update(state, record)
        if error:
            self._check_failures(state, error)
        return state

    def _not_run(self, flight: Flight, why: str) -> None:
        """``flight`` (its attempt counted) the executor did not take or cancelled: its
        attempt is given back and it waits in pending.json for a resume; nothing more is
        handed to this executor, and the run stops saying ``why``."""
        self.stopped = self.stopped or why
        self.refusing = True
        self.queued = sorted([*self.queued, flight._replace(attempts=flight.attempts - 1)],
                             key=lambda f: f.proposal)  # fmt: skip
        self._save_pending()

    def _retry(self, flight: Flight, lost: Exception) -> str | None:
        """Submit a lost evaluation again if retries are left (None), else say why it failed."""
        if flight.attempts <= self.retries:
            self._submit(flight)  # writes the pending list (a refusal comes back as lost)
            return None
        return f"evaluation lost after {flight.attempts} attempt(s): {failure_text(lost)}"

    def forgive_interrupted(self) -> None:
        """After Ctrl-C: the evaluations in flight were stopped by the user, not by their
        design, so their starts are given back in ``pending.json``; two interrupts of one
        evaluation must not journal a good design as one that kills the process."""
        if self.journal is None:
            return
        stopped = [f._replace(attempts=max(0, f.attempts - 1)) for f in self.starting]
        stopped += [f._replace(attempts=max(0, f.attempts - 1)) for f in self.running.values()]
        flights = sorted([*stopped, *self.queued], key=lambda f: f.proposal)
        self.journal.save_pending([f.to_json() for f in flights])

    def _save_pending(self, starting: list[Flight] = ()) -> None:
        """Write what is running, queued and about to start (``starting``) to the journal."""
        if self.journal is not None:
            flights = [*self.running.values(), *self.queued, *starting]
            flights.sort(key=lambda f: f.proposal)
            self.journal.save_pending([f.to_json() for f in flights])


def _declared(settings: Settings, y: Any, error: str | None) -> tuple[Any, str | None]:
    """An outcome as the run declared it: one number, or with ``objectives`` a dict
    holding every declared metric, each one finite number (other entries that are not
    are left out of the record); anything else fails the evaluation, saying why."""
    metrics = settings.metrics
    if isinstance(error, SeveralValues):
        expects = "one number" if metrics is None else f"a dict of metrics {list(metrics.columns)}"
        return math.nan, f"{error.returned}; this run expects {expects}"
    if error is not None:
        return math.nan, error
    if metrics is None and isinstance(y, dict):
        return math.nan, (
            f"objective returned a dict of metrics {sorted(y)[:10]}; declare objectives "
            "(objectives={'name': 'min'}, --objective name:min) to optimise several"
        )
    if metrics is None:
        return y, None
    if not isinstance(y, dict):
        return (
            math.nan,
            f"objective returned {y!r}; this run expects a dict of metrics {list(metrics.columns)}",
        )
    unusable = [n for n in metrics.columns if isinstance(y.get(n), Unusable)]
    if unusable:
        return math.nan, f"metric {short_repr(unusable[0], 80)}: {y[unusable[0]].reason}"
    y = {name: v for name, v in y.items() if not isinstance(v, Unusable)}  # extras: left out
    if metrics.missing(y):
        return (
            math.nan,
            f"objective returned metrics {sorted(y)[:10]}, lacking {metrics.missing(y)}",
        )
    return y, None


def _misdeclared(settings: Settings, y: Any) -> int:
    """How many evaluations of a run must come back as ``y`` (not an error) before it is
    the run's set-up: 1 for another kind than declared (a dict for one number, a number
    for metrics), 3 for metrics lacking a declared name and holding an undeclared one;
    0 otherwise."""
    metrics = settings.metrics
    if metrics is None or not isinstance(y, dict):
        return int((metrics is None) == isinstance(y, dict))
    # Lacking a declared name while holding an undeclared one reads as a misspelling; a
    # dict of declared names only, one short, is a design whose metric was not measured.
    misspelt = metrics.missing(y) and set(y) - set(metrics.columns)
    return 3 if misspelt else 0


def _died(flight: Flight) -> str:
    return (
        f"the process died during this evaluation ({flight.attempts} start(s)); "
        "not retried again (retries setting)"
    )


def _result(
    settings: Settings, history: list[dict], seconds: float, stopped=None, where: str = ""
) -> Result:
    ok = [r for r in history if r["status"] == "ok"]
    if not ok:
        why = f" ({stopped})" if stopped else ""
        if not history:  # (an executor that took nothing: its evaluations wait for a resume)
            raise ObjectiveError(f"no evaluation finished{why}.{where}")
        last = history[-1]["error"]
        raise ObjectiveError(
            f"every evaluation failed: {len(history)} of {len(history)}{why}; last error: "
            f"{last}.{where}"
        )
    metrics = settings.metrics
    if metrics is not None:
        return _several(settings, history, seconds, stopped)
    pick = max if settings.maximize else min
    best = pick(ok, key=lambda r: r["y"])
    return Result(
        best["x"], best["y"], history, len(history), len(history) - len(ok), seconds, stopped
    )


def _several(settings: Settings, history: list[dict], seconds: float, stopped) -> Result:
    """The result of a run with several metrics (at least one success)."""
    from bojax.bo.pareto import best_record, summary

    metrics = settings.metrics
    first = metrics.objectives[0][0]
    ok = [r for r in history if r["status"] == "ok"]
    best = best_record(metrics, history)
    front = summary(metrics, history, settings.reference_point)
    return Result(
        best["x"], best["y"][first], history, len(history), len(history) - len(ok), seconds,
        stopped, front["pareto"], front["reference_point"], front["hypervolume"],
    )  # fmt: skip


class _Progress:
    """A live line: iteration, best so far, seconds per iteration (rich)."""

    def __init__(self, enabled: bool, total: int, done: int):
        self.enabled, self.total, self.done = enabled, total, done
        self.best = math.nan
        self.local = False  # whether the switch to local GPs was announced

    def __enter__(self):
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self.progress = Progress(
                TextColumn("[bold]BO"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(
                    "best {task.fields[best]}  failed {task.fields[failed]}  "
                    "last {task.fields[last]:.2f} s/it"
                ),
                TimeElapsedColumn(),
            )
            self.progress.__enter__()
            self.task = self.progress.add_task(
                "bo", total=self.total, completed=self.done, best="-", failed=0, last=0.0
            )
        return self

    def update(self, state: BOState, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        ok = state.y[np.isfinite(state.y)]
        maximize = state.settings.maximize
        metrics = state.settings.metrics
        if metrics is not None:  # the first objective's best among the feasible
            maximize = metrics.objectives[0][1] == "max"
            ok = ok[metrics.feasible(state.metrics[np.isfinite(state.y)])]
        best = "-" if ok.size == 0 else f"{(ok.max() if maximize else ok.min()):.6g}"
        failed = int(np.sum(~np.isfinite(state.y)))
        self.progress.update(self.task, advance=1, best=best, failed=failed, last=record["seconds"])
        if "local_points" in record["diagnostics"] and not self.local:
            self.local = True
            settings = state.settings
            several = settings.metrics is not None and len(settings.metrics.objectives) > 1
            centre = "a point of the front, in turn," if several else "the best"
            self.progress.console.print(
                f"past exact_limit = {settings.exact_limit} successful evaluations: each "
                f"proposal now fits a local GP (MAP) to the {settings.local_points} "
                f"evaluations nearest {centre} and searches a trust region around it"
            )

    def __exit__(self, *exc):
        if self.enabled:
            self.progress.__exit__(*exc)
        return False
