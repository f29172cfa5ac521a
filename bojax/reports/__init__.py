"""Reproductions of the reports bojax is built from, one module per report.

Each module holds the report's settings (``config``), a ``run`` that performs the
experiment and writes its figures and ``summary.json``, and the plotting. The scripts
in ``experiments/`` are thin command lines over these; ``bojax demo`` runs one too.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

from bojax.errors import SettingsError


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
