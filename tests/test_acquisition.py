"""Acquisitions against SciPy, Monte Carlo, quadrature and the asymptotic series of log-EI."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from bojax.bo import acquisition as acq
from bojax.errors import UnknownNameError

RNG = np.random.default_rng(0)
MEAN = RNG.normal(size=(16, 40))
VAR = RNG.uniform(0.01, 2.0, size=(16, 40))
BEST = -0.3


def reference_ei(mean, var, best):
    sd = np.sqrt(var)
    z = (best - mean) / sd
    return sd * (z * norm.cdf(z) + norm.pdf(z))


def test_ei_matches_scipy_and_integrates_by_the_mean():
    per_sample = reference_ei(MEAN, VAR, BEST)
    np.testing.assert_allclose(
        acq.expected_improvement(MEAN, VAR, BEST), per_sample.mean(0), rtol=1e-12
    )
    one = acq.expected_improvement(MEAN[3:4], VAR[3:4], BEST)
    np.testing.assert_allclose(one, per_sample[3], rtol=1e-12)


def test_ei_matches_monte_carlo():
    mean, sd, best = 0.4, 0.7, 0.1
    draws = np.random.default_rng(1).normal(mean, sd, size=2_000_000)
    mc = np.maximum(best - draws, 0).mean()
    value = float(acq.expected_improvement(jnp.array([[mean]]), jnp.array([[sd**2]]), best)[0])
    assert value == pytest.approx(mc, rel=5e-3)


def test_log_ei_is_log_of_integrated_ei_not_mean_of_logs():
    log_ei = acq.log_expected_improvement(MEAN, VAR, BEST)
    np.testing.assert_allclose(log_ei, np.log(reference_ei(MEAN, VAR, BEST).mean(0)), rtol=1e-10)
    mean_of_logs = np.log(reference_ei(MEAN, VAR, BEST)).mean(0)
    assert np.all(log_ei >= mean_of_logs - 1e-12) and np.any(log_ei > mean_of_logs + 1e-3)


def log_h_reference(z):
    """log(phi(z) + z Phi(z)): quadrature of Phi for moderate z, asymptotic series far out."""
    if z > -15:
        value, _ = integrate.quad(norm.cdf, -np.inf, z, epsabs=0, epsrel=1e-13, limit=200)
        return np.log(value)
    # h(z) = phi(z) / z^2 * sum_k (-1)^k (2k+1)!! / z^(2k); 8 terms are exact to 1e-13 here.
    series = sum((-1) ** k * np.prod(np.arange(1, 2 * k + 2, 2)) / z ** (2 * k) for k in range(8))
    return norm.logpdf(z) - 2 * np.log(-z) + np.log(series)


@pytest.mark.parametrize(
    "z", [-1e6, -1e3, -40.0, -20.0, -12.0, -9.0, -5.0, -1.5, -1.0, -0.3, 0.0, 1.0, 6.0]
)
def test_log_ei_is_finite_and_accurate_far_in_the_tail(z):
    value = float(acq.log_expected_improvement(jnp.array([[-z]]), jnp.array([[1.0]]), 0.0)[0])
    assert np.isfinite(value)
    assert value == pytest.approx(log_h_reference(z), rel=1e-9, abs=1e-12)
    grad = jax.grad(lambda m: acq.log_expected_improvement(m, jnp.ones((1, 1)), 0.0)[0])(
        jnp.array([[-z]])
    )
    assert np.all(np.isfinite(grad))


@pytest.mark.parametrize("z", [-1.0, -100.0])  # where log_h changes branch
def test_log_h_has_its_whole_gradient_at_a_branch_boundary(z):
    """d log h / dz = Phi(z) / h(z), continuous across each boundary: ``maximum`` split
    the gradient between the branches at a tie, halving EI's at z = -1 (review BF)."""
    grad = jax.grad(acq.log_h)
    at, eps = float(grad(z)), 1e-6
    sides = (float(grad(z - eps)), float(grad(z + eps)))
    assert at == pytest.approx(np.mean(sides), rel=1e-6)
    if z == -1.0:
        h = norm.pdf(z) + z * norm.cdf(z)
        assert at == pytest.approx(norm.cdf(z) / h, rel=1e-12)
        # EI's gradient with mean 1, sd 1, best 0 (z = -1): -Phi(z).
        d_ei = jax.grad(lambda m: acq.expected_improvement(m, jnp.ones((1, 1)), 0.0)[0])
        assert float(d_ei(jnp.ones((1, 1)))[0, 0]) == pytest.approx(-norm.cdf(z), rel=1e-12)


def test_pi_lcb_and_max_variance():
    sd = np.sqrt(VAR)
    np.testing.assert_allclose(
        acq.probability_of_improvement(MEAN, VAR, BEST),
        norm.cdf((BEST - MEAN) / sd).mean(0),
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        acq.lower_confidence_bound(MEAN, VAR, BEST, kappa=1.5),
        (1.5 * sd - MEAN).mean(0),
        rtol=1e-12,
    )
    np.testing.assert_allclose(acq.max_variance(MEAN, VAR, BEST), sd.mean(0), rtol=1e-12)


def test_zero_variance_gives_deterministic_improvement():
    mean = jnp.array([[-1.0, 0.5]])
    value = acq.expected_improvement(mean, jnp.zeros((1, 2)), 0.0)
    np.testing.assert_allclose(value, [1.0, 0.0])
    assert np.all(np.isfinite(acq.log_expected_improvement(mean, jnp.zeros((1, 2)), 0.0)))


@pytest.mark.parametrize(
    "name", ["ei", "log_ei", "pi", "lcb", "max_variance", "log_ehvi", "parego"]
)
def test_gradients_are_finite_where_a_draw_has_zero_variance(name):
    """Draw 1 is exact at the candidate (a GP conditioned on a noise-free value there, as
    noisy EHVI's sampled fronts are): the gradient through the other draws must stay
    finite. With the variance floored after the square root, 0 x inf made it NaN, which
    the optimiser zeroed, so its starts did not move."""
    mean = jnp.array([[0.2, -0.4], [0.1, -0.5]])  # (S, K): one candidate's two outputs
    var = jnp.array([[0.3, 0.2], [0.0, 0.0]])
    record = acq.get_acquisition(name)
    if record.outputs is None:  # two objectives; one box beyond a front point at (0, 0)
        best = acq.MultiIncumbent(
            lower=jnp.array([[-jnp.inf, -jnp.inf], [0.0, -jnp.inf]]),
            upper=jnp.array([[0.0, 1.0], [1.0, 0.0]]), live=jnp.array([True, True]),
            found=jnp.asarray(True), best=jnp.asarray(0.0), columns=jnp.zeros(0, jnp.int32),
            orient=jnp.zeros(0), bounds=jnp.zeros(0),
        )  # fmt: skip
        args = (mean[:, None], var[:, None])
    else:
        best, args = 0.0, (mean[:, :1], var[:, :1])
    grads = jax.grad(lambda m, v: jnp.sum(record(m, v, best)), argnums=(0, 1))(*args)
    assert all(np.all(np.isfinite(g)) for g in grads), grads


def test_registry():
    assert acq.get_acquisition("ei").fn is acq.expected_improvement
    with pytest.raises(UnknownNameError, match="log_ei"):
        acq.get_acquisition("ucb2")


@pytest.mark.slow
def test_importing_before_enabling_float64_changes_nothing():
    """Module-level constants must not freeze as float32 when bojax is imported first."""
    import subprocess
    import sys

    code = (
        "import bojax, jax; jax.config.update('jax_enable_x64', True)\n"
        "import jax.numpy as jnp\n"
        "from bojax.bo.acquisition import log_expected_improvement as f\n"
        "print(repr(float(f(jnp.array([[0.3]]), jnp.array([[0.7]]), -2.0)[0])))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    here = float(acq.log_expected_improvement(jnp.array([[0.3]]), jnp.array([[0.7]]), -2.0)[0])
    assert float(out.stdout) == here


def test_erfcx_and_its_gradient_match_scipy_on_both_sides_of_the_series_switch():
    from scipy.special import erfcx

    x = np.concatenate([np.linspace(0.0, 40.0, 2001), np.geomspace(40.0, 1e6, 100)])
    np.testing.assert_allclose(acq.erfcx(jnp.asarray(x)), erfcx(x), rtol=1e-14)
    # d/dx erfcx = 2 x erfcx(x) - 2 / sqrt(pi) cancels for large x: compare with central
    # differences of SciPy's erfcx instead (accurate to ~1e-9 relative at this step).
    grad = np.asarray(jax.vmap(jax.grad(acq.erfcx))(jnp.asarray(x)))
    step = 1e-5 * np.maximum(x, 1.0)
    differences = (erfcx(x + step) - erfcx(x - step)) / (2 * step)
    np.testing.assert_allclose(grad, differences, rtol=1e-7, atol=1e-12)
