"""GP core: gradients, the jitter ladder, padding, compilation counts and data validation."""

import itertools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bojax import gp
from bojax.compilation import count_compilations
from bojax.errors import CholeskyError, DataError
from bojax.gp import fantasies, kernels, linalg, means


def random_problem(n=20, d=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=(n, d))
    return x, np.cos(4 * x).sum(axis=1) + 0.05 * rng.normal(size=n)


def test_gradients_match_finite_differences():
    """d log p / d(log hyperparameter) by autodiff vs central differences, every leaf."""
    x, y = random_problem()
    model = gp.GP(kernel="matern52", mean="constant")
    params = {
        "kernel": {"amplitude": 1.3, "lengthscales": np.array([0.3, 0.6, 1.1])},
        "mean": {"value": 0.2},
        "noise": 0.02,
    }
    log_params = jax.tree.map(lambda v: jnp.log(jnp.abs(jnp.asarray(v, jnp.float64))), params)
    data = gp.make_data(x, y)

    def objective(log_p):
        p = jax.tree.map(jnp.exp, log_p)
        p["mean"]["value"] = log_p["mean"]["value"]  # the mean is unconstrained
        return gp.log_marginal_likelihood(model, p, data)

    log_params["mean"]["value"] = jnp.asarray(0.2)
    grads = jax.grad(objective)(log_params)
    leaves, tree = jax.tree.flatten(log_params)
    grad_leaves = jax.tree.leaves(grads)
    h = 1e-6
    for i, leaf in enumerate(leaves):
        for j in np.ndindex(leaf.shape):
            step = np.zeros(leaf.shape)
            step[j] = h
            up = [v + step if k == i else v for k, v in enumerate(leaves)]
            down = [v - step if k == i else v for k, v in enumerate(leaves)]
            fd = (
                objective(jax.tree.unflatten(tree, up)) - objective(jax.tree.unflatten(tree, down))
            ) / (2 * h)
            np.testing.assert_allclose(grad_leaves[i][j], fd, rtol=1e-6, atol=1e-8)


def test_gradient_through_a_jittered_factor_matches_finite_differences():
    """When a rung > 0 is used, the gradient is that of chol(A + c s(A) I), s the mean diagonal."""
    x = np.repeat(np.linspace(0, 1, 6)[:, None], 2, axis=0)  # every input twice
    ladder = (0.0, 1e-6, 1e-3)

    def logdet(lengthscale):
        params = {"amplitude": 1.0, "lengthscales": jnp.array([lengthscale])}
        k = jax.vmap(jax.vmap(kernels.get_kernel("se"), (None, None, 0)), (None, 0, None))(
            params, x, x
        )
        result = linalg.jittered_cholesky(k, ladder=ladder)
        return 2 * jnp.sum(jnp.log(jnp.diag(result.factor))), result.jitter

    value, jitter = logdet(0.5)
    assert jitter > 0 and np.isfinite(value)
    grad = jax.grad(lambda ell: logdet(ell)[0])(0.5)
    fd = (logdet(0.5 + 1e-6)[0] - logdet(0.5 - 1e-6)[0]) / 2e-6
    np.testing.assert_allclose(grad, fd, rtol=1e-5)


@pytest.mark.parametrize("noise", [0.0, 1e-16, 1e-14, 1e-10])
def test_duplicate_inputs_with_tiny_noise_are_finite_and_report_jitter(noise):
    x, y = random_problem(n=12)
    x = np.concatenate([x, x[:6]])
    y = np.concatenate([y, y[:6] + 1e-3])
    model = gp.GP(kernel="se", mean="zero")
    params = model.init_params(3, noise=noise)
    params["kernel"]["lengthscales"] = jnp.full(3, 2.0)
    data = gp.make_data(x, y)
    post = gp.condition(model, params, data)
    assert bool(post.ok)
    # Below the rounding level n eps s (about 4e-15 here) the noise cannot keep K positive
    # definite, so the ladder must add jitter; above it the factor is trustworthy as is.
    assert (post.jitter > 0) == (noise < 1e-15)
    lml = gp.log_marginal_likelihood(model, params, data)
    mean, var = gp.predict(model, post, x)
    assert np.isfinite(lml) and np.all(np.isfinite(mean)) and np.all(np.isfinite(var))
    grads = jax.grad(gp.log_marginal_likelihood, argnums=1)(model, params, data)
    assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))


def test_exhausted_ladder_gives_minus_inf_inside_and_typed_error_outside():
    x, y = random_problem(n=5)
    model = gp.GP(kernel="se", mean="zero")
    params = model.init_params(3)
    params["noise"] = jnp.asarray(-10.0)  # K - 10 I is negative definite: no jitter helps
    data = gp.make_data(x, y)
    assert gp.log_marginal_likelihood(model, params, data) == -np.inf
    grads = jax.grad(gp.log_marginal_likelihood, argnums=1)(model, params, data)
    assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))
    with pytest.raises(CholeskyError, match="ladder"):
        gp.condition(model, params, data)
    with pytest.raises(np.linalg.LinAlgError):
        linalg.cholesky(jnp.array([[1.0, 0.0], [0.0, jnp.nan]]))


def test_ladder_takes_the_first_rung_that_works():
    a = jnp.ones((3, 3))  # rank one
    result = linalg.cholesky(a, ladder=(0.0, 1e-12, 1e-6))
    assert 0 < result.jitter <= 1e-6 and bool(result.ok)
    np.testing.assert_allclose(
        result.factor @ result.factor.T, a + result.jitter * np.eye(3), atol=1e-12
    )
    assert linalg.cholesky(jnp.eye(3) * 4.0).jitter == 0.0


def test_ladder_under_vmap_handles_each_matrix_separately():
    batch = jnp.stack([jnp.eye(2), jnp.ones((2, 2)), -jnp.eye(2)])
    result = jax.vmap(linalg.jittered_cholesky)(batch)
    assert result.ok.tolist() == [True, True, False]
    assert result.jitter[0] == 0 and result.jitter[1] > 0


@pytest.mark.parametrize("kernel", ["se", "matern52"])
@pytest.mark.parametrize("mean", ["zero", "constant", "exploration"])
def test_padded_and_unpadded_agree(kernel, mean):
    x, y = random_problem(n=13)
    model = gp.GP(kernel=kernel, mean=mean)
    params = model.init_params(3, noise=1e-2)
    x_star = np.random.default_rng(5).uniform(size=(7, 3))
    exact = gp.make_data(x, y, size=13)
    padded = gp.make_data(x, y, size=64)
    assert padded.x.shape == (64, 3) and int(padded.mask.sum()) == 13
    lml_exact = gp.log_marginal_likelihood(model, params, exact)
    np.testing.assert_allclose(
        gp.log_marginal_likelihood(model, params, padded), lml_exact, rtol=1e-10
    )
    for predict in (gp.predict, gp.predict_cov):
        a = predict(model, gp.condition(model, params, exact), x_star)
        b = predict(model, gp.condition(model, params, padded), x_star)
        for u, v in zip(a, b, strict=True):
            np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("mean", ["zero", "constant", "exploration"])
def test_extending_the_factor_equals_refactorising(mean):
    """Padding rows sit between the old and the new block; the predictions, the factor's
    product and alpha equal those of conditioning on all the data from scratch."""
    x, y = random_problem(n=19)
    model = gp.GP(kernel="matern52", mean=mean)
    params = model.init_params(3, noise=1e-2)
    old = gp.posterior(model, params, gp.make_data(x[:13], y[:13]))  # 13 rows padded to 16
    new = gp.make_data(x[13:], y[13:], size=8)
    extended = gp.extend(model, old, new)
    assert bool(extended.ok) and extended.factor.shape == (24, 24)
    again = gp.posterior(model, params, gp.make_data(x, y))
    x_star = np.random.default_rng(5).uniform(size=(7, 3))
    for a, b in zip(
        gp.predict_cov(model, extended, x_star), gp.predict_cov(model, again, x_star), strict=True
    ):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        gp.log_marginal_likelihood(model, params, extended.data),
        gp.log_marginal_likelihood(model, params, again.data),
        rtol=1e-12,
    )
    # A NumPy reference of K^{-1} (y - m) on the 19 real rows.
    live = np.asarray(extended.data.mask)
    gram = np.asarray(extended.factor @ extended.factor.T)[np.ix_(live, live)]
    k = np.asarray(gp.kernels.gram(model.kernel, params["kernel"], x, x)) + 1e-2 * np.eye(19)
    np.testing.assert_allclose(gram, k, rtol=1e-10, atol=1e-12)
    residual = y - np.asarray(jax.vmap(lambda p: model.mean(params["mean"], p, again.data))(x))
    np.testing.assert_allclose(
        np.asarray(extended.alpha)[live], np.linalg.solve(k, residual), rtol=1e-8
    )


def test_an_extension_that_needs_jitter_reports_it():
    """The same new point twice without noise: the new block climbs the ladder."""
    x, y = random_problem(n=12)
    model = gp.GP()
    params = model.init_params(3, noise=0.0)
    old = gp.posterior(model, params, gp.make_data(x[:10], y[:10]))
    assert float(old.jitter) == 0
    extended = gp.extend(model, old, gp.make_data(x[[10, 10]], y[[10, 10]], size=8))
    assert bool(extended.ok) and float(extended.jitter) > 0
    assert np.all(np.isfinite(gp.predict(model, extended, x)[0]))


def test_noise_free_draws_at_observed_points_stay_on_the_data():
    """ZDT1's f1 (= x1, standardised) as a multi-objective run fitted it at n = 16:
    amplitude 5537, length-scales 1e2-1e6, noise 1.5e-11. The latent posterior at observed
    points is about 1e-11 wide, a difference of terms the size of the amplitude, and two
    of the four front points share x1 = 0. Noise-free draws there (noisy EHVI's sampled
    fronts) must stay on the data up to the ladder's jitter; when the new block's pivots
    were judged against its own tiny diagonal, rounding passed as signal and draws landed
    3.7 away."""
    x = np.array(
        [[0.0793, 0.3778, 0.7845, 0.0456], [0.5326, 0.8398, 0.0175, 0.5134],
         [0.7511, 0.144, 0.6659, 0.4012], [0.3607, 0.5725, 0.4017, 0.9314],
         [0.443, 0.1081, 0.1341, 0.8681], [0.9277, 0.6792, 0.9334, 0.3398],
         [0.646, 0.3741, 0.2538, 0.6998], [0.2244, 0.9124, 0.5483, 0.234],
         [0.1283, 0.2158, 0.3295, 0.3039], [0.7374, 0.5057, 0.5974, 0.7697],
         [0.0, 0.0, 0.4962, 0.5344], [0.7679, 0.2027, 0.0, 0.3635], [1.0, 0.0, 0.0, 0.0],
         [0.0, 0.0, 0.0, 0.0], [0.6219, 0.0, 0.0, 0.0], [0.0007, 0.4365, 0.0004, 0.0383]]
    )  # fmt: skip
    y = np.array([-1.1132, 0.2433, 0.8971, -0.2713, -0.0248, 1.4258, 0.5828, -0.679, -0.9668,
                  0.8561, -1.3506, 0.9474, 1.6421, -1.3506, 0.5104, -1.3485])  # fmt: skip
    model = gp.GP(mean="constant")
    params = {
        "kernel": {"amplitude": jnp.asarray(5537.0),
                   "lengthscales": jnp.asarray([127.9, 2.55e5, 3.12e6, 2.66e4])},
        "mean": {"value": jnp.asarray(-0.7644)},
        "noise": jnp.asarray(1.5e-11),
    }  # fmt: skip
    post = gp.posterior(model, params, gp.make_data(x, y))
    batch = jax.tree.map(lambda a: a[None], post)
    at = x[[10, 12, 13, 14]]  # the front
    _, outcomes = fantasies.sample_latent(
        model, 64, jax.random.key(0), batch, fantasies.pending_data(at)
    )
    mean, var = gp.predict(model, post, at)
    assert float(np.max(var)) < 1e-8
    np.testing.assert_allclose(np.asarray(outcomes)[:, :4], np.broadcast_to(mean, (64, 4)),
                               atol=1e-2)  # fmt: skip


@partial(jax.jit, static_argnums=0)
def lml_and_grad(model, params, data):
    return jax.value_and_grad(gp.log_marginal_likelihood, argnums=1)(model, params, data)


def test_growing_data_compiles_once_per_bucket():
    """Adding observations one at a time from 10 to 40 must not recompile every iteration."""
    x, y = random_problem(n=40, d=4)
    model = gp.GP()
    params = model.init_params(4)
    x_star = np.random.default_rng(1).uniform(size=(100, 4))
    buckets = {gp.bucket_size(n) for n in range(10, 41)}
    assert buckets == {16, 32, 48}

    def grow():
        for n in range(10, 41):
            data = gp.make_data(x[:n], y[:n])
            gp.log_marginal_likelihood(model, params, data)
            lml_and_grad(model, params, data)
            gp.predict(model, gp.posterior(model, params, data), x_star)

    with count_compilations() as first:
        grow()
    for name in ("log_marginal_likelihood", "lml_and_grad", "posterior", "predict"):
        assert 1 <= first.of(name) <= len(buckets), first
    with count_compilations() as second:  # same buckets again: everything is cached
        grow()
    assert second.total == 0, second


def test_exploration_mean_is_eq7_and_ignores_padding():
    y = np.array([3.0, 1.0, 2.0, 6.0])
    data = gp.make_data(np.zeros((4, 1)), y, size=16)
    value = means.get_mean("exploration")({}, jnp.zeros(1), data)
    assert value == pytest.approx(1.0 + 0.5 * (3.0 - 1.0))


def test_bucket_sizes():
    sizes = [gp.bucket_size(n) for n in (1, 16, 17, 33, 64, 65, 200, 256, 257)]
    assert sizes == [16, 16, 32, 48, 64, 80, 208, 256, 320]
    assert all(gp.bucket_size(n) - n < 16 for n in range(17, 257))
    # A bucket is its own bucket (the smallest holding one), so padding padded data twice
    # changes nothing: 1344 once went to 1472.
    assert all(gp.bucket_size(gp.bucket_size(n)) == gp.bucket_size(n) for n in range(1, 20_000))


def test_batch_buckets_are_wide_enough_to_skip_every_other_batch():
    """A run adding ``batch`` points at a time meets a new bucket at most every other
    step (else each batch compiles its fit anew); batches up to 8 keep the usual sizes."""
    for batch in (1, 2, 8):
        assert all(gp.bucket_size(n, batch=batch) == gp.bucket_size(n) for n in range(1, 2000))
    for batch in (9, 16, 17, 32, 64):
        steps = range(8, 1024 - batch, batch)
        sizes = [gp.bucket_size(n, batch=batch) for n in steps]
        assert all(size >= n for size, n in zip(sizes, steps, strict=True))
        changes = sum(a != b for a, b in itertools.pairwise(sizes))
        assert changes <= len(sizes) // 2, (batch, sizes)
    assert all(
        gp.bucket_size(gp.bucket_size(n, batch=q), batch=q) == gp.bucket_size(n, batch=q)
        for q in (9, 16, 100, 600)
        for n in range(1, 3000)
    )


def test_pending_rows_pad_for_the_room_a_batch_reaches():
    pending = np.random.default_rng(0).uniform(size=(15, 3))
    sizes = {fantasies.pending_data(pending[:p], room=15).x.shape[0] for p in range(1, 16)}
    assert sizes == {fantasies.pending_data(pending).x.shape[0]}
    padded = fantasies.pending_data(pending[:2], room=15)
    assert padded.mask.sum() == 2 and np.array_equal(padded.x[:2], pending[:2])
    assert fantasies.pending_data(pending[:3]).x.shape[0] == 8  # without room: unchanged


@pytest.mark.parametrize(
    "x, y, message",
    [
        (np.zeros((0, 2)), np.zeros(0), "no observations"),
        (np.zeros((3, 2)), np.zeros(2), "rows"),
        (np.zeros((3, 2, 1)), np.zeros(3), "shape"),
        (np.zeros((3, 2)), np.array([0.0, np.nan, 1.0]), "NaN"),
        (np.array([[0.0], [np.inf]]), np.zeros(2), "NaN"),
    ],
)
def test_bad_data_is_a_typed_error(x, y, message):
    with pytest.raises(DataError, match=message):
        gp.make_data(x, y)


def test_constant_outputs_give_finite_posterior():
    x, _ = random_problem(n=8)
    model = gp.GP(mean="exploration")
    params = model.init_params(3)
    data = gp.make_data(x, np.full(8, 4.2))
    mean, var = gp.predict(model, gp.condition(model, params, data), x)
    np.testing.assert_allclose(mean, 4.2, rtol=1e-12)
    assert np.all(np.isfinite(var))
