"""Expected improvement per second (``cost_aware``; Snoek et al. 2012), issue 40."""

from __future__ import annotations

import time

import numpy as np
import pytest

import bojax
from bojax.errors import DataError, SettingsError
from bojax.parameters import Real

LINE = bojax.Space([Real("x", 0.0, 1.0)])


def symmetric_state(cost_aware: bool, cheap_left: bool = True):
    """A bowl at x = 0.5 seen at mirrored points; the right half 100x slower (or the left)."""
    state = bojax.init(LINE, surrogate="gp-map", cost_aware=cost_aware, initial=4)
    for x in (0.1, 0.3, 0.7, 0.9):
        slow = (x > 0.5) == cheap_left
        seconds = 1.0 if slow else 0.01
        state = bojax.tell(state, [x], (x - 0.5) ** 2, *([seconds] if cost_aware else []))
    return state


@pytest.mark.parametrize("cheap_left", [True, False])
def test_the_next_point_is_drawn_to_the_cheap_side_of_a_symmetric_bowl(cheap_left):
    u, _, _ = bojax.ask(symmetric_state(True, cheap_left))
    assert (u[0] < 0.5) == cheap_left, u  # mirrored costs, mirrored proposals


@pytest.mark.parametrize("cheap_left", [True, False])
def test_a_proposal_carries_its_predicted_seconds(cheap_left):
    _, _, info = bojax.ask(symmetric_state(True, cheap_left))
    assert 0.003 < info["predicted_seconds"] < 0.1  # on the cheap side, where 0.01 s
    assert "predicted_seconds" not in bojax.ask(symmetric_state(False))[2]


def test_a_cost_aware_state_needs_the_seconds_of_each_evaluation():
    state = bojax.init(LINE, cost_aware=True)
    with pytest.raises(DataError, match="needs each evaluation's seconds"):
        bojax.tell(state, [0.2], 1.0)
    with pytest.raises(DataError, match="seconds=0"):
        bojax.tell(state, [0.2], 1.0, 0)
    state = bojax.tell(state, [0.2], float("nan"), 0.5)  # a failure costs time too
    assert state.seconds.tolist() == [0.5]
    with pytest.raises(SettingsError, match="cost_aware"):
        bojax.Settings(cost_aware=True, objectives={"a": "min", "b": "min"})


def test_runs_journal_the_seconds_of_evaluations_and_resume_with_them(tmp_path):
    calls = []

    def slow_right(point):
        calls.append(point)
        if len(calls) == 6:
            raise KeyboardInterrupt
        time.sleep(0.001 + 0.05 * point["x"])
        return (point["x"] - 0.5) ** 2

    settings = dict(surrogate="gp-map", cost_aware=True, initial=3, iterations=5, progress=False)
    with pytest.raises(KeyboardInterrupt):
        bojax.minimize(slow_right, LINE, out=tmp_path, **settings)
    result = bojax.minimize(slow_right, LINE, out=tmp_path, resume=True, **settings)
    assert result.evaluations == 8
    for record in result.history:
        expected = 0.001 + 0.05 * record["x"]["x"]
        assert expected <= record["evaluation_seconds"] < expected + 0.5
    assert np.isclose(result.best_value, 0.0, atol=0.05)
    # bojax plot's refit tells the journal's seconds too (it raised on every such run).
    from bojax.bo.runs import load_run
    from bojax.reports.run_figures import _state

    refit = _state(load_run(tmp_path))
    assert refit.seconds.tolist() == [r["evaluation_seconds"] for r in result.history]


def test_past_exact_limit_the_cost_model_sees_the_trust_regions_evaluations(monkeypatch):
    """The cost GP is fitted to the ``local_points`` evaluations nearest the region's
    centre, failures included, not to all n (an exact fit per ask took 14 s at n = 400)."""
    from bojax.bo import loop

    seen = []
    fit_cost = loop.fit_cost

    def spy(space, u, seconds, key, batch=1):
        seen.append((u.copy(), seconds.copy()))
        return fit_cost(space, u, seconds, key, batch)

    monkeypatch.setattr(loop, "fit_cost", spy)
    state = bojax.init(LINE, surrogate="gp-map", cost_aware=True, exact_limit=10, local_points=8)
    xs = np.linspace(0.0, 1.0, 30)
    for x in xs:
        failed = abs(x - 0.31) < 0.02  # one failure near the best
        state = bojax.tell(state, [x], np.nan if failed else (x - 0.3) ** 2, 0.1 + x)
    _, _, info = bojax.ask(state)
    ((u, seconds),) = seen
    assert len(u) == 8 and info["local_points"] == 8.0
    assert np.isnan(state.y[9])  # x = 0.310 failed; the best is x = 0.276
    nearest = xs[np.argsort(np.abs(xs - xs[8]), kind="stable")[:8]]
    assert xs[9] in nearest
    assert sorted(u[:, 0].tolist()) == pytest.approx(sorted(nearest.tolist()))
    assert np.allclose(seconds, 0.1 + u[:, 0])


@pytest.mark.parametrize("acquisition", ["lcb", "ei", "log_ei"])
def test_success_and_cost_weight_the_acquisition_once(acquisition):
    """With failures modelled, a cost-aware score is the acquisition weighted by
    ``log P - log c`` in one step: LCB's weighting applied twice wrapped ``softplus``
    around its own output and reordered candidates (review)."""
    import jax.numpy as jnp

    from bojax.bo import loop
    from bojax.bo.acquisition import get_acquisition

    space = bojax.Space([Real("x", 0.0, 1.0)])
    settings = bojax.Settings(initial=8, seed=0, surrogate="gp-map", acquisition=acquisition,
                              cost_aware=True)  # fmt: skip
    state = loop.init(space, settings)
    points, seconds = np.linspace(0.05, 0.95, 8), np.exp(np.linspace(-2, 2, 8))
    for i, (u, c) in enumerate(zip(points, seconds, strict=True)):
        y = float("nan") if i in (1, 6) else float(np.sin(6 * u) + 0.5 * u)
        state = loop.tell(state, np.array([u]), y, seconds=float(c))
    state = loop.fit_classifier(state)
    classifier = settings.make_failure_model(space)
    feasibility = (classifier.conditioned(state.classifier),)
    surrogate, fitted, _, y, _, _ = loop.fit_surrogate(state)
    conditioned = surrogate.conditioned(fitted)
    best = jnp.asarray(float(np.min(y)))
    cost = loop._cost_terms(state, 8)
    record = get_acquisition(acquisition)
    options = {"kappa": 2.0} if acquisition == "lcb" else {}
    grid = jnp.linspace(0.0, 1.0, 21)[:, None]
    value = record(*surrogate.predictive(conditioned, grid), best, **options)
    log_p = classifier.log_probability(feasibility[0], grid)
    (cost_conditioned, cost_scale) = cost.costing[0]
    log_c = cost_scale * jnp.mean(cost.model.predictive(cost_conditioned, grid)[0], axis=0)
    expected = record.weighting(value, log_p - log_c, best)
    score = loop._score_function(surrogate, record, None, classifier, cost.model)
    got = score(grid, (conditioned, best, options, *feasibility, *cost.costing))
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("costly_optimum", [True, False])
def test_stop_tolerance_reads_the_acquisition_not_it_per_second(costly_optimum):
    """Under ``cost_aware`` the proposal's score is EI times the geometric mean of the
    seconds over the point's own; the stopping rule read that, so a run whose promising
    corner was the costly one reported itself converged with EI far above the tolerance,
    and one whose promising corner was cheap went on with EI below it (review BL)."""
    import jax
    import jax.numpy as jnp

    from bojax.bo import loop
    from bojax.bo.acquisition import get_acquisition

    space = bojax.Space([Real("a", 0.0, 1.0), Real("b", 0.0, 1.0)])
    points = np.random.default_rng(0).uniform(size=(25, 2))
    sign = 1.0 if costly_optimum else -1.0

    def state(tolerance):
        s = loop.init(space, cost_aware=True, acquisition="ei", surrogate="gp-map", seed=1,
                      initial=5, stop_tolerance=tolerance)  # fmt: skip
        for u in points:
            y = -3.0 * np.exp(-((u[0] - 0.9) ** 2 + (u[1] - 0.5) ** 2) / 0.05)
            s = loop.tell(s, u, y, seconds=float(np.exp(sign * 9.0 * (u[0] - 0.5))))
        return s

    fitted_state = state(None)
    surrogate, fitted, _, y, _, _ = loop.fit_surrogate(fitted_state)
    args = (surrogate.conditioned(fitted), jnp.asarray(np.min(y)), {})
    grid = jnp.asarray(space.sample(jax.random.PRNGKey(0), 4096, "sobol"))
    ei = get_acquisition("ei")
    plain = float(jnp.max(loop._score_function(surrogate, ei, None, None, None)(grid, args)))
    cost = loop._cost_terms(fitted_state, len(fitted_state.y))
    priced = loop._score_function(surrogate, ei, None, None, cost.model)
    per_second = float(jnp.max(priced(grid, (*args, *cost.costing))))
    assert (plain > 10 * per_second) if costly_optimum else (per_second > 10 * plain)
    tolerance = float(np.sqrt(plain * per_second))  # between the two, far from both
    _, _, info = loop.ask(state(tolerance))
    assert bool(info["converged"]) == (not costly_optimum)  # converged iff EI < tolerance


def test_the_stopping_rules_unpriced_best_skips_pending_points():
    """With q > 1 the stopping rule read EI at a point already pending (review BS): its
    best is over the points neither evaluated nor pending, as the proposal's is."""
    import jax.numpy as jnp

    from bojax.bo import loop
    from bojax.bo.acquisition import get_acquisition
    from bojax.parameters import Integer

    space = bojax.Space([Integer("i", 1, 10)])
    state = loop.init(space, cost_aware=True, surrogate="gp-map", acquisition="ei", initial=3)
    for i in (2, 5, 9):
        state = loop.tell(state, space.to_unit({"i": i}), (i - 4) ** 2 / 10, seconds=1.0 + i)
    surrogate, fitted, _, y, _, _ = loop.fit_surrogate(state)
    args = (surrogate.conditioned(fitted), jnp.asarray(np.min(y)), {})
    ei = get_acquisition("ei")
    grid = np.array([space.to_unit({"i": i}) for i in range(1, 11) if i not in (2, 5, 9)])
    values = np.asarray(loop._score_function(surrogate, ei, None, None, None)(grid, args))
    order = np.argsort(-values)
    best = loop._unpriced_best(state, surrogate, ei, None, args, 3, (None,), grid[order[:1]])
    assert best == pytest.approx(values[order[1]], rel=1e-9)  # the best one is pending
