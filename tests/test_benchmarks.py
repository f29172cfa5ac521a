"""Smoke runs of the benchmark scripts with bojax arms only (the peers are optional)."""

import importlib.util
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import LOOP_EMITTERS, jaxlib_version, suite_xla_flags

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_speed_times_bojax_without_recompiling_in_steady_iterations(tmp_path):
    speed = load("speed")
    argv = ["--sizes", "6", "--dims", "2", "--repeats", "2", "--methods", "bojax gp-map"]
    rows = speed.main([*argv, "--out", str(tmp_path)])
    (row,) = rows
    assert (row["method"], row["d"], row["n"]) == ("bojax gp-map", 2, 6)
    assert row["compilations"] >= 1 and row["steady_compilations"] == 0
    assert 0 < row["steady"] and 0 < row["first"] and row["compile"] >= 0
    saved = json.loads((tmp_path / "speed.json").read_text())
    assert saved["rows"][0]["steady_all"] == row["steady_all"]
    assert saved["machine"]["versions"]["jax"] and saved["machine"]["cholesky_128_us"] > 0
    assert (tmp_path / "speed.png").stat().st_size > 10_000


@pytest.mark.slow
def test_chains_measure_effective_samples_per_second(tmp_path):
    chains = load("chains")
    chains.main(["--quick", "--configs", "gp-slice, 16 sweeps", "--out", str(tmp_path)])
    (row,) = json.loads((tmp_path / "chains_quick.json").read_text())["rows"]
    assert row["config"] == "gp-slice, 16 sweeps" and row["draws"] == 8 * 16
    assert 0 < row["ess"] <= row["draws"] * 1.5 and row["ess_per_s"] > 0


@pytest.mark.slow
def test_regret_runs_are_kept_reused_and_ranked(tmp_path):
    regret = load("regret")
    argv = ["--seeds", "1", "--functions", "forrester", "--out", str(tmp_path)]
    summary = regret.main([*argv, "--methods", "bojax gp-map", "random"])
    runs = sorted((tmp_path / "regret_runs" / "forrester").glob("*/seed*.json"))
    assert len(runs) == 2
    row = json.loads(runs[0].read_text())
    assert len(row["y"]) == regret.budget("forrester") == 30 and row["initial"] == 3
    # Both methods start from the same Sobol design.
    other = json.loads(runs[1].read_text())
    assert row["seed"] == other["seed"] and row["y"][:3] == other["y"][:3]
    table = summary["functions"]["forrester"]
    # A GP with EI finds Forrester's minimum in 27 steps; random search does not get as close.
    assert table["bojax gp-map"]["final_quartiles"][1] < table["random"]["final_quartiles"][1]
    assert (table["bojax gp-map"]["rank"], table["random"]["rank"]) == (1.0, 2.0)
    assert (tmp_path / "regret.png").stat().st_size > 10_000
    # A rerun reuses every kept run (nothing rewritten) and gives the same summary.
    stamps = [p.stat().st_mtime_ns for p in runs]
    again = regret.main([*argv, "--methods", "bojax gp-map", "random"])
    assert [p.stat().st_mtime_ns for p in runs] == stamps
    assert again == summary


def test_ranks_and_targets_follow_the_median_final_regret():
    regret = load("regret")
    curves = {
        "f": {
            "bojax gp-slice": np.array([[3.0, 1.0], [3.0, 2.0], [3.0, 0.5]]),
            "BoTorch GP": np.array([[3.0, 2.0], [3.0, 2.0], [3.0, 2.0]]),
            "random": np.array([[3.0, 3.0], [3.0, 1.5], [3.0, 3.0]]),
        },
        "g": {
            "bojax gp-slice": np.array([[1.0, 1.0]]),
            "BoTorch GP": np.array([[1.0, 0.1]]),
            "random": np.array([[1.0, 0.1]]),
        },
    }
    summary = regret.summarise(curves)
    assert [summary["functions"]["f"][m]["rank"] for m in curves["f"]] == [1, 2, 3]
    assert [summary["functions"]["g"][m]["rank"] for m in curves["g"]] == [3, 1.5, 1.5]
    assert summary["mean_rank"] == {"bojax gp-slice": 2.0, "BoTorch GP": 1.75, "random": 2.25}
    assert summary["gp_slice_at_most_botorch_on"] == ["f"]
    assert summary["functions"]["f"]["bojax gp-slice"]["final_quartiles"][1] == 1.0


def test_unknown_methods_are_refused_and_missing_peers_skipped(tmp_path, capsys):
    regret = load("regret")
    with pytest.raises(SystemExit) as exit_info:
        regret.main(["--methods", "bojax gp-nope", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "gp-nope" in capsys.readouterr().err
    methods = load("methods")
    with pytest.raises(ValueError, match="unknown method"):
        methods.make("nope", 2, 0, 5)
    assert methods.available("bojax gp-slice") and methods.available("random")
    botorch_here = importlib.util.find_spec("botorch") is not None
    assert methods.available("BoTorch GP") == botorch_here


@pytest.mark.slow
def test_the_emitter_benchmark_times_both_settings_in_fresh_processes():
    if LOOP_EMITTERS not in suite_xla_flags("", jaxlib_version()):
        pytest.skip("this jaxlib has no --xla_cpu_use_fusion_emitters flag")
    summary = load("cpu_emitters").main(["--repeats", "1", "--suite"])
    assert set(summary) == {"forrester gp-slice", "branin gp-map", "ensemble training"}
    for row in summary.values():
        assert all(row[f"{phase} {s}"] > 0 for phase in ("cold", "warm") for s in ("tiled", "loop"))
        assert math.isfinite(row["largest relative difference"])


def test_conditioning_benchmark_times_both_arms_and_they_agree(tmp_path):
    conditioning = load("conditioning")
    argv = ["--sizes", "20", "--pending", "3", "--samples", "4", "--repeats", "1"]
    (row,) = conditioning.main([*argv, "--out", str(tmp_path)])
    assert row["refactorise_s"] > 0 and row["extend_s"] > 0
    assert row["max_abs_difference"] < 1e-10
    saved = json.loads((tmp_path / "conditioning.json").read_text())
    assert saved["rows"] == [row]


@pytest.mark.slow
def test_failure_benchmark_counts_wasted_evaluations_and_keeps_its_runs(tmp_path):
    failures = load("failures")
    argv = ["--seeds", "1", "--problems", "branin-disc", "--methods", "bojax drop"]
    summary = failures.main([*argv, "--out", str(tmp_path)])
    (row,) = summary["rows"]
    run = json.loads((tmp_path / "failure_runs" / "branin-disc__bojax_drop__0.json").read_text())
    assert run["evaluations"] == 30 and 0 <= run["wasted"] <= run["failures"] <= 30
    assert row["mean_wasted"] == run["wasted"] and row["median_regret"] == run["regret"] >= 0
    assert failures.main([*argv, "--out", str(tmp_path)])["rows"] == summary["rows"]  # reused


@pytest.mark.slow
def test_mixed_benchmark_runs_keeps_its_runs_and_ranks_the_arms(tmp_path):
    mixed = load("mixed")
    argv = ["--seeds", "2", "--evaluations", "14", "--initial", "6", "--problems", "func3c",
            "--arms", "bojax", "bojax integer codes", "random", "--out", str(tmp_path)]  # fmt: skip
    summary = mixed.main(argv)
    runs = sorted((tmp_path / "mixed_runs" / "func3c").glob("*/seed*.json"))
    assert len(runs) == 6 and all(len(json.loads(p.read_text())["y"]) == 14 for p in runs)
    row = summary["func3c"]
    assert set(row) == {"bojax", "bojax integer codes", "random"}
    assert sorted(r["mean_rank"] for r in row.values()) == pytest.approx([1, 2, 3], abs=1.01)
    assert sum(r["mean_rank"] for r in row.values()) == pytest.approx(6.0)
    assert all(r["median"] >= 0 for r in row.values())  # regret against the known optimum
    stamps = [p.stat().st_mtime_ns for p in runs]
    assert mixed.main(argv) == summary and [p.stat().st_mtime_ns for p in runs] == stamps


@pytest.mark.slow
@pytest.mark.parametrize(("layers", "width"), [(1, 16), (3, 64)])
@pytest.mark.parametrize("normalisation", ["none", "layernorm"])
def test_the_training_tasks_size_counts_the_networks_trained_parameters(
    layers, width, normalisation
):
    """``params`` of ``mnist1d-size`` is the number of weights the padded network trains
    for the design: those a gradient reaches (layer norm adds none)."""
    import jax
    import jax.numpy as jnp

    from bojax.objectives import mixednet

    bench = load("multiobjective")
    point = {"optimizer": "adam", "activation": "tanh", "normalisation": normalisation,
             "layers": layers, "width": width, "learning_rate": 1e-3}  # fmt: skip
    network = mixednet.MixedNetObjective.__new__(mixednet.MixedNetObjective)
    network.space = mixednet.mixednet_space(3)
    design = network.design(point)
    _, (params, _) = mixednet._start(
        jax.random.key(0), mixednet.Training(), 40, 10, design["width"]
    )
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(64, 40)), jnp.float32)
    y = jnp.asarray(rng.integers(0, 10, 64), jnp.int32)
    grads = jax.grad(mixednet._loss)(params, design, x, y)
    trained = sum(int(np.count_nonzero(np.asarray(g))) for g in jax.tree.leaves(grads))
    assert bench._parameters(point) == trained


def test_multiobjective_benchmark_keeps_its_runs_and_scores_hypervolumes(tmp_path):
    bench = load("multiobjective")
    argv = ["--seeds", "2", "--evaluations", "9", "--problems", "c-branin-currin",
            "--arms", "bojax-ehvi", "random", "--out", str(tmp_path)]  # fmt: skip
    summary = bench.main(argv)
    runs = sorted((tmp_path / "multiobjective_runs" / "c-branin-currin").glob("*/seed*.json"))
    assert len(runs) == 4 and all(len(json.loads(p.read_text())["metrics"]) == 9 for p in runs)
    for path in runs:  # each run's hypervolume history is its feasible evaluations' own
        run = json.loads(path.read_text())
        feasible = [m for m in run["metrics"] if m is not None and m["disc"] <= 50.0]
        values = np.array([[m["branin"], m["currin"]] for m in feasible]).reshape(-1, 2)
        from bojax.bo import pareto

        assert run["hypervolume"][-1] == pytest.approx(pareto.hypervolume(values, [80.0, 12.0]))
        assert np.all(np.diff(run["hypervolume"]) >= 0)
    row = summary["c-branin-currin"]
    assert set(row) == {"bojax-ehvi", "random"}
    assert sum(r["mean_rank"] for r in row.values()) == pytest.approx(3.0)
    assert (tmp_path / "multiobjective.png").exists()
    stamps = [p.stat().st_mtime_ns for p in runs]
    assert bench.main(argv) == summary and [p.stat().st_mtime_ns for p in runs] == stamps
    # One arm again: the other arm's kept runs stay in the summary and its file
    assert bench.main([*argv[:7], "random", *argv[9:]]) == summary
    assert json.loads((tmp_path / "multiobjective.json").read_text()) == summary


@pytest.mark.slow
def test_scale_benchmark_keeps_its_runs_and_times_asks_in_fresh_processes(tmp_path):
    bench = load("scale")
    argv = ["--seeds", "2", "--evaluations", "32", "--problems", "hartmann6",
            "--arms", "bojax", "random", "--out", str(tmp_path)]  # fmt: skip
    summary = bench.main(argv)
    runs = sorted((tmp_path / "scale_runs" / "hartmann6").glob("*/seed*.json"))
    assert len(runs) == 4 and all(len(json.loads(p.read_text())["y"]) == 32 for p in runs)
    row = summary["hartmann6"]
    assert sum(r["mean_rank"] for r in row.values()) == pytest.approx(3.0)
    assert all(r["median"] >= 0 for r in row.values())  # regret against the known optimum
    assert row["bojax"]["batch_seconds"] > 0 and (tmp_path / "scale.png").exists()
    stamps = [p.stat().st_mtime_ns for p in runs]
    assert bench.main(argv) == summary and [p.stat().st_mtime_ns for p in runs] == stamps
    (speed,) = bench.main(["--speed", "--sizes", "20", "--dims", "2", "--out", str(tmp_path)])
    assert speed["steady_compilations"] == 0 and speed["peak_mib"] > 0


@pytest.mark.slow
def test_multifidelity_benchmark_runs_its_arms_on_lcbench_curves(tmp_path):
    pytest.importorskip("onnxruntime")  # the bench group's; CI's dev group lacks it
    bench = load("multifidelity")
    if not (bench.LCBENCH / "model.onnx").exists():
        pytest.skip(f"no LCBench surrogate at {bench.LCBENCH}")
    arms = ["bojax-full", "bojax-hyperband", "bojax-freeze-thaw", "bojax-freeze-thaw-seconds",
            "top-k", "random"]  # fmt: skip
    argv = ["--quick", "--tasks", "3945", "--arms", *arms, "--out", str(tmp_path)]
    summary = bench.main(argv)
    budget = bench.budget_of("3945", quick=True)
    runs = sorted((tmp_path / "multifidelity_quick_runs").glob("3945_*_0.json.gz"))
    assert len(runs) == len(arms)
    assert all(len(bench.read_run(p)["values"]) == budget for p in runs)
    rows = summary["3945"]["arms"]
    for row in rows.values():  # regret against the lowest error known: never negative
        quartiles = [row["regret"][f] for f in ("0.1", "0.25", "0.5", "1.0")]
        assert all(q[0] >= 0 for q in quartiles)
        assert all(a[0] >= b[0] for a, b in itertools.pairwise(quartiles))  # non-increasing
    assert rows["bojax-full"]["epochs_to_full"] <= budget
    runs_folder = tmp_path / "multifidelity_quick_runs"
    decisions = bench.read_run(runs_folder / "3945_bojax-freeze-thaw_0.json.gz")["decisions"]
    assert decisions and all(seconds > 0 for _, seconds in decisions)
    assert (tmp_path / "multifidelity_quick.png").exists()
    for path in runs:  # the clock: the surrogate's training seconds plus the arm's own
        run = bench.read_run(path)
        assert len(run["clock"]) == budget and np.all(np.diff(run["clock"]) >= 0)
        assert run["clock"][0] > 0 and run["clock"][-1] > 10 * run["seconds"]
    assert summary["3945"]["seconds"]["seeds"] == 1
    assert (tmp_path / "multifidelity_quick_seconds.png").exists()


@pytest.mark.slow
def test_the_resume_benchmark_resumes_a_freeze_thaw_run_with_and_without_its_chains(tmp_path):
    pytest.importorskip("onnxruntime")
    bench = load("multifidelity")
    if not (bench.LCBENCH / "model.onnx").exists():
        pytest.skip(f"no LCBench surrogate at {bench.LCBENCH}")
    row = bench.main(["--resume", "--budget", "160", "--out", str(tmp_path)])
    assert row["budget"] == 160 and row["decisions"] > 10  # records compared inside
    assert all(row[k] > 0 for k in ("run_s", "resume_kept_s", "resume_replayed_s"))
    assert json.loads((tmp_path / "multifidelity_resume.json").read_text()) == row


@pytest.mark.slow
def test_multifidelity_benchmark_tabulates_mnist1d_runs_without_lcbench(tmp_path):
    """The whole default path (runs, reuse, table, figure) on bojax's own training task,
    which needs no ONNX runtime, so CI exercises it."""
    bench = load("multifidelity")
    argv = ["--quick", "--tasks", "mnist1d", "--arms", "top-k", "random",
            "--lcbench", str(tmp_path / "absent"), "--out", str(tmp_path)]  # fmt: skip
    summary = bench.main(argv)
    runs = sorted((tmp_path / "multifidelity_quick_runs").glob("mnist1d_*_0.json.gz"))
    assert [p.name.split("_")[1] for p in runs] == ["random", "top-k"]
    budget = bench.budget_of("mnist1d", quick=True)
    assert all(len(bench.read_run(p)["values"]) == budget for p in runs)
    assert set(summary["mnist1d"]["arms"]) == {"top-k", "random"}
    assert (tmp_path / "multifidelity_quick.png").stat().st_size > 10_000
    for path in runs:  # a real training's clock: the run's own seconds, epoch by epoch
        run = bench.read_run(path)
        assert len(run["clock"]) == budget and np.all(np.diff(run["clock"]) >= 0)
        assert run["clock"][-1] <= run["seconds"] + 0.01
    timed = summary["mnist1d"]["seconds"]
    assert timed["seeds"] == 1 and set(timed["arms"]) == {"top-k", "random"}
    assert (tmp_path / "multifidelity_quick_seconds.png").stat().st_size > 10_000
    kept = [p.stat().st_mtime_ns for p in runs]
    again = bench.main(argv)  # reused, not run again
    assert [p.stat().st_mtime_ns for p in runs] == kept
    assert again["mnist1d"]["arms"]["random"] == summary["mnist1d"]["arms"]["random"]


@pytest.mark.slow  # compiles the report-sized ensemble trainer, alone and batched
def test_the_batched_speed_benchmark_times_the_ensemble_trainer(tmp_path):
    bench = load("multifidelity")
    argv = ["--batched", "--trainer", "ensemble", "--sizes", "1", "2", "--out", str(tmp_path)]
    rows = bench.main(argv)["batched"]
    assert [row["designs"] for row in rows] == [1, 2]
    assert all(row["trainer"] == "ensemble" and row["epochs"] == 500 for row in rows)
    assert all(row["alone_per_s"] > 0 and row["batched_per_s"] > 0 for row in rows)
    saved = json.loads((tmp_path / "multifidelity_batched_ensemble.json").read_text())
    assert saved == rows


def test_multifidelity_tables_share_seeds_unless_every_seed_is_asked_for(tmp_path):
    bench = load("multifidelity")
    kept = {"bojax-full": [0, 1, 2], "random": [0, 2]}
    for arm, seeds in kept.items():
        for seed in seeds:
            run = {"values": [0.5, 0.4 - 0.1 * seed], "seconds": 1.0}
            bench.write_run(bench.run_path(tmp_path, "3945", arm, seed), run)
    shared = bench.existing(["3945"], list(kept), 3, tmp_path)["3945"]
    assert {arm: len(runs) for arm, runs in shared.items()} == {"bojax-full": 2, "random": 2}
    every = bench.existing(["3945"], list(kept), 3, tmp_path, every=True)["3945"]
    assert {arm: len(runs) for arm, runs in every.items()} == {"bojax-full": 3, "random": 2}
    assert [r["values"][-1] for r in every["random"]] == pytest.approx([0.4, 0.2])


def test_multifidelity_regret_against_seconds_reads_each_run_on_its_own_clock():
    bench = load("multifidelity")
    arms = {
        "bojax-full": [
            {"values": [0.5, 0.3, 0.2], "clock": [10.0, 20.0, 30.0]},
            {"values": [0.4, 0.1, 0.1], "clock": [5.0, 50.0, 60.0]},
            {"values": [0.9, 0.9, 0.9], "clock": [1.0, 2.0, 3.0]},
        ],
        "random": [
            {"values": [0.6, 0.25], "clock": [1.0, 2.0]},  # spent its epochs sooner
            {"values": [0.3, 0.3], "clock": [4.0, 44.0]},
            {"values": [0.0, 0.0]},  # no clock kept: this seed is left out for every arm
        ],
    }
    timed = bench.against_seconds(arms, known=0.0, points=45)["seconds"]
    assert timed["seeds"] == 2 and timed["budget"] == 45.0  # bojax-full's median seconds
    full, random = timed["arms"]["bojax-full"], timed["arms"]["random"]
    assert full["regret"]["1.0"][0] == pytest.approx(0.3)  # 0.2 by 30 s; 0.4 until 50 s
    assert random["regret"]["1.0"][0] == pytest.approx(0.275)  # 0.25 kept after 2 s; 0.3
    assert full["regret"]["0.1"][0] == math.inf  # at 4.5 s one run has no value yet
    assert random["regret"]["0.1"][0] == pytest.approx(0.275)
    assert full["spent"] == 45.0 and random["spent"] == 23.0
    assert random["seconds_to_full"] == 4.0 and full["seconds_to_full"] == 30.0
    assert bench.against_seconds({"random": arms["random"][2:]}, known=0.0) == {}
