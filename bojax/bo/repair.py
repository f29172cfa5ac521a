"""``bojax repair``: make a journal that resume refuses resumable again, losing nothing.

Two drivers appending to one journal (a folder on a file system without working
``flock``, or a copy run twice) leave repeated iteration and proposal numbers, and a hand
edit can leave records that :mod:`bojax.bo.records` refuses. :func:`repair` keeps every
distinct finished evaluation, sets the rest aside with the reason, and keeps the original.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bojax.bo.journal import Journal, journal_lines, load_json, write_text_atomic
from bojax.bo.records import pending_problem, record_problem, same_design
from bojax.errors import RunFolderError
from bojax.spaces import Space


def repair(journal: Journal) -> Repaired:
    """Rewrite ``journal.jsonl`` so a resume accepts it, losing no finished evaluation.

    Two drivers appending to one journal (a folder on a file system without working
    ``flock``, or a copy run twice) leave repeated iteration and proposal numbers,
    and a hand edit can leave records resume refuses. Here every line is checked as a
    resume checks it; a line that fails, a torn last line, and a second evaluation of
    a proposal at the same point (two drivers ran the same design: the first success,
    else the first, is kept) go to ``journal.rejected.jsonl`` with the reason. Two
    *different* points sharing a proposal number are both real evaluations: both
    stay, the later under a fresh number. Iterations are renumbered in line order,
    pending entries already recorded (or unusable) are dropped, and ``sampler.json``
    is removed, unless the records its chains were fitted to stand unchanged, so the next
    resume replays the surrogate's fits from the records (and
    ``summary.json``, which no longer tells the records: the resume writes one). The
    original journal stays as ``journal.jsonl.bak-<time>``; a journal that needs
    nothing is left untouched.
    """
    space = journal.space()  # also refuses a folder of another format
    with journal.lock():
        return _repair(journal, space)


def _read(path: Path) -> bytes | None:
    """``path``'s bytes, None if it is missing; :class:`RunFolderError` if unreadable."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:  # a folder of that name, no permission
        raise RunFolderError(f"cannot read {path}: {error.strerror or error}") from None


def _repair(journal: Journal, space: Space) -> Repaired:
    metrics, max_step = journal.metrics(), journal.max_step()
    raw = _read(journal.records_path) or b""
    complete, tail, _ = journal_lines(raw)  # (a record that lost its newline is whole)
    kept: list[tuple[int, dict[str, Any]]] = []  # (line, record), in line order
    rejected: list[dict[str, Any]] = []
    at: dict[int, list[int]] = {}  # proposal number -> indices into kept
    shared: list[int] = []  # kept records whose number an earlier other point holds
    evaluated: set[int] = set()
    replaced: set[int] = set()  # lines whose record a later success stands in for
    duplicates = 0
    for number, line in enumerate(complete, start=1):
        try:
            record = load_json(line)
        except (ValueError, RecursionError) as error:
            text = line.decode("utf-8", "replace")
            rejected.append({"line": number, "reason": f"not JSON: {error}", "text": text})
            continue
        problem = record_problem(space, record, metrics, max_step)
        if problem is not None:
            rejected.append({"line": number, "reason": problem, "record": record})
            continue
        proposal = record.get("proposal", record["iteration"])
        record = {**record, "proposal": proposal}  # explicit: iterations are renumbered
        evaluated.add(proposal)
        same = [k for k in at.get(proposal, []) if same_design(space, kept[k][1], record)]
        if same:
            duplicates += 1
            first_line, first = kept[same[0]]
            if first["status"] == "failed" and record["status"] == "ok":
                kept[same[0]] = (first_line, record)  # the success stands in its place
                replaced.add(first_line)
                reason = f"proposal {proposal} was evaluated again at line {number}, and ok"
                rejected.append({"line": first_line, "reason": reason, "record": first})
            else:
                reason = (
                    f"a second evaluation of proposal {proposal} at the point of line "
                    f"{first_line}, which is kept"
                )
                rejected.append({"line": number, "reason": reason, "record": record})
            continue
        if proposal in at:
            shared.append(len(kept))
        at.setdefault(proposal, []).append(len(kept))
        kept.append((number, record))
    if tail:
        reason = "a torn last line (the write was cut short: that evaluation did not finish)"
        text = tail.decode("utf-8", "replace")
        rejected.append({"line": len(complete) + 1, "reason": reason, "text": text})
    invalid = len(rejected) - duplicates

    pending, pending_dropped, pending_changed = _repair_pending(journal, space, evaluated, rejected)
    fresh = max([*evaluated, *(e["proposal"] for e in pending)], default=-1) + 1
    for k in shared:
        kept[k][1]["proposal"], fresh = fresh, fresh + 1
    renumbered = sum(record["iteration"] != i for i, (_, record) in enumerate(kept))
    if not (rejected or renumbered or shared or pending_changed):
        return Repaired(len(kept), 0, 0, 0, 0, 0, False, None, None)

    stamp = time.strftime("%Y%m%d-%H%M%S")
    records = [{**record, "iteration": i} for i, (_, record) in enumerate(kept)]
    # Leading records that stand as they were, where they were, with their numbers (a
    # record renumbered or given a fresh proposal number changes what a resume reads).
    intact, reproposed = 0, set(shared)
    while (
        intact < len(kept) and kept[intact][0] == intact + 1 and intact + 1 not in replaced
        and kept[intact][1]["iteration"] == intact and intact not in reproposed
    ):  # fmt: skip
        intact += 1
    try:
        backup, removed = _rewrite(
            journal, stamp, records, rejected, pending, pending_changed, intact
        )
    except RunFolderError:
        raise
    except OSError as error:  # a full disk, a read-only folder: the journal stands
        raise RunFolderError(f"cannot repair {journal.folder}: {error}") from None
    return Repaired(
        kept=len(kept),
        duplicates=duplicates,
        invalid=invalid,
        renumbered=renumbered,
        reproposed=len(shared),
        pending_dropped=pending_dropped,
        sampler_removed=removed,
        backup=backup,
        rejected=journal.folder / "journal.rejected.jsonl" if rejected else None,
    )


def _rewrite(
    journal: Journal,
    stamp: str,
    records: list[dict[str, Any]],
    rejected: list[dict[str, Any]],
    pending: list[dict[str, Any]],
    pending_changed: bool,
    intact: int,
) -> tuple[Path | None, bool]:
    """Write a repair out: the backups first, then the set-aside lines, and only then
    the new journal (atomically), so an interrupted repair loses nothing. ``sampler.json``
    stays if its chains were fitted to the first ``intact`` records alone, which stand as
    they were (a resume without it refits at every past ask: 0.75 s each at n = 380)."""
    keep_chains = journal.load_sampler(intact) is not None
    backup = None
    if journal.records_path.exists():
        backup = _unused(journal.folder / f"{journal.records_path.name}.bak-{stamp}")
        shutil.copy2(journal.records_path, backup)
    if pending_changed and journal.pending_path.exists():
        shutil.copy2(journal.pending_path, _unused(journal.folder / f"pending.json.bak-{stamp}"))
    if rejected:
        text = "".join(json.dumps({"repaired": stamp, **r}) + "\n" for r in rejected)
        with open(journal.folder / "journal.rejected.jsonl", "a") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    text = "".join(json.dumps(r, allow_nan=False) + "\n" for r in records)
    write_text_atomic(journal.records_path, text)
    journal.reopen()  # the summary no longer tells these records: the resume writes one
    if pending_changed:
        journal.save_pending(pending)
    removed = journal.sampler_path.exists() and not keep_chains
    if removed:
        journal.sampler_path.unlink()
    return backup, removed


def _repair_pending(
    journal: Journal, space: Space, evaluated: set[int], rejected: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], int, bool]:
    """``(entries to keep, entries dropped, whether the file changes)``: unusable
    entries go to ``rejected``; entries already recorded are dropped (a resume would
    skip them anyway, and a repaired record may no longer carry their number)."""
    raw = _read(journal.pending_path)
    if raw is None:
        return [], 0, False
    try:
        entries = load_json(raw)
    except (ValueError, RecursionError) as error:  # not JSON, not UTF-8, a key twice
        reason, text = f"pending.json is not JSON: {error}", raw.decode("utf-8", "replace")
        rejected.append({"pending": 0, "reason": reason, "text": text})
        return [], 0, True
    if not isinstance(entries, list):
        reason = "pending.json does not hold a list"
        rejected.append({"pending": 0, "reason": reason, "entry": entries})
        return [], 0, True
    keep, dropped = [], 0
    for number, entry in enumerate(entries, start=1):
        problem = pending_problem(space, entry)
        if problem is not None:
            rejected.append({"pending": number, "reason": problem, "entry": entry})
            dropped += 1
        elif entry["proposal"] in evaluated:
            dropped += 1
        else:
            keep.append(entry)
    return keep, dropped, dropped > 0


def _unused(path: Path) -> Path:
    """``path``, or ``path-2``, ``path-3``...: a backup never overwrites an older one."""
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}-{n}")
    return candidate


@dataclass(frozen=True)
class Repaired:
    """What :meth:`Journal.repair` did (counts of records), for ``bojax repair`` to say."""

    kept: int
    duplicates: int  # second evaluations of one proposal at one point, set aside
    invalid: int  # lines a resume refuses (or a torn last line), set aside
    renumbered: int  # kept records whose iteration number changed
    reproposed: int  # kept records given a fresh proposal number
    pending_dropped: int  # pending entries already recorded, or unusable
    sampler_removed: bool
    backup: Path | None
    rejected: Path | None

    @property
    def changed(self) -> bool:
        return self.backup is not None or self.rejected is not None

    def lines(self) -> list[str]:
        if not (self.changed or self.pending_dropped):
            return [f"nothing to repair: {self.kept} record(s), all usable and in sequence"]
        out = [
            f"kept {self.kept} evaluation(s), {self.renumbered} renumbered; set aside "
            f"{self.duplicates} repeated evaluation(s) and {self.invalid} unusable line(s)"
            + (f" in {self.rejected}" if self.rejected else "")
        ]
        if self.reproposed:
            out.append(
                f"{self.reproposed} evaluation(s) got a fresh proposal number (another point "
                "held theirs)"
            )
        if self.pending_dropped:
            out.append(
                f"dropped {self.pending_dropped} pending entr(ies), already recorded or unusable"
            )
        if self.sampler_removed:
            out.append("removed sampler.json: the next resume replays the surrogate's fits")
        if self.backup:
            out.append(f"the original journal is kept as {self.backup}")
        return out
