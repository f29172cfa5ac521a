"""The conditional deep-net objective: space, padded network, constraints, one compile."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bojax.compilation import count_compilations
from bojax.errors import MissingParameterError
from bojax.objectives import deepnet

SHORT = deepnet.Training(epochs=3)


def point(layers, **extra):
    p = {"layers": layers, "learning_rate": 0.1, "momentum": 0.9}
    for k in range(1, layers + 1):
        p |= {f"units{k}": 64, f"dropout{k}": 0.1, f"max_norm{k}": 3.0, f"decay{k}": 1e-5}
    return p | extra


def test_space_has_23_parameters_six_architectures_and_per_layer_relevance():
    space = deepnet.deepnet_space()
    assert space.dim == 23 and space["layers"].high == 5
    u = space.sample(jax.random.key(0), 300)
    depths = np.array([p["layers"] for p in space.from_unit(u)])
    assert set(depths) == set(range(6))
    relevant = space.relevance(u).sum(axis=1)
    np.testing.assert_array_equal(relevant, 3 + 4 * depths)
    with pytest.raises(MissingParameterError):
        space.validate({**point(1), "layers": 2})  # layer 2's values are now required


def test_absent_layers_pass_the_input_through_and_depth_zero_is_linear():
    config = deepnet.net_config(point(0))
    weights = deepnet.init_weights(jax.random.key(0), config, 128, 64, 10)
    assert not np.any(weights.hidden)  # no layer exists, so no hidden weight is drawn
    x = jax.random.uniform(jax.random.key(1), (5, 128)) * (jnp.arange(128) < 64)
    np.testing.assert_allclose(
        deepnet.forward(weights, config, x), x @ weights.out + weights.out_bias, rtol=1e-6
    )
    # Weights of layers that do not exist cannot change the output.
    two = deepnet.net_config(point(2))
    w2 = deepnet.init_weights(jax.random.key(0), two, 128, 64, 10)
    noisy = w2._replace(
        hidden=w2.hidden.at[2:].set(
            jax.random.normal(jax.random.key(2), (3, 128, 128), jnp.float32)
        )
    )
    np.testing.assert_array_equal(deepnet.forward(w2, two, x), deepnet.forward(noisy, two, x))


def test_units_beyond_a_layers_width_are_masked():
    config = deepnet.net_config(point(2, units1=20, units2=30))
    w = deepnet.init_weights(jax.random.key(0), config, 128, 64, 10)
    assert not np.any(w.hidden[0][:, 20:]) and not np.any(w.hidden[0][64:, :])
    assert not np.any(w.hidden[1][:, 30:]) and not np.any(w.hidden[1][20:, :])
    assert not np.any(w.out[30:]) and np.all(np.any(w.out[:30] != 0, axis=1))


def test_max_norm_projects_each_units_incoming_weights():
    config = deepnet.net_config(point(2, max_norm1=0.5, max_norm2=100.0))
    w = deepnet.init_weights(jax.random.key(0), config, 128, 64, 10)
    projected = deepnet._max_norm(w, config)
    norms = np.linalg.norm(np.asarray(projected.hidden), axis=1)  # (L, H)
    assert norms[0].max() <= 0.5 + 1e-6 and norms[0].max() > 0.49
    np.testing.assert_allclose(projected.hidden[1], w.hidden[1])  # already inside the ball


def test_a_diverged_net_counts_every_example_as_misclassified():
    config = deepnet.net_config(point(1))
    w = deepnet.init_weights(jax.random.key(0), config, 128, 64, 10)
    w = w._replace(out=w.out.at[0, 0].set(jnp.nan))
    x = jnp.ones((7, 64))
    assert int(deepnet.misclassified(w, config, x, jnp.zeros(7, jnp.int32))) == 7


def test_training_learns_and_all_architectures_share_one_compilation():
    objective = deepnet.DeepNetObjective(training=SHORT, seed=0)
    with count_compilations() as counts:
        results = [objective.evaluate(point(k)) for k in (0, 2, 5)]
        again = objective.evaluate(point(2))
    assert counts.of("_train_and_score") == 1
    assert again == results[1]  # deterministic per (seed, point)
    for r in results[:2]:  # chance is 90 % error; three epochs of SGD do far better
        assert r["validation_error"] < 0.3 and r["test_error"] < 0.3
        assert r["log_error"] == pytest.approx(np.log(r["validation_error"]))
    other_seed = deepnet.DeepNetObjective(training=SHORT, seed=1).evaluate(point(2))
    assert other_seed != results[1]


def test_the_step_wise_training_is_evaluates_training_epoch_by_epoch():
    objective = deepnet.DeepNetObjective(training=SHORT, seed=0)
    reports = []
    with count_compilations() as counts:
        final = objective.train(
            point(2), lambda step, value, checkpoint: reports.append((step, value, checkpoint))
        )
    assert counts.of("_train_epoch") == 1  # one program for every epoch
    assert [step for step, _, _ in reports] == [1, 2, 3] and final == reports[-1][1]
    assert final == objective(point(2))  # evaluate's three epochs, bit for bit
    resumed = []
    objective.train(point(2), lambda step, value, checkpoint: resumed.append((step, value)),
                    checkpoint=reports[0][2])  # fmt: skip
    assert resumed == [(step, value) for step, value, _ in reports[1:]]
    # Float32 weights and optimiser state although the suite (as the CLI) turns on x64.
    dtypes = {leaf.dtype for leaf in jax.tree.leaves(reports[-1][2]) if hasattr(leaf, "dtype")}
    assert jnp.dtype("float32") in dtypes and jnp.dtype("float64") not in dtypes, dtypes


def test_digits_split_is_disjoint_and_complete():
    data = deepnet.digits(seed=0)
    sizes = len(data.y_train), len(data.y_valid), len(data.y_test)
    assert sizes == (1000, 400, 397) and data.x_train.shape[1] == 64
    from sklearn.datasets import load_digits

    x, _ = load_digits(return_X_y=True)
    rows = np.concatenate([data.x_train, data.x_valid, data.x_test])
    # The three parts are a permutation of the whole set: nothing lost, nothing shared.
    np.testing.assert_array_equal(
        np.sort(rows.sum(axis=1)), np.sort((x / 16.0).astype(np.float32).sum(axis=1))
    )
    assert 0.0 <= rows.min() and rows.max() <= 1.0
    assert set(np.unique(data.y_valid)) == set(range(10))


def test_mnist1d_is_made_locally_reproducibly_and_leaves_global_random_state_alone():
    legacy = np.random  # the global stream the package seeds (and we restore)
    legacy.seed(123)
    before = legacy.random()
    legacy.seed(123)
    deepnet._mnist1d_package_split.cache_clear()  # the generator runs, not a cached result
    data = deepnet.mnist1d(seed=0)
    assert legacy.random() == before
    # Made once per process; what a caller gets is its own to change.
    first = data.x_valid.copy()
    for array in (data.x_train, data.x_valid, data.x_test, data.y_train):
        array[:] = 0
    data = deepnet.mnist1d(seed=0)
    np.testing.assert_array_equal(data.x_valid, first)
    assert deepnet._mnist1d_package_split.cache_info().hits == 1
    sizes = len(data.y_train), len(data.y_valid), len(data.y_test)
    assert sizes == (3000, 1000, 1000) and data.x_train.shape[1] == 40
    assert set(np.unique(data.y_train)) == set(range(10))
    again, other = deepnet.mnist1d(seed=0), deepnet.mnist1d(seed=1)
    np.testing.assert_array_equal(again.x_valid, data.x_valid)
    np.testing.assert_array_equal(other.x_test, data.x_test)  # the package's test split
    assert not np.array_equal(other.x_valid, data.x_valid)  # another validation draw
    # Train and validation are a split of the package's 4,000 training examples.
    rows = np.concatenate([data.x_train, data.x_valid])
    np.testing.assert_allclose(
        np.sort(rows.sum(axis=1)),
        np.sort(np.concatenate([other.x_train, other.x_valid]).sum(axis=1)),
    )


def test_training_settings_and_a_batch_larger_than_the_data_are_refused():
    """A batch larger than the training set made every epoch drop its only batch: the
    deep-net and mixed-net objectives crashed inside JAX (ZeroDivisionError, TypeError)
    and the architecture objective scored an untrained network as trained (review BW)."""
    from bojax.errors import SettingsError
    from bojax.objectives import archnet, mixednet

    for make in (
        lambda: deepnet.Training(epochs=0),
        lambda: deepnet.Training(batch_size=2.5),
        lambda: mixednet.Training(max_layers=True),
        lambda: archnet.ArchitectureObjective(archnet.moons(0, 20, 20, 20), max_units=0),
    ):
        with pytest.raises(SettingsError, match="must be a positive integer"):
            make()
    data = deepnet.digits()
    too_big = len(data.x_train) + 1
    for make in (
        lambda: deepnet.DeepNetObjective(data, deepnet.Training(batch_size=too_big)),
        lambda: mixednet.MixedNetObjective(data, mixednet.Training(batch_size=too_big)),
        lambda: archnet.ArchitectureObjective(archnet.moons(0, 20, 20, 20), batch_size=21),
    ):
        with pytest.raises(SettingsError, match=r"batch_size \(\d+\) exceeds the \d+ training"):
            make()
    archnet.ArchitectureObjective(archnet.moons(0, 20, 20, 20), batch_size=20)  # one batch
