"""The command line as a user runs it: help, the demo (small settings) and the problem list."""

import subprocess
import sys

from PIL import Image
from typer.testing import CliRunner

from bojax.cli import app

runner = CliRunner()


def test_console_script_help_lists_the_subcommands():
    result = subprocess.run(
        [sys.executable, "-m", "bojax.cli", "--help"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    for command in ("demo", "problems"):
        assert command in result.stdout


def test_demo_writes_the_figure_and_reports_the_fit(tmp_path):
    result = runner.invoke(app, ["demo", "--out", str(tmp_path), "--steps", "50", "--points", "6"])
    assert result.exit_code == 0, result.output
    figure = tmp_path / "gp_posterior.png"
    with Image.open(figure) as image:
        assert image.size[0] > 800 and image.size[1] > 300
    assert "log marginal likelihood" in result.output
    assert "posterior-mean minimiser" in result.output


def test_demo_is_reproducible(tmp_path):
    from bojax.demo import run_demo

    first = run_demo(out=tmp_path / "a", points=5, steps=25, seed=3)
    second = run_demo(out=tmp_path / "b", points=5, steps=25, seed=3)
    assert first.log_marginal_likelihood == second.log_marginal_likelihood
    assert first.predicted_minimiser == second.predicted_minimiser


def test_bad_options_are_refused_with_a_message():
    result = runner.invoke(app, ["demo", "--points", "1"])
    assert result.exit_code != 0 and "points" in result.output


def test_problems_lists_forrester():
    result = runner.invoke(app, ["problems"])
    assert result.exit_code == 0 and "forrester" in result.output and "-6.02074" in result.output
