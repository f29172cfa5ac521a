"""Search spaces: unit-cube round trips, integer rounding, sampling and every validation error."""

import jax
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bojax.errors import (
    BojaxError,
    InvalidValueError,
    MissingParameterError,
    OutOfBoundsError,
    ParameterTypeError,
    SpaceDefinitionError,
    UnknownParameterError,
)
from bojax.spaces import Integer, Real, Space, repeated_mask

SPACE = Space(
    [
        Real("dropout", 0.0, 1.0),
        Real("lr", 1e-5, 1e-1, log=True),
        Integer("layers", 1, 5),
        Integer("width", 1, 1024, log=True),
    ]
)


@given(
    dropout=st.floats(0.0, 1.0),
    lr=st.floats(1e-5, 1e-1),
    layers=st.integers(1, 5),
    width=st.integers(1, 1024),
)
def test_point_round_trips_through_the_unit_cube(dropout, lr, layers, width):
    point = {"dropout": dropout, "lr": lr, "layers": layers, "width": width}
    u = SPACE.to_unit(point)
    assert u.shape == (4,) and np.all((u >= 0) & (u <= 1))
    back = SPACE.from_unit(u)
    assert back["layers"] == layers and back["width"] == width
    assert isinstance(back["layers"], int) and isinstance(back["width"], int)
    assert back["dropout"] == pytest.approx(dropout, abs=1e-12)
    assert back["lr"] == pytest.approx(lr, rel=1e-12)
    np.testing.assert_array_equal(SPACE.snap(u), u)  # encoded points are already snapped


@given(u=st.lists(st.floats(0.0, 1.0), min_size=4, max_size=4))
def test_unit_points_decode_inside_bounds_and_snap_is_idempotent(u):
    u = np.array(u)
    point = SPACE.from_unit(u)
    SPACE.validate(point)  # decoded points are always valid
    snapped = SPACE.snap(u)
    np.testing.assert_array_equal(SPACE.snap(snapped), snapped)
    assert SPACE.from_unit(snapped) == point


def test_integer_bins_have_equal_width():
    """Uniform unit coordinates give each integer of {1..5} probability 1/5."""
    layers = Integer("layers", 1, 5)
    u = np.linspace(0, 1, 100_001)
    counts = np.bincount(layers.decode(u))[1:]
    np.testing.assert_allclose(counts / len(u), 0.2, atol=1e-4)
    assert layers.decode(np.array([0.0, 0.19999, 0.2000001, 1.0])).tolist() == [1, 1, 2, 5]
    np.testing.assert_allclose(layers.encode(np.arange(1, 6)), [0.1, 0.3, 0.5, 0.7, 0.9])


def test_log_integer_bins_are_equal_in_log_space():
    """With log=True, integer k owns [k - 1/2, k + 1/2] measured in log space."""
    width = Integer("width", 1, 1024, log=True)
    u = np.linspace(0, 1, 1_000_001)
    counts = np.bincount(width.decode(u), minlength=1025)
    total = np.log(1024.5) - np.log(0.5)
    for k in (1, 2, 100, 1024):
        expected = (np.log(k + 0.5) - np.log(k - 0.5)) / total
        assert counts[k] / len(u) == pytest.approx(expected, abs=2e-6)


@pytest.mark.parametrize("method", ["uniform", "sobol"])
def test_sampling_is_snapped_reproducible_and_in_bounds(method):
    key = jax.random.key(3)
    u = SPACE.sample(key, 257, method=method)
    assert u.shape == (257, 4) and np.all((u >= 0) & (u <= 1))
    np.testing.assert_array_equal(u, SPACE.snap(u))
    np.testing.assert_array_equal(u, SPACE.sample(key, 257, method=method))
    assert not np.array_equal(u, SPACE.sample(jax.random.key(4), 257, method=method))
    assert SPACE.sample(key, 0, method=method).shape == (0, 4)


def test_sobol_skip_gives_the_rows_a_longer_draw_ends_with():
    """The loop's design phase takes point k alone (skip=k), not a draw of k + 1 points."""
    key = jax.random.key(5)
    whole = SPACE.sample(key, 40, method="sobol")
    np.testing.assert_array_equal(SPACE.sample(key, 3, method="sobol", skip=37), whole[37:])
    with pytest.raises(ValueError, match="skip"):
        SPACE.sample(key, 3, method="uniform", skip=2)
    with pytest.raises(ValueError, match="skip"):
        SPACE.sample(key, 3, method="sobol", skip=-1)


def test_sobol_covers_the_cube_more_evenly_than_uniform():
    space = Space([Real("a", 0, 1), Real("b", 0, 1)])
    key = jax.random.key(0)
    sobol = space.sample(key, 256, method="sobol")
    uniform = space.sample(key, 256, method="uniform")

    def worst_cell_error(u):  # 16 x 16 grid: Sobol puts exactly one point per cell
        counts = np.histogram2d(u[:, 0], u[:, 1], bins=16, range=[[0, 1], [0, 1]])[0]
        return np.abs(counts - 1).max()

    assert worst_cell_error(sobol) < worst_cell_error(uniform)


def test_repeated_mask_finds_candidates_that_round_to_evaluated_points():
    space = Space([Integer("a", 0, 9), Integer("b", 0, 9), Real("c", 0, 1)])
    evaluated = space.to_unit([{"a": 3, "b": 4, "c": 0.5}, {"a": 0, "b": 9, "c": 0.25}])
    candidates = space.snap(
        np.array(
            [
                [0.35 + 0.02, 0.45 - 0.03, 0.5],  # rounds to (3, 4), same c: a repeat
                [0.35, 0.45, 0.5001],  # same integers, different real: new
                [0.01, 0.99, 0.25],  # rounds to (0, 9): a repeat
                [0.55, 0.45, 0.5],  # new
            ]
        )
    )
    assert repeated_mask(candidates, evaluated).tolist() == [True, False, True, False]
    assert repeated_mask(candidates, np.zeros((0, 3))).tolist() == [False] * 4


def test_repeated_mask_compiles_once_per_bucket_as_the_evaluated_set_grows():
    """A run's evaluated set grows by one point per proposal; compiling for each size made
    an ASHA run with random proposals spend 55 of its 90 s compiling."""
    from bojax.compilation import count_compilations

    rng = np.random.default_rng(0)
    with count_compilations() as counts:
        for n in range(1, 50):
            evaluated = rng.uniform(size=(n, 3))
            assert repeated_mask(evaluated[-1:], evaluated).tolist() == [True]
            assert repeated_mask(evaluated[-1:] + 2.0, evaluated).tolist() == [False]
    assert counts.of("repeated_mask") <= 4  # buckets 16, 32, 48 and 64


@pytest.mark.parametrize(
    "point, error, name",
    [
        ({"dropout": 0.5, "lr": 1e-3, "layers": 3}, MissingParameterError, "width"),
        (
            {"dropout": 0.5, "lr": 1e-3, "layers": 3, "width": 8, "momentum": 0.9},
            UnknownParameterError,
            "momentum",
        ),
        ({"dropout": 1.5, "lr": 1e-3, "layers": 3, "width": 8}, OutOfBoundsError, "dropout"),
        ({"dropout": 0.5, "lr": 1e-6, "layers": 3, "width": 8}, OutOfBoundsError, "lr"),
        ({"dropout": 0.5, "lr": 1e-3, "layers": 6, "width": 8}, OutOfBoundsError, "layers"),
        ({"dropout": 0.5, "lr": 1e-3, "layers": 2.5, "width": 8}, ParameterTypeError, "layers"),
        ({"dropout": "0.5", "lr": 1e-3, "layers": 3, "width": 8}, ParameterTypeError, "dropout"),
        ({"dropout": True, "lr": 1e-3, "layers": 3, "width": 8}, ParameterTypeError, "dropout"),
        ({"dropout": 0.5, "lr": 1e-3, "layers": None, "width": 8}, ParameterTypeError, "layers"),
        (
            {"dropout": float("nan"), "lr": 1e-3, "layers": 3, "width": 8},
            InvalidValueError,
            "dropout",
        ),
        ({"dropout": 0.5, "lr": float("inf"), "layers": 3, "width": 8}, InvalidValueError, "lr"),
        # an int beyond float64: an OverflowError, from `bojax show` and `repair` too (review)
        ({"dropout": 0.5, "lr": 1e-3, "layers": 10**400, "width": 8}, InvalidValueError, "layers"),
        (
            {"dropout": -(10**400), "lr": 1e-3, "layers": 3, "width": 8},
            InvalidValueError,
            "dropout",
        ),
    ],
)
def test_invalid_points_raise_typed_errors_naming_the_parameter(point, error, name):
    with pytest.raises(error, match=name) as info:
        SPACE.validate(point)
    assert info.value.name == name and isinstance(info.value, BojaxError)
    with pytest.raises(error):
        SPACE.to_unit(point)


def test_validation_normalises_types():
    point = SPACE.validate(
        {"dropout": np.float32(0.25), "lr": 1e-3, "layers": np.int64(2), "width": 8.0}
    )
    assert point == {"dropout": 0.25, "lr": 1e-3, "layers": 2, "width": 8}
    assert type(point["layers"]) is int and type(point["width"]) is int
    with pytest.raises(ParameterTypeError):
        SPACE.validate([0.5, 1e-3, 2, 8])


@pytest.mark.parametrize(
    "bad",
    [
        np.array([0.5, 0.5, 0.5, 1.2]),
        np.array([0.5, np.nan, 0.5, 0.5]),
    ],
)
def test_unit_coordinates_outside_the_cube_are_refused(bad):
    with pytest.raises(InvalidValueError):
        SPACE.from_unit(bad)
    # Rounding error just outside the cube is tolerated.
    assert SPACE.from_unit(np.array([1 + 1e-12, -1e-12, 0.5, 0.5]))["dropout"] == 1.0


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Real("x", 1.0, 1.0), "low < high"),
        (lambda: Real("x", 0.0, float("inf")), "finite"),
        (lambda: Real("x", 0.0, 1.0, log=True), "low > 0"),
        (lambda: Real("x", 1e-12, np.nextafter(1e-12, 1) * (1 + 4e-16), log=True), "too narrow"),
        (lambda: Integer("x", 0, 10, log=True), "low >= 1"),
        (lambda: Integer("x", 0.5, 3), "whole"),
        (lambda: Real("", 0.0, 1.0), "non-empty"),
        (lambda: Space([]), "at least one"),
        (lambda: Space([Real("x", 0, 1), Integer("x", 0, 3)]), "repeat"),
        (lambda: Space([("x", 0, 1)]), "expected parameters"),
    ],
)
def test_inconsistent_definitions_are_refused(make, message):
    with pytest.raises(SpaceDefinitionError, match=message):
        make()


def test_space_serialises_and_compares():
    again = Space.from_dict(SPACE.to_dict())
    assert again == SPACE and hash(again) == hash(SPACE)
    assert SPACE != Space([Real("dropout", 0.0, 1.0)])
    assert SPACE["layers"] == Integer("layers", 1, 5)
    # The choices True and 1 are apart (a space's values keep them apart), 1 and 1.0 not.
    from bojax.parameters import Categorical, Condition

    def flagged(flag, on):
        return Space([Categorical("a", (flag, "b")),
                      Real("x", 0, 1, condition=Condition("a", "==", on))])  # fmt: skip

    assert flagged(True, True) == flagged(True, True)
    assert hash(flagged(True, True)) == hash(flagged(True, True))
    assert flagged(True, True) != flagged(1, 1)
    assert flagged(1, 1) == flagged(1.0, 1.0) and hash(flagged(1, 1)) == hash(flagged(1.0, 1))
    with pytest.raises(UnknownParameterError):
        SPACE["depth"]
    with pytest.raises(SpaceDefinitionError):
        Space.from_dict({"parameters": [{"type": "complex", "name": "z"}]})


def test_numpy_bounds_and_condition_values_serialise_as_json_numbers():
    """(np.float32 bounds crashed a run's run.json with a TypeError, review BE.)"""
    import json

    from bojax.parameters import Condition

    low, high = np.array([1e-4, 1e-1], dtype=np.float32)
    two, three = np.int64(2), np.int64(3)
    space = Space(
        [
            Real("lr", low, high, log=True),
            Integer("layers", np.int64(1), three),
            Real("m", np.int64(0), np.int64(1), condition=Condition("layers", ">=", two)),
            Real("d", 0, 1, condition=Condition("layers", "in", (two, three))),
        ]
    )
    again = Space.from_dict(json.loads(json.dumps(space.to_dict())))
    assert again == space and again["lr"].low == float(low)
    assert type(space["m"].high) is int and type(space["m"].condition.value) is int
    assert [type(v) for v in space["d"].condition.value] == [int, int]


@pytest.mark.parametrize("bounds", [(1e-3, 1.0), (1e-300, 1e300), (3e-7, 0.07)])
def test_a_log_reals_bounds_decode_exactly(bounds):
    """The cube's faces, where the acquisition's optimiser often stops, are the declared
    bounds (exp(log 1e-3) is 0.0010000000000000002, review BE)."""
    space = Space([Real("x", *bounds, log=True)])
    assert [space.from_unit(space.to_unit({"x": v}))["x"] for v in bounds] == list(bounds)
    assert [space.from_unit(np.array([u]))["x"] for u in (0.0, 1.0)] == list(bounds)


def test_batch_conversion_shapes():
    points = SPACE.from_unit(SPACE.sample(jax.random.key(0), 5))
    assert len(points) == 5
    u = SPACE.to_unit(points)
    assert u.shape == (5, 4)
    with pytest.raises(ValueError, match="shape"):
        SPACE.from_unit(np.zeros((5, 3)))


def test_parameter_kinds_are_records_a_space_reads_and_writes_by_their_type_word():
    from dataclasses import dataclass

    from bojax.parameters import PARAMETER_KINDS, Parameter

    assert PARAMETER_KINDS.get("real") is Real and PARAMETER_KINDS.get("integer") is Integer
    # The serialised form journals hold is unchanged by the records (field order too).
    space = Space(
        [Integer("layers", 1, 3), Real("lr", 1e-3, 1.0, log=True, condition=("layers", ">=", 2))]
    )
    assert space.to_dict() == {
        "parameters": [
            {"type": "integer", "name": "layers", "low": 1, "high": 3, "log": False},
            {"type": "real", "name": "lr", "low": 0.001, "high": 1.0, "log": True,
             "condition": {"parent": "layers", "op": ">=", "value": 2}},
        ]
    }  # fmt: skip
    assert list(space.to_dict()["parameters"][1]) == [
        "type",
        "name",
        "low",
        "high",
        "log",
        "condition",
    ]
    assert Space.from_dict(space.to_dict()) == space

    @dataclass(frozen=True)
    class Halves(Parameter):  # 0, 0.5, 1, ... n / 2: the integer kind's bins, halved
        kind = "halves"
        optional_keys = ("n", "condition")
        n: int = 4
        condition: object = None

        def check(self, value):
            return Integer(self.name, 0, self.n).check(2 * value) / 2

        def encode(self, values):
            return Integer(self.name, 0, self.n).encode(2 * np.asarray(values))

        def decode(self, u):
            return Integer(self.name, 0, self.n).decode(u) / 2

    with pytest.raises(SpaceDefinitionError, match="Parameter subclass"):
        PARAMETER_KINDS.register(dict, "dict")

    @dataclass(frozen=True)
    class NoCondition(Parameter):
        kind = "no-condition"

    with pytest.raises(SpaceDefinitionError, match="condition"):
        PARAMETER_KINDS.register(NoCondition, "no-condition")
    with pytest.raises(SpaceDefinitionError, match="type must be one of"):
        Space.from_dict({"parameters": [{"type": "halves", "name": "h", "n": 4}]})
    with PARAMETER_KINDS.scoped(Halves, "halves"):
        halves = Space([Halves("h", 4)])
        assert Space.from_dict(halves.to_dict()) == halves
        u = halves.sample(jax.random.key(0), 64)
        values = sorted({p["h"] for p in halves.from_unit(u)})
        assert values == [0.0, 0.5, 1.0, 1.5, 2.0]
        assert np.array_equal(halves.snap(u), u)  # sampled points come snapped
        with pytest.raises(SpaceDefinitionError, match="unknown keys"):
            Space.from_dict({"parameters": [{"type": "halves", "name": "h", "m": 4}]})
    assert "halves" not in PARAMETER_KINDS


def test_integer_ranges_too_wide_to_tell_neighbours_apart_are_refused():
    import bojax
    from bojax.errors import SpaceDefinitionError

    for low, high, log in [(0, 2**53, False), (1, 10**15, True)]:
        with pytest.raises(SpaceDefinitionError, match="too wide for its integers"):
            Integer("n", low, high, log=log)
    for low, high, log in [(0, 2**52, False), (1, 10**14, True)]:  # every integer its own
        wide = Integer("n", low, high, log=log)
        top = np.array([high - 1, high], np.float64)
        assert list(wide.decode(wide.encode(top))) == [high - 1, high]
    with pytest.raises(SpaceDefinitionError, match=r"must be a bojax\.Space, got list"):
        bojax.init([Real("x", 0.0, 1.0)])
    from bojax.errors import DataError

    with pytest.raises(DataError, match=r"shape \(1,\) or \(n, 1\)"):
        Space([Real("x", 0.0, 1.0)]).from_unit(np.zeros(3))
