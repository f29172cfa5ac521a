"""What made a report's numbers: code version, libraries, device, wall time, and which
settings differ from the report's defaults.

Every report's ``run`` stamps its ``summary.json`` with :func:`stamp`; the
``provenance`` block reads::

    {"bojax": "0.1.0", "git_commit": "d98165c...", "git_dirty": false,
     "code_fingerprint": "3f0c2a9e81b4",
     "python": "3.11.7", "jax": "0.9.0", "jaxlib": "0.9.0", "blackjax": "1.2.5",
     "numpyro": "0.19.0", "device": "cpu (cpu)", "device_count": 1, "cpu_count": 2,
     "started": "2026-11-23T19:40:02+00:00", "wall_seconds": 512.3,
     "overrides": {"repeats": 10}}

``overrides`` are the fields of the run's settings that differ from the report's
defaults for its mode, so ``tests/test_provenance.py`` can tell a committed summary made
with deliberate overrides from one whose defaults have since changed. ``git_commit`` is
that of the checkout bojax was imported from (None when installed from a wheel), and
``git_dirty`` says whether tracked files differed from it: then the commit alone does
not name the code that ran; ``code_fingerprint`` (a hash of bojax's sources) always
does, and ``experiments/all.py`` uses it to tell a current summary from a stale one.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import platform
import subprocess
import time
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

import bojax

LIBRARIES = ("jax", "jaxlib", "blackjax", "numpyro", "numpy", "scipy")


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def git_state(folder: Path | None = None) -> tuple[str | None, bool | None]:
    """``(commit, dirty)`` of the git checkout whose root is ``folder`` (bojax's own by
    default); ``(None, None)`` elsewhere or without git. Only a root counts: bojax
    installed in a project's ``.venv`` must not report that project's commit."""
    folder = folder or Path(__file__).resolve().parents[2]
    if not (folder / ".git").exists():
        return None, None

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, check=True,
            timeout=10,
        ).stdout.strip()  # fmt: skip

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit, dirty


@functools.cache
def code_fingerprint() -> str:
    """The first 12 hex digits of a SHA-256 over bojax's Python sources (paths and
    contents): two runs with the same fingerprint ran the same library code, whatever
    else changed in the checkout (docs, tests, figures), and with or without git."""
    package = Path(bojax.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def device() -> tuple[str, int]:
    """The default JAX device as ``"platform (kind)"`` and how many there are."""
    import jax

    devices = jax.devices()
    return f"{devices[0].platform} ({devices[0].device_kind})", len(devices)


def plain(value: Any) -> Any:
    """``value`` as JSON would give it back (tuples as lists, dataclasses as dicts)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    return json.loads(json.dumps(value, default=str))


def overrides(cfg: Any, defaults: Any) -> dict[str, Any]:
    """The fields of the settings ``cfg`` that differ from ``defaults`` (both dataclasses
    of one type), with ``cfg``'s values."""
    ours, theirs = plain(cfg), plain(defaults)
    return {key: value for key, value in ours.items() if theirs.get(key) != value}


def provenance(started: float, cfg: Any = None, defaults: Any = None) -> dict[str, Any]:
    """The provenance block for a run that began at ``time.perf_counter() == started``
    (see the module docstring); ``cfg`` against ``defaults`` gives the overrides."""
    commit, dirty = git_state()
    name, count = device()
    wall = time.perf_counter() - started
    began = datetime.now(UTC) - timedelta(seconds=wall)
    block: dict[str, Any] = {
        "bojax": bojax.__version__,
        "git_commit": commit,
        "git_dirty": dirty,
        "code_fingerprint": code_fingerprint(),
        "python": platform.python_version(),
        **{library: _version(library) for library in LIBRARIES},
        "device": name,
        "device_count": count,
        "cpu_count": os.cpu_count(),
        "started": began.isoformat(timespec="seconds"),
        "wall_seconds": round(wall, 1),
    }
    if cfg is not None and defaults is not None:
        block["overrides"] = overrides(cfg, defaults)
    return block


def stamp(summary: dict[str, Any], started: float, cfg: Any, defaults: Any) -> dict[str, Any]:
    """``summary`` with its ``provenance`` block: the run's settings ``cfg`` against the
    report's ``defaults`` for the same mode."""
    return summary | {"provenance": provenance(started, cfg, defaults)}
