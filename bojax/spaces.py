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
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float
from scipy.stats import qmc

from bojax.errors import (
    InvalidValueError,
    MissingParameterError,
    OutOfBoundsError,
    ParameterTypeError,
    SpaceDefinitionError,
    UnknownParameterError,
)

# Unit coordinates this far outside [0, 1] are taken as rounding error and clipped.
_UNIT_TOLERANCE = 1e-9


def _as_real_scalar(name: str, value: Any) -> float:
    """``value`` as a Python float, or a typed error. Booleans and strings are refused."""
    if isinstance(value, np.ndarray | jax.Array) and value.ndim == 0:
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

    def __post_init__(self) -> None:
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
        self.parameters = parameters

    # -- container protocol -------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    @property
    def dim(self) -> int:
        return len(self.parameters)

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

    # -- validation and coordinates -----------------------------------------------
    def validate(self, point: Mapping[str, Any]) -> dict[str, float | int]:
        """Check a named point and return it with normalised Python values.

        Raises a :class:`~bojax.errors.ParameterError` subclass naming the parameter:
        missing, unknown, mistyped, not finite, or out of bounds.
        """
        if not isinstance(point, Mapping):
            raise ParameterTypeError(
                "<point>", f"expected a mapping of names, got {type(point).__name__}"
            )
        unknown = [k for k in point if k not in self.names]
        if unknown:
            raise UnknownParameterError(str(unknown[0]), f"not in the space {list(self.names)}")
        missing = [n for n in self.names if n not in point]
        if missing:
            raise MissingParameterError(missing[0], f"missing from the point (missing: {missing})")
        return {p.name: p.check(point[p.name]) for p in self.parameters}

    def to_unit(self, points: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Unit-cube coordinates of one point, shape ``(d,)``, or of a list, ``(n, d)``."""
        single = isinstance(points, Mapping)
        checked = [self.validate(p) for p in ([points] if single else points)]
        u = np.empty((len(checked), self.dim))
        for j, p in enumerate(self.parameters):
            u[:, j] = p._encode(np.array([c[p.name] for c in checked], dtype=np.float64))
        return u[0] if single else u

    def from_unit(self, u: np.ndarray) -> dict[str, float | int] | list[dict[str, float | int]]:
        """Named values of unit coordinates ``(d,)`` or ``(n, d)``; integers are rounded."""
        u = np.asarray(u, dtype=np.float64)
        single = u.ndim == 1
        u = np.atleast_2d(u)
        if u.ndim != 2 or u.shape[1] != self.dim:
            raise ValueError(f"expected unit coordinates of shape (n, {self.dim}), got {u.shape}")
        columns = [p.decode(u[:, j]).tolist() for j, p in enumerate(self.parameters)]
        points = [dict(zip(self.names, row, strict=True)) for row in zip(*columns, strict=True)]
        return points[0] if single else points

    def snap(self, u: np.ndarray) -> np.ndarray:
        """Move integer coordinates to the centre of their bin (reals are unchanged)."""
        u = np.asarray(u, dtype=np.float64)
        flat = u.reshape(-1, self.dim)
        out = np.stack([p.snap(flat[:, j]) for j, p in enumerate(self.parameters)], axis=-1)
        return out.reshape(u.shape)

    def sample(self, key: jax.Array, n: int, method: str = "uniform") -> np.ndarray:
        """``n`` snapped points in the unit cube, shape ``(n, d)``.

        ``method="uniform"`` draws i.i.d. uniform coordinates; ``"sobol"`` takes the first
        ``n`` points of a scrambled Sobol sequence (``scipy.stats.qmc``) seeded from ``key``.
        """
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
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
        return {"parameters": [{"type": kinds[type(p)], **asdict(p)} for p in self.parameters]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Space:
        try:
            specs = [dict(s) for s in data["parameters"]]
            return cls([_KINDS[s.pop("type")](**s) for s in specs])
        except (KeyError, TypeError) as error:
            raise SpaceDefinitionError(f"not a serialised space: {error}") from error


@jax.jit
def repeated_mask(
    candidates: Float[Array, "m d"], evaluated: Float[Array, "n d"], atol: float = 1e-9
) -> Bool[Array, " m"]:
    """True for each candidate equal (within ``atol`` per coordinate) to an evaluated point.

    Both arguments must be snapped (:meth:`Space.snap`), so that integer parameters that
    round to the same value compare equal.
    """
    close = jnp.abs(candidates[:, None, :] - evaluated[None, :, :]) <= atol
    return jnp.any(jnp.all(close, axis=-1), axis=-1)
