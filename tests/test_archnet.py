"""Architecture vectors and the sigmoid network (architecture-search report): the n_l = 0
encoding, the padded forward pass, gradients against finite differences and the report's
hand-derived back-propagation, one compilation per BO run."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bojax.compilation import count_compilations
from bojax.objectives import archnet
from bojax.objectives.archnet import (
    ArchitectureObjective,
    architecture_space,
    cost,
    forward,
    hidden_layers,
    init_net,
    moons,
    shape_of,
)
from bojax.reports.architecture_search import bayesian_linear_regression


def design(n1, n2, n3, n4, epochs=60, learning_rate=1.0):
    return {
        "n1": n1,
        "n2": n2,
        "n3": n3,
        "n4": n4,
        "epochs": epochs,
        "learning_rate": learning_rate,
    }


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def test_zero_units_mean_no_layer_and_later_layers_still_exist():
    assert hidden_layers(design(5, 0, 3, 0)) == (5, 3)
    assert hidden_layers(design(0, 0, 0, 0)) == ()
    assert hidden_layers(design(0, 7, 0, 2)) == (7, 2)


def test_every_coordinate_is_scaled_to_the_unit_cube_and_rounded_at_evaluation():
    space = architecture_space(max_layers=4, max_units=20, epochs=(50, 500))
    assert space.dim == 6
    lowest = space.to_unit(design(0, 0, 0, 0, epochs=50, learning_rate=0.05))
    highest = space.to_unit(design(20, 20, 20, 20, epochs=500, learning_rate=5.0))
    assert np.all((lowest >= 0) & (lowest < 0.05)) and np.all((highest > 0.95) & (highest <= 1))
    point = space.from_unit(np.array([0.02, 0.5, 0.999, 0.3, 0.5, 0.5]))
    assert point["n1"] == 0 and point["n3"] == 20 and isinstance(point["epochs"], int)
    assert hidden_layers(point) == (10, 20, 6)


def test_padded_network_with_absent_layers_is_the_compact_network():
    """[5, 0, 3, 0] padded to 4 x 8 computes exactly the 2-5-3-2 sigmoid network."""
    net = init_net(jax.random.key(0), 4, 8)
    net = jax.tree.map(lambda a: a.astype(jnp.float64), net)
    hidden = hidden_layers(design(5, 0, 3, 0))
    x = np.random.default_rng(0).uniform(size=(7, 2))
    padded = np.asarray(forward(net, shape_of(hidden, 4, 8), jnp.asarray(x)))
    w, b = np.asarray(net.hidden_w), np.asarray(net.hidden_b)
    a1 = sigmoid(x @ w[0][:2, :5] + b[0][:5])
    a2 = sigmoid(a1 @ w[1][:5, :3] + b[1][:3])
    out = sigmoid(a2 @ np.asarray(net.out_w)[:3] + np.asarray(net.out_b))
    np.testing.assert_allclose(padded, out, rtol=1e-12)


def test_shape_errors():
    with pytest.raises(ValueError):
        shape_of((5, 30), 4, 20)
    with pytest.raises(ValueError):
        shape_of((1, 1, 1, 1, 1), 4, 20)


def backprop_reference(net, hidden, x, y):
    """The report's eqs. 11-14 for one example, in NumPy: delta^L = a(1-a)(a-y),
    delta^l = a(1-a) W^T delta^{l+1}, dC/db = delta, dC/dW = delta a_prev^T."""
    ws = [np.asarray(net.hidden_w)[l][: ([2, *hidden])[l], :n] for l, n in enumerate(hidden)]
    bs = [np.asarray(net.hidden_b)[l][:n] for l, n in enumerate(hidden)]
    ws.append(np.asarray(net.out_w)[: hidden[-1]])
    bs.append(np.asarray(net.out_b))
    acts = [x]
    for w, b in zip(ws, bs, strict=True):
        acts.append(sigmoid(acts[-1] @ w + b))
    delta = acts[-1] * (1 - acts[-1]) * (acts[-1] - y)
    grads_w, grads_b = [None] * len(ws), [None] * len(ws)
    for l in reversed(range(len(ws))):
        grads_w[l], grads_b[l] = np.outer(acts[l], delta), delta
        if l:
            delta = acts[l] * (1 - acts[l]) * (ws[l] @ delta)
    return grads_w, grads_b


def test_gradients_match_finite_differences_and_the_reports_backpropagation():
    hidden = (4, 3)
    net = init_net(jax.random.key(1), 2, 4)
    net = jax.tree.map(lambda a: a.astype(jnp.float64), net)
    shape = shape_of(hidden, 2, 4)
    x = np.array([[0.3, 0.8]])
    y = np.array([[0.0, 1.0]])
    grads = jax.grad(cost)(net, shape, jnp.asarray(x), jnp.asarray(y))

    ref_w, ref_b = backprop_reference(net, hidden, x[0], y[0])
    np.testing.assert_allclose(np.asarray(grads.hidden_w)[0][:2, :4], ref_w[0], rtol=1e-10)
    np.testing.assert_allclose(np.asarray(grads.hidden_w)[1][:4, :3], ref_w[1], rtol=1e-10)
    np.testing.assert_allclose(np.asarray(grads.out_w)[:3], ref_w[2], rtol=1e-10)
    np.testing.assert_allclose(np.asarray(grads.hidden_b)[1][:3], ref_b[1], rtol=1e-10)
    np.testing.assert_allclose(np.asarray(grads.out_b), ref_b[2], rtol=1e-10)

    flat, unravel = jax.flatten_util.ravel_pytree(net)
    gflat = jax.flatten_util.ravel_pytree(grads)[0]

    def c(v):
        return float(cost(unravel(v), shape, jnp.asarray(x), jnp.asarray(y)))

    rng = np.random.default_rng(0)
    for i in rng.choice(flat.size, 25, replace=False):
        step = np.zeros(flat.size)
        step[i] = 1e-6
        numeric = (c(flat + step) - c(flat - step)) / 2e-6
        assert gflat[i] == pytest.approx(numeric, rel=1e-5, abs=1e-10)


def test_objective_trains_compiles_once_and_is_deterministic():
    data = moons(0, 120, 100, 100)
    objective = ArchitectureObjective(data, max_layers=4, max_units=8, batch_size=10)
    designs = [design(8, 0, 4, 0, 80, 2.0), design(0, 0, 0, 0, 30, 0.5), design(3, 3, 3, 3)]
    with count_compilations() as counts:
        results = [objective.evaluate(d) for d in designs]
        again = objective.evaluate(designs[0])
    assert counts.of("train") == 1
    with count_compilations() as counts:  # nothing at all once every program is built
        objective.evaluate(design(2, 5, 0, 1, 40, 1.0))
    assert counts.total == 0, dict(counts.by_function)
    assert again == results[0]
    assert results[0]["validation_accuracy"] > 0.75  # moons: chance is 0.5
    assert all(0 <= r["test_accuracy"] <= 1 for r in results)


def test_the_step_wise_training_is_evaluates_training_epoch_by_epoch():
    data = moons(0, 120, 100, 100)
    objective = ArchitectureObjective(data, max_layers=4, max_units=8, batch_size=10)
    point = design(8, 0, 4, 0, 12, 2.0)
    reports = []
    with count_compilations() as counts:
        final = objective.train(
            point, lambda *report, checkpoint: reports.append((*report, checkpoint))
        )
    assert counts.of("train_epoch") == 1  # one program for every epoch
    with count_compilations() as counts:  # and none for the next design's epochs
        objective.train(design(2, 5, 0, 1, 12, 1.0), lambda *report, checkpoint: None)
    assert counts.total == 0, dict(counts.by_function)
    assert [step for step, _, _ in reports] == list(range(1, 13)) and final == reports[-1][1]
    assert final == pytest.approx(1 - objective(point), abs=1e-9)  # evaluate's 12 epochs
    assert reports[0][1] > final  # it learns
    free = {k: v for k, v in point.items() if k != "epochs"}  # a space without epochs
    curve = []
    objective.train(free, lambda step, value, checkpoint: curve.append(value) or step < 12)
    for epochs in (5, 12):  # the networks evaluate scores, at every E (review BW)
        assert curve[epochs - 1] == pytest.approx(1 - objective({**free, "epochs": epochs}))
    resumed = []
    objective.train(point, lambda step, value, checkpoint: resumed.append((step, value)),
                    checkpoint=reports[5][2])  # fmt: skip
    assert resumed == [(step, value) for step, value, _ in reports[6:]]


def test_a_point_given_directly_is_checked_and_one_design_whatever_its_number_types():
    from bojax.errors import (
        MissingParameterError,
        OutOfBoundsError,
        ParameterTypeError,
        UnknownParameterError,
    )

    objective = ArchitectureObjective(moons(0, 60, 50, 50), max_layers=2, max_units=8)
    point = {"n1": 4, "n2": 0, "epochs": 5, "learning_rate": 1.0}
    same = {"n1": np.int64(4), "n2": 0.0, "epochs": 5, "learning_rate": 1}
    assert objective.evaluate(same) == objective.evaluate(point)
    for bad, error in [({"n1": 4.7}, ParameterTypeError), ({"n2": 9}, OutOfBoundsError),
                       ({"n1": -1}, OutOfBoundsError), ({"n3": 2}, UnknownParameterError),
                       ({"learning_rate": math.nan}, ValueError)]:  # fmt: skip
        with pytest.raises(error):
            objective.evaluate({**point, **bad})
    with pytest.raises(MissingParameterError, match="epochs"):  # a bare KeyError before
        objective.evaluate({"n1": 4, "learning_rate": 1.0})


def test_training_lowers_the_cost():
    data = moons(0, 120, 100, 100)
    shape = shape_of((6,), 1, 6)
    net = init_net(jax.random.key(2), 1, 6)
    before = float(cost(net, shape, data.x_train, data.y_train))
    trained = archnet.train(jax.random.key(3), net, shape, data, 100, 2.0, 10)
    assert float(cost(trained, shape, data.x_train, data.y_train)) < 0.7 * before


def test_bayesian_linear_regression_matches_the_weight_space_posterior():
    """Function-space formula (report sec. 3.4) against the weight-space posterior
    w | y ~ N(A^-1 Phi^T y / s^2, A^-1), A = Phi^T Phi / s^2 + I / a^2."""
    rng = np.random.default_rng(1)
    phi_t, phi_u, y = rng.normal(size=(6, 4)), rng.normal(size=(5, 4)), rng.normal(size=6)
    alpha, sigma = 1.3, 0.25
    mean, cov = bayesian_linear_regression(phi_t, y, phi_u, alpha, sigma)
    precision = phi_t.T @ phi_t / sigma**2 + np.eye(4) / alpha**2
    w_mean = np.linalg.solve(precision, phi_t.T @ y) / sigma**2
    np.testing.assert_allclose(mean, phi_u @ w_mean, rtol=1e-10)
    np.testing.assert_allclose(cov, phi_u @ np.linalg.solve(precision, phi_u.T), atol=1e-12)
