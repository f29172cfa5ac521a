"""The arc-kernel reproduction: settings, the Table 1 regression, a reduced script run."""

import json

import jax
import numpy as np
import pytest
from PIL import Image

from bojax.compilation import count_compilations
from bojax.errors import JournalError, SettingsError
from bojax.objectives.deepnet import deepnet_space
from bojax.reports import arc_kernel

REDUCED = ["--quick", "--seeds", "1", "--initial", "3", "--iterations", "1", "--samples", "4"]
REDUCED += ["--burn-in", "4", "--candidates", "64", "--folds", "2", "--table-burn-in", "4"]
REDUCED += ["--table-samples", "4", "--max-layers", "1", "--epochs", "2", "--no-progress"]


def test_settings():
    full, quick = arc_kernel.config(), arc_kernel.config(quick=True)
    assert full.folds == 5 and full.max_layers == 5 and full.training.max_layers == 5
    assert full.seeds == 10 and full.dataset == "mnist1d"
    assert quick.seeds < full.seeds and quick.iterations < full.iterations
    small = arc_kernel.config(max_layers=2, epochs=4)
    assert small.training.max_layers == 2 and small.training.epochs == 4
    with pytest.raises(SettingsError):
        arc_kernel.config(folds=1)
    with pytest.raises(SettingsError):
        arc_kernel.config(peers=["hyperopt"])
    with pytest.raises(SettingsError):
        arc_kernel.config(dataset="cifar10")
    with pytest.raises(SettingsError):
        arc_kernel.config(table_points=5)
    with pytest.raises(SettingsError):
        arc_kernel.config(trees=3)


def test_table_scores_an_exactly_linear_response_as_zero_for_linear_models():
    """NMSE plumbing: a response linear in each architecture's relevant coordinates is
    fitted exactly by the separate linear model, and held-out NMSE is then ~0."""
    cfg = arc_kernel.config(quick=True, max_layers=2, folds=3, table_points=90)
    space = deepnet_space(2, cfg.training.max_units)
    u = space.sample(jax.random.key(0), 90)
    rows = []
    for point, coords in zip(space.from_unit(u), u, strict=True):
        d = point["layers"]
        y = 1.0 + 0.1 * d + coords[1] - 0.5 * coords[2] + np.where(coords > 0, coords, 0)[3:].sum()
        rows.append({"point": point, "validation_error": y, "log_error": np.log(y), "phase": "bo"})
    table, info = arc_kernel.regression_table(cfg, [rows], models=("separate linear", "linear"))
    assert info["points"] == 90 and sum(info["points_per_depth"]) == 90
    assert table["separate linear"]["raw"][0] < 1e-8
    assert table["separate linear"]["log"][0] > 1e-4  # log of a linear response is not linear
    assert table["linear"]["raw"][0] > 1e-3  # random fill breaks the joint linear model


def test_table_draws_at_most_table_points_distinct_evaluations():
    cfg = arc_kernel.config(quick=True, max_layers=1, folds=2, table_points=20)
    space = deepnet_space(1, cfg.training.max_units)
    points = space.from_unit(space.sample(jax.random.key(1), 30))
    rows = [
        {"point": p, "validation_error": 0.5 + 0.01 * i, "log_error": np.log(0.5 + 0.01 * i)}
        for i, p in enumerate(points)
    ]
    _, info = arc_kernel.regression_table(cfg, [rows, rows[:5]], models=("linear",))
    assert info["points_available"] == 30 and info["points"] == 20


def test_figure2_statistics_match_scipy_and_a_direct_bootstrap():
    """Paired by seed: the Wilcoxon p-value is scipy's on the non-zero differences, the
    counts add up, and the band contains the median of the seeds."""
    from scipy.stats import wilcoxon

    cfg = arc_kernel.config(quick=True, seeds=6, bootstrap=500)
    rng = np.random.default_rng(0)
    finals = {"arc": rng.uniform(0.3, 0.4, 6), "baseline": rng.uniform(0.35, 0.45, 6)}
    finals["baseline"][2] = finals["arc"][2]  # a tie
    runs = {
        m: [[{"validation_error": 0.9}, {"validation_error": float(f)}] for f in values]
        for m, values in finals.items()
    }
    stats = arc_kernel.figure2_statistics(cfg, runs)["arc_vs_baseline"]
    diff = finals["arc"] - finals["baseline"]
    assert stats["wilcoxon_p"] == pytest.approx(wilcoxon(diff[diff != 0]).pvalue)
    assert stats["mean_difference"] == pytest.approx(diff.mean())
    assert stats["ties"] == 1 and stats["arc_wins"] + stats["arc_loses"] == 5
    low, high = stats["interval_95"]
    assert low <= diff.mean() <= high
    curves = np.array([[0.9, f] for f in finals["arc"]])
    median, lo, hi = arc_kernel.median_band(cfg, curves)
    assert median[-1] == pytest.approx(np.median(finals["arc"]))
    assert lo[-1] <= median[-1] <= hi[-1] and finals["arc"].min() <= lo[-1]


def test_runs_kept_for_other_settings_are_refused_not_discarded(tmp_path, monkeypatch):
    """A run folder made for another data set (or budget) is neither continued as if it
    belonged to the new objective nor deleted: the run is refused, naming it, before
    any run starts; a folder holding nothing but its task.json is simply reused."""
    cfg = arc_kernel.config(quick=True, seeds=2)
    stale, empty = tmp_path / "arc-seed0", tmp_path / "arc-seed1"
    for folder in (stale, empty):
        folder.mkdir()
        (folder / "task.json").write_text(json.dumps({"dataset": "digits"}))
    (stale / "journal.jsonl").write_text("old")
    calls = []

    def fake(cfg, method, seed, folder, progress):
        calls.append((method, seed, sorted(p.name for p in folder.iterdir())))
        return [{"validation_error": 0.5}] * (cfg.initial + cfg.iterations)

    monkeypatch.setattr(arc_kernel.runs, "bo_run_rows", fake)
    with pytest.raises(JournalError, match="arc-seed0") as refused:
        arc_kernel.bo_runs(cfg, ("arc",), tmp_path, progress=False)
    assert "arc-seed1" not in str(refused.value) and calls == []
    assert (stale / "journal.jsonl").read_text() == "old"
    (stale / "journal.jsonl").unlink()  # what --fresh does, for this folder
    arc_kernel.bo_runs(cfg, ("arc",), tmp_path, progress=False)
    assert calls == [("arc", 0, ["task.json"]), ("arc", 1, ["task.json"])]
    kept = json.loads((stale / "task.json").read_text())
    assert kept == arc_kernel.task_identity(cfg, "arc", 0)


@pytest.mark.slow
def test_reduced_run_writes_figures_table_and_summary_then_replots(
    tmp_path, capsys, experiment_script
):
    with count_compilations(fresh=True) as first:
        summary = experiment_script("arc_kernel").main([*REDUCED, "--out", str(tmp_path)])
    # From a clean state: one trainer program for every architecture, one fit program per
    # BO surrogate (arc, random fill), which Table 1's fits of the same shapes reuse.
    assert first.of("_train_and_score") == 1 and first.of("_fit") == 2, first
    folder = tmp_path / "quick"
    for name in ("figure2_best_error.png", "figure3_depth_fractions.png"):
        with Image.open(folder / name) as image:
            assert image.size[0] > 600 and image.size[1] > 400, name
    saved = json.loads((folder / "summary.json").read_text())
    assert saved == json.loads(json.dumps(summary))
    assert set(saved["table1"]) == set(arc_kernel.MODELS)
    assert saved["provenance"]["overrides"]["seeds"] == saved["config"]["seeds"]
    assert len(arc_kernel.claims(saved)) == 3
    for model, cells in saved["table1"].items():
        for output in ("raw", "log"):
            mean, se = cells[output]
            assert np.isfinite(mean) and mean >= 0 and se >= 0, (model, output)
    for method in ("arc", "baseline"):
        (curve,) = saved["curves"][method]
        assert len(curve) == 4 and curve == sorted(curve, reverse=True)
        assert sum(saved["depth_fractions"][method]) == pytest.approx(1.0)
    assert "arc GP" in capsys.readouterr().out
    # Run again: the runs and tables are kept, so nothing is trained or fitted again.
    with count_compilations(fresh=True) as rerun:
        again = experiment_script("arc_kernel").main([*REDUCED, "--out", str(tmp_path)])
    assert again["curves"] == summary["curves"] and again["table1"] == summary["table1"]
    assert rerun.of("_train_and_score") == 0 and rerun.of("_fit") == 0, rerun
