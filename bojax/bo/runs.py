"""A run folder as data, read-only: what ``bojax show`` (and ``bojax plot``) read.

``load_run(folder)`` reads ``run.json``, ``journal.jsonl``, ``pending.json``,
``sampler.json`` and ``summary.json`` (see :mod:`bojax.bo.journal`) without writing
anything, so it is safe beside a run that is still going: a half-written last record is
skipped, not truncated. A folder without ``run.json`` or with a corrupt record is a
:class:`~bojax.errors.JournalError`.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bojax.bo import pareto
from bojax.bo.evaluation import short_repr
from bojax.bo.journal import Journal
from bojax.bo.metrics import Metrics
from bojax.errors import JournalError
from bojax.parameters.base import is_number
from bojax.spaces import Space


@dataclass(frozen=True)
class Run:
    """One run's records. ``records`` are in finishing order, ``maximize`` from settings."""

    folder: Path
    space: Space
    settings: dict[str, Any]
    records: list[dict[str, Any]]
    pending: list[dict[str, Any]]
    sampler: dict[str, Any] | None
    summary: dict[str, Any] | None
    metrics: Metrics | None = None  # a run with several metrics (settings.objectives)
    options: dict[str, Any] | None = None  # the last call's run options (none journalled)

    @property
    def maximize(self) -> bool:
        return bool(self.settings.get("maximize", False))

    @property
    def finished(self) -> bool:
        return self.summary is not None

    @property
    def stepwise(self) -> bool:
        """Whether its objective was a step-wise ``train(point, report)``: records with
        learning curves."""
        return any("curve" in record for record in self.records)

    @property
    def refits(self) -> bool:
        """Whether ``bojax plot`` refits its surrogate for slices: one objective, not
        step-wise (a front or learning curves are drawn from the journal alone)."""
        return self.metrics is None and not self.stepwise

    @property
    def failures(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r["status"] == "failed"]

    def front(self) -> dict[str, Any]:
        """With several metrics: the Pareto set, reference point and hypervolume after
        each record (:func:`bojax.bo.pareto.summary`), computed once per loaded run
        (``bojax show`` and ``bojax plot`` read it from several places)."""
        return self._front

    @functools.cached_property
    def _front(self) -> dict[str, Any]:
        return pareto.summary(self.metrics, self.records, self.settings.get("reference_point"))

    def best_so_far(self) -> list[float]:
        """The best value after each record (NaN until the first success); with several
        metrics, the hypervolume."""
        if self.metrics is not None:
            return self.front()["hypervolume"]
        best, out = math.nan, []
        better = max if self.maximize else min
        for record in self.records:
            if record["status"] == "ok":
                best = record["y"] if math.isnan(best) else better(best, record["y"])
            out.append(best)
        return out

    def best(self) -> dict[str, Any] | None:
        """The best successful record, or None. A step-wise run with no training trained
        to the end names its best stopped one (a record whose status is ``"stopped"``),
        as its result does."""
        ok = [r for r in self.records if r["status"] == "ok"]
        if not ok:  # (a step-wise run minimises one value)
            return None if self.metrics is not None else stepwise_best(self.records)
        if self.metrics is not None:  # the feasible best in the first objective
            name = self.metrics.objectives[0][0]
            return {**pareto.best_record(self.metrics, self.records), "objective": name}
        return (max if self.maximize else min)(ok, key=lambda r: r["y"])


def stepwise_best(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A step-wise run's best record: the lowest value of a training trained to the end,
    or while none was, of one stopped early; None if every training failed."""
    done = [r for r in records if r["status"] == "ok"]
    candidates = done or [r for r in records if r["status"] == "stopped"]
    return min(candidates, key=lambda r: r["y"]) if candidates else None


def load_run(folder: str | Path) -> Run:
    """The run in ``folder``. ``run.json`` is checked as the untrusted data it is (a
    :class:`~bojax.errors.JournalError` names it and the key), and every record and
    pending entry against the run's space as a resume checks it, so ``bojax show`` never
    prints a best point outside it."""
    journal = Journal(folder)
    settings, options = journal.section("settings"), journal.section("options")
    space = journal.space()
    metrics = journal.metrics()
    reference = settings.get("reference_point")
    if reference is not None and not (
        metrics is not None
        and isinstance(reference, list)
        and len(reference) == len(metrics.objectives)
        and all(is_number(v) for v in reference)
    ):
        raise JournalError(
            f"{journal.header_path}: 'reference_point' must be one finite number per "
            f"objective, got {short_repr(reference, 80)}"
        )
    try:
        summary = json.loads(journal.summary_path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        summary = None  # still running, interrupted, or caught mid-write
    except (ValueError, RecursionError) as error:
        raise JournalError(f"{journal.summary_path} is corrupt: {error}") from None
    if summary is not None and not isinstance(summary, dict):
        raise JournalError(f"{journal.summary_path}: expected a JSON object")
    return Run(
        folder=journal.folder,
        space=space,
        settings=dict(settings),
        records=journal.read(repair=False, space=space, metrics=metrics),
        pending=journal.load_pending(space),
        sampler=journal.load_sampler(),
        summary=summary,
        metrics=metrics,
        options=dict(options),
    )


def design_counts(records: list[dict[str, Any]]) -> tuple[int, int] | None:
    """``(designs, failed designs)`` of a freeze-thaw run's records, one record per
    segment (a design's training is paused and thawed in several); None for a run whose
    records are whole evaluations."""
    if not records or "design" not in (records[0].get("diagnostics") or {}):
        return None
    failed = {int(r["diagnostics"]["design"]) for r in records if r["status"] == "failed"}
    return len({int(r["diagnostics"]["design"]) for r in records}), len(failed)
