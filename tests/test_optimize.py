"""Acquisition optimisers: find known maxima, respect bounds and integers, drop repeats."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bojax.bo.optimize import propose
from bojax.errors import SpaceExhaustedError
from bojax.spaces import Integer, Real, Space

TARGET = jnp.array([0.23, 0.71, 0.48])


@jax.jit
def bump(x, args):
    """A smooth score peaked at ``args`` (inside the cube)."""
    return -jnp.sum((x - args) ** 2, axis=-1)


SPACE = Space([Real("a", 0, 1), Real("b", 0, 1), Real("c", 0, 1)])


@pytest.mark.parametrize("method, tolerance", [("random", 0.12), ("sobol", 1e-5)])
def test_optimisers_find_the_maximum(method, tolerance):
    u, value = propose(jax.random.key(0), bump, TARGET, SPACE, np.zeros((0, 3)), method=method)
    assert u.shape == (3,) and np.all((u >= 0) & (u <= 1))
    np.testing.assert_allclose(u, TARGET, atol=tolerance)
    assert value == pytest.approx(float(bump(jnp.asarray(u[None]), TARGET)[0]))


def test_the_incumbent_is_refined_so_a_peak_between_grid_points_is_found():
    """A peak of width 0.002, far narrower than the grid's spacing: only the refinement
    that starts at the incumbent (beside the peak) can climb it."""

    @jax.jit
    def needle(x, args):
        return jnp.exp(-0.5 * jnp.sum((x - args) ** 2, axis=-1) / 0.002**2)

    incumbent = np.asarray(TARGET) + 0.002
    found, _ = propose(
        jax.random.key(0), needle, TARGET, SPACE, np.zeros((0, 3)), incumbent=incumbent
    )
    np.testing.assert_allclose(found, TARGET, atol=1e-5)
    missed, _ = propose(jax.random.key(0), needle, TARGET, SPACE, np.zeros((0, 3)))
    assert np.max(np.abs(missed - TARGET)) > 0.01


def test_the_refinement_never_scores_an_absent_parameter_as_present():
    """A start whose child is irrelevant (-1) keeps it so: refined as a value in [0, 1],
    it climbed a score of a point where the child exists (here one that pulls the
    parent's coordinate to 0, away from the absent branch's own optimum at 1)."""
    from bojax.bo.optimize import _refine

    @jax.jit
    def branches(x, args):
        present = x[..., 1] != -1.0
        return jnp.where(present, -((x[..., 0] - 0.0) ** 2) + 5.0, -((x[..., 0] - 1.0) ** 2))

    starts = np.array([[0.4, -1.0], [0.6, 0.5]])
    refined = _refine(branches, None, starts, max_iterations=200, tolerance=1e-9)
    assert refined[0, 1] == -1.0 and refined[0, 0] == pytest.approx(1.0, abs=1e-6)
    assert refined[1, 1] != -1.0 and refined[1, 0] == pytest.approx(0.0, abs=1e-6)


def test_maximum_on_the_boundary_stays_in_bounds():
    u, _ = propose(jax.random.key(1), bump, jnp.array([1.4, -0.2, 0.5]), SPACE, np.zeros((0, 3)))
    assert np.all((u >= 0) & (u <= 1))
    np.testing.assert_allclose(u[:2], [1.0, 0.0], atol=1e-6)


def test_integers_are_snapped_and_repeats_are_dropped():
    space = Space([Integer("k", 0, 4), Real("r", 0, 1)])
    target = jnp.asarray(space.to_unit({"k": 2, "r": 0.5}))
    first, _ = propose(jax.random.key(0), bump, target, space, np.zeros((0, 2)))
    assert space.from_unit(first)["k"] == 2
    np.testing.assert_array_equal(space.snap(first), first)
    # With (2, r) for the best r already evaluated, the optimiser must move elsewhere.
    evaluated = first[None]
    second, _ = propose(jax.random.key(0), bump, target, space, evaluated)
    assert not np.allclose(second, first)


def test_nan_scores_never_win():
    @jax.jit
    def nan_on_left(x, args):
        return jnp.where(x[:, 0] < 0.5, jnp.nan, -jnp.abs(x[:, 0] - args))

    u, value = propose(jax.random.key(0), nan_on_left, 0.1, SPACE, np.zeros((0, 3)))
    assert u[0] >= 0.5 and np.isfinite(value)


def test_a_faithful_screen_changes_nothing():
    plain = propose(jax.random.key(3), bump, TARGET, SPACE, np.zeros((0, 3)))
    screened = propose(jax.random.key(3), bump, TARGET, SPACE, np.zeros((0, 3)), screen=bump)
    np.testing.assert_array_equal(plain[0], screened[0])
    assert plain[1] == screened[1]


def test_a_screen_only_ranks_the_grid_and_the_answer_carries_the_full_score():
    """A screen peaked elsewhere sends refinement from its own best points; refinement
    and the final comparison still use the full score (whose peak is then reached)."""

    @jax.jit
    def misleading(x, args):
        return bump(x, 1.0 - args)

    u, value = propose(jax.random.key(0), bump, TARGET, SPACE, np.zeros((0, 3)), screen=misleading)
    assert value == pytest.approx(float(bump(jnp.asarray(u[None]), TARGET)[0]))
    assert np.linalg.norm(u - TARGET) < np.linalg.norm(u - (1.0 - TARGET))


def test_screened_points_that_all_repeat_fall_back_to_the_grid():
    space = Space([Integer("k", 0, 9)])
    target = jnp.asarray(space.to_unit({"k": 4}))
    evaluated = space.to_unit([{"k": k} for k in range(9)])  # only k = 9 is left
    u, _ = propose(jax.random.key(0), bump, target, space, evaluated, screen=bump, num_refine=2)
    assert space.from_unit(u)["k"] == 9


def test_exhausted_integer_space_is_a_typed_error():
    space = Space([Integer("k", 0, 2)])
    evaluated = space.to_unit([{"k": 0}, {"k": 1}, {"k": 2}])
    with pytest.raises(SpaceExhaustedError):
        propose(jax.random.key(0), bump, jnp.zeros(1), space, evaluated)


@pytest.mark.parametrize("method", ["sobol", "random"])
@pytest.mark.parametrize(
    "space",
    [Space([Integer("k", 0, 40)]), Space([Integer("a", 0, 6), Integer("b", 0, 5)])],
    ids=["one integer", "two integers"],
)
def test_a_sampled_discrete_space_is_exhausted_only_once_every_point_is_taken(space, method):
    """More points than candidates: the candidates are a sample, and once each repeated a
    taken point the space was called exhausted with points untried (review CY: 37 of 41).
    The untried ones are listed instead, and the message counts the space's points."""
    from bojax.bo.optimize import enumeration

    everything = enumeration(space, 1000)
    rng = np.random.default_rng(0)
    for left in (3, 1):
        keep = np.sort(rng.choice(len(everything), left, replace=False))
        taken = np.delete(everything, keep, axis=0)
        u, _ = propose(jax.random.key(1), bump, jnp.full(space.dim, 0.5), space, taken,
                       method=method, num_candidates=8)  # fmt: skip
        assert any(np.array_equal(u, everything[k]) for k in keep)
    with pytest.raises(SpaceExhaustedError, match=f"all {len(everything)} of its points"):
        propose(jax.random.key(1), bump, jnp.zeros(space.dim), space, everything,
                method=method, num_candidates=8)  # fmt: skip


def test_a_conditional_discrete_space_with_few_distinct_points_is_enumerated():
    """Eight nested binary choices: 256 combinations, more than the 64 candidates, but 9
    distinct points. Its last unseen point is found, and the space is called exhausted
    only once all 9 are taken (it was called exhausted with one of 15 points left)."""
    from bojax.parameters import Categorical

    params = [Categorical("c0", ["a", "b"])] + [
        Categorical(f"c{k}", ["a", "b"], condition=(f"c{k - 1}", "==", "a")) for k in range(1, 8)
    ]
    space = Space(params)
    points = [{f"c{j}": "a" for j in range(k)} | {f"c{k}": "b"} for k in range(8)]
    points.append({f"c{j}": "a" for j in range(8)})
    everything = space.to_unit(points)
    u, _ = propose(jax.random.key(0), bump, jnp.zeros(8), space, everything[1:], num_candidates=64)
    np.testing.assert_array_equal(u, everything[0])
    with pytest.raises(SpaceExhaustedError, match="all 9 of its points"):
        propose(jax.random.key(0), bump, jnp.zeros(8), space, everything, num_candidates=64)


def test_each_space_gets_its_own_enumeration_though_spaces_compare_equal():
    """Conditions on the choices 1 and True compare equal, the spaces too; the points
    kept for one must not serve the other (a run proposed c = 1 six times)."""
    from bojax.bo.optimize import enumeration
    from bojax.parameters import Categorical

    def space(value):
        return Space([Categorical("c", (1, True, "x")),
                      Integer("k", 0, 3, condition=("c", "==", value))])  # fmt: skip

    for value in (1, True):
        points = [space(value).from_unit(u) for u in enumeration(space(value), 1000)]
        assert sum("k" in p for p in points) == 4
        assert all(p["c"] is value for p in points if "k" in p), (value, points)


def test_bad_options():
    with pytest.raises(ValueError, match="method"):
        propose(jax.random.key(0), bump, TARGET, SPACE, np.zeros((0, 3)), method="grid")
