"""Reproductions of the reports bojax is built from, one module (or package) per report,
and what they share.

Each report holds its settings (``config``), a ``run`` that performs the experiment and
writes its figures and ``summary.json``, the plotting, and ``claims(summary)``. The
scripts in ``experiments/`` are thin command lines over these; ``bojax demo`` runs one
too. Shared here: settings (:func:`configure`, :func:`override`), tasks run here or on
an executor (:func:`run_tasks`), kept results (:func:`read_kept`), deterministic
objectives read back for figures (:class:`CachedObjective`), the summary file
(:func:`write_summary`) and the scripts' command line and run (:func:`script_arguments`,
:func:`run_script`). Shared
figure code is in :mod:`bojax.reports.figures`, the peers in :mod:`bojax.reports.peers`.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bojax.errors import SettingsError


def _in_float64(function: Callable, *args: Any) -> Any:
    """``function(*args)`` in a worker process, which has not enabled float64 yet."""
    import jax

    jax.config.update("jax_enable_x64", True)
    return function(*args)


def run_tasks(
    function: Callable,
    tasks: Mapping[Any, tuple],
    keep: Callable[[Any, Any], None],
    executor: Any = None,
) -> None:
    """``keep(key, function(*args))`` for every ``key: args`` of ``tasks``: one after
    another here, or each as a task on ``executor`` (a ``concurrent.futures`` executor or
    a Dask client, float64 enabled there) as they finish. Only this process calls
    ``keep``, so only it writes the results' files."""
    if executor is None:
        for key, args in tasks.items():
            keep(key, function(*args))
        return
    import concurrent.futures

    from bojax.bo.driver import as_executor

    pool = as_executor(executor)
    futures = {pool.submit(_in_float64, function, *args): key for key, args in tasks.items()}
    for future in concurrent.futures.as_completed(futures):
        keep(futures[future], future.result())


class CachedObjective:
    """An objective whose ``evaluate(point) -> dict`` is deterministic per point, kept by
    point: the loop gets ``record[value]``, and the report reads the whole record again
    for figures, recomputing whatever a resumed run did not keep."""

    def __init__(self, evaluate: Callable[[Mapping[str, Any]], dict], value: str):
        self._evaluate, self.value, self.cache = evaluate, value, {}

    def evaluate(self, point: Mapping[str, Any]) -> dict[str, Any]:
        key = json.dumps(dict(point), sort_keys=True)
        if key not in self.cache:
            self.cache[key] = self._evaluate(point)
        return self.cache[key]

    def __call__(self, point: Mapping[str, Any]) -> float:
        return self.evaluate(point)[self.value]


def override(cfg, overrides: Mapping[str, Any]):
    """``dataclasses.replace(cfg, **overrides)``, with a :class:`SettingsError` naming
    any field the report's settings do not have."""
    try:
        return dataclasses.replace(cfg, **overrides)
    except TypeError as error:
        raise SettingsError(f"{type(cfg).__module__}: {error}") from None


def configure(
    defaults, quick: bool, quick_changes: Mapping[str, Any], overrides: Mapping[str, Any]
):
    """A report's settings: ``defaults``; in quick mode with ``quick=True`` and
    ``quick_changes``; then ``overrides`` (see :func:`override`)."""
    cfg = dataclasses.replace(defaults, quick=True, **quick_changes) if quick else defaults
    return override(cfg, overrides)


def read_kept(path: Path, key: str | None = None, expected: Any = None) -> Any:
    """The JSON value kept in ``path``, or None when there is none or (with ``key``) when
    its ``key`` entry is not ``expected`` (a result kept for other settings)."""
    if not path.exists():
        return None
    kept = json.loads(path.read_text())
    return kept if key is None or kept.get(key) == expected else None


def write_summary(
    out: Path, summary: dict, started: float, cfg: Any, defaults: Any, **dump: Any
) -> dict:
    """``summary`` stamped with its provenance (:func:`bojax.reports.provenance.stamp`:
    ``cfg`` against the report's ``defaults`` for its mode), written to
    ``out/summary.json`` (``dump``: :func:`json.dumps` options) and returned."""
    from bojax.reports.provenance import stamp

    summary = stamp(summary, started, cfg, defaults)
    (Path(out) / "summary.json").write_text(json.dumps(summary, **({"indent": 1} | dump)))
    return summary


def script_arguments(
    doc: str,
    default_out: Path,
    int_overrides: Sequence[str],
    argv: list[str] | None,
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> tuple[argparse.Namespace, dict[str, int]]:
    """The command line every report script shares: ``--quick``, ``--out``,
    ``--no-progress``, the script's own arguments (``extra``) and integer overrides of
    its settings (``--burn-in 10`` -> ``{"burn_in": 10}``). Returns the parsed arguments
    and the overrides given."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small budget (a few minutes)")
    parser.add_argument("--out", type=Path, default=default_out)
    parser.add_argument("--no-progress", action="store_true")
    if extra is not None:
        extra(parser)
    reduced = parser.add_argument_group("overrides (for reduced runs)")
    for name in int_overrides:
        reduced.add_argument(f"--{name}", type=int)
    args = parser.parse_args(argv)
    overrides = {
        key: value
        for key in (name.replace("-", "_") for name in int_overrides)
        if (value := getattr(args, key)) is not None
    }
    return args, overrides


def run_script(
    args: argparse.Namespace,
    report: str,
    overrides: Mapping[str, Any],
    show: str | Callable[[dict], str],
    out: Path | None = None,
    **options: Any,
) -> dict:
    """What a report script does once its command line is read: float64 on, the report's
        settings (``--quick`` and ``overrides``), its ``run`` into ``out`` (default
        ``args.out/quick`` or ``args.out/full``) with ``options``, on a Dask cluster where
        ``--workers`` or ``--scheduler`` are given; then ``show(summary)`` is printed (``show``
    may name a function of the report module). A
        :class:`~bojax.errors.BojaxError` is printed instead and gives ``{}``."""
    import jax

    jax.config.update("jax_enable_x64", True)  # GP numerics in float64; networks stay float32
    from bojax.errors import BojaxError, JournalError

    module = importlib.import_module(f"bojax.reports.{report}")
    out = out or args.out / ("quick" if args.quick else "full")
    workers, scheduler = getattr(args, "workers", None), getattr(args, "scheduler", None)
    try:
        cfg = module.config(quick=args.quick, **overrides)
        options["progress"] = not args.no_progress
        if workers is None and scheduler is None:
            summary = module.run(cfg, out, **options)
        else:
            from bojax.bo import cluster

            with cluster.connect(workers, scheduler) as client:
                summary = module.run(cfg, out, executor=client, **options)
    except BojaxError as error:
        print(f"error: {error}", file=sys.stderr)
        if isinstance(error, JournalError):
            print("(pass --fresh to discard those runs, or choose another --out)", file=sys.stderr)
        return {}
    print((getattr(module, show) if isinstance(show, str) else show)(summary))
    print(f"wrote {out}")
    return summary
