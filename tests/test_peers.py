"""The peers (bojax.reports.peers): one ask/tell interface over a bojax space, conditional
parameters left out where absent, failures told, optional libraries with clear errors."""

import sys

import numpy as np
import pytest

from bojax.errors import SettingsError
from bojax.parameters import Categorical, Condition, Integer, Ordinal, Real
from bojax.reports.peers import PEERS, RandomSearch, run
from bojax.spaces import Space

SPACE = Space(
    [
        Integer("layers", 0, 2),
        Real("width", 1.0, 100.0, log=True, condition=Condition("layers", ">=", 1)),
        Real("rate", 0.0, 1.0),
        Categorical("optimiser", ("sgd", "adam")),
        Real("momentum", 0.0, 1.0, condition=Condition("optimiser", "==", "sgd")),
        Ordinal("batch", (16, 32, 64)),
    ]
)


def objective(point) -> float:
    if point["rate"] > 0.9:
        raise FloatingPointError("diverged")
    value = point["rate"] + 0.1 * point["layers"] + 0.001 * point.get("width", 0.0)
    return value + point.get("momentum", 0.5) + point["batch"] / 64


def test_random_search_is_seeded_snapped_and_conditional():
    points = [RandomSearch(SPACE, 3).ask() for _ in range(2)]
    assert points[0] == points[1]  # the seed fixes the draws
    drawn = run(RandomSearch(SPACE, 4), objective, 40, catch=(FloatingPointError,))
    for record in drawn:
        x = record["x"]
        assert isinstance(x["layers"], int) and ("width" in x) == (x["layers"] >= 1)
        assert ("momentum" in x) == (x["optimiser"] == "sgd") and x["batch"] in (16, 32, 64)
        assert (record["status"] == "failed") == (x["rate"] > 0.9)
        assert (record["y"] is None) == (record["status"] == "failed")
    assert {r["x"]["layers"] for r in drawn} == {0, 1, 2}
    assert any(r["status"] == "failed" for r in drawn)


def test_tpe_is_optunas_define_by_run_study():
    """The peer proposes what Optuna's own define-by-run loop proposes, failures and a
    shared initial design included (told points become finished trials)."""
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    design = [
        {"layers": 2, "width": 10.0, "rate": 0.5, "optimiser": "adam", "batch": 32},
        {"layers": 0, "rate": 0.95, "optimiser": "sgd", "momentum": 0.9, "batch": 16},
    ]
    records = run(
        PEERS["tpe"].make(SPACE, seed=1, initial=3),
        objective, 12, initial=3, design=design, catch=(FloatingPointError,),
    )  # fmt: skip

    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=1, n_startup_trials=3))
    distributions = {
        "layers": optuna.distributions.IntDistribution(0, 2),
        "width": optuna.distributions.FloatDistribution(1.0, 100.0, log=True),
        "rate": optuna.distributions.FloatDistribution(0.0, 1.0),
        "optimiser": optuna.distributions.CategoricalDistribution(["sgd", "adam"]),
        "momentum": optuna.distributions.FloatDistribution(0.0, 1.0),
        "batch": optuna.distributions.CategoricalDistribution([16, 32, 64]),
    }
    for point in design:
        failed = point["rate"] > 0.9
        study.add_trial(
            optuna.trial.create_trial(
                params=point,
                distributions={k: distributions[k] for k in point},
                value=None if failed else objective(point),
                state=optuna.trial.TrialState.FAIL if failed else optuna.trial.TrialState.COMPLETE,
            )
        )

    def suggest(trial):
        point = {"layers": trial.suggest_int("layers", 0, 2)}
        if point["layers"] >= 1:
            point["width"] = trial.suggest_float("width", 1.0, 100.0, log=True)
        point["rate"] = trial.suggest_float("rate", 0.0, 1.0)
        point["optimiser"] = trial.suggest_categorical("optimiser", ["sgd", "adam"])
        if point["optimiser"] == "sgd":
            point["momentum"] = trial.suggest_float("momentum", 0.0, 1.0)
        point["batch"] = trial.suggest_categorical("batch", [16, 32, 64])
        return objective(point)

    study.optimize(suggest, n_trials=10, catch=(FloatingPointError,))
    assert [r["x"] for r in records] == [t.params for t in study.trials]
    assert [r["phase"] for r in records] == ["initial"] * 3 + ["bo"] * 9
    assert [r["status"] == "failed" for r in records] == [
        t.state == optuna.trial.TrialState.FAIL for t in study.trials
    ]


def test_missing_peer_libraries_name_the_install_command(monkeypatch):
    for module in ("optuna", "smac"):
        monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    with pytest.raises(SettingsError, match="uv sync --group bench"):
        PEERS["tpe"].make(SPACE, seed=0, initial=2)
    with pytest.raises(SettingsError, match="smac"):
        PEERS["smac"].make(SPACE, seed=0, initial=2, budget=5)
    assert not PEERS["smac"].available() or PEERS["smac"].packages == ("smac", "ConfigSpace")


def test_smac_runs_on_the_conditional_space(tmp_path):
    pytest.importorskip("smac")
    smac = PEERS["smac"].make(SPACE, seed=0, initial=3, budget=6, folder=tmp_path)
    records = run(smac, objective, 6, initial=3, catch=(FloatingPointError,))
    assert len(records) == 6
    for record in records:
        x = record["x"]
        assert ("width" in x) == (x["layers"] >= 1)
        assert ("momentum" in x) == (x["optimiser"] == "sgd") and x["batch"] in (16, 32, 64)
    with pytest.raises(SettingsError, match="initial design"):
        smac.tell(records[0]["x"], 0.5)  # SMAC3 draws its own start


def test_unknown_peer_lists_the_known_ones():
    with pytest.raises(LookupError, match="tpe"):
        PEERS["hyperopt"]
    assert {"random", "tpe", "optuna-gp", "optuna-bojax", "smac"} <= set(PEERS)
    assert np.all([PEERS[name].label for name in PEERS])


def test_scripts_with_smac_fix_pythons_hash_seed_so_a_seed_repeats_its_run():
    """SMAC3 orders its candidates by string hashes, randomised per process: the arc
    report's SMAC3 runs differed run to run under one seed (review)."""
    import os
    import subprocess
    import sys

    code = (
        "from bojax.reports.peers import fixed_hash_seed; fixed_hash_seed(); "
        "import os; print(os.environ['PYTHONHASHSEED'], hash('smac'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    runs = [
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        for _ in range(2)
    ]
    assert runs[0].returncode == 0, runs[0].stderr
    assert runs[0].stdout == runs[1].stdout and runs[0].stdout.startswith("0 ")
    kept = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONHASHSEED": "7"},
                          capture_output=True, text=True)  # fmt: skip
    assert kept.stdout.startswith("7 ")  # a user's own value is kept
    ignored = subprocess.run([sys.executable, "-E", "-c", code], env=env, capture_output=True,
                             text=True)  # fmt: skip
    assert "cannot be fixed" in ignored.stderr  # -E ignores the variable: said, not re-run
