"""Freeze-thaw BO: one GP over (design, step) chooses what to train next.

Swersky, Snoek and Adams (2014, "Freeze-thaw Bayesian optimization") pause trainings and
thaw the promising ones; DyHPO (Wistuba et al. 2022) and ifBO (Rakotoarison et al.
2024) decide step by step from a model of the curves. Here the run's own surrogate
(any registered one; fully Bayesian by default) is fitted to the curves as points of a
space with one more coordinate, the step on a log scale (:func:`curve_space`); its
ARD kernel's length-scale along the step learns how far the value at one step predicts
the value at another, and a GP adds each design's own deviation, which fades as the
design trains (Swersky et al.'s exponential-decay kernel,
:class:`bojax.gp.kernels.LearningCurves`). Each decision compares

* thawing paused design ``j`` (trained to step ``t_j``): ``EI_j / (T - t_j)``, and
* starting a new design (the acquisition's maximiser at step ``T``): ``EI / T``,

where ``EI`` is the expected improvement at the last step ``T = max_step`` over the best
value seen, integrated over the hyperparameter samples (on power-warped values,
:mod:`bojax.bo.warping`, unless the run names a warping), and the denominator the steps
still needed to reach ``T`` (expected improvement per unit of cost, Snoek et al. 2012).
Once a training has failed, each ``EI`` is weighted by the failure classifier's
probability that a training there reaches ``T`` (Gelbart et al. 2014), thaws as much as
new designs: failed trainings are its failures at ``T``, every reported step a success
at its own step. The chosen training runs to its next milestone (``min_step * eta^k``)
and is paused again; one that reaches ``T`` is complete. The first
``max(initial, d + 2)`` designs come from the Sobol design, trained to successive
milestones (so the model sees every step range before it extrapolates to ``T``).

**Seconds** (``cost_aware=True``). Designs' steps may cost very different times (a
wide network's epoch against a narrow one's), and the budget a researcher has is
seconds. A cost-aware run prices both choices in seconds instead: thawing ``j`` costs
its steps still needed times its own seconds per step so far (:attr:`Design.rate`), a
new design ``T`` steps times the rate a MAP GP, fitted to the modelled designs' log
rates on their coordinates, predicts there; and the new design is itself the maximiser
of EI per predicted second (the loop's cost-aware acquisition, Snoek et al. 2012).
A step's seconds are what the training passes as ``report(step, value,
seconds=s)``, else the wall time since its previous report (:mod:`bojax.bo.segments`);
they are journalled with each segment (``training_seconds``), so a resume makes the same
decisions, but timed seconds make two runs of one seed differ where reported ones do not.

**Checkpoints.** An objective ``train(point, report, checkpoint=None)`` may hand
``report(step, value, checkpoint=state)`` its state; a thawed training is then called
with the last one and continues from the step it was passed at (a training may
checkpoint less often than it reports). Without a ``checkpoint`` parameter a thawed
training starts again from its first step. Either way the steps it repeats are charged
to the budget and not recorded twice; a decision prices a thaw at ``max_step`` less the
checkpoint's step (less the last step without one). With a journal, checkpoints are pickled to
``checkpoints/<design>.pkl`` so a resumed run thaws from them too.

**Cost.** A decision fits once, to at most ``MODEL_POINTS`` (design, step) values
(:func:`observations`: every design's last value first, then earlier values of the best
designs), warm-started from the previous decision's chains, so its cost stays bounded
however many steps the curves hold.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy.stats import norm

from bojax.bo import keys, schedulers
from bojax.bo.loop import (
    CostFit,
    FirstColumns,
    ask_batch,
    fit_classifier,
    fit_cost,
    fit_surrogate,
    init,
    models_failures,
    success_score,
    tell,
)
from bojax.bo.settings import Settings
from bojax.bo.stepwise import (
    Checkpoint,
    load_checkpoint,
    save_checkpoint,
    starts_after,
    takes,
)
from bojax.errors import SettingsError, SpaceExhaustedError
from bojax.parameters import Real
from bojax.spaces import STEP, Space
from bojax.threads import with_blas_threads

# (design, step) values a decision's model sees at most, a multiple of 16 (a bucket of
# its own, bojax.compilation.bucket_size). A decision is one fit; on 2 cores, under the
# one-BLAS-thread limit, OpenBLAS's Cholesky took 0.06-0.10 ms up to 124 rows and
# 0.16-0.25 ms from 128, and a decision (with the sampler and screen of today) 0.32-0.33 s
# at 112 rows against 0.79-0.83 s before (benchmarks/README.md, eleventh session).
MODEL_POINTS = 112


def curve_space(space: Space, max_step: int) -> Space:
    """``space`` with the step (log scale, ``[1, max_step]``) as its last coordinate."""
    if STEP in space.names:
        raise SettingsError(f"a parameter may not be named {STEP!r} in a freeze-thaw run")
    return Space([*space.parameters, Real(STEP, 1.0, float(max_step), log=True)])


@dataclass
class Design:
    """One design's training so far."""

    u: np.ndarray
    point: dict[str, Any]
    curve: list[list[float]] = field(default_factory=list)
    complete: bool = False  # trained to max_step (or ended by itself)
    failed: bool = False
    checkpoint: Checkpoint | None = None
    charged: int = 0  # steps trained, repeats included
    seconds: float = 0.0  # what they cost (reported by the training, else timed)

    @property
    def step(self) -> int:
        return int(self.curve[-1][0]) if self.curve else 0

    @property
    def rate(self) -> float | None:
        """Seconds per step trained so far; None before any."""
        return self.seconds / self.charged if self.charged > 0 else None


def observations(designs: list[Design], limit: int) -> list[tuple[int, int, float]]:
    """``(design, step, value)`` rows the model sees: each curve's values at steps 1, 2,
    4, 8, ... and its last, at most ``limit`` rows in all: every design's last value
    first (the best designs' when there are more), then the earlier values of the best
    designs."""
    usable = [j for j, d in enumerate(designs) if d.curve and not d.failed]
    usable.sort(key=lambda j: (min(v for _, v in designs[j].curve), j))
    last = [(j, *designs[j].curve[-1]) for j in usable][:limit]
    rows = list(last)
    for j in usable:
        curve = designs[j].curve
        for step, value in curve[:-1]:
            if len(rows) >= limit:
                break
            if step & (step - 1) == 0:  # a power of two
                rows.append((j, step, value))
    return [(j, int(s), float(v)) for j, s, v in rows]


def rates_of(designs: list[Design]) -> dict[int, float]:
    """Each trained design's seconds per step (a cost-aware run's cost data). A design
    whose steps were never timed (a journal without their seconds) gets the median rate
    of the successful designs (1 when none has one); none is below 1e-4 times that
    median, so a step reported to cost 0 s stays a finite log for the cost GP, not an
    outlier that would set its scale."""
    positive = [d.rate for d in designs if d.rate and not d.failed]
    typical = float(np.median(positive)) if positive else 1.0
    return {
        j: max(typical if d.rate is None else d.rate, 1e-4 * typical)
        for j, d in enumerate(designs)
        if d.curve
    }


def _expected_improvement(mean, var, best) -> np.ndarray:
    """EI below ``best`` per sample (S, M), averaged over the samples: (M,). NumPy, not
    JAX: the candidates' count changes every decision and would recompile."""
    mean, var = np.asarray(mean, np.float64), np.asarray(var, np.float64)
    sd = np.sqrt(np.maximum(var, 1e-18))
    z = (best - mean) / sd
    return np.mean((best - mean) * norm.cdf(z) + sd * norm.pdf(z), axis=0)


def _padded_rows(points: np.ndarray) -> np.ndarray:
    """``points`` repeated up to a power of two of rows: one predict program per size."""
    size = 1 << max(0, len(points) - 1).bit_length()
    return np.concatenate([points, np.repeat(points[-1:], size - len(points), axis=0)])


@dataclass
class Decision:
    design: int  # an existing design's index, or len(designs) for a new one
    u: np.ndarray
    until: int  # the step this segment trains to
    phase: str
    diagnostics: dict[str, float]
    seconds: float = 0.0  # what deciding took (journalled beside, not in, the diagnostics)


class FreezeThaw:
    """The decisions of a freeze-thaw run over ``space`` (a step-wise driver's model)."""

    def __init__(self, space: Space, settings: Settings):
        if settings.max_step < 2:
            raise SettingsError("freeze-thaw needs max_step >= 2 (steps to pause between)")
        self.space, self.settings = space, settings
        self.steps = schedulers.milestones(settings.min_step, settings.max_step, settings.eta)
        self.augmented = curve_space(space, settings.max_step)
        # Power-warped values unless the run names a warping: a curve's first steps would
        # otherwise stretch the standardised scale until the best designs' differences
        # vanish (docs/design.md).
        # (A cost-aware run's cost GP is its own, on each design's seconds per step.)
        self.model = settings.replace(
            exact_limit=None, fantasy="believer", initial=1, warping=settings.warping or "power",
            cost_aware=False,
        )  # fmt: skip
        self.least = max(settings.initial, space.dim + 2)
        self.chains = None  # the surrogate's state, carried from decision to decision

    def packed_chains(self) -> dict[str, Any] | None:
        """The carried chains as JSON (the surrogate's ``pack``), None before a fit."""
        if self.chains is None:
            return None
        return self.model.make_surrogate(self.augmented).pack(self.chains)

    def unpack_chains(self, saved: dict[str, Any]) -> None:
        """Carry :meth:`packed_chains`'s output (checked by ``Journal.load_sampler``) into
        the next decision's fit; ValueError if it does not fit this run's surrogate."""
        self.chains = self.model.make_surrogate(self.augmented).unpack(self.augmented.dim, saved)

    def _next_milestone(self, step: int) -> int:
        return next(s for s in self.steps if s > step)

    @with_blas_threads  # it fits outside ask's limit (the pruner calls it too)
    def worth(self, designs: list[Design], going: list[int], pending=()):
        """``(u, gains, costs, rows, success)``: the acquisition's best new design ``u``
        (at ``max_step``), the expected improvement at ``max_step`` of it and of each
        design in ``going`` (in that order) times its ``success`` (P(a training there
        reaches ``max_step``), 1 until one fails), what each still costs to reach
        ``max_step`` (steps; seconds in a ``cost_aware`` run), and how many (design, step)
        values the fit saw."""
        rows = observations(designs, MODEL_POINTS)
        state = init(self.augmented, self.model)
        if self.chains is not None:
            state = state._replace(surrogate=self.chains)
        unit_step = self.augmented.parameters[-1]
        for j, step, value in rows:
            tau = float(unit_step.encode(np.array([float(step)]))[0])
            state = tell(state, np.append(designs[j].u, tau), value)
        # Failed trainings are the failure classifier's labels, at max_step, as in ASHA's
        # proposals: left out, 33 of 39 designs went on into a region where every training
        # diverged (review). The surrogate fits the finite values only.
        for design in designs:
            if design.failed and not np.isnan(design.u).any():
                state = tell(state, np.append(design.u, 1.0), np.nan)
        fit = fit_surrogate(state)
        self.chains = fit.fitted
        lower, upper = np.zeros(self.augmented.dim), np.ones(self.augmented.dim)
        lower[-1] = 1.0
        # Pending: the designs in training elsewhere (at max_step). Paused ones are not:
        # a new design next to a paused one loses to thawing it.
        pending = np.reshape([np.append(u, 1.0) for u in pending], (-1, self.augmented.dim))
        rates, cost = self._cost_model(designs, rows) if self.settings.cost_aware else (None, None)
        # Never a design again: a paused one is thawed, not started over (in a discrete
        # space the proposal could otherwise repeat it).
        started = [np.append(d.u, 1.0) for d in designs if not np.isnan(d.u).any()]
        exclude = np.reshape(started, (-1, self.augmented.dim))
        try:
            points, state, infos = ask_batch(
                state, 1, pending, box=(lower, upper), fit=fit, cost=cost, exclude=exclude
            )
        except SpaceExhaustedError:  # every design of a discrete space started: thaw only
            points, infos, state = None, None, fit_classifier(state)
        going_rows = [np.append(designs[j].u, 1.0) for j in going]
        candidates = np.reshape([*(() if points is None else points), *going_rows],
                                (-1, self.augmented.dim))  # fmt: skip
        mean, var = fit.surrogate.predict(fit.fitted, jnp.asarray(_padded_rows(candidates)))
        gains = _expected_improvement(mean, var, float(np.min(fit.y)))[: len(candidates)]
        success = self._success_probability(state, candidates)
        gains = gains * success
        costs = np.array([self._cost(designs[j]) for j in going])
        if rates is not None:  # steps to seconds, the new design's rate as the cost GP predicts
            costs = costs * np.array([rates[j] for j in going])
        if points is None:  # no new design: it never wins
            return (None, np.append(-np.inf, gains), np.append(1.0, costs), len(rows),
                    np.append(1.0, success))  # fmt: skip
        new_cost = self.settings.max_step
        if rates is not None:
            new_cost *= infos[0].get("predicted_seconds") or cost.seconds_at(points[0])
        return points[0][:-1], gains, np.append(new_cost, costs), len(rows), success

    def _success_probability(self, state, candidates: np.ndarray) -> np.ndarray:
        """P(a training at each of ``candidates`` reaches ``max_step``): the failure
        classifier's (fitted in ``state``), once something failed, else 1. A new design's
        proposal is already weighted by it (Gelbart et al. 2014); unweighted, a paused
        design that looked good before the trainings around it diverged went on winning
        its thaw."""
        if not models_failures(state):
            return np.ones(len(candidates))
        classifier = self.model.make_failure_model(self.augmented)
        log_p = success_score(classifier)(
            jnp.asarray(_padded_rows(candidates)), classifier.conditioned(state.classifier)
        )
        return np.exp(np.asarray(log_p, np.float64))[: len(candidates)]

    def _cost_model(self, designs: list[Design], rows) -> tuple[dict[int, float], CostFit]:
        """Each design's seconds per step (:func:`rates_of`), and a cost GP fitted to the
        log rates of the designs in ``rows``, one value per design, read on the design's
        coordinates of a (design, step) point."""
        rates = rates_of(designs)
        seen = sorted({j for j, _, _ in rows})
        key = jax.random.fold_in(keys.iteration_key(self.settings.seed, len(designs)), 7)
        u = np.stack([designs[j].u for j in seen])
        fit = fit_cost(self.space, u, np.array([rates[j] for j in seen]), key)
        return rates, fit._replace(model=FirstColumns(fit.model, self.space.dim))

    def _cost(self, design: Design) -> float:
        """The steps a paused ``design`` still costs to reach ``max_step``: from its
        checkpoint's step, or from its last step without one. (A training without
        checkpoints starts again and is charged every step; pricing its thaw at all
        ``max_step`` steps stopped thawing altogether, docs/design.md.)"""
        saved = design.checkpoint
        return float(
            self.settings.max_step - (saved.resumes_at(design.step) if saved else design.step)
        )

    def decide(self, designs: list[Design], k: int, busy=frozenset()) -> Decision:
        """What decision number ``k`` trains: a new design or a paused one, and how far
        (its diagnostics' ``cost``: in steps, or seconds when ``cost_aware``). ``busy``:
        designs training elsewhere now (a parallel run's segments in flight)."""
        new = len(designs)
        known = [d.u for d in designs if not np.isnan(d.u).any()]
        # The Sobol design, at successive milestones (also while every design has failed:
        # there is nothing to fit). Placeholders of designs whose first segment a killed
        # parallel run lost (no point) do not count towards it.
        if len(known) < self.least or not observations(designs, 1):
            started = np.reshape(known, (-1, self.space.dim))
            try:
                points, _, _ = ask_batch(init(self.space, self.settings), 1, started)
                until = self.steps[len(known) % len(self.steps)]
                return Decision(new, points[0], until, "initial", {})
            except SpaceExhaustedError:  # a space smaller than the Sobol design
                if not observations(designs, 1):
                    raise
        paused = [j for j, d in enumerate(designs) if not (d.complete or d.failed or j in busy)]
        # Past MODEL_POINTS designs the model sees the best curves' last values only: a
        # paused design left out is among the worst by its best value, and its price
        # would ignore its own curve (that of a new design there: 8.6x its price with
        # the curve seen, review BJ), so it is no candidate while another is.
        shown = {j for j, _, _ in observations(designs, MODEL_POINTS)}
        paused = [j for j in paused if j in shown] or paused
        u_new, gains, costs, rows, success = self.worth(
            designs, paused, [designs[j].u for j in busy]
        )
        scores = gains / costs
        best = int(np.argmax(scores))
        if u_new is None and not paused:
            raise SpaceExhaustedError(
                "the space is exhausted: every design has been trained or is training"
            )
        info = {"expected_improvement": float(gains[best]), "cost": float(costs[best]),
                "model_points": rows}  # fmt: skip
        if success[best] < 1.0:  # (weighted: once a training failed, as `bojax show` says)
            info["success_probability"] = float(success[best])
        if best == 0:
            return Decision(new, u_new, self.steps[0], "new", info)
        j = paused[best - 1]
        until = self._next_milestone(designs[j].step)
        return Decision(j, designs[j].u, until, "thaw", {**info, "from_step": designs[j].step})


def open_segment(run, decision: Decision, designs: list[Design], reserved: int = 0) -> tuple:
    """The arguments of :func:`bojax.bo.segments.run_segment` for ``decision`` (a new
    design is added to ``designs``), its ``until`` cut where the budget, less the
    ``reserved`` steps of segments in flight, runs out."""
    if decision.design == len(designs):
        designs.append(Design(decision.u, run.space.from_unit(decision.u)))
    design = designs[decision.design]
    checkpoint = design.checkpoint if takes(run.train, "checkpoint") else None
    base = starts_after(checkpoint, design.step)  # where the training starts from
    until = min(decision.until, base + run.budget - run.spent - reserved)
    return (run.train, design.point, design.step, until, run.settings.max_step, checkpoint)


def close_segment(run, decision: Decision, designs: list[Design], segment, seconds: float):
    """Apply a segment's outcome to its design and the budget; its journal record."""
    design = designs[decision.design]
    charged = segment.charged
    design.curve.extend(segment.curve)
    if segment.checkpoint is not None:
        design.checkpoint = segment.checkpoint
    status, error, y = {"complete": "ok", "paused": "stopped"}.get(segment.status), None, None
    if status == "ok" and segment.y is not None:
        y = segment.y
    elif status is not None and design.curve:
        y = design.curve[-1][1]
    else:
        status, error = "failed", segment.error or "the training reported no value"
    if status == "failed" and charged == 0:
        charged = 1  # failing before a step costs one: the budget bounds a run of failures
    run.spent += charged
    design.complete, design.failed = status == "ok", status == "failed"
    # A paused design thaws from it; a complete one keeps its final state, as ASHA's does.
    if run.journal is not None and segment.checkpoint is not None and status != "failed":
        save_checkpoint(run.journal, decision.design, design.checkpoint)
    return {
        "phase": decision.phase,
        "x": design.point,
        "u": np.asarray(design.u).tolist(),
        "y": y,
        "status": status,
        "error": error,
        "seconds": seconds,
        "diagnostics": {
            **decision.diagnostics,
            "design": decision.design,
            "charged": charged,
            "training_seconds": segment.seconds,
        },
        "curve": segment.curve,
    }


def train_segment(
    run, decision: Decision, designs: list[Design], on_report=None, seconds: float = 0.0
) -> dict:
    """Run one decision's segment of training here (:func:`bojax.bo.segments.run_segment`,
    with ``on_report``, its seconds counted on from ``seconds``, a killed run's; in a
    process of its own with ``isolate``); the journal record of it."""
    from bojax.bo.segments import run_segment, run_segment_isolated

    args = open_segment(run, decision, designs)
    started = time.perf_counter()
    if run.settings.isolated:
        segment = run_segment_isolated(run.settings.timeout, *args)
        segment = dataclasses.replace(segment, seconds=seconds + segment.seconds)
    else:
        segment = run_segment(*args, on_report=on_report, seconds=seconds)
    return close_segment(run, decision, designs, segment, time.perf_counter() - started)


def add_cost(design: Design, record: dict[str, Any]) -> None:
    """Add a segment's record's steps and seconds to its design's totals: the running run
    and a replay of its journal add the same numbers in the same order, so a cost-aware
    run resumes to the same decisions."""
    info = record["diagnostics"]
    design.charged += int(info.get("charged", 0))
    # Journals before training_seconds kept the segment's wall seconds only.
    design.seconds += float(info.get("training_seconds", record.get("seconds") or 0.0))


def add_record(designs: list[Design], record: dict[str, Any], space: Space) -> None:
    """Apply one journalled segment to ``designs``. A design whose first segment never
    ended (in flight when a parallel run's driver died) stays a failed placeholder."""
    j = int(record["diagnostics"]["design"])
    while len(designs) <= j:
        if len(designs) == j:
            u = np.asarray(record["u"], np.float64)
            designs.append(Design(u, space.from_unit(u)))
        else:
            designs.append(Design(np.full(space.dim, np.nan), {}, failed=True))
    design = designs[j]
    if design.failed and not design.curve and np.isnan(design.u).all():
        u = np.asarray(record["u"], np.float64)
        designs[j] = design = Design(u, space.from_unit(u))
    design.curve.extend(record["curve"])
    add_cost(design, record)
    design.complete = design.complete or record["status"] == "ok"
    design.failed = design.failed or record["status"] == "failed"


def replay(records: list[dict[str, Any]], space: Space, journal=None) -> list[Design]:
    """The designs of a journal's freeze-thaw records, the paused ones with the
    checkpoints saved in ``journal``'s folder."""
    designs: list[Design] = []
    for record in records:
        add_record(designs, record, space)
    if journal is not None:
        for j, design in enumerate(designs):
            if not (design.complete or design.failed):
                design.checkpoint = load_checkpoint(journal, j, design.step)
    return designs


def best_design(designs: list[Design]) -> int | None:
    """The complete design with the lowest last value (any design while none is)."""
    pool = [j for j, d in enumerate(designs) if d.complete and d.curve] or [
        j for j, d in enumerate(designs) if d.curve and not d.failed
    ]
    return min(pool, key=lambda j: designs[j].curve[-1][1]) if pool else None
