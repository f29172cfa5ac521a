"""Conditional spaces: relevance, validation, coordinates, sampling, serialisation, runs."""

import jax
import numpy as np
import pytest

import bojax
from bojax.errors import MissingParameterError, OutOfBoundsError, SpaceDefinitionError
from bojax.spaces import IRRELEVANT, Condition, Integer, Real, Space, fill_irrelevant


def layered_space(max_layers: int = 3) -> Space:
    """Depth 0..max_layers; units and dropout of layer k are relevant when layers >= k."""
    parameters = [Integer("layers", 0, max_layers), Real("lr", 1e-3, 1.0, log=True)]
    for k in range(1, max_layers + 1):
        parameters += [
            Integer(f"units{k}", 8, 64, log=True, condition=("layers", ">=", k)),
            Real(f"dropout{k}", 0.0, 0.8, condition=Condition("layers", ">=", k)),
        ]
    return Space(parameters)


def test_irrelevant_parameters_are_not_required_and_are_dropped():
    space = layered_space()
    point = {"layers": 1, "lr": 0.1, "units1": 16, "dropout1": 0.5}
    assert space.validate(point) == point
    # A value for an irrelevant parameter is checked, then dropped; None is accepted.
    assert space.validate({**point, "units2": 32, "dropout3": None}) == point
    with pytest.raises(OutOfBoundsError) as error:
        space.validate({**point, "units2": 1000})
    assert error.value.name == "units2"
    with pytest.raises(MissingParameterError) as error:
        space.validate({"layers": 2, "lr": 0.1, "units1": 16, "dropout1": 0.5})
    assert error.value.name == "units2"
    assert space.validate({"layers": 0, "lr": 0.5}) == {"layers": 0, "lr": 0.5}


def test_relevance_is_inherited_from_the_parent():
    """A grandchild is irrelevant whenever its parent is, whatever its own condition says."""
    space = Space(
        [
            Integer("layers", 0, 2),
            Integer("units2", 1, 4, condition=("layers", ">=", 2)),
            Real("bias2", 0.0, 1.0, condition=("units2", "in", (3, 4))),
        ]
    )
    assert space.validate({"layers": 1, "bias2": 0.3}) == {"layers": 1}
    assert space.validate({"layers": 2, "units2": 2}) == {"layers": 2, "units2": 2}
    assert space.validate({"layers": 2, "units2": 3, "bias2": 0.3}) == {
        "layers": 2,
        "units2": 3,
        "bias2": 0.3,
    }
    u = space.sample(jax.random.key(0), 400)
    relevant = space.relevance(u)
    assert np.all(relevant[:, 0])
    assert np.all(relevant[:, 2] <= relevant[:, 1])  # child relevant => parent relevant
    layers = np.array([p["layers"] for p in space.from_unit(u)])
    np.testing.assert_array_equal(relevant[:, 1], layers >= 2)


def test_unit_coordinates_mark_irrelevant_dimensions_and_round_trip():
    space = layered_space()
    point = {"layers": 2, "lr": 0.01, "units1": 8, "dropout1": 0.1, "units2": 64, "dropout2": 0.0}
    u = space.to_unit(point)
    assert np.all(u[6:] == IRRELEVANT) and np.all((u[:6] >= 0) & (u[:6] <= 1))
    assert space.from_unit(u) == pytest.approx(point)
    np.testing.assert_array_equal(space.snap(u), u)


def test_sampling_covers_every_depth_and_snaps_irrelevant_values_away():
    space = layered_space()
    for method in ("uniform", "sobol"):
        u = space.sample(jax.random.key(1), 256, method)
        points = space.from_unit(u)
        depths = np.array([p["layers"] for p in points])
        assert set(depths) == {0, 1, 2, 3}
        for row, point in zip(u, points, strict=True):
            assert set(point) == {"layers", "lr"} | {
                f"{kind}{k}" for k in range(1, point["layers"] + 1) for kind in ("units", "dropout")
            }
            np.testing.assert_array_equal(row == IRRELEVANT, ~space.relevance(row))
        np.testing.assert_array_equal(space.snap(u), u)  # idempotent


def test_points_that_differ_only_in_irrelevant_values_snap_equal():
    space = layered_space()
    rng = np.random.default_rng(0)
    raw = rng.uniform(size=(2, space.dim))
    raw[:, 0] = raw[0, 0]  # same depth
    raw[:, 1] = raw[0, 1]
    depth = space.from_unit(raw[0])["layers"]
    relevant_cols = 2 + 2 * depth
    raw[1, :relevant_cols] = raw[0, :relevant_cols]  # equal relevant values
    snapped = space.snap(raw)
    np.testing.assert_array_equal(snapped[0], snapped[1])
    assert bool(bojax.spaces.repeated_mask(snapped[:1], snapped[1:])[0])


def test_conditions_serialise_and_are_checked_at_definition():
    space = layered_space()
    assert Space.from_dict(space.to_dict()) == space
    assert "condition" not in Space([Real("x", 0.0, 1.0)]).to_dict()["parameters"][0]
    with pytest.raises(SpaceDefinitionError, match="comes later"):
        Space([Integer("units", 1, 4, condition=("layers", ">=", 1)), Integer("layers", 0, 2)])
    with pytest.raises(SpaceDefinitionError, match="not in the space"):
        Space([Integer("units", 1, 4, condition=("depth", ">=", 1))])
    with pytest.raises(SpaceDefinitionError, match="operator"):
        Condition("layers", "=>", 1)
    with pytest.raises(SpaceDefinitionError, match="finite numbers"):
        Condition("layers", ">=", "two")
    with pytest.raises(SpaceDefinitionError, match="names a value 'layers' cannot take"):
        Space(
            [Integer("layers", 0, 2), Integer("units", 1, 4, condition=("layers", "in", ("two",)))]
        )
    # A value the parent cannot take is refused (a typo), and not said never to hold: here
    # the condition holds at layers = 1, or always (review BE).
    for condition in (("layers", "in", (1, 4)), ("layers", "!=", 7)):
        with pytest.raises(SpaceDefinitionError, match="names a value 'layers' cannot take"):
            Space([Integer("layers", 0, 2), Integer("units", 1, 4, condition=condition)])
    with pytest.raises(SpaceDefinitionError, match="its condition names the parameter itself"):
        Space([Integer("units", 1, 4, condition=("units", ">", 2))])
    with pytest.raises(SpaceDefinitionError, match="condition must be"):
        Integer("units", 1, 4, condition="layers >= 1")
    # An order comparison outside the parent's range: a parameter that never exists.
    with pytest.raises(SpaceDefinitionError, match=r"can never hold: 'layers' lies in \[0, 2\]"):
        Space([Integer("layers", 0, 2), Integer("units", 1, 4, condition=("layers", ">", 2))])
    Space([Integer("layers", 0, 2), Integer("units", 1, 4, condition=("layers", ">=", 2))])
    with pytest.raises(SpaceDefinitionError, match="can never hold"):  # a real's end alone
        Space([Real("lr", 0.3, 0.9, log=True), Real("x", 0.0, 1.0, condition=("lr", ">=", 0.9))])
    # Equality on a real: a parameter that (almost surely) never exists, or always does.
    for op, value, says in (("==", 0.5, "never"), ("!=", 0.5, "always"), ("in", (0.5,), "never")):
        with pytest.raises(SpaceDefinitionError, match=f"for equality, which {says} holds"):
            Space([Real("lr", 0.0, 1.0), Real("w", 0.0, 1.0, condition=("lr", op, value))])
    # A condition names its value as written: the string "1" apart from the number 1.
    assert str(Condition("c", "==", "1")) == "c == '1'" and str(Condition("c", "==", 1)) == "c == 1"


def test_fill_irrelevant_is_a_fixed_pseudo_random_fill_of_the_sentinels_only():
    space = layered_space()
    u = space.sample(jax.random.key(2), 500)
    filled = np.asarray(fill_irrelevant(u))
    relevant = u != IRRELEVANT
    np.testing.assert_array_equal(filled[relevant], u[relevant])
    values = filled[~relevant]
    assert values.min() >= 0 and values.max() < 1
    np.testing.assert_array_equal(np.asarray(fill_irrelevant(u)), filled)  # deterministic
    # Spread like uniform draws: mean 1/2, variance 1/12, no repeats between points.
    assert abs(values.mean() - 0.5) < 0.05 and abs(values.var() - 1 / 12) < 0.01
    assert len(np.unique(values)) == len(values)


@pytest.mark.slow  # three runs with a journal and a resume (12 s)
def test_a_run_on_a_conditional_space_never_passes_irrelevant_values(tmp_path):
    """The objective sees exactly the relevant parameters; journal and resume keep that."""
    space = layered_space(2)
    seen = []

    def objective(point):
        expected = {"layers", "lr"} | {
            f"{kind}{k}" for k in range(1, point["layers"] + 1) for kind in ("units", "dropout")
        }
        assert set(point) == expected, point
        seen.append(point)
        return point["layers"] + sum(point.get(f"dropout{k}", 0.0) for k in (1, 2))

    options = dict(surrogate="gp-map", initial=4, seed=3, progress=False)
    bojax.minimize(objective, space, out=tmp_path / "run", iterations=1, **options)
    run = dict(out=tmp_path / "run", resume=True, iterations=3)
    resumed = bojax.minimize(objective, space, **run, **options)
    fresh = bojax.minimize(objective, space, iterations=3, **options)
    assert [r["x"] for r in resumed.history] == [r["x"] for r in fresh.history]
    assert all(r["status"] == "ok" for r in resumed.history)
    for record in resumed.history:
        u = np.asarray(record["u"])
        np.testing.assert_allclose(u, space.to_unit(record["x"]), rtol=0, atol=1e-12)
        assert np.all((u == IRRELEVANT) == ~space.relevance(u))


def test_conditions_on_categoricals_of_mixed_choices_compare_values_not_casts():
    from bojax.parameters import Categorical, Real
    from bojax.spaces import Space

    sized = Space([
        Categorical("norm", ["none", 64, 128]),
        Real("r", 0.0, 1.0, condition=("norm", "in", [64, 128])),
    ])  # fmt: skip
    sized.validate({"norm": "none"})  # a string parent: it raised ValueError (float cast)
    sized.validate({"norm": 64, "r": 0.5})
    assert sized.from_unit(sized.to_unit({"norm": "none"})) == {"norm": "none"}
    flagged = Space([
        Categorical("norm", ["x", 1, True]), Real("r", 0.0, 1.0, condition=("norm", "==", 1))
    ])  # fmt: skip
    flagged.validate({"norm": True})  # True is not 1: r does not belong (it was required)
    flagged.validate({"norm": 1, "r": 0.5})
    assert list(flagged.parameters[1].condition.holds(np.array(["x", "1"]))) == [False, False]
