"""Pareto fronts, hypervolumes, the box decomposition and LogEHVI against independent
float64 references: brute-force domination, inclusion-exclusion volumes, numerical
integration and Monte Carlo."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

from bojax.bo import pareto
from bojax.bo.acquisition import (
    MultiIncumbent,
    log_box_side,
    log_expected_hypervolume_improvement,
    log_scalarised_improvement,
)
from bojax.errors import DataError

jax.config.update("jax_enable_x64", True)


def _dominated_brute(values):
    n = len(values)
    return np.array(
        [
            any(
                np.all(values[j] <= values[i]) and np.any(values[j] < values[i])
                for j in range(n)
                if j != i
            )
            for i in range(n)
        ]
    )


def _hypervolume_inclusion_exclusion(points, reference):
    """Volume of the union of the boxes [p, r], by inclusion-exclusion over subsets."""
    points = [p for p in points if np.all(p < reference)]
    total = 0.0
    for size in range(1, len(points) + 1):
        for subset in itertools.combinations(points, size):
            corner = np.max(subset, axis=0)
            total += (-1) ** (size + 1) * np.prod(np.maximum(reference - corner, 0.0))
    return total


@pytest.mark.parametrize("objectives", [1, 2, 3, 4])
@pytest.mark.parametrize("seed", range(4))
def test_pareto_mask_matches_brute_force(seed, objectives):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 5, size=(40, objectives)).astype(float)  # ties and duplicates
    values[rng.random(values.shape) < 0.05] = np.inf
    values[rng.random(values.shape) < 0.05] = -np.inf
    values[rng.random(values.shape) < 0.03] = np.nan  # such a row neither dominates nor is
    np.testing.assert_array_equal(pareto.pareto_mask(values), ~_dominated_brute(values))


@pytest.mark.parametrize("objectives", [1, 2, 3, 4])
@pytest.mark.parametrize("seed", range(3))
def test_hypervolume_matches_inclusion_exclusion(objectives, seed):
    rng = np.random.default_rng(seed)
    points = rng.random((9, objectives))
    reference = np.full(objectives, 0.95)
    expected = _hypervolume_inclusion_exclusion(list(points), reference)
    assert pareto.hypervolume(points, reference) == pytest.approx(expected, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("objectives", [1, 2, 3])
@pytest.mark.parametrize("seed", range(3))
def test_boxes_tile_the_nondominated_region_and_give_the_improvement(objectives, seed):
    rng = np.random.default_rng(seed)
    points = rng.random((8, objectives))
    reference = np.full(objectives, 1.0)
    lower, upper = pareto.nondominated_boxes(points, reference)
    # Clipped below at 0, the boxes fill [0, r] less the dominated volume (disjointness).
    volume = np.prod(np.maximum(upper - np.maximum(lower, 0.0), 0.0), axis=1).sum()
    assert volume == pytest.approx(1.0 - pareto.hypervolume(points, reference), rel=1e-12)
    base = pareto.hypervolume(points, reference)
    for y in rng.random((20, objectives)) * 1.2 - 0.1:
        gain = pareto.hypervolume(np.vstack([points, y]), reference) - base
        assert pareto.improvement(y[None], lower, upper)[0] == pytest.approx(gain, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_three_objective_boxes_are_two_per_front_point_and_tile_with_ties(seed):
    """The sweep's boxes: 2m + 1 at most, disjoint, covering the region the front leaves,
    also where coordinates tie (rounded to a tenth) or sit on a sphere like DTLZ2's."""
    rng = np.random.default_rng(seed)
    if seed % 2:
        points = np.round(rng.random((40, 3)), 1)
    else:
        points = np.abs(rng.normal(size=(40, 3)))
        points /= np.linalg.norm(points, axis=1, keepdims=True)
    reference = np.full(3, 1.05)
    lower, upper = pareto.nondominated_boxes(points, reference)
    m = len(pareto.front(points, reference))
    assert 1 <= len(lower) <= 2 * m + 1
    assert np.all(lower < upper)
    volume = np.prod(np.maximum(upper - np.maximum(lower, 0.0), 0.0), axis=1).sum()
    assert volume == pytest.approx(1.05**3 - pareto.hypervolume(points, reference), rel=1e-12)
    base = pareto.hypervolume(points, reference)
    for y in rng.random((30, 3)) * 1.2 - 0.1:
        gain = pareto.hypervolume(np.vstack([points, y]), reference) - base
        assert pareto.improvement(y[None], lower, upper)[0] == pytest.approx(gain, abs=1e-12)


def test_empty_front_and_reference_rule():
    lower, upper = pareto.nondominated_boxes(np.zeros((0, 2)), np.array([1.0, 2.0]))
    assert np.all(np.isinf(lower)) and np.all(upper == [[1.0, 2.0]])
    assert pareto.hypervolume(np.array([[2.0, 0.0]]), np.array([1.0, 1.0])) == 0.0
    values = np.array([[0.0, 4.0], [1.0, 1.0], [4.0, 0.0], [5.0, 5.0]])  # last dominated
    np.testing.assert_allclose(pareto.reference_point(values), [4.4, 4.4])
    # A front of one point has no range: its nadir moves out by 10% of max(|v|, 1).
    np.testing.assert_allclose(pareto.reference_point(np.array([[3.0, 0.0]])), [3.3, 0.1])


def test_the_search_reference_point_holds_every_evaluation_a_tenth_beyond_the_worst():
    z = np.array([[-1.0, 2.0], [0.5, -0.3], [1.5, 1.0], [-0.2, 0.1]])  # standardised
    reference = pareto.search_reference_point(z)
    np.testing.assert_allclose(reference, [1.65, 2.2])
    assert np.all(z < reference)  # the dominated point [1.5, 1.0] too: no end unvalued
    # A worst value below 0 (feasible points better than the mean) moves out to 0.9 w.
    np.testing.assert_allclose(pareto.search_reference_point(np.array([[-0.5, -2.0]])),
                               [-0.45, -1.8])  # fmt: skip
    assert pareto.search_reference_point(np.zeros((3, 1)))[0] > 0.0  # constant: just past
    with pytest.raises(DataError):
        pareto.search_reference_point(np.zeros((0, 2)))


@pytest.mark.parametrize(
    "lower, upper, mean, sd",
    [(-np.inf, 0.5, 0.0, 1.0), (-1.0, 0.5, 0.2, 0.3), (0.0, 1.0, 9.0, 1.0),
     (-np.inf, -30.0, 0.0, 1.0), (2.0, 3.0, -4.0, 0.5), (-0.3, 0.1, 0.0, 1e-3)],
)  # fmt: skip
def test_log_box_side_matches_numerical_integration(lower, upper, mean, sd):
    """E[max(0, u - max(Y, l))] = (u - l) P(Y <= l) + int_l^u (u - y) p(y) dy."""
    start = lower if np.isfinite(lower) else min(upper, mean) - 40 * sd
    inside = [v for v in (mean,) if start < v < upper]
    expected, _ = integrate.quad(
        lambda y: (upper - y) * stats.norm.pdf(y, mean, sd), start, upper, points=inside or None,
        limit=400, epsabs=0, epsrel=1e-11,
    )  # fmt: skip
    if np.isfinite(lower):
        expected += (upper - lower) * stats.norm.cdf(lower, mean, sd)
    got = log_box_side(
        jnp.asarray(lower), jnp.asarray(upper), jnp.asarray(mean), jnp.asarray(sd**2)
    )
    assert float(got) == pytest.approx(np.log(expected), rel=1e-7)


def _incumbent(front, reference, columns=(), orient=(), bounds=(), found=True, best=0.0):
    lower, upper = pareto.nondominated_boxes(front, reference)
    return MultiIncumbent(
        jnp.asarray(lower),
        jnp.asarray(upper),
        jnp.ones(len(lower), bool),
        jnp.asarray(found),
        jnp.asarray(best),
        jnp.asarray(np.array(columns, np.int32)),
        jnp.asarray(np.array(orient, float)),
        jnp.asarray(np.array(bounds, float)),
    )


@pytest.mark.parametrize("objectives", [2, 3])
def test_log_ehvi_matches_monte_carlo_over_draws_and_outcomes(objectives):
    rng = np.random.default_rng(objectives)
    front = rng.random((5, objectives))
    reference = np.full(objectives, 1.1)
    lower, upper = pareto.nondominated_boxes(front, reference)
    mean = rng.normal(0.5, 0.3, size=(2, 3, objectives))  # (S draws, M points, K)
    var = rng.uniform(0.01, 0.2, size=(2, 3, objectives))
    got = np.exp(log_expected_hypervolume_improvement(mean, var, _incumbent(front, reference)))
    draws = mean[..., None, :] + np.sqrt(var)[..., None, :] * rng.standard_normal(
        (2, 3, 20_000, objectives)
    )
    gains = pareto.improvement(draws.reshape(-1, objectives), lower, upper).reshape(2, 3, -1)
    expected = gains.mean(axis=(0, 2))  # mean over draws, then the log (here: none)
    error = gains.std(axis=2).max() / np.sqrt(20_000)
    np.testing.assert_allclose(got, expected, atol=5 * error)


def test_log_ehvi_with_one_objective_is_log_ei_and_constraints_multiply():
    from bojax.bo.acquisition import log_expected_improvement

    rng = np.random.default_rng(0)
    mean, var = rng.normal(size=(4, 6, 2)), rng.uniform(0.1, 1.0, size=(4, 6, 2))
    best = 0.3
    incumbent = _incumbent(
        np.array([[best]]), np.array([5.0]), columns=[1], orient=[1.0], bounds=[0.2]
    )
    got = log_expected_hypervolume_improvement(mean, var, incumbent)
    ei = np.exp(
        [
            log_expected_improvement(mean[s : s + 1, :, 0], var[s : s + 1, :, 0], best)
            for s in range(4)
        ]
    )
    feasible = stats.norm.cdf((0.2 - mean[..., 1]) / np.sqrt(var[..., 1]))
    np.testing.assert_allclose(np.exp(got), (ei * feasible).mean(axis=0), rtol=1e-9)
    # Before any feasible point: the log of the mean probability of feasibility.
    none = log_expected_hypervolume_improvement(
        mean, var, incumbent._replace(found=jnp.asarray(False))
    )
    np.testing.assert_allclose(np.exp(none), feasible.mean(axis=0), rtol=1e-9)
    # A '>=' constraint is orientation -1: P(Y_1 >= 0.2) = P(-Y_1 <= -0.2).
    flipped = incumbent._replace(orient=jnp.asarray([-1.0]), bounds=jnp.asarray([-0.2]))
    above = stats.norm.sf((0.2 - mean[..., 1]) / np.sqrt(var[..., 1]))
    got = log_expected_hypervolume_improvement(
        mean, var, flipped._replace(found=jnp.asarray(False))
    )
    np.testing.assert_allclose(np.exp(got), above.mean(axis=0), rtol=1e-9)


def test_log_ehvi_is_finite_with_gradients_far_in_the_tail():
    front = np.array([[0.0, 1.0], [1.0, 0.0]])
    incumbent = _incumbent(front, np.array([2.0, 2.0]))

    @jax.jit
    def value(m):
        return log_expected_hypervolume_improvement(
            m[None, None, :], jnp.full((1, 1, 2), 1e-4), incumbent
        )[0]

    for point in ([50.0, 50.0], [3.0, -1.0], [0.5, 0.5]):
        v, g = jax.jit(jax.value_and_grad(value))(jnp.asarray(point))
        assert np.isfinite(v) and np.all(np.isfinite(g))
    assert (
        value(jnp.asarray([50.0, 50.0]))
        < value(jnp.asarray([3.0, 3.0]))
        < value(jnp.asarray([0.5, 0.5]))
    )


def test_parego_acquisition_is_log_ei_of_output_zero():
    from bojax.bo.acquisition import log_expected_improvement

    rng = np.random.default_rng(1)
    mean, var = rng.normal(size=(3, 5, 1)), rng.uniform(0.1, 1.0, size=(3, 5, 1))
    incumbent = _incumbent(np.zeros((0, 1)), np.zeros(1), best=-0.2)
    got = log_scalarised_improvement(mean, var, incumbent)
    np.testing.assert_allclose(
        got, log_expected_improvement(mean[..., 0], var[..., 0], -0.2), rtol=1e-12
    )


def test_the_problems_fronts_have_their_known_hypervolumes():
    """Dense points on each known front come within a grid's step of the published
    maximum hypervolume (ZDT1 120 + 2/3, ZDT2 120 + 1/3, DTLZ2 1.1^3 - pi/6) and never
    past it (Branin-Currin 59.36, BoTorch's figure)."""
    from bojax.objectives.multiobjective import MULTI_PROBLEMS

    def values(name, points):
        problem = MULTI_PROBLEMS[name]
        rows = [problem({f"x{i}": v for i, v in enumerate(p)}) for p in points]
        return np.array([[r[k] for k in problem.objectives] for r in rows]), problem

    on_front = [[f] + [0.0] * 3 for f in np.linspace(0, 1, 2001)]  # ZDT: g = 1
    for name, expected in (("zdt1", 120 + 2 / 3), ("zdt2", 120 + 1 / 3)):
        ys, problem = values(name, on_front)
        assert pareto.hypervolume(ys, problem.reference_point) == pytest.approx(expected, abs=2e-3)
    grid = np.linspace(0, 1, 20)
    sphere = [[a, b, 0.5, 0.5, 0.5, 0.5] for a in grid for b in grid]  # DTLZ2: g = 0
    ys, problem = values("dtlz2", sphere)
    np.testing.assert_allclose(np.sum(ys**2, axis=1), 1.0)
    volume = pareto.hypervolume(ys, problem.reference_point)
    assert 1.331 - np.pi / 6 - 0.05 < volume < 1.331 - np.pi / 6  # 400 points: just below
    # Branin's three minimisers (0.397887), on the unit square; nothing beats 59.36.
    minimisers = [
        [(x + 5) / 15, y / 15] for x, y in ((-np.pi, 12.275), (np.pi, 2.275), (9.42478, 2.475))
    ]
    ys, problem = values("branin-currin", minimisers)
    np.testing.assert_allclose(ys[:, 0], 0.397887, atol=1e-5)
    square = [[a, b] for a in np.linspace(0, 1, 100) for b in np.linspace(0, 1, 100)]
    ys, problem = values("branin-currin", square)
    assert 50 < pareto.hypervolume(ys, problem.reference_point) < 59.3602


def test_the_best_record_breaks_ties_in_the_first_objective_by_the_next():
    """Records tied in the first objective: the best is on the Pareto set (the next
    objectives decide, in their own directions), never a dominated one listed first."""
    from bojax.bo.metrics import Metrics, objective_texts

    metrics = Metrics.parse(objective_texts({"a": "min", "b": "max", "c": "min"}), None)
    ys = [{"a": 0.0, "b": 1.0, "c": 5.0}, {"a": 0.0, "b": 3.0, "c": 9.0},
          {"a": 0.0, "b": 3.0, "c": 2.0}, {"a": 1.0, "b": 9.0, "c": 0.0}]  # fmt: skip
    records = [{"status": "ok", "y": y, "iteration": i} for i, y in enumerate(ys)]
    assert pareto.best_record(metrics, records)["iteration"] == 2
    assert pareto.best_record(metrics, [{"status": "failed", "y": None}]) is None


@pytest.mark.parametrize(
    "lower, upper, mean, sd",
    [(0.0, 1e-6, 1e6, 1e6), (0.0, 1e-17, 0.0, 1.0), (0.3, 0.3 + 1e-9, 0.0, 1.0),
     (-40.0, -40.0 + 1e-9, 0.0, 1.0), (-5.0, -5.0 + 1e-5, 0.0, 1.0), (0.0, 1e-4, 0.3, 1.0),
     (0.0, 2e-3, 0.0, 1.0), (-2.0, -1.999, 0.0, 1.0)],
)  # fmt: skip
def test_a_box_side_narrow_against_sigma_keeps_its_digits(lower, upper, mean, sd):
    """``(u - max(Y, l))^+ = int_l^u 1[Y <= t] dt``, so the side is ``int_l^u Phi((t - mu) /
    sigma) dt``, integrated here in logs; the difference of two logs of ``h`` lost 4 to 17
    digits on such boxes (review: 4.6e-4 relative off at width 1e-12 sigma)."""
    middle = stats.norm.logcdf(0.5 * (lower + upper), mean, sd)
    scaled, _ = integrate.quad(
        lambda t: np.exp(stats.norm.logcdf(t, mean, sd) - middle), lower, upper,
        epsabs=0, epsrel=1e-13,
    )  # fmt: skip
    args = (jnp.asarray(lower), jnp.asarray(upper), jnp.asarray(mean), jnp.asarray(sd**2))
    assert float(log_box_side(*args)) == pytest.approx(np.log(scaled) + middle, rel=1e-10)
    gradient = jax.grad(log_box_side, argnums=(0, 1, 2, 3))(*args)
    assert all(np.isfinite(float(g)) for g in gradient)  # the unused branch stays out
