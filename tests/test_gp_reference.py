"""The GP core against scikit-learn's GaussianProcessRegressor, an independent reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Matern

from bojax import gp

N, D, AMPLITUDE, NOISE = 50, 4, 1.7, 0.05
LENGTHSCALES = np.array([0.5, 0.8, 1.2, 0.3])
SKLEARN_KERNELS = {"se": RBF(LENGTHSCALES), "matern52": Matern(LENGTHSCALES, nu=2.5)}


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(N, D))
    y = np.sin(3 * x).sum(axis=1) + 0.1 * rng.normal(size=N)
    x_star = rng.uniform(-0.2, 1.2, size=(30, D))
    return x, y, x_star


def reference(kernel_name, x, y, x_star):
    kernel = ConstantKernel(AMPLITUDE) * SKLEARN_KERNELS[kernel_name]
    model = GaussianProcessRegressor(kernel, alpha=NOISE, optimizer=None).fit(x, y)
    mean, std = model.predict(x_star, return_std=True)
    return model.log_marginal_likelihood_value_, mean, std**2


def bojax_gp(kernel_name, x, y, x_star, dtype):
    model = gp.GP(kernel=kernel_name, mean="zero")
    params = {
        "kernel": {
            "amplitude": jnp.asarray(AMPLITUDE, dtype),
            "lengthscales": jnp.asarray(LENGTHSCALES, dtype),
        },
        "mean": {},
        "noise": jnp.asarray(NOISE, dtype),
    }
    data = gp.make_data(x, y)
    lml = gp.log_marginal_likelihood(model, params, data)
    mean, var = gp.predict(model, gp.condition(model, params, data), jnp.asarray(x_star, dtype))
    assert lml.dtype == dtype and mean.dtype == dtype
    return float(lml), np.asarray(mean), np.asarray(var)


def relative_error(a, b):
    return np.max(np.abs(np.asarray(a) - b) / np.abs(b))


@pytest.mark.parametrize("kernel_name", ["se", "matern52"])
def test_float64_matches_sklearn(problem, kernel_name):
    ref_lml, ref_mean, ref_var = reference(kernel_name, *problem)
    lml, mean, var = bojax_gp(kernel_name, *problem, jnp.float64)
    assert relative_error(lml, ref_lml) <= 1e-8
    assert relative_error(mean, ref_mean) <= 1e-8
    assert relative_error(var, ref_var) <= 1e-8


@pytest.mark.parametrize("kernel_name", ["se", "matern52"])
def test_float32_matches_sklearn(problem, kernel_name):
    ref_lml, ref_mean, ref_var = reference(kernel_name, *problem)
    with jax.enable_x64(False):
        lml, mean, var = bojax_gp(kernel_name, *problem, jnp.float32)
    assert relative_error(lml, ref_lml) <= 1e-4
    assert relative_error(mean, ref_mean) <= 1e-4
    assert relative_error(var, ref_var) <= 1e-4


def test_constant_mean_equals_shifted_zero_mean(problem):
    """A constant mean c is the zero-mean GP on y - c, shifted back by c."""
    x, y, x_star = problem
    c = 0.7
    kernel = ConstantKernel(AMPLITUDE) * SKLEARN_KERNELS["matern52"]
    ref = GaussianProcessRegressor(kernel, alpha=NOISE, optimizer=None).fit(x, y - c)
    model = gp.GP(kernel="matern52", mean="constant")
    params = model.init_params(D, noise=NOISE)
    params["kernel"] = {
        "amplitude": jnp.asarray(AMPLITUDE),
        "lengthscales": jnp.asarray(LENGTHSCALES),
    }
    params["mean"] = {"value": jnp.asarray(c)}
    data = gp.make_data(x, y)
    mean, _ = gp.predict(model, gp.condition(model, params, data), x_star)
    np.testing.assert_allclose(mean, ref.predict(x_star) + c, rtol=1e-10)
    np.testing.assert_allclose(
        gp.log_marginal_likelihood(model, params, data),
        ref.log_marginal_likelihood_value_,
        rtol=1e-10,
    )


def test_full_covariance_matches_sklearn(problem):
    x, y, x_star = problem
    kernel = ConstantKernel(AMPLITUDE) * SKLEARN_KERNELS["se"]
    ref = GaussianProcessRegressor(kernel, alpha=NOISE, optimizer=None).fit(x, y)
    ref_mean, ref_cov = ref.predict(x_star, return_cov=True)
    model = gp.GP(kernel="se", mean="zero")
    params = {
        "kernel": {"amplitude": jnp.asarray(AMPLITUDE), "lengthscales": jnp.asarray(LENGTHSCALES)},
        "mean": {},
        "noise": jnp.asarray(NOISE),
    }
    post = gp.condition(model, params, gp.make_data(x, y))
    mean, cov = gp.predict_cov(model, post, x_star)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-9)
    np.testing.assert_allclose(cov, ref_cov, rtol=1e-7, atol=1e-12)
    _, var = gp.predict(model, post, x_star)
    np.testing.assert_allclose(np.diag(cov), var, rtol=1e-9, atol=1e-14)
