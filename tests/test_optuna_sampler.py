"""bojax inside Optuna: through Optuna's public API, and a few of the integration's helpers."""

import math
import re
import warnings

import numpy as np
import pytest

optuna = pytest.importorskip("optuna")

from bojax.errors import SettingsError, UnknownNameError  # noqa: E402
from bojax.integrations.optuna import BojaxPruner, BojaxSampler, _trial_key  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)
FAST = {"surrogate": "gp-map", "num_candidates": 256}


def quadratic(trial):
    x = trial.suggest_float("x", -5.0, 5.0)
    lr = trial.suggest_float("lr", 1e-4, 1.0, log=True)
    n = trial.suggest_int("n", 1, 8)
    return (x - 1.0) ** 2 + (math.log10(lr) + 2.0) ** 2 + 0.1 * (n - 3) ** 2


@pytest.mark.slow
def test_study_optimize_finds_the_minimum_and_repeats_under_a_seed():
    studies = []
    for _ in range(2):
        study = optuna.create_study(sampler=BojaxSampler(seed=3, **FAST))
        study.optimize(quadratic, n_trials=16)
        studies.append(study)
    first, second = studies
    assert [t.params for t in first.trials] == [t.params for t in second.trials]
    assert all(
        isinstance(t.params["n"], int) and 1e-4 <= t.params["lr"] <= 1.0 for t in first.trials
    )
    # Random search's best over the same 16 trials is far worse on this quadratic.
    random = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    random.optimize(quadratic, n_trials=16)
    assert first.best_value < 0.3 < random.best_value


def mixed(trial):
    kind = trial.suggest_categorical("kind", ["a", "b", "c"])
    batch = trial.suggest_int("batch", 16, 128, step=16)
    drop = trial.suggest_float("drop", 0.0, 0.5, step=0.1)
    trial.suggest_categorical("opaque", [None, "x"])  # a None choice: not modelled
    x = trial.suggest_float("x", -5.0, 5.0)
    return (x - 1.0) ** 2 + {"a": 1.0, "b": 0.0, "c": 2.0}[kind] + ((batch - 64) / 64) ** 2 + drop


def test_trials_pruned_below_the_step_are_believed_or_excluded_and_diverged_ones_fail():
    """Below the modelled step a trial pruned with finite reports, or complete without
    reaching it, is a pending believer (the latest 128) or, earlier, excluded from the
    proposals; one that reported inf, completed at inf or was pruned before a report is
    a failure (a diverged one was once the best observation: 0.05)."""
    from optuna.distributions import FloatDistribution
    from optuna.trial import TrialState, create_trial

    import bojax.integrations.optuna as integration
    from bojax.integrations.optuna import _at_highest_step, _space

    d = {"x": FloatDistribution(0.0, 1.0)}
    study = optuna.create_study()
    for i in range(5):  # reach step 3 (returning something else: the reports are modelled)
        study.add_trial(create_trial(params={"x": 0.1 * i}, distributions=d, value=0.1,
                                     intermediate_values={1: 0.5, 3: 0.2 + i}))  # fmt: skip
    below = [
        (TrialState.PRUNED, {1: 0.3, 2: 0.25}, None),  # believed
        (TrialState.COMPLETE, {1: 0.3}, 0.28),  # ended by itself at step 1: believed
        (TrialState.PRUNED, {1: 0.05, 3: math.inf}, None),  # diverged
        (TrialState.COMPLETE, {1: 0.04}, math.inf),
        (TrialState.PRUNED, {}, None),  # skipped
    ]
    for k, (state, values, value) in enumerate(below):
        study.add_trial(create_trial(state=state, params={"x": 0.6 + 0.05 * k}, distributions=d,
                                     value=value, intermediate_values=values))  # fmt: skip
    unit = BojaxSampler(seed=0)._unit
    observed, outcome, since, excluded = _at_highest_step(
        study, study.get_trials(deepcopy=False), _space(d), 5, unit
    )
    assert [t.number for t, _ in observed] == [0, 1, 2, 3, 4, 7, 8, 9]  # in trial order
    told = [outcome(t) for t, _ in observed]
    # Reports on one scale: a complete trial's at the step too, not what it returned.
    assert told[:5] == [0.2 + i for i in range(5)] and all(map(math.isnan, told[5:]))
    np.testing.assert_allclose(np.ravel(since), [0.6, 0.65]) and excluded == []
    integration.MOST_BELIEVERS, most = 1, integration.MOST_BELIEVERS
    try:  # past the believers' window the earlier ones are excluded
        _, _, since, excluded = _at_highest_step(
            study, study.get_trials(deepcopy=False), _space(d), 5, unit
        )
    finally:
        integration.MOST_BELIEVERS = most
    np.testing.assert_allclose(np.ravel(since), [0.65])
    np.testing.assert_allclose(np.ravel(excluded), [0.6])


def falling_bowl(trial):
    """A 27-epoch curve falling as 1/epoch to (x - 0.3)^2, checked at every epoch."""
    x = trial.suggest_float("x", 0.0, 1.0)
    for epoch in range(1, 28):
        trial.report((x - 0.3) ** 2 + 1.0 / epoch, epoch)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return (x - 0.3) ** 2


def test_the_sampler_models_pruned_trials_before_any_trial_completes():
    """Optuna's intersection of complete trials was empty then, so every trial was
    random until one completed; the pruned trials' space is modelled meanwhile."""
    from optuna.distributions import FloatDistribution
    from optuna.trial import TrialState, create_trial

    d = {"x": FloatDistribution(0.0, 1.0)}
    study = optuna.create_study()
    for k in range(8):
        x = 0.05 + 0.1 * k
        curve = {1: (x - 0.3) ** 2 + 1.0, 3: (x - 0.3) ** 2 + 0.3}
        study.add_trial(create_trial(state=TrialState.PRUNED, params={"x": x}, distributions=d,
                                     intermediate_values=curve))  # fmt: skip
    sampler = BojaxSampler(seed=0, **FAST)
    trial = study.ask()
    assert sampler.infer_relative_search_space(study, trial) == d


def test_the_sampler_models_failed_trials_before_any_trial_completes():
    """Optuna's intersections leave failed trials out, so while every trial had failed
    each came from the independent sampler, not the failure classifier (review)."""
    from optuna.distributions import FloatDistribution, IntDistribution
    from optuna.trial import TrialState, create_trial

    d = {"x": FloatDistribution(0.0, 1.0), "n": IntDistribution(1, 4)}
    study = optuna.create_study()
    for k in range(3):
        study.add_trial(create_trial(state=TrialState.FAIL, params={"x": 0.1 * k, "n": 2},
                                     distributions=d))  # fmt: skip
    sampler = BojaxSampler(seed=0, **FAST)
    assert sampler.infer_relative_search_space(study, study.ask()) == d
    wider = {**d, "n": IntDistribution(1, 8)}  # a parameter whose range changed: left out
    study.add_trial(create_trial(state=TrialState.FAIL, params={"x": 0.5, "n": 6},
                                 distributions=wider))  # fmt: skip
    study.add_trial(create_trial(state=TrialState.FAIL))  # failed before suggesting any
    assert sampler.infer_relative_search_space(study, study.ask()) == {"x": d["x"]}
    study.add_trial(create_trial(params={"x": 0.9}, distributions={"x": d["x"]}, value=1.0))
    assert sampler.infer_relative_search_space(study, study.ask()) == {"x": d["x"]}


def test_the_samplers_memory_is_per_trial_of_each_study_made():
    """A trial that failed before suggesting a parameter is a failure where the sampler
    proposed it; a study made again under the same name read the old study's trial of
    that number as its own (review)."""

    def objective(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        if trial.number == 2:  # the model's first proposal fails before y
            raise ValueError("diverged")
        return (x - 0.3) ** 2 + (trial.suggest_float("y", 0.0, 1.0) - 0.6) ** 2

    sampler = BojaxSampler(seed=0, n_startup_trials=2, **FAST)
    first = optuna.create_study(study_name="same", sampler=sampler)
    first.optimize(objective, n_trials=3, catch=(ValueError,))
    assert first.trials[2].state == optuna.trial.TrialState.FAIL

    def before_any(trial):  # trial 2 of the new study fails before suggesting anything
        if trial.number == 2:
            raise ValueError("no data")
        return objective(trial)

    again = optuna.create_study(study_name="same", sampler=sampler)
    for x in (0.2, 0.4):
        again.enqueue_trial({"x": x, "y": 0.5})
    with pytest.warns(UserWarning, match="leaves trial 2 .FAIL. out of its model"):
        again.optimize(before_any, n_trials=4, catch=(ValueError,))


def test_the_pruners_memory_is_per_trial_of_each_study_made():
    """A study made again under the same name has trials of the same numbers; they
    inherited the milestones decided for the old ones (19 of 30 pruned, 28 afresh)."""

    pruner = BojaxPruner(max_resource=27, early_stopping="asha")
    counts = []
    for _ in range(2):
        study = optuna.create_study(study_name="again", pruner=pruner,
                                    sampler=optuna.samplers.RandomSampler(seed=0))  # fmt: skip
        study.optimize(falling_bowl, n_trials=30)
        counts.append(sum(t.state == optuna.trial.TrialState.PRUNED for t in study.trials))
    assert counts[0] >= 15 and counts[1] == counts[0]


def test_choices_optuna_cannot_tell_apart_go_to_the_independent_sampler():
    """Optuna stores a choice as ``choices.index(value)``: True among (1, True) is stored
    as 1, and a model told 1 after proposing True proposed True again (8 of 12 trials)."""
    from optuna.distributions import CategoricalDistribution

    from bojax.integrations.optuna import _parameter

    for choices in ((1, True, "z"), (0, False), (1, 1.0), (None, "x")):
        assert _parameter("c", CategoricalDistribution(choices)) is None, choices
    assert _parameter("c", CategoricalDistribution(("1", 1, 2.5))).choices == ("1", 1, 2.5)


@pytest.mark.slow
def test_categorical_and_stepped_parameters_are_modelled_jointly():
    sampler = BojaxSampler(seed=1, **FAST)
    study = optuna.create_study(sampler=sampler)
    study.optimize(mixed, n_trials=20)
    space = sampler.infer_relative_search_space(study, study.trials[-1])
    assert set(space) == {"kind", "batch", "drop", "x"}
    later = study.trials[5:]  # after the 5 random start-up trials: bojax's proposals
    steps = [t.params["drop"] / 0.1 for t in study.trials]
    assert all(abs(k - round(k)) < 1e-9 and 0 <= round(k) <= 5 for k in steps)
    assert all(t.params["batch"] % 16 == 0 for t in study.trials)
    # Random choices pick "b" in 5 of these 15 trials on average (10 or more: 0.8 % of the
    # time); the model learns it is best (10-13 of 15 on seeds 0-5).
    assert sum(t.params["kind"] == "b" for t in later) >= 10, [t.params for t in later]
    assert study.best_value < 0.6


@pytest.mark.slow
def test_ask_and_tell_with_failed_and_pruned_trials_and_maximisation():
    study = optuna.create_study(direction="maximize", sampler=BojaxSampler(seed=0, **FAST))
    for k in range(12):
        trial = study.ask()
        x = trial.suggest_float("x", 0.0, 1.0)
        y = trial.suggest_int("y", 0, 4)
        if k % 5 == 4:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        elif k % 5 == 3:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            study.tell(trial, -((x - 0.7) ** 2) - 0.1 * (y - 2) ** 2)
    states = [t.state.name for t in study.trials]
    assert states.count("FAIL") == 2 and states.count("PRUNED") == 2
    assert study.best_value > -0.05  # maximised, near (0.7, 2)


@pytest.mark.slow
def test_a_resumed_rdb_study_continues_with_a_new_sampler(tmp_path):
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(study_name="s", storage=storage, sampler=BojaxSampler(**FAST))
    study.optimize(quadratic, n_trials=7)
    again = optuna.load_study(study_name="s", storage=storage, sampler=BojaxSampler(**FAST))
    again.optimize(quadratic, n_trials=3)
    assert len(again.trials) == 10 and all(t.state.name == "COMPLETE" for t in again.trials)


def test_bad_settings_fail_when_the_sampler_is_made():
    with pytest.raises(UnknownNameError, match="surrogate"):
        BojaxSampler(surrogate="gp-nope")
    for startup in (0, True):  # a bool is an int to Python, not a count
        with pytest.raises(ValueError, match="n_startup_trials"):
            BojaxSampler(n_startup_trials=startup)
    with pytest.raises(SettingsError, match="below 2\\*\\*32"):  # Optuna's RandomSampler's
        BojaxSampler(seed=2**40)
    BojaxSampler(seed=2**40, independent_sampler=optuna.samplers.RandomSampler(seed=1))


@pytest.mark.slow
def test_inside_optuna_bojax_proposes_exactly_what_its_own_loop_does():
    """Same settings, same observations: the sampler's trials are the native loop's
    proposals bit for bit, so its regret is gp-slice's (or any surrogate's) by construction."""
    import numpy as np

    import bojax
    from bojax.objectives.problems import get_problem

    problem = get_problem("branin")
    names = ("u0", "u1")
    space = bojax.Space([bojax.Real(n, 0.0, 1.0) for n in names])
    design = space.sample(__import__("jax").random.key(7), 5, "sobol")

    def value(u):
        return problem(problem.space.from_unit(np.asarray(u)))

    state = bojax.init(space, bojax.Settings(surrogate="gp-map", initial=5, seed=0))
    for u in design:
        state = bojax.tell(state, u, value(u))
    native = []
    for _ in range(6):
        u, state, _ = bojax.ask(state)
        native.append(np.asarray(u))
        state = bojax.tell(state, u, value(u))

    study = optuna.create_study(sampler=BojaxSampler(seed=0, surrogate="gp-map"))
    distributions = {n: optuna.distributions.FloatDistribution(0.0, 1.0) for n in names}
    for u in design:
        params = dict(zip(names, map(float, u), strict=True))
        study.add_trial(
            optuna.trial.create_trial(params=params, distributions=distributions, value=value(u))
        )
    inside = []
    for _ in range(6):
        trial = study.ask(distributions)
        u = np.array([trial.params[n] for n in names])
        inside.append(u)
        study.tell(trial, value(u))
    np.testing.assert_array_equal(np.array(inside), np.array(native))


@pytest.mark.slow
def test_after_failed_trials_only_bojax_proposes_away_from_them():
    """Failed trials are modelled: with nothing but failures at x <= 0.5 the sampler still
    proposes, where success is likeliest, instead of waiting for successes."""
    sampler = BojaxSampler(seed=0, n_startup_trials=3, **FAST)
    study = optuna.create_study(sampler=sampler)
    space = {"x": optuna.distributions.FloatDistribution(0.0, 1.0)}
    for x in (0.1, 0.3, 0.5):
        failed = optuna.trial.create_trial(
            params={"x": x}, distributions=space, state=optuna.trial.TrialState.FAIL
        )
        study.add_trial(failed)
    asking = optuna.trial.create_trial(params={}, distributions={}, value=0.0)
    assert sampler.infer_relative_search_space(study, asking) == space  # (failed trials')
    proposal = sampler.sample_relative(study, asking, space)
    assert proposal and proposal["x"] > 0.7


# -- trials bojax could not have proposed -----------------------------------------------------
F, I, C = (
    optuna.distributions.FloatDistribution,
    optuna.distributions.IntDistribution,
    optuna.distributions.CategoricalDistribution,
)
SPACE = {"x": F(0.0, 1.0), "n": I(1, 4), "k": C(["a", "b"])}
WIDER = {**SPACE, "x": F(0.0, 10.0)}
START = [(0.1, 1, "a"), (0.4, 2, "b"), (0.7, 3, "a")]


def started(extra=()):
    """A study of three completed trials (the sampler's start-up), then ``extra`` trials
    as ``(params, distributions, state)``; and a fresh sampler."""
    sampler = BojaxSampler(seed=0, n_startup_trials=3, **FAST)
    study = optuna.create_study(sampler=sampler)
    for x, n, k in START:
        params = {"x": x, "n": n, "k": k}
        study.add_trial(
            optuna.trial.create_trial(params=params, distributions=SPACE, value=(x - 0.5) ** 2)
        )
    for params, distributions, state in extra:
        study.add_trial(
            optuna.trial.create_trial(params=params, distributions=distributions, state=state)
        )
    return study, sampler


def propose(study, sampler):
    asking = optuna.trial.create_trial(params={}, distributions={}, value=0.0)
    return sampler.sample_relative(
        study, asking, sampler.infer_relative_search_space(study, asking)
    )


def enqueued_out_of_range(study):
    """A completed trial whose enqueued x = 5 lies outside suggest_float's [0, 1]: Optuna
    warns and keeps the value."""
    study.enqueue_trial({"x": 5.0})
    trial = study.ask()
    with pytest.warns(UserWarning, match="out of range"):
        trial.suggest_float("x", 0.0, 1.0)
    trial.suggest_int("n", 1, 4)
    trial.suggest_categorical("k", ["a", "b"])
    study.tell(trial, 0.0)


FAIL, RUNNING, PRUNED = (optuna.trial.TrialState[s] for s in ("FAIL", "RUNNING", "PRUNED"))


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        (enqueued_out_of_range, r"trial 3 \(COMPLETE\).*'x': value 5.0 is outside"),
        ([({"x": 5.0, "n": 1, "k": "a"}, WIDER, FAIL)], r"trial 3 \(FAIL\).*outside"),
        ([({"x": 0.5, "n": 1, "k": "z"}, {**SPACE, "k": C(["a", "z"])}, FAIL)],
         "'z' is not one of the choices"),
        ([({"x": 0.5, "n": 2.5, "k": "a"}, {**SPACE, "n": F(1, 4)}, FAIL)], "expected an integer"),
        ([({"x": 0.5}, {"x": SPACE["x"]}, FAIL)], "missing from the trial"),
        ([({"x": 5.0, "n": 1, "k": "a"}, WIDER, RUNNING)], r"trial 3 \(RUNNING\).*outside"),
        # A trial pruned before any report is a failure the model learns from, so one
        # outside the space is left out with a warning, as a failed one is.
        ([({"x": 5.0, "n": 1, "k": "a"}, WIDER, PRUNED)], r"trial 3 \(PRUNED\).*outside"),
    ],
    ids=["enqueued", "wider", "choice", "float-for-int", "missing", "running", "pruned"],
)  # fmt: skip
@pytest.mark.slow
def test_a_trial_bojax_could_not_have_proposed_is_left_out_with_one_warning(extra, reason):
    """The sampler neither crashes (every later trial of the study would) nor bends the
    trial into the space: it proposes what it proposes without the trial, and says so."""
    without = propose(*started())
    study, sampler = started() if callable(extra) else started(extra)
    if callable(extra):
        extra(study)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        proposal = propose(study, sampler)
    left_out = [str(w.message) for w in caught if "BojaxSampler leaves" in str(w.message)]
    assert proposal == without
    if reason is None:
        assert left_out == []
    else:
        assert len(left_out) == 1 and re.search(reason, left_out[0]), left_out


@pytest.mark.slow  # (the fast tier's heaviest: 20 s of fits; CI runs it)
def test_a_trial_left_out_is_warned_about_once(no_warnings):
    study, sampler = started([({"x": 5.0, "n": 1, "k": "a"}, WIDER, FAIL)])
    with pytest.warns(UserWarning, match="leaves trial 3"):
        propose(study, sampler)
    with no_warnings():  # a second proposal says nothing new
        assert propose(study, sampler)


@pytest.mark.slow  # fits the failure classifier twice; the behaviour predates the check
def test_a_completed_trial_with_an_infinite_value_counts_as_failed():
    """Optuna stores inf as a completed value; bojax's own runs count a non-finite value
    as a failure, and so does the sampler (the same proposal as for a failed trial)."""
    point = {"x": 0.9, "n": 4, "k": "b"}
    failed, _ = started([(point, SPACE, FAIL)])
    infinite, _ = started()
    infinite.add_trial(optuna.trial.create_trial(params=point, distributions=SPACE, value=math.inf))
    proposals = [propose(study, BojaxSampler(seed=0, n_startup_trials=3, **FAST))
                 for study in (failed, infinite)]  # fmt: skip
    assert proposals[0] == proposals[1]


def _two_objectives(u):
    x, y = float(u[0]), float(u[1])
    return (x - 0.2) ** 2 + (y - 0.5) ** 2, (x - 0.8) ** 2 + (y - 0.5) ** 2, x - 0.6


@pytest.mark.slow  # two several-metric loops side by side
def test_a_constrained_multi_objective_study_proposes_what_bojax_proposes():
    """Two objectives (the second maximised) and a constraint set by trial.set_constraint:
    the sampler's trials are bojax's own several-metric loop's proposals, bit for bit."""
    import numpy as np

    import bojax

    names = ("u0", "u1")
    space = bojax.Space([bojax.Real(n, 0.0, 1.0) for n in names])
    design = space.sample(__import__("jax").random.key(3), 4, "sobol")

    def metrics(u):
        first, second, constraint = _two_objectives(u)
        return {"objective_0": first, "objective_1": -second, "constraint_size": constraint}

    settings = bojax.Settings(
        surrogate="gp-map", initial=4, seed=0, num_candidates=256,
        objectives={"objective_0": "min", "objective_1": "max"},
        constraints={"constraint_size": ("<=", 0.0)},
    )  # fmt: skip
    state = bojax.init(space, settings)
    for u in design:
        state = bojax.tell(state, u, metrics(u))
    native = []
    for _ in range(3):
        u, state, _ = bojax.ask(state)
        native.append(np.asarray(u))
        state = bojax.tell(state, u, metrics(u))

    sampler = BojaxSampler(seed=0, n_startup_trials=4, **FAST)
    study = optuna.create_study(directions=["minimize", "maximize"], sampler=sampler)
    distributions = {n: optuna.distributions.FloatDistribution(0.0, 1.0) for n in names}
    for u in design:
        study.enqueue_trial(dict(zip(names, map(float, u), strict=True)))
    inside = []
    for k in range(7):
        trial = study.ask(distributions)
        u = np.array([trial.params[n] for n in names])
        values = metrics(u)
        trial.set_constraint("size", values["constraint_size"])
        study.tell(trial, [values["objective_0"], values["objective_1"]])
        if k >= 4:
            inside.append(u)
    assert sampler.infer_relative_search_space(study, study.trials[-1]) != {}
    np.testing.assert_array_equal(np.array(inside), np.array(native))


@pytest.mark.slow
def test_constraints_func_is_stored_and_steers_the_sampler():
    def constraint(trial):
        return (trial.params["u0"] - 0.6,)

    sampler = BojaxSampler(seed=0, n_startup_trials=4, constraints_func=constraint, **FAST)
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
    study.optimize(
        lambda t: _two_objectives([t.suggest_float("u0", 0, 1), t.suggest_float("u1", 0, 1)])[:2],
        n_trials=8,
    )
    assert all(t.constraints for t in study.trials)  # stored as Optuna's samplers store them
    proposed = [t.params["u0"] for t in study.trials[4:]]
    assert sum(u <= 0.6 for u in proposed) >= 3  # mostly where the constraint holds


def test_a_several_metric_acquisition_serves_multi_objective_studies_only():
    from bojax.errors import SettingsError

    sampler = BojaxSampler(acquisition="parego", seed=0, n_startup_trials=2, **FAST)
    study = optuna.create_study(sampler=sampler)  # one objective
    with pytest.raises(SettingsError, match="several objectives or with constraints"):
        study.optimize(lambda t: t.suggest_float("x", 0.0, 1.0) ** 2, n_trials=3)


def test_a_reference_point_is_taken_with_the_default_acquisition():
    """A reference point is a multi-objective setting: accepted at construction whatever
    the acquisition, and used by the study's proposals; objectives and constraints come
    from the study and constraints_func, so naming them is refused."""
    from bojax.errors import SettingsError

    sampler = BojaxSampler(reference_point=[2.0, 2.0], seed=0, n_startup_trials=3, **FAST)
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
    study.optimize(lambda t: _two_objectives([t.suggest_float("u0", 0, 1), 0.5])[:2], 3)
    settings, _ = sampler._study_settings(study, study.trials)
    assert settings.reference_point == (2.0, 2.0) and len(settings.objectives) == 2
    for wrong in (dict(constraints={"size": ("<=", 1.0)}), dict(objectives=["a:min"])):
        with pytest.raises(SettingsError, match="BojaxSampler takes"):
            BojaxSampler(**wrong)
    BojaxSampler(objectives=None, constraints=None)  # their defaults: nothing named


def test_a_constraints_func_returning_booleans_is_read_as_optunas_samplers_read_it():
    """True (violated) and False (met) are stored by Optuna as given; they are 1 and 0."""
    sampler = BojaxSampler(seed=0, n_startup_trials=3,
                           constraints_func=lambda t: [t.params["x"] > 0.7], **FAST)  # fmt: skip
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda t: (t.suggest_float("x", 0.0, 1.0) - 0.8) ** 2, n_trials=5)
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)


def test_a_setting_for_one_objective_is_refused_at_a_multi_objective_studys_first_trial():
    from bojax.errors import SettingsError

    calls = []
    sampler = BojaxSampler(warping="rank", seed=0, n_startup_trials=5, **FAST)
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
    with pytest.raises(SettingsError, match="warping 'rank' is for one objective"):
        study.optimize(lambda t: calls.append(t.suggest_float("x", 0, 1)) or (1.0, 2.0), 3)
    assert calls == []  # before any training, not after the startup trials


@pytest.mark.slow  # a several-metric study of 7 trials
def test_parego_with_a_constraint_key_that_is_no_metric_name():
    sampler = BojaxSampler(acquisition="parego", seed=0, n_startup_trials=4, **FAST)
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)

    def objective(trial):
        u = [trial.suggest_float("u0", 0, 1), trial.suggest_float("u1", 0, 1)]
        first, second, constraint = _two_objectives(u)
        trial.set_constraint("latency (ms)", constraint)
        trial.set_constraint("latency [ms]", constraint)  # the same letters, kept apart
        return first, second

    study.optimize(objective, n_trials=7)
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    settings, _ = sampler._study_settings(study, study.trials)
    names = [c.split("<=")[0] for c in settings.constraints]
    assert settings.acquisition == "parego" and len(set(names)) == 2
    assert all(n.startswith("constraint_latency__ms_-") for n in names)


# -- step-wise trials: BojaxPruner and the sampler on intermediate values ------------------
def curved(trial):
    """A training of 9 epochs whose curve falls as 1/epoch to a quadratic's value."""
    x = trial.suggest_float("x", -5.0, 5.0)
    lr = trial.suggest_float("lr", 1e-4, 1.0, log=True)
    final = (x - 1.0) ** 2 + (math.log10(lr) + 2.0) ** 2
    for epoch in range(1, 10):
        trial.report(final + 2.0 / epoch, epoch)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return final


@pytest.mark.parametrize("kind", ["asha", "hyperband"])
def test_bojax_pruner_decides_a_milestone_passed_between_two_checks(kind):
    """A trial that calls should_prune every other epoch: a milestone passed in between
    was never decided (0 of 30 trials pruned, against 26 checking every epoch)."""

    def study(every):
        def objective(trial):
            x = trial.suggest_float("x", 0.0, 1.0)
            for epoch in range(1, 28):
                trial.report((x - 0.3) ** 2 + 1.0 / epoch, epoch)
                if epoch % every == 0 and trial.should_prune():
                    raise optuna.TrialPruned()
            return (x - 0.3) ** 2

        pruner = BojaxPruner(max_resource=27, early_stopping=kind)
        made = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0), pruner=pruner)
        made.optimize(objective, n_trials=30)
        return [t.number for t in made.trials if t.state == optuna.trial.TrialState.PRUNED]

    each = study(1)
    assert len(each) >= 15
    for every in (2, 5):  # the same decisions but where a trial checked late, so that the
        # trials it trained on past a milestone reached the next one (they count there)
        assert len(set(study(every)) ^ set(each)) <= 2, every


def test_bojax_pruner_stops_trials_outside_the_best_third_of_their_milestone():
    from bojax.integrations.optuna import BojaxPruner

    pruner = BojaxPruner(min_resource=1, max_resource=9, reduction_factor=3, early_stopping="asha")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0), pruner=pruner)
    study.optimize(curved, n_trials=40)
    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    assert len(pruned) > 20
    for t in study.trials:  # the rule, replayed from the storage in trial order
        for milestone in (1, 3):
            if t.last_step is None or t.last_step < milestone:
                continue
            earlier = [
                s.intermediate_values[milestone]
                for s in study.trials[: t.number]
                if milestone in s.intermediate_values
            ]
            mine = t.intermediate_values[milestone]
            recorded = [*earlier, mine]
            keep = sum(v < mine for v in recorded) < max(1, len(recorded) // 3)
            stopped_here = t.state == optuna.trial.TrialState.PRUNED and t.last_step == milestone
            assert stopped_here == (not keep), (t.number, milestone)


@pytest.mark.parametrize("kind", ["asha", "hyperband", "freeze-thaw"])
def test_bojax_pruner_stops_a_diverged_trial_between_milestones(kind):
    """A NaN or inf report between milestones (step 2 of 1, 3, 9) went on training to the
    next milestone; a step-wise bojax run fails such a training at once (review BQ)."""
    from bojax.integrations.optuna import BojaxPruner

    pruner = BojaxPruner(max_resource=9, early_stopping=kind)
    study = optuna.create_study(pruner=pruner)
    for bad in (math.nan, math.inf, 1.0):
        trial = study.ask()
        trial.report(1.0, 1)
        assert not trial.should_prune()  # the first trial at its milestone is kept
        trial.report(bad, 2)
        assert trial.should_prune() == (not math.isfinite(bad))
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)


@pytest.mark.slow  # 15 s, most of it compiling the curve model's MAP fit and optimiser
def test_the_model_pruner_stops_trials_that_would_not_have_won(monkeypatch):
    from bojax.bo.freezethaw import FreezeThaw
    from bojax.integrations.optuna import BojaxPruner

    asked = []
    worth = FreezeThaw.worth
    monkeypatch.setattr(
        FreezeThaw, "worth", lambda self, d, going: asked.append(len(d)) or worth(self, d, going)
    )
    pruner = BojaxPruner(max_resource=9, early_stopping="freeze-thaw")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0), pruner=pruner)
    study.optimize(curved, n_trials=30)
    assert asked and min(asked) >= 5  # the model decided once 5 trials had reported

    def final(t):
        return (t.params["x"] - 1.0) ** 2 + (math.log10(t.params["lr"]) + 2.0) ** 2

    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    assert len(pruned) > 15
    assert all(final(t) > study.best_value for t in pruned)  # none would have won
    # The model only keeps what successive halving would stop (alone, it pruned trials
    # at the optimum: the study's sampler never trains the new design it compares with).
    halving = optuna.create_study(
        sampler=optuna.samplers.RandomSampler(seed=0),
        pruner=BojaxPruner(max_resource=9, early_stopping="asha"),
    )
    halving.optimize(curved, n_trials=30)
    assert halving.best_value == study.best_value
    steps = [sum(t.last_step for t in s.trials) for s in (study, halving)]
    assert steps[0] >= steps[1], steps


@pytest.mark.slow  # 10 s: compiles the curve model's MAP fit
def test_the_model_pruner_keeps_the_trials_successive_halving_keeps():
    """A one-dimensional curve: with the model deciding alone, every random trial after
    the third was pruned at its first step, those at the optimum too (best 0.060, ASHA's
    0.0070 on the same trials)."""
    from bojax.integrations.optuna import BojaxPruner

    studies = {}
    for kind in ("freeze-thaw", "asha"):
        pruner = BojaxPruner(max_resource=27, early_stopping=kind)
        studies[kind] = optuna.create_study(
            sampler=optuna.samplers.RandomSampler(seed=0), pruner=pruner
        )
        studies[kind].optimize(falling_bowl, n_trials=25)
    assert studies["freeze-thaw"].best_value <= studies["asha"].best_value


def test_the_model_pruner_never_prunes_a_trial_at_its_last_step():
    import warnings

    from bojax.integrations.optuna import BojaxPruner

    def last_only(trial):  # after six whole curves, trials report their last step only
        x, lr = trial.suggest_float("x", -2.0, 2.0), trial.suggest_float("lr", 1e-4, 1.0, log=True)
        final = (x - 1.0) ** 2 + (math.log10(lr) + 2.0) ** 2
        for step in range(1, 10) if trial.number < 6 else [9]:
            trial.report(final + 1.0 / step, step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return final

    pruner = BojaxPruner(max_resource=9, early_stopping="freeze-thaw")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1), pruner=pruner)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # it divided by a zero cost
        study.optimize(last_only, n_trials=10)
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials[6:])


def test_trials_sampled_at_once_on_threads_get_different_points():
    import threading

    barrier = threading.Barrier(2, timeout=60)

    def together(trial):  # both threads' trials ask for their points at the same moment
        barrier.wait()
        x, y = trial.suggest_float("x", -5.0, 5.0), trial.suggest_float("y", -5.0, 5.0)
        return (x - 1.0) ** 2 + (y + 2.0) ** 2

    sampler = BojaxSampler(surrogate="gp-map", seed=0, n_startup_trials=4)
    study = optuna.create_study(sampler=sampler)
    study.optimize(together, n_trials=16, n_jobs=2)
    points = [(t.params["x"], t.params["y"]) for t in study.trials]
    assert len(set(points)) == len(points)  # each saw the other's proposal as pending
    assert study.best_value < 1.0


def test_bojax_pruner_settings_are_checked():
    from bojax.errors import SettingsError
    from bojax.integrations.optuna import BojaxPruner

    # named as the pruner's arguments are, not as the bojax settings behind them
    with pytest.raises(SettingsError, match="min_resource = 9 exceeds max_resource = 3"):
        BojaxPruner(min_resource=9, max_resource=3)
    with pytest.raises(SettingsError, match="max_resource must be an integer"):
        BojaxPruner(max_resource="auto")
    with pytest.raises(SettingsError, match="reduction_factor must be an integer >= 2"):
        BojaxPruner(reduction_factor=1)
    with pytest.raises(SettingsError, match=r"one of \('hyperband', 'asha', 'freeze-thaw'\)"):
        BojaxPruner(early_stopping="median")
    with pytest.raises(SettingsError, match="max_resource must be an integer >= 1: the"):
        BojaxPruner(max_resource=None)  # a TypeError comparing None with a step (review CH)
    with pytest.raises(SettingsError, match=r"max_resource must be an integer >= 1, got 0$"):
        BojaxPruner(max_resource=0)  # not "or None": the pruner refuses None
    for kind in ("asha", "freeze-thaw"):  # one milestone, the last: it never pruned
        with pytest.raises(SettingsError, match=r"max_resource \(5\) must be above min_resource"):
            BojaxPruner(min_resource=5, max_resource=5, early_stopping=kind)


@pytest.mark.parametrize("kind", ["asha", "hyperband"])
def test_successive_halving_never_prunes_a_trial_at_or_past_its_last_step(kind):
    """A trial whose first decided report was at max_resource (or past it) was judged
    at the milestones it had crossed, and pruned though its training was over (review CH)."""
    from bojax.integrations.optuna import BojaxPruner

    study = optuna.create_study(pruner=BojaxPruner(1, 9, 3, early_stopping=kind))
    for _ in range(6):
        trial = study.ask()
        trial.suggest_float("x", 0.0, 1.0)
        for step in range(1, 10):
            trial.report(0.0, step)
        study.tell(trial, 0.0)
    for steps in ([9], [1, 9], [20]):
        trial = study.ask()
        trial.suggest_float("x", 0.0, 1.0)
        for step in steps:
            trial.report(10.0, step)  # worse than all the others
        assert not trial.should_prune(), steps
        study.tell(trial, 10.0)
    trial = study.ask()  # the rule itself still prunes it at a milestone before the last
    trial.suggest_float("x", 0.0, 1.0)
    trial.report(10.0, 3)
    assert trial.should_prune()


@pytest.mark.slow  # 9 s: a pruned Optuna study with the bojax sampler (fast tier at 300 s)
def test_the_sampler_models_pruned_trials_at_their_highest_common_step(monkeypatch):
    """Pruned trials were left out before; now the values at the highest step enough
    trials reached are the data, so the sampler models long before 5 trials complete."""
    import bojax.bo.loop as loop
    from bojax.integrations.optuna import BojaxPruner

    fitted = []
    real = loop.ask_batch

    def spy(state, q, pending=None, **options):
        fitted.append((len(state.y), 0 if pending is None else len(pending)))
        return real(state, q, pending, **options)

    monkeypatch.setattr(loop, "ask_batch", spy)
    pruner = BojaxPruner(max_resource=9, early_stopping="asha")
    study = optuna.create_study(sampler=BojaxSampler(seed=0, **FAST), pruner=pruner)
    study.optimize(curved, n_trials=24)
    states = [t.state for t in study.trials]
    assert states.count(optuna.trial.TrialState.COMPLETE) < 5 <= len(fitted)
    assert all(n >= 5 for n, _ in fitted)
    assert study.best_value < 1.0  # near the optimum 0 with so few complete trials


def test_a_running_trials_intermediate_values_are_data_not_a_pending_point(monkeypatch):
    import bojax.bo.loop as loop

    seen = []
    real = loop.ask_batch

    def spy(state, q, pending=None, **options):
        seen.append((state.u.copy(), None if pending is None else pending.copy()))
        return real(state, q, pending, **options)

    monkeypatch.setattr(loop, "ask_batch", spy)
    study = optuna.create_study(sampler=BojaxSampler(seed=1, **FAST))
    pruned = study.ask()  # a pruned trial: the study models intermediate values
    pruned.suggest_float("x", -5.0, 5.0)
    pruned.suggest_float("lr", 1e-4, 1.0, log=True)
    pruned.report(30.0, 1)
    study.tell(pruned, state=optuna.trial.TrialState.PRUNED)
    for k in range(6):  # six trials report epochs 1..3 and complete
        trial = study.ask()
        x = trial.suggest_float("x", -5.0, 5.0)
        lr = trial.suggest_float("lr", 1e-4, 1.0, log=True)
        for epoch in (1, 2, 3):
            trial.report((x - 1.0) ** 2 + 1.0 / epoch + 0.01 * k, epoch)
        study.tell(trial, (x - 1.0) ** 2 + (math.log10(lr) + 2.0) ** 2)
    running = study.ask()  # a parallel worker's training, at epoch 3 now
    rx = running.suggest_float("x", -5.0, 5.0)
    running.suggest_float("lr", 1e-4, 1.0, log=True)
    for epoch in (1, 2, 3):
        running.report((rx - 1.0) ** 2 + 1.0 / epoch, epoch)
    seen.clear()
    study.ask().suggest_float("x", -5.0, 5.0)  # the next trial's relative sampling
    (u, pending), *_ = seen
    assert len(u) == 7  # six finished trials and the running one, all at epoch 3
    assert len(pending) == 1  # the pruned trial, believed; the running one is data
    assert not np.isclose(pending, u[-1]).all()


def test_a_used_up_discrete_space_hands_over_to_the_independent_sampler_with_a_warning():
    def objective(trial):  # six points in all
        return trial.suggest_int("b", 0, 2) + (trial.suggest_categorical("a", ["x", "y"]) == "y")

    study = optuna.create_study(sampler=BojaxSampler(seed=0, n_startup_trials=3, **FAST))
    with pytest.warns(UserWarning, match="the space is exhausted") as caught:
        study.optimize(objective, n_trials=9)
    assert {t.state for t in study.trials} == {optuna.trial.TrialState.COMPLETE}
    assert len({(t.params["a"], t.params["b"]) for t in study.trials}) == 6  # all, then repeats
    assert sum("exhausted" in str(w.message) for w in caught) == 1  # once per study


def test_trials_pruned_before_reporting_are_failures_the_sampler_does_not_propose_again():
    """An invalid configuration skipped with TrialPruned: left out of the model, it left
    the data unchanged, and the sampler proposed the same point again and again."""

    def objective(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        y = trial.suggest_float("y", 0.0, 1.0)
        if x + y > 1.2:
            raise optuna.TrialPruned()  # not a valid design
        return -(x + y)

    study = optuna.create_study(sampler=BojaxSampler(seed=0, n_startup_trials=3, **FAST))
    study.optimize(objective, n_trials=12)
    points = [(t.params["x"], t.params["y"]) for t in study.trials]
    assert PRUNED in {t.state for t in study.trials}
    assert len(set(points)) == len(points)


def test_a_trial_pruned_on_a_diverged_report_is_a_failure_in_a_pruning_study(monkeypatch):
    import bojax.bo.loop as loop

    seen = []
    real = loop.ask_batch

    def spy(state, q, pending=None, **options):
        seen.append(state.y.copy())
        return real(state, q, pending, **options)

    monkeypatch.setattr(loop, "ask_batch", spy)
    study = optuna.create_study(sampler=BojaxSampler(seed=0, **FAST))
    for k in range(7):
        trial = study.ask()
        x = trial.suggest_float("x", -5.0, 5.0)
        if k < 2:  # diverged at its first epoch, and pruned there
            trial.report(math.nan, 1)
            study.tell(trial, state=PRUNED)
            continue
        for epoch in (1, 2, 3):
            trial.report((x - 1.0) ** 2 + 1.0 / epoch, epoch)
        study.tell(trial, (x - 1.0) ** 2)
    study.ask().suggest_float("x", -5.0, 5.0)
    assert sum(map(math.isnan, seen[-1])) == 2  # the two diverged trials, as failures


@pytest.mark.parametrize("high, typed", [(0.3, 0.3), (1.0, 0.3)])
def test_a_stepped_floats_grid_is_the_one_optuna_stores_and_typed_values_fit_it(high, typed):
    """0.1 * 3 is 0.30000000000000004: past a high of 0.3 (Optuna clips it, and refused
    the sampler's top value), and not the 0.3 a user enqueues by hand (left out)."""
    from optuna.distributions import FloatDistribution

    from bojax.integrations.optuna import _parameter

    distribution = FloatDistribution(0.0, high, step=0.1)
    assert all(distribution._contains(v) for v in _parameter("x", distribution).values)

    def objective(trial):
        return -trial.suggest_float("x", 0.0, high, step=0.1) + trial.suggest_float("y", 0, 1)

    study = optuna.create_study(sampler=BojaxSampler(seed=0, n_startup_trials=2, **FAST))
    study.enqueue_trial({"x": typed, "y": 0.5})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        study.optimize(objective, n_trials=5)
    assert not [w for w in caught if "BojaxSampler leaves" in str(w.message)]


def test_a_distributions_parameter_is_made_once_not_on_every_trial():
    """Every trial builds the search space again; a fine stepped grid (step 2 up to 2e6:
    a million values) took 0.4 s each time."""
    from optuna.distributions import IntDistribution

    from bojax.integrations.optuna import _parameter

    first = _parameter("n", IntDistribution(0, 2 * 10**6, step=2))
    assert _parameter("n", IntDistribution(0, 2 * 10**6, step=2)) is first
    assert _parameter("m", IntDistribution(0, 2 * 10**6, step=2)) is not first
    # Equal to Optuna (1 == True), yet other choices.
    from optuna.distributions import CategoricalDistribution

    ones = _parameter("k", CategoricalDistribution(["a", 1]))
    assert _parameter("k", CategoricalDistribution(["a", True])).choices[1] is True
    assert ones.choices[1] == 1 and ones.choices[1] is not True
    assert _parameter("k", CategoricalDistribution([0, 1])).choices == (0, 1)
    assert _parameter("k", CategoricalDistribution([False, True])).choices == (False, True)
    floats = _parameter("k", CategoricalDistribution([1.0, 2.0])).choices
    assert [type(c) for c in _parameter("k", CategoricalDistribution([1, 2])).choices] == [int] * 2
    assert [type(c) for c in floats] == [float] * 2


def test_reports_of_another_metric_do_not_replace_the_returned_value():
    """A trial that logs a loss by trial.report and returns the accuracy the study
    maximises: with no trial pruned the sampler models the returned values (review: it
    modelled the reports, and maximised the loss)."""

    def objective(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        for epoch in range(1, 4):
            trial.report((x - 0.2) ** 2 + 1.0 / epoch, epoch)  # a loss, logged only
        return 1.0 - (x - 0.2) ** 2  # best at x = 0.2

    study = optuna.create_study(direction="maximize", sampler=BojaxSampler(seed=0, **FAST))
    study.optimize(objective, n_trials=12)
    modelled = [t.params["x"] for t in study.trials[5:]]  # past the 5 startup trials
    assert np.median(np.abs(np.subtract(modelled, 0.2))) < 0.05, modelled


def test_a_constraint_some_trials_do_not_set_is_satisfied_where_unset():
    """Optuna counts a trial without a constraint's value feasible for it; the sampler did
    too little: such a trial failed, and the optimum, where the constraint is never set,
    was avoided. An infinite value is a clear violation or satisfaction, not a failure."""
    sampler = BojaxSampler(seed=0, **FAST)
    study = optuna.create_study(sampler=sampler)
    points = [(0.1, None), (0.6, -1.0), (0.7, 3.0), (0.2, None), (0.9, math.inf),
              (0.3, -math.inf), (0.4, np.float32(-np.inf)), (0.5, np.float32(2.0))]  # fmt: skip
    for x, mem in points:  # (float32: a model's output; its -inf was told as a failure)
        trial = study.ask()
        trial.suggest_float("x", 0.0, 1.0)
        if mem is not None:
            trial.set_constraint("mem", mem)
        study.tell(trial, (x - 0.2) ** 2)
    _, outcome = sampler._study_settings(study, study.trials)
    told = [outcome(t) for t in study.trials]
    assert [m["constraint_mem"] for m in told] == [-3.0, -1.0, 3.0, -3.0, 3.0, -3.0, -3.0, 2.0]
    # constraints_func's values are stored as returned: float32 ones from a model too.
    funcs = BojaxSampler(seed=0, constraints_func=lambda t: [np.float32(-np.inf)], **FAST)
    study = optuna.create_study(sampler=funcs)
    study.optimize(lambda t: t.suggest_float("x", 0.0, 1.0), n_trials=1)
    _, outcome = funcs._study_settings(study, study.trials)
    assert outcome(study.trials[0])["constraint_0"] == -1.0  # satisfied, not a failure
    assert [m["objective_0"] for m in told] == pytest.approx([(x - 0.2) ** 2 for x, _ in points])


@pytest.mark.slow  # (the fast tier's heaviest: 16 trials' fits, 50 s; CI runs it)
def test_a_trial_failing_before_its_branchs_parameters_is_a_failure_at_its_proposal():
    """``mom`` is suggested only where ``sgd`` is chosen, and ``adam`` always raises before
    it: the failed trials lack ``mom``, which the complete trials' intersection models.
    Left out of the model, the same failing point was proposed at every later trial."""

    def objective(trial):
        opt = trial.suggest_categorical("opt", ["adam", "sgd"])
        lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
        if opt == "adam":
            raise RuntimeError("adam diverges here")
        mom = trial.suggest_float("mom", 0.0, 0.99)
        return (math.log10(lr) + 2) ** 2 + (mom - 0.9) ** 2

    study = optuna.create_study(sampler=BojaxSampler(surrogate="gp-map", seed=0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        study.optimize(objective, n_trials=16, catch=(RuntimeError,))
    left_out = [int(re.search(r"trial (\d+)", str(w.message)).group(1))
                for w in caught if "out of its model" in str(w.message)]  # fmt: skip
    assert all(number < 5 for number in left_out)  # only the startup trials: none proposed
    modelled = study.trials[7:]  # after the startup trials and the first fits
    assert sum(t.state == optuna.trial.TrialState.COMPLETE for t in modelled) >= 4
    failed = [tuple(sorted(t.params.items())) for t in modelled if t.params["opt"] == "adam"]
    assert max(failed.count(p) for p in failed) <= 2


def test_ranges_bojax_cannot_model_go_to_the_independent_sampler_and_large_grids_stay_on_grid():
    """An int range past 2**53 raised SpaceDefinitionError inside suggest_int (the study
    stopped); a stepped grid of 10 million values, modelled as an ordinal, took a minute
    and 3 GB for 7 trials: it is modelled on its interval and proposals are put on it."""
    from optuna.distributions import FloatDistribution, IntDistribution

    from bojax.integrations.optuna import _on_step, _parameter
    from bojax.spaces import Integer

    assert isinstance(_parameter("n", IntDistribution(0, 2 * 10**7, step=2)), Integer)
    assert _parameter("seed", IntDistribution(0, 2**62)) is None
    small = FloatDistribution(0.0, 0.3, step=0.1)  # an ordinal: its values stay as they are
    assert _on_step("x", small, 0.3) == 0.3  # (a floor of 0.3 / 0.1 once made it 0.2)

    class Strict(optuna.samplers.RandomSampler):
        """Past the startup trials only the unmodelled seed may come from here: an
        off-grid relative proposal would fall back to it (Optuna checks the value)."""

        def sample_independent(self, study, trial, name, distribution):
            assert trial.number < 5 or name == "seed", (trial.number, name)
            return super().sample_independent(study, trial, name, distribution)

    def objective(trial):
        seed = trial.suggest_int("seed", 0, 2**62)
        n = trial.suggest_int("n", 0, 2 * 10**7, step=2)
        y = trial.suggest_float("y", 0.0, 1.0, step=1e-7)
        return abs(n - 10**6) / 1e7 + y + (seed % 7) * 1e-3

    sampler = BojaxSampler(surrogate="gp-map", seed=0, independent_sampler=Strict(seed=0))
    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=8)
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    for t in study.trials:
        assert t.params["n"] % 2 == 0 and 0 <= t.params["n"] <= 2 * 10**7
        assert abs(t.params["y"] * 1e7 - round(t.params["y"] * 1e7)) < 1e-6


@pytest.mark.slow  # 10-20 s: two model proposals (fast tier at 300 s)
def test_a_trial_that_finishes_while_a_proposal_is_made_is_data_or_pending(monkeypatch):
    """The sampler read the finished trials, then (fits later) the running ones: a trial
    that finished in between was neither, and its point was proposed again (review:
    duplicates with n_jobs=2 on sqlite). Here trial A finishes inside B's proposal."""
    import bojax.bo.loop as loop

    sampler = BojaxSampler(surrogate="gp-map", seed=0, n_startup_trials=3)
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda t: t.suggest_float("x", -5, 5) ** 2 + t.suggest_float("y", -5, 5),
                   n_trials=4)  # fmt: skip
    a = study.ask()
    a.suggest_float("x", -5.0, 5.0)  # A's point is proposed; A is still suggesting
    proposed = np.asarray(sampler._proposed[_trial_key(study, a)][1])  # (per trial made)
    settings, seen = sampler._study_settings, []

    def finishing_a(*args):  # A ends (without y) while B's proposal is under way
        if not seen:
            study.tell(a, 1.0)
        return settings(*args)

    ask_batch = loop.ask_batch

    def recording(state, q, pending=None, **kwargs):
        seen.append((len(state.y), pending))
        return ask_batch(state, q, pending, **kwargs)

    monkeypatch.setattr(sampler, "_study_settings", finishing_a)
    monkeypatch.setattr(loop, "ask_batch", recording)
    b = study.ask()
    b.suggest_float("x", -5.0, 5.0)
    told, pending = seen[0]
    assert told == 4 and pending is not None  # A: not data yet (no y), but pending
    assert any(np.allclose(row, proposed) for row in pending)


@pytest.mark.parametrize(
    "direction", ["minimize", pytest.param("maximize", marks=pytest.mark.slow)]
)
def test_a_conditional_studys_branch_choice_stays_modelled_once_each_branch_is_tried(direction):
    """The parameters every trial shares (the branch) make a space of three points; once
    each was tried the sampler said the space was exhausted and chose branches at random
    for the rest of the study (branch 'a' got 5 of 26 trials; review CD)."""
    sign = -1.0 if direction == "maximize" else 1.0

    def objective(trial):
        branch = trial.suggest_categorical("k", ["a", "b", "c"])
        if branch == "a":
            return sign * (trial.suggest_float("xa", 0.0, 1.0) - 0.2) ** 2
        if branch == "b":
            return sign * (10.0 + trial.suggest_float("xb", 0.0, 1.0))
        return sign * (10.0 + trial.suggest_int("nc", 0, 10))

    study = optuna.create_study(
        sampler=BojaxSampler(seed=0, n_startup_trials=4, **FAST), direction=direction
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        study.optimize(objective, n_trials=16)
    assert not [w for w in caught if "exhausted" in str(w.message)]
    chosen = [t.params["k"] for t in study.trials[4:]]
    assert chosen.count("a") >= 8, chosen  # (by chance: about 4 of the 12)


def test_a_parameter_suggested_from_differing_distributions_is_warned_about_once():
    """An added trial with a wider range made Optuna's intersection drop ``x``, and every
    later trial drew it at random without a word (review CD)."""
    study = optuna.create_study(sampler=BojaxSampler(seed=0, n_startup_trials=3, **FAST))
    study.add_trial(optuna.trial.create_trial(
        params={"x": 2.9, "y": 0.0}, value=0.01,
        distributions={"x": F(0.0, 20.0), "y": F(0.0, 1.0)},
    ))  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        study.optimize(
            lambda t: (t.suggest_float("x", 0.0, 10.0) - 3) ** 2 + t.suggest_float("y", 0.0, 1.0),
            n_trials=6,
        )
    said = [str(w.message) for w in caught if "differing distributions" in str(w.message)]
    assert len(said) == 1 and "parameter 'x'" in said[0], said


def test_a_differing_distribution_of_a_trial_completing_late_is_warned_about():
    """The check read completed trials from an offset, and missed trial 0 completing
    after trials 1-5 (review CG)."""
    study = optuna.create_study(sampler=BojaxSampler(seed=0, n_startup_trials=3, **FAST))

    def objective(trial):
        return (trial.suggest_float("x", 0.0, 10.0) - 3) ** 2 + trial.suggest_float("y", 0.0, 1.0)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        slow = study.ask()  # a slow worker's trial, still running
        study.optimize(objective, n_trials=5)
        slow.suggest_float("x", 0.0, 20.0), slow.suggest_float("y", 0.0, 1.0)
        study.tell(slow, 0.5)
        study.optimize(objective, n_trials=2)
    assert sum("parameter 'x' was suggested from differing" in str(w.message) for w in caught) == 1
