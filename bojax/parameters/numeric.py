"""Numeric kinds on an interval: :class:`Real` and :class:`Integer` (optionally log)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from bojax.errors import OutOfBoundsError, ParameterTypeError, SpaceDefinitionError
from bojax.parameters.base import (
    Condition,
    Parameter,
    as_real_scalar,
    checked_unit,
    is_number,
    python_scalar,
)

#: The largest integer bound: float64, the coordinates' type, holds every integer up to it.
EXACT_INTEGERS = 2**53


@dataclass(frozen=True)
class _Interval(Parameter):
    """A kind that maps a (log-)linear interval ``[z_low, z_high]`` onto ``[0, 1]``."""

    low: float
    high: float
    log: bool = False
    condition: Condition | None = None  # relevant only when this holds (and the parent is)

    required_keys: ClassVar[tuple[str, ...]] = ("low", "high")
    optional_keys: ClassVar[tuple[str, ...]] = ("log", "condition")

    def __post_init__(self) -> None:
        super().__post_init__()
        # NumPy/JAX scalar bounds as Python numbers: a run's run.json holds the space as
        # JSON, and np.float32 is no JSON number (review BE).
        object.__setattr__(self, "low", python_scalar(self.low))
        object.__setattr__(self, "high", python_scalar(self.high))
        for bound in (self.low, self.high):
            if not is_number(bound):
                raise SpaceDefinitionError(
                    f"{self.name!r}: bounds must be finite numbers, got {bound!r}"
                )
        if not self.low < self.high:
            raise SpaceDefinitionError(
                f"{self.name!r}: need low < high, got [{self.low}, {self.high}]"
            )
        if not isinstance(self.log, bool):
            raise SpaceDefinitionError(f"{self.name!r}: log is true or false, got {self.log!r}")
        if not self.log and not math.isfinite(float(self.high) - float(self.low)):
            # [-1e308, 1e308]: each bound is finite, the width is not, and every unit
            # coordinate would decode to NaN.
            raise SpaceDefinitionError(
                f"{self.name!r}: high - low overflows a float, got [{self.low}, {self.high}]"
            )

    def _z_bounds(self) -> tuple[float, float]:
        return float(self.low), float(self.high)

    def _t(self, z):
        return np.log(z) if self.log else z

    def encode(self, values: np.ndarray) -> np.ndarray:
        t_low, t_high = (self._t(z) for z in self._z_bounds())
        return (self._t(values) - t_low) / (t_high - t_low)

    def _relaxed(self, u: np.ndarray) -> np.ndarray:
        """The continuous value ``z`` a unit coordinate stands for."""
        t_low, t_high = (self._t(z) for z in self._z_bounds())
        t = t_low + checked_unit(self.name, u) * (t_high - t_low)
        return np.exp(t) if self.log else t

    def describe(self) -> str:
        return f"{self.kind} [{self.low}, {self.high}]" + (" log" if self.log else "")


@dataclass(frozen=True)
class Real(_Interval):
    """A real parameter on ``[low, high]``; ``log=True`` spaces it logarithmically."""

    kind: ClassVar[str] = "real"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.log and self.low <= 0:
            raise SpaceDefinitionError(f"{self.name!r}: a log-scaled real needs low > 0")
        if self.log and not math.log(self.high) > math.log(self.low):
            # a few ulps apart: every unit coordinate is log(low), and encode divides 0 by 0
            raise SpaceDefinitionError(
                f"{self.name!r}: [{self.low}, {self.high}] is too narrow for a log scale "
                "(the logs of its ends are one float); use log=False"
            )

    def check(self, value: Any) -> float:
        value = as_real_scalar(self.name, value)
        if not self.low <= value <= self.high:
            raise OutOfBoundsError(self.name, value, self.low, self.high)
        return value

    def decode(self, u: np.ndarray) -> np.ndarray:
        # The cube's faces are the bounds exactly (exp(log 1e-3) is 0.0010000000000000002),
        # where an optimiser of the acquisition often stops (review BE).
        z = np.clip(self._relaxed(u), self.low, self.high)
        u = np.asarray(u)
        return np.where(u <= 0.0, self.low, np.where(u >= 1.0, self.high, z))

    def snap(self, u: np.ndarray) -> np.ndarray:
        return np.asarray(u, dtype=np.float64)


@dataclass(frozen=True)
class Integer(_Interval):
    """An integer parameter on ``{low, ..., high}``; ``log=True`` spaces it logarithmically."""

    kind: ClassVar[str] = "integer"

    def __post_init__(self) -> None:
        super().__post_init__()
        for bound in (self.low, self.high):
            if not float(bound).is_integer():
                raise SpaceDefinitionError(
                    f"{self.name!r}: integer bounds must be whole, got {bound!r}"
                )
            if abs(bound) > EXACT_INTEGERS:
                # Coordinates are float64: beyond 2**53 neighbouring integers share one,
                # so a proposal could not name the integer it means.
                raise SpaceDefinitionError(
                    f"{self.name!r}: integer bounds must lie within +-2**53, got {bound!r}"
                )
        object.__setattr__(self, "low", int(self.low))
        object.__setattr__(self, "high", int(self.high))
        if self.log and self.low < 1:
            raise SpaceDefinitionError(f"{self.name!r}: a log-scaled integer needs low >= 1")
        # The ends of a range near 2**53 (or a log range's top) share unit coordinates
        # with their neighbours; a proposal there could not name the integer it means.
        ends = np.array(sorted({self.low, self.high, min(self.low + 1, self.high),
                                max(self.high - 1, self.low)}), dtype=np.int64)  # fmt: skip
        if not np.array_equal(self.decode(self.encode(ends.astype(np.float64))), ends):
            raise SpaceDefinitionError(
                f"{self.name!r}: the range [{self.low}, {self.high}] is too wide for its "
                "integers to be told apart on the unit scale; narrow it (or use a Real)"
            )

    def _z_bounds(self) -> tuple[float, float]:
        return self.low - 0.5, self.high + 0.5

    def check(self, value: Any) -> int:
        real = as_real_scalar(self.name, value)
        if not real.is_integer():
            raise ParameterTypeError(self.name, f"expected an integer, got {value!r}")
        value = int(real)
        if not self.low <= value <= self.high:
            raise OutOfBoundsError(self.name, value, self.low, self.high)
        return value

    def decode(self, u: np.ndarray) -> np.ndarray:
        return np.clip(np.floor(self._relaxed(u) + 0.5), self.low, self.high).astype(np.int64)

    def snap(self, u: np.ndarray) -> np.ndarray:
        return self.encode(self.decode(u).astype(np.float64))

    def grid(self) -> np.ndarray:
        return self.encode(np.arange(self.low, self.high + 1, dtype=np.float64))
