"""The sampler family: every registered sampler meets a Gaussian's moments within a time
bound, and a user's sampler registered for a block is the one a run uses."""

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bojax
from bojax import gp
from bojax.inference import SAMPLERS, Chain, SamplerRecord, effective_sample_size, slice_chain
from bojax.objectives.problems import get_problem
from bojax.surrogates import SURROGATES, GPSurrogate

jax.config.update("jax_enable_x64", True)

MU = np.array([1.0, -2.0, 0.5])
SD = np.array([0.5, 2.0, 1.0])


def gaussian(z):
    return -0.5 * jnp.sum(((z["a"] - MU) / SD) ** 2)


def schedule(burn_in, thin=1):
    # A reference Gaussian wider than the target and off its mean, as a prior would be.
    reference = (jnp.zeros(3), jnp.full(3, 3.0))
    return dict(burn_in=burn_in, thin=thin, burn=True, tuning=jnp.ones(3), reference=reference)


def check_moments(positions, ess):
    draws = np.asarray(positions["a"]).reshape(-1, 3)
    assert ess > 100
    se = SD / np.sqrt(ess)
    assert np.all(np.abs(draws.mean(0) - MU) < 5 * se), (draws.mean(0), MU, se)
    assert np.all(np.abs(draws.std(0) / SD - 1) < 0.2), draws.std(0)


@pytest.mark.parametrize("name", SAMPLERS.names())
@pytest.mark.slow
def test_every_registered_sampler_meets_a_gaussian(name):
    """Draws: mean within 5 standard errors (by the chain's own ESS) and sd within 20 %
    of N(MU, diag(SD^2)), from a start away from it, in bounded time. Points: one point
    (S = 1); MAP at the mode, a fixed record at its given start."""
    record = SAMPLERS[name]
    started = time.perf_counter()
    if record.point:
        starts = {"a": jnp.array([[3.0, 3.0, 3.0], [-1.0, 0.0, 1.0]])}
        run = jax.jit(lambda key: record.run(key, gaussian, starts, count=2, steps=100))
        chain = run(jax.random.key(0))
        point = np.asarray(chain.positions["a"])
        assert point.shape == (1, 3)
        expected = MU if record.moves else np.asarray(starts["a"][0])
        np.testing.assert_allclose(point[0], expected, atol=1e-4)
    else:
        start = {"a": jnp.array([3.0, 3.0, 3.0])}
        run = jax.jit(
            lambda key: record.run(key, gaussian, start, 1000, **schedule(burn_in=300, thin=2))
        )
        chain = run(jax.random.key(1))
        assert np.asarray(chain.positions["a"]).shape == (1000, 3)
        check_moments(chain.positions, float(effective_sample_size(chain.positions)))
        assert 0.0 < float(chain.diagnostics["acceptance"]) <= 1.0
        if record.population is not None:
            starts = {"a": jnp.tile(start["a"], (8, 1)) + jnp.arange(8.0)[:, None] / 8}
            population = jax.jit(
                lambda key: record.population(
                    key, gaussian, starts, 250, **schedule(burn_in=300, thin=2)
                )
            )
            chains = population(jax.random.key(2))
            assert np.asarray(chains.positions["a"]).shape == (8, 250, 3)
            check_moments(chains.positions, float(effective_sample_size(chains.positions, True)))
    assert time.perf_counter() - started < 60  # bounded: a fixed number of steps


@pytest.mark.slow
def test_a_scoped_user_sampler_is_used_by_minimize():
    """A sampler registered for a block only (here slice sampling that reports a marker
    acceptance) is what a GP naming it runs inside ``bojax.minimize``; outside the block
    the name is gone again."""
    traced = []

    def marked_slice(key, logdensity_fn, position, num_samples, *, burn_in, thin, burn, tuning,
                     reference):  # fmt: skip
        traced.append(num_samples)
        chain = slice_chain(
            key, logdensity_fn, position, num_samples, burn_in=burn_in, thin=thin,
            widths=tuning, burn=burn,
        )  # fmt: skip
        return chain._replace(diagnostics={**chain.diagnostics, "acceptance": jnp.asarray(0.25)})

    forrester = get_problem("forrester")
    with SAMPLERS.scoped(SamplerRecord("marked-slice", marked_slice)):
        surrogate = GPSurrogate(method="marked-slice", num_samples=4, burn_in=16)
        with SURROGATES.scoped(surrogate, "gp-marked-slice"):
            result = bojax.minimize(
                forrester, forrester.space, surrogate="gp-marked-slice", initial=3,
                iterations=2, num_candidates=64, progress=False,
            )  # fmt: skip
    assert traced and set(traced) == {4}
    fits = [r["diagnostics"] for r in result.history if r["phase"] == "bo"]
    assert len(fits) == 2 and all(d["acceptance"] == 0.25 for d in fits)
    assert "marked-slice" not in SAMPLERS
    with pytest.raises(LookupError):
        GPSurrogate(method="marked-slice")


def test_a_gps_chains_start_apart_on_every_hyperparameter_separately():
    """On the first fit, chains after the first start a random step from the default,
    a step of its own per hyperparameter: one key gave amplitude, noise and the mean the
    same offsets, so the chains started on one line (review). A sampler that stays at
    its start shows the starts."""

    def standing(key, logdensity_fn, position, num_samples, *, burn_in, thin, burn, tuning,
                 reference):  # fmt: skip
        positions = jax.tree.map(lambda a: jnp.repeat(a[None], num_samples, 0), position)
        return Chain(positions, tuning, {"acceptance": jnp.asarray(1.0), "divergences": 0})

    x = np.random.default_rng(0).uniform(size=(6, 2))
    data = gp.make_data(x, np.sin(6 * x).sum(axis=1))
    with SAMPLERS.scoped(SamplerRecord("standing", standing)):
        surrogate = GPSurrogate(method="standing", chains=4, num_samples=4, burn_in=1)
        fitted = surrogate.fit(jax.random.key(0), surrogate.init(2), data)
    offsets = {
        jax.tree_util.keystr(path): np.ravel(np.asarray(leaf)[1:] - np.asarray(leaf)[:1])
        for path, leaf in jax.tree_util.tree_flatten_with_path(fitted.position)[0]
    }
    scalars = [o for o in offsets.values() if o.size == 3]
    assert len(scalars) >= 2 and all(np.all(o != 0) for o in scalars), offsets
    assert len({tuple(np.round(o, 12)) for o in scalars}) == len(scalars), offsets


def test_records_say_what_callers_must_know():
    """What the GP and the BNN read off the records of the built-in samplers."""
    assert {"slice", "elliptical", "nuts", "hmc-gibbs", "map", "fixed"} <= set(SAMPLERS)
    gradients = {name for name in SAMPLERS if SAMPLERS[name].gradients}
    assert {"nuts", "hmc-gibbs", "map"} <= gradients and not {"slice", "elliptical"} & gradients
    assert {name for name in SAMPLERS if SAMPLERS[name].point} >= {"map", "fixed"}
    assert not SAMPLERS["nuts"].continues and SAMPLERS["slice"].continues
    assert GPSurrogate(method="map").samples_per_fit == 1
    with pytest.raises(ValueError, match="no chains"):
        GPSurrogate(method="map", chains=2, num_samples=2)
