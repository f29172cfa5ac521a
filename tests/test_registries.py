"""Registries of records and the settings spelled once: a user's own entry is one function
and one register call, and works in minimize, ask/tell, the CLI and the Optuna sampler."""

import dataclasses
import json
import math
import textwrap

import jax.numpy as jnp
import numpy as np
import pytest
from typer.testing import CliRunner

import bojax
from bojax import cli, user_code
from bojax.bo import policies
from bojax.bo.acquisition import ACQUISITIONS, AcquisitionRecord, get_acquisition
from bojax.bo.policies import POLICIES, PolicyRecord
from bojax.bo.settings import Settings
from bojax.errors import SettingsError, UnknownNameError
from bojax.objectives.problems import get_problem
from bojax.registry import Registry
from bojax.surrogates import GPSurrogate

FAST = {"surrogate": "gp-map", "initial": 3, "num_candidates": 64, "progress": False}
runner = CliRunner()


class Entry:
    def __init__(self, name):
        self.name = name


def test_a_registry_refuses_duplicates_restores_scoped_entries_and_lists_known_names():
    registry = Registry("widget")
    first = registry.register(Entry("a"))
    assert registry.get("a") is first and "a" in registry and registry.names() == ("a",)
    with pytest.raises(SettingsError, match="already registered"):
        registry.register(Entry("a"))
    replacement = Entry("a")
    with registry.scoped(replacement):
        assert registry.get("a") is replacement
    assert registry.get("a") is first  # the scoped entry is gone, the old one back
    with registry.scoped(Entry("b")):
        assert registry.names() == ("a", "b")
    assert "b" not in registry
    with pytest.raises(UnknownNameError, match="unknown widget 'c'; known: a"):
        registry.get("c")
    with pytest.raises(SettingsError, match="non-empty string"):
        registry.register(object())


def test_records_are_checked_when_registered():
    with pytest.raises(SettingsError, match="AcquisitionRecord"):
        ACQUISITIONS.register(lambda mean, var, best: mean, "bare")
    with pytest.raises(SettingsError, match="PolicyRecord"):
        POLICIES.register(Entry("p"))
    # Options are settings: an unknown one failed after the initial design (review CQ).
    reads = AcquisitionRecord("reads", lambda m, v, b, temperature: -m[0], options=("temperature",))
    with pytest.raises(SettingsError, match=r"reads options \['temperature'\], which are not"):
        ACQUISITIONS.register(reads)


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (lambda mean, var, best: -mean, r"one score per point.*returned shape \(2, 3\)"),
        (lambda mean, var, best: jnp.mean(-mean), r"one score per point.*returned shape \(\)"),
        (lambda mean, var, best: np.asarray(mean)[0], "fails on mean and var.*Tracer"),
    ],
)
def test_an_acquisition_of_the_wrong_shape_is_refused_by_the_settings(fn, message):
    with ACQUISITIONS.scoped(AcquisitionRecord("odd", fn)):
        with pytest.raises(SettingsError, match=message):
            Settings(acquisition="odd")


def test_an_acquisition_that_scores_every_candidate_nan_is_warned_of():
    nan = AcquisitionRecord("nan", lambda mean, var, best: jnp.full(mean.shape[1], jnp.nan))
    problem = get_problem("forrester")
    with ACQUISITIONS.scoped(nan), pytest.warns(RuntimeWarning, match="scored NaN at every"):
        bojax.minimize(
            problem, problem.space, acquisition="nan", surrogate="gp-map", initial=3,
            iterations=1, num_candidates=64, progress=False,
        )  # fmt: skip


def test_a_setting_given_an_object_where_a_name_is_kept_says_to_register_it():
    with pytest.raises(SettingsError, match=r"register it first \(SURROGATES.register"):
        Settings(surrogate=GPSurrogate(method="map"))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"iterations": -1}, "iterations must be a non-negative integer"),
        ({"initial": 0}, "initial must be an integer >= 1"),
        ({"num_candidates": 2.5}, "num_candidates must be an integer >= 1"),
        ({"seed": True}, "seed must be a non-negative integer"),
        ({"maximize": "yes"}, "maximize must be True or False"),
        ({"kappa": -1.0}, r"kappa must be a number in \[0, inf\)"),
        ({"kappa": math.nan}, "kappa must be a number"),
        ({"optimizer": "lbfgs"}, "optimizer must be one of"),
        ({"samples": 0}, "samples must be an integer >= 1 or None"),
        ({"stop_sd": 0.0}, r"stop_sd must be a number in \(0, inf\) or None"),
        ({"min_success_probability": 1.0}, r"min_success_probability must be a number in \(0, 1\)"),
        ({"warping": "log"}, "warping must be one of"),
        ({"fantasy": "kriging"}, "fantasy must be one of"),
        ({"q": 0}, "q must be an integer >= 1 or None"),
        ({"retries": -1}, "retries must be a non-negative integer"),
        ({"policy": "hybrid", "tau": 1.5}, r"tau for policy 'hybrid' must lie in \[0, 1.0\]"),
        ({"surrogate": "gp-nope"}, "unknown surrogate 'gp-nope'"),
        ({"acquisition": "ucb"}, "unknown acquisition 'ucb'; known: ei, lcb, log_ehvi, log_ei"),
        ({"failure_model": "svm"}, "unknown failure model"),
        ({"policy": "greedy"}, "unknown policy"),
        ({"itertions": 3}, "unknown setting.*'itertions'"),
    ],
)
def test_every_bad_setting_is_a_typed_error_naming_it(override, message):
    with pytest.raises((SettingsError, UnknownNameError), match=message):
        Settings().replace(**override)


def test_an_acquisition_of_several_outputs_is_refused_where_one_objective_is_modelled():
    record = AcquisitionRecord("several", lambda mean, var, best: mean[..., 0], outputs=None)
    with ACQUISITIONS.scoped(record):
        with pytest.raises(SettingsError, match="is for several metrics"):
            Settings(acquisition="several")
        assert Settings(acquisition="several", objectives=["a:min", "b:min"]).metrics
    with pytest.raises(SettingsError, match="models one objective"):
        Settings(acquisition="ei", objectives=["a:min", "b:min"])


def test_every_setting_has_a_help_text_and_the_journal_identity_keeps_its_old_keys():
    for spec in dataclasses.fields(Settings):
        assert spec.metadata["help"], spec.name
        assert spec.metadata["help"] in Settings.__doc__
    # Journals written before any setting was added hold exactly these keys: at their
    # defaults, the settings added since must stay out, or old journals stop resuming.
    assert set(Settings().identity()) == {
        "surrogate", "acquisition", "optimizer", "initial", "seed", "maximize",
        "num_candidates", "kappa", "incumbent",
    }  # fmt: skip
    assert Settings(policy="hybrid", q=4, max_failures=3).identity()["policy"] == "hybrid"
    assert "q" not in Settings(q=4).identity() and "iterations" not in Settings().identity()


@pytest.mark.slow
def test_minimize_takes_settings_and_keyword_overrides_alike():
    forrester = get_problem("forrester")
    settings = Settings(surrogate="gp-map", initial=3, iterations=2, num_candidates=64)
    one = bojax.minimize(forrester, forrester.space, settings, progress=False)
    two = bojax.minimize(forrester, forrester.space, **{**FAST, "iterations": 2})
    assert [r["u"] for r in one.history] == [r["u"] for r in two.history]
    with pytest.raises(SettingsError, match="unknown setting"):
        bojax.minimize(forrester, forrester.space, iteratons=2)


def _shifted_lcb(mean, var, best, kappa):
    """A user's acquisition with a setting as its option: LCB read through ``kappa``."""
    return (kappa * np.sqrt(2.0) * var**0.5 - mean).mean(axis=0)


def test_a_users_acquisition_is_one_function_and_one_call_in_minimize_and_ask_tell(tmp_path):
    forrester = get_problem("forrester")
    calls = []

    def traced(mean, var, best, kappa):
        calls.append(kappa)  # runs when the loop traces the score
        return _shifted_lcb(mean, var, best, kappa)

    record = AcquisitionRecord("shifted_lcb", traced, options=("kappa",))
    with ACQUISITIONS.scoped(record):
        result = bojax.minimize(
            forrester, forrester.space, acquisition="shifted_lcb", iterations=2,
            out=tmp_path / "run", **FAST,
        )  # fmt: skip
        proposals = []
        for kappa in (0.0, 50.0):  # the setting reaches the function: exploit, then explore
            state = bojax.init(
                forrester.space, acquisition="shifted_lcb", kappa=kappa, initial=3,
                surrogate="gp-map", num_candidates=64,
            )  # fmt: skip
            for _ in range(3):
                u, state, _ = bojax.ask(state)
                state = bojax.tell(state, u, forrester(forrester.space.from_unit(u)))
            u, state, info = bojax.ask(state)
            proposals.append(info["acquisition_value"])
    assert calls and info["phase"] == "bo"
    assert proposals[1] > proposals[0] + 1.0, proposals  # 50 sqrt(2) sd, far from 0
    header = json.loads((tmp_path / "run" / "run.json").read_text())
    assert header["settings"]["acquisition"] == "shifted_lcb"
    assert result.evaluations == 5
    with pytest.raises(UnknownNameError):
        get_acquisition("shifted_lcb")  # gone with the block


def test_a_users_policy_needs_no_side_table():
    """A policy registered without a default threshold (once a KeyError) that always
    explores: every BO step evaluates the uncertain point."""
    forrester = get_problem("forrester")
    record = PolicyRecord("always-explore", lambda proposals, tau, scaling: 0.0)
    with POLICIES.scoped(record):
        result = bojax.minimize(
            forrester, forrester.space, policy="always-explore", iterations=2, **FAST
        )
    explored = [r["diagnostics"]["explored"] for r in result.history if r["phase"] == "bo"]
    assert explored == [1.0, 1.0]
    assert policies.POLICIES.get("hybrid").default_tau == 0.8


PLUGIN = """
import bojax.bo.acquisition as acquisition

def scaled_pi(mean, var, best):
    return acquisition.probability_of_improvement(mean, var, best) * 2.0

acquisition.ACQUISITIONS.register(acquisition.AcquisitionRecord("scaled_pi", scaled_pi))
"""


def test_the_cli_names_what_a_plugin_registers(tmp_path):
    plugin = tmp_path / "my_plugin.py"
    plugin.write_text(textwrap.dedent(PLUGIN))
    listed = runner.invoke(cli.app, ["list", "acquisitions", "--plugin", str(plugin)])
    assert listed.exit_code == 0, listed.output
    assert "scaled_pi" in listed.output
    unknown = runner.invoke(cli.app, ["list", "acquisitions"])
    assert unknown.exit_code == 0 and "scaled_pi" in unknown.output  # this process keeps it
    ACQUISITIONS.unregister("scaled_pi")
    refused = runner.invoke(cli.app, ["optimize", "forrester", "--acquisition", "scaled_pi"])
    assert refused.exit_code == 1 and "unknown acquisition 'scaled_pi'" in refused.output


SURROGATE_PLUGIN = """
from bojax import gp
from bojax.surrogates import SURROGATES, GPSurrogate

SURROGATES.register(GPSurrogate(model=gp.GP(kernel="matern32"), method="map"), "gp-map-m32")
"""


@pytest.mark.slow  # a run and a refit through the CLI (15 s)
def test_show_plot_and_repair_read_a_plugin_run_with_its_plugin(tmp_path, monkeypatch):
    """A run whose surrogate a plugin registered: the commands that read it back take
    --plugin as optimize does (plot's refit could not name the surrogate)."""
    from bojax.surrogates import SURROGATES

    plugin = tmp_path / "m32_plugin.py"
    plugin.write_text(textwrap.dedent(SURROGATE_PLUGIN))
    out = tmp_path / "run"
    args = ["optimize", "forrester", "--plugin", str(plugin), "--surrogate", "gp-map-m32",
            "--initial", "3", "--iterations", "1", "--candidates", "64",
            "--out", str(out)]  # fmt: skip
    assert runner.invoke(cli.app, args).exit_code == 0
    SURROGATES.unregister("gp-map-m32")
    refused = runner.invoke(cli.app, ["plot", str(out), "--out", str(tmp_path / "a")])
    assert refused.exit_code == 1 and "unknown surrogate 'gp-map-m32'" in refused.output
    monkeypatch.setattr(user_code, "_LOADED", {})  # as a new process: the file runs again
    for command in (["plot", str(out), "--out", str(tmp_path / "b")], ["show", str(out)],
                    ["repair", str(out)]):  # fmt: skip
        done = runner.invoke(cli.app, [*command, "--plugin", str(plugin)])
        assert done.exit_code == 0, done.output
    assert (tmp_path / "b" / "slices.png").exists()
    SURROGATES.unregister("gp-map-m32")


@pytest.mark.slow  # a whole CLI run and an Optuna study with a new acquisition's programs
def test_a_plugins_acquisition_runs_in_the_cli_and_the_optuna_sampler(tmp_path):
    optuna = pytest.importorskip("optuna")
    from bojax.integrations.optuna import BojaxSampler

    plugin = tmp_path / "my_plugin.py"
    plugin.write_text(textwrap.dedent(PLUGIN))
    out = tmp_path / "run"
    args = ["optimize", "forrester", "--plugin", str(plugin), "--acquisition", "scaled_pi"]
    fast = ["--iterations", "2", "--initial", "3", "--surrogate", "gp-map", "--candidates", "64"]
    result = runner.invoke(cli.app, [*args, *fast, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "run.json").read_text())["settings"]["acquisition"] == "scaled_pi"
    study = optuna.create_study(
        sampler=BojaxSampler(seed=0, acquisition="scaled_pi", surrogate="gp-map")
    )
    study.optimize(lambda t: (t.suggest_float("x", -1.0, 1.0) - 0.3) ** 2, n_trials=7)
    assert len(study.trials) == 7
    ACQUISITIONS.unregister("scaled_pi")
