"""The arc kernel (arc-kernel report, eqs. 1-4) against an independent NumPy reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.gaussian_process.kernels import Matern

from bojax import gp
from bojax.gp import kernels, priors
from bojax.spaces import IRRELEVANT, Integer, Real, Space

SPACE = Space(
    [
        Integer("layers", 0, 3),
        Real("lr", 1e-3, 1.0, log=True),
        *[
            p
            for k in (1, 2, 3)
            for p in (
                Integer(f"units{k}", 8, 64, log=True, condition=("layers", ">=", k)),
                Real(f"dropout{k}", 0.0, 0.8, condition=("layers", ">=", k)),
            )
        ],
    ]
)


def eq4_distances(omega, rho, x, y):
    """Per-dimension distances by the three cases of eq. 4 (unit coordinates, u - l = 1)."""
    d = np.empty(len(x))
    for i in range(len(x)):
        rel_x, rel_y = x[i] != IRRELEVANT, y[i] != IRRELEVANT
        if not rel_x and not rel_y:
            d[i] = 0.0
        elif rel_x != rel_y:
            d[i] = omega[i]
        else:
            d[i] = omega[i] * np.sqrt(2.0) * np.sqrt(1.0 - np.cos(np.pi * rho[i] * (x[i] - y[i])))
    return d


def reference_arc_gram(amplitude, omega, rho, x1, x2):
    """a * Matern-5/2(r), r = ||d||, with scikit-learn's Matern evaluated at distance r."""
    r = np.array([[np.linalg.norm(eq4_distances(omega, rho, a, b)) for b in x2] for a in x1])
    matern = Matern(length_scale=1.0, nu=2.5)
    return amplitude * matern(np.zeros((1, 1)), r.reshape(-1, 1)).reshape(r.shape)


def random_params(rng, dim):
    lengthscales = rng.uniform(0.2, 3.0, dim)
    return {
        "amplitude": jnp.asarray(rng.uniform(0.5, 2.0)),
        "lengthscales": jnp.asarray(lengthscales),
        "rho": jnp.asarray(rng.uniform(0.0, 1.0, dim)),
    }


def test_arc_gram_matches_eq4_reference():
    rng = np.random.default_rng(0)
    x1, x2 = SPACE.sample(jax.random.key(0), 15), SPACE.sample(jax.random.key(1), 9)
    assert (x1 == IRRELEVANT).any() and (x1 != IRRELEVANT).any()
    params = random_params(rng, SPACE.dim)
    omega = 1.0 / np.asarray(params["lengthscales"])
    rho = np.asarray(params["rho"])
    got = kernels.gram(kernels.get_kernel("arc"), params, x1, x2)
    want = reference_arc_gram(float(params["amplitude"]), omega, rho, x1, x2)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-14)
    # and the squared distance itself, case by case
    for a in x1[:5]:
        for b in x2[:5]:
            d = eq4_distances(omega, rho, a, b)
            np.testing.assert_allclose(kernels.arc_sq_distance(params, a, b), np.sum(d**2))


def test_eq4_cases_one_dimension_at_a_time():
    params = {"amplitude": 1.0, "lengthscales": jnp.array([0.5]), "rho": jnp.array([0.7])}
    omega = 2.0
    both_off = kernels.arc_sq_distance(params, jnp.array([IRRELEVANT]), jnp.array([IRRELEVANT]))
    one_off = kernels.arc_sq_distance(params, jnp.array([IRRELEVANT]), jnp.array([0.3]))
    both_on = kernels.arc_sq_distance(params, jnp.array([0.1]), jnp.array([0.9]))
    assert float(both_off) == 0.0
    np.testing.assert_allclose(one_off, omega**2, rtol=1e-14)
    np.testing.assert_allclose(both_on, 2 * omega**2 * (1 - np.cos(np.pi * 0.7 * 0.8)), rtol=1e-14)


@pytest.mark.parametrize("name", ["arc", "arc-se"])
def test_desiderata_irrelevant_values_do_not_change_the_covariance(name):
    """Eqs. 1-2: raw points that differ only in values that are irrelevant to them get the
    same covariance with anything, after the space canonicalises them; the relevance-agnostic
    baseline (filled kernel on the raw values) does change, so the test can fail."""
    rng = np.random.default_rng(1)
    raw = rng.uniform(size=(40, SPACE.dim))
    other = raw.copy()
    relevant = SPACE.relevance(raw)
    other[~relevant] = rng.uniform(size=int((~relevant).sum()))  # new irrelevant values only
    assert (~relevant).sum() > 20
    partners = SPACE.sample(jax.random.key(3), 25)
    params = random_params(rng, SPACE.dim)
    kernel = kernels.get_kernel(name)
    k_raw = kernels.gram(kernel, params, SPACE.snap(raw), partners)
    k_other = kernels.gram(kernel, params, SPACE.snap(other), partners)
    np.testing.assert_array_equal(k_raw, k_other)
    # Without the relevance information the raw values leak into the covariance.
    plain = kernels.get_kernel("matern52")
    plain_params = {k: params[k] for k in ("amplitude", "lengthscales")}
    assert not np.allclose(
        kernels.gram(plain, plain_params, raw, partners),
        kernels.gram(plain, plain_params, other, partners),
    )


jitted_gram = jax.jit(kernels.gram, static_argnums=0)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.sampled_from([2, 7, 30]))
def test_arc_gram_is_psd_on_random_conditional_inputs(seed, n):
    rng = np.random.default_rng(seed)
    x = SPACE.sample(jax.random.key(seed), n)
    if n > 3:
        x[1] = x[0]  # a duplicate point: singular but still PSD
    params = random_params(rng, SPACE.dim)
    for name in ("arc", "arc-se", "matern52-filled"):
        kernel = kernels.get_kernel(name)
        p = (
            params
            if name.startswith("arc")
            else {k: params[k] for k in ("amplitude", "lengthscales")}
        )
        k = np.asarray(jitted_gram(kernel, p, x, x))
        np.testing.assert_allclose(k, k.T, rtol=0, atol=1e-14)
        assert np.linalg.eigvalsh(k).min() >= -1e-10 * len(x) * float(params["amplitude"])


def test_arc_gp_has_finite_gradients_and_rho_has_a_unit_interval_prior():
    """Sentinel inputs must not poison gradients (NUTS and MAP differentiate the LML)."""
    model = gp.GP(kernel="arc")
    x = SPACE.sample(jax.random.key(4), 20)
    y = np.sin(np.nan_to_num(x, nan=0).sum(1))
    data = gp.make_data(x, (y - y.mean()) / y.std())
    prior = priors.default_prior(model, SPACE.dim)
    assert prior["kernel"]["rho"].support.upper_bound == 1.0
    z = priors.to_unconstrained(prior, model.init_params(SPACE.dim, noise=0.1))

    def target(z):
        params = priors.to_constrained(prior, z)
        return gp.log_marginal_likelihood(model, params, data) + priors.log_prior_unconstrained(
            prior, z
        )

    value, grads = jax.value_and_grad(target)(z)
    assert np.isfinite(value)
    assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))
    assert float(jnp.abs(grads["kernel"]["rho"]).sum()) > 0
