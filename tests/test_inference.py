"""Samplers on targets with known moments, MAP on a known mode, and bounded GP fits."""

import time

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest

from bojax import gp, inference
from bojax.compilation import count_compilations
from bojax.gp import priors
from bojax.surrogates import GPSurrogate

MEAN = jnp.array([1.0, -2.0, 0.5])
COV = jnp.array([[1.0, 0.8, 0.0], [0.8, 1.0, 0.3], [0.0, 0.3, 2.0]])
PRECISION = jnp.linalg.inv(COV)


def gaussian(z):
    d = z["a"] - MEAN
    return -0.5 * d @ PRECISION @ d


def gamma_in_log_space(z):
    """log-density of z = log(x), x ~ Gamma(3, 2): E[z] = digamma(3) - log 2."""
    return dist.Gamma(3.0, 2.0).log_prob(jnp.exp(z["b"])) + z["b"]


def within_ess_tolerance(draws, expected_mean, expected_sd, ess):
    """|mean error| < 4.5 Monte Carlo standard errors (sd / sqrt(ESS))."""
    error = np.abs(np.mean(draws, axis=0) - expected_mean)
    return np.all(error < 4.5 * expected_sd / np.sqrt(ess))


SAMPLERS = {
    "slice": lambda key, logp, z0: inference.slice_chain(key, logp, z0, 2000, burn_in=200),
    "slice-fixed": lambda key, logp, z0: inference.slice_chain(
        key, logp, z0, 2000, burn_in=200, step_out=False
    ),
    # A reference far from the target (mean 0, sd 3): the likelihood term corrects it.
    "elliptical": lambda key, logp, z0: inference.elliptical_slice_chain(
        key, logp, z0, 3000, mean=0.0, sd=3.0, burn_in=200
    ),
    "nuts": lambda key, logp, z0: inference.nuts_chain(key, logp, z0, 1500, warmup=300),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_sampler_recovers_gaussian_moments(name):
    run = jax.jit(lambda key: SAMPLERS[name](key, gaussian, {"a": jnp.zeros(3)}))
    started = time.perf_counter()
    chain = run(jax.random.key(0))
    draws = np.asarray(chain.positions["a"])
    assert time.perf_counter() - started < 120
    ess = float(chain.diagnostics["ess"])
    assert ess > 100
    assert within_ess_tolerance(draws, MEAN, np.sqrt(np.diag(COV)), ess)
    np.testing.assert_allclose(np.cov(draws.T), COV, atol=8 / np.sqrt(ess))
    assert int(chain.diagnostics["divergences"]) == 0


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_sampler_recovers_a_skewed_target(name):
    from scipy.special import digamma, polygamma

    chain = jax.jit(lambda key: SAMPLERS[name](key, gamma_in_log_space, {"b": jnp.zeros(())}))(
        jax.random.key(1)
    )
    draws = np.asarray(chain.positions["b"])
    mean, sd = digamma(3.0) - np.log(2.0), np.sqrt(polygamma(1, 3.0))
    assert within_ess_tolerance(draws, mean, sd, float(chain.diagnostics["ess"]))
    assert np.std(draws) == pytest.approx(sd, rel=0.15)


def test_slice_chain_continues_from_its_last_position():
    first = inference.slice_chain(jax.random.key(0), gaussian, {"a": jnp.zeros(3)}, 50, burn_in=20)
    np.testing.assert_array_equal(first.last["a"], first.positions["a"][-1])
    assert first.tuning.shape == (3,) and np.all(first.tuning > 0)
    again = inference.slice_chain(
        jax.random.key(0), gaussian, first.last, 50, widths=first.tuning, adapt_widths=False
    )
    assert np.all(np.isfinite(again.positions["a"]))


def test_fixed_brackets_are_the_adapted_widths_after_burn_in_and_save_the_ends():
    """``step_out=False``: burn-in steps out and adapts the widths; every later bracket is
    exactly the adapted width, never expanded; and a call that does not burn in skips
    the two evaluations of each bracket's ends that stepping out costs per coordinate."""
    start = {"a": jnp.zeros(3)}
    algorithm = inference.slice_kernel(gaussian, burn_in=30, step_out=False)
    state, _, infos = inference.run_kernel(
        jax.random.key(0), algorithm, algorithm.init(start), 40, burn_in=30
    )
    widths = np.asarray(infos.bracket_right["a"] - infos.bracket_left["a"])[:, -1]
    assert not np.allclose(state.widths, 1.0)  # adapted from burn-in's stepped-out brackets
    assert np.sum(infos.num_expansions) == 0
    np.testing.assert_allclose(widths, np.broadcast_to(state.widths, widths.shape))

    calls = []

    def counted(z):
        jax.debug.callback(lambda: calls.append(1))
        return gaussian(z)

    counts = {}
    for step_out in (True, False):
        calls.clear()
        chain = inference.slice_chain(
            jax.random.key(2), counted, start, 50, burn_in=30, burn=False, step_out=step_out
        )
        jax.block_until_ready(chain.positions)
        counts[step_out] = len(calls)
    assert counts[False] <= counts[True] - 2 * 3 * 50, counts


def test_elliptical_slice_steps_as_blackjax_does_while_the_cap_is_not_reached():
    """Same key, same draws: the bounded kernel is BlackJAX's elliptical slice step."""
    import blackjax

    mean, sd = jnp.array([0.5, -1.0, 0.0]), jnp.array([1.0, 2.0, 0.7])

    def loglikelihood(z):
        return gaussian(z) + 0.5 * jnp.sum(((z["a"] - mean) / sd) ** 2)

    kernel = blackjax.elliptical_slice(loglikelihood, mean=mean, cov=sd**2)
    state = kernel.init({"a": jnp.zeros(3)})
    for i in range(5):
        key = jax.random.fold_in(jax.random.key(3), i)
        state, _ = kernel.step(key, state)  # step i draws from fold_in(key, i), as ours
    chain = inference.elliptical_slice_chain(
        jax.random.key(3), gaussian, {"a": jnp.zeros(3)}, 5, mean=mean, sd=sd
    )
    np.testing.assert_allclose(chain.positions["a"][-1], state.position["a"], rtol=1e-12)


def test_elliptical_slice_is_bounded_on_a_cliff_and_stays_put():
    """A density that is -inf everywhere but the start: the shrinkage stops at its cap
    and the chain stays where it is instead of looping on."""

    def spike(z):
        return jnp.where(jnp.all(z["a"] == 0.0), 0.0, -jnp.inf)

    chain = inference.elliptical_slice_chain(
        jax.random.key(0), spike, {"a": jnp.zeros(2)}, 20, mean=1.0, sd=1.0, max_shrinkage=30
    )
    np.testing.assert_array_equal(chain.positions["a"], 0.0)
    assert float(chain.diagnostics["acceptance"]) == 0.0
    assert float(chain.diagnostics["evaluations_per_step"]) <= 30


def test_map_finds_the_mode_from_several_starts():
    starts = {"a": 5.0 * jax.random.normal(jax.random.key(0), (4, 3))}
    chain = inference.map_fit(gaussian, starts)
    assert chain.positions["a"].shape == (1, 3)
    np.testing.assert_allclose(chain.positions["a"][0], MEAN, atol=1e-4)


def test_map_tries_only_the_first_count_starts_in_one_program():
    """Two modes, the higher at +2: from starts near -2 and +2, one start finds the lower
    mode and two find the higher; the count is traced, so both calls share a program."""

    def two_modes(z):
        a = z["a"]
        return jnp.logaddexp(-0.5 * (a + 2.0) ** 2 / 0.1, 1.0 - 0.5 * (a - 2.0) ** 2 / 0.1)

    fit = jax.jit(
        lambda count: inference.map_fit(two_modes, {"a": jnp.array([-1.5, 1.5])}, count=count)
    )
    with count_compilations() as counts:
        one, two = fit(1), fit(2)
    assert counts.of("<lambda>") == 1
    assert float(one.positions["a"][0]) == pytest.approx(-2.0, abs=1e-3)
    assert float(two.positions["a"][0]) == pytest.approx(2.0, abs=1e-3)
    assert float(two.diagnostics["log_density"]) > float(one.diagnostics["log_density"])


def test_map_survives_nan_regions_and_keeps_the_finite_optimum():
    """NaN outside |a| < 1 (a failed Cholesky, say): the line search backs off from it,
    and a start inside the NaN region loses instead of poisoning the result."""

    def nan_outside(z):
        return jnp.where(jnp.abs(z["a"]) < 1.0, -0.5 * (z["a"] - 0.9) ** 2 / 0.1, jnp.nan)

    chain = inference.map_fit(nan_outside, {"a": jnp.array([3.0, -0.5, 0.0])})
    assert float(chain.positions["a"][0]) == pytest.approx(0.9, abs=1e-5)
    assert np.isfinite(float(chain.diagnostics["log_density"]))


def test_nan_log_density_is_never_accepted():
    def nan_outside(z):
        return jnp.where(jnp.abs(z["a"]) < 1.0, -0.5 * z["a"] ** 2, jnp.nan)

    chain = inference.slice_chain(jax.random.key(0), nan_outside, {"a": jnp.zeros(())}, 300)
    assert np.all(np.abs(chain.positions["a"]) < 1.0)


def awkward_data(seed):
    """Duplicates, constant outputs, tiny and huge scales: the data BO users actually hit."""
    rng = np.random.default_rng(seed)
    n, d = 10 + seed % 7, 2  # one padding bucket, one dimension: one program per method
    x = rng.uniform(size=(n, d))
    kind = seed % 5
    if kind == 0:
        x[n // 2 :] = x[: n - n // 2]  # exact duplicate inputs
        y = rng.normal(size=n)
    elif kind == 1:
        y = np.full(n, 3.0)  # constant outputs
    elif kind == 2:
        y = 1e-9 * rng.normal(size=n)  # tiny scale
    elif kind == 3:
        y = 1e9 * np.sin(20 * x[:, 0])  # huge scale, rough
    else:
        x[:, 0] = 0.5  # a dimension with no spread
        y = np.cos(5 * x.sum(axis=1))
    return x, y


# NUTS and elliptical slice (19 s and 12 s) run in the slow tier; slice and MAP, the
# engine's defaults, stay in the fast one.
@pytest.mark.parametrize(
    "method",
    [
        "slice",
        pytest.param("elliptical", marks=pytest.mark.slow),
        pytest.param("nuts", marks=pytest.mark.slow),
        "map",
    ],
)
def test_gp_fits_on_awkward_data_are_bounded_and_finite(method):
    """Every kind of awkward data twice (seeds 0-9, two sizes each), unstandardised on
    purpose, each fit under a time limit. Dimension changes nothing the fit sees but
    shapes; a second one would only double the compilations. First and continued fits
    share one program per method (NUTS: when both warm up equally long)."""
    chains = {"elliptical": 8, "map": 1}.get(method, 2)  # several chains where they exist
    surrogate = GPSurrogate(
        method=method,
        num_samples=32,
        chains=chains,
        burn_in=64,
        warmup_later=64,
        map_steps=100,
        map_restarts=3,
        prior="lognormal" if method == "elliptical" else "half-cauchy",
    )
    with count_compilations() as counts:
        fit_all_awkward_data(surrogate)
    assert counts.of("_fit") == 1


def fit_all_awkward_data(surrogate):
    for seed in range(10):
        x, y = awkward_data(seed)
        data = gp.make_data(x, y)
        state = surrogate.init(x.shape[1])
        started = time.perf_counter()
        state = surrogate.fit(jax.random.key(seed), state, data)
        state = surrogate.fit(jax.random.key(seed + 100), state, data)  # continued chain
        mean, var = surrogate.predict(state, x[:3])
        elapsed = time.perf_counter() - started
        assert elapsed < 60, (seed, elapsed)
        assert np.all(np.isfinite(mean)) and np.all(np.isfinite(var)) and np.all(var >= 0), seed
        assert all(np.all(np.isfinite(v)) for v in jax.tree.leaves(state.samples)), seed


def test_default_prior_is_half_cauchy_with_jacobian():
    surrogate = GPSurrogate()
    prior = priors.default_prior(surrogate.model, 2)
    assert isinstance(prior["kernel"]["amplitude"], dist.HalfCauchy)
    assert isinstance(prior["mean"]["value"], dist.Normal)
    z = {
        "kernel": {"amplitude": 0.3, "lengthscales": jnp.array([-1.0, 2.0])},
        "mean": {"value": 0.4},
        "noise": -3.0,
    }
    expected = sum(
        np.log(2 / (np.pi * (1 + np.exp(2 * u)))) + u for u in (0.3, -1.0, 2.0, -3.0)
    ) + dist.Normal(0, 1).log_prob(0.4)
    np.testing.assert_allclose(priors.log_prior_unconstrained(prior, z), expected, rtol=1e-12)
    params = priors.to_constrained(prior, z)
    np.testing.assert_allclose(params["noise"], np.exp(-3.0))
    back = priors.to_unconstrained(prior, params)
    np.testing.assert_allclose(
        back["kernel"]["lengthscales"], z["kernel"]["lengthscales"], rtol=1e-12
    )


def test_a_registered_surrogate_carries_its_own_prior():
    """Any numpyro distribution can replace the Half-Cauchy defaults, through the registry."""
    from bojax import surrogates

    def tight_lengthscales(model, dim):
        prior = priors.default_prior(model, dim)
        prior["kernel"]["lengthscales"] = dist.LogNormal(np.log(0.3), 0.01)
        return prior

    tight = GPSurrogate(num_samples=40, burn_in=40, prior=tight_lengthscales)
    with surrogates.SURROGATES.scoped(tight, "gp-tight"):
        surrogate = surrogates.get_surrogate("gp-tight")
        x, y = awkward_data(4)
        state = surrogate.fit(jax.random.key(0), surrogate.init(x.shape[1]), gp.make_data(x, y))
        np.testing.assert_allclose(state.samples["kernel"]["lengthscales"], 0.3, rtol=0.06)


def test_lognormal_prior_set_is_dimension_scaled_and_gaussian_in_sampler_coordinates():
    from scipy import stats

    model = GPSurrogate().model
    for dim in (2, 12):
        prior = priors.get_prior("lognormal")(model, dim)
        lengthscale = prior["kernel"]["lengthscales"]
        # Hvarfner et al. 2024: log ell ~ N(sqrt 2 + log(d) / 2, sqrt 3).
        reference = stats.lognorm(s=np.sqrt(3), scale=np.exp(np.sqrt(2) + 0.5 * np.log(dim)))
        np.testing.assert_allclose(lengthscale.log_prob(0.7), reference.logpdf(0.7), rtol=1e-12)
        mean, sd = priors.gaussian_reference(
            prior, priors.to_unconstrained(prior, model.init_params(dim))
        )
        np.testing.assert_allclose(mean["kernel"]["lengthscales"], np.sqrt(2) + 0.5 * np.log(dim))
        np.testing.assert_allclose(sd["kernel"]["lengthscales"], np.sqrt(3))
        assert mean["kernel"]["lengthscales"].shape == (dim,)
        np.testing.assert_allclose([mean["noise"], sd["noise"]], [-4.0, 1.0])
    with pytest.raises(bojax_errors().UnknownNameError, match="lognormal"):
        priors.get_prior("log-normal")


def bojax_errors():
    from bojax import errors

    return errors


def test_half_cauchy_reference_matches_its_log_space_moments():
    """Under log, Half-Cauchy(s) is the hyperbolic secant law: mean log s, sd pi / 2."""
    rng = np.random.default_rng(0)
    draws = np.log(np.abs(2.5 * rng.standard_cauchy(400_000)))
    prior = {"a": dist.HalfCauchy(2.5)}
    mean, sd = priors.gaussian_reference(prior, {"a": jnp.zeros(())})
    assert float(mean["a"]) == pytest.approx(np.mean(draws), abs=0.01)
    assert float(sd["a"]) == pytest.approx(np.std(draws), rel=0.01)


def test_many_chains_continue_separately_and_pool_their_draws():
    x, y = awkward_data(7)
    surrogate = GPSurrogate(method="elliptical", chains=4, num_samples=8, thin=2, burn_in=32)
    state = surrogate.init(x.shape[1])
    assert state.widths.shape[0] == 4
    data = gp.make_data(x, (y - y.mean()) / y.std())
    first = surrogate.fit(jax.random.key(0), state, data)
    assert first.samples["noise"].shape == (8,)
    # Draws are chain-major: the last draw of each chain is where it continues from.
    last = priors.to_unconstrained(first.prior, first.samples)
    np.testing.assert_allclose(last["noise"][1::2], first.position["noise"], rtol=1e-12)
    assert len(np.unique(first.position["noise"])) == 4  # the chains went their own ways
    saved = surrogate.pack(first)
    again = surrogate.unpack(x.shape[1], saved)
    np.testing.assert_array_equal(again.position["noise"], first.position["noise"])
    with pytest.raises(ValueError, match="4 chain"):
        GPSurrogate(method="elliptical", chains=4, num_samples=8).unpack(
            x.shape[1], GPSurrogate().pack(GPSurrogate().init(x.shape[1]))
        )


def test_nuts_needs_a_warm_up_and_hmc_takes_a_legacy_key():
    """NUTS adapts afresh every fit, and BlackJAX's window adaptation failed on 0 steps
    at the second fit with a bare TypeError; the HMC chain (the BNN's) flattened a
    legacy uint32 key's data into scalars (review)."""
    with pytest.raises(ValueError, match="warmup_later = 0"):
        GPSurrogate(method="nuts", num_samples=8, burn_in=50, warmup_later=0)
    with pytest.raises(ValueError, match="warmup must be at least 1"):
        inference.nuts_chain(jax.random.key(0), lambda z: -0.5 * jnp.sum(z**2), jnp.zeros(2),
                             4, warmup=0)  # fmt: skip
    GPSurrogate(method="slice", burn_in=0)  # a continuing chain needs no burn-in

    def standard(z, _):
        return -0.5 * jnp.sum(z**2)

    legacy = inference.hmc_gibbs_chain(jax.random.PRNGKey(0), standard, jnp.zeros(2), 10,
                                       burn_in=5, leapfrog_steps=3)  # fmt: skip
    typed = inference.hmc_gibbs_chain(jax.random.key(0), standard, jnp.zeros(2), 10,
                                      burn_in=5, leapfrog_steps=3)  # fmt: skip
    drawn = jax.tree.leaves(legacy.positions)[0]
    assert drawn.shape == jax.tree.leaves(typed.positions)[0].shape == (10, 2)
    assert np.all(np.isfinite(drawn))


def test_chain_counts_are_checked_and_sample_requests_divide_among_chains():
    with pytest.raises(ValueError, match="multiple of chains"):
        GPSurrogate(chains=16, num_samples=10)
    with pytest.raises(ValueError, match="no chains"):
        GPSurrogate(method="map", chains=2, num_samples=2)
    engine = GPSurrogate(chains=16, num_samples=16)
    assert engine.configured(samples=10).chains == 10
    assert (engine.configured(samples=20).chains, engine.configured(samples=20).num_samples) == (
        10,
        20,
    )
    assert engine.configured(samples=128).chains == 16


def test_small_noise_prior_set_matches_scipy_and_is_the_engine_default():
    """Half-Cauchy(1) on amplitude and length-scales, Gamma(1.1, rate 30) on the noise
    variance; the log prior in sampler coordinates adds log|dT/dz| = z for each log."""
    from scipy import stats

    from bojax import surrogates

    model = GPSurrogate().model
    prior = priors.get_prior("small-noise")(model, 3)
    params = {
        "kernel": {"amplitude": 0.8, "lengthscales": np.array([0.1, 0.5, 2.0])},
        "mean": {"value": 0.3},
        "noise": 0.004,
    }
    z = priors.to_unconstrained(prior, jax.tree.map(jnp.asarray, params))
    positive = [0.8, 0.1, 0.5, 2.0]
    reference = (
        sum(stats.halfcauchy.logpdf(v) + np.log(v) for v in positive)
        + stats.gamma.logpdf(0.004, a=1.1, scale=1 / 30) + np.log(0.004)
        + stats.norm.logpdf(0.3)
    )  # fmt: skip
    assert float(priors.log_prior_unconstrained(prior, z)) == pytest.approx(reference, rel=1e-12)
    # The elliptical reference of log(noise): the log-Gamma law's mean and sd.
    draws = np.log(stats.gamma.rvs(a=1.1, scale=1 / 30, size=400_000, random_state=0))
    mean, sd = priors.gaussian_reference(prior, z)
    assert float(mean["noise"]) == pytest.approx(np.mean(draws), abs=0.01)
    assert float(sd["noise"]) == pytest.approx(np.std(draws), rel=0.01)
    assert surrogates.SURROGATES["gp-slice"].prior == "small-noise"
    assert surrogates.SURROGATES["gp-slice-exploration"].prior == "half-cauchy"
