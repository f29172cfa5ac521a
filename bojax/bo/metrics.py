"""Several metrics per evaluation: which to optimise, in which direction, under which
outcome constraints (:class:`Metrics`).

A run declares ``objectives={"error": "min", "latency": "min"}`` and, optionally,
``constraints={"params": ("<=", 1e6)}``; the objective then returns a dict of metrics
holding at least those names (more are journalled and otherwise ignored, except those
that are not one finite number, which are left out). Settings keep
both as text, ``"error:min"`` and ``"params<=1000000.0"``, which is also how the CLI
spells them (``--objective error:min --constraint 'params<=1e6'``).

The model sees one column per distinct metric name, objectives first, in the loop's
minimising orientation: a column is negated where its objective is maximised. A
constraint ``v <= b`` (or ``v >= b``) is feasible where ``a z <= t`` on its column's
warped value ``z``, with the orientation ``a`` and threshold ``t`` of
:meth:`Metrics.thresholds`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from bojax.errors import DataError, SettingsError

DIRECTIONS = ("min", "max")
OPERATORS = ("<=", ">=")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,99}$")
_CONSTRAINT = re.compile(r"^\s*([^<>=\s]+)\s*(<=|>=)\s*(\S+)\s*$")


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise SettingsError(
            f"{what} name must be a letter or _ followed by letters, digits, _ . or - "
            f"(at most 100 characters), got {name!r}"
        )
    return name


def _bound(value: Any, name: str) -> float:
    try:
        bound = float(value)
    except (TypeError, ValueError, OverflowError):
        raise SettingsError(
            f"constraint on {name!r}: the bound must be a number, got {value!r}"
        ) from None
    if isinstance(value, bool) or not math.isfinite(bound):
        raise SettingsError(f"constraint on {name!r}: the bound must be finite, got {value!r}")
    return bound


def objective_texts(value: Any) -> tuple[str, ...] | None:
    """``objectives`` as the settings keep it: ``("error:min", ...)`` from a dict
    ``{name: "min" | "max"}`` or from such texts; None stays None."""
    if value is None:
        return None
    items = value.items() if isinstance(value, Mapping) else None
    if items is None:
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise SettingsError(
                f"objectives must be a dict {{name: 'min' | 'max'}} or texts 'name:min', "
                f"got {value!r}"
            )
        items = []
        for text in value:
            if not isinstance(text, str) or text.count(":") != 1:
                raise SettingsError(
                    f"an objective is written 'name:min' or 'name:max', got {text!r}"
                )
            items.append(tuple(text.split(":")))
    texts = []
    for name, direction in items:
        _check_name(name, "objective")
        if direction not in DIRECTIONS:
            raise SettingsError(
                f"objective {name!r}: direction must be 'min' or 'max', got {direction!r}"
            )
        texts.append(f"{name}:{direction}")
    if not texts:
        raise SettingsError("objectives must name at least one metric (or be None)")
    names = [t.split(":")[0] for t in texts]
    if len(set(names)) != len(names):
        raise SettingsError(f"objectives name a metric twice: {names}")
    return tuple(texts)


def constraint_texts(value: Any) -> tuple[str, ...] | None:
    """``constraints`` as the settings keep it: ``("params<=1000000.0", ...)`` from a dict
    ``{name: ("<=" | ">=", bound)}`` or from texts ``"params<=1e6"``; None stays None."""
    if value is None:
        return None
    triples = []
    if isinstance(value, Mapping):
        for name, spec in value.items():
            if not (isinstance(spec, Sequence) and not isinstance(spec, str) and len(spec) == 2):
                raise SettingsError(
                    f"constraint on {name!r} must be (operator, bound), e.g. ('<=', 1e6), "
                    f"got {spec!r}"
                )
            triples.append((name, spec[0], spec[1]))
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for text in value:
            match = _CONSTRAINT.match(text) if isinstance(text, str) else None
            if match is None:
                raise SettingsError(
                    f"a constraint is written 'name<=bound' or 'name>=bound', got {text!r}"
                )
            triples.append(match.groups())
    else:
        raise SettingsError(
            "constraints must be a dict {name: (op, bound)} or texts 'name<=bound', "
            f"got {value!r}"
        )
    texts = []
    for name, operator, bound in triples:
        _check_name(name, "constraint")
        if operator not in OPERATORS:
            raise SettingsError(
                f"constraint on {name!r}: operator must be '<=' or '>=', got {operator!r}"
            )
        texts.append(f"{name}{operator}{_bound(bound, name)!r}")
    return tuple(texts) or None


class Metrics(NamedTuple):
    """The parsed ``objectives`` and ``constraints`` of a run."""

    objectives: tuple[tuple[str, str], ...]  # (name, "min" | "max")
    constraints: tuple[tuple[str, str, float], ...]  # (name, "<=" | ">=", bound)

    @classmethod
    def parse(cls, objectives: tuple[str, ...], constraints: tuple[str, ...] | None) -> Metrics:
        parsed = tuple(tuple(text.split(":")) for text in objectives)
        bounds = []
        for text in constraints or ():
            name, operator, bound = _CONSTRAINT.match(text).groups()
            bounds.append((name, operator, float(bound)))
        return cls(parsed, tuple(bounds))

    @property
    def columns(self) -> tuple[str, ...]:
        """The distinct metric names the model sees, objectives first."""
        names = [name for name, _ in self.objectives]
        return tuple(names + [c[0] for c in self.constraints if c[0] not in names])

    @property
    def signs(self) -> np.ndarray:
        """Per column, -1 where its objective is maximised (the loop minimises), else 1."""
        directions = dict(self.objectives)
        return np.array([-1.0 if directions.get(c) == "max" else 1.0 for c in self.columns])

    def row(self, metrics: Mapping[str, float]) -> np.ndarray:
        """The columns of one evaluation's metrics, in the objectives' units (DataError
        for a value that is not a number)."""
        try:
            return np.array([float(metrics[name]) for name in self.columns])
        except (TypeError, ValueError) as error:
            raise DataError(f"metrics must be numbers: {error}") from None

    def missing(self, metrics: Mapping[str, Any]) -> list[str]:
        """The declared metric names an evaluation's dict lacks."""
        return [name for name in self.columns if name not in metrics]

    def feasible(self, values: np.ndarray) -> np.ndarray:
        """``(n,)`` bool: rows of ``values`` (n, columns) that meet every constraint."""
        values = np.asarray(values, dtype=np.float64).reshape(-1, len(self.columns))
        ok = np.ones(len(values), dtype=bool)
        for name, operator, bound in self.constraints:
            column = values[:, self.columns.index(name)]
            ok &= column <= bound if operator == "<=" else column >= bound
        return ok

    def thresholds(self, shifts: np.ndarray, scales: np.ndarray) -> tuple[np.ndarray, ...]:
        """``(columns, orientation a, threshold t)`` per constraint, for columns warped
        as ``z = (sign v - shift) / scale``: ``v <= b`` (or ``>= b``) holds iff
        ``a z <= t``."""
        index, orient, bound = [], [], []
        signs = self.signs
        for name, operator, b in self.constraints:
            j = self.columns.index(name)
            side = 1.0 if operator == "<=" else -1.0
            a = side * signs[j]  # side * v <= side * b, with v = sign (z scale + shift)
            index.append(j)
            orient.append(a)
            bound.append((side * b - a * shifts[j]) / scales[j])
        return (
            np.array(index, dtype=np.int32),
            np.array(orient, dtype=np.float64),
            np.array(bound, dtype=np.float64),
        )
