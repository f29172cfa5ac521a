"""The command line as a user runs it: help, the demo (small settings) and the problem list."""

import subprocess
import sys

import pytest
from PIL import Image
from typer.testing import CliRunner

from bojax.cli import app

runner = CliRunner()


@pytest.mark.slow
def test_console_script_help_lists_the_subcommands():
    result = subprocess.run(
        [sys.executable, "-m", "bojax.cli", "--help"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    for command in ("demo", "problems"):
        assert command in result.stdout


@pytest.mark.slow
def test_demo_runs_the_ensemble_design_bo_and_writes_its_figures(tmp_path):
    options = ["--iterations", "1", "--samples", "16", "--min-epochs", "5", "--max-epochs", "20"]
    result = runner.invoke(app, ["demo", "--out", str(tmp_path), *options])
    assert result.exit_code == 0, result.output
    for name in ("figure3_data.png", "figure4_fits.png", "figure5_exploration.png"):
        with Image.open(tmp_path / name) as image:
            assert image.size[0] > 600 and image.size[1] > 300
    assert "best found" in result.output and "report's best" in result.output
    assert "compiled 1 time(s)" in result.output
    # A second demo into the same folder starts afresh instead of refusing.
    again = runner.invoke(app, ["demo", "--out", str(tmp_path), *options])
    assert again.exit_code == 0, again.output


def test_bad_options_are_refused_with_a_message():
    result = runner.invoke(app, ["demo", "--samples", "0"])
    assert result.exit_code != 0 and "samples" in result.output
    result = runner.invoke(app, ["demo", "--min-epochs", "50", "--max-epochs", "10"])
    assert result.exit_code == 1 and "min_epochs" in result.output


def test_problems_lists_forrester():
    result = runner.invoke(app, ["problems"])
    assert result.exit_code == 0 and "forrester" in result.output and "-6.02074" in result.output
