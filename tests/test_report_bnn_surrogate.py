"""The BNN-surrogate reproduction, reduced: every figure, the BNN-vs-GP runs, the summary,
and the per-repeat cache that lets an interrupted run continue."""

import json

import numpy as np
import pytest

from bojax.errors import JournalError, SettingsError
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


def test_repeats_kept_for_other_settings_are_refused_and_a_cut_one_is_rerun(tmp_path, monkeypatch):
    """A kept repeat with other settings is not overwritten: the comparison is refused,
    naming it, before any repeat runs. A kept file cut short is run again, with a warning
    naming it."""
    cfg = bnn_surrogate.config(quick=True, repeats=2, problems=("forrester",), arms=("gp-map",))
    folder = tmp_path / "forrester" / "gp-map"
    folder.mkdir(parents=True)
    (folder / "seed1.json").write_text(json.dumps({"settings": {"iterations": 99}}))
    calls = []

    def fake(cfg, arm, problem, seed):
        calls.append((problem, arm, seed))
        identity = bnn_surrogate._settings(cfg, arm, problem, seed, cfg.iterations).identity()
        y = [1.0, 0.5]
        return {"settings": identity | {"iterations": cfg.iterations}, "y": y,
                "running_min": y, "seconds": 0.0, "code_fingerprint": None}  # fmt: skip

    monkeypatch.setattr(bnn_surrogate, "bo_run", fake)
    with pytest.raises(JournalError, match=r"gp-map/seed1\.json"):
        bnn_surrogate.comparison(cfg, tmp_path, progress=False)
    assert calls == [] and not (folder / "seed0.json").exists()
    (folder / "seed1.json").write_text('{"settings": {"iter')  # as a killed write left it
    with pytest.warns(UserWarning, match=r"seed1\.json"):
        results = bnn_surrogate.comparison(cfg, tmp_path, progress=False)
    assert calls == [("forrester", "gp-map", 0), ("forrester", "gp-map", 1)]
    assert len(results["forrester"]["gp-map"]) == 2
    assert json.loads((folder / "seed1.json").read_text())["y"] == [1.0, 0.5]
    cut = tmp_path / "out" / "runs" / "forrester" / "gp-map" / "seed0.json"
    cut.parent.mkdir(parents=True)
    cut.write_text("{")
    with pytest.warns(UserWarning, match=r"seed0\.json"):  # all.py's look at kept runs
        assert bnn_surrogate.kept_runs(tmp_path / "out") == [(cut, None)]
