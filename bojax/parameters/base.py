r"""The parameter-kind contract (:class:`Parameter`), relevance :class:`Condition`\s, the
:data:`PARAMETER_KINDS` registry and the value helpers every kind shares."""

from __future__ import annotations

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
    """A finite real that is not a bool (``True == 1`` in Python, not in a space).

    An integer too large for a float (``10**400`` from a JSON or TOML file) is not one:
    every model reads values as float64, and ``math.isfinite`` would raise on it.
    """
    if not isinstance(value, numbers.Real) or isinstance(value, bool | np.bool_):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


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


def typed_key(value: Any) -> Any:
    """A hashable key of a parameter's field (a value, a tuple of them, a condition)
    equal for two fields exactly when :func:`same_value` holds value by value: the
    dataclasses' own equality takes ``True`` for ``1``."""
    if isinstance(value, Condition):
        return ("condition", value.parent, value.op, typed_key(value.value))
    if isinstance(value, tuple | list):
        return tuple(typed_key(v) for v in value)
    value = python_scalar(value)
    return (isinstance(value, bool), isinstance(value, str), value)


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
            object.__setattr__(self, "value", tuple(python_scalar(v) for v in self.value))
        else:  # (NumPy scalars as Python's: a run's run.json holds the space as JSON)
            object.__setattr__(self, "value", python_scalar(self.value))
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
        if self.ordered and v.dtype == object and all(is_number(x) for x in v.ravel()):
            v = v.astype(np.float64)  # an ordinal of ints and floats decodes to objects
        # Numbers against numbers at once; a string or a boolean (a choice of a mixed
        # categorical) is never cast to a number: it fails or compares equal to 1.
        if np.issubdtype(v.dtype, np.number) and all(is_number(x) for x in self.values):
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
        return f"{self.parent} {self.op} {self.value!r}"  # the string "1" apart from 1


MAX_NAME_LENGTH = 200


def _condition(name: str, given: Sequence | Mapping) -> Condition:
    """The :class:`Condition` of parameter ``name`` from ``(parent, op, value)`` or a
    journal's ``{"parent": ..., "op": ..., "value": ...}``. Its errors name the parameter
    that carries it: a condition's own checks only know the parent it compares."""
    try:
        return Condition(**given) if isinstance(given, Mapping) else Condition(*given)
    except TypeError as error:  # a key or an entry too many or too few
        raise SpaceDefinitionError(
            f"parameter {name!r}: condition is (parent, op, value), got {given!r}"
        ) from error
    except SpaceDefinitionError as error:
        raise SpaceDefinitionError(f"parameter {name!r}: {error}") from error


def as_real_scalar(name: str, value: Any) -> float:
    """``value`` as a Python float, or a typed error. Booleans and strings are refused."""
    value = python_scalar(value)  # 0-d NumPy/JAX arrays
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise ParameterTypeError(name, f"expected a number, got {type(value).__name__} {value!r}")
    try:
        value = float(value)
    except OverflowError:  # an int beyond float64 (10**400), outside every range
        raise InvalidValueError(name, f"value {_short_int(value)} is beyond float64") from None
    if not math.isfinite(value):
        raise InvalidValueError(name, f"value {value!r} is not finite")
    return value


def _short_int(value: Any) -> str:
    """A huge int's text cut to its first and last digits (10**400 has 401)."""
    text = str(value)
    return text if len(text) <= 40 else f"{text[:18]}...{text[-18:]} ({len(text)} digits)"


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
        # Names reach terminals, figure labels and file formats: no control characters
        # (an escape sequence in a name rewrote the terminal), no name longer than a line.
        if len(self.name) > MAX_NAME_LENGTH or any(ord(c) < 32 or c == "\x7f" for c in self.name):
            shown = repr(self.name[:60]) + ("..." if len(self.name) > 60 else "")
            raise SpaceDefinitionError(
                f"parameter {shown}: a name has at most {MAX_NAME_LENGTH} characters and no "
                "control characters"
            )
        condition = getattr(self, "condition", None)
        if isinstance(condition, tuple | list):  # ("layers", ">=", 3) is accepted too
            object.__setattr__(self, "condition", _condition(self.name, condition))
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
            spec["condition"] = _condition(name, condition)
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
