"""Your own objective: space files, module:function references and `bojax optimize` on them."""

import dataclasses
import inspect
import json
import sys
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
# (cleandoc: Python 3.13 strips a docstring's indentation itself, 3.11 does not)
SPACE_TOML = inspect.cleandoc(load_space.__doc__).split("::\n")[1].split("\n\nA file holding")[0]
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


HUGE = str(10**400)


def real(fields, name="x"):
    """A JSON space of one real parameter with ``fields`` after its type."""
    return '{"' + name + '": {"type": "real", ' + fields + "}}"


def integer(fields):
    return '{"x": {"type": "integer", ' + fields + "}}"


def choices(listed):
    return '{"c": {"type": "categorical", "choices": ' + listed + "}}"


def conditioned(condition):
    """A categorical ``a`` and a real ``x`` with ``condition`` on it."""
    return (
        '{"a": {"type": "categorical", "choices": ["p", "q"]}, '
        '"x": {"type": "real", "low": 0, "high": 1, "condition": ' + condition + "}}"
    )


# A space file is untrusted input: whatever JSON or TOML lets through (NaN, 1e400, a key
# given twice, integers beyond any float), each is a SpaceDefinitionError naming the file
# and the parameter (or, for text that does not parse, the line) -- never an OverflowError,
# a TypeError, a silently kept last value or a space that decodes to NaN.
@pytest.mark.parametrize(
    ("name", "text", "message", "where"),
    [
        # Numbers JSON's parser accepts beyond JSON: NaN, Infinity, 1e400 (= inf).
        ("s.json", real('"low": NaN, "high": 1'), "finite numbers, got nan", "'x'"),
        ("s.json", real('"low": 0, "high": Infinity'), "finite numbers", "'x'"),
        ("s.json", real('"low": -Infinity, "high": 0'), "finite numbers", "'x'"),
        ("s.json", real('"low": 0, "high": 1e400'), "finite numbers", "'x'"),
        ("s.toml", "[x]\ntype = 'real'\nlow = nan\nhigh = 1\n", "finite numbers", "'x'"),
        ("s.toml", "[x]\ntype = 'real'\nlow = 0\nhigh = inf\n", "finite numbers", "'x'"),
        # Integers past every float: an OverflowError before.
        ("s.json", integer('"low": 0, "high": ' + HUGE), "finite numbers", "'x'"),
        ("s.json", real('"low": -' + HUGE + ', "high": 0'), "finite numbers", "'x'"),
        ("s.toml", "[x]\ntype = 'integer'\nlow = 0\nhigh = " + HUGE + "\n", "finite", "'x'"),
        ("s.json", '{"o": {"type": "ordinal", "values": [1, ' + HUGE + "]}}", "finite", "'o'"),
        ("s.json", choices('["a", ' + HUGE + "]"), "a choice is", "'c'"),
        # Integers a float64 coordinate cannot tell apart; ranges whose width overflows.
        ("s.json", integer('"low": 0, "high": ' + str(2**70)), r"2\*\*53", "'x'"),
        ("s.json", real('"low": -1e308, "high": 1e308'), "overflows", "'x'"),
        ("s.json", '{"o": {"type": "ordinal", "values": [-8e307, 8e307]}}', "float64", "'o'"),
        ("s.json", '{"o": {"type": "ordinal", "values": [' + str(2**60) + ", "
         + str(2**60 + 1) + "]}}", r"2\*\*53", "'o'"),
        # Booleans and strings where numbers belong; inconsistent bounds.
        ("s.json", real('"low": true, "high": 2'), "got True", "'x'"),
        ("s.toml", "[x]\ntype = 'real'\nlow = 0\nhigh = true\n", "got True", "'x'"),
        ("s.json", real('"low": "0", "high": 1'), "finite numbers", "'x'"),
        ("s.json", real('"low": 1, "high": 1'), "low < high", "'x'"),
        ("s.json", real('"low": 0, "high": 1, "log": true'), "low > 0", "'x'"),
        ("s.json", integer('"low": -2, "high": 3, "log": true'), ">= 1", "'x'"),
        # A key given twice: JSON keeps the last silently, TOML refuses.
        ("s.json", real('"low": 0, "high": 1, "high": 5'), "'high' appears twice", None),
        ("s.json", real('"low": 0, "high": 1}, "x": {"type": "real", "low": 0, "high": 2'),
         "'x' appears twice", None),
        ("s.toml", "[x]\ntype = 'real'\nlow = 0\nhigh = 1\n[x]\nlow = 2\n", "line 5", None),
        ("s.json", '{"parameters": [{"name": "x", "type": "real", "low": 0, "high": 1}, '
         '{"name": "x", "type": "integer", "low": 0, "high": 1}]}', "names repeat", "'x'"),
        # Choices: too few, repeated, or not a string, finite number or boolean.
        ("s.json", choices("[]"), "two choices", "'c'"),
        ("s.json", choices('["a", "a"]'), "repeat", "'c'"),
        ("s.json", choices("[1, 1.0]"), "repeat", "'c'"),
        ("s.json", choices('[{"a": 1}, "b"]'), "a choice is", "'c'"),
        ("s.json", choices('[[1], "b"]'), "a choice is", "'c'"),
        ("s.json", choices('[null, "b"]'), "a choice is", "'c'"),
        ("s.json", choices("[NaN, 1]"), "a choice is", "'c'"),
        ("s.json", choices('"ab"'), "must be a list", "'c'"),
        # Shapes: the top level, missing and unknown keys, a journal layout gone wrong.
        ("s.json", "[1, 2]", "got list", None),
        ("s.json", "null", "got NoneType", None),
        ("s.json", "{}", "no parameters", None),
        ("s.json", real('"low": 0'), r"missing \['high'\]", "'x'"),
        ("s.json", real('"low": 0, "high": 1, "step": 1'), "unknown keys", "'x'"),
        ("s.json", '{"x": {"type": ["real"], "low": 0, "high": 1}}', "type must be", "'x'"),
        ("s.json", '{"parameters": ["x"]}', r"parameters\[0\]", None),
        ("s.json", '{"parameters": [{"type": "real", "low": 0, "high": 1}]}', "with a name",
         None),
        ("s.json", '{"parameters": [{"name": "x", "type": "real", "low": 0, "high": 1}], '
         '"y": 1}', r"unknown keys \['y'\]", None),
        # Conditions: errors name the parameter that carries the condition.
        ("s.json", conditioned('["a", "==", ["p"]]'), "compares", "'x'"),
        ("s.json", conditioned('{"parent": "a", "op": "==", "value": "p", "z": 1}'),
         "parent, op, value", "'x'"),
        ("s.json", conditioned('{"parent": "a"}'), "parent, op, value", "'x'"),
        ("s.json", conditioned('["a", "in", NaN]'), "non-empty sequence", "'x'"),
        # Text that is no JSON/TOML at all.
        ("s.json", b'{"x": {"type": "real",\n "low": 0, "\xff": 1}}', "s.json:2: not UTF-8", None),
        ("s.toml", b"[x]\ntype = 'r\xe9al'\n", "s.toml:2: not UTF-8", None),
        ("s.json", "", "line 1 column 1", None),
        ("s.toml", "", "no parameters", None),
        ("s.json", '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}", "not valid JSON", None),
        ("s.json", real('"low": 0, "high": 1' + "0" * 5000), "digits", None),
    ],
    ids=lambda value: str(value)[:40],  # the texts of 10**400 and deep nesting are long
)  # fmt: skip
def test_a_hostile_space_file_is_a_typed_error_naming_file_and_parameter(
    tmp_path, name, text, message, where
):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(SpaceDefinitionError, match=message) as error:
        load_space(path)
    assert str(path) in str(error.value)
    if where is not None:
        assert where in str(error.value)


def test_a_directory_or_a_missing_path_is_a_typed_error(tmp_path):
    (tmp_path / "folder.json").mkdir()
    for path, message in [
        (tmp_path / "folder.json", "cannot read"),
        (tmp_path / "missing.json", "cannot read"),
        (tmp_path, "ends in .toml or .json"),
    ]:
        with pytest.raises(SpaceDefinitionError, match=message):
            load_space(path)


def test_a_serialised_space_names_the_entry_that_is_wrong():
    for data, message in [
        (None, "expected {'parameters'"),
        ({"parameters": 5}, "expected {'parameters'"),
        ({"parameters": [None]}, "parameters\\[0\\]"),
        ({"parameters": [{"name": "x", "type": "real", "low": 0, "high": 1}, "y"]},
         "parameters\\[1\\]"),
    ]:  # fmt: skip
        with pytest.raises(SpaceDefinitionError, match=message):
            Space.from_dict(data)


def test_a_wide_integer_range_is_not_enumerated_into_memory():
    """An all-integer space counts its values before building a grid: [0, 10**12] is a
    valid range (the grid would need 8 TB), so the optimiser samples it instead."""
    from bojax.bo.optimize import enumeration

    assert enumeration(Space([Integer("n", 0, 10**12)]), 4096) is None
    assert enumeration(Space([Integer("n", 0, 3)]), 4096).shape == (4, 1)


def test_checking_a_long_list_of_choices_or_parameters_is_linear():
    """A space file may list many choices or parameters; a pairwise check would take
    minutes on 20 000 of them."""
    import time

    from bojax.parameters import Categorical

    start = time.perf_counter()
    Categorical("c", tuple(range(20_000)))
    Space([Real(f"x{i}", 0, 1) for i in range(20_000)])
    assert time.perf_counter() - start < 5.0


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
        ("{tmp}/script.py:objective", r"failed: the module called sys.exit\(2\) as it was"),
        ("script:objective", r"importing script failed: the module called sys.exit\(2\)"),
        ("no_such_package_xyz.train:objective", "no module named"),
    ],
)
def test_a_bad_reference_is_a_typed_error(tmp_path, reference, message, monkeypatch):
    write(tmp_path, "train_model.py", OBJECTIVE)
    write(tmp_path, "broken.py", "x = 1 / 0\n")
    write(tmp_path, "script.py", "import sys\nsys.exit(2)\n")  # ended the command silently
    monkeypatch.syspath_prepend(str(tmp_path))
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
        # (it said 'a built-in problem with its own space': review BX)
        (["{tmp}/train_model.py", "--space", "{tmp}/space.toml"], r"py:FUNCTION"),
        (["{tmp}/train_model.py"], "name its function too"),
        (["forest-fire"], "unknown problem 'forest-fire'"),
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


# -- found by review: an objective's or a file's surprises --------------------------------
def test_an_objective_that_changes_the_working_directory_keeps_its_journal(tmp_path, monkeypatch):
    import os

    import bojax

    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere").mkdir()

    def moves(point):
        os.chdir(tmp_path / "elsewhere")  # as Hydra's scripts do
        return point["x"]

    space = Space([Real("x", 0.0, 1.0)])
    bojax.minimize(moves, space, initial=3, iterations=0, out="run", progress=False)
    lines = (tmp_path / "run" / "journal.jsonl").read_text().splitlines()
    assert len(lines) == 3 and not (tmp_path / "elsewhere" / "run").exists()


def test_a_plugin_that_is_also_the_objectives_file_runs_once(tmp_path):
    from bojax.user_code import load_module

    plugin = write(tmp_path, "plug_once.py", """
        from pathlib import Path
        with open(Path(__file__).with_suffix(".runs"), "a") as runs:
            runs.write("ran ")  # (a registration, made twice, would raise)
        def objective(point):
            return point["x"]
    """)  # fmt: skip
    module = load_module(str(plugin))
    assert load_module(str(plugin)) is module
    assert load_objective(f"{plugin}:objective")({"x": 0.25}) == 0.25
    assert (tmp_path / "plug_once.runs").read_text() == "ran "


def test_a_module_in_the_working_folder_is_found_without_python_dash_m(tmp_path, monkeypatch):
    """The bojax console script leaves the working folder off sys.path (python -m puts
    it there): module:function still finds a module beside the user."""
    write(tmp_path, "beside_me.py", "def objective(point):\n    return point['x']\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert load_objective("beside_me:objective")({"x": 0.5}) == 0.5
    assert str(tmp_path) in sys.path
    with pytest.raises(ObjectiveReferenceError, match="no module named 'nowhere_at_all'"):
        load_objective("nowhere_at_all:objective")


def test_the_cli_says_when_its_best_is_infeasible_or_was_stopped_early(tmp_path):
    space = write(tmp_path, "space.toml", "[x]\ntype='real'\nlow=0\nhigh=1\n")
    objectives = write(tmp_path, "mo.py", """
        def metrics(point):
            return {"error": point["x"], "size": 1.0 - point["x"], "latency": 1.0}

        def train(point, report):
            report(1, point["x"])
            raise RuntimeError("the loader broke")  # reached only by kept trainings
    """)  # fmt: skip
    args = ["optimize", f"{objectives}:metrics", "--space", str(space), "--initial", "3",
            "--iterations", "0", "--objective", "error:min", "--objective", "size:min",
            "--constraint", "latency<=0.5"]  # fmt: skip
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    assert "no evaluation met the constraints" in result.output
    write(tmp_path, "broken.py", "def metrics(point):\n    raise RuntimeError('no GPU')\n")
    broken = ["optimize", f"{tmp_path / 'broken.py'}:metrics", "--space", str(space),
              "--initial", "2", "--iterations", "0", "--objective", "error:min",
              "--objective", "size:min", "--out", str(tmp_path / "broken")]  # fmt: skip
    runner.invoke(cli.app, broken)
    result = runner.invoke(cli.app, ["show", str(tmp_path / "broken")])
    assert "no evaluation succeeded: the Pareto set is empty" in result.output, result.output
    args = ["optimize", f"{objectives}:train", "--space", str(space), "--max-step", "9",
            "--early-stopping", "asha", "--step-budget", "12", "--initial", "100"]  # fmt: skip
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    assert "none trained to the end" in result.output


def test_resume_out_alone_continues_a_cli_run_with_its_journalled_space_and_settings(tmp_path):
    """`interrupted; continue it with --resume --out DIR` was not true: a resume without
    --space was refused, and one without the run's settings did not match its journal."""
    objective = write(tmp_path, "train_model.py", OBJECTIVE)
    space = write(tmp_path, "space.toml", "[lr]\ntype='real'\nlow=1e-4\nhigh=0.1\nlog=true\n"
                                          "[x]\ntype='real'\nlow=0\nhigh=1\n")  # fmt: skip
    out = tmp_path / "run"
    first = [
        "optimize", f"{objective}:objective", "--space", str(space), "--out", str(out),
        "--iterations", "0", "--initial", "3", "--surrogate", "gp-map", "--seed", "7",
        "--maximize", "--retries", "3",
    ]  # fmt: skip
    assert runner.invoke(cli.app, first).exit_code == 0
    header = json.loads((out / "run.json").read_text())
    assert header["options"]["retries"] == 3 and header["options"]["iterations"] == 0
    records = (out / "journal.jsonl").read_text()

    again = ["optimize", f"{objective}:objective", "--out", str(out), "--resume"]
    result = runner.invoke(cli.app, again, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    said = "does not: surrogate=gp-map, iterations=0, initial=3, seed=7, maximize=True"
    assert said in result.output and "retries=3" in result.output
    assert (out / "journal.jsonl").read_text() == records
    assert json.loads((out / "run.json").read_text()) == header  # the last call's options
    # A resume refused for its options keeps the last call's.
    result = runner.invoke(cli.app, [*again, "--initial", "2"])
    assert result.exit_code == 1 and "initial: stored 3, now 2" in result.output
    assert json.loads((out / "run.json").read_text()) == header
    # A journalled value no setting takes is the journal's, not the command line's.
    bad = {**header, "options": {**header["options"], "retries": -1}}
    (out / "run.json").write_text(json.dumps(bad))
    result = runner.invoke(cli.app, again, env={"COLUMNS": "200"})
    assert result.exit_code == 1 and "settings not given here are" in result.output
    assert "run.json's" in result.output
    timed = {**header["options"], "timeout": 30.0}
    (out / "run.json").write_text(json.dumps({**header, "options": timed}))
    result = runner.invoke(cli.app, [*again, "--timeout", "none", "--retries", "3"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "run.json").read_text()) == header  # set back to None
    # Every setting given: nothing taken, nothing said ('sets what ... not: -'; review BX).
    given = [*again, "--space", str(space), *first[6:]]
    result = runner.invoke(cli.app, given)
    assert result.exit_code == 0 and "sets what the command does not" not in result.output

    result = runner.invoke(cli.app, [*again, "--retries", "0"])  # a run option: this call's
    assert result.exit_code == 0, result.output
    assert json.loads((out / "run.json").read_text())["options"]["retries"] == 0
    result = runner.invoke(cli.app, [*again, "--surrogate", "gp-slice"])  # given: checked
    assert result.exit_code == 1 and "surrogate: stored 'gp-map', now 'gp-slice'" in result.output
    other = write(tmp_path, "other.toml", "[lr]\ntype='real'\nlow=1e-4\nhigh=0.2\nlog=true\n"
                                          "[x]\ntype='real'\nlow=0\nhigh=1\n")  # fmt: skip
    result = runner.invoke(cli.app, [*again, "--space", str(other)])
    assert result.exit_code == 1 and "'space' differs" in result.output
    shown = runner.invoke(cli.app, ["show", str(out)], env={"COLUMNS": "200"}).output
    assert "last call: iterations=0" in shown and "retries=0" in shown
    (out / "run.json").write_text(json.dumps({**header, "options": [3]}))  # hand-edited
    for command in (again, ["show", str(out)]):
        result = runner.invoke(cli.app, command, env={"COLUMNS": "200"})
        assert result.exit_code == 1 and "'options' is not an object" in result.output


@pytest.mark.slow  # (12 s: the forrester run's model compiles)
def test_a_resume_given_iterations_sets_a_step_wise_budget_and_a_missing_run_is_said(tmp_path):
    """The last call's step_budget outranked a resume's --iterations, which then did
    nothing; a mistyped folder started a new run without a word (review)."""
    objective = write(tmp_path, "train.py", """
        def train(point, report):
            for step in (1, 2):
                report(step, (point["x"] - 0.3) ** 2 + 1 / step)
            return (point["x"] - 0.3) ** 2 + 0.5
    """)  # fmt: skip
    space = write(tmp_path, "space.toml", "[x]\ntype='real'\nlow=0\nhigh=1\n")
    out = tmp_path / "run"
    first = [
        "optimize", f"{objective}:train", "--space", str(space), "--out", str(out),
        "--max-step", "2", "--early-stopping", "none", "--initial", "2", "--iterations", "0",
        "--step-budget", "2", "--surrogate", "gp-map", "--candidates", "64",
    ]  # fmt: skip
    assert "2 steps" in runner.invoke(cli.app, first).output
    again = ["optimize", f"{objective}:train", "--out", str(out), "--resume"]
    result = runner.invoke(cli.app, [*again, "--iterations", "1"])  # (2 + 1) designs x 2 steps
    assert result.exit_code == 0 and "3 evaluations, 6 steps" in result.output, result.output

    missing = ["optimize", f"{objective}:train", "--out", str(tmp_path / "typo"), "--resume"]
    result = runner.invoke(cli.app, missing)
    # (Joined: the message names tmp_path, which the console wraps where it is long.)
    assert result.exit_code == 1 and "holds no run to resume" in " ".join(result.output.split())
    new = ["optimize", "forrester", "--out", str(tmp_path / "new"), "--resume"]
    result = runner.invoke(cli.app, [*new, "--initial", "2", "--iterations", "1",
                                     "--surrogate", "gp-map", "--candidates", "64"])  # fmt: skip
    said = " ".join(result.output.split())
    assert result.exit_code == 0 and "holds no run yet: a new one starts" in said, said
    # A resume refused for asking fewer evaluations than were made keeps the options.
    result = runner.invoke(cli.app, [*new, "--iterations", "0"], env={"COLUMNS": "500"})
    assert result.exit_code == 1, result.output
    said = result.output.replace("\n", "")
    assert "holds 3 evaluations" in said and "(--iterations) of at least 1" in said
    options = json.loads((tmp_path / "new" / "run.json").read_text())["options"]
    assert options["iterations"] == 1


def test_an_interrupted_cli_run_names_the_plugins_its_resume_needs(tmp_path):
    """Plugins are not journalled: a resume without the one that registered the run's
    kernel could not name it."""
    objective = write(tmp_path, "stop.py", "def objective(point):\n    raise KeyboardInterrupt\n")
    plugin = write(tmp_path, "extras.py", "")
    space = write(tmp_path, "space.toml", "[x]\ntype='real'\nlow=0\nhigh=1\n")
    out = tmp_path / "run"
    args = ["optimize", f"{objective}:objective", "--space", str(space), "--out", str(out),
            "--plugin", str(plugin)]  # fmt: skip
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 130, result.output
    said = result.output.replace("\n", "")
    resume = f"bojax optimize {objective}:objective --resume --out {out} --plugin {plugin}"
    assert f"interrupted; continue it with: {resume}" in said


def test_resuming_a_run_with_another_objective_warns(tmp_path, no_warnings):
    import bojax

    space = Space([Real("x", 0.0, 1.0)])

    def first(point):
        return point["x"]

    def second(point):
        return 1000.0 + point["x"]

    bojax.minimize(first, space, initial=3, iterations=0, out=tmp_path, progress=False)
    with no_warnings():  # the same objective: no warning
        bojax.minimize(first, space, initial=3, iterations=0, out=tmp_path, resume=True,
                       progress=False)  # fmt: skip
    with pytest.warns(UserWarning, match="journalled for the objective .*first.*second") as seen:
        bojax.minimize(second, space, initial=3, iterations=0, out=tmp_path, resume=True,
                       progress=False)  # fmt: skip
    assert seen[0].filename == __file__  # the user's call, not a line of bojax (review CZ)
    header = json.loads((tmp_path / "run.json").read_text())
    assert header["objective"].endswith("first")  # the run's own, kept
