"""The ensemble-design reproduction: settings, a reduced run of the experiment script
(figures, summary, one compilation), re-running and resuming."""

import json

import numpy as np
import pytest
from PIL import Image

from bojax.errors import SettingsError
from bojax.reports import ensemble_design

REDUCED = ["--quick", "--initial", "2", "--iterations", "2", "--samples", "16"]
REDUCED += ["--candidates", "64", "--min-epochs", "10", "--max-epochs", "30", "--no-progress"]


def test_settings_follow_the_report():
    one, two = ensemble_design.config(1), ensemble_design.config(2)
    assert (one.max_layers, one.max_width, one.max_members) == (5, 15, 30)
    assert (two.max_layers, two.max_width, two.max_members) == (10, 10, 30)
    assert (one.training.min_epochs, one.training.max_epochs) == (1000, 5000)
    assert two.training.max_epochs == 2000 and one.training.tolerance == 1e-4
    assert (one.candidates, two.candidates) == (2000, 1000)
    assert one.samples == two.samples == 5000
    quick = ensemble_design.config(1, quick=True)
    assert quick.training == one.training and quick.samples < one.samples
    assert quick.iterations < one.iterations
    with pytest.raises(SettingsError):
        ensemble_design.config(3)
    with pytest.raises(SettingsError):
        ensemble_design.config(1, epochs=3)


@pytest.mark.slow
def test_reduced_run_writes_figures_and_summary_then_replots_on_rerun(
    tmp_path, capsys, experiment_script
):
    summary = experiment_script("ensemble_design").main(
        ["--experiment", "1", *REDUCED, "--out", str(tmp_path)]
    )
    folder = tmp_path / "experiment1-quick"
    for name in ("figure3_data.png", "figure4_fits.png", "figure5_exploration.png"):
        with Image.open(folder / name) as image:
            assert image.size[0] > 600 and image.size[1] > 300, name
    saved = json.loads((folder / "summary.json").read_text())
    assert saved == json.loads(json.dumps(summary))
    assert saved["evaluations"] == 4 and len(saved["iterations"]) == 4
    assert saved["provenance"]["overrides"]["iterations"] == 2
    assert len(ensemble_design.claims(saved)) == 3
    selection = saved["selection"]
    assert selection["training_seeds"] == [1, 2]  # fresh seeds, never the run's own 0
    assert selection["best_observed"]["design"] == saved["best"]["design"]
    assert selection["best_observed"]["observed_test_loss"] == saved["best"]["test_loss"]
    picked = selection["reevaluated"]
    assert picked["retrained_mean"] == min(c["retrained_mean"] for c in selection["candidates"])
    for entry in (*selection["candidates"], selection["report_design"]):
        losses = entry["retrained_test_losses"]
        assert len(losses) == 2 and entry["retrained_mean"] == pytest.approx(np.mean(losses))
    assert selection["report_design"]["design"]["members"] == 23
    assert saved["compilations_in_this_process"]["ensemble_training"] == 1
    losses = [row["test_loss"] for row in saved["iterations"]]
    assert saved["best"]["test_loss"] == min(losses)
    assert all(row["seconds"] > 0 and row["test_mse"] > 0 for row in saved["iterations"])
    assert saved["report_best_design_on_our_data"]["design"]["members"] == 23
    assert saved["dataset"] == {
        "name": "experiment1",
        "seed": 0,
        "n_train": 150,
        "n_test": 150,
        "noise_std": 5.0,
        "test_loss_of_truth": pytest.approx(saved["dataset"]["test_loss_of_truth"]),
    }
    assert "best design" in capsys.readouterr().out

    # The same command again continues the (finished) journal: nothing is re-run by BO,
    # and the deterministic re-evaluations reproduce the numbers exactly.
    again = experiment_script("ensemble_design").main(
        ["--experiment", "1", *REDUCED, "--out", str(tmp_path)]
    )
    assert again["iterations"] == saved["iterations"] and again["best"] == saved["best"]
    lines = (folder / "run" / "journal.jsonl").read_text().splitlines()
    assert len(lines) == 4

    # Other settings on the same folder are refused, with a hint; --fresh replaces it.
    other = [*REDUCED[:-1], "--seed", "1", "--no-progress"]
    assert (
        experiment_script("ensemble_design").main(
            ["--experiment", "1", *other, "--out", str(tmp_path)]
        )
        == {}
    )
    assert "--fresh" in capsys.readouterr().err
    fresh = experiment_script("ensemble_design").main(
        ["--experiment", "1", *other, "--fresh", "--out", str(tmp_path)]
    )
    assert fresh["config"]["seed"] == 1 and fresh["evaluations"] == 4


@pytest.mark.slow
def test_experiment_two_writes_figures_six_to_eight(tmp_path, experiment_script):
    summary = experiment_script("ensemble_design").main(
        ["--experiment", "2", *REDUCED, "--out", str(tmp_path)]
    )
    folder = tmp_path / "experiment2-quick"
    assert summary["figures"] == {
        "data": "figure6_data.png",
        "fits": "figure7_fits.png",
        "exploration": "figure8_exploration.png",
    }
    for name in summary["figures"].values():
        assert (folder / name).stat().st_size > 10_000
    assert summary["dataset"]["n_train"] == 100
    assert summary["compilations_in_this_process"]["ensemble_training"] == 1
