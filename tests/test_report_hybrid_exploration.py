"""The hybrid-exploration reproduction, reduced: both experiments, the figures, the summary."""

import json

import numpy as np
import pytest

from bojax.errors import SettingsError
from bojax.objectives.forest import credit_data
from bojax.reports import hybrid_exploration
from bojax.reports.hybrid_exploration import POLICY_RUNS

REDUCED = [
    "--toy-seeds", "2", "--toy-iterations", "12", "--rf-seeds", "1", "--rf-iterations", "4",
    "--rf-max-trees", "20", "--rf-folds", "3", "--rf-rows", "300", "--candidates", "128",
]  # fmt: skip


@pytest.mark.slow
def test_reduced_run_writes_figures_and_a_summary(tmp_path, experiment_script, capsys):
    summary = experiment_script("hybrid_exploration").main(
        ["--out", str(tmp_path), "--no-progress", *REDUCED]
    )
    out = tmp_path / "full"
    for name in ("figure1_ei.png", "figure2_hybrid.png", "figure3_forest.png", "summary.json"):
        assert (out / name).stat().st_size > 0
    saved = json.loads((out / "summary.json").read_text())
    assert saved["config"]["toy_seeds"] == 2 and saved["provenance"]["overrides"]["toy_seeds"] == 2
    assert len(hybrid_exploration.claims(saved)) == 3
    printed = capsys.readouterr().out
    assert "Table 2" in printed and "variable (prose)" in printed

    fractions = summary["toy"]["fractions"]["report's start"]
    assert set(fractions) == set(POLICY_RUNS)
    # From the report's start, EI alone stalls on the side lobe; the hybrid does not.
    assert fractions["EI"]["global_within_1pct"] == 0.0
    assert fractions["hybrid"]["global_within_1pct"] == 1.0
    for label, rows in summary["toy"]["runs"]["report's start"].items():
        for row in rows:
            assert row["evaluations"] <= 3 + 12
            if POLICY_RUNS[label][0] == "acquisition":
                assert row["explored"] == 0
    table = summary["forest"]["table"]
    assert set(table) == set(POLICY_RUNS)
    # Predicting the majority class of the rows used scores this without any forest.
    labels = credit_data(summary["config"]["rf_rows"]).y
    majority = 100 * max(np.mean(labels), 1 - np.mean(labels))
    assert majority > 70  # "good" credit: 72 % of the rows
    for row in table.values():
        assert majority < row["accuracy_percent"]["minimum"] <= 100
        assert all(1 <= trees <= 20 for trees in row["trees"])


def test_unknown_override_is_a_settings_error():
    with pytest.raises(SettingsError):
        hybrid_exploration.config(toy_sedes=3)
