"""The MLP-ensemble objective: padding, DropConnect, training, stopping, exclusion,
the report's loss, one compilation per run, and the data generators."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bojax.compilation import count_compilations
from bojax.errors import DataError, OutOfBoundsError, SettingsError, UnknownNameError
from bojax.objectives import datasets
from bojax.objectives import ensemble as E

ARCH = E.Architecture(max_layers=4, max_width=7, max_members=5)


def design(layers, width, members, keep):
    return E.Design(jnp.int32(layers), jnp.int32(width), jnp.int32(members), jnp.float32(keep))


def toy_data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (n, 1)).astype(np.float32)
    return x, (np.sin(2 * x[:, 0]) + 0.1 * rng.standard_normal(n)).astype(np.float32)


def unpadded_forward(params, x, layers):
    """An MLP written the plain way, (B, D) activations, no masks or padding."""
    h = jax.nn.relu(x @ params["w_in"] + params["b_in"])
    for l in range(layers - 1):
        h = jax.nn.relu(h @ params["w_hidden"][l] + params["b_hidden"][l])
    return h @ params["w_out"] + params["b_out"]


def real_part(tree, layers, width):
    """The entries of a padded member that a (layers, width) network has."""
    return {
        "w_in": tree["w_in"][:, :width],
        "b_in": tree["b_in"][:width],
        "w_hidden": tree["w_hidden"][: layers - 1, :width, :width],
        "b_hidden": tree["b_hidden"][: layers - 1, :width],
        "w_out": tree["w_out"][:width],
        "b_out": tree["b_out"],
    }


@pytest.mark.parametrize("layers,width", [(1, 1), (2, 3), (4, 7), (3, 7), (4, 2)])
def test_padded_network_equals_the_unpadded_one_in_outputs_and_gradients(layers, width):
    x, y = toy_data()
    d = design(layers, width, 1, 0.7)
    params, dropconnect = E.init_member(jax.random.key(layers * 10 + width), ARCH, d)
    masks = jax.tree.map(lambda a, b: a * b, dropconnect, E.structural_masks(ARCH, d))
    effective = jax.tree.map(lambda p, m: p * m, params, masks)
    small = real_part(effective, layers, width)

    padded_out = E.member_forward(params, masks, d.layers, jnp.asarray(x))
    np.testing.assert_allclose(padded_out, unpadded_forward(small, x, layers), rtol=1e-5, atol=1e-5)

    grads = jax.grad(E._mse)(params, masks, d.layers, jnp.asarray(x), jnp.asarray(y))
    small_grads = jax.grad(lambda p: jnp.mean((unpadded_forward(p, x, layers) - y) ** 2))(small)
    # The chain rule through the mask: d/dW of (W * m) is m * d/d(W m).
    expected = jax.tree.map(lambda g, m: g * m, small_grads, real_part(masks, layers, width))
    for name, g in real_part(grads, layers, width).items():
        np.testing.assert_allclose(g, expected[name], rtol=1e-4, atol=1e-6, err_msg=name)
    # Padding (absent units and layers) gets exactly zero gradient.
    total = sum(float(jnp.sum(jnp.abs(g))) for g in jax.tree.leaves(grads))
    real = sum(float(jnp.sum(jnp.abs(g))) for g in jax.tree.leaves(real_part(grads, layers, width)))
    assert total == pytest.approx(real, rel=1e-6)


@pytest.mark.parametrize("keep", [0.05, 0.5, 0.949])
def test_dropconnect_keeps_each_weight_and_bias_with_probability_p(keep):
    arch = E.Architecture(5, 15, 30)
    d = design(5, 15, 30, keep)
    _, masks = jax.vmap(lambda k: E.init_member(k, arch, d))(
        jax.random.split(jax.random.key(1), 30)
    )
    bits = np.concatenate([np.ravel(m) for m in jax.tree.leaves(masks)])
    assert set(np.unique(bits)) <= {0.0, 1.0}
    sd = np.sqrt(keep * (1 - keep) / bits.size)
    assert abs(bits.mean() - keep) < 5 * sd, (bits.mean(), keep, bits.size)
    # Every parameter kind is masked at rate p, the output bias included.
    small = E.Architecture(3, 4, 1)
    keys = jax.random.split(jax.random.key(2), 4000)
    _, masks = jax.vmap(lambda k: E.init_member(k, small, design(3, 4, 1, keep)))(keys)
    for name, m in masks.items():
        sd = np.sqrt(keep * (1 - keep) / m.size)
        assert abs(float(np.mean(m)) - keep) < 5 * sd, name


def test_masks_are_fixed_per_member_and_differ_between_members():
    d = design(3, 7, 5, 0.5)
    _, masks = E.init_ensemble(jax.random.key(0), ARCH, d)
    w = np.asarray(masks["w_hidden"])
    assert not np.array_equal(w[0], w[1])
    x, y = toy_data()
    trained = E.train_ensemble(jax.random.key(0), ARCH, E.Training(5, 5), d, x, y)
    for a, b in zip(jax.tree.leaves(trained.masks), jax.tree.leaves(masks), strict=True):
        np.testing.assert_array_equal(a, b)
    # A dropped weight stays exactly zero in effect: it never receives a gradient.
    start, _ = E.init_ensemble(jax.random.key(0), ARCH, d)
    dropped = np.asarray(masks["w_hidden"]) == 0
    np.testing.assert_array_equal(
        np.asarray(trained.params["w_hidden"])[dropped], np.asarray(start["w_hidden"])[dropped]
    )


def test_initialisation_scale_follows_the_real_fan_in():
    arch = E.Architecture(3, 40, 1)
    params, _ = E.init_member(jax.random.key(0), arch, design(3, 40, 1, 1.0))
    # U(-1/sqrt(fan_in), 1/sqrt(fan_in)): max close to the bound, never beyond it.
    bound = 1 / np.sqrt(40)
    w = np.abs(np.asarray(params["w_hidden"]))
    assert w.max() <= bound + 1e-7 and w.max() > 0.95 * bound
    assert np.abs(np.asarray(params["w_in"])).max() <= 1.0


def test_training_lowers_every_members_loss():
    x, y = toy_data()
    d = design(2, 7, 4, 1.0)
    params, masks = E.init_ensemble(jax.random.key(3), ARCH, d)
    before = jax.vmap(E._mse, in_axes=(0, 0, None, None, None))(params, masks, d.layers, x, y)
    trained = E.train_ensemble(jax.random.key(3), ARCH, E.Training(300, 300), d, x, y)
    after = jax.vmap(E._mse, in_axes=(0, 0, None, None, None))(
        trained.params, trained.masks, d.layers, x, y
    )
    real = np.arange(ARCH.max_members) < 4
    assert np.all(np.asarray(after)[real] < 0.5 * np.asarray(before)[real])
    assert np.all(np.asarray(after)[real] < np.var(y))
    # The absent member never trains.
    assert int(trained.epochs[4]) == 0 and np.isnan(trained.train_loss[4])


def test_stopping_rule_bounds():
    x, y = toy_data()
    d = design(2, 5, 3, 1.0)
    never = E.train_ensemble(jax.random.key(0), ARCH, E.Training(7, 40, tolerance=0.0), d, x, y)
    assert np.asarray(never.epochs).tolist() == [40, 40, 40, 0, 0]
    always = E.train_ensemble(jax.random.key(0), ARCH, E.Training(7, 40, tolerance=1e9), d, x, y)
    assert np.asarray(always.epochs).tolist() == [7, 7, 7, 0, 0]


def test_each_member_stops_on_its_own_when_its_loss_settles():
    x, y = toy_data()
    d = design(2, 5, 5, 0.8)
    key, tol = jax.random.key(4), 2e-4
    run = E.train_ensemble(key, ARCH, E.Training(20, 2000, tolerance=tol), d, x, y)
    epochs = np.asarray(run.epochs)
    assert len(set(epochs.tolist())) > 1, epochs  # members stop at different epochs
    i = int(np.argmin(epochs))
    e = int(epochs[i])
    assert 20 <= e < 2000

    def loss_at(epoch):  # the training loss computed at epoch ``epoch``
        fixed = E.train_ensemble(key, ARCH, E.Training(epoch, epoch, tolerance=0.0), d, x, y)
        return fixed

    last, before, earlier = loss_at(e), loss_at(e - 1), loss_at(e - 2)
    after = loss_at(e + 1)
    assert abs(float(last.train_loss[i]) - float(before.train_loss[i])) < tol
    if e - 1 >= 20:  # it did not stop one epoch earlier
        assert abs(float(before.train_loss[i]) - float(earlier.train_loss[i])) >= tol

    # A stopped member is frozen after exactly e epochs: its loss and parameters are
    # those of e epochs, not e - 1 or e + 1. The stopping run and the fixed ones are
    # different float32 programs, whose rounding differs by ~1e-6 on some CPUs (AVX-512
    # with the suite's unoptimised compiles), so "those of e epochs" means far nearer to
    # them than to a neighbouring epoch's.
    def distance(a, b):
        return float(
            sum(
                np.sum((np.asarray(u)[i] - np.asarray(v)[i]) ** 2)
                for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
            )
            ** 0.5
        )

    for neighbour in (before, after):
        to_e = abs(float(run.train_loss[i]) - float(last.train_loss[i]))
        assert to_e < 0.05 * abs(float(run.train_loss[i]) - float(neighbour.train_loss[i]))
        assert distance(run.params, last.params) < 0.05 * distance(run.params, neighbour.params)


def _linear_member(slope):
    """A width-1 member with output ``slope * (x + 10)`` on x > -10 (ReLU in its linear part)."""
    return {
        "w_in": jnp.ones((1, 1)),
        "b_in": jnp.full((1,), 10.0),
        "w_hidden": jnp.zeros((0, 1, 1)),
        "b_hidden": jnp.zeros((0, 1)),
        "w_out": jnp.full((1,), slope),
        "b_out": jnp.zeros(()),
    }


def test_exclusion_rule_drops_members_whose_predictions_barely_vary():
    x, y = toy_data()
    y_sd = float(np.std(y))
    x_sd = float(np.std(x))
    members = []
    for ratio in (0.005, 0.02, 0.0, 0.5):  # prediction spread as a fraction of std(y)
        members.append(_linear_member(ratio * y_sd / x_sd))
    stacked = jax.tree.map(lambda *leaves: jnp.stack(leaves), *members)
    ones = jax.tree.map(jnp.ones_like, stacked)
    ensemble = E.Ensemble(stacked, ones, jnp.ones(4, bool), jnp.zeros(4), jnp.zeros(4))
    kept = E.kept_members(ensemble, 1, x, y, min_spread=0.01)
    assert np.asarray(kept).tolist() == [False, True, False, True]
    prediction = E.ensemble_predict(ensemble, kept, 1, x)
    by_member = E.member_predictions(ensemble, 1, x)
    np.testing.assert_allclose(prediction, (by_member[1] + by_member[3]) / 2, rtol=1e-6)


def test_exclusion_keeps_all_real_members_when_all_are_degenerate():
    params = _linear_member(0.0)
    stacked = jax.tree.map(lambda *leaves: jnp.stack(leaves), params, params, params)
    ones = jax.tree.map(jnp.ones_like, stacked)
    real = jnp.array([True, True, False])
    ensemble = E.Ensemble(stacked, ones, real, jnp.zeros(3), jnp.zeros(3))
    x, y = toy_data()
    assert np.asarray(E.kept_members(ensemble, 1, x, y, 0.01)).tolist() == [True, True, False]


def test_a_design_that_drops_every_weight_is_excluded_and_reported():
    x, y = toy_data()
    space = E.design_space(4, 7, 5)
    objective = E.EnsembleObjective(space, (x, y, x, y), E.Training(5, 5), seed=0)
    record = objective.evaluate({"layers": 2, "width": 3, "members": 4, "keep": 0.0})
    assert record["kept"] == 0 and record["excluded"] == 4
    # Every weight dropped: the ensemble predicts 0, and the loss says so.
    assert record["test_loss"] == pytest.approx(float(np.linalg.norm(y)), rel=1e-5)


def test_test_loss_is_the_euclidean_distance_and_mse_is_recorded():
    rng = np.random.default_rng(0)
    prediction, y = rng.normal(size=30).astype(np.float32), rng.normal(size=30).astype(np.float32)
    assert float(E.test_loss(jnp.asarray(prediction), y)) == pytest.approx(
        float(np.linalg.norm(prediction.astype(np.float64) - y)), rel=1e-6
    )
    x, yt = toy_data()
    objective = E.EnsembleObjective(E.design_space(4, 7, 5), (x, yt, x, yt), E.Training(30, 30))
    record = objective.evaluate({"layers": 2, "width": 5, "members": 3, "keep": 0.9})
    assert record["test_mse"] == pytest.approx(record["test_loss"] ** 2 / len(yt), rel=1e-5)


def test_all_designs_of_a_run_share_one_compilation():
    x, y = toy_data()
    space = E.design_space(4, 7, 5)
    objective = E.EnsembleObjective(space, (x, y, x[:10], y[:10]), E.Training(10, 20), seed=1)
    designs = [
        {"layers": 1, "width": 1, "members": 1, "keep": 0.3},
        {"layers": 4, "width": 7, "members": 5, "keep": 1.0},
        {"layers": 2, "width": 4, "members": 3, "keep": 0.6},
    ]
    objective(designs[0])  # a first call may compile key helpers as well
    with count_compilations() as counts:
        losses = [objective(p) for p in designs[1:]]
    assert counts.of("evaluate_design") == 0, counts  # compiled once, by the first design
    assert counts.total == 0, counts
    assert all(np.isfinite(losses))


def test_first_evaluation_compiles_once_and_designs_are_reproducible():
    x, y = toy_data()
    space = E.design_space(3, 6, 4)
    with count_compilations() as counts:
        first = E.EnsembleObjective(space, (x, y, x, y), E.Training(10, 10), seed=2)
        a = first({"layers": 2, "width": 4, "members": 3, "keep": 0.8})
        b = first({"layers": 3, "width": 6, "members": 4, "keep": 0.5})
    assert counts.of("evaluate_design") == 1
    again = E.EnsembleObjective(space, (x, y, x, y), E.Training(10, 10), seed=2)
    assert again({"layers": 3, "width": 6, "members": 4, "keep": 0.5}) == b  # order-free
    assert again({"layers": 2, "width": 4, "members": 3, "keep": 0.8}) == a
    other = E.EnsembleObjective(space, (x, y, x, y), E.Training(10, 10), seed=3)
    assert other({"layers": 2, "width": 4, "members": 3, "keep": 0.8}) != a


STEPPED = [
    {"layers": 1, "width": 2, "members": 1, "keep": 0.9},
    {"layers": 3, "width": 6, "members": 4, "keep": 0.7},
    {"layers": 2, "width": 4, "members": 2, "keep": 0.5},
]


def stepped_objective(**kwargs):
    x, y = toy_data()
    return E.EnsembleObjective(E.design_space(3, 6, 4), (x, y, x[:15], y[:15]),
                               E.Training(30, 120, tolerance=1e-3), seed=4, **kwargs)  # fmt: skip


def recorded(objective, point, checkpoint=None):
    """``(final value, [(step, value, checkpoint), ...])`` of one step-wise training."""
    reports = []
    final = objective.train(
        point, lambda step, value, checkpoint: reports.append((step, value, checkpoint)),
        checkpoint=checkpoint,
    )  # fmt: skip
    return final, reports


def test_the_step_wise_training_is_evaluates_training_in_steps_of_epochs():
    objective = stepped_objective(epochs_per_step=20)
    assert objective.max_step == 6  # 120 epochs
    lengths = []
    for number, point in enumerate(STEPPED):
        with count_compilations() as counts:
            final, reports = recorded(objective, point)
        if number:  # one program for every step of every design
            assert counts.of("advance_and_score") == 0, counts
        full = objective.evaluate(point)
        assert final == full["test_loss"] == reports[-1][1]  # bit for bit
        # It ends by itself at the step where its last member stopped.
        assert [s for s, _, _ in reports] == list(range(1, -(-max(full["epochs"]) // 20) + 1))
        _, continued = recorded(objective, point, checkpoint=reports[0][2])
        assert [r[:2] for r in continued] == [r[:2] for r in reports[1:]]
        lengths.append(len(reports))
    # It continues from the state handed back, not from a fresh start (which a
    # deterministic full-batch training would reach again): from zeroed weights the
    # members barely move and stop at min_epochs, with another loss.
    step, progress = reports[0][2]
    zeroed = progress._replace(params=jax.tree.map(jnp.zeros_like, progress.params))
    _, continued = recorded(objective, STEPPED[-1], checkpoint=(step, zeroed))
    assert continued[0][1] != reports[1][1]
    assert min(lengths) < objective.max_step  # a design whose members all stopped early
    # A report that takes `last` hears that such a training ends there by itself (and
    # only there), so bojax records it complete even at a milestone.
    early = STEPPED[lengths.index(min(lengths))]
    said = []
    objective.train(early, lambda step, value, checkpoint, last=False: said.append(last))
    assert said == [False] * (len(said) - 1) + [True]
    with pytest.raises(SettingsError, match="epochs_per_step"):
        stepped_objective(epochs_per_step=0)


@pytest.mark.slow  # compiles the vmapped step programs
def test_a_batch_of_step_wise_trainings_is_one_program_per_step_and_asha_stops_them():
    import bojax
    from bojax.bo.stepwise import batch_of

    objective = stepped_objective(epochs_per_step=20)
    curves = [[] for _ in STEPPED]
    finals = objective.train_batch(
        STEPPED, [lambda step, value, c=c: c.append((step, value)) for c in curves]
    )
    for point, curve, final in zip(STEPPED, curves, finals, strict=True):
        _, alone = recorded(objective, point)
        assert [s for s, _ in curve] == [s for s, _, _ in alone] and final == curve[-1][1]
        assert np.allclose([v for _, v in curve], [v for _, v, _ in alone], rtol=1e-4)
    assert batch_of(objective.train) == objective.train_batch  # what q > 1 trains with
    # A batch of one trains as train does, stopped by its report as a batch's member is.
    from bojax.bo.stepwise import StopTraining

    one = []

    def stop_at_two(step, value):
        one.append((step, value))
        if step == 2:
            raise StopTraining

    _, alone = recorded(objective, STEPPED[0])
    assert objective.train_batch(STEPPED[:1], [stop_at_two]) == [alone[1][1]]
    assert one == [(step, value) for step, value, _ in alone[:2]]
    result = bojax.minimize(
        objective.train, objective.space, max_step=objective.max_step, early_stopping="asha",
        proposer="random", step_budget=40, q=4, progress=False, seed=1,
    )  # fmt: skip
    assert result.steps <= 40 + 4 * objective.max_step
    assert "stopped" in {r["status"] for r in result.history}
    assert {r["status"] for r in result.history} <= {"ok", "stopped"}


@pytest.mark.slow  # compiles the vmapped trainer, a program no other fast test uses
def test_a_batch_of_designs_in_one_call_matches_one_at_a_time():
    x, y = toy_data()
    space = E.design_space(3, 6, 4)
    objective = E.EnsembleObjective(space, (x, y, x, y), E.Training(40, 80), seed=4)
    designs = [
        {"layers": 1, "width": 2, "members": 1, "keep": 0.9},
        {"layers": 3, "width": 6, "members": 4, "keep": 0.7},
        {"layers": 2, "width": 4, "members": 2, "keep": 0.5},
    ]
    alone = [objective.evaluate(p) for p in designs]
    with count_compilations() as counts:
        batched = objective.evaluate_batch(designs)  # padded to 4 designs
        objective.evaluate_batch(designs[::-1])
    assert counts.of("evaluate_designs") == 1, counts
    for a, b in zip(alone, batched, strict=True):
        assert b["design"] == a["design"] and b["epochs"] == a["epochs"]
        assert b["test_loss"] == pytest.approx(a["test_loss"], rel=1e-4)
    assert objective.batch(designs[:1]) == pytest.approx([alone[0]["test_loss"]], rel=1e-4)
    assert E.batch_size(3, 1) == 4 and E.batch_size(1, 1) == 1 and E.batch_size(1, 8) == 8


def test_bad_designs_settings_and_data_raise_typed_errors():
    x, y = toy_data()
    space = E.design_space(3, 6, 4)
    objective = E.EnsembleObjective(space, (x, y, x, y), E.Training(5, 5))
    with pytest.raises(OutOfBoundsError, match="layers"):
        objective({"layers": 0, "width": 4, "members": 3, "keep": 0.8})
    with pytest.raises(OutOfBoundsError, match="keep"):
        objective({"layers": 1, "width": 4, "members": 3, "keep": 1.5})
    with pytest.raises(SettingsError):
        E.Training(min_epochs=10, max_epochs=5)
    with pytest.raises(SettingsError):
        E.Training(tolerance=float("nan"))
    with pytest.raises(SettingsError):
        E.Architecture(0, 3, 3)
    with pytest.raises(DataError):
        E.EnsembleObjective(space, (x, np.full_like(y, 2.0), x, y))
    bad = y.copy()
    bad[3] = np.nan
    with pytest.raises(DataError):
        E.EnsembleObjective(space, (x, bad, x, y))
    with pytest.raises(DataError):
        E.EnsembleObjective(space, (x, y[:-1], x, y))
    from bojax.spaces import Real, Space

    with pytest.raises(SettingsError):
        E.EnsembleObjective(Space([Real("lr", 0, 1)]), (x, y, x, y))


# -- data generators ---------------------------------------------------------------------------


def test_piecewise_function_matches_the_report_on_each_piece():
    f = datasets.piecewise
    assert f(-12.0) == -12.0 and f(-9.0) == 9.0 and f(-7.0) == -7.0
    assert f(-5.0) == -7.0 and f(0.0) == 18.0
    assert f(3.0) == pytest.approx(9 * np.sin(6.0))
    assert f(-10.0) == 10.0 and f(-8.0) == -8.0 and f(-6.0) == -6.0  # left-closed pieces
    assert f(2.0) == pytest.approx(4 * np.sin(4.0))


@pytest.mark.parametrize(
    "make,low,high", [(datasets.experiment1, -14, 11), (datasets.experiment2, 0, 1)]
)
def test_generators_follow_their_law_and_are_reproducible(make, low, high):
    big = make(seed=5, n_train=20000, n_test=10)
    x = big.x_train[:, 0]
    assert x.min() >= low and x.max() <= high
    assert abs(x.mean() - (low + high) / 2) < 0.02 * (high - low)
    residual = big.y_train - big.truth(x)
    assert abs(residual.mean()) < 0.15 and abs(residual.std() - 5.0) < 0.1
    a, b = make(seed=1), make(seed=1)
    for u, v in zip(a.arrays, b.arrays, strict=True):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a.x_train, make(seed=2).x_train)
    assert not np.array_equal(a.x_train[: len(a.x_test)], a.x_test)  # independent test set
    # The test set does not depend on the training size.
    np.testing.assert_array_equal(make(seed=1, n_train=10).x_test, a.x_test)


def test_report_sizes_and_unknown_dataset():
    assert datasets.experiment1().x_train.shape == (150, 1)
    assert datasets.experiment1().y_test.shape == (150,)
    assert datasets.experiment2().x_train.shape == (100, 1)
    with pytest.raises(UnknownNameError):
        datasets.get_dataset("mnist")
