"""The command line as a user runs it: help, the demo (small settings) and the problem list."""

import json
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
    # Wide enough that no cell wraps (the table's layout is not what is checked here)
    wide = {"terminal_width": 200, "env": {"COLUMNS": "200"}}
    result = runner.invoke(app, ["demo", "--out", str(tmp_path), *options], **wide)
    assert result.exit_code == 0, result.output
    for name in ("figure3_data.png", "figure4_fits.png", "figure5_exploration.png"):
        with Image.open(tmp_path / name) as image:
            assert image.size[0] > 600 and image.size[1] > 300
    assert "best found" in result.output and "the report's design" in result.output
    assert "compiled 1 time(s)" in result.output
    # The re-trained losses, the fair comparison of the two (review CK), are in the table.
    summary = json.loads((tmp_path / "summary.json").read_text())
    for pick in ("best_observed", "report_design"):
        entry = summary["selection"][pick]
        said = f"{entry['retrained_mean']:.2f} ± {entry['retrained_sd']:.2f}"
        assert said in " ".join(result.output.split()), said
    # A second demo into the same folder starts afresh instead of refusing.
    again = runner.invoke(app, ["demo", "--out", str(tmp_path), *options])
    assert again.exit_code == 0, again.output


def test_bad_options_are_refused_with_a_message():
    result = runner.invoke(app, ["demo", "--samples", "0"])
    assert result.exit_code != 0 and "samples" in result.output
    result = runner.invoke(app, ["demo", "--min-epochs", "50", "--max-epochs", "10"])
    assert result.exit_code == 1 and "min_epochs" in result.output


def test_exact_limit_takes_none_as_its_help_says(tmp_path):
    import json

    args = ["optimize", "forrester", "--initial", "2", "--iterations", "0", "--surrogate", "gp-map"]
    result = runner.invoke(app, [*args, "--exact-limit", "None", "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "a" / "run.json").read_text())["settings"]["exact_limit"] is None
    result = runner.invoke(app, [*args, "--exact-limit", "many", "--out", str(tmp_path / "b")])
    assert result.exit_code == 2 and "not a whole number or 'none'" in result.output
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "c")])  # the default, 300
    assert result.exit_code == 0, result.output


def test_problems_lists_forrester():
    result = runner.invoke(app, ["problems"])
    assert result.exit_code == 0 and "forrester" in result.output and "-6.02074" in result.output


def test_demo_and_plot_refuse_folders_they_cannot_use_without_a_traceback(tmp_path):
    """Found by review: demo deleted a folder `run` it had not made, and an --out that
    is a file gave a Python traceback."""
    mine = tmp_path / "project" / "run"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    result = runner.invoke(app, ["demo", "--out", str(tmp_path / "project")])
    assert result.exit_code == 1 and "not a bojax run folder" in result.output
    assert (mine / "notes.txt").read_text() == "mine"
    (tmp_path / "a file").write_text("")
    result = runner.invoke(app, ["demo", "--out", str(tmp_path / "a file")])
    assert result.exit_code == 1 and "cannot make the folder" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_malformed_scheduler_address_is_a_settings_error():
    from bojax.bo import cluster
    from bojax.errors import SettingsError

    pytest.importorskip("distributed")
    for address in ("notanaddress", "foo://x:1"):
        with pytest.raises(SettingsError, match="not a Dask scheduler address"):
            with cluster.connect(None, address):
                pass


def test_python_dash_m_bojax_is_the_command_line():
    result = subprocess.run(
        [sys.executable, "-m", "bojax", "--help"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and "optimize" in result.stdout


def test_the_command_line_prints_a_warning_as_one_plain_line(tmp_path):
    """Python's format added a path into bojax and a source line (review)."""
    import subprocess
    import sys

    code = (
        "import warnings, bojax.cli as c\n"
        "c.app = lambda: warnings.warn('the journal is old')\n"
        "c.main()"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr == "UserWarning: the journal is old\n"
