"""The BNN-surrogate reproduction, reduced: every figure, the BNN-vs-GP runs, the summary,
and the per-repeat cache that lets an interrupted run continue."""

import json

import numpy as np
import pytest

from bojax.errors import SettingsError
from bojax.reports import bnn_surrogate

REDUCED = [
    "--quick", "--samples", "40", "--burn-in", "40", "--repeats", "1", "--iterations", "2",
    "--candidates", "64", "--problems", "forrester", "mccormick",
    "--arms", "bnn-hmc", "bnn-report", "gp-map",
]  # fmt: skip
FIGURES = [
    "figure6_traces.png", "figure7_histogram.png", "figure8_samples.png", "figure9_fit.png",
    "figure10_forrester_bo.png", "figure11_comparison.png",
]  # fmt: skip


@pytest.mark.slow
def test_reduced_run_writes_every_figure_and_a_summary(tmp_path, experiment_script, capsys):
    main = experiment_script("bnn_surrogate").main
    summary = main(["--out", str(tmp_path), "--no-progress", *REDUCED])
    out = tmp_path / "quick"
    for name in [*FIGURES, "summary.json"]:
        assert (out / name).stat().st_size > 0
    saved = json.loads((out / "summary.json").read_text())
    assert saved["verification"]["samples"] == 40
    assert saved["verification"]["parameters"] == 5251  # 3 x 50 tanh, one input
    assert 0 < saved["verification"]["acceptance"] <= 1
    assert saved["provenance"]["wall_seconds"] > 0 and saved["provenance"]["git_commit"]
    assert len(bnn_surrogate.claims(saved)) == 2  # Forrester and McCormick
    assert "Figure 11" in capsys.readouterr().out
    for problem, n0 in (("forrester", 2), ("mccormick", 5)):
        entry = summary["comparison"][problem]
        assert entry["initial"] == n0 and set(entry["arms"]) == {"bnn-hmc", "bnn-report", "gp-map"}
        run = json.loads((out / "runs" / problem / "bnn-hmc" / "seed0.json").read_text())
        assert len(run["y"]) == n0 + 2
        assert run["running_min"] == list(np.minimum.accumulate(run["y"]))
        # Both arms of a repeat start from the same random points.
        other = json.loads((out / "runs" / problem / "gp-map" / "seed0.json").read_text())
        assert other["y"][:n0] == run["y"][:n0]

    # The kept repeats are reused, not re-run: another call returns them as they were.
    cfg = bnn_surrogate.config(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in saved["config"].items()}
    )
    again = bnn_surrogate.comparison(cfg, out / "runs", progress=False)
    assert bnn_surrogate.comparison_summary(again) == summary["comparison"]


def test_unknown_override_is_a_settings_error():
    with pytest.raises(SettingsError):
        bnn_surrogate.config(repeat=3)
