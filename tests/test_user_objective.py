"""Your own objective: space files, module:function references and `bojax optimize` on them."""

import dataclasses
import json
import textwrap

import pytest
from typer.testing import CliRunner

from bojax import cli
from bojax.bo.acquisition import ACQUISITIONS
from bojax.bo.settings import Settings
from bojax.errors import ObjectiveReferenceError, SpaceDefinitionError
from bojax.spaces import Condition, Integer, Real, Space, load_space
from bojax.surrogates import FAILURE_MODELS, SURROGATES
from bojax.user_code import load_objective

runner = CliRunner()

# The example in load_space's docstring, so the documented file is the tested one.
SPACE_TOML = load_space.__doc__.split("::\n")[1].split("\n\n    A file holding")[0]
EXPECTED = Space(
    [
        Real("lr", 1e-4, 0.1, log=True),
        Integer("layers", 1, 4),
        Integer("units_3", 8, 256, condition=Condition("layers", ">=", 3)),
    ]
)

OBJECTIVE = """
import math

def objective(point):
    return (math.log10(point["lr"]) + 2.0) ** 2 + 0.1 * point["x"]

def half(point):
    return 0.5 * objective(point)

not_a_function = 3
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


# -- space files ---------------------------------------------------------------------------


def test_a_toml_space_file_keeps_order_types_logs_and_conditions(tmp_path):
    space = load_space(write(tmp_path, "space.toml", SPACE_TOML))
    assert space.to_dict() == EXPECTED.to_dict()


def test_json_in_either_layout_loads_the_same_space(tmp_path):
    tables = {
        "lr": {"type": "real", "low": 1e-4, "high": 0.1, "log": True},
        "layers": {"type": "integer", "low": 1, "high": 4},
        "units_3": {"type": "integer", "low": 8, "high": 256, "condition": ["layers", ">=", 3]},
    }
    by_name = load_space(write(tmp_path, "a.json", json.dumps(tables)))
    journal_layout = load_space(write(tmp_path, "b.json", json.dumps(EXPECTED.to_dict())))
    assert by_name.to_dict() == journal_layout.to_dict() == EXPECTED.to_dict()


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("space.yaml", "x: 1", "ends in .toml or .json"),
        ("space.toml", "[x]\ntype = 'real'\nlow = 0\n", "needs low and high"),
        ("space.toml", "[x]\ntype = 'float'\nlow = 0\nhigh = 1\n", "type must be one of"),
        ("space.toml", "[x]\ntype = 'real'\nlow = 1\nhigh = 0\n", "low < high"),
        ("space.toml", "[x]\ntype = 'real'\nlow = 0\nhigh = 1\nstep = 2\n", "unknown keys"),
        ("space.toml", "[x]\ntype = 'real'\nlow = 0\nhigh = 1\nlog = 'yes'\n", "log is true"),
        ("space.toml", "[x]\ntype = 'real'\nlow = 0\nhigh = 1\ncondition = 'y'\n", "condition"),
        ("space.toml", "[x\ntype = 'real'\n", "not valid TOML"),
        ("space.json", "{", "not valid JSON"),
        ("space.toml", "", "no parameters"),
        ("space.toml", "x = 3\n", "expected a table"),
    ],
)
def test_a_bad_space_file_is_a_typed_error_naming_the_file(tmp_path, name, text, message):
    path = write(tmp_path, name, text)
    with pytest.raises(SpaceDefinitionError, match=message) as error:
        load_space(path)
    assert str(path) in str(error.value)


def test_a_missing_space_file_is_a_typed_error(tmp_path):
    with pytest.raises(SpaceDefinitionError, match="cannot read"):
        load_space(tmp_path / "nowhere.toml")


# -- objective references ------------------------------------------------------------------


def test_a_file_reference_and_a_module_reference_load_the_function(tmp_path, monkeypatch):
    path = write(tmp_path, "train_model.py", OBJECTIVE)
    by_file = load_objective(f"{path}:objective")
    assert by_file({"lr": 0.01, "x": 1.0}) == pytest.approx(0.1)
    monkeypatch.syspath_prepend(str(tmp_path))
    by_module = load_objective("train_model:half")
    assert by_module({"lr": 0.01, "x": 1.0}) == pytest.approx(0.05)


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("objective", "expected module:function"),
        ("{tmp}/train_model.py:", "expected module:function"),
        ("{tmp}/missing.py:objective", "no such file"),
        ("{tmp}/train_model.py:objectiv", "has no 'objectiv'; its callables: half, objective"),
        ("{tmp}/train_model.py:not_a_function", "is a int, not a function"),
        ("{tmp}/broken.py:objective", "importing .* failed: ZeroDivisionError"),
        ("no_such_package_xyz.train:objective", "no module named"),
    ],
)
def test_a_bad_reference_is_a_typed_error(tmp_path, reference, message):
    write(tmp_path, "train_model.py", OBJECTIVE)
    write(tmp_path, "broken.py", "x = 1 / 0\n")
    with pytest.raises(ObjectiveReferenceError, match=message):
        load_objective(reference.format(tmp=tmp_path))


# -- the command ---------------------------------------------------------------------------


def test_optimize_has_an_option_for_every_setting_and_list_names_every_entry():
    result = runner.invoke(cli.app, ["optimize", "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for spec in dataclasses.fields(Settings):
        flag = (spec.metadata["flag"] or spec.name).replace("_", "-")
        assert f"--{flag}" in text, flag
        assert " ".join(spec.metadata["help"].split()[:3]) in text, spec.name
    listed = runner.invoke(cli.app, ["list"], env={"COLUMNS": "250"})
    assert listed.exit_code == 0
    text = " ".join(listed.output.split())
    for name in (*SURROGATES, *ACQUISITIONS, *FAILURE_MODELS):
        assert name in text, name


@pytest.mark.slow  # a whole CLI run: it compiles the loop's programs for this file alone
def test_optimize_runs_your_objective_from_a_file_with_a_space_file(tmp_path):
    objective = write(tmp_path, "train_model.py", OBJECTIVE)
    space = write(
        tmp_path,
        "space.toml",
        "[lr]\ntype='real'\nlow=1e-4\nhigh=0.1\nlog=true\n[x]\ntype='real'\nlow=0\nhigh=1\n",
    )
    out = tmp_path / "run"
    args = ["optimize", f"{objective}:objective", "--space", str(space), "--out", str(out)]
    fast = ["--iterations", "2", "--initial", "3", "--surrogate", "gp-map", "--candidates", "64"]
    result = runner.invoke(cli.app, [*args, *fast])
    assert result.exit_code == 0, result.output
    assert "best" in result.output and "optimum" not in result.output
    rows = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    evaluations = [r for r in rows if "y" in r]
    assert len(evaluations) == 5
    assert all(1e-4 <= r["x"]["lr"] <= 0.1 for r in evaluations)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["forrester", "--space", "s.toml"], "built-in problem with its own space"),
        (["forrester", "--maximize"], "built-in problem with its own space"),
        (["{tmp}/train_model.py:objective"], "needs --space"),
        (["{tmp}/train_model.py:nothing", "--space", "{tmp}/space.toml"], "has no 'nothing'"),
        (["{tmp}/train_model.py:objective", "--space", "{tmp}/none.toml"], "cannot read"),
        (
            ["{tmp}/train_model.py:objective", "--space", "{tmp}/space.toml", "--surrogate", "gp"],
            "unknown surrogate",
        ),
    ],
)
def test_optimize_refuses_bad_references_and_spaces_before_running(tmp_path, args, message):
    write(tmp_path, "train_model.py", OBJECTIVE)
    write(tmp_path, "space.toml", "[lr]\ntype='real'\nlow=0.001\nhigh=0.1\n")
    out = tmp_path / "run"
    argv = ["optimize", *(a.format(tmp=tmp_path) for a in args), "--out", str(out)]
    result = runner.invoke(cli.app, argv, terminal_width=200)
    assert result.exit_code == 1, result.output
    assert message in " ".join(result.output.split())
    assert not (out / "journal.jsonl").exists()
