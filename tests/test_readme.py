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


def _numbers(text: str) -> list[float]:
    return [float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", text)]


# What each block prints (or leaves in its namespace), checked: an example that runs but
# reports a wrong result is a broken example. ``ns`` is the blocks' namespace, ``out``
# what the block printed.
CHECKS = {
    0: lambda ns, out: (
        "parameter 'lr'" in out
        and len(ns["points"]) == 16
        and all(1 <= p["layers"] <= 5 for p in ns["points"])
        and ns["mean"].shape[-1] == 1000
        and float(ns["var"].min()) >= 0
    ),
    # train's minimum is 0.1 (lr = 0.01, one layer); ten evaluations get within 0.2.
    1: lambda ns, out: (
        ns["result"].best_value < 0.3 and ns["result"].failures == 0 and len(ns["state"].y) == 6
    ),
    2: lambda ns, out: (
        [r["phase"] for r in ns["result"].history] == ["initial"] * 2 + ["bo"] * 3
        and all(r["diagnostics"]["step_size"] > 0 for r in ns["result"].history[2:])
    ),
    3: lambda ns, out: (
        set(re.findall(r"[01]\.0|None", out.split("[", 1)[1])) <= {"0.0", "1.0", "None"}
    ),
    4: lambda ns, out: (
        "{'layers': 1, 'lr': 0.1, 'units1': 32, 'dropout1': 0.2}" in out
        and all(
            all(f"units{k}" in p for k in range(1, p["layers"] + 1))
            and not any(f"units{k}" in p for k in range(p["layers"] + 1, 4))
            for p in ns["net_space"].from_unit(ns["u"])
        )
    ),
    5: lambda ns, out: all(v > 0 for v in _numbers(out)[:2]),
    7: lambda ns, out: (
        sorted(r["proposal"] for r in ns["result"].history)
        == list(range(len(ns["result"].history)))
    ),
    # a feasible Pareto set of error against size, its hypervolume and reference point
    8: lambda ns, out: (
        len(ns["result"].pareto) >= 2
        and all(p["metrics"]["latency"] <= 2.0 for p in ns["result"].pareto)
        and ns["result"].hypervolume[-1] > 0
        and len(ns["result"].reference_point) == 2
    ),
    # the best design keeps lr * depth <= 0.5 (the rest diverge) and nears the optimum 0
    9: lambda ns, out: (
        ns["result"].best_point["lr"] * ns["result"].best_point["depth"] <= 0.5
        and ns["result"].best_value < 0.5
        and ns["result"].failures > 0
    ),
    # each hanging design is killed at its timeout; the others run as before
    10: lambda ns, out: (
        ns["result"].evaluations == 6
        and all(
            r["error"] == "timed out after 20 s"
            for r in ns["result"].history
            if r["x"]["depth"] > 6
        )
        and all(r["seconds"] < 60 for r in ns["result"].history)
    ),
    12: lambda ns, out: abs(ns["study"].best_params["lr"] - 0.01) < 0.005,
    # 20 trainings' worth of epochs, most designs stopped early, the optimum 0 neared
    13: lambda ns, out: (
        ns["result"].steps == 20 * 27
        and ns["stopped"] > ns["result"].evaluations / 2
        and ns["result"].best_value < 0.05
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs(index, capsys):
    namespace: dict = {}
    try:
        for i, block in enumerate(BLOCKS[: index + 1]):  # later blocks build on earlier ones
            capsys.readouterr()
            exec(compile(block, f"README block {i}", "exec"), namespace)
        printed = capsys.readouterr().out
        check = CHECKS.get(index)
        assert check is None or check(namespace, printed), printed
    finally:
        if "rq" in kernels.KERNELS:
            kernels.KERNELS.unregister("rq")


def test_every_printing_readme_example_has_a_check():
    printing = {i for i, block in enumerate(BLOCKS) if "print(" in block or "result =" in block}
    assert printing <= set(CHECKS) | {6, 11}, sorted(printing - set(CHECKS))


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
    assert all(("momentum" in r["x"]) == (r["x"]["optimizer"] == "sgd") for r in rows)
    assert {r["x"]["optimizer"] for r in rows} <= {"adam", "sgd", "rmsprop"}
    (show,) = [line for line in README.read_text().splitlines() if "bojax show my-run" in line]
    shown = CliRunner().invoke(app, shlex.split(show, comments=True)[3:])
    assert shown.exit_code == 0 and "6 evaluations (0 failed)" in shown.output
    (plot,) = [line for line in README.read_text().splitlines() if "bojax plot my-run" in line]
    plotted = CliRunner().invoke(app, shlex.split(plot, comments=True)[3:])
    assert plotted.exit_code == 0, plotted.output
    figures = {p.name for p in (tmp_path / "my-run" / "figures").iterdir()}
    assert figures == {"progress.png", "parameters.png", "slices.png", "slice2d.png"}
