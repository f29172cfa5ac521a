"""Reproductions of the reports bojax is built from, one module per report.

Each module holds the report's settings (``config``), a ``run`` that performs the
experiment and writes its figures and ``summary.json``, and the plotting. The scripts
in ``experiments/`` are thin command lines over these; ``bojax demo`` runs one too.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
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


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend (imported late: it is slow)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def override(cfg, overrides: Mapping[str, Any]):
    """``dataclasses.replace(cfg, **overrides)``, with a :class:`SettingsError` naming
    any field the report's settings do not have."""
    try:
        return dataclasses.replace(cfg, **overrides)
    except TypeError as error:
        raise SettingsError(f"{type(cfg).__module__}: {error}") from None


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
