"""Which trainings go on: successive halving (ASHA) and Hyperband over reported steps.

A step-wise objective reports its value after each step (epoch); a scheduler decides at
*milestones* whether the training continues. The milestones of ``min_step``,
``max_step`` and ``eta`` are ``r, r*eta, r*eta^2, ...`` below ``max_step``, then
``max_step`` itself, less a power that ``max_step`` follows by under a factor
``sqrt(eta)`` (:func:`milestones`).

* **ASHA** (Li et al. 2020, "A system for massively parallel hyperparameter tuning"):
  every design starts at the first milestone. At a milestone a training goes on if its
  value is among the best ``max(1, floor(m / eta))`` of the ``m`` values recorded there
  so far, itself included; decisions are taken at once, never revisited, so no training
  waits for others (the promotion rule of asynchronous successive halving written as a
  stopping rule, as Optuna's ``SuccessiveHalvingPruner`` does). Equal values rank
  together, as Optuna's do: a value goes on unless ``max(1, floor(m / eta))`` recorded
  values are strictly better, so a metric that cannot yet tell designs apart (every
  network at chance after one epoch) stops none of them rather than all but the first.
* **Hyperband** (Li et al. 2018): brackets ``b = 0..B`` start at milestone ``b`` (bracket
  0 is ASHA's; bracket ``B`` trains every design to ``max_step``), each with its own
  rung records. Hyperband sizes bracket ``b`` at ``ceil((B + 1) / (B + 1 - b) * eta^(B -
  b))`` designs per round, so each bracket spends about the same steps; designs join
  brackets by smooth weighted round robin over those sizes, so brackets interleave and
  the assignment depends only on the design's number (which keeps a resumed run's
  brackets those of the uninterrupted one).

Both are plain records of values: :meth:`Rungs.keep` is the decision, :meth:`Rungs.bracket`
the bracket of design ``j``. A new scheduler is one ``SCHEDULERS`` line (its key is a value of the
``early_stopping`` setting).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

from bojax.errors import SettingsError


def milestones(min_step: int, max_step: int, eta: int) -> tuple[int, ...]:
    """``(r, r*eta, ..., max_step)``: the steps where a training may be stopped.

    A power ``r*eta^k`` (``k >= 1``) that ``max_step`` follows by less than a factor
    ``sqrt(eta)`` is left out: with ``max_step = 28`` and ``eta = 3`` a milestone at 27
    would stop two thirds of the trainings one step short of complete, having paid for
    nearly all of it (Hyperband's rungs are ``R eta^-i``, anchored at ``R``, Li et al.
    2018). Those trainings go on from 9 to 28, a factor ``eta`` as between the others.
    """
    if not (1 <= min_step <= max_step):
        raise SettingsError(
            f"min_step must be in [1, max_step = {max_step}], got min_step = {min_step}"
        )
    steps, step = [], min_step
    while step < max_step:
        steps.append(step)
        step *= eta
    if len(steps) > 1 and max_step < steps[-1] * math.sqrt(eta):
        steps.pop()
    return (*steps, max_step)


def bracket_sizes(count: int, eta: int) -> tuple[int, ...]:
    """Hyperband's designs per round in each of ``count`` brackets, bracket 0 (the most
    aggressive, starting at the first milestone) first."""
    top = count - 1
    return tuple(math.ceil((top + 1) / (top + 1 - b) * eta ** (top - b)) for b in range(count))


@dataclass
class Rungs:
    """A scheduler's records: per bracket and milestone, the values recorded there.

    ``brackets`` is how many brackets designs join (1: ASHA; ``len(milestones)``:
    Hyperband)."""

    steps: tuple[int, ...]
    eta: int
    brackets: int = 1
    values: dict[tuple[int, int], list[float]] = field(default_factory=dict)

    def bracket(self, design: int) -> int:
        """The bracket design number ``design`` joins (smooth weighted round robin)."""
        if self.brackets == 1:
            return 0
        return _round_robin(self.brackets, self.eta, design)

    def start(self, bracket: int) -> int:
        """The milestone (index into ``steps``) where bracket ``bracket`` first decides."""
        return bracket

    def keep(self, bracket: int, rung: int, value: float) -> bool:
        """Record ``value`` at milestone ``rung`` of ``bracket``; whether the training goes
        on (it is among the best ``max(1, m // eta)`` of the ``m`` recorded there, equal
        values ranking together: fewer than that many are strictly better)."""
        recorded = self.values.setdefault((bracket, rung), [])
        recorded.append(float(value))
        if rung == len(self.steps) - 1:
            return False  # max_step: the training is complete
        better = sum(v < value for v in recorded)
        return better < max(1, len(recorded) // self.eta)


# Per (brackets, eta): the round robin's brackets so far in its cycle, and its credits.
# Kept across Rungs (BojaxPruner makes one per decision and asks every trial's bracket):
# the cycle has sum(bracket_sizes) places, some 10^6 with eleven brackets of eta = 3,
# and replaying it from the start for each design cost 0.5 s a call at design 10^5.
_ROUND_ROBIN: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
_ROUND_ROBIN_LOCK = threading.Lock()  # Optuna's n_jobs threads share a pruner


def _round_robin(brackets: int, eta: int, design: int) -> int:
    """Place ``design`` of Hyperband's smooth weighted round robin over
    :func:`bracket_sizes`: each turn adds every bracket's size to its credit and the
    bracket of the most credit (the lowest on ties) is chosen and pays the sizes' sum;
    the cycle repeats after ``sum(sizes)`` turns."""
    sizes = bracket_sizes(brackets, eta)
    total = sum(sizes)
    with _ROUND_ROBIN_LOCK:
        order, credit = _ROUND_ROBIN.setdefault((brackets, eta), ([], [0] * brackets))
        while len(order) <= design % total:
            for b in range(brackets):
                credit[b] += sizes[b]
            chosen = max(range(brackets), key=lambda b: (credit[b], -b))
            credit[chosen] -= total
            order.append(chosen)
        return order[design % total]


def asha(steps: tuple[int, ...], eta: int) -> Rungs:
    return Rungs(steps, eta, brackets=1)


def hyperband(steps: tuple[int, ...], eta: int) -> Rungs:
    return Rungs(steps, eta, brackets=len(steps))


def none(steps: tuple[int, ...], eta: int) -> Rungs:
    """Every design trained to ``max_step`` (one bracket starting at the last milestone)."""
    return _Full(steps, eta, brackets=1)


class _Full(Rungs):
    def start(self, bracket: int) -> int:
        return len(self.steps) - 1


SCHEDULERS = {"hyperband": hyperband, "asha": asha, "none": none}
