"""Search spaces: named real and integer parameters and their unit-cube coordinates.

The surrogate and the acquisition optimiser work in the unit cube ``[0, 1]^d``; the
objective sees named values. Each parameter maps its values to one unit coordinate:

* ``Real(low, high)``: ``u = (t(v) - t(low)) / (t(high) - t(low))`` with ``t`` the
  identity, or ``log`` when ``log=True``.
* ``Integer(low, high)``: the same map applied to the continuous relaxation
  ``z in [low - 1/2, high + 1/2]``; a unit coordinate decodes to ``round(z)``. Every
  integer therefore owns a bin of equal width in ``t``-space (equal probability under
  uniform sampling, or equal probability per octave with ``log=True``), and encodes to
  the centre of its bin, so ``decode(encode(k)) == k`` exactly.

``Space.snap`` moves integer coordinates to their bin centres, so two candidates that
decode to the same point have identical coordinates; ``repeated_mask`` uses that to find
candidates that repeat an evaluated point.

Conditional spaces (the arc-kernel report, sec. 2): a parameter may carry a
:class:`Condition` on an earlier parameter, e.g. the units of layer 3 matter only when
``layers >= 3``. A parameter is *relevant* when its condition holds and its parent is
relevant itself. An irrelevant parameter is never asked of the user (named points omit
it) and its unit coordinate is the sentinel :data:`IRRELEVANT` (= -1, outside the cube),
so its value cannot reach a model: the arc kernel reads the relevance flags off the
sentinel, and :func:`fill_irrelevant` replaces the sentinel by pseudo-random values for
the report's relevance-agnostic baseline.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bojax.errors import (
    InvalidValueError,
    MissingParameterError,
    OutOfBoundsError,
    ParameterTypeError,
    SpaceDefinitionError,
    UnknownParameterError,
    is_count,
)

if TYPE_CHECKING:  # JAX loads on first use: `bojax problems` and `--help` do not need it
    import jax
    from jaxtyping import Array, Bool, Float

# Unit coordinates this far outside [0, 1] are taken as rounding error and clipped.
_UNIT_TOLERANCE = 1e-9

#: The unit coordinate of an irrelevant parameter (outside [0, 1], so never a real value).
IRRELEVANT = -1.0

_COMPARISONS = {
    "==": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}


@dataclass(frozen=True)
class Condition:
    """``parent op value``: when the parameter carrying it is relevant.

    ``op`` is one of ``== != < <= > >=`` or ``in`` (``value`` a tuple of allowed values),
    e.g. ``Condition("layers", ">=", 3)`` or ``Condition("optimizer", "in", (1, 2))``.
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
        values = self.value if self.op == "in" else (self.value,)
        if self.op == "in":
            if isinstance(values, str) or not isinstance(values, Sequence) or not values:
                raise SpaceDefinitionError(
                    f"condition on {self.parent!r}: 'in' needs a non-empty sequence of values"
                )
            object.__setattr__(self, "value", tuple(values))
        for v in values:
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
                raise SpaceDefinitionError(
                    f"condition on {self.parent!r}: compares with finite numbers, got {v!r}"
                )

    def holds(self, parent_values: np.ndarray) -> np.ndarray:
        """Elementwise truth of the condition for an array of the parent's values."""
        v = np.asarray(parent_values, dtype=np.float64)
        if self.op == "in":
            return np.isin(v, np.asarray(self.value, dtype=np.float64))
        return _COMPARISONS[self.op](v, float(self.value))

    def __str__(self) -> str:
        return f"{self.parent} {self.op} {self.value}"


def _as_real_scalar(name: str, value: Any) -> float:
    """``value`` as a Python float, or a typed error. Booleans and strings are refused."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # 0-d NumPy/JAX arrays
        value = value.item()
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise ParameterTypeError(name, f"expected a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise InvalidValueError(name, f"value {value!r} is not finite")
    return value


@dataclass(frozen=True)
class _Parameter:
    name: str
    low: float
    high: float
    log: bool = False
    condition: Condition | None = None  # relevant only when this holds (and the parent is)

    def __post_init__(self) -> None:
        if isinstance(self.condition, tuple | list):  # ("layers", ">=", 3) is accepted too
            object.__setattr__(self, "condition", Condition(*self.condition))
        if self.condition is not None and not isinstance(self.condition, Condition):
            raise SpaceDefinitionError(
                f"{self.name!r}: condition must be a Condition or (parent, op, value), "
                f"got {self.condition!r}"
            )
        if not isinstance(self.name, str) or not self.name:
            raise SpaceDefinitionError(
                f"a parameter name must be a non-empty string, got {self.name!r}"
            )
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

    # Continuous interval [z_low, z_high] on which the (log-)linear map acts.
    def _z_bounds(self) -> tuple[float, float]:
        return float(self.low), float(self.high)

    def _t(self, z):
        return np.log(z) if self.log else z

    def _t_inv(self, t):
        return np.exp(t) if self.log else t

    def _encode(self, values: np.ndarray) -> np.ndarray:
        t_low, t_high = (self._t(z) for z in self._z_bounds())
        return (self._t(values) - t_low) / (t_high - t_low)

    def _relaxed(self, u: np.ndarray) -> np.ndarray:
        """The continuous value ``z`` a unit coordinate stands for."""
        u = np.asarray(u, dtype=np.float64)
        bad = ~np.isfinite(u)
        if bad.any():
            raise InvalidValueError(self.name, f"unit coordinate {u[bad].flat[0]!r} is not finite")
        outside = (u < -_UNIT_TOLERANCE) | (u > 1 + _UNIT_TOLERANCE)
        if outside.any():
            raise OutOfBoundsError(self.name, float(u[outside].flat[0]), 0.0, 1.0)
        t_low, t_high = (self._t(z) for z in self._z_bounds())
        return self._t_inv(t_low + np.clip(u, 0.0, 1.0) * (t_high - t_low))


@dataclass(frozen=True)
class Real(_Parameter):
    """A real parameter on ``[low, high]``; ``log=True`` spaces it logarithmically."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.log and self.low <= 0:
            raise SpaceDefinitionError(f"{self.name!r}: a log-scaled real needs low > 0")

    def check(self, value: Any) -> float:
        value = _as_real_scalar(self.name, value)
        if not self.low <= value <= self.high:
            raise OutOfBoundsError(self.name, value, self.low, self.high)
        return value

    def decode(self, u: np.ndarray) -> np.ndarray:
        return np.clip(self._relaxed(u), self.low, self.high)

    def snap(self, u: np.ndarray) -> np.ndarray:
        return np.asarray(u, dtype=np.float64)


@dataclass(frozen=True)
class Integer(_Parameter):
    """An integer parameter on ``{low, ..., high}``; ``log=True`` spaces it logarithmically."""

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
        real = _as_real_scalar(self.name, value)
        if not real.is_integer():
            raise ParameterTypeError(self.name, f"expected an integer, got {value!r}")
        value = int(real)
        if not self.low <= value <= self.high:
            raise OutOfBoundsError(self.name, value, self.low, self.high)
        return value

    def decode(self, u: np.ndarray) -> np.ndarray:
        return np.clip(np.floor(self._relaxed(u) + 0.5), self.low, self.high).astype(np.int64)

    def snap(self, u: np.ndarray) -> np.ndarray:
        return self._encode(self.decode(u).astype(np.float64))


Parameter = Real | Integer
_KINDS: dict[str, type[_Parameter]] = {"real": Real, "integer": Integer}


class Space:
    """An ordered collection of named parameters with unit-cube coordinates.

    >>> space = Space([Real("lr", 1e-4, 1e-1, log=True), Integer("layers", 1, 5)])
    >>> u = space.to_unit({"lr": 1e-2, "layers": 3})
    >>> space.from_unit(u)
    {'lr': 0.01..., 'layers': 3}

    A parameter's condition may only name a parameter listed before it, so relevance is
    decided in one pass in order.
    """

    def __init__(self, parameters: Sequence[Parameter]):
        parameters = tuple(parameters)
        if not parameters:
            raise SpaceDefinitionError("a space needs at least one parameter")
        for p in parameters:
            if not isinstance(p, Real | Integer):
                raise SpaceDefinitionError(f"expected Real or Integer parameters, got {p!r}")
        names = [p.name for p in parameters]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise SpaceDefinitionError(f"parameter names repeat: {duplicated}")
        for i, p in enumerate(parameters):
            if p.condition is not None and p.condition.parent not in names[:i]:
                where = "is not in the space" if p.condition.parent not in names else "comes later"
                raise SpaceDefinitionError(
                    f"{p.name!r}: its condition's parent {p.condition.parent!r} {where}; a "
                    "condition must name a parameter listed before it"
                )
        self.parameters = parameters

    # -- container protocol -------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    @property
    def dim(self) -> int:
        return len(self.parameters)

    @property
    def conditional(self) -> bool:
        """True when some parameter can be irrelevant."""
        return any(p.condition is not None for p in self.parameters)

    def __len__(self) -> int:
        return self.dim

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self.parameters)

    def __getitem__(self, name: str) -> Parameter:
        for p in self.parameters:
            if p.name == name:
                return p
        raise UnknownParameterError(name, f"not in the space {list(self.names)}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Space) and self.parameters == other.parameters

    def __hash__(self) -> int:
        return hash(self.parameters)

    def __repr__(self) -> str:
        return f"Space({list(self.parameters)!r})"

    # -- relevance ------------------------------------------------------------------
    def relevance(self, u: np.ndarray) -> np.ndarray:
        """Boolean relevance flags of unit points ``(d,)`` or ``(n, d)`` (the arc report's
        delta_i), decided from the parents' decoded values."""
        return self.snap(u) != IRRELEVANT

    # -- validation and coordinates -----------------------------------------------
    def validate(self, point: Mapping[str, Any]) -> dict[str, float | int]:
        """Check a named point and return its relevant values, normalised, in order.

        Irrelevant parameters may be omitted (or given as None); a value given for one is
        checked and then dropped, since it cannot matter. Raises a
        :class:`~bojax.errors.ParameterError` subclass naming the parameter: missing,
        unknown, mistyped, not finite, or out of bounds.
        """
        if not isinstance(point, Mapping):
            raise ParameterTypeError(
                "<point>", f"expected a mapping of names, got {type(point).__name__}"
            )
        unknown = [k for k in point if k not in self.names]
        if unknown:
            raise UnknownParameterError(str(unknown[0]), f"not in the space {list(self.names)}")
        checked: dict[str, float | int] = {}
        relevant = {}
        for p in self.parameters:
            c = p.condition
            relevant[p.name] = c is None or (
                relevant[c.parent] and bool(c.holds(checked[c.parent]))
            )
            value = point.get(p.name)
            if relevant[p.name]:
                if p.name not in point:
                    raise MissingParameterError(p.name, "missing from the point")
                checked[p.name] = p.check(value)
            elif value is not None:
                p.check(value)  # a typo in an irrelevant value is still worth reporting
        return checked

    def to_unit(self, points: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Unit-cube coordinates of one point, shape ``(d,)``, or of a list, ``(n, d)``;
        irrelevant parameters get :data:`IRRELEVANT`."""
        single = isinstance(points, Mapping)
        checked = [self.validate(p) for p in ([points] if single else points)]
        u = np.full((len(checked), self.dim), IRRELEVANT)
        for j, p in enumerate(self.parameters):
            rows = [i for i, c in enumerate(checked) if p.name in c]
            values = np.array([checked[i][p.name] for i in rows], dtype=np.float64)
            u[rows, j] = p._encode(values)
        return u[0] if single else u

    def from_unit(self, u: np.ndarray) -> dict[str, float | int] | list[dict[str, float | int]]:
        """Named values of unit coordinates ``(d,)`` or ``(n, d)``; integers are rounded and
        irrelevant parameters left out (whatever their coordinates hold)."""
        u = np.asarray(u, dtype=np.float64)
        single = u.ndim == 1
        u = np.atleast_2d(u)
        if u.ndim != 2 or u.shape[1] != self.dim:
            raise ValueError(f"expected unit coordinates of shape (n, {self.dim}), got {u.shape}")
        _, decoded, relevant = self._columns_relevant(u)
        points = [
            {p.name: decoded[p.name][i].item() for p in self.parameters if relevant[p.name][i]}
            for i in range(len(u))
        ]
        return points[0] if single else points

    def _columns_relevant(self, u: np.ndarray) -> tuple[list[np.ndarray], dict, dict]:
        """Per parameter: the coordinates to use, the decoded values and the relevance.

        Relevance is decided in order from the decoded parents. A sentinel where the
        parameter is relevant (its parent moved) reads as the middle of the range; the
        entries of irrelevant rows are replaced by 0.5 and never looked at.
        """
        columns, decoded, relevant = [], {}, {}
        for j, p in enumerate(self.parameters):
            c = p.condition
            flags = np.ones(len(u), bool)
            if c is not None:
                flags = relevant[c.parent] & c.holds(decoded[c.parent])
            column = np.where(~flags | (u[:, j] == IRRELEVANT), 0.5, u[:, j])
            columns.append(column)
            relevant[p.name] = flags
            decoded[p.name] = p.decode(column)
        return columns, decoded, relevant

    def snap(self, u: np.ndarray) -> np.ndarray:
        """Move integer coordinates to the centre of their bin (reals are unchanged) and
        irrelevant ones to :data:`IRRELEVANT`: equal points get equal coordinates."""
        u = np.asarray(u, dtype=np.float64)
        flat = u.reshape(-1, self.dim)
        columns, _, relevant = self._columns_relevant(flat)
        out = np.stack(
            [
                np.where(relevant[p.name], p.snap(column), IRRELEVANT)
                for p, column in zip(self.parameters, columns, strict=True)
            ],
            axis=-1,
        )
        return out.reshape(u.shape)

    def sample(self, key: jax.Array, n: int, method: str = "uniform") -> np.ndarray:
        """``n`` snapped points in the unit cube, shape ``(n, d)``.

        ``method="uniform"`` draws i.i.d. uniform coordinates; ``"sobol"`` takes the first
        ``n`` points of a scrambled Sobol sequence (``scipy.stats.qmc``) seeded from ``key``.
        Irrelevant coordinates come out as :data:`IRRELEVANT`.
        """
        import jax
        from scipy.stats import qmc

        if not is_count(n):
            raise ValueError(f"n must be a non-negative integer, got {n!r}")
        if method == "uniform":
            u = np.asarray(jax.random.uniform(key, (int(n), self.dim)), dtype=np.float64)
        elif method == "sobol":
            seed = int(jax.random.randint(key, (), 0, np.iinfo(np.int32).max))
            sobol = qmc.Sobol(self.dim, scramble=True, rng=np.random.default_rng(seed))
            with warnings.catch_warnings():  # a non-power-of-two n is fine for our use
                warnings.simplefilter("ignore", UserWarning)
                u = sobol.random(int(n))
        else:
            raise ValueError(f"unknown sampling method {method!r}; use 'uniform' or 'sobol'")
        return self.snap(u)

    # -- serialisation (run journals compare spaces through this) ------------------
    def to_dict(self) -> dict[str, Any]:
        kinds = {cls: kind for kind, cls in _KINDS.items()}
        specs = []
        for p in self.parameters:
            spec = {"type": kinds[type(p)], **asdict(p)}
            if p.condition is None:  # unconditional spaces serialise as they always did
                del spec["condition"]
            specs.append(spec)
        return {"parameters": specs}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Space:
        try:
            specs = [dict(s) for s in data["parameters"]]
            for s in specs:
                if s.get("condition") is not None:
                    s["condition"] = Condition(**s["condition"])
            return cls([_KINDS[s.pop("type")](**s) for s in specs])
        except (KeyError, TypeError) as error:
            raise SpaceDefinitionError(f"not a serialised space: {error}") from error


def load_space(path: str | Path) -> Space:
    """A :class:`Space` from a TOML or JSON file (chosen by the suffix ``.toml``/``.json``).

    Each top-level table is a parameter, in file order, with ``type`` (``real`` or
    ``integer``), ``low``, ``high`` and optionally ``log`` and ``condition`` (``[parent,
    op, value]``)::

        [lr]
        type = "real"
        low = 1e-4
        high = 0.1
        log = true

        [layers]
        type = "integer"
        low = 1
        high = 4

        [units_3]
        type = "integer"
        low = 8
        high = 256
        condition = ["layers", ">=", 3]

    A file holding ``{"parameters": [...]}`` (what :meth:`Space.to_dict` writes, as in a
    run's journal) loads too. Raises :class:`SpaceDefinitionError` naming the file for a
    missing or unreadable file, a syntax error or a bad parameter.
    """
    import json
    import tomllib

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise SpaceDefinitionError(f"{path}: a space file ends in .toml or .json")
    try:
        text = path.read_text()
    except OSError as error:
        raise SpaceDefinitionError(f"{path}: cannot read the space file ({error})") from error
    try:
        data = tomllib.loads(text) if suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as error:
        raise SpaceDefinitionError(f"{path}: not valid {suffix[1:].upper()}: {error}") from error
    if not isinstance(data, dict) or not data:
        raise SpaceDefinitionError(f"{path}: no parameters (expected one table per parameter)")
    try:
        if isinstance(data.get("parameters"), list):
            return Space.from_dict(data)
        specs = []
        for name, spec in data.items():
            if not isinstance(spec, dict):
                raise SpaceDefinitionError(
                    f"parameter {name!r}: expected a table with type, low and high"
                )
            spec = dict(spec)
            kind = spec.pop("type", None)
            if kind not in _KINDS:
                raise SpaceDefinitionError(
                    f"parameter {name!r}: type must be one of {sorted(_KINDS)}, got {kind!r}"
                )
            unknown = set(spec) - {"low", "high", "log", "condition"}
            if unknown or not {"low", "high"} <= set(spec):
                raise SpaceDefinitionError(
                    f"parameter {name!r}: needs low and high, may have log and condition"
                    + (f"; unknown keys {sorted(unknown)}" if unknown else "")
                )
            if not isinstance(spec.get("log", False), bool):
                raise SpaceDefinitionError(
                    f"parameter {name!r}: log is true or false, got {spec['log']!r}"
                )
            if "condition" in spec and not (
                isinstance(spec["condition"], list) and len(spec["condition"]) == 3
            ):
                raise SpaceDefinitionError(
                    f"parameter {name!r}: condition is [parent, op, value], "
                    f"got {spec['condition']!r}"
                )
            specs.append(_KINDS[kind](name, **spec))
        return Space(specs)
    except SpaceDefinitionError as error:
        raise SpaceDefinitionError(f"{path}: {error}") from error


def repeated_mask(
    candidates: Float[Array, "m d"], evaluated: Float[Array, "n d"], atol: float = 1e-9
) -> Bool[Array, " m"]:
    """True for each candidate equal (within ``atol`` per coordinate) to an evaluated point.

    Both arguments must be snapped (:meth:`Space.snap`), so that integer parameters that
    round to the same value compare equal.
    """
    return _jitted_repeated_mask()(candidates, evaluated, atol)


@cache
def _jitted_repeated_mask():
    import jax
    import jax.numpy as jnp

    def repeated_mask(candidates, evaluated, atol):
        close = jnp.abs(candidates[:, None, :] - evaluated[None, :, :]) <= atol
        return jnp.any(jnp.all(close, axis=-1), axis=-1)

    return jax.jit(repeated_mask)


def fill_irrelevant(u: Float[Array, "... d"]) -> Float[Array, "... d"]:
    """The report's relevance-agnostic baseline: irrelevant coordinates filled "randomly".

    Each :data:`IRRELEVANT` entry becomes a pseudo-random value in ``[0, 1)`` that is a
    fixed hash of the point's relevant coordinates and the dimension, so a point always
    gets the same fill (a GP sees consistent data across iterations, resumes and
    candidates) while different points get unrelated fills, as if the irrelevant values
    had been drawn at random once per input (the arc-kernel report's "GP" baseline).
    Relevant coordinates are returned unchanged.
    """
    import jax.numpy as jnp

    u = jnp.asarray(u)
    d = u.shape[-1]
    relevant = u != IRRELEVANT
    known = jnp.where(relevant, u, 0.0)
    # Fixed frequencies (drawn once from a seeded generator) of a sine hash per dimension.
    frequencies = np.random.default_rng(20140101).uniform(10.0, 100.0, (d, d))
    phases = np.random.default_rng(20140102).uniform(0.0, 2 * np.pi, d)
    angle = known @ jnp.asarray(frequencies, u.dtype) + jnp.asarray(phases, u.dtype)
    noise = jnp.sin(angle) * 43758.5453
    return jnp.where(relevant, u, noise - jnp.floor(noise))
