"""Kernels against independent NumPy/SciPy/scikit-learn formulas, and positive semi-definiteness."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.spatial.distance import cdist
from sklearn.gaussian_process.kernels import Matern

from bojax.errors import UnknownNameError
from bojax.gp import kernels


def reference_gram(name, amplitude, lengthscales, x1, x2):
    """Independent float64 reference built on scipy's cdist."""
    r = cdist(x1 / lengthscales, x2 / lengthscales)
    if name == "se":
        return amplitude * np.exp(-0.5 * r**2)
    nu = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}[name]
    return amplitude * Matern(length_scale=lengthscales, nu=nu)(x1, x2)


STATIONARY = ["se", "matern12", "matern32", "matern52"]


def test_every_registered_kernel_is_tested():
    """The arc kernels are checked in test_arc_kernel.py; a new kernel needs a reference."""
    assert set(kernels.KERNELS) == {*STATIONARY, "arc", "arc-se", "matern52-filled"}


@pytest.mark.parametrize("name", STATIONARY)
def test_gram_matches_reference(name):
    rng = np.random.default_rng(1)
    x1, x2 = rng.normal(size=(12, 3)), rng.normal(size=(7, 3))
    ell, amp = np.array([0.4, 1.3, 2.0]), 0.8
    params = {"amplitude": jnp.asarray(amp), "lengthscales": jnp.asarray(ell)}
    got = kernels.gram(kernels.get_kernel(name), params, x1, x2)
    np.testing.assert_allclose(got, reference_gram(name, amp, ell, x1, x2), rtol=1e-12, atol=1e-15)
    diag = kernels.diagonal(kernels.get_kernel(name), params, x1)
    np.testing.assert_allclose(diag, amp, rtol=1e-14)


def test_matern52_closed_form_at_known_distance():
    """At r = 1: a (1 + sqrt5 + 5/3) exp(-sqrt5), the standard Matern-5/2 (not Wilton's eq. 8)."""
    params = {"amplitude": jnp.asarray(2.0), "lengthscales": jnp.asarray([2.0])}
    value = kernels.matern52(params, jnp.array([0.0]), jnp.array([2.0]))
    expected = 2.0 * (1 + np.sqrt(5) + 5 / 3) * np.exp(-np.sqrt(5))
    np.testing.assert_allclose(value, expected, rtol=1e-14)


def test_sum_and_product_kernels():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(9, 2))
    se, m52 = kernels.get_kernel("se"), kernels.get_kernel("matern52")
    p1 = {"amplitude": jnp.asarray(1.5), "lengthscales": jnp.asarray([0.7, 1.1])}
    p2 = {"amplitude": jnp.asarray(0.3), "lengthscales": jnp.asarray([2.0, 0.4])}
    k1, k2 = kernels.gram(se, p1, x, x), kernels.gram(m52, p2, x, x)
    np.testing.assert_allclose(kernels.gram(se + m52, (p1, p2), x, x), k1 + k2, rtol=1e-14)
    np.testing.assert_allclose(kernels.gram(se * m52, (p1, p2), x, x), k1 * k2, rtol=1e-14)
    # Nested sums flatten, equal combinations are equal and hash alike (one jit compile).
    three = se + m52 + se
    assert (
        len(three.parts) == 3 and three == (se + m52) + se and hash(three) == hash(se + (m52 + se))
    )
    assert (se + m52).init(2)[0]["lengthscales"].shape == (2,)


def test_unknown_kernel_is_a_typed_error():
    with pytest.raises(UnknownNameError, match="matern52"):
        kernels.get_kernel("matern72")


def test_registering_a_kernel_is_one_function_and_one_call():
    def rational_quadratic(params, x, y):
        return params["amplitude"] / (1 + 0.5 * kernels.scaled_sq_distance(params, x, y))

    with kernels.KERNELS.scoped(kernels.Kernel("rq", rational_quadratic)):
        k = kernels.get_kernel("rq")
        value = k(k.init(1), jnp.array([0.0]), jnp.array([2.0]))
        np.testing.assert_allclose(value, 1 / 3, rtol=1e-14)
    assert "rq" not in kernels.KERNELS


points = st.integers(2, 20).flatmap(
    lambda n: st.integers(1, 4).flatmap(
        lambda d: st.tuples(
            arrays(np.float64, (n, d), elements=st.floats(-5, 5)),
            arrays(np.float64, (d,), elements=st.floats(0.05, 10)),
            st.floats(0.01, 100),
        )
    )
)


K = kernels.KERNELS
CASES = {name: (K[name], 1) for name in STATIONARY}
CASES["se + matern12"] = (K["se"] + K["matern12"], 2)
CASES["se * matern32"] = (K["se"] * K["matern32"], 2)


@pytest.mark.parametrize("name", sorted(CASES))
@given(case=points)
def test_gram_is_symmetric_psd(name, case):
    x, ell, amp = case
    kernel, parts = CASES[name]
    # At one padded shape (20, 4): zero columns add nothing to a distance and the padding
    # rows are sliced off, so the block is the d-dimensional Gram and every example
    # reuses one compilation instead of one per (n, d).
    n, d = x.shape
    x_pad = np.zeros((20, 4))
    x_pad[:n, :d] = x
    ell_pad, ell_reversed = np.ones(4), np.ones(4)
    ell_pad[:d], ell_reversed[:d] = ell, ell[::-1]
    one = {"amplitude": jnp.asarray(amp), "lengthscales": jnp.asarray(ell_pad)}
    params = one if parts == 1 else (one, {**one, "lengthscales": jnp.asarray(ell_reversed)})
    k = np.asarray(kernels.gram(kernel, params, x_pad, x_pad))[:n, :n]
    scale = np.abs(np.diag(k)).max()
    np.testing.assert_allclose(k, k.T, rtol=0, atol=1e-12 * scale)
    assert np.linalg.eigvalsh(k).min() >= -1e-9 * scale * len(x)


# -- the learning-curve kernel of freeze-thaw runs -------------------------------------


def curve_points(rng, designs=4, steps=(1, 2, 4, 8, 52), top=52.0):
    """(design, step) rows: ``designs`` random designs in 2 dimensions, each at ``steps``,
    the step as freeze-thaw encodes it (``log t / log top``)."""
    u = rng.random((designs, 2))
    return np.array([[*d, np.log(t) / np.log(top)] for d in u for t in steps])


def curve_params(amplitude=0.7, alpha=1.3, beta=0.4):
    base = kernels.ard_params(3, amplitude=0.9, lengthscale=0.6)
    return {**base, "curve_amplitude": jnp.asarray(amplitude),
            "curve_alpha": jnp.asarray(alpha), "curve_beta": jnp.asarray(beta)}  # fmt: skip


def test_learning_curve_kernel_matches_its_formula():
    """``k_base + [x = x'] c (beta / (t + t' + beta))^alpha`` with ``t = T^tau``, against
    scikit-learn's Matern and the decay written out in NumPy."""
    x = curve_points(np.random.default_rng(0))
    params = curve_params()
    got = kernels.gram(kernels.LearningCurves(K["matern52"], 52.0), params, x, x)
    base = reference_gram("matern52", 0.9, np.full(3, 0.6), x, x)
    s = 52.0 ** x[:, -1]  # the step t
    same = (x[:, None, :-1] == x[None, :, :-1]).all(-1)
    decay = (0.4 / (s[:, None] + s[None, :] + 0.4)) ** 1.3
    np.testing.assert_allclose(got, base + same * 0.7 * decay, rtol=1e-12, atol=1e-15)
    assert np.linalg.eigvalsh(np.asarray(got)).min() > 0
    # Other designs see the base kernel only; c = 0 is the base kernel everywhere.
    other = np.asarray(got)[~same]
    np.testing.assert_allclose(other, base[~same], rtol=1e-12)
    flat = kernels.gram(kernels.LearningCurves(K["matern52"], 52.0), curve_params(0.0), x, x)
    np.testing.assert_allclose(flat, base, rtol=1e-12, atol=1e-15)


def test_learning_curve_kernel_needs_one_parameter_dict():
    with pytest.raises(TypeError, match="one parameter dict"):
        kernels.LearningCurves(K["se"] + K["matern12"], 52.0).init(3)
