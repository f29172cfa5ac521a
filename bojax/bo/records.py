"""Checks of a run folder's records against the run's own space.

A run folder is untrusted input: it may have been edited by hand, written by two drivers
at once, or copied between machines. Resume feeds every record to the surrogate and the
best record becomes ``Result.best_point``, so a record naming an unknown parameter, a
value outside the space, or a ``u`` that is not the point ``x`` would silently teach the
model a wrong point or report a best point the space cannot hold; a string ``y`` or a
missing ``status`` would fail later with a bare ``TypeError``/``KeyError`` naming no file.
These functions say what is wrong with one record or pending entry, as text, so that
:class:`~bojax.bo.journal.Journal` can raise it with ``path:line`` and its ``repair`` can
move the record aside with the same reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from bojax.bo.evaluation import short_repr
from bojax.bo.metrics import Metrics
from bojax.errors import BojaxError, is_count
from bojax.parameters.base import is_number
from bojax.spaces import IRRELEVANT, Space

#: How far (in unit coordinates) ``x`` may sit from the point ``u`` decodes to. Records
#: bojax writes agree exactly (``x`` is decoded from ``u`` and floats round-trip through
#: JSON); the slack only forgives a tool that rewrote the floats with fewer digits.
AGREEMENT = 1e-9

STATUSES = ("ok", "failed", "stopped")  # stopped: a step-wise training ended early


def _shown(value: Any) -> str:
    """A record's value in an error: its repr, cut to 80 characters."""
    return short_repr(value, 80)


def point_problem(space: Space, x: Any, u: Any) -> str | None:
    """What is wrong with the named point ``x`` and its unit coordinates ``u``, or None.

    ``x`` must pass :meth:`Space.validate` (names, types, bounds); ``u`` must hold
    ``space.dim`` finite coordinates, each in ``[0, 1]`` or the irrelevant sentinel; and
    ``u`` must decode to ``x``, since the model learns from ``u`` and the user reads ``x``.
    """
    try:
        space.validate(x)
    except BojaxError as error:
        return f"'x': {error}"
    if not isinstance(u, list) or not all(is_number(v) for v in u):
        return f"'u' must be a list of finite numbers, got {_shown(u)}"
    if len(u) != space.dim:
        return f"'u' has {len(u)} coordinate(s); the space has {space.dim} parameters"
    coordinates = np.asarray(u, dtype=np.float64)
    for name, v in zip(space.names, u, strict=True):
        if v != IRRELEVANT and not 0.0 <= v <= 1.0:
            return f"'u' of parameter {name!r} is {v!r}, outside [0, 1]"
    snapped, expected = space.snap(coordinates), space.to_unit(x)
    decoded = space.from_unit(coordinates)
    for j, name in enumerate(space.names):
        if coordinates[j] == IRRELEVANT and snapped[j] != IRRELEVANT:
            return f"'u' marks parameter {name!r} irrelevant, but its condition holds"
        if abs(snapped[j] - expected[j]) > AGREEMENT:
            given = x.get(name, "irrelevant")
            return (
                f"'x' and 'u' disagree on parameter {name!r}: x holds {given!r}, u decodes "
                f"to {decoded.get(name, 'irrelevant')!r}"
            )
    return None


def curve_ok(curve: Any, max_step: int) -> bool:
    """Whether ``curve`` is a list of ``[step, value]`` pairs, whole steps rising within
    ``max_step``, finite values: a step-wise training's reports."""
    if not isinstance(curve, list):
        return False
    last = 0
    for pair in curve:
        if not (isinstance(pair, list) and len(pair) == 2 and is_count(pair[0])):
            return False
        if not (last < pair[0] <= max_step and is_number(pair[1])):
            return False
        last = pair[0]
    return True


def record_problem(
    space: Space, record: Any, metrics: Metrics | None = None, max_step: int | None = None
) -> str | None:
    """What is wrong with one ``journal.jsonl`` record, or None if resume can trust it;
    with several ``metrics`` an ok record's ``y`` is a dict holding each of them (others
    are notes, as the driver journals them); with ``max_step`` (a step-wise run) every
    record has a ``curve``, and only such a run's records may be ``stopped``."""
    if not isinstance(record, dict):
        return f"a record is a JSON object, got {_shown(record)}"
    for key in ("iteration", "phase", "x", "u", "y", "status", "error", "seconds"):
        if key not in record:
            return f"the record has no {key!r}"
    if not is_count(record["iteration"]):
        return f"'iteration' must be a whole number >= 0, got {_shown(record['iteration'])}"
    if "proposal" in record and not is_count(record["proposal"]):
        return f"'proposal' must be a whole number >= 0, got {_shown(record['proposal'])}"
    status, y = record["status"], record["y"]
    if status not in STATUSES:
        return f"'status' must be 'ok', 'failed' or 'stopped', got {_shown(status)}"
    if status == "ok" and metrics is not None:
        if not isinstance(y, dict):
            return (
                f"'y' of an ok evaluation must map metric names to finite numbers, got {_shown(y)}"
            )
        if metrics.missing(y):
            return f"'y' lacks the run's metric(s) {metrics.missing(y)}"
        if not all(is_number(y[name]) for name in metrics.columns):
            return f"'y' of an ok evaluation must hold finite numbers, got {_shown(y)}"
    elif status in ("ok", "stopped") and not is_number(y):
        return f"'y' of an ok evaluation must be a finite number, got {_shown(y)}"
    if status == "failed" and y is not None:
        return f"'y' of a failed evaluation must be null, got {_shown(y)}"
    if max_step is not None and not curve_ok(record.get("curve"), max_step):
        return "'curve' must be a list of [step, value] pairs, steps rising within max_step"
    if max_step is None and status == "stopped":
        return "'status' 'stopped' is a step-wise training's, and this run is not step-wise"
    if not isinstance(record["error"], str | None):
        return f"'error' must be text or null, got {_shown(record['error'])}"
    if not isinstance(record["phase"], str):
        return f"'phase' must be text, got {_shown(record['phase'])}"
    if not is_number(record["seconds"]):
        return f"'seconds' must be a finite number, got {_shown(record['seconds'])}"
    diagnostics = record.get("diagnostics", {})
    if not isinstance(diagnostics, dict) or not all(map(is_number, diagnostics.values())):
        return f"'diagnostics' must map names to finite numbers, got {_shown(diagnostics)}"
    return point_problem(space, record["x"], record["u"])


# Why a step-wise training ended, as pending.json keeps it until its record is written.
ENDED = ("scheduler", "budget", "max_step", "last", "failed")


def pending_problem(space: Space, entry: Any) -> str | None:
    """What is wrong with one ``pending.json`` entry, or None. A resume issues the entry
    again as it stands, and journals it under its ``info["phase"]``."""
    if not isinstance(entry, dict):
        return f"an entry is a JSON object, got {_shown(entry)}"
    for key in ("proposal", "u", "x", "info"):
        if key not in entry:
            return f"the entry has no {key!r}"
    if not is_count(entry["proposal"]):
        return f"'proposal' must be a whole number >= 0, got {_shown(entry['proposal'])}"
    if not is_count(entry.get("attempts", 0)):
        return f"'attempts' must be a whole number >= 0, got {_shown(entry['attempts'])}"
    if not is_count(entry.get("charged", 0)):
        return f"'charged' must be a whole number >= 0, got {_shown(entry['charged'])}"
    seconds = entry.get("seconds", 0.0)
    if not (is_number(seconds) and seconds >= 0):
        return f"'seconds' must be a finite number >= 0, got {_shown(seconds)}"
    if entry.get("over") not in (None, *ENDED):
        return f"'over' must be one of {', '.join(ENDED)}, got {_shown(entry['over'])}"
    if not isinstance(entry.get("error", ""), str):
        return f"'error' must be a text, got {_shown(entry['error'])}"
    info = entry["info"]
    if not isinstance(info, dict) or not isinstance(info.get("phase"), str):
        return f"'info' must be a JSON object with a text 'phase', got {_shown(info)}"
    if not all(is_number(v) for k, v in info.items() if k != "phase"):
        return "'info' values other than 'phase' must be finite numbers"
    return point_problem(space, entry["x"], entry["u"])


def same_design(space: Space, a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two checked records evaluated the same point (equal snapped ``u``)."""
    return bool(
        np.all(np.abs(space.snap(np.asarray(a["u"])) - space.snap(np.asarray(b["u"]))) <= 1e-12)
    )
