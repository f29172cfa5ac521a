"""The README's Python examples run as written."""

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bojax.cli import app
from bojax.gp import kernels

README = Path(__file__).parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_has_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs(index):
    namespace: dict = {}
    try:
        for block in BLOCKS[: index + 1]:  # later blocks build on earlier ones
            exec(compile(block, f"README block {index}", "exec"), namespace)
    finally:
        if "rq" in kernels.KERNELS:
            kernels.KERNELS.unregister("rq")


def named_block(filename: str) -> str:
    """The README's fenced block whose first line is ``# filename``."""
    for body in re.findall(r"```\w*\n(.*?)```", README.read_text(), flags=re.DOTALL):
        if body.startswith(f"# {filename}\n"):
            return body
    raise AssertionError(f"no README block starts with '# {filename}'")


@pytest.mark.slow
def test_readme_own_objective_command_runs_on_its_files(tmp_path, monkeypatch):
    """The section's train.py and space.toml, and its command with a smaller budget."""
    for name in ("train.py", "space.toml"):
        (tmp_path / name).write_text(named_block(name))
    (command,) = [
        line
        for line in README.read_text().splitlines()
        if line.startswith("uv run bojax optimize train.py")
    ]
    monkeypatch.chdir(tmp_path)
    quick = ["--iterations", "3", "--initial", "3", "--surrogate", "gp-map"]
    result = CliRunner().invoke(app, [*shlex.split(command)[3:], *quick])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "my-run" / "journal.jsonl").open()]
    assert len(rows) == 6 and all(r["status"] == "ok" for r in rows)
    # The condition holds: units_2 is passed exactly when there are two layers or more.
    assert all(("units_2" in r["x"]) == (r["x"]["layers"] >= 2) for r in rows)
    (show,) = [line for line in README.read_text().splitlines() if "bojax show my-run" in line]
    shown = CliRunner().invoke(app, shlex.split(show, comments=True)[3:])
    assert shown.exit_code == 0 and "6 evaluations (0 failed)" in shown.output
    (plot,) = [line for line in README.read_text().splitlines() if "bojax plot my-run" in line]
    plotted = CliRunner().invoke(app, shlex.split(plot, comments=True)[3:])
    assert plotted.exit_code == 0, plotted.output
    figures = {p.name for p in (tmp_path / "my-run" / "figures").iterdir()}
    assert figures == {"progress.png", "parameters.png", "slices.png", "slice2d.png"}
