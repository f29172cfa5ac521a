"""What made a report's numbers: code, settings, libraries, device, wall time, and which
settings differ from the report's defaults.

Every report's ``run`` stamps its ``summary.json`` with :func:`stamp`; the
``provenance`` block reads::

    {"bojax": "0.1.0", "git_commit": "d98165c...", "git_dirty": false,
     "report": "arc_kernel", "code_fingerprint": "3f0c2a9e81b4", "fingerprint": "9d02e1c4b7aa",
     "python": "3.11.7", "jax": "0.9.0", "jaxlib": "0.9.0", "blackjax": "1.2.5",
     "numpyro": "0.19.0", "device": "cpu (cpu)", "device_count": 1, "cpu_count": 2,
     "started": "2026-11-23T19:40:02+00:00", "wall_seconds": 512.3,
     "overrides": {"repeats": 10}}

``report`` names the report (its module in ``bojax.reports``), so a run of another
report refuses to write over the summary (:func:`bojax.reports.prepare_out`); summaries
made before it was recorded (the committed ones among them) lack it, and their settings
tell the report instead (:func:`bojax.reports.summary_maker`).
``code_fingerprint`` (:func:`code_fingerprint`) hashes the code that can change the
report's numbers: the engine and the report's own modules, without comments,
docstrings, figures or claims, so a figure's colour or a reworded docstring leaves it
alone and an edit of another report's module does too. ``fingerprint`` adds the run's
settings: ``experiments/all.py`` calls a summary current when its ``fingerprint`` is the
one the code and settings it would run now give. ``overrides`` are the fields of the
run's settings that differ from the report's defaults for its mode, so
``tests/test_provenance.py`` can tell a committed summary made with deliberate
overrides from one whose defaults have since changed. ``git_commit`` is that of the
checkout bojax was imported from (None when installed from a wheel), and ``git_dirty``
says whether tracked files differed from it; both, and ``code_fingerprint``, are read
when the run begins (:func:`begin`), not when its summary is written.

Summaries made before these fingerprints recorded ``code_fingerprint`` as a hash of all
of bojax's sources; :func:`migrate` gives such a summary the present fingerprints of its
recorded commit's code, but only where that commit's sources hash to the recorded value
(so the commit is the code that ran), and keeps the old value as ``code_fingerprint_v1``.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import io
import json
import os
import platform
import re
import subprocess
import time
import tokenize
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

import bojax
from bojax.errors import SettingsError

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


# What cannot change a report's numbers: modules of figures, claims and provenance, the
# command line, and top-level functions that plot, judge claims or format text.
NOT_RESULTS = ("figures.py", "claims.py", "provenance.py", "run_figures.py")
NOT_RESULT_FUNCTIONS = re.compile(r"_?(plot|claims$|format_)")


@functools.lru_cache(maxsize=1024)  # a module's text is hashed for several reports
def result_code(source: str) -> str:
    """``source`` without what cannot change a result: comments, docstrings, blank lines,
    trailing spaces and top-level functions whose names match ``NOT_RESULT_FUNCTIONS``."""
    tree = ast.parse(source)
    dropped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            if docstring and isinstance(first.value.value, str):
                if isinstance(node, ast.Module) or first.lineno > node.lineno:
                    dropped.update(range(first.lineno, first.end_lineno + 1))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and NOT_RESULT_FUNCTIONS.match(node.name):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            dropped.update(range(start, node.end_lineno + 1))
    lines = io.StringIO(source).readlines()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            row, column = token.start
            lines[row - 1] = lines[row - 1][:column]
    kept = (line.rstrip() for n, line in enumerate(lines, 1) if n not in dropped)
    return "\n".join(line for line in kept if line.strip())


def package_sources(root: Path | None = None) -> dict[str, str]:
    """bojax's Python sources as ``{"bojax/...py": text}`` (the checkout bojax runs from)."""
    root = root or Path(bojax.__file__).resolve().parents[1]
    return {
        path.relative_to(root).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted((root / "bojax").rglob("*.py"))
    }


def sources_at(commit: str, folder: Path | None = None) -> dict[str, str]:
    """bojax's Python sources at ``commit`` of the git checkout ``folder`` (bojax's own
    by default), as :func:`package_sources` gives them for a working tree."""
    folder = folder or Path(__file__).resolve().parents[2]

    def git(*args: str, stdin: str | None = None) -> bytes:
        command = ["git", "-C", str(folder), *args]
        return subprocess.run(
            command, input=stdin and stdin.encode(), capture_output=True, check=True, timeout=60
        ).stdout

    names = git("ls-tree", "-r", "--name-only", commit, "bojax/").decode().split()
    names = [name for name in names if name.endswith(".py")]
    batch = git("cat-file", "--batch", stdin="".join(f"{commit}:{n}\n" for n in names))
    sources, position = {}, 0
    for name in names:  # each answer: "<sha> blob <size>\n<content>\n"
        end = batch.index(b"\n", position)
        size = int(batch[position:end].split()[2])
        sources[name] = batch[end + 1 : end + 1 + size].decode("utf-8")
        position = end + 1 + size + 1
    return sources


def _report_modules(report: str, sources: Mapping[str, str]) -> set[str]:
    """The paths of ``bojax.reports.<report>`` (a module or a package) and of the
    ``bojax.reports`` modules it imports, directly or through each other."""
    base = f"bojax/reports/{report}"
    todo = [p for p in sources if p == f"{base}.py" or p.startswith(f"{base}/")]
    if not todo:
        raise SettingsError(f"no report module bojax.reports.{report}")
    found = {"bojax/reports/__init__.py"} & set(sources)
    while todo:
        path = todo.pop()
        if path in found:
            continue
        found.add(path)
        for node in ast.walk(ast.parse(sources[path])):
            named = []
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bojax.reports"):
                named = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            for name in named:
                stem = name.replace(".", "/")
                todo += [p for p in (f"{stem}.py", f"{stem}/__init__.py") if p in sources]
    return found


def code_fingerprint(report: str, sources: Mapping[str, str] | None = None) -> str:
    """The first 12 hex digits of a SHA-256 over the code that can change ``report``'s
    numbers (``report``: the module's name in ``bojax.reports``, ``"arc_kernel"``): the
    engine (every bojax module outside ``bojax.reports`` and the CLI) and the report's
    own ``bojax.reports`` modules, each as :func:`result_code` (no comments, docstrings,
    figures or claims), and figure, claim and provenance modules (``NOT_RESULTS``) not at
    all. Two runs with the same fingerprint ran the same code, whatever else changed.
    ``sources`` (path -> text) default to this checkout's (:func:`package_sources`)."""
    if sources is None:
        return _current_fingerprint(report)
    engine = {
        path for path in sources if not path.startswith("bojax/reports/") and path != "bojax/cli.py"
    }
    digest = hashlib.sha256()
    for path in sorted(engine | _report_modules(report, sources)):
        if path.rsplit("/", 1)[-1] not in NOT_RESULTS:
            digest.update(path.encode())
            digest.update(result_code(sources[path]).encode())
    return digest.hexdigest()[:12]


@functools.cache
def _current_fingerprint(report: str) -> str:
    return code_fingerprint(report, package_sources())


def fingerprint(code: str, cfg: Any) -> str:
    """A summary's fingerprint: its report's :func:`code_fingerprint` ``code`` and its
    settings ``cfg`` (a dataclass, or its JSON form as a summary keeps it) together."""
    settings = json.dumps(plain(cfg), sort_keys=True)
    return hashlib.sha256(f"{code}\n{settings}".encode()).hexdigest()[:12]


def report_of(cfg: Any) -> str:
    """The report whose settings ``cfg`` are: ``"arc_kernel"`` for
    ``bojax.reports.arc_kernel.settings.Config``."""
    parts = type(cfg).__module__.split(".")
    if parts[:2] != ["bojax", "reports"] or len(parts) < 3:
        raise SettingsError(f"{type(cfg).__name__} is not a report's settings")
    return parts[2]


def version1_fingerprint(sources: Mapping[str, str]) -> str:
    """The fingerprint summaries recorded before :func:`code_fingerprint` (version 1): a
    SHA-256 over every bojax source, paths relative to the package, in path order."""
    digest = hashlib.sha256()
    for path in sorted(sources, key=lambda p: Path(p).parts):
        digest.update(path.removeprefix("bojax/").encode())
        digest.update(sources[path].encode("utf-8"))
    return digest.hexdigest()[:12]


def migrate(summary: dict[str, Any], report: str, folder: Path | None = None) -> bool:
    """Give a version-1 ``summary`` (modified in place) the fingerprints of the code that
    made it, read from git at its recorded commit; False (and unchanged) unless that
    commit's sources hash to the recorded version-1 value."""
    block = summary["provenance"]
    if "fingerprint" in block or not block.get("git_commit"):
        return False
    sources = sources_at(block["git_commit"], folder)
    if version1_fingerprint(sources) != block["code_fingerprint"]:
        return False
    code = code_fingerprint(report, sources)
    block["code_fingerprint_v1"] = block["code_fingerprint"]
    block["code_fingerprint"] = code
    block["fingerprint"] = fingerprint(code, summary["config"])
    return True


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


@dataclasses.dataclass(frozen=True)
class Start:
    """A report run's beginning (:func:`begin`): its ``time.perf_counter()`` ``clock``,
    and the checkout and code it runs, read then: a run lasts up to hours, and an edit
    or a commit meanwhile must not be stamped as the code that made its numbers (nor
    let ``experiments/all.py`` call the summary current for the edited code)."""

    clock: float
    commit: str | None
    dirty: bool | None
    report: str | None = None
    code: str | None = None

    def seconds(self) -> float:
        """Seconds since the run began."""
        return time.perf_counter() - self.clock


def begin(cfg: Any = None) -> Start:
    """The :class:`Start` of a run of the report whose settings are ``cfg`` (None: no
    report, no code fingerprint)."""
    clock = time.perf_counter()
    commit, dirty = git_state()
    if cfg is None:
        return Start(clock, commit, dirty)
    report = report_of(cfg)
    return Start(clock, commit, dirty, report, code_fingerprint(report))


def provenance(started: Start, cfg: Any = None, defaults: Any = None) -> dict[str, Any]:
    """The provenance block for a run that began at ``started`` (see the module
    docstring); ``cfg`` against ``defaults`` gives the overrides."""
    name, count = device()
    fingerprints = {}
    if cfg is not None:
        if report_of(cfg) != started.report:
            raise SettingsError(
                f"the run began as one of {started.report!r}, its settings are {report_of(cfg)!r}'s"
            )
        code = started.code
        fingerprints = {"report": started.report, "code_fingerprint": code}
        fingerprints["fingerprint"] = fingerprint(code, cfg)
    wall = started.seconds()
    began = datetime.now(UTC) - timedelta(seconds=wall)
    block: dict[str, Any] = {
        "bojax": bojax.__version__,
        "git_commit": started.commit,
        "git_dirty": started.dirty,
        **fingerprints,
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


def stamp(summary: dict[str, Any], started: Start, cfg: Any, defaults: Any) -> dict[str, Any]:
    """``summary`` with its ``provenance`` block: the run's settings ``cfg`` against the
    report's ``defaults`` for the same mode."""
    return summary | {"provenance": provenance(started, cfg, defaults)}
