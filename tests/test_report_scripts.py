"""What every report script shares (``bojax.reports.script_arguments``, ``run_script``,
``prepare_out``, the kept-result files): guards that refuse before any work, so these
call the scripts with the report's ``run`` replaced, or the guards themselves."""

import json
import warnings

import pytest

from bojax.errors import RunFolderError, SettingsError
from bojax.reports import (
    arc_kernel,
    architecture_search,
    bnn_surrogate,
    ensemble_design,
    hybrid_exploration,
    prepare_out,
    read_kept,
    write_kept,
)

MODULES = {
    "arc_kernel": arc_kernel,
    "architecture_search": architecture_search,
    "bnn_surrogate": bnn_surrogate,
    "ensemble_design": ensemble_design,
    "hybrid_exploration": hybrid_exploration,
}


class Stop(SettingsError):
    """Raised by the stand-in ``run``: the script got as far as running the report."""


@pytest.fixture
def runs(monkeypatch):
    """Each report's ``run`` replaced by one that records its call and stops."""
    calls = []

    def stand_in(name):
        def run(cfg, out, **options):
            calls.append((name, cfg, out))
            raise Stop("stand-in run")

        return run

    for name, module in MODULES.items():
        monkeypatch.setattr(module, "run", stand_in(name))
    return calls


REDUCED = [
    ("arc_kernel", ["--seeds", "1", "--iterations", "1", "--epochs", "1"]),
    ("architecture_search", ["--seeds", "1", "--iterations", "1"]),
    ("bnn_surrogate", ["--repeats", "1", "--samples", "2"]),
    ("bnn_surrogate", ["--arms", "gp-map", "gp-slice"]),  # a summary without the BNN
    ("hybrid_exploration", ["--quick", "--toy-seeds", "1"]),
    ("ensemble_design", ["--experiment", "1", "--iterations", "1"]),
    ("ensemble_design", ["--experiment", "2", "--seed", "3"]),
]


@pytest.mark.parametrize(("script", "argv"), REDUCED)
def test_a_reduced_run_without_out_is_refused_before_any_work(
    script, argv, runs, experiment_script, capsys, tmp_path
):
    """The default folder holds the report's own results: a run with other settings must
    name another folder, or it would replace them (and their kept runs)."""
    assert experiment_script(script).main(argv) == {}
    error = capsys.readouterr().err
    assert runs == [] and "pass --out DIR" in error, error
    assert "differ from the report's" in error
    # With --out, the same run goes ahead.
    assert experiment_script(script).main([*argv, "--out", str(tmp_path)]) == {}
    assert len(runs) == 1 and runs[0][0] == script
    assert runs[0][2].parent.parent == tmp_path or runs[0][2].parent == tmp_path


@pytest.mark.parametrize(
    ("script", "argv"),
    [
        ("arc_kernel", ["--peers", "tpe"]),  # which peers run beside bojax: all.py's call
        ("bnn_surrogate", ["--problems", "forrester"]),  # processes sharing the work
        ("architecture_search", ["--quick", "--seeds", "1"]),  # the quick default
        ("ensemble_design", ["--experiment", "2", "--seed", "0"]),
    ],
)
def test_the_reports_own_settings_run_in_the_default_folder(script, argv, runs, experiment_script):
    experiment_script(script).main(argv)
    assert len(runs) == 1 and runs[0][0] == script


@pytest.mark.parametrize(
    ("script", "argv", "needs"),
    [
        ("hybrid_exploration", ["--toy-seeds", "0"], "at least 1"),
        ("hybrid_exploration", ["--rf-seeds", "0"], "at least 1"),
        ("architecture_search", ["--seeds", "0"], "at least 1"),
        ("bnn_surrogate", ["--repeats", "0"], "at least 1"),
        ("bnn_surrogate", ["--seed", "-1"], "at least 0"),
        ("ensemble_design", ["--experiment", "1", "--seed", "-1"], "at least 0"),
        ("arc_kernel", ["--iterations", "-2"], "at least 0"),
        ("arc_kernel", ["--workers", "0"], "at least 1"),
    ],
)
def test_counts_out_of_range_are_refused_by_the_command_line(
    script, argv, needs, runs, experiment_script, capsys, tmp_path
):
    with pytest.raises(SystemExit) as exit_:
        experiment_script(script).main([*argv, "--out", str(tmp_path)])
    assert exit_.value.code == 2 and runs == []
    assert needs in capsys.readouterr().err


@pytest.mark.parametrize("script", sorted(MODULES))
def test_an_unwritable_out_is_a_one_line_error(script, experiment_script, capsys, tmp_path):
    """``--out`` below a file: the real ``run`` refuses before any work, without a
    traceback and without the hint about discarding kept runs."""
    (tmp_path / "afile").write_text("")
    argv = ["--quick", "--out", str(tmp_path / "afile" / "sub")]
    argv += ["--experiment", "1"] if script == "ensemble_design" else []
    assert experiment_script(script).main(argv) == {}
    error = capsys.readouterr().err
    assert error.startswith("error: cannot make the folder") and "--fresh" not in error, error
    assert len(error.strip().splitlines()) == 1


def test_another_reports_results_are_not_replaced(tmp_path, experiment_script, capsys):
    """A folder holding one report's summary is refused to every other report, whether
    the summary names its report or (made before it did) only its settings say which."""
    folder = tmp_path / "quick"
    folder.mkdir()
    made = {"config": {"quick": True}, "provenance": {"report": "architecture_search"}}
    (folder / "summary.json").write_text(json.dumps(made))
    assert experiment_script("hybrid_exploration").main(["--quick", "--out", str(tmp_path)]) == {}
    error = capsys.readouterr().err
    assert "holds the architecture_search report's results" in error
    assert json.loads((folder / "summary.json").read_text()) == made
    assert prepare_out(folder, "architecture_search") == folder
    older = {"config": {field: 0 for field in arc_kernel.Config.__dataclass_fields__}}
    (folder / "summary.json").write_text(json.dumps(older))
    with pytest.raises(RunFolderError, match="arc_kernel"):
        prepare_out(folder, "bnn_surrogate")
    assert prepare_out(folder, "arc_kernel") == folder
    for odd in ("[]", "null", '"s"', '{"provenance": "x"}'):  # no report's: not refused
        (folder / "summary.json").write_text(odd)
        assert prepare_out(folder, "bnn_surrogate") == folder


def test_kept_results_are_written_whole_and_a_cut_one_is_recomputed(tmp_path):
    path = tmp_path / "seed0.json"
    write_kept(path, {"settings": 1, "y": [1.0, 2.0]})
    assert read_kept(path, "settings", 1) == {"settings": 1, "y": [1.0, 2.0]}
    with pytest.raises(TypeError):  # a failed write leaves the kept file, and no litter
        write_kept(path, {"settings": object()})
    assert read_kept(path) == {"settings": 1, "y": [1.0, 2.0]}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seed0.json"]
    path.write_text('{"settings": 1, "y": [1.0,')  # a write cut short (before this fix)
    with pytest.warns(UserWarning, match="seed0.json"):
        assert read_kept(path, "settings", 1) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_kept(tmp_path / "missing.json") is None
