"""Finite kinds: unordered :class:`Categorical` choices and :class:`Ordinal` grids."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from bojax.errors import InvalidValueError, SpaceDefinitionError
from bojax.parameters.base import (
    Condition,
    Parameter,
    as_real_scalar,
    checked_unit,
    is_number,
    python_scalar,
    same_value,
)
from bojax.parameters.numeric import EXACT_INTEGERS


def _listed(name: str, field: str, values: Any) -> tuple:
    """A kind's list of values as a tuple of Python scalars, or a typed error."""
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise SpaceDefinitionError(f"{name!r}: {field} must be a list, got {values!r}")
    return tuple(python_scalar(v) for v in values)


def _identity(choice: Any) -> tuple:
    """A hashable key equal for two choices exactly when :func:`same_value` says so:
    booleans, strings and numbers apart, ``1 == 1.0`` among numbers."""
    return (isinstance(choice, bool), isinstance(choice, str), choice)


@dataclass(frozen=True)
class Categorical(Parameter):
    """One of unordered ``choices`` (strings, numbers or booleans): an optimiser, an
    activation, a normalisation.

    Choice ``k`` of ``K`` owns the bin ``[k/K, (k+1)/K)`` of the unit interval and encodes
    to its centre ``(k + 1/2) / K``, so uniform sampling draws each choice with
    probability ``1/K``. The coordinate's order means nothing: surrogates read a
    categorical through its kind (``categorical = True``) and compare choices for
    equality only (an overlap kernel), and the acquisition optimiser moves it by
    switching choices, never by gradient steps.
    """

    kind: ClassVar[str] = "categorical"
    ordered: ClassVar[bool] = False
    continuous: ClassVar[bool] = False
    #: Surrogates compare the coordinates of such kinds for equality only.
    categorical: ClassVar[bool] = True
    required_keys: ClassVar[tuple[str, ...]] = ("choices",)
    optional_keys: ClassVar[tuple[str, ...]] = ("condition",)

    choices: tuple = ()
    condition: Condition | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        choices = _listed(self.name, "choices", self.choices)
        for c in choices:
            if not (isinstance(c, str | bool) or is_number(c)):
                raise SpaceDefinitionError(
                    f"{self.name!r}: a choice is a string, a finite number or a boolean, got {c!r}"
                )
        if len(choices) < 2:
            raise SpaceDefinitionError(f"{self.name!r}: needs at least two choices")
        seen, repeated = set(), []
        for c in choices:  # one pass: a file may list many choices
            if _identity(c) in seen:
                repeated.append(c)
            seen.add(_identity(c))
        if repeated:
            raise SpaceDefinitionError(f"{self.name!r}: choices repeat: {repeated}")
        object.__setattr__(self, "choices", choices)

    def index(self, value: Any) -> int:
        for k, choice in enumerate(self.choices):
            if same_value(value, choice):
                return k
        raise InvalidValueError(
            self.name, f"{python_scalar(value)!r} is not one of the choices {list(self.choices)}"
        )

    def check(self, value: Any) -> Any:
        return self.choices[self.index(value)]

    def encode(self, values: np.ndarray) -> np.ndarray:
        index = [self.index(v) for v in np.asarray(values, dtype=object).ravel()]
        return ((np.asarray(index, np.float64) + 0.5) / len(self.choices)).reshape(np.shape(values))

    def indices(self, u: np.ndarray) -> np.ndarray:
        """The choice index of each unit coordinate."""
        k = np.floor(checked_unit(self.name, u) * len(self.choices))
        return np.clip(k, 0, len(self.choices) - 1).astype(np.int64)

    def decode(self, u: np.ndarray) -> np.ndarray:
        out = np.empty(np.shape(u), dtype=object)
        out[...] = np.asarray(self.choices, dtype=object)[self.indices(u)]
        return out

    def snap(self, u: np.ndarray) -> np.ndarray:
        return (self.indices(u) + 0.5) / len(self.choices)

    def describe(self) -> str:
        return f"categorical {list(self.choices)}"

    def grid(self) -> np.ndarray:
        return (np.arange(len(self.choices)) + 0.5) / len(self.choices)

    def neighbours(self, u: float) -> np.ndarray:
        """Every other choice: choices have no order, so each is one move away."""
        grid = self.grid()
        return np.delete(grid, self.indices(np.asarray(u)))


@dataclass(frozen=True)
class Ordinal(Parameter):
    """One of an ordered numeric grid ``values`` (batch sizes 16/32/64/128, a few
    learning rates); ``log=True`` spaces it logarithmically.

    With ``t`` the identity or ``log``, value ``v_k`` encodes to
    ``(t(v_k) - z_low) / (z_high - z_low)``, where the interval extends half a gap beyond
    each end (``z_low = t(v_0) - (t(v_1) - t(v_0)) / 2``, likewise at the top); a unit
    coordinate decodes to the value nearest in ``t``. Each value owns the bin between the
    midpoints to its neighbours, so the model sees the grid's spacing (in log where
    declared) and an ``Integer`` is the special case of consecutive integers.
    """

    kind: ClassVar[str] = "ordinal"
    continuous: ClassVar[bool] = False
    required_keys: ClassVar[tuple[str, ...]] = ("values",)
    optional_keys: ClassVar[tuple[str, ...]] = ("log", "condition")

    values: tuple = ()
    log: bool = False
    condition: Condition | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        values = _listed(self.name, "values", self.values)
        if not all(is_number(v) for v in values):
            raise SpaceDefinitionError(f"{self.name!r}: values must be finite numbers")
        if any(isinstance(v, int) and abs(v) > EXACT_INTEGERS for v in values):
            # as Integer's bounds: beyond 2**53 a listed int has no float64 of its own, and
            # a proposal of it was refused as not one of the values (review)
            raise SpaceDefinitionError(
                f"{self.name!r}: integer values must lie within +-2**53, got {values!r:.200}"
            )
        if len(values) < 2 or any(b <= a for a, b in itertools.pairwise(values)):
            raise SpaceDefinitionError(
                f"{self.name!r}: needs two or more strictly increasing values, got {values!r}"
            )
        if not isinstance(self.log, bool):
            raise SpaceDefinitionError(f"{self.name!r}: log is true or false, got {self.log!r}")
        if self.log and values[0] <= 0:
            raise SpaceDefinitionError(f"{self.name!r}: a log-spaced grid needs values > 0")
        object.__setattr__(self, "values", values)
        t = np.asarray(values, np.float64)
        with np.errstate(all="ignore"):
            t = np.log(t) if self.log else t
            low, high = t[0] - (t[1] - t[0]) / 2, t[-1] + (t[-1] - t[-2]) / 2
            centres = (t - low) / (high - low)
        if not (np.isfinite(centres).all() and (np.diff(centres) > 0).all()):
            # [-1e308, 1e308] overflows the grid's span; [2**53, 2**53 + 1] are two values
            # with one float64: either way two values would share a coordinate.
            raise SpaceDefinitionError(
                f"{self.name!r}: values too far apart or too close for float64, got {values!r}"
            )
        # Kept, not recomputed per call: an Optuna grid (a float with step 1e-6) holds a
        # million values. Each value decodes as the type it was given (16, not 16.0).
        table = np.asarray(values)
        if table.dtype.kind == "f" and not all(isinstance(v, float) for v in values):
            table = np.asarray(values, dtype=object)
        object.__setattr__(self, "_centre_table", centres)
        object.__setattr__(self, "_value_table", table)
        object.__setattr__(self, "_sorted", np.asarray(values, np.float64))  # (increasing)

    def _centres(self) -> np.ndarray:
        return self._centre_table

    def _index(self, value: Any) -> int:
        value = as_real_scalar(self.name, value)
        k = int(np.searchsorted(self._sorted, value))  # a binary search: grids may be long
        if k == len(self.values) or self.values[k] != value:
            raise InvalidValueError(self.name, f"{value!r} is not one of {list(self.values)}")
        return k

    def check(self, value: Any) -> int | float:
        return self.values[self._index(value)]

    def encode(self, values: np.ndarray) -> np.ndarray:
        index = [self._index(v) for v in np.asarray(values).ravel()]
        return self._centres()[np.asarray(index, np.int64)].reshape(np.shape(values))

    def indices(self, u: np.ndarray) -> np.ndarray:
        """The grid index of each unit coordinate: the nearest centre."""
        centres = self._centres()
        edges = (centres[1:] + centres[:-1]) / 2
        return np.searchsorted(edges, checked_unit(self.name, u), side="right")

    def decode(self, u: np.ndarray) -> np.ndarray:
        return self._value_table[self.indices(u)]

    def snap(self, u: np.ndarray) -> np.ndarray:
        return self._centres()[self.indices(u)]

    def describe(self) -> str:
        return f"ordinal {list(self.values)}" + (" log" if self.log else "")

    def grid(self) -> np.ndarray:
        return self._centres()

    def neighbours(self, u: float) -> np.ndarray:
        """The grid values just below and above."""
        k = int(self.indices(np.asarray(u)))
        centres = self._centres()
        return centres[[j for j in (k - 1, k + 1) if 0 <= j < len(centres)]]
