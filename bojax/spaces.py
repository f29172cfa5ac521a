"""Search spaces: ordered named parameters and their unit-cube coordinates.

The surrogate and the acquisition optimiser work in the unit cube ``[0, 1]^d``; the
objective sees named values. Each parameter maps its values to one unit coordinate by
its kind (:mod:`bojax.parameters`: ``Real``, ``Integer`` and any registered kind).

``Space.snap`` moves each coordinate to its value's canonical one (integers to their
bin centres), so two candidates that decode to the same point have identical
coordinates; ``repeated_mask`` uses that to find candidates that repeat an evaluated
point.

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

import dataclasses
import warnings
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bojax.errors import (
    BojaxError,
    DataError,
    MissingParameterError,
    ParameterTypeError,
    SpaceDefinitionError,
    UnknownParameterError,
    is_count,
)
from bojax.parameters import (
    PARAMETER_KINDS,
    Condition,
    Integer,
    Parameter,
    Real,
    parameter_from_spec,
    python_scalar,
)
from bojax.parameters.base import typed_key

__all__ = [
    "IRRELEVANT",
    "PARAMETER_KINDS",
    "STEP",
    "Condition",
    "Integer",
    "Parameter",
    "Real",
    "Space",
    "fill_irrelevant",
    "load_space",
    "repeated_mask",
]

if TYPE_CHECKING:  # JAX loads on first use: `bojax problems` and `--help` do not need it
    import jax
    from jaxtyping import Array, Bool, Float

#: The unit coordinate of an irrelevant parameter (outside [0, 1], so never a real value).
IRRELEVANT = -1.0
#: The name of a freeze-thaw run's step coordinate (:func:`bojax.bo.freezethaw.curve_space`),
#: last in its space; a GP over such a space models learning curves.
STEP = "__step__"


def _check_condition(child: Parameter, parent: Parameter) -> None:
    """The condition's values are values of its parent, and an order comparison needs an
    ordered parent (``optimizer < 'sgd'`` means nothing)."""
    condition = child.condition
    if condition.ordered and not parent.ordered:
        raise SpaceDefinitionError(
            f"{child.name!r}: condition {condition} orders the {parent.kind} parameter "
            f"{parent.name!r}; use == != or in"
        )
    if condition.ordered:  # a threshold need not be a value; it must cut the range
        ends = (parent.low, parent.high) if hasattr(parent, "low") else parent.values
        low, high, value = float(ends[0]), float(ends[-1]), float(condition.value)
        if isinstance(parent, Real):  # holding at its very end alone is never (measure 0)
            holds = high > value if condition.op in (">", ">=") else low < value
        else:
            holds = bool(np.any(condition.holds(np.array([low, high]))))
        if not holds:
            raise SpaceDefinitionError(
                f"{child.name!r}: condition {condition} can never hold: {parent.name!r} "
                f"lies in [{ends[0]}, {ends[-1]}]"
            )
        return
    if isinstance(parent, Real):  # a continuous value equals any given one with probability 0
        raise SpaceDefinitionError(
            f"{child.name!r}: condition {condition} compares the real parameter "
            f"{parent.name!r} for equality, which {'never' if condition.op != '!=' else 'always'}"
            " holds in practice; use < <= > or >= (or make it an Integer or Ordinal)"
        )
    for value in condition.values:  # (a typo there would hold always, or never)
        try:
            parent.check(value)
        except BojaxError as error:
            raise SpaceDefinitionError(
                f"{child.name!r}: condition {condition} names a value {parent.name!r} cannot "
                f"take: {error}"
            ) from error


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
            if not isinstance(p, Parameter):
                kinds = ", ".join(k.__name__ for k in PARAMETER_KINDS.values())
                raise SpaceDefinitionError(f"expected parameters ({kinds}), got {p!r}")
        names = [p.name for p in parameters]
        duplicated = sorted(n for n, k in Counter(names).items() if k > 1)  # one pass
        if duplicated:
            raise SpaceDefinitionError(f"parameter names repeat: {duplicated}")
        for i, p in enumerate(parameters):
            if p.condition is not None and p.condition.parent == p.name:
                raise SpaceDefinitionError(
                    f"{p.name!r}: its condition names the parameter itself; a condition "
                    "must name a parameter listed before it"
                )
            if p.condition is not None and p.condition.parent not in names[:i]:
                where = "is not in the space" if p.condition.parent not in names else "comes later"
                raise SpaceDefinitionError(
                    f"{p.name!r}: its condition's parent {p.condition.parent!r} {where}; a "
                    "condition must name a parameter listed before it"
                )
            if p.condition is not None:
                _check_condition(p, parameters[names.index(p.condition.parent)])
        self.parameters = parameters

    # -- container protocol -------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    @property
    def dim(self) -> int:
        return len(self.parameters)

    @property
    def categorical(self) -> tuple[int, ...]:
        """The coordinates models compare for equality only (categorical parameters)."""
        return tuple(j for j, p in enumerate(self.parameters) if p.categorical)

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

    def _key(self) -> tuple:
        """The parameters' kinds and fields, the choice ``True`` apart from ``1``."""
        return tuple(
            (type(p), *(typed_key(getattr(p, f.name)) for f in dataclasses.fields(p)))
            for p in self.parameters
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Space) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

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
            if p.categorical:  # as they are: NumPy would make [True, 1] ints, [1, "a"] text
                values = np.empty(len(rows), dtype=object)
                for k, i in enumerate(rows):
                    values[k] = checked[i][p.name]
            else:
                values = np.array([checked[i][p.name] for i in rows])  # the kind's own dtype
            u[rows, j] = p.encode(values)
        return u[0] if single else u

    def from_unit(self, u: np.ndarray) -> dict[str, float | int] | list[dict[str, float | int]]:
        """Named values of unit coordinates ``(d,)`` or ``(n, d)``; integers are rounded and
        irrelevant parameters left out (whatever their coordinates hold)."""
        u = np.asarray(u, dtype=np.float64)
        single = u.ndim == 1
        u = np.atleast_2d(u)
        if u.ndim != 2 or u.shape[1] != self.dim:
            raise DataError(  # (a ValueError too)
                f"expected unit coordinates of shape ({self.dim},) or (n, {self.dim}) for the "
                f"space's {self.dim} parameters, got {u.shape}"
            )
        _, decoded, relevant = self._columns_relevant(u)
        points = [
            {
                p.name: python_scalar(decoded[p.name][i])
                for p in self.parameters
                if relevant[p.name][i]
            }
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

    def sample(self, key: jax.Array, n: int, method: str = "uniform", skip: int = 0) -> np.ndarray:
        """``n`` snapped points in the unit cube, shape ``(n, d)``.

        ``method="uniform"`` draws i.i.d. uniform coordinates; ``"sobol"`` takes points
        ``skip .. skip + n - 1`` of a scrambled Sobol sequence (``scipy.stats.qmc``) seeded
        from ``key`` (the rows a draw of ``skip + n`` would end with, without drawing the
        first ``skip``). Irrelevant coordinates come out as :data:`IRRELEVANT`.
        """
        import jax
        from scipy.stats import qmc

        if not is_count(n):
            raise ValueError(f"n must be a non-negative integer, got {n!r}")
        if not is_count(skip) or (skip and method != "sobol"):
            raise ValueError(f"skip must be a non-negative integer, with 'sobol' only: {skip!r}")
        if method == "uniform":
            u = np.asarray(jax.random.uniform(key, (int(n), self.dim)), dtype=np.float64)
        elif method == "sobol":
            seed = int(jax.random.randint(key, (), 0, np.iinfo(np.int32).max))
            sobol = qmc.Sobol(self.dim, scramble=True, rng=np.random.default_rng(seed))
            if skip:
                sobol.fast_forward(int(skip))
            with warnings.catch_warnings():  # a non-power-of-two n is fine for our use
                warnings.simplefilter("ignore", UserWarning)
                u = sobol.random(int(n))
        else:
            raise ValueError(f"unknown sampling method {method!r}; use 'uniform' or 'sobol'")
        return self.snap(u)

    # -- serialisation (run journals compare spaces through this) ------------------
    def to_dict(self) -> dict[str, Any]:
        return {"parameters": [p.spec() for p in self.parameters]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Space:
        """The space :meth:`to_dict` wrote. The data may come from a hand-edited journal
        or file, so every entry is checked and an error names the entry it is about."""
        if not isinstance(data, Mapping) or not isinstance(data.get("parameters"), list):
            raise SpaceDefinitionError(
                "not a serialised space: expected {'parameters': [...]}, got "
                f"{type(data).__name__}"
            )
        unknown = sorted(map(str, set(data) - {"parameters"}))
        if unknown:
            raise SpaceDefinitionError(
                f"a serialised space holds only 'parameters'; unknown keys {unknown}"
            )
        parameters = []
        for i, spec in enumerate(data["parameters"]):
            if not isinstance(spec, Mapping) or "name" not in spec:
                raise SpaceDefinitionError(
                    f"parameters[{i}]: expected a table with a name and a type, got {spec!r}"
                )
            spec = dict(spec)
            parameters.append(parameter_from_spec(spec.pop("name"), spec))
        return cls(parameters)


def load_space(path: str | Path) -> Space:
    """A :class:`Space` from a TOML or JSON file (chosen by the suffix ``.toml``/``.json``).

    Each top-level table is a parameter, in file order, with ``type``: ``real`` or
    ``integer`` (``low``, ``high``, optionally ``log``), ``categorical`` (``choices``) or
    ``ordinal`` (``values``, optionally ``log``); any may carry a ``condition``
    (``[parent, op, value]``)::

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
    missing or unreadable file, text that is not UTF-8 or not valid TOML/JSON (with the
    line), a key given twice in a JSON object (JSON itself would keep the last silently),
    or a bad parameter (naming it).
    """
    import json
    import tomllib

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise SpaceDefinitionError(f"{path}: a space file ends in .toml or .json")
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise SpaceDefinitionError(f"{path}: cannot read the space file ({error})") from error
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark (Windows editors) is dropped
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise SpaceDefinitionError(
            f"{path}:{line}: not UTF-8 text (byte {raw[error.start]:#04x})"
        ) from error
    try:
        data = (
            tomllib.loads(text)
            if suffix == ".toml"
            else json.loads(text, object_pairs_hook=unique_keys)
        )
    except SpaceDefinitionError as error:
        raise SpaceDefinitionError(f"{path}: {error}") from error
    except (ValueError, RecursionError) as error:
        # Decode errors carry the line; ValueError also covers an integer of more digits
        # than Python converts, RecursionError brackets nested beyond the parser's depth.
        raise SpaceDefinitionError(f"{path}: not valid {suffix[1:].upper()}: {error}") from error
    if not isinstance(data, dict):
        raise SpaceDefinitionError(
            f"{path}: expected one table per parameter, got {type(data).__name__}"
        )
    if not data:
        raise SpaceDefinitionError(f"{path}: no parameters (expected one table per parameter)")
    try:
        if isinstance(data.get("parameters"), list):
            return Space.from_dict(data)
        specs = [parameter_from_spec(name, spec) for name, spec in data.items()]
        return Space(specs)
    except SpaceDefinitionError as error:
        raise SpaceDefinitionError(f"{path}: {error}") from error


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict, refusing a key given twice: ``json`` would keep the last
    value silently, and a space file's author meant one of them."""
    data = {}
    for key, value in pairs:
        if key in data:
            raise SpaceDefinitionError(f"the key {key!r} appears twice in one JSON object")
        data[key] = value
    return data


def repeated_mask(
    candidates: Float[Array, "m d"], evaluated: Float[Array, "n d"], atol: float = 1e-9
) -> Bool[Array, " m"]:
    """True for each candidate equal (within ``atol`` per coordinate) to an evaluated point.

    Both arguments must be snapped (:meth:`Space.snap`), so that integer parameters that
    round to the same value compare equal. ``evaluated`` is padded with NaN rows (equal to
    nothing) to a bucket size, so a run whose evaluated set grows by one point at a time
    compiles once per bucket rather than once per call.
    """
    from bojax.compilation import bucket_size  # here: it imports JAX

    evaluated = np.asarray(evaluated)
    spare = bucket_size(len(evaluated)) - len(evaluated)
    if spare:
        evaluated = np.concatenate([evaluated, np.full((spare, evaluated.shape[1]), np.nan)])
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
