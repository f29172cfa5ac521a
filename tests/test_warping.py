"""Output warpings: normal scores against SciPy, exact inverses at the data, the loop's
use of them (settings, predictions back in the objective's units)."""

import numpy as np
import pytest
from scipy import stats

import bojax
from bojax.bo import warping
from bojax.errors import SettingsError


def test_rank_warping_is_the_normal_scores_of_the_ranks():
    y = np.array([3.0, 1e6, -2.0, 3.0, 0.5, 40.0])
    warp = warping.fit("rank", y)
    ranks = np.array([3.5, 6, 1, 3.5, 2, 5])  # ties share their average rank
    np.testing.assert_allclose(warp.forward(y), stats.norm.ppf((ranks - 0.5) / 6), rtol=1e-12)
    # Maximising ranks the negated outputs: the largest output gets the lowest score.
    assert np.argmin(warping.fit("rank", y, maximize=True).forward(y)) == 1


@pytest.mark.parametrize("kind", warping.WARPINGS)
@pytest.mark.parametrize("maximize", [False, True])
def test_inverse_takes_warped_values_back_and_is_increasing(kind, maximize):
    y = np.random.default_rng(0).lognormal(size=15) * 10
    warp = warping.fit(kind, y, maximize)
    np.testing.assert_allclose(warp.inverse(warp.forward(y)), y, rtol=1e-10)
    z = np.linspace(-4, 4, 200)  # past both ends of the data's scores too
    values = warp.sign * warp.inverse(z)
    assert np.all(np.diff(values) > 0)
    if kind == "standardise":
        v = warp.sign * y
        np.testing.assert_allclose(warp.forward(y), (v - v.mean()) / v.std(), rtol=1e-12)
        np.testing.assert_allclose(warp.inverse_sd(z, 0.5 + 0 * z), 0.5 * v.std(), rtol=1e-12)


@pytest.mark.parametrize(
    "y, method",
    [
        (np.random.default_rng(1).lognormal(-4, 1.5, size=40), "box-cox"),  # errors near 0
        (np.random.default_rng(2).gamma(2.0, size=30) - 1.0, "yeo-johnson"),  # both signs
    ],
)
def test_power_warping_is_scipys_maximum_likelihood_transform_standardised(y, method):
    warp = warping.fit("power", y)
    assert warp.method == method
    transform = stats.boxcox if method == "box-cox" else stats.yeojohnson
    t, lam = transform(y / warp.unit)  # SciPy's own maximum-likelihood lambda
    assert warp.power == pytest.approx(lam, abs=1e-4)
    np.testing.assert_allclose(warp.forward(y), (t - t.mean()) / t.std(), rtol=1e-6, atol=1e-6)
    # The objective's units drop out, and maximising mirrors minimising.
    np.testing.assert_allclose(warping.fit("power", 1000 * y).forward(1000 * y), warp.forward(y))
    if method == "box-cox":  # values over orders of magnitude: nearly a log
        assert abs(warp.power) < 0.3
        spread = np.diff(warp.forward(np.quantile(y, [0.0, 0.1, 0.9, 1.0])))
        assert spread[0] > 0.3 * spread[2]  # the best tenth is no longer a sliver
        assert warping.fit("power", -y, maximize=True).forward(-y) == pytest.approx(warp.forward(y))


def test_single_and_constant_outputs_keep_a_finite_warping():
    for y in (np.array([2.5]), np.array([4.0, 4.0, 4.0])):
        for kind in warping.WARPINGS:
            warp = warping.fit(kind, y)
            z = warp.forward(y)
            assert np.all(np.isfinite(z)) and np.all(np.isfinite(warp.inverse(z + 1)))
            np.testing.assert_allclose(warp.inverse(z), y)


@pytest.mark.parametrize("unit", [1e-13, 1e-200, 1e12])
def test_warped_values_do_not_depend_on_the_objectives_units(unit):
    """Outputs of 1e-13 units are data, not a constant (an absolute floor of 1e-12 on the
    spread left them unmodelled); the multi-objective columns are standardised alike."""
    from bojax.bo.multiobjective import standardised
    from bojax.bo.settings import Settings

    y = np.array([0.3, 1.7, 0.9, 2.4, 1.1])
    for kind in warping.WARPINGS:
        np.testing.assert_allclose(
            warping.fit(kind, unit * y).forward(unit * y), warping.fit(kind, y).forward(y),
            rtol=1e-6, atol=1e-9,
        )  # fmt: skip
    settings = Settings(objectives=["a:min", "b:max"])
    state = bojax.init(bojax.Space([bojax.Real("x", 0.0, 1.0)]), settings)
    for i, value in enumerate(y):
        state = bojax.tell(state, np.array([i / 5]), {"a": unit * value, "b": 2.0 - value})
    z = standardised(state)[1]
    np.testing.assert_allclose(z[:, 0], z[:, 1], rtol=1e-9)  # b maximised: oriented alike


def test_a_finite_penalty_near_the_largest_float_keeps_a_finite_warping():
    """sys.float_info.max as a diverged training's value is finite: its mean and spread
    must not overflow (every later ask failed on the inf they gave)."""
    import sys

    y = np.array([0.3, sys.float_info.max, 0.1, sys.float_info.max, 0.2])
    for kind in warping.WARPINGS:
        z = warping.fit(kind, y).forward(y)
        assert np.all(np.isfinite(z)) and np.argmax(z) == 1


def test_settings_choose_the_warping_and_reject_unknown_ones():
    with pytest.raises(SettingsError, match="warping"):
        bojax.Settings(warping="log")
    space = bojax.Space([bojax.Real("x", 0, 1)])
    y = np.array([0.1, 5.0, 100.0, 2.0])
    state = bojax.init(space, bojax.Settings(surrogate="gp-map"))
    for k, value in enumerate(y):
        state = bojax.tell(state, np.array([k / 4]), value)
    assert bojax.bo.loop.output_warping(state).kind == "standardise"  # the GP's own
    ranked = state._replace(settings=bojax.Settings(surrogate="gp-map", warping="rank"))
    assert bojax.bo.loop.output_warping(ranked).kind == "rank"
    assert (
        bojax.bo.loop.output_warping(
            ranked._replace(settings=bojax.Settings(surrogate="bnn-hmc"))
        ).kind
        == "rank"
    )
