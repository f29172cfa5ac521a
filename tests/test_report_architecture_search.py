"""The architecture-search reproduction, reduced: every figure, the BO comparison, summary."""

import json

import pytest

from bojax.errors import SettingsError
from bojax.reports import architecture_search

REDUCED = [
    "--seeds", "1", "--initial", "3", "--iterations", "2", "--candidates", "64",
    "--samples", "4", "--burn-in", "8", "--max-layers", "2", "--max-units", "6",
    "--figure-epochs", "5",
]  # fmt: skip
FIGURES = [
    "figure3_small_network.png", "figure4_large_network.png", "figure5_linear_regression.png",
    "figure6_gp_lengthscales.png", "figure7_bo_1d.png", "figure8_optimised_network.png",
    "best_so_far.png",
]  # fmt: skip


@pytest.mark.slow
def test_reduced_run_writes_every_figure_and_a_summary(tmp_path, experiment_script, capsys):
    summary = experiment_script("architecture_search").main(
        ["--out", str(tmp_path), "--no-progress", *REDUCED]
    )
    out = tmp_path / "full"
    for name in [*FIGURES, "summary.json"]:
        assert (out / name).stat().st_size > 0
    saved = json.loads((out / "summary.json").read_text())
    assert saved["config"]["max_units"] == 6
    assert saved["provenance"]["overrides"]["max_units"] == 6
    assert len(architecture_search.claims(saved)) == 2
    assert "Figure 8" in capsys.readouterr().out
    # Random search starts from the BO runs' initial designs, then draws its own.
    bo_rows, random_rows = summary["runs"]["fixed"][0], summary["runs"]["random"][0]
    assert random_rows[:3] == bo_rows[:3] and len(random_rows) == 5
    assert saved["config"]["batch_size"] == 1  # per-example SGD, as the report trains
    for method in ("fixed", "sampled", "random"):
        (rows,) = summary["runs"][method]
        assert len(rows) == 5
        for row in rows:  # designs respect the reduced space; n_l = 0 drops the layer
            assert len(row["hidden"]) <= 2 and all(1 <= n <= 6 for n in row["hidden"])
            assert 0 <= row["validation_accuracy"] <= 1
    assert summary["networks"]["large"]["hidden"] == list(architecture_search.LARGE_NET)


def test_unknown_override_is_a_settings_error():
    with pytest.raises(SettingsError):
        architecture_search.config(max_unit=3)
