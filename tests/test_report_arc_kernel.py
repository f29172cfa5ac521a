"""The arc-kernel reproduction: settings, the Table 1 regression, a reduced script run."""

import json

import jax
import numpy as np
import pytest
from PIL import Image

from bojax.errors import SettingsError
from bojax.objectives.deepnet import deepnet_space
from bojax.reports import arc_kernel

REDUCED = ["--quick", "--seeds", "1", "--initial", "3", "--iterations", "1", "--samples", "4"]
REDUCED += ["--burn-in", "4", "--candidates", "64", "--folds", "2", "--table-burn-in", "4"]
REDUCED += ["--table-samples", "4", "--max-layers", "1", "--epochs", "2", "--no-progress"]


def test_settings():
    full, quick = arc_kernel.config(), arc_kernel.config(quick=True)
    assert full.folds == 10 and full.max_layers == 5 and full.training.max_layers == 5
    assert quick.seeds < full.seeds and quick.iterations < full.iterations
    small = arc_kernel.config(max_layers=2, epochs=4)
    assert small.training.max_layers == 2 and small.training.epochs == 4
    with pytest.raises(SettingsError):
        arc_kernel.config(folds=1)
    with pytest.raises(SettingsError):
        arc_kernel.config(peers=["smac"])
    with pytest.raises(SettingsError):
        arc_kernel.config(trees=3)


def test_table_scores_an_exactly_linear_response_as_zero_for_linear_models():
    """NMSE plumbing: a response linear in each architecture's relevant coordinates is
    fitted exactly by the separate linear model, and held-out NMSE is then ~0."""
    cfg = arc_kernel.config(quick=True, max_layers=2, folds=3)
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


@pytest.mark.slow
def test_reduced_run_writes_figures_table_and_summary_then_replots(
    tmp_path, capsys, experiment_script
):
    summary = experiment_script("arc_kernel").main([*REDUCED, "--out", str(tmp_path)])
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
    assert saved["compilations_in_this_process"]["network_training"] == 1
    assert "arc GP" in capsys.readouterr().out
    # Run again: the journals are complete, so nothing is evaluated and numbers agree.
    again = experiment_script("arc_kernel").main([*REDUCED, "--out", str(tmp_path)])
    assert again["curves"] == summary["curves"] and again["table1"] == summary["table1"]
    assert (
        again["compilations_in_this_process"]["gp_fit"]
        <= summary["compilations_in_this_process"]["gp_fit"]
    )
