"""Large runs: local GPs in a trust region past ``exact_limit`` (bojax.bo.trust)."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bojax
from bojax import gp
from bojax.bo import loop, optimize, trust
from bojax.compilation import count_compilations
from bojax.errors import SettingsError
from bojax.gp.core import joined
from bojax.parameters import Categorical


def branin_unit(u):
    x1, x2 = 15.0 * u[..., 0] - 5.0, 15.0 * u[..., 1]
    return (
        (x2 - 5.1 / (4 * np.pi**2) * x1**2 + 5 / np.pi * x1 - 6) ** 2
        + 10 * (1 - 1 / (8 * np.pi)) * np.cos(x1)
        + 10
    )


SPACE = bojax.Space([bojax.Real("a", 0.0, 1.0), bojax.Real("b", 0.0, 1.0)])


# -- the trust region's length: TuRBO's counters, replayed -------------------------------
def test_the_length_doubles_after_three_improvements_and_halves_after_patience():
    # five earlier outputs, best 10; then three improvements in a row
    y = np.array([12.0, 11.0, 10.0, 13.0, 14.0, 9.0, 8.0, 7.0])
    assert trust.trust_length(y, 5, dim=2) == pytest.approx(2 * trust.INITIAL_LENGTH)
    # two improvements, then not: no doubling
    assert trust.trust_length(y[:7], 5, dim=2) == trust.INITIAL_LENGTH
    # max(4, d) = 6 evaluations without improvement halve it; 5 do not
    flat = np.concatenate([y[:5], np.full(6, 10.0)])
    assert trust.trust_length(flat, 5, dim=6) == pytest.approx(trust.INITIAL_LENGTH / 2)
    assert trust.trust_length(flat[:-1], 5, dim=6) == trust.INITIAL_LENGTH


def test_failures_count_against_the_region_and_tiny_improvements_do_not_count():
    y = np.array([10.0, np.nan, np.nan, np.nan, np.nan])
    assert trust.trust_length(y, 1, dim=2) == pytest.approx(trust.INITIAL_LENGTH / 2)
    tiny = np.array([10.0, 9.9999, 9.9998, 9.9997, 9.9996])  # < 1e-3 |best| each
    assert trust.trust_length(tiny, 1, dim=2) == pytest.approx(trust.INITIAL_LENGTH / 2)


def test_the_length_never_exceeds_its_cap_and_restarts_below_its_floor():
    rising = np.concatenate([[100.0], 100.0 - np.arange(1, 40)])  # improves every time
    assert trust.trust_length(rising, 1, dim=2) == trust.MAX_LENGTH
    stuck = np.concatenate([[0.0], np.ones(4 * 7)])  # 7 halvings: 0.8 / 128 < 2^-7
    assert trust.trust_length(stuck, 1, dim=2) == trust.INITIAL_LENGTH
    assert trust.trust_length(stuck[:-4], 1, dim=2) == pytest.approx(0.8 / 64)


def test_a_collapsed_region_opens_a_new_episode_with_a_random_design():
    y = np.concatenate([[0.0], np.ones(4 * 7)])  # 7 halvings: the first episode ends
    episode = trust.replay(y, 1, dim=2)
    assert (episode.index, episode.start, episode.seen) == (1, len(y), 0)
    # its design (2d = 4 points) moves no counter, even when it is far worse
    designed = np.concatenate([y, [50.0, 40.0, 60.0, 45.0]])
    episode = trust.replay(designed, 1, dim=2)
    assert (episode.index, episode.seen, episode.length) == (1, 4, trust.INITIAL_LENGTH)
    # then successes count against the episode's own best (40), not the run's (0)
    better = np.concatenate([designed, [39.0, 38.0, 37.0]])
    assert trust.replay(better, 1, dim=2).length == 2 * trust.INITIAL_LENGTH


def test_a_success_after_a_design_that_all_failed_counts():
    # (Against an infinite best, the relative threshold was NaN and nothing won.)
    y = np.concatenate([np.zeros(20), np.ones(28), [np.nan] * 4, [5.0, 4.0, 3.0]])
    episode = trust.replay(y, 20, dim=2)
    assert episode.index == 1 and episode.length == 2 * trust.INITIAL_LENGTH


def test_an_ask_opening_a_restarted_region_fits_no_surrogate():
    """The restart's random points fit nothing, so a resume replaying the run's fits
    (``fit_models``) must fit nothing there either: an extra fit moved the carried
    chains, and the first model-based proposal after the restart differed (review)."""
    settings = bojax.Settings(exact_limit=1, local_points=8, initial=2, surrogate="gp-map")
    u = np.random.default_rng(0).uniform(size=(2 + 28 + 4, 2))
    y = np.concatenate([[0.0, 0.5], np.ones(28), [50.0, 40.0, 60.0, 45.0]])
    state = loop.init(SPACE, settings)
    for point, value in zip(u[:30], y[:30], strict=True):
        state = loop.tell(state, point, value)
    assert loop.local_region(state).designing
    assert loop.fit_models(state).surrogate is state.surrogate
    for point, value in zip(u[30:], y[30:], strict=True):  # the design is complete
        state = loop.tell(state, point, value)
    assert not loop.local_region(state).designing
    assert loop.fit_models(state).surrogate is not state.surrogate


def test_a_new_episode_is_centred_on_its_own_best_after_its_design():
    settings = bojax.Settings(exact_limit=1, local_points=8, initial=2)
    u = np.random.default_rng(0).uniform(size=(2 + 28 + 4, 2))
    # the second success is the last exact one; 28 misses end the first episode
    y = np.concatenate([[0.0, 0.5], np.ones(28), [50.0, 40.0, 60.0, 45.0]])
    area = trust.region(settings, u[:-4], y[:-4], 1.0, 2)
    assert area.designing and area.episode == 1
    np.testing.assert_array_equal(area.centre, u[0])  # the run's best while designing
    area = trust.region(settings, u, y, 1.0, 2)
    assert not area.designing
    np.testing.assert_array_equal(area.centre, u[31])  # the design's best, 40
    assert area.info()["trust_episode"] == 1.0


def test_an_initial_design_larger_than_the_limit_is_no_region_miss():
    """60 design points past exact_limit = 20: the region's counters start after them
    (they are no proposals of it), so the first local proposal has TuRBO's first box,
    centred on the design's best, and the next 5 misses (< max(4, d) = 6) keep it."""
    u = np.random.default_rng(1).uniform(size=(66, 6))
    y = np.concatenate([np.linspace(10.0, 1.0, 60)[::-1], np.full(6, 5.0)])  # best: first
    settings = bojax.Settings(exact_limit=20, local_points=16, initial=60)
    area = trust.region(settings, u[:60], y[:60], 1.0, 6)
    assert (area.length, area.episode, area.designing) == (trust.INITIAL_LENGTH, 0, False)
    np.testing.assert_array_equal(area.centre, u[0])
    assert trust.region(settings, u[:65], y[:65], 1.0, 6).length == trust.INITIAL_LENGTH
    assert trust.region(settings, u, y, 1.0, 6).length == trust.INITIAL_LENGTH / 2
    # a warm start told before asking is a design too, given as initial=len(data)
    assert trust.region(settings.replace(initial=5), u[:60], y[:60], 1.0, 6).length < 0.05


def test_the_local_phase_starts_after_the_limits_successes():
    y = np.array([1.0, np.nan, 2.0, 3.0, np.nan, 4.0])
    assert trust.local_start(y, 2) == 4  # the first proposal with three successes behind it
    assert trust.local_start(y, 4) == 7  # never reached: past the end


def test_a_local_model_sees_its_episodes_latest_proposals_however_far():
    """A conditional space: proposals that switch the categorical parent away from the
    centre's are far in unit coordinates (its children become irrelevant); left out of
    the nearest, the model never saw them and proposed them again (9 repeats in 20)."""
    settings = bojax.Settings(exact_limit=10, local_points=8, initial=10)
    rng = np.random.default_rng(4)
    u = rng.uniform(0.0, 0.1, size=(30, 2))  # crowded around the best...
    u[-3:] = [[0.9, 0.9], [0.95, 0.8], [0.8, 0.95]]  # ...and the last three proposals far
    y = np.concatenate([np.linspace(1.0, 0.0, 27), [5.0, 6.0, 7.0]])
    area = trust.region(settings, u, y, 1.0, 2)
    assert area.rows.tolist()[-2:] == [29, 28]  # the latest two (a quarter of 8)
    assert 27 not in area.rows and len(area.rows) == 8
    np.testing.assert_array_equal(area.rows[:6], trust.nearest(u, u[26], 6))


def test_nearest_rows_are_nearest_first_with_ties_by_index():
    points = np.array([[0.5, 0.5], [0.0, 0.0], [0.6, 0.5], [0.4, 0.5], [0.5, 0.9]])
    rows = trust.nearest(points, np.array([0.5, 0.5]), 3)
    assert rows.tolist() == [0, 2, 3]  # 2 and 3 tie: lower index first
    assert len(trust.nearest(points, np.zeros(2), 99)) == 5


def test_the_box_is_weighted_by_length_scales_and_spares_discrete_coordinates():
    space = bojax.Space(
        [bojax.Real("a", 0.0, 1.0), bojax.Real("b", 0.0, 1.0), Categorical("c", ("x", "y", "z"))]
    )
    area = trust.Region(np.arange(3), np.array([0.5, 0.5, 0.5]), 0.4)
    boxed = trust.with_box(area, space, np.array([[4.0, 1.0, 1.0]]))
    widths = boxed.upper - boxed.lower
    w = np.array([4.0, 1.0, 1.0]) / 4.0 ** (1 / 3)
    np.testing.assert_allclose(widths[:2], np.minimum(0.4 * w[:2], 1.0))
    assert (boxed.lower[2], boxed.upper[2]) == (0.0, 1.0)  # the categorical moves freely
    assert np.prod(w) == pytest.approx(1.0)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("length", [0.8, 0.4, 0.2, 0.05])
def test_an_integer_coordinates_box_holds_every_point_rounded_from_it(length, log):
    """The box on an integer is narrowed to the codes of the integers whose codes lie in
    it: refined to its edge, a point rounded into the neighbouring integer's bin, outside
    the box (5 of 30 local proposals, review BI)."""
    space = bojax.Space([bojax.Real("a", 0.0, 1.0), bojax.Integer("k", 1, 5, log=log)])
    centre = space.to_unit({"a": 0.3, "k": 3})
    area = trust.with_box(trust.Region(np.arange(3), centre, length), space, None)
    codes = space["k"].grid()
    low, high = area.lower[1], area.upper[1]
    assert low in codes and high in codes and low <= centre[1] <= high
    # the integers kept are those whose codes lie in the unnarrowed box
    inside = codes[np.abs(codes - centre[1]) <= length / 2]
    assert (low, high) == (inside.min(), inside.max())
    edges = np.array([[0.3, low], [0.3, high], [0.3, np.nextafter(high, 1.0)]])
    snapped = space.snap(np.clip(edges, area.lower, area.upper))
    assert np.all((snapped[:, 1] >= low) & (snapped[:, 1] <= high))


def test_sampled_gps_become_their_map_twin_and_other_surrogates_stay():
    from bojax.surrogates import SURROGATES

    slice_gp = SURROGATES.get("gp-slice")
    twin = trust.local_surrogate(slice_gp)
    assert twin.method == "map" and twin.samples_per_fit == 1
    assert (twin.model, twin.prior) == (slice_gp.model, slice_gp.prior)  # same kernel, priors
    assert trust.local_surrogate(SURROGATES.get("gp-ess")).chains == 1
    for name in ("gp-map", "gp-fixed-se", "bnn-hmc"):
        assert trust.local_surrogate(SURROGATES.get(name)) is SURROGATES.get(name)


def test_a_saved_local_state_of_a_many_chain_surrogate_unpacks_for_a_resume():
    from bojax.bo import driver
    from bojax.surrogates import SURROGATES

    settings = bojax.Settings(surrogate="gp-ess")
    many = SURROGATES.get("gp-ess")
    local = trust.carried(many.init(2))  # what the first local fit starts from
    saved = {**many.pack(local), "fits": 5}
    state, _ = driver._unpack(settings, SPACE, saved)  # not a replay of every fit
    assert state.widths.shape[0] == 1
    np.testing.assert_array_equal(
        jax.flatten_util.ravel_pytree(state.position)[0], saved["position"]
    )


# -- the optimiser inside a box ----------------------------------------------------------
def _toward(target):
    @jax.jit
    def score(x, args):
        return -jnp.sum((x - args) ** 2, axis=-1)

    return score, jnp.asarray(target)


def test_proposals_and_their_grid_stay_inside_the_box():
    box = (np.array([0.1, 0.2]), np.array([0.3, 0.5]))
    grid = optimize.candidate_grid(jax.random.key(0), SPACE, "sobol", 256, box)
    assert np.all(grid >= box[0]) and np.all(grid <= box[1])
    score, target = _toward([0.9, 0.9])  # the optimum is outside: the box's corner wins
    u, _ = optimize.propose(jax.random.key(1), score, target, SPACE, np.zeros((0, 2)), box=box)
    np.testing.assert_allclose(u, box[1], atol=1e-6)


def test_a_small_discrete_space_is_enumerated_inside_the_box_only():
    """A space of few enough points is scored whole; past the exact limit its local model
    chose anywhere in it, outside the trust region (58 of 228 local proposals, review
    BO). With every point in the box taken, the caller's fallback takes the space."""
    from bojax.errors import SpaceExhaustedError
    from bojax.parameters import Categorical, Integer

    space = bojax.Space([Categorical("c", ["a", "b", "c"]), Integer("i", 1, 20)])
    centre = space.to_unit({"c": "b", "i": 5})
    # The box as a trust region builds it: the categorical whole, the integer's codes.
    low, high = trust._integer_span(space.parameters[1], centre[1] - 0.1, centre[1] + 0.1,
                                    centre[1])  # fmt: skip
    lower, upper = np.array([0.0, low]), np.array([1.0, high])
    score, target = _toward(space.to_unit({"c": "c", "i": 20}))  # best far outside
    u, _ = optimize.propose(jax.random.key(1), score, target, space, np.zeros((0, 2)),
                            box=(lower, upper))  # fmt: skip
    assert lower[1] - 1e-12 <= u[1] <= upper[1] + 1e-12
    point = space.from_unit(u)
    assert point["c"] == "c" and 3 <= point["i"] <= 7  # the box's best: its right edge
    inside = [space.to_unit({"c": c, "i": i}) for c in "abc" for i in range(1, 21)]
    inside = np.array([v for v in inside if lower[1] <= v[1] <= upper[1]])
    with pytest.raises(SpaceExhaustedError, match="in the trust region"):
        optimize.propose(jax.random.key(1), score, target, space, inside, box=(lower, upper))


@pytest.mark.parametrize(
    "extra", [{"policy": "hybrid"}, {"cost_aware": True, "stop_tolerance": 1e-300}]
)
def test_a_full_box_moves_every_proposal_of_a_discrete_space_to_the_whole_space(extra):
    """The explorer's proposal and the unpriced one of the stopping rule kept to the box
    with no fallback: once its points were taken the run said the space was exhausted
    with most of it unevaluated (19 of 60 points, review BR)."""
    from bojax.parameters import Categorical, Integer

    space = bojax.Space([Categorical("c", ["a", "b", "c"]), Integer("i", 1, 10)])

    def f(p):
        return (p["i"] - 3) ** 2 / 10 + {"a": 0, "b": 1, "c": 2}[p["c"]]

    run = bojax.minimize(f, space, initial=5, iterations=25, exact_limit=8, local_points=8,
                         surrogate="gp-map", progress=False, **extra)  # fmt: skip
    assert run.evaluations == 30 and not (run.stopped or "").startswith("the space")


def test_the_best_new_point_is_found_past_a_chunk_of_repeats():
    taken = np.random.default_rng(0).uniform(size=(200, 2))
    points = np.concatenate([taken[:150], [[0.5, 0.5]]])  # the best 150 are all taken
    values = np.concatenate([np.linspace(10, 5, 150), [1.0]])
    assert optimize._best_new(points, values, taken) == 150
    assert optimize._best_new(points[:150], values[:150], taken) is None


# -- buckets -----------------------------------------------------------------------------
def test_buckets_grow_geometrically_past_1024_and_hold_every_n():
    sizes = [gp.bucket_size(n) for n in range(1, 10_001)]
    assert all(size >= n for n, size in enumerate(sizes, start=1))
    assert len(set(sizes)) <= 50  # multiples of 64 past 256 made 169
    assert all(gp.bucket_size(n) - n < 64 for n in range(257, 1025))  # unchanged there
    assert max((gp.bucket_size(n) - n) / n for n in range(1025, 10_001)) < 0.17


def test_a_large_posterior_keeps_no_inverse_and_predicts_as_the_dense_formulas():
    rng = np.random.default_rng(1)
    n = gp.INVERSE_LIMIT + 6
    x, y = rng.uniform(size=(n, 2)), rng.normal(size=n)
    model = gp.GP(kernel="matern52", mean="zero")
    params = model.init_params(2, noise=0.1)
    post = gp.condition(model, params, gp.make_data(x, y))
    assert post.inverse is None and post.factor.shape[0] > gp.INVERSE_LIMIT
    star = rng.uniform(size=(5, 2))
    mean, var = gp.predict(model, post, jnp.asarray(star))

    def k(a, b):  # Matern-5/2 with unit amplitude and length-scales 1 (the defaults)
        r = (
            np.sqrt(np.sum((a[:, None] - b[None]) ** 2, axis=-1))
            / np.asarray(params["kernel"]["lengthscales"]).mean()
        )
        return (
            float(params["kernel"]["amplitude"])
            * (1 + np.sqrt(5) * r + 5 / 3 * r**2)
            * (np.exp(-np.sqrt(5) * r))
        )

    gram_matrix = k(x, x) + 0.1 * np.eye(n)
    cross = k(x, star)
    np.testing.assert_allclose(mean, cross.T @ np.linalg.solve(gram_matrix, y), atol=1e-8)
    dense_var = 1.0 * float(params["kernel"]["amplitude"]) - np.sum(
        cross * np.linalg.solve(gram_matrix, cross), axis=0
    )
    np.testing.assert_allclose(var, dense_var, atol=1e-8)
    # pending points extend it without an inverse, as refactorising the joined data does
    new = gp.make_data(star[:3], np.zeros(3))
    extended = gp.extend(model, post, new)
    assert extended.inverse is None
    again = gp.posterior(model, params, joined(post.data, new))
    np.testing.assert_allclose(
        gp.predict(model, extended, jnp.asarray(star[3:]))[1],
        gp.predict(model, again, jnp.asarray(star[3:]))[1],
        atol=1e-8,
    )


# -- the loop past exact_limit -----------------------------------------------------------
def test_exact_limit_and_local_points_are_checked():
    with pytest.raises(SettingsError, match="exact_limit"):
        bojax.Settings(exact_limit=0)
    with pytest.raises(SettingsError, match="local_points"):
        bojax.Settings(local_points=2)
    assert "exact_limit" not in bojax.Settings().identity()  # older journals resume
    assert bojax.Settings(exact_limit=None).identity()["exact_limit"] is None


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """A gp-map run past a tiny exact_limit: 12 successes, then local GPs on 10 points."""
    out = tmp_path_factory.mktemp("local") / "run"
    settings = dict(
        initial=8, iterations=10, seed=3, surrogate="gp-map", exact_limit=12, local_points=10
    )

    def objective(point):
        return float(branin_unit(np.array([point["a"], point["b"]])))

    with count_compilations() as counts:
        result = bojax.minimize(objective, SPACE, out=out, progress=False, **settings)
    return out, settings, objective, result, counts


def test_past_exact_limit_proposals_come_from_a_local_model_in_the_trust_region(local_run):
    out, settings, _, result, _ = local_run
    records = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    local = [r["iteration"] for r in records if "local_points" in r["diagnostics"]]
    # proposals issued with more than 12 successes behind them: evaluations 13..17
    assert local == list(range(13, 18))
    # The run again by ask/tell: each local proposal lies in its fit's box, around the
    # incumbent of its time, and is what the run proposed.
    state = loop.init(SPACE, **settings)
    for r in records:
        if r["iteration"] >= settings["initial"]:
            fit = loop.fit_surrogate(state)  # what ask fits, from the same state and key
            u, state, info = loop.ask(state)
            np.testing.assert_array_equal(u, r["u"])
            if r["iteration"] in local:
                area = fit.region
                assert len(fit.x) == 10 and info["local_points"] == 10
                assert info["trust_length"] == area.length == r["diagnostics"]["trust_length"]
                assert np.all(u >= area.lower - 1e-12) and np.all(u <= area.upper + 1e-12)
                np.testing.assert_array_equal(area.centre, state.u[np.argmin(state.y)])
            else:
                assert fit.region is None and "local_points" not in info
        state = loop.tell(state, np.asarray(r["u"]), r["y"])
    assert result.best_value == min(r["y"] for r in records)


def test_a_local_model_sees_the_nearest_points_with_their_own_warping(local_run):
    rng = np.random.default_rng(0)
    u = rng.uniform(size=(40, 2))
    y = branin_unit(u)
    state = loop.init(SPACE, surrogate="gp-map", exact_limit=12, local_points=10)._replace(u=u, y=y)
    fit = loop.fit_surrogate(state)
    centre = u[np.argmin(y)]
    # the nearest, then the episode's latest proposals (a quarter: 2), newest first
    latest = [39, 38]
    nearest = [i for i in trust.nearest(u, centre, 10) if i not in latest][:8]
    np.testing.assert_array_equal(fit.x, u[nearest + latest])
    assert np.mean(fit.y) == pytest.approx(0.0, abs=1e-12)  # standardised on the subset
    assert float(jnp.sum(fit.fitted.posteriors.data.mask)) == 10  # the model saw 10 rows
    # exact up to the limit: every success
    exact = loop.fit_surrogate(state._replace(u=u[:12], y=y[:12]))
    assert exact.region is None and len(exact.x) == 12


def test_local_asks_do_not_recompile_as_the_data_grow(local_run):
    out, settings, objective, _, _ = local_run
    state = loop.init(SPACE, **settings)
    records = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    for r in records:
        state = loop.tell(state, np.asarray(r["u"]), r["y"])
    u, state, _ = loop.ask(state)  # programs of this size exist already
    state = loop.tell(state, u, objective(SPACE.from_unit(u)))
    with count_compilations() as steady:
        for _ in range(3):
            u, state, _ = loop.ask(state)
            state = loop.tell(state, u, objective(SPACE.from_unit(u)))
    assert steady.total == 0, steady


def test_a_resumed_local_run_proposes_what_the_uninterrupted_run_did(local_run, tmp_path, capsys):
    out, settings, objective, result, _ = local_run
    short = tmp_path / "short"
    bojax.minimize(objective, SPACE, out=short, progress=True, **{**settings, "iterations": 4})
    assert "exact_limit" not in capsys.readouterr().out  # still exact
    resumed = bojax.minimize(objective, SPACE, out=short, resume=True, progress=True, **settings)
    said = " ".join(capsys.readouterr().out.split())
    assert "past exact_limit = 12 successful evaluations" in said  # the switch, once
    assert said.count("past exact_limit") == 1
    whole = [json.loads(line)["u"] for line in (out / "journal.jsonl").read_text().splitlines()]
    again = [json.loads(line)["u"] for line in (short / "journal.jsonl").read_text().splitlines()]
    assert again == whole
    assert resumed.best_value == result.best_value


@pytest.mark.slow  # 9 s: a run of 28 evaluations past exact_limit
def test_an_integer_trust_region_with_every_point_evaluated_proposes_outside_it():
    """Past exact_limit the trust region of an integer space soon holds only evaluated
    points; the run looks outside it instead of calling the space exhausted (a run of
    400 points stopped at 33)."""
    from bojax.parameters import Integer

    space = bojax.Space([Integer("a", 0, 19), Integer("b", 0, 19)])

    def bowl(p):
        return (p["a"] - 6) ** 2 + (p["b"] - 13) ** 2 + 0.005 * p["a"]

    result = bojax.minimize(
        bowl, space, surrogate="gp-map", initial=4, iterations=24, seed=0, exact_limit=10,
        progress=False,
    )  # fmt: skip
    assert result.stopped is None and len(result.history) == 28
    assert len({tuple(r["x"].values()) for r in result.history}) == 28
    assert result.best_point == {"a": 6, "b": 13}


# -- one objective under outcome constraints (SCBO's rules) -----------------------------
def test_a_constrained_region_centres_on_the_best_feasible_and_counts_only_feasible_wins():
    settings = bojax.Settings(exact_limit=2, local_points=8, initial=3)
    u = np.random.default_rng(2).uniform(size=(12, 2))
    y = np.array([5.0, 4.0, 3.0, 2.0, 1.0, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0.01])
    violation = np.zeros(12)
    violation[[2, 3, 4, 5, 6, 7, 8, 9, 10, 11]] = 1.0  # feasible: rows 0 and 1 only
    area = trust.region(settings, u, y, 1.0, 2, violation)
    np.testing.assert_array_equal(area.centre, u[1])  # not the better infeasible rows
    # nine infeasible "improvements" in a row are misses (patience 4): halved twice
    assert area.length == trust.INITIAL_LENGTH / 4
    unconstrained = trust.region(settings, u, y, 1.0, 2)
    assert unconstrained.length == trust.MAX_LENGTH  # the same values as wins
    # maximising: the better feasible is the larger
    np.testing.assert_array_equal(trust.region(settings, u, y, -1.0, 2, violation).centre, u[0])


def test_with_nothing_feasible_the_region_centres_on_the_least_violating():
    settings = bojax.Settings(exact_limit=2, local_points=8, initial=3)
    u = np.random.default_rng(3).uniform(size=(6, 2))
    y = np.array([1.0, 2.0, np.nan, 0.5, 3.0, 0.1])
    violation = np.array([2.0, 0.3, np.nan, 1.0, 0.3, 5.0])  # ties broken by the objective
    area = trust.region(settings, u, y, 1.0, 2, violation)
    np.testing.assert_array_equal(area.centre, u[1])
    assert np.all(np.isfinite(y[np.flatnonzero(np.isfinite(y))[area.rows]]))


@pytest.mark.slow  # 13 s: compiles the metrics' local and exact fits
def test_one_constrained_objective_goes_local():
    """Past exact_limit every metric's model sees the region's rows, and the proposal
    lies in its box; the violations are standardised shortfalls, 0 where feasible."""
    space = bojax.Space([bojax.Real(f"x{i}", 0.0, 1.0) for i in range(3)])
    rng = np.random.default_rng(0)
    points = rng.uniform(size=(40, 3))

    def metrics(u):
        return {"err": float(np.sum((u - 0.3) ** 2)), "size": float(4 * u[0] + u[1]), "b": 1.0}

    def run(objectives):
        state = loop.init(space, surrogate="gp-map", objectives=objectives,
                          constraints=["size<=2.0"], exact_limit=20, local_points=12,
                          num_candidates=128)  # fmt: skip
        for u in points:
            state = loop.tell(state, u, metrics(u))
        return state

    state = run(["err:min"])
    violation = loop.multiobjective.violations(state)
    size = 4 * points[:, 0] + points[:, 1]
    assert np.array_equal(violation == 0, size <= 2.0) and np.all(violation >= 0)
    assert np.all(np.diff(violation[size > 2.0][np.argsort(size[size > 2.0])]) >= -1e-12)
    area = loop.local_region(state)
    feasible = size <= 2.0
    best = np.flatnonzero(feasible)[np.argmin(np.sum((points[feasible] - 0.3) ** 2, axis=1))]
    np.testing.assert_array_equal(area.centre, points[best])
    models = loop.multiobjective.fit_models(state, area=area)
    assert len(models.x) == 12 and abs(np.mean(models.outputs[0])) < 1e-12  # warped afresh
    np.testing.assert_array_equal(models.x, points[area.rows])
    assert models.feasible.tolist() == feasible[area.rows].tolist()
    u, _, info = loop.ask(state)
    lower, upper = models.area.lower, models.area.upper
    assert info["local_points"] == 12 and np.all((u >= lower - 1e-12) & (u <= upper + 1e-12))


# -- several objectives (MORBO's rules, one region) -------------------------------------
def test_moving_the_front_is_a_success_and_anything_weakly_dominated_a_miss():
    rng = np.random.default_rng(5)
    objectives = rng.integers(0, 4, size=(60, 2)).astype(float)  # many ties and repeats
    on_front = np.flatnonzero(loop.multiobjective.pareto.pareto_mask(objectives[:40]))
    objectives[40] = objectives[on_front[0]] - 1e-6  # beats that front point by a hair
    feasible = rng.uniform(size=60) < 0.8
    feasible[:41] = True
    joined = trust.front_improvements(objectives, feasible)
    for k in range(60):
        earlier = objectives[:k][feasible[:k]]
        spread = np.ptp(earlier, axis=0) if len(earlier) else 0.0
        better = earlier <= objectives[k] + trust.IMPROVEMENT * spread
        assert joined[k] == (feasible[k] and not np.any(np.all(better, axis=1))), k
    assert not joined[40]  # a near-copy of an earlier point (1e-6 better) is no success


def test_a_front_region_visits_the_front_in_turn_and_counts_new_front_points():
    settings = bojax.Settings(exact_limit=3, local_points=8, initial=4)
    u = np.random.default_rng(6).uniform(size=(14, 2))
    # rows 0-3: a front of 3 (row 3 dominated by row 1), then ten dominated proposals
    objectives = np.array([[0.0, 3.0], [1.0, 1.0], [3.0, 0.0], [2.0, 2.0]] + [[5.0, 5.0]] * 10)
    violation = np.zeros(14)
    for n in range(5, 9):  # the centre is front point n mod 3 in the objectives' order
        area = trust.front_region(settings, u[:n], objectives[:n], violation[:n], 2)
        np.testing.assert_array_equal(area.centre, u[[0, 1, 2][n % 3]])
    # patience max(4, d) = 4: ten misses after the design halve the box twice
    assert trust.front_region(settings, u, objectives, violation, 2).length == 0.2
    # three proposals in a row that join the front double it
    joining = np.array([[0.5, 2.0], [2.0, 0.5], [0.0, 2.5]])
    area = trust.front_region(settings, u[:7], np.concatenate([objectives[:4], joining]),
                              violation[:7], 2)  # fmt: skip
    assert area.length == 2 * trust.INITIAL_LENGTH
    # an infeasible point never joins, and with nothing feasible the least violating leads
    violation = np.where(np.arange(14) == 2, 0.5, 1.0)
    area = trust.front_region(settings, u, objectives, violation, 2)
    np.testing.assert_array_equal(area.centre, u[2])


@pytest.mark.slow  # 10 s: compiles the metrics' local fits
def test_several_objectives_past_exact_limit_fit_local_models_against_the_whole_front():
    """The models see the region's rows; the front points they leave out stay fixed in
    the boxes, so EHVI improves on the whole front; the proposal lies in the box."""
    space = bojax.Space([bojax.Real(f"x{i}", 0.0, 1.0) for i in range(3)])
    points = np.random.default_rng(7).uniform(size=(40, 3))
    state = loop.init(space, surrogate="gp-map", objectives=["near:min", "far:min"],
                      constraints=["size<=2.0"], exact_limit=20, local_points=12,
                      num_candidates=128)  # fmt: skip
    values = []
    for u in points:
        values.append([np.sum((u - 0.2) ** 2), np.sum((u - 0.8) ** 2), 3 * u[0] + u[1]])
        state = loop.tell(state, u, dict(zip(["near", "far", "size"], values[-1], strict=True)))
    values = np.array(values)
    feasible = np.flatnonzero(values[:, 2] <= 2.0)
    front = feasible[loop.multiobjective.pareto.pareto_mask(values[feasible, :2])]
    front = front[np.lexsort(values[front, :2].T[::-1])]
    area = loop.local_region(state)
    np.testing.assert_array_equal(area.centre, points[front[40 % len(front)]])
    models = loop.multiobjective.fit_models(state, area=area)
    assert len(models.x) == 12 and abs(np.mean(models.outputs[0])) < 1e-12  # warped afresh
    beyond, every_feasible = loop.multiobjective._front_beyond(state, models, 2)
    left_out = np.setdiff1d(front, area.rows)
    assert len(left_out) > 0 and len(every_feasible) == len(feasible)
    np.testing.assert_allclose(
        np.sort(beyond * models.scale[:2] + models.shift[:2], axis=0),
        np.sort(values[left_out, :2], axis=0),
    )
    exact = loop.multiobjective.fit_models(state)
    assert len(loop.multiobjective._front_beyond(state, exact, 2)[0]) == 0
    u, _, info = loop.ask(state)
    lower, upper = models.area.lower, models.area.upper
    assert info["local_points"] == 12 and np.all((u >= lower - 1e-12) & (u <= upper + 1e-12))
    # the box is short wherever either objective varies fast
    ell = trust.shortest_lengthscales(models.fitted[:2], 3)
    boxed = trust.with_box(area, space, ell)
    np.testing.assert_array_equal([boxed.lower, boxed.upper], [lower, upper])


def test_several_objectives_box_takes_the_shortest_length_scale_per_coordinate():
    """ZDT1's f1 reads only x0: its model's length-scales alone pinned x0 to a box 1e-3
    wide and left x1.. free, along which f2 varies (review)."""
    from types import SimpleNamespace

    def fitted(*ell):
        return SimpleNamespace(samples={"kernel": {"lengthscales": np.array(ell)}})

    f1 = fitted([0.1, 1e4, 1e4], [0.3, 1e4, 1e4])  # two draws: mean (0.2, 1e4, 1e4)
    f2 = fitted([2.0, 0.5, 0.4])
    np.testing.assert_allclose(trust.shortest_lengthscales([f1, f2], 3), [0.2, 0.5, 0.4])
    assert trust.shortest_lengthscales([f1, SimpleNamespace()], 3) is None  # a BNN's


@pytest.mark.slow  # 13 s each: three runs of sampled GPs past exact_limit
@pytest.mark.parametrize("objectives", [["err:min"], ["err:min", "size:min"]])
def test_a_resumed_constrained_local_run_proposes_what_the_uninterrupted_run_did(
    tmp_path, monkeypatch, objectives
):
    """The sampled models' chains become MAP positions at the switch, per metric; with
    several objectives the region walks the front, a function of the journal."""

    def objective(point):
        return {"err": (point["a"] - 0.3) ** 2 + (point["b"] - 0.6) ** 2,
                "size": 3 * point["a"] + point["b"]}  # fmt: skip

    settings = dict(
        objectives=objectives, constraints=["size<=1.5"], initial=6, seed=3, exact_limit=10,
        local_points=8, progress=False, num_candidates=128, surrogate="gp-ess",  # 16 chains
    )  # fmt: skip
    whole, short = tmp_path / "whole", tmp_path / "short"
    bojax.minimize(objective, SPACE, out=whole, iterations=10, **settings)
    bojax.minimize(objective, SPACE, out=short, iterations=9, **settings)
    import bojax.bo.driver as driver

    replayed, fit_models = [], driver.fit_models
    monkeypatch.setattr(driver, "fit_models", lambda s: replayed.append(1) or fit_models(s))
    bojax.minimize(objective, SPACE, out=short, iterations=10, resume=True, **settings)
    assert len(replayed) <= 1  # the saved MAP positions unpack (every fit was replayed)
    read = [[json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
            for out in (whole, short)]  # fmt: skip
    assert [r["u"] for r in read[0]] == [r["u"] for r in read[1]]
    assert sum("local_points" in r["diagnostics"] for r in read[0]) == 5
