"""Parameter kinds: how one named parameter maps between its values and a unit coordinate.

Every kind is a frozen dataclass derived from :class:`Parameter` and registered in
:data:`PARAMETER_KINDS` under the ``type`` word that space files and journals use. The
contract a kind fulfils (the rest of bojax asks nothing else of it):

* ``check(value)``: the value normalised (``int`` for an integer, ...) or a typed
  :class:`~bojax.errors.ParameterError` naming the parameter;
* ``encode(values)`` / ``decode(u)``: checked values to unit coordinates in ``[0, 1]``
  and back, vectorised over NumPy arrays; ``decode(encode(v)) == v``;
* ``snap(u)``: the canonical coordinate of the value ``u`` decodes to, so equal values
  have equal coordinates (how repeats are found); the identity for a continuum;
* ``spec()`` / ``from_spec(name, spec)``: the JSON/TOML form (journals, space files),
  validated key by key;
* ``describe()``: one line for ``bojax show``.

Sampling needs no method: a space draws uniform (or Sobol) unit coordinates and snaps
them, so a kind whose values own bins of the unit interval is sampled in proportion to
the bins' widths. The built-in kinds:

* ``Real(low, high)``: ``u = (t(v) - t(low)) / (t(high) - t(low))`` with ``t`` the
  identity, or ``log`` when ``log=True``.
* ``Integer(low, high)``: the same map applied to the continuous relaxation
  ``z in [low - 1/2, high + 1/2]``; a unit coordinate decodes to ``round(z)``. Every
  integer owns a bin of equal width in ``t``-space (equal probability under uniform
  sampling, or per octave with ``log=True``) and encodes to the bin's centre, so
  ``decode(encode(k)) == k`` exactly.

A new kind is one class and one :meth:`~bojax.registry.Registry.register` call
(``docs/extending.md``). Any kind may carry a :class:`Condition` on an earlier parameter
(conditional spaces, the arc-kernel report, sec. 2).
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

import numpy as np

from bojax.errors import (
    InvalidValueError,
    OutOfBoundsError,
    ParameterTypeError,
    SpaceDefinitionError,
)
from bojax.registry import Registry

# Unit coordinates this far outside [0, 1] are taken as rounding error and clipped.
UNIT_TOLERANCE = 1e-9

_COMPARISONS = {
    "==": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}


def is_number(value: Any) -> bool:
    """A finite real that is not a bool (``True == 1`` in Python, not in a space)."""
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool | np.bool_)
        and math.isfinite(value)
    )


def python_scalar(value: Any) -> Any:
    """A NumPy/JAX scalar as the Python value it holds; other values unchanged."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return value.item()
    return value


def same_value(a: Any, b: Any) -> bool:
    """Equality of parameter values that keeps booleans, numbers and strings apart."""
    a, b = python_scalar(a), python_scalar(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return a == b


@dataclass(frozen=True)
class Condition:
    """``parent op value``: when the parameter carrying it is relevant.

    ``op`` is one of ``== != < <= > >=`` or ``in`` (``value`` a tuple of allowed values),
    e.g. ``Condition("layers", ">=", 3)`` or ``Condition("optimizer", "in", ("sgd",
    "rmsprop"))``. Values are finite numbers, strings or booleans; a space checks them
    against the parent's kind (and refuses an order comparison on an unordered parent).
    """

    parent: str
    op: str
    value: Any

    def __post_init__(self) -> None:
        if self.op not in (*_COMPARISONS, "in"):
            raise SpaceDefinitionError(
                f"condition on {self.parent!r}: unknown operator {self.op!r}; "
                f"use one of {[*_COMPARISONS, 'in']}"
            )
        if self.op == "in":
            if (
                isinstance(self.value, str)
                or not isinstance(self.value, Sequence)
                or not self.value
            ):
                raise SpaceDefinitionError(
                    f"condition on {self.parent!r}: 'in' needs a non-empty sequence of values"
                )
            object.__setattr__(self, "value", tuple(self.value))
        for v in self.values:
            ordered = self.op in ("<", "<=", ">", ">=")
            if not (is_number(v) or (not ordered and isinstance(v, str | bool))):
                kind = "finite numbers" if ordered else "finite numbers, strings or booleans"
                raise SpaceDefinitionError(
                    f"condition on {self.parent!r}: {self.op!r} compares with {kind}, got {v!r}"
                )

    @property
    def values(self) -> tuple:
        """The values compared with: ``value`` itself, or the members of an ``in``."""
        return self.value if self.op == "in" else (self.value,)

    @property
    def ordered(self) -> bool:
        return self.op in ("<", "<=", ">", ">=")

    def holds(self, parent_values: np.ndarray) -> np.ndarray:
        """Elementwise truth of the condition for an array of the parent's values."""
        v = np.asarray(parent_values)
        if v.dtype != object and all(is_number(x) for x in self.values):
            v = v.astype(np.float64)
            if self.op == "in":
                return np.isin(v, np.asarray(self.value, dtype=np.float64))
            return _COMPARISONS[self.op](v, float(self.value))
        if self.ordered:
            raise SpaceDefinitionError(f"condition {self}: {self.op!r} needs numeric values")
        # Strings, booleans or a parent of mixed choices: compare value by value.
        equal = np.zeros(v.shape, bool)
        for x in self.values:
            equal |= np.asarray(np.frompyfunc(lambda a, x=x: same_value(a, x), 1, 1)(v), bool)
        return ~equal if self.op == "!=" else equal

    def __str__(self) -> str:
        return f"{self.parent} {self.op} {self.value}"


def as_real_scalar(name: str, value: Any) -> float:
    """``value`` as a Python float, or a typed error. Booleans and strings are refused."""
    value = python_scalar(value)  # 0-d NumPy/JAX arrays
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise ParameterTypeError(name, f"expected a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise InvalidValueError(name, f"value {value!r} is not finite")
    return value


def checked_unit(name: str, u: Any) -> np.ndarray:
    """Unit coordinates as float64, clipped to ``[0, 1]``; non-finite or clearly outside
    coordinates raise a typed error naming the parameter."""
    u = np.asarray(u, dtype=np.float64)
    bad = ~np.isfinite(u)
    if bad.any():
        raise InvalidValueError(name, f"unit coordinate {u[bad].flat[0]!r} is not finite")
    outside = (u < -UNIT_TOLERANCE) | (u > 1 + UNIT_TOLERANCE)
    if outside.any():
        raise OutOfBoundsError(name, float(u[outside].flat[0]), 0.0, 1.0)
    return np.clip(u, 0.0, 1.0)


@dataclass(frozen=True)
class Parameter:
    """The base of every parameter kind: a name and an optional :class:`Condition`.

    Subclasses set ``kind`` (the ``type`` word of files and journals), declare their own
    fields after ``name`` and end with ``condition: Condition | None = None`` (a dataclass
    puts defaulted fields last; the registry checks it), and implement the contract in
    the module docstring.
    """

    kind: ClassVar[str]
    #: Whether surrogates compare this kind's coordinates for equality only (no order).
    categorical: ClassVar[bool] = False
    #: Whether the values have an order (conditions may then use ``<`` ... ``>=``).
    ordered: ClassVar[bool] = True
    #: Whether the acquisition optimiser moves it by gradient steps (then snaps); other
    #: kinds move by :meth:`neighbours`, one value at a time.
    continuous: ClassVar[bool] = True
    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise SpaceDefinitionError(
                f"a parameter name must be a non-empty string, got {self.name!r}"
            )
        condition = getattr(self, "condition", None)
        if isinstance(condition, tuple | list):  # ("layers", ">=", 3) is accepted too
            object.__setattr__(self, "condition", Condition(*condition))
        elif condition is not None and not isinstance(condition, Condition):
            raise SpaceDefinitionError(
                f"{self.name!r}: condition must be a Condition or (parent, op, value), "
                f"got {condition!r}"
            )

    # -- the contract ---------------------------------------------------------------
    def check(self, value: Any) -> Any:
        raise NotImplementedError

    def encode(self, values: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def decode(self, u: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def snap(self, u: np.ndarray) -> np.ndarray:
        return self.encode(self.decode(u))

    def describe(self) -> str:
        return self.kind

    def grid(self) -> np.ndarray | None:
        """The unit coordinates of every value, for a kind with finitely many (None for a
        continuum): what exact enumeration of a small space walks through."""
        return None

    def neighbours(self, u: float) -> np.ndarray:
        """Unit coordinates of the values one move away from the value at ``u`` (another
        choice, the next grid value); empty for kinds refined by gradient steps."""
        return np.zeros(0)

    def spec(self) -> dict[str, Any]:
        """The serialised form: ``type`` and the fields, without an absent condition (so
        unconditional spaces serialise as they always did)."""
        spec = {"type": self.kind, **asdict(self)}
        if spec.get("condition", 0) is None:
            del spec["condition"]
        return spec

    #: Keys a space file or journal may give besides ``type`` (``name`` comes from the
    #: table's title in a file), and those it must give.
    required_keys: ClassVar[tuple[str, ...]] = ()
    optional_keys: ClassVar[tuple[str, ...]] = ("condition",)

    @classmethod
    def from_spec(cls, name: str, spec: Mapping[str, Any]) -> Parameter:
        """A parameter from its serialised fields (``type`` and ``name`` removed), with
        a :class:`SpaceDefinitionError` naming what is missing or unknown."""
        spec = dict(spec)
        allowed = {*cls.required_keys, *cls.optional_keys}
        unknown = sorted(set(spec) - allowed)
        missing = [k for k in cls.required_keys if k not in spec]
        if unknown or missing:
            takes = [f"needs {' and '.join(cls.required_keys)}"] if cls.required_keys else []
            takes += [f"may have {' and '.join(cls.optional_keys)}"] if cls.optional_keys else []
            raise SpaceDefinitionError(
                f"parameter {name!r}: a {cls.kind} parameter {', '.join(takes)}"
                + (f"; unknown keys {unknown}" if unknown else "")
                + (f"; missing {missing}" if missing else "")
            )
        condition = spec.get("condition")
        if isinstance(condition, Mapping):  # a journal's serialised Condition
            spec["condition"] = Condition(**condition)
        elif condition is not None and not (
            isinstance(condition, list | tuple) and len(condition) == 3
        ):
            raise SpaceDefinitionError(
                f"parameter {name!r}: condition is [parent, op, value], got {condition!r}"
            )
        return cls(name, **spec)


def _check_kind(record: Any) -> None:
    if not (isinstance(record, type) and issubclass(record, Parameter)):
        raise SpaceDefinitionError(f"a parameter kind is a Parameter subclass, got {record!r}")
    if "condition" not in {f.name for f in fields(record)}:
        raise SpaceDefinitionError(
            f"{record.__name__} needs a last field `condition: Condition | None = None`"
        )


#: The parameter kinds by their ``type`` word: ``PARAMETER_KINDS.register(MyKind, "mine")``.
PARAMETER_KINDS: Registry[type[Parameter]] = Registry(
    "parameter kind", _check_kind, plural="parameter kinds"
)


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
        for bound in (self.low, self.high):
            if (
                isinstance(bound, bool)
                or not isinstance(bound, numbers.Real)
                or not math.isfinite(bound)
            ):
                raise SpaceDefinitionError(
                    f"{self.name!r}: bounds must be finite numbers, got {bound!r}"
                )
        if not self.low < self.high:
            raise SpaceDefinitionError(
                f"{self.name!r}: need low < high, got [{self.low}, {self.high}]"
            )
        if not isinstance(self.log, bool):
            raise SpaceDefinitionError(f"{self.name!r}: log is true or false, got {self.log!r}")

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

    def check(self, value: Any) -> float:
        value = as_real_scalar(self.name, value)
        if not self.low <= value <= self.high:
            raise OutOfBoundsError(self.name, value, self.low, self.high)
        return value

    def decode(self, u: np.ndarray) -> np.ndarray:
        return np.clip(self._relaxed(u), self.low, self.high)

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
        object.__setattr__(self, "low", int(self.low))
        object.__setattr__(self, "high", int(self.high))
        if self.log and self.low < 1:
            raise SpaceDefinitionError(f"{self.name!r}: a log-scaled integer needs low >= 1")

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


def _listed(name: str, field: str, values: Any) -> tuple:
    """A kind's list of values as a tuple of Python scalars, or a typed error."""
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise SpaceDefinitionError(f"{name!r}: {field} must be a list, got {values!r}")
    return tuple(python_scalar(v) for v in values)


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
        repeated = [c for i, c in enumerate(choices) if any(same_value(c, d) for d in choices[:i])]
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
        if len(values) < 2 or any(b <= a for a, b in itertools.pairwise(values)):
            raise SpaceDefinitionError(
                f"{self.name!r}: needs two or more strictly increasing values, got {values!r}"
            )
        if not isinstance(self.log, bool):
            raise SpaceDefinitionError(f"{self.name!r}: log is true or false, got {self.log!r}")
        if self.log and values[0] <= 0:
            raise SpaceDefinitionError(f"{self.name!r}: a log-spaced grid needs values > 0")
        object.__setattr__(self, "values", values)

    def _centres(self) -> np.ndarray:
        t = (
            np.log(np.asarray(self.values, np.float64))
            if self.log
            else np.asarray(self.values, np.float64)
        )
        low, high = t[0] - (t[1] - t[0]) / 2, t[-1] + (t[-1] - t[-2]) / 2
        return (t - low) / (high - low)

    def _index(self, value: Any) -> int:
        value = as_real_scalar(self.name, value)
        for k, v in enumerate(self.values):
            if value == v:
                return k
        raise InvalidValueError(self.name, f"{value!r} is not one of {list(self.values)}")

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
        return np.asarray(self.values)[self.indices(u)]

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


PARAMETER_KINDS.register(Real, Real.kind)
PARAMETER_KINDS.register(Integer, Integer.kind)
PARAMETER_KINDS.register(Categorical, Categorical.kind)
PARAMETER_KINDS.register(Ordinal, Ordinal.kind)


def parameter_from_spec(name: str, spec: Mapping[str, Any]) -> Parameter:
    """The parameter of a serialised ``{"type": ..., ...}`` table (files, journals)."""
    if not isinstance(spec, Mapping):
        raise SpaceDefinitionError(f"parameter {name!r}: expected a table with a type")
    spec = dict(spec)
    kind = spec.pop("type", None)
    if kind not in PARAMETER_KINDS:
        raise SpaceDefinitionError(
            f"parameter {name!r}: type must be one of {sorted(PARAMETER_KINDS.names())}, "
            f"got {kind!r}"
        )
    return PARAMETER_KINDS.get(kind).from_spec(name, spec)
