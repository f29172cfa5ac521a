"""Step-wise trainings a segment at a time: on an executor's workers, in isolated
processes, under a timeout.

A worker cannot ask the driver at each ``report`` whether to go on (a Dask worker may be
another machine), so the driver hands out *segments*: "train this design from its last
recorded step to step ``until``" (its next milestone). :func:`run_segment` runs one: its
``report`` records the values past the design's last step and stops the training with
:class:`~bojax.bo.stepwise.StopTraining` at ``until``; the curve, the steps trained and
the training's last checkpoint come back as a :class:`Segment`. The driver
(:class:`PooledSteps`) takes the scheduler's decision at the milestone and, if the
training goes on, hands out its next segment as soon as a worker is free, before any
new design (asynchronous successive halving, Li et al. 2020).

An objective ``train(point, report, checkpoint=None)`` that passes
``report(step, value, checkpoint=state)`` continues from its state, at the step it
passed it; one without the parameter trains again from its first step. Repeated steps
are charged to the budget (not recorded twice): with ASHA at ``eta = 3`` a design
trained to the end without checkpoints costs about 1.8 times its steps, which is why
checkpoints are worth writing.

With ``isolate`` (or a ``timeout``) each segment runs in a fresh process
(:func:`bojax.bo.isolation.run_isolated`), killed after ``timeout`` seconds: a hang or a
crash fails that design only.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import time
import warnings
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from bojax.bo.evaluation import (
    Inline,
    as_executor,
    concurrency,
    failure_text,
    first_done,
    pickled,
    refused,
)
from bojax.bo.isolation import AnswerClock, run_isolated, task_folder
from bojax.bo.stepwise import (
    Checkpoint,
    Opened,
    StepRun,
    StopTraining,
    call_train,
    check_step,
    checked_seconds,
    checked_value,
    diverged,
    outcome,
    past_max_step,
    raise_late_report,
    remembered,
    starts_after,
    takes,
)
from bojax.errors import SpaceExhaustedError

# The longest single wait for the executor, so Ctrl-C is seen (the loop waits again).
MAX_WAIT = 1.0


@dataclass
class Segment:
    """What one segment of a training did (what a worker sends back)."""

    curve: list[list[float]]  # [step, value] past the design's last recorded step
    charged: int  # steps trained, repeats of a training without checkpoints included
    status: str  # "paused" (at until), "complete" (returned, or reached max_step), "failed"
    y: float | None = None  # the value train returned, when complete
    error: str | None = None
    checkpoint: Checkpoint | None = None  # the last one passed to report, if any
    seconds: float = 0.0  # what the charged steps cost (reported, else timed)


class SegmentReport:
    """``report(step, value, checkpoint=None, seconds=None)`` for one segment: records the
    steps past ``after``, pauses the training once ``until`` is reached, and adds up the
    steps' seconds: each step's own ``seconds`` where the training passes them (a
    simulated training, or one that knows its cost better), else the wall time since the
    previous report (since the call began, for the first: loading and compiling count)."""

    def __init__(self, after: int, until: int, max_step: int, on_report=None, seconds=0.0):
        self.after, self.until, self.max_step = after, until, max_step
        self.on_report = on_report  # called after each recorded step (journals it)
        self.last = 0  # the last step this call of train reported
        self.curve: list[list[float]] = []
        self.charged = 0
        self.checkpoint: Checkpoint | None = None
        self.complete = False
        self.paused = False  # StopTraining raised to pause it (a training may swallow it)
        self.closed = False  # the segment ended: a late report is refused
        self.refused: str | None = None  # a report refused: the segment fails (remembered)
        self.seconds, self.tick = seconds, time.perf_counter()

    def __call__(
        self, step: Any, value: Any, checkpoint: Any = None, seconds: Any = None, last=False
    ) -> bool:
        if self.closed:
            raise_late_report(None)
        if self.complete:  # it reported its last step (last=True) and went on
            raise StopTraining("the training said its last step was its last")
        if self.paused:  # it caught the pause (a trainer thread's report) and went on
            raise StopTraining("paused: no report is taken after the pause")
        with remembered(self):
            step = check_step(step, self.last)
            if step > self.max_step:
                reached = self.curve[-1][0] if self.curve else self.after
                past_max_step(step, self.max_step, reached)
        if step > self.max_step:
            self.complete = True
            raise StopTraining(f"past max_step = {self.max_step}")
        with remembered(self):
            if diverged(value):  # the step was trained: it is charged, then the segment fails
                self._charge(step, checked_seconds(seconds))
                if self.on_report is not None:  # (an isolated one's progress file sees it)
                    self.on_report(self)
            value = checked_value(value)
            given = checked_seconds(seconds)
        self._charge(step, given)
        if checkpoint is not None:
            self.checkpoint = Checkpoint(step, checkpoint)
        if step > self.after:  # a repeated step is charged, not recorded
            self.curve.append([int(step), value])
        if self.on_report is not None:
            self.on_report(self)
        if step == self.max_step or last:
            self.complete = True  # the training returns by itself
        elif step >= self.until:  # (below `after` only when the budget cut the segment)
            self.paused = True
            raise StopTraining(f"paused at step {step}")
        return not self.complete

    def _charge(self, step: int, given: float | None) -> None:
        """Charge the steps up to ``step`` and their seconds (``given``, else timed)."""
        now = time.perf_counter()
        self.seconds += now - self.tick if given is None else given
        self.tick = now
        self.charged += step - self.last
        self.last = int(step)

    def ended(self, status: str, y: float | None = None, error: str | None = None) -> Segment:
        self.closed = True
        return Segment(self.curve, self.charged, status, y, error, self.checkpoint, self.seconds)


def run_segment(
    train: Any,
    point: dict[str, Any],
    after: int,
    until: int,
    max_step: int,
    checkpoint: Checkpoint | None = None,
    attempt: int = 0,
    *,
    on_report=None,
    seconds: float = 0.0,
) -> Segment:
    """Train ``point`` past step ``after`` (from ``checkpoint`` when the objective takes
    one, else from its first step; steps up to ``after`` are charged, not recorded)
    until step ``until``. Never raises for what the objective does; ``attempt`` only
    keeps retried tasks distinct; ``on_report(report)`` (in the driver's process only)
    sees the :class:`SegmentReport` after each step it records or charges; its seconds
    count on from ``seconds`` (a killed run's segment, finished by its resume)."""
    del attempt
    report = SegmentReport(after, until, max_step, on_report, seconds)
    kwargs = {}
    if checkpoint is not None and takes(train, "checkpoint"):
        kwargs, report.last = {"checkpoint": checkpoint.state}, checkpoint.resumes_at(after)
    try:
        returned = call_train(train, dict(point), report, **kwargs)
    except StopTraining:
        if report.refused is not None:
            return report.ended("failed", error=report.refused)
        return report.ended("complete" if report.complete else "paused")
    except KeyboardInterrupt:  # Ctrl-C stops the run, not the design
        raise
    except BaseException as error:  # user code: record, don't end the run
        return report.ended("failed", error=report.refused or failure_text(error))
    if report.refused is not None:  # it caught the ValueError and went on
        return report.ended("failed", error=report.refused)
    if report.paused:  # it returned after the pause, which it caught: paused all the same
        return report.ended("paused")
    earlier = [[after, 0.0]] if after else []  # a value was recorded before this segment
    status, y, error = outcome(returned, report.curve or earlier)
    return report.ended("complete" if status == "ok" else "failed", y, error)


def run_segment_isolated(timeout: float | None, *args: Any) -> Segment:
    """:func:`run_segment` (``args`` are its arguments) in a fresh process, killed after
    ``timeout`` seconds: a timeout or a crash is a failed segment saying why, with the
    steps it reported before (read back from the process's :data:`PROGRESS` file; a
    training that hung at its thirtieth epoch kept none of its curve, review)."""
    reported: list[Segment] = []

    def salvage(folder: Path) -> None:
        reported.append(_progress(folder / PROGRESS))

    done, result = run_isolated(portable_segment, args, timeout, salvage=salvage)
    if done:
        return result
    return replace(reported[0] if reported else Segment([], 0, "failed"), error=result)


# In an isolated process, a segment's reports as they come, one JSON line each:
# ``[step, value]`` where the step was recorded (else ``null``), the steps charged and
# the seconds so far.
PROGRESS = "progress.jsonl"


def _write_progress(path: Path):
    """``on_report`` for :class:`SegmentReport` that appends each report to ``path``."""
    written = [0]  # the curve's points already written

    def on_report(report: SegmentReport) -> None:
        point = report.curve[-1] if len(report.curve) > written[0] else None
        written[0] = len(report.curve)
        line = json.dumps([point, report.charged, report.seconds])
        with open(path, "a") as file:
            file.write(line + "\n")

    return on_report


def _progress(path: Path) -> Segment:
    """The failed segment :func:`_write_progress` left in ``path``: its recorded steps,
    charged steps and seconds (none where it wrote nothing; a line cut by the kill is
    left out)."""
    curve, charged, seconds = [], 0, 0.0
    try:
        lines = path.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            point, charged, seconds = json.loads(line)
        except ValueError:
            break  # (only the last line can be cut)
        if point is not None:
            curve.append(point)
    return Segment(curve, int(charged), "failed", seconds=float(seconds))


def portable_segment(*args: Any) -> Segment:
    """:func:`run_segment` in a process of its own (isolated, or a process or Dask
    pool's): a checkpoint that cannot be pickled back (one holding a lock) is dropped,
    with a warning, so the steps come back (the design continues from its first step),
    as an inline run drops it from its journal
    (:func:`bojax.bo.stepwise.save_checkpoint`). Before, the whole segment failed. In
    an isolated process each report is also written to its folder's :data:`PROGRESS`."""
    folder = task_folder()
    on_report = None if folder is None else _write_progress(folder / PROGRESS)
    segment = run_segment(*args, on_report=on_report)
    if segment.checkpoint is None:
        return segment
    payload, why = pickled(segment.checkpoint)
    if payload is not None:
        return segment
    warnings.warn(
        f"a training's checkpoint cannot leave its process ({why}); the design is trained "
        "again from its first step when it continues",
        stacklevel=1,
    )
    return replace(segment, checkpoint=None)


@dataclass
class _Open:
    """A design's training between segments (the driver's side; its curve, checkpoint
    and charged steps are on ``opened.training``)."""

    opened: Opened
    attempts: int = 0
    reserved: int = 0  # steps its segment in flight may charge
    lost: str | None = None  # why its last segment was lost, while it waits for a retry

    @property
    def training(self):
        return self.opened.training

    @property
    def step(self) -> int:
        return self.opened.training.recorded


NOT_STARTED = "the run ended before its training reported a step"


def _lost(attempts: int, error: Exception) -> str:
    """Why a design failed whose segment the executor lost ``attempts`` times."""
    return f"segment lost after {attempts} attempt(s): {failure_text(error)}"


class _Pooled:
    """Segments on ``pool``, ``slots`` at once: the loop, the submission (isolated with
    ``isolate``), and the wait. Subclasses choose the segments (``_fill``) and take
    them back (``_finish``)."""

    def __init__(self, pool: Any, slots: int, settings, limits=None):
        self.pool, self.slots, self.settings = pool, max(1, int(slots)), settings
        self.limits = limits  # once limits.why() says why, no new segment starts
        self.running: dict[cf.Future, Any] = {}
        self.reserved = 0  # steps the segments in flight may charge
        self.retries = settings.retries
        self.refusing = False  # the executor takes no more work
        # With a timeout, a segment the executor has not answered within this of when it
        # could start is lost (a hung worker, a dropped task), as the plain driver's
        # evaluations are.
        self.clock = AnswerClock.for_pool(pool, settings.timeout)

    def loop(self, bar) -> None:
        """Run until the budget is spent and every segment is back."""
        try:
            while True:
                self._fill()
                if not self.running:
                    break
                done = first_done(self.running, self._until_overdue())
                # In the order they ended (the order handed over where that is not yet
                # known): a set's order changes from run to run, and so did the journal's
                # where several were back at once.
                back = [f for f in self.running if f in done]
                for future in sorted(back, key=self.clock.ended_at):
                    self.clock.answered(future)
                    record = self._finish(future)
                    if record is not None:
                        bar.update(record)
                # (on every pass: segments that keep finishing elsewhere must not hide one
                # the executor dropped)
                for record in self._give_up_overdue():
                    bar.update(record)
            for record in self._drain():
                bar.update(record)
        except KeyboardInterrupt:
            self._save_pending()
            raise

    def halted(self) -> bool:
        """Whether the run's time budget or failure limit, or an executor that takes no
        more work, stops new segments."""
        return self.refusing or (self.limits is not None and self.limits.why() is not None)

    def _not_run(self, error: cf.CancelledError) -> None:
        """A segment the executor refused or cancelled (shut down, its client closed):
        none of its design's doing, and perhaps never run, so no attempt counts."""
        why = "the executor cancelled a segment (shut down, or its client closed)"
        self._refuse(why + (f": {failure_text(error)}" if str(error) else ""))

    def _segment(self, args: tuple, attempt: int) -> cf.Future:
        try:
            if self.settings.isolated:
                future = self.pool.submit(
                    run_segment_isolated, self.settings.timeout, *args, attempt
                )
            else:  # (a result leaves the process unless the pool is threads)
                local = isinstance(self.pool, Inline | cf.ThreadPoolExecutor)
                future = self.pool.submit(
                    run_segment if local else portable_segment, *args, attempt
                )
        except cf.BrokenExecutor as error:  # a process died: perhaps this design's doing
            future, why = refused(error)  # lost: retried, then journalled failed
            self._refuse(why)
        except Exception as error:  # shut down, a Dask client closed: none of its doing
            # Never started, so no attempt: handed back as a cancelled segment is (the
            # plain driver's rule; its design was failed once its retries went to a pool
            # that took nothing).
            future = cf.Future()
            future.cancel()
            self._refuse(refused(error)[1])
        self.clock.submitted(future)
        return future

    def _refuse(self, why: str) -> None:
        """Start nothing more on this executor, saying ``why`` (the first reason holds)."""
        if self.limits is not None:
            self.limits.refused = self.limits.refused or why
        self.refusing = True

    def _until_overdue(self) -> float:
        """Seconds to wait for a segment: until the first one is overdue, at most
        ``MAX_WAIT``."""
        left = self.clock.seconds_left()
        return MAX_WAIT if left is None else min(MAX_WAIT, left)

    def _give_up_overdue(self) -> list[dict[str, Any]]:
        """Segments the executor has not answered within ``answer_limit``, taken back as
        lost (retried, then their design failed); the records that ends. One that has
        just answered is left to the next wait."""
        late, silent = self.clock.overdue(self.settings.timeout, "segment")
        records = []
        for future in late:
            future.cancel()
            self.clock.answered(future)
            lost = cf.Future()
            lost.set_exception(silent)
            self.running[lost] = self.running.pop(future)
            record = self._finish(lost)
            if record is not None:
                records.append(record)
        return records

    def _fill(self) -> None:
        raise NotImplementedError

    def _finish(self, future: cf.Future) -> dict[str, Any] | None:
        raise NotImplementedError

    def _drain(self) -> list[dict[str, Any]]:
        return []

    def _save_pending(self) -> None:
        pass


class PooledSteps(_Pooled):
    """A step-wise run (Hyperband, ASHA or none) whose trainings run as segments on
    ``pool`` (``slots`` at once) or, with ``isolate``, each in a process of its own.

    The records, proposals and decisions are those of :class:`~bojax.bo.stepwise.StepRun`
    (``run``); designs in flight are pending points of the proposals. Records are
    journalled as trainings end, in the order they end; a resume replays the scheduler's
    decisions in that order, and trainings that were in flight continue from their last
    segment's checkpoint (or start again from their first step without one)."""

    def __init__(self, run: StepRun, pool: Any, slots: int, limits=None):
        super().__init__(pool, slots, run.settings, limits)
        self.run = run
        self.resumable = takes(run.train, "checkpoint")
        self.open: dict[int, _Open] = {}
        self.ready: deque[int] = deque()  # kept designs waiting for a worker
        self.restarts: list[int] = []  # a killed run's trainings, to start again
        for design, opened in sorted(run.restored.items()):
            run.in_flight[design] = opened
            self.open[design] = _Open(opened)
            (self.ready if opened.training.curve else self.restarts).append(design)
        run.restored = {}
        designs = [int(r.get("proposal", j)) for j, r in enumerate(run.history)]
        self.next_design = max([*designs, *self.open], default=-1) + 1
        self.exhausted: str | None = None  # why no new design is left, once none is

    def loop(self, bar) -> None:
        super().loop(bar)
        if self.exhausted is not None:  # the trainings it had are done: the run ends
            self.limits.refused = self.limits.refused or self.exhausted
        kept = len(self.open)  # (what _drain left open: saved for a resume)
        if self.refusing and kept and self.run.journal is not None and self.limits is not None:
            self.limits.refused += f"; {kept} training(s) are kept in pending.json for a resume"

    @property
    def spent(self) -> int:
        return self.run.spent

    @property
    def budget(self) -> int:
        return self.run.budget

    def _drain(self) -> list[dict[str, Any]]:
        resumable = self.run.journal is not None
        if resumable and self.spent < self.budget and self.halted():
            self.run.save_progress()  # stopped early: the kept trainings stay open
            return []
        # Budget spent. A killed run's training that never started again has nothing
        # journalled to end: it leaves the pending list, so the run reads as finished.
        for design in self.restarts:
            self.open.pop(design)
            self.run.in_flight.pop(design, None)
        self.restarts = []
        self.run.save_progress()
        # A design whose first segment was lost and not retried has no value to stop at.
        return [
            self._end(design, "stopped")
            if self.open[design].training.curve
            else self._end(design, "failed", error=self.open[design].lost or NOT_STARTED)
            for design in list(self.ready)
        ]

    def _fill(self) -> None:
        """Hand out segments while workers and budget are free: continuations first."""
        while (
            len(self.running) < self.slots
            and self.spent + self.reserved < self.budget
            and not self.halted()
        ):
            if self.ready:
                design = self.ready.popleft()
            elif self.restarts:
                design = self.restarts.pop(0)
            elif self.exhausted is not None:
                break  # no new design: the kept ones go on
            else:
                try:
                    design = self._start()
                except SpaceExhaustedError as error:  # ends the run, as a plain run's
                    if self.limits is None:
                        raise
                    self.exhausted = str(error)
                    break
                if self.halted():  # its proposal outlasted the time budget: not started,
                    self.restarts.append(design)  # kept open for a resume
                    break
            self._submit(design)

    def _start(self) -> int:
        """A new design, proposed with the open ones pending."""
        design = self.next_design
        pending = np.array([o.opened.u for o in self.open.values()], np.float64)
        opened = self.run.begin(design, pending.reshape(-1, self.run.space.dim))
        self.next_design += 1
        self.open[design] = _Open(opened)
        self.run.in_flight[design] = opened
        self.run.save_progress()
        return design

    def _submit(self, design: int) -> None:
        entry = self.open[design]
        steps = self.run.steps
        training = entry.opened.training
        checkpoint = training.checkpoint if self.resumable else None
        base = starts_after(checkpoint, entry.step)
        left = self.budget - self.spent - self.reserved
        until = min(next_milestone(steps, training), base + left)
        entry.reserved = until - base
        entry.attempts += 1
        self.reserved += entry.reserved
        args = (
            self.run.train, entry.opened.point, entry.step, until,
            self.run.max_step, checkpoint,
        )  # fmt: skip
        self.running[self._segment(args, entry.attempts)] = design

    def _finish(self, future: cf.Future) -> dict[str, Any] | None:
        """Take a segment back: the training's record if it ended, else None."""
        design = self.running.pop(future)
        entry = self.open[design]
        self.reserved -= entry.reserved
        try:
            segment: Segment = future.result()
        except cf.CancelledError as error:  # kept open: the run's end saves it for a resume
            self._not_run(error)
            entry.attempts -= 1
            self.ready.appendleft(design)
            return None
        except Exception as lost:  # the executor lost it (a killed worker, a broken pool)
            entry.lost = _lost(entry.attempts, lost)
            if entry.attempts <= self.retries:
                self.ready.appendleft(design)
                return None
            return self._failed(design, entry.lost)
        entry.attempts, entry.lost = 0, None
        training = entry.training
        self.run.spent += segment.charged
        training.charged += segment.charged
        training.curve.extend(segment.curve)
        if segment.checkpoint is not None:
            training.checkpoint = segment.checkpoint
        if segment.status == "failed":
            if segment.charged:
                return self._end(design, "failed", error=segment.error)
            return self._failed(design, segment.error)  # a crash or a timeout
        if segment.status == "complete":
            for step, value in segment.curve:  # the milestones' records, as inline
                self.run.decide(training, step, value)
            if not training.curve:
                return self._end(design, "failed", error="train reported no value")
            if segment.checkpoint is not None:  # a complete training keeps its final state
                self.run.save_progress(design)
            return self._end(design, "ok", y=segment.y)
        milestone = next_milestone(self.run.steps, training)
        for step, value in segment.curve:
            if not self.run.decide(training, step, value):
                return self._end(design, "stopped")
        if entry.step < milestone:
            return self._end(design, "stopped")  # the budget ended it before the milestone
        self.ready.append(design)
        self.run.save_progress(design if segment.checkpoint is not None else None)
        return None

    def _failed(self, design: int, error: str) -> dict[str, Any]:
        """End ``design`` failed by a segment that took its reports with it (a crash, a
        timeout, a segment the executor lost): one step is charged for it, as freeze-thaw
        charges such a segment, so that the budget bounds a run of failures."""
        self.run.spent += 1
        self.open[design].training.charged += 1
        return self._end(design, "failed", error=error)

    def _end(self, design: int, status: str, y=None, error=None) -> dict[str, Any]:
        entry = self.open.pop(design)
        if design in self.ready:
            self.ready.remove(design)
        return self.run.end(entry.opened, status, y, error, charged=entry.training.charged)

    def _save_pending(self) -> None:
        self.run.save_progress()


class PooledFreezeThaw(_Pooled):
    """A freeze-thaw run whose segments run on ``pool``, ``slots`` at once. Each free
    worker gets the next decision, taken with the designs in flight out of the thaw
    candidates and pending (believers) for a new design's proposal. One record per
    segment, journalled as segments end; a design whose first segment was in flight
    when the driver died is left out on resume, a paused one thaws from its checkpoint."""

    def __init__(self, run, pool: Any, slots: int, limits=None):
        super().__init__(pool, slots, run.settings, limits)
        self.run = run
        self.next_k = run.next_proposal()  # decisions' numbers, in the order they are taken

    def _fill(self) -> None:
        from bojax.bo import freezethaw

        run = self.run
        while (
            len(self.running) < self.slots
            and run.spent + self.reserved < run.budget
            and not self.halted()
        ):
            tick = time.perf_counter()
            packed = run.model.packed_chains()
            if run.journal is not None and packed is not None:  # a resume's warm start
                run.journal.save_sampler(len(run.history), packed)
            busy = {flight[0].design for flight in self.running.values()}
            k = self.next_k
            try:
                decision = run.model.decide(run.designs, k, busy)
            except SpaceExhaustedError as error:  # no new design, none paused
                if self.running:
                    break  # the designs in flight pause and may be thawed
                if self.limits is None:
                    raise
                self.limits.refused = self.limits.refused or str(error)
                break
            if self.halted():  # the decision outlasted the time budget: a resume decides again
                break
            self.next_k += 1
            decision.seconds = time.perf_counter() - tick
            args = freezethaw.open_segment(run, decision, run.designs, self.reserved)
            reserve = args[3] - starts_after(args[5], args[2])
            self.reserved += reserve
            self.running[self._segment(args, 1)] = (decision, k, reserve, args, 1, tick)

    def _finish(self, future: cf.Future) -> dict[str, Any] | None:
        from bojax.bo import freezethaw

        decision, k, reserve, args, attempts, tick = self.running.pop(future)
        self.reserved -= reserve
        try:
            segment: Segment = future.result()
        except cf.CancelledError as error:
            # Nothing journalled: a resume finds the design as a killed run leaves one in
            # flight (a paused one thaws from its last checkpoint, a new one is left out).
            self._not_run(error)
            return None
        except Exception as lost:  # the executor lost it (a killed worker, a broken pool)
            if attempts <= self.retries:
                self.reserved += reserve
                flight = (decision, k, reserve, args, attempts + 1, tick)
                self.running[self._segment(args, attempts + 1)] = flight
                return None
            segment = Segment([], 0, "failed", None, _lost(attempts, lost))
        run = self.run
        seconds = time.perf_counter() - tick - decision.seconds
        record = {"iteration": len(run.history), "proposal": k}  # segments end out of order
        record.update(freezethaw.close_segment(run, decision, run.designs, segment, seconds))
        freezethaw.add_cost(run.designs[decision.design], record)
        record["decision_seconds"] = decision.seconds
        run.history.append(record)
        if run.journal is not None:
            run.journal.append(record)
        return record


def next_milestone(steps: tuple[int, ...], training) -> int:
    """The step where ``training``'s next decision falls: ``max_step`` once it is past
    every milestone (restored from a killed run after reporting its last step)."""
    return steps[min(training.rung, len(steps) - 1)]


def pooled(run, executor: Any, limits=None) -> _Pooled:
    """``run``'s trainings as segments on ``executor``, ``q`` at once (default: its
    workers); in the driver's process, one at a time, when it is None (an isolated run).
    Once ``limits.why()`` (:class:`bojax.bo.stepwise.Limits`) says why, no new segment
    starts."""
    pool = Inline() if executor is None else as_executor(executor)
    slots = run.settings.q or (1 if executor is None else concurrency(pool))
    if isinstance(run, StepRun):
        return PooledSteps(run, pool, slots, limits)
    return PooledFreezeThaw(run, pool, slots, limits)
