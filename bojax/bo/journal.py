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
(:mod:`bojax.bo.records`). :func:`bojax.bo.repair.repair` (``bojax repair``) rewrites a
journal they refuse, keeping the original and setting aside what it drops.

Floats are written with ``repr`` precision by :mod:`json`, so they read back bit-exact.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bojax.bo.evaluation import short_repr
from bojax.bo.records import pending_problem, record_problem
from bojax.errors import (
    BojaxError,
    JournalError,
    RunFolderError,
    RunLockedError,
    is_count,
    warn_user,
)

if TYPE_CHECKING:
    from bojax.bo.metrics import Metrics
    from bojax.spaces import Space

try:
    import fcntl
except ImportError:  # Windows: runs are not locked there
    fcntl = None

FORMAT_VERSION = 1


def load_json(text: str | bytes) -> Any:
    """``json.loads`` for a run folder's files, refusing a key given twice: which of two
    ``"y"`` a hand edit meant is not bojax's guess to make. Raises ``ValueError``."""
    from bojax.spaces import unique_keys  # its SpaceDefinitionError is a ValueError

    return json.loads(text, object_pairs_hook=unique_keys)


def journal_lines(raw: bytes) -> tuple[list[bytes], bytes, bool]:
    """``(complete lines, torn tail, unended)`` of a journal's bytes: the tail is the text
    after the last newline, a write cut short (b"" when the file ends in a newline). A
    tail that is a whole record (a JSON object) lost only its newline (a kill after the
    record, an editor): it counts as a complete line, and ``unended`` says so."""
    lines = raw.split(b"\n")
    complete, tail = lines[:-1], lines[-1]
    if tail.strip():
        try:
            if isinstance(load_json(tail), dict):
                return lines, b"", True
        except (ValueError, RecursionError):
            pass
    return complete, tail, False


def _all_finite(value: Any) -> bool:
    """Whether every number in a JSON value is finite (JSON may spell NaN and Infinity)."""
    if isinstance(value, dict):
        return all(_all_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_all_finite(v) for v in value)
    return not isinstance(value, float) or math.isfinite(value)


def _write_atomic(path: Path, payload: Any) -> None:
    write_text_atomic(path, json.dumps(payload, indent=1))


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` all at once (write, fsync, rename): a kill leaves the
    old file or the new one, never half of either."""
    # A name of its own per writer: two threads replacing one file shared a fixed
    # "<name>.tmp", and one's rename took the other's file away.
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as error:  # a full disk, a folder made read-only: the old file stands
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise RunFolderError(f"cannot write {path}: {error.strerror or error}") from None


def run_header(space: Space, settings: Any, objective: str | None) -> dict[str, Any]:
    """What ``run.json`` holds besides the format: the space, the settings a resume must
    match, the last call's other settings (``options``: its budget, ``q``, ``timeout``...,
    which a resume may change; ``bojax optimize --resume`` reads them) and the
    objective's name (only warned about on resume) where it has one."""
    header = {"space": space.to_dict(), "settings": settings.identity()}
    header["options"] = settings.options()
    return header if objective is None else {**header, "objective": objective}


# What a resume may change in a run's header: only warned about (the objective's name) or
# the last call's (its options).
_NOT_CHECKED = {"objective", "options"}


def _same(stored: Any, now: Any) -> bool:
    """Header values equal as JSON reads them, a boolean never equal to a number: Python's
    ``True == 1`` let a run resume with a choice ``True`` where it had ``1`` (review)."""
    if isinstance(stored, bool) or isinstance(now, bool):
        return type(stored) is type(now) and stored == now
    if isinstance(stored, dict) and isinstance(now, dict):
        return stored.keys() == now.keys() and all(_same(stored[k], now[k]) for k in stored)
    if isinstance(stored, list) and isinstance(now, list):
        return len(stored) == len(now) and all(map(_same, stored, now))
    return stored == now


def objective_name(objective: Any) -> str | None:
    """``module:name`` of an objective, as a run's header keeps it (the file's name for
    one loaded from a file: ``train.py:objective`` gives ``train:objective``); None for
    one without a name."""
    from bojax.user_code import ByValue

    target = objective.target if isinstance(objective, ByValue) else objective
    target = getattr(target, "func", target)  # functools.partial
    if not hasattr(target, "__qualname__"):  # a callable object: its class
        target = type(target)
    module, name = getattr(target, "__module__", None), getattr(target, "__qualname__", None)
    if not (isinstance(module, str) and isinstance(name, str)):
        return None
    return f"{module.removeprefix('bojax_user_')}:{name}"


def _setting_shown(settings: Mapping[str, Any], name: str) -> Any:
    """A journalled setting's value; one left out of the identity is at its default
    (:meth:`bojax.bo.settings.Settings.identity`), shown as that, not as None."""
    if name in settings:
        return settings[name]
    from bojax.bo.settings import Settings

    return {spec.name: spec.default for spec in dataclasses.fields(Settings)}.get(name)


class Journal:
    """The files of one run in ``folder``."""

    def __init__(self, folder: str | os.PathLike):
        # Absolute now: an objective that changes the working directory (os.chdir, as
        # Hydra's scripts do) must not move the run's files.
        self.folder = Path(folder).absolute()
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
            header = load_json(self.header_path.read_text())
        except FileNotFoundError:
            if not self.folder.exists():
                raise JournalError(f"{self.folder} does not exist") from None
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

    def section(self, key: str) -> dict[str, Any]:
        """``run.json``'s object ``key`` (``settings``, ``options``; {} where absent); a
        :class:`JournalError` naming the file where it is not an object."""
        value = self.header().get(key, {})
        if not isinstance(value, dict):
            raise JournalError(
                f"{self.header_path}: {key!r} is not an object: {short_repr(value, 80)}"
            )
        return value

    def space(self) -> Space:
        """The run's space, from ``run.json``: what its records are checked against."""
        from bojax.spaces import Space

        try:
            return Space.from_dict(self.header().get("space"))
        except JournalError:
            raise
        except BojaxError as error:
            raise JournalError(f"{self.header_path}: 'space': {error}") from None

    def max_step(self) -> int | None:
        """A step-wise run's ``max_step``, from ``run.json``'s settings; None otherwise."""
        settings = self.header().get("settings")
        max_step = settings.get("max_step") if isinstance(settings, dict) else None
        return max_step if is_count(max_step) and max_step > 0 else None

    def metrics(self) -> Metrics | None:
        """The run's declared metrics, from ``run.json``'s settings (None for one
        objective); a value no run could have written is a :class:`JournalError`."""
        from bojax.bo.metrics import Metrics, constraint_texts, objective_texts

        settings = self.header().get("settings")
        settings = settings if isinstance(settings, dict) else {}
        try:
            objectives = objective_texts(settings.get("objectives"))
            constraints = constraint_texts(settings.get("constraints"))
        except BojaxError as error:
            raise JournalError(f"{self.header_path}: 'settings': {error}") from None
        return None if objectives is None else Metrics.parse(objectives, constraints)

    def check(self, header: Mapping[str, Any]) -> None:
        """Raise :class:`JournalError` unless the stored header equals ``header``; warn
        when its objective's name differs (a renamed function resumes, a slip is seen)."""
        from bojax.bo.settings import without_inert

        stored = self.header()
        if isinstance(stored.get("settings"), dict):  # journalled before their refusal
            stored = {**stored, "settings": without_inert(stored["settings"])}
        expected = json.loads(json.dumps({"format": FORMAT_VERSION, **header}))
        old, new = stored.get("objective"), expected.get("objective")
        if None not in (old, new) and old != new:
            warn_user(
                f"{self.folder} was journalled for the objective {old!r}; it resumes with "
                f"{new!r}, beside that objective's values"
            )
        for key in sorted((set(stored) | set(expected)) - _NOT_CHECKED):
            old, new = stored.get(key), expected.get(key)
            if _same(old, new):
                continue
            if isinstance(old, dict) and isinstance(new, dict):  # name the fields that differ
                names = sorted(n for n in set(old) | set(new) if not _same(old.get(n), new.get(n)))
                shown = _setting_shown if key == "settings" else lambda fields, n: fields.get(n)
                detail = "; ".join(
                    f"{n}: stored {shown(old, n)!r}, now {shown(new, n)!r}" for n in names
                )
            else:
                detail = f"stored {old!r}, now {new!r}"
            raise JournalError(
                f"cannot resume {self.folder}: its {key!r} differs from this run's ({detail})"
            )

    def keep_options(self, header: Mapping[str, Any]) -> None:
        """Keep ``header``'s ``options`` (this call's) in ``run.json`` in place of the
        last call's: once a resume has been checked and its records read (a refused one
        keeps the options that ran)."""
        stored = self.header()
        if "options" in header and stored.get("options") != header["options"]:
            _write_atomic(self.header_path, {**stored, "options": header["options"]})

    # -- records ---------------------------------------------------------------------
    def read(
        self, repair: bool = True, space: Space | None = None, metrics: Metrics | None = None
    ) -> list[dict[str, Any]]:
        """All complete records; drops a torn last line, and truncates it away when
        ``repair`` (a resuming run does; a reader beside a live run must not).

        With ``space`` (resume and ``bojax show`` pass the run's), every record is checked
        against it (:func:`bojax.bo.records.record_problem`): a record resume cannot trust
        is a :class:`JournalError` naming ``path:line`` and the field, never a best point
        outside the space or a bare ``KeyError`` later. A journal holding fewer records
        than the run's ``summary.json`` counts (deleted, or restored from an older copy)
        is one too: resuming from it would quietly run the lost evaluations again."""
        records = self._records(repair, space, metrics)
        self._check_summary(len(records))
        return records

    def _check_summary(self, count: int) -> None:
        """A :class:`JournalError` when a finished run's ``summary.json`` counts more
        evaluations than the ``count`` records read (a summary only exists once a call
        ended with every record written; a freeze-thaw run counts designs, fewer than
        its records; resume and repair remove it)."""
        try:
            summary = load_json(self.summary_path.read_bytes())
        except (OSError, ValueError, RecursionError):
            return  # none (a run in flight) or unreadable (``bojax show`` says so)
        told = summary.get("evaluations") if isinstance(summary, dict) else None
        if is_count(told) and told > count:
            missing = count == 0 and not self.records_path.exists()
            where = "is missing" if missing else f"holds {count} record(s)"
            raise JournalError(
                f"{self.records_path} {where}, but {self.summary_path} counts {told} "
                "finished evaluations: records were lost. Restore the journal from a "
                f"copy, or delete {self.summary_path.name} to go on from the records left"
            )

    def _records(
        self, repair: bool, space: Space | None, metrics: Metrics | None
    ) -> list[dict[str, Any]]:
        if not self.records_path.exists():
            return []
        try:
            raw = self.records_path.read_bytes()
        except OSError as error:  # a folder named journal.jsonl, no permission
            raise JournalError(f"cannot read {self.records_path}: {error.strerror}") from None
        complete, tail, unended = journal_lines(raw)
        max_step = None if space is None else self.max_step()
        records: list[dict[str, Any]] = []
        proposals: dict[Any, int] = {}  # proposal number -> line
        for number, line in enumerate(complete, start=1):
            where = f"{self.records_path}:{number}"
            try:
                record = load_json(line)
            except (ValueError, RecursionError) as error:  # not JSON, not UTF-8, a key twice
                raise JournalError(f"{where} is corrupt: {error}; {self._repairable}") from None
            problem = None if space is None else record_problem(space, record, metrics, max_step)
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
        if (tail or unended) and repair:
            # A kill during the write of the last record: that evaluation is not finished.
            # A whole record without its newline is finished: it gets the newline, so the
            # next record starts a line of its own.
            try:
                with open(self.records_path, "r+b") as handle:
                    if os.fstat(handle.fileno()).st_size != len(raw):
                        # Another driver wrote since (two on a folder without flock):
                        # its line mends this one; the next resume sees them whole.
                        return records
                    if unended:
                        handle.seek(0, os.SEEK_END)
                        handle.write(b"\n")
                    else:
                        handle.truncate(len(raw) - len(tail))
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError as error:  # a read-only journal: the records read stand
                raise RunFolderError(
                    f"cannot mend the last line of {self.records_path}: {error.strerror or error}"
                ) from None
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

    def load_sampler(self, done: int | None = None) -> dict[str, Any] | None:
        """The saved chain state, or None (then the fits are replayed): absent,
        unreadable, holding a number that is not finite, or, with ``done``, kept for an
        iteration that is not a whole number up to ``done`` (from the future)."""
        try:
            saved = load_json(self.sampler_path.read_text())
        except (OSError, ValueError, RecursionError):
            return None
        if not (isinstance(saved, dict) and _all_finite(saved)):
            return None
        if done is not None and not (
            is_count(saved.get("iteration")) and saved["iteration"] <= done
        ):
            return None
        return saved

    def save_pending(self, pending: list[Mapping[str, Any]]) -> None:
        _write_atomic(self.pending_path, pending)

    def load_pending(self, space: Space | None = None) -> list[dict[str, Any]]:
        """The evaluations in flight when the run stopped; [] if there were none. With
        ``space``, each entry is checked as records are (a resume issues it again)."""
        try:
            pending = load_json(self.pending_path.read_text())
        except FileNotFoundError:
            return []
        except (ValueError, RecursionError) as error:
            raise JournalError(f"{self.pending_path} is corrupt: {error}") from None
        except OSError as error:  # a folder named pending.json, no permission
            raise JournalError(f"cannot read {self.pending_path}: {error.strerror}") from None
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

    def reopen(self) -> None:
        """A resumed run runs again: the summary its last call wrote goes (this call writes
        its own at the end), so ``bojax show`` does not call it finished meanwhile, or
        after a kill of this call."""
        try:
            self.summary_path.unlink(missing_ok=True)
        except OSError as error:
            raise RunFolderError(f"cannot remove {self.summary_path}: {error.strerror}") from None

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        _write_atomic(self.summary_path, summary)

    def write_failed_summary(self, records: list[dict[str, Any]], error: Exception) -> None:
        """The summary of a run that ended with nothing to report (every evaluation or
        training failed): ``bojax show`` then says it ended, and why, instead of calling
        it running or interrupted."""
        failed = sum(r["status"] == "failed" for r in records)
        self.write_summary({"evaluations": len(records), "failures": failed, "error": str(error)})
