"""Exploration policies (hybrid-exploration report, Algorithms 1-3): the selection rules on
a hand-built posterior, the stopping rule, errors, and the policies inside the BO loop."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

import bojax
from bojax import gp
from bojax.bo.acquisition import expected_improvement, max_variance, probability_of_improvement
from bojax.bo.policies import Proposals, decide, sd_threshold
from bojax.compilation import count_compilations
from bojax.errors import SettingsError, UnknownNameError
from bojax.objectives.problems import get_problem
from bojax.spaces import Real, Space
from bojax.surrogates import get_surrogate

QUIET = {"progress": False}


@pytest.fixture(scope="module")
def hand_built():
    """A 1-D SE GP with fixed hyperparameters on three descending points at the left of [0, 1]:
    EI peaks near the best point, the standard deviation at the far right edge."""
    model = gp.GP(kernel="se", mean="zero")
    params = {
        "kernel": {"amplitude": jnp.asarray(1.0), "lengthscales": jnp.asarray([0.15])},
        "mean": {},
        "noise": jnp.asarray(1e-4),
    }
    x = np.array([[0.05], [0.2], [0.35]])
    y = np.array([0.5, -0.5, -1.5])
    post = gp.posterior(model, params, gp.make_data(x, y))
    grid = np.linspace(0, 1, 201)[:, None]
    mean, var = gp.predict(model, post, jnp.asarray(grid))
    mean, var, best = mean[None], var[None], float(y.min())
    ei = np.asarray(expected_improvement(mean, var, best))
    sd = np.asarray(max_variance(mean, var, best))
    explore = int(np.argmax(sd))
    pi = float(probability_of_improvement(mean, var, best)[explore])
    proposals = Proposals(
        grid[np.argmax(ei)], float(ei.max()), grid[explore], float(sd[explore]), pi
    )
    return proposals, np.asarray(mean[0]), np.asarray(var[0]), best


def test_hand_built_proposals_are_what_the_report_describes(hand_built):
    proposals, mean, var, best = hand_built
    assert 0.35 < proposals.exploit[0] < 0.6  # EI follows the downward trend past the best
    assert proposals.explore[0] == 1.0  # the most uncertain point is the far edge
    # nu = P[f(u^u) < best] checked against SciPy (the report's eq. 2-3, minimising)
    sd_edge = np.sqrt(var[-1])
    assert proposals.pi == pytest.approx(norm.cdf((best - mean[-1]) / sd_edge), rel=1e-10)
    assert 0.05 < proposals.pi < 0.5  # an informative nu: neither certain nor hopeless


def expected_exploit_probability(policy, proposals, tau, scaling):
    if policy == "acquisition":
        return 1.0
    if policy == "hybrid":
        return tau
    scaled = min(1.0, proposals.pi * tau)
    return scaled if scaling == "pseudocode" else 1.0 - scaled


CASES = [
    ("acquisition", 1.0, "pseudocode"),
    ("hybrid", 0.8, "pseudocode"),
    ("hybrid", 0.3, "pseudocode"),
    ("variable-threshold", 1.0, "pseudocode"),
    ("variable-threshold", 1.0, "prose"),
    ("variable-threshold", 2.5, "pseudocode"),
]


@pytest.mark.parametrize(("policy", "tau", "scaling"), CASES)
def test_each_rule_compares_its_own_uniform_draw_with_its_threshold(
    hand_built, policy, tau, scaling
):
    proposals = hand_built[0]
    p = expected_exploit_probability(policy, proposals, tau, scaling)
    explored = []
    for i in range(400):
        key = jax.random.key(i)
        decision = decide(key, policy, proposals, tau=tau, scaling=scaling)
        rho = float(jax.random.uniform(key))  # the draw the rule must use
        assert decision.rho == rho
        assert decision.exploit_probability == pytest.approx(p, abs=1e-12)
        assert decision.explored == (not rho < p)
        expected = proposals.explore if decision.explored else proposals.exploit
        np.testing.assert_array_equal(decision.u, expected)
        assert decision == decide(key, policy, proposals, tau=tau, scaling=scaling)
        explored.append(decision.explored)
    # over many keys, the exploring frequency is 1 - p (4 binomial standard errors)
    assert abs(np.mean(explored) - (1 - p)) <= 4 * np.sqrt(p * (1 - p) / 400) + 1e-12


def test_the_two_readings_of_the_variable_threshold_disagree(hand_built):
    proposals = hand_built[0]
    pseudo = decide(jax.random.key(0), "variable-threshold", proposals)
    prose = decide(jax.random.key(0), "variable-threshold", proposals, scaling="prose")
    assert pseudo.exploit_probability == pytest.approx(proposals.pi)
    assert prose.exploit_probability == pytest.approx(1 - proposals.pi)


def test_default_thresholds_are_the_reports(hand_built):
    proposals = hand_built[0]
    assert decide(jax.random.key(1), "hybrid", proposals).exploit_probability == 0.8


def test_stopping_rule(hand_built):
    proposals = hand_built[0]
    key = jax.random.key(3)
    above = proposals.acquisition * 2
    assert decide(key, "acquisition", proposals, stop_tolerance=above).converged
    assert not decide(
        key, "acquisition", proposals, stop_tolerance=proposals.acquisition / 2
    ).converged
    # an exploring policy also needs the largest posterior sd below stop_sd
    assert not decide(key, "hybrid", proposals, stop_tolerance=above).converged
    assert decide(
        key, "hybrid", proposals, stop_tolerance=above, stop_sd=2 * proposals.sd
    ).converged


def test_noise_relative_stop_raises_the_sd_threshold_only_when_the_noise_is_known(hand_built):
    proposals = hand_built[0]._replace(sd=0.3, acquisition=1e-6)
    key, tol = jax.random.key(3), 1e-3
    assert not decide(key, "hybrid", proposals, stop_tolerance=tol, stop_noise=1.0).converged
    noisy = proposals._replace(noise_sd=0.4)  # sd 0.3 < 1.0 x 0.4
    assert decide(key, "hybrid", noisy, stop_tolerance=tol, stop_noise=1.0).converged
    assert not decide(key, "hybrid", noisy, stop_tolerance=tol, stop_noise=0.5).converged
    assert not decide(key, "hybrid", noisy, stop_tolerance=tol).converged  # absolute 0.1 only
    # the absolute threshold still applies when the noise is small
    quiet = proposals._replace(sd=0.05, noise_sd=1e-3)
    assert decide(key, "hybrid", quiet, stop_tolerance=tol, stop_noise=1.0).converged
    assert sd_threshold(0.4, 0.1, 2.0) == pytest.approx(0.8)
    assert sd_threshold(float("nan"), 0.1, 2.0) == 0.1


@pytest.mark.slow
def test_gp_surrogates_report_their_fitted_noise_to_the_stopping_rule():
    """On 25 points with noise sd 0.5 around a smooth curve, the MAP GP's noise_sd is near
    the standardised noise, and a run with a generous noise-relative rule stops early."""
    space = Space([Real("x", 0.0, 1.0)])
    rng = np.random.default_rng(0)

    def noisy(point):
        return float(np.sin(6 * point["x"]) + 0.5 * rng.standard_normal())

    x = np.linspace(0, 1, 25)
    y = np.array([noisy({"x": v}) for v in x])
    surrogate = get_surrogate("gp-map-se")
    data = gp.make_data(x[:, None], (y - y.mean()) / y.std())
    fitted = surrogate.fit(jax.random.key(0), surrogate.init(1), data)
    noise_sd = surrogate.noise_sd(surrogate.conditioned(fitted))
    assert 0.3 < noise_sd < 1.0  # standardised units: 0.5 / sd(y) = 0.62 (12 points: 0.13)
    # The loop hands the fitted noise to the rule: on the same data an exploring policy
    # stops under a generous noise-relative threshold, and not under stop_sd alone.
    infos = {}
    for stop_noise in (None, 3.0):
        settings = bojax.Settings(
            surrogate="gp-map-se", policy="hybrid", initial=25, seed=0, stop_tolerance=10.0,
            stop_sd=1e-3, stop_noise=stop_noise,
        )  # fmt: skip
        state = bojax.init(space, settings)
        for v, target in zip(x, y, strict=True):
            state = bojax.tell(state, np.array([v]), target)
        infos[stop_noise] = bojax.ask(state)[2]
    assert infos[3.0]["converged"] and not infos[None]["converged"]
    assert infos[None]["explore_sd"] < 3.0 * noise_sd


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"policy": "greedy"}, UnknownNameError),
        ({"policy": "hybrid", "tau": 1.5}, SettingsError),
        ({"policy": "hybrid", "tau": -0.1}, SettingsError),
        ({"policy": "hybrid", "tau": "0.8"}, SettingsError),
        ({"policy": "variable-threshold", "scaling": "backwards"}, SettingsError),
        ({"stop_tolerance": 0.0}, SettingsError),
        ({"stop_sd": float("nan")}, SettingsError),
        ({"stop_noise": -1.0}, SettingsError),
    ],
)
def test_bad_policy_settings_are_typed_errors(kwargs, error):
    with pytest.raises(error):
        bojax.Settings(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tau": 0.5}, "policy='acquisition' has none"),
        ({"scaling": "prose"}, "policy='acquisition' does not read it"),
        ({"policy": "hybrid", "scaling": "prose"}, "policy='hybrid' does not read it"),
        ({"stop_tolerance": 1e-3, "stop_sd": 0.1}, "stops on stop_tolerance alone"),
        ({"stop_tolerance": 1e-3, "stop_noise": 1.0}, "stops on stop_tolerance alone"),
        ({"policy": "hybrid", "stop_sd": 0.1}, "set stop_tolerance too"),
        ({"policy": "hybrid", "stop_noise": 1.0}, "set stop_tolerance too"),
        ({"stop_noise": 1.0}, "stops on stop_tolerance alone"),
    ],
)
def test_settings_that_would_do_nothing_are_refused(kwargs, match):
    """Each would enter the run's identity and block a resume without it, to no effect."""
    with pytest.raises(SettingsError, match=match):
        bojax.Settings(**kwargs)
    bojax.Settings(policy="variable-threshold", tau=0.5, scaling="prose")  # where they act
    bojax.Settings(policy="hybrid", stop_tolerance=1e-3, stop_sd=0.1, stop_noise=1.0)


def test_a_run_journalled_with_a_setting_refused_since_resumes_and_replots(tmp_path):
    """Runs journalled before the refusals above hold such settings in run.json: resume
    and plot read them as the run did (without effect), not as a mismatch."""
    import json

    from bojax.bo.runs import load_run
    from bojax.reports.run_figures import refit_settings

    run = dict(surrogate="gp-map", initial=3, num_candidates=64, progress=False)
    bojax.minimize(FORRESTER, FORRESTER.space, iterations=0, out=tmp_path, **run)
    header = json.loads((tmp_path / "run.json").read_text())
    header["settings"] |= {"tau": 0.5, "scaling": "prose", "stop_sd": 0.2}
    (tmp_path / "run.json").write_text(json.dumps(header))
    result = bojax.minimize(FORRESTER, FORRESTER.space, iterations=1, out=tmp_path,
                            resume=True, **run)  # fmt: skip
    assert result.evaluations == 4
    assert refit_settings(load_run(tmp_path)).tau is None


def test_default_settings_keep_older_journal_identities():
    identity = bojax.Settings().identity()
    for name in ("policy", "tau", "scaling", "stop_tolerance", "stop_sd", "stop_noise"):
        assert name not in identity
    assert bojax.Settings(policy="hybrid").identity()["policy"] == "hybrid"


FORRESTER = get_problem("forrester")
RUN = {"surrogate": "gp-map-se", "iterations": 4, "initial": 3, "seed": 2, **QUIET}


@pytest.mark.slow  # three whole runs; the policies' wiring into ask is checked fast above
def test_hybrid_with_tau_one_is_the_plain_loop_and_tau_zero_always_explores():
    with count_compilations(fresh=True) as counts:
        plain = bojax.minimize(FORRESTER, FORRESTER.space, **RUN)
    # MAP's first fit tries more starts than later ones under a traced count: one program.
    assert counts.of("_fit") == 1, counts
    always_exploit = bojax.minimize(FORRESTER, FORRESTER.space, policy="hybrid", tau=1.0, **RUN)
    assert [r["u"] for r in plain.history] == [r["u"] for r in always_exploit.history]
    always_explore = bojax.minimize(FORRESTER, FORRESTER.space, policy="hybrid", tau=0.0, **RUN)
    bo = [r for r in always_explore.history if r["phase"] == "bo"]
    assert all(r["diagnostics"]["explored"] == 1.0 for r in bo)
    # the max-variance point is the far end of the unexplored region, not EI's choice
    assert [r["u"] for r in bo] != [r["u"] for r in plain.history if r["phase"] == "bo"]


def test_predict_returns_the_posterior_in_the_objectives_units():
    """Against NumPy: the fixed-hyperparameter SE GP (alpha 1, ell 0.3, sigma 0.1) on the
    standardised, negated outputs, mapped back to the objective's units."""
    space = Space([Real("x", -2.0, 2.0)])
    state = bojax.init(space, bojax.Settings(surrogate="gp-fixed-se", initial=4, maximize=True))
    xs = np.array([-1.5, -0.5, 0.5, 1.5])
    ys = 100.0 + 10 * xs + np.array([0.0, 3.0, -2.0, 1.0])
    for x, y in zip(xs, ys, strict=True):
        state = bojax.tell(state, space.to_unit({"x": x}), y)
    u_star = np.array([0.1, 0.375, 0.5, 0.95])
    mean, sd = bojax.bo.loop.predict(state, u_star[:, None])

    u = (xs + 2) / 4
    z = (-ys - (-ys).mean()) / (-ys).std()

    def k(a, b):
        return np.exp(-((a[:, None] - b[None, :]) ** 2) / (2 * 0.3**2))

    gram = k(u, u) + 0.1**2 * np.eye(4)
    cross = k(u, u_star)
    mu = cross.T @ np.linalg.solve(gram, z)
    var = 1.0 - np.sum(cross * np.linalg.solve(gram, cross), axis=0)
    np.testing.assert_allclose(mean, -(mu * (-ys).std() + (-ys).mean()), rtol=1e-10)
    np.testing.assert_allclose(sd, np.sqrt(var) * (-ys).std(), rtol=1e-8)


@pytest.mark.slow
def test_early_stop_ends_the_run_before_evaluating():
    stopped = bojax.minimize(FORRESTER, FORRESTER.space, stop_tolerance=1e9, **RUN)
    assert stopped.evaluations == 3 and "converged after 3 evaluations" in stopped.stopped


def test_the_stopping_rule_reads_log_ei_as_ei():
    """log EI below a tolerance of 1e-3 means EI below 1.001: the default acquisition
    stopped every run after its initial design (review). Each BO step went on while its
    EI was at least the tolerance."""
    tolerance = 1e-3
    run = bojax.minimize(FORRESTER, FORRESTER.space, acquisition="log_ei",
                         stop_tolerance=tolerance, **RUN)  # fmt: skip
    values = [r["diagnostics"]["acquisition_value"] for r in run.history if r["phase"] == "bo"]
    assert len(values) >= 1 and all(np.exp(values) >= tolerance)
