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
import os
import sys
import warnings
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
    its ``key`` entry is not ``expected`` (a result kept for other settings). A file that
    is not valid JSON (a write cut short) counts as none, with a warning naming it, so
    the result is computed again."""
    if not path.exists():
        return None
    try:
        kept = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        warnings.warn(f"{path} is not valid JSON ({error}); computing it again", stacklevel=2)
        return None
    return kept if key is None or (isinstance(kept, dict) and kept.get(key) == expected) else None


def write_kept(path: Path, value: Any, **dump: Any) -> None:
    """``value`` as JSON (``dump``: :func:`json.dumps` options) into ``path``, atomically
    (:func:`bojax.bo.journal.write_text_atomic`): a process killed mid-write leaves the
    old file or the new one, never a truncated one."""
    from bojax.bo.journal import write_text_atomic

    write_text_atomic(Path(path), json.dumps(value, **dump))


def summary_maker(summary: Mapping[str, Any]) -> str | None:
    """The report (module name in ``bojax.reports``) that made ``summary``: as its
    provenance records it, or for summaries made before it did, the report whose
    settings have exactly the fields of its ``config``; None if neither tells."""
    if not isinstance(summary, dict):  # not a summary of any report
        return None
    provenance = summary.get("provenance")
    made_by = provenance.get("report") if isinstance(provenance, dict) else None
    if made_by or not isinstance(summary.get("config"), dict):
        return made_by if isinstance(made_by, str) else None
    fields = set(summary["config"])
    for name in REPORTS:
        module = importlib.import_module(f"bojax.reports.{name}")
        if fields == {f.name for f in dataclasses.fields(module.Config)}:
            return name
    return None


REPORTS = ("ensemble_design", "arc_kernel", "hybrid_exploration", "architecture_search")
REPORTS += ("bnn_surrogate",)


def prepare_out(out: str | Path, report: str) -> Path:
    """``out`` made (with its parents) for ``report``'s results and returned, or a
    :class:`~bojax.errors.RunFolderError`: when it cannot be made or written, or when it
    holds another report's ``summary.json``, which this run would replace."""
    from bojax.errors import RunFolderError

    out = Path(out)
    summary = out / "summary.json"
    if summary.is_file():
        try:
            made_by = summary_maker(json.loads(summary.read_text()))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            made_by = None
        if made_by is not None and made_by != report:
            raise RunFolderError(
                f"{out} holds the {made_by} report's results (summary.json), which the "
                f"{report} report would replace: choose another --out"
            )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise RunFolderError(f"cannot make the folder {out}: {error.strerror or error}") from None
    if not os.access(out, os.W_OK):
        raise RunFolderError(f"cannot write into the folder {out}: permission denied")
    return out


def write_summary(
    out: Path, summary: dict, started: Any, cfg: Any, defaults: Any, **dump: Any
) -> dict:
    """``summary`` stamped with its provenance (:func:`bojax.reports.provenance.stamp`:
    the code read at ``started``, :func:`bojax.reports.provenance.begin`, and ``cfg``
    against the report's ``defaults`` for its mode), written to
    ``out/summary.json`` (``dump``: :func:`json.dumps` options) and returned."""
    from bojax.reports.provenance import stamp

    summary = stamp(summary, started, cfg, defaults)
    write_kept(Path(out) / "summary.json", summary, **({"indent": 1} | dump))
    return summary


# Integer overrides that count things a run cannot do without (seeds, repeats, samples
# ...): at least 1. The other integer overrides (iterations, burn-in, a seed) are at
# least 0.
POSITIVE = {"seeds", "toy-seeds", "rf-seeds", "repeats", "samples", "table-samples"}
POSITIVE |= {"candidates", "initial", "epochs", "figure-epochs", "points", "max-units"}
POSITIVE |= {"rf-max-trees", "rf-rows", "rf-folds", "table-points", "folds", "min-epochs"}
POSITIVE |= {"max-epochs", "rf-initial"}


def _at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


positive = _at_least(1)  # an argparse type: an integer >= 1
non_negative = _at_least(0)  # an argparse type: an integer >= 0


def script_arguments(
    doc: str,
    default_out: Path,
    int_overrides: Sequence[str],
    argv: list[str] | None,
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> tuple[argparse.Namespace, dict[str, int]]:
    """The command line every report script shares: ``--quick``, ``--out`` (default
    ``default_out``; ``args.out_given`` says whether it was given), ``--no-progress``, the
    script's own arguments (``extra``) and integer overrides of its settings
    (``--burn-in 10`` -> ``{"burn_in": 10}``; counts in ``POSITIVE`` at least 1, the
    others at least 0, refused by argparse otherwise). Returns the parsed arguments and
    the overrides given."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small budget (a few minutes)")
    parser.add_argument(
        "--out", type=Path, help=f"results folder (default {default_out}: the report's settings)"
    )
    parser.add_argument("--no-progress", action="store_true")
    if extra is not None:
        extra(parser)
    reduced = parser.add_argument_group("overrides (for reduced runs; need --out)")
    for name in int_overrides:
        kind = positive if name in POSITIVE else non_negative
        reduced.add_argument(f"--{name}", type=kind)
    args = parser.parse_args(argv)
    args.out_given = args.out is not None
    args.out = args.out if args.out_given else default_out
    overrides = {
        key: value
        for key in (name.replace("-", "_") for name in int_overrides)
        if (value := getattr(args, key)) is not None
    }
    return args, overrides


def reduced_settings(module: Any, quick: bool, overrides: Mapping[str, Any], selection) -> dict:
    """The settings ``module.config(quick=quick, **overrides)`` gives that differ from the
    report's defaults for the mode (``selection``: the ``overrides`` that choose which
    run, such as the experiment, and so belong to the defaults)."""
    from bojax.reports.provenance import overrides as differences

    chosen = {key: overrides[key] for key in selection if key in overrides}
    cfg = module.config(quick=quick, **overrides)
    return differences(cfg, module.config(quick=quick, **chosen))


def run_script(
    args: argparse.Namespace,
    report: str,
    overrides: Mapping[str, Any],
    show: str | Callable[[dict], str],
    out: Path | None = None,
    selection: Sequence[str] = (),
    **options: Any,
) -> dict:
    """What a report script does once its command line is read: float64 on, the report's
    settings (``--quick`` and ``overrides``), its ``run`` into ``out`` (default
    ``args.out/quick`` or ``args.out/full``) with ``options``, on a Dask cluster where
    ``--workers`` or ``--scheduler`` are given; then ``show(summary)`` is printed (``show``
    may name a function of the report module).

    Settings that differ from the mode's defaults (a reduced run; ``selection`` names the
    overrides that only choose the run, see :func:`reduced_settings`) are refused without
    ``--out``: the default folder holds the results of the report's settings. A
    :class:`~bojax.errors.BojaxError` is printed instead and gives ``{}``."""
    import jax

    jax.config.update("jax_enable_x64", True)  # GP numerics in float64; networks stay float32
    from bojax.errors import BojaxError, JournalError, RunFolderError

    module = importlib.import_module(f"bojax.reports.{report}")
    out = out or args.out / ("quick" if args.quick else "full")
    workers, scheduler = getattr(args, "workers", None), getattr(args, "scheduler", None)
    try:
        changed = reduced_settings(module, args.quick, overrides, selection)
        if changed and not getattr(args, "out_given", True):
            mode = "quick" if args.quick else "full"
            given = ", ".join(f"{key}={value}" for key, value in changed.items())
            raise SettingsError(
                f"these settings differ from the report's {mode} defaults ({given}), and "
                f"{out} holds the results of the report's own settings: pass --out DIR to "
                "write this run elsewhere"
            )
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
        if isinstance(error, JournalError) and not isinstance(error, RunFolderError):
            print("(pass --fresh to discard those runs, or choose another --out)", file=sys.stderr)
        return {}
    print((getattr(module, show) if isinstance(show, str) else show)(summary))
    print(f"wrote {out}")
    return summary
