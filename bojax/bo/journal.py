"""Crash-safe run records: ``run.json``, ``journal.jsonl``, ``sampler.json``, ``summary.json``.

* ``run.json``: the space and settings, written once. A resume with a different space
  or settings raises :class:`~bojax.errors.JournalError` and touches nothing.
* ``journal.jsonl``: one JSON record per finished evaluation, flushed and ``fsync``-ed
  before the run moves on, so a ``kill -9`` loses at most the evaluation in flight. A
  torn last line (the kill hit mid-write) is dropped on resume; a corrupt line before
  the last is an error.
* ``sampler.json``: the surrogate's chain state *before* the fit of iteration ``t``,
  tagged with ``t``, replaced atomically. Together with keys derived from the seed and
  the iteration, it makes a resumed run propose exactly what an uninterrupted one would.
* ``pending.json``: the evaluations handed out and not yet finished (proposal number,
  point, diagnostics), replaced atomically whenever that set changes; a resume issues
  them again. Records and pending entries share the ``proposal`` number.
* ``summary.json``: best point, best value, counts and time, at the end.
* ``lock``: held (``flock``) by the process running in the folder, and naming it; the
  kernel releases it when that process dies, so a killed run leaves no stale lock.

A run folder is untrusted input: ``run.json`` must be of this bojax's ``format``, and a
resume or ``bojax show`` checks every record and pending entry against the run's space
(:mod:`bojax.bo.records`). :meth:`Journal.repair` (``bojax repair``) rewrites a journal
they refuse, keeping the original and setting aside what it drops.

Floats are written with ``repr`` precision by :mod:`json`, so they read back bit-exact.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bojax.bo.records import pending_problem, record_problem, same_design
from bojax.errors import BojaxError, JournalError, RunFolderError, RunLockedError

if TYPE_CHECKING:
    from bojax.spaces import Space

try:
    import fcntl
except ImportError:  # Windows: runs are not locked there
    fcntl = None

FORMAT_VERSION = 1


def _write_atomic(path: Path, payload: Any) -> None:
    _write_text_atomic(path, json.dumps(payload, indent=1))


def _write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as error:  # a full disk, a folder made read-only: the old file stands
        raise RunFolderError(f"cannot write {path}: {error.strerror or error}") from None


class Journal:
    """The files of one run in ``folder``."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.header_path = self.folder / "run.json"
        self.records_path = self.folder / "journal.jsonl"
        self.sampler_path = self.folder / "sampler.json"
        self.summary_path = self.folder / "summary.json"
        self.pending_path = self.folder / "pending.json"

    # -- the lock ----------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the folder for one process: :class:`RunLockedError`, naming the holder,
        if another live process holds it. ``flock`` is released by the kernel when its
        holder dies, so a killed run never leaves a stale lock behind."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle = open(self.folder / "lock", "a+")
        except OSError as error:
            raise RunFolderError(
                f"cannot write the run folder {self.folder}: {error.strerror}"
            ) from None
        with handle:
            if fcntl is not None:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    handle.seek(0)
                    holder = handle.read(500).strip() or "a process that has not said who it is"
                    raise RunLockedError(
                        f"{self.folder} is in use by another run ({holder}); wait for it to "
                        "end, or stop it first"
                    ) from None
            handle.seek(0)
            handle.truncate()
            since = time.strftime("%Y-%m-%d %H:%M:%S")
            handle.write(f"pid {os.getpid()} on {socket.gethostname()} since {since}\n")
            handle.flush()
            try:
                yield
            finally:
                handle.truncate(0)  # released: it names nobody

    # -- header ----------------------------------------------------------------------
    def exists(self) -> bool:
        return self.header_path.exists() or self.records_path.exists()

    def start(self, header: Mapping[str, Any]) -> None:
        """Begin a new run; refuses to overwrite an existing one."""
        if self.exists():
            raise JournalError(
                f"{self.folder} already holds a run; pass resume=True (--resume) to continue "
                "it, or choose another folder"
            )
        self.folder.mkdir(parents=True, exist_ok=True)
        _write_atomic(self.header_path, {"format": FORMAT_VERSION, **header})
        self.records_path.touch()

    def header(self) -> dict[str, Any]:
        """The stored ``run.json``; :class:`JournalError` if it is missing, corrupt, or
        written in another run-folder format (records of another format may mean other
        things, so neither resume nor ``bojax show`` reads them)."""
        try:
            header = json.loads(self.header_path.read_text())
        except FileNotFoundError:
            raise JournalError(
                f"{self.folder} holds no run ({self.header_path.name} is missing)"
            ) from None
        except (ValueError, RecursionError) as error:  # bad JSON or UTF-8, 5 000 digits, nesting
            raise JournalError(f"{self.header_path} is corrupt: {error}") from None
        except OSError as error:  # a folder named run.json, no permission
            raise JournalError(f"cannot read {self.header_path}: {error.strerror}") from None
        if not isinstance(header, dict):
            raise JournalError(f"{self.header_path} is corrupt: not a JSON object")
        self._check_format(header.get("format"))
        return header

    def _check_format(self, made: Any) -> None:
        """A clear refusal of a folder another bojax wrote, saying what to do instead."""
        if made == FORMAT_VERSION and not isinstance(made, bool):
            return
        from bojax import __version__

        ours = f"this bojax ({__version__}) reads run-folder format {FORMAT_VERSION}"
        if made is None:
            why = (
                f"{self.header_path} names no run-folder format, so no bojax release made it "
                f'(every one writes "format"); it was written or edited by hand'
            )
            todo = "start a new run in another folder"
        elif isinstance(made, int) and not isinstance(made, bool) and made > FORMAT_VERSION:
            why = f"{self.folder} was made by a newer bojax (run-folder format {made})"
            todo = "upgrade bojax to resume or show it"
        elif isinstance(made, int) and not isinstance(made, bool):
            why = f"{self.folder} was made by an older bojax (run-folder format {made})"
            todo = "resume or show it with that older bojax, or start a new run elsewhere"
        else:
            why = f"{self.header_path} holds an unknown run-folder format {made!r}"
            todo = "start a new run in another folder"
        raise JournalError(f"{why}; {ours}: {todo}")

    def space(self) -> Space:
        """The run's space, from ``run.json``: what its records are checked against."""
        from bojax.spaces import Space

        header = self.header()
        if not isinstance(header.get("space"), dict):
            raise JournalError(f"{self.header_path} holds no space")
        try:
            return Space.from_dict(header["space"])
        except BojaxError as error:
            raise JournalError(f"{self.header_path}: its space is unusable: {error}") from None

    def check(self, header: Mapping[str, Any]) -> None:
        """Raise :class:`JournalError` unless the stored header equals ``header``."""
        stored = self.header()
        expected = json.loads(json.dumps({"format": FORMAT_VERSION, **header}))
        for key in sorted(set(stored) | set(expected)):
            if stored.get(key) != expected.get(key):
                raise JournalError(
                    f"cannot resume {self.folder}: its {key!r} differs from this run's "
                    f"(stored {stored.get(key)!r}, now {expected.get(key)!r})"
                )

    # -- records ---------------------------------------------------------------------
    def read(self, repair: bool = True, space: Space | None = None) -> list[dict[str, Any]]:
        """All complete records; drops a torn last line, and truncates it away when
        ``repair`` (a resuming run does; a reader beside a live run must not).

        With ``space`` (resume and ``bojax show`` pass the run's), every record is checked
        against it (:func:`bojax.bo.records.record_problem`): a record resume cannot trust
        is a :class:`JournalError` naming ``path:line`` and the field, never a best point
        outside the space or a bare ``KeyError`` later."""
        if not self.records_path.exists():
            return []
        raw = self.records_path.read_bytes()
        lines = raw.split(b"\n")
        complete, tail = lines[:-1], lines[-1]  # tail is b"" when the file ends in a newline
        records: list[dict[str, Any]] = []
        proposals: dict[Any, int] = {}  # proposal number -> line
        for number, line in enumerate(complete, start=1):
            where = f"{self.records_path}:{number}"
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                raise JournalError(f"{where} is corrupt: {error}; {self._repairable}") from None
            problem = None if space is None else record_problem(space, record)
            if problem is not None:
                raise JournalError(f"{where}: {problem}; {self._repairable}")
            if not isinstance(record, dict) or record.get("iteration") != len(records):
                raise JournalError(
                    f"{where} is out of sequence (expected iteration {len(records)}); "
                    f"{self._repairable}"
                )
            proposal = record.get("proposal", record["iteration"])
            if space is not None and proposal in proposals:  # checked: a whole number
                raise JournalError(
                    f"{where} repeats proposal {proposal} of line {proposals[proposal]} (two "
                    f"drivers wrote this journal?); {self._repairable}"
                )
            proposals[proposal] = number
            records.append(record)
        if tail and repair:
            # A kill during the write of the last record: that evaluation is not finished.
            with open(self.records_path, "r+b") as handle:
                handle.truncate(len(raw) - len(tail))
                handle.flush()
                os.fsync(handle.fileno())
        return records

    @property
    def _repairable(self) -> str:
        return (
            f"fix that line, or run `bojax repair {self.folder}` to set bad records aside "
            "(nothing is deleted)"
        )

    def append(self, record: Mapping[str, Any]) -> None:
        """Add one record durably; if the disk refuses, :class:`RunFolderError` carries
        the record's line, so the evaluation is not lost with the run."""
        line = json.dumps(record, allow_nan=False) + "\n"
        try:
            with open(self.records_path, "a") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as error:
            raise RunFolderError(
                f"cannot write {self.records_path}: {error.strerror or error}. The evaluation "
                f"that just finished was not recorded; its record is: {line.strip()}"
            ) from None

    # -- sampler state and summary -------------------------------------------------------
    def save_sampler(self, iteration: int, state: Mapping[str, Any]) -> None:
        _write_atomic(self.sampler_path, {"iteration": iteration, **state})

    def load_sampler(self) -> dict[str, Any] | None:
        """The saved chain state, or None if absent or unreadable (then it is replayed)."""
        try:
            return json.loads(self.sampler_path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def save_pending(self, pending: list[Mapping[str, Any]]) -> None:
        _write_atomic(self.pending_path, pending)

    def load_pending(self, space: Space | None = None) -> list[dict[str, Any]]:
        """The evaluations in flight when the run stopped; [] if there were none. With
        ``space``, each entry is checked as records are (a resume issues it again)."""
        try:
            pending = json.loads(self.pending_path.read_text())
        except FileNotFoundError:
            return []
        except json.JSONDecodeError as error:
            raise JournalError(f"{self.pending_path} is corrupt: {error}") from None
        if not isinstance(pending, list):
            raise JournalError(f"{self.pending_path} does not hold a list of pending points")
        for number, entry in enumerate(pending, start=1):
            keys = {"proposal", "u", "x", "info"}
            if space is not None:
                problem = pending_problem(space, entry)
            elif not (isinstance(entry, dict) and keys <= set(entry)):
                problem = f"an entry needs {sorted(keys)}"
            else:
                problem = None
            if problem is not None:
                raise JournalError(
                    f"{self.pending_path}, entry {number}: {problem}; "
                    f"run `bojax repair {self.folder}` to set it aside"
                )
        return pending

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        _write_atomic(self.summary_path, summary)

    # -- repair ----------------------------------------------------------------------------
    def repair(self) -> Repaired:
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
        is removed so the next resume replays the surrogate's fits from the records. The
        original journal stays as ``journal.jsonl.bak-<time>``; a journal that needs
        nothing is left untouched.
        """
        space = self.space()  # also refuses a folder of another format
        with self.lock():
            return self._repair(space)

    def _repair(self, space: Space) -> Repaired:
        raw = self.records_path.read_bytes() if self.records_path.exists() else b""
        lines = raw.split(b"\n")
        complete, tail = lines[:-1], lines[-1]
        kept: list[tuple[int, dict[str, Any]]] = []  # (line, record), in line order
        rejected: list[dict[str, Any]] = []
        at: dict[int, list[int]] = {}  # proposal number -> indices into kept
        shared: list[int] = []  # kept records whose number an earlier other point holds
        evaluated: set[int] = set()
        duplicates = 0
        for number, line in enumerate(complete, start=1):
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                text = line.decode("utf-8", "replace")
                rejected.append({"line": number, "reason": f"not JSON: {error}", "text": text})
                continue
            problem = record_problem(space, record)
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

        pending, pending_dropped, pending_changed = self._repair_pending(space, evaluated, rejected)
        fresh = max([*evaluated, *(e["proposal"] for e in pending)], default=-1) + 1
        for k in shared:
            kept[k][1]["proposal"], fresh = fresh, fresh + 1
        renumbered = sum(record["iteration"] != i for i, (_, record) in enumerate(kept))
        if not (rejected or renumbered or shared or pending_changed):
            return Repaired(len(kept), 0, 0, 0, 0, 0, False, None, None)

        stamp = time.strftime("%Y%m%d-%H%M%S")
        records = [{**record, "iteration": i} for i, (_, record) in enumerate(kept)]
        try:
            backup, removed = self._rewrite(stamp, records, rejected, pending, pending_changed)
        except RunFolderError:
            raise
        except OSError as error:  # a full disk, a read-only folder: the journal stands
            raise RunFolderError(f"cannot repair {self.folder}: {error}") from None
        return Repaired(
            kept=len(kept),
            duplicates=duplicates,
            invalid=invalid,
            renumbered=renumbered,
            reproposed=len(shared),
            pending_dropped=pending_dropped,
            sampler_removed=removed,
            backup=backup,
            rejected=self.folder / "journal.rejected.jsonl" if rejected else None,
        )

    def _rewrite(
        self,
        stamp: str,
        records: list[dict[str, Any]],
        rejected: list[dict[str, Any]],
        pending: list[dict[str, Any]],
        pending_changed: bool,
    ) -> tuple[Path | None, bool]:
        """Write a repair out: the backups first, then the set-aside lines, and only then
        the new journal (atomically), so an interrupted repair loses nothing."""
        backup = None
        if self.records_path.exists():
            backup = self._unused(self.folder / f"{self.records_path.name}.bak-{stamp}")
            shutil.copy2(self.records_path, backup)
        if pending_changed and self.pending_path.exists():
            shutil.copy2(self.pending_path, self._unused(self.folder / f"pending.json.bak-{stamp}"))
        if rejected:
            text = "".join(json.dumps({"repaired": stamp, **r}) + "\n" for r in rejected)
            with open(self.folder / "journal.rejected.jsonl", "a") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
        text = "".join(json.dumps(r, allow_nan=False) + "\n" for r in records)
        _write_text_atomic(self.records_path, text)
        if pending_changed:
            self.save_pending(pending)
        removed = self.sampler_path.exists()
        if removed:
            self.sampler_path.unlink()
        return backup, removed

    def _repair_pending(
        self, space: Space, evaluated: set[int], rejected: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], int, bool]:
        """``(entries to keep, entries dropped, whether the file changes)``: unusable
        entries go to ``rejected``; entries already recorded are dropped (a resume would
        skip them anyway, and a repaired record may no longer carry their number)."""
        try:
            entries = json.loads(self.pending_path.read_text())
        except FileNotFoundError:
            return [], 0, False
        except json.JSONDecodeError as error:
            reason, text = f"pending.json is not JSON: {error}", self.pending_path.read_text()
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

    @staticmethod
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
