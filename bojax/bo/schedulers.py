"""Which trainings go on: successive halving (ASHA) and Hyperband over reported steps.

A step-wise objective reports its value after each step (epoch); a scheduler decides at
*milestones* whether the training continues. The milestones of ``min_step``,
``max_step`` and ``eta`` are ``r, r*eta, r*eta^2, ...`` below ``max_step``, then
``max_step`` itself (:func:`milestones`).

* **ASHA** (Li et al. 2020, "A system for massively parallel hyperparameter tuning"):
  every design starts at the first milestone. At a milestone a training goes on if its
  value is among the best ``max(1, floor(m / eta))`` of the ``m`` values recorded there
  so far, itself included; decisions are taken at once, never revisited, so no training
  waits for others (the promotion rule of asynchronous successive halving written as a
  stopping rule, as Optuna's ``SuccessiveHalvingPruner`` does).
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
from dataclasses import dataclass, field

from bojax.errors import SettingsError


def milestones(min_step: int, max_step: int, eta: int) -> tuple[int, ...]:
    """``(r, r*eta, ..., max_step)``: the steps where a training may be stopped."""
    if not (1 <= min_step <= max_step):
        raise SettingsError(
            f"min_step must be in [1, max_step = {max_step}], got min_step = {min_step}"
        )
    steps, step = [], min_step
    while step < max_step:
        steps.append(step)
        step *= eta
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
        sizes = bracket_sizes(self.brackets, self.eta)
        credit = [0] * self.brackets
        chosen = 0
        for _ in range(design % sum(sizes) + 1):  # the cycle repeats after sum(sizes)
            credit = [c + s for c, s in zip(credit, sizes, strict=True)]
            chosen = max(range(self.brackets), key=lambda b: (credit[b], -b))
            credit[chosen] -= sum(sizes)
        return chosen

    def start(self, bracket: int) -> int:
        """The milestone (index into ``steps``) where bracket ``bracket`` first decides."""
        return bracket

    def keep(self, bracket: int, rung: int, value: float) -> bool:
        """Record ``value`` at milestone ``rung`` of ``bracket``; whether the training goes
        on (it is among the best ``max(1, m // eta)`` of the ``m`` recorded there)."""
        recorded = self.values.setdefault((bracket, rung), [])
        recorded.append(float(value))
        if rung == len(self.steps) - 1:
            return False  # max_step: the training is complete
        better = sum(v < value for v in recorded)
        return better < max(1, len(recorded) // self.eta)


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
