"""`bojax show`: a run folder printed read-only, beside a live run or after it."""

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bojax import cli
from bojax.bo.journal import Journal
from bojax.bo.runs import load_run
from bojax.cli import app
from bojax.spaces import Integer, Real, Space

runner = CliRunner()
SPACE = Space([Real("lr", 1e-5, 0.1, log=True), Integer("layers", 1, 3)])


def record(n, y, phase="bo", error=None):
    x = {"lr": 10.0 ** -(n + 1), "layers": 1 + n % 3}
    return {
        "iteration": n,
        "proposal": n,
        "phase": phase,
        "x": x,
        "u": SPACE.to_unit(x).tolist(),  # a record's u is its x (show checks)
        "y": None if error else y,
        "status": "failed" if error else "ok",
        "error": error,
        "seconds": 0.5,
        "diagnostics": {"acquisition_value": -1.5, "ess": 40.0} if phase == "bo" else {},
    }


def live_run(folder: Path, maximize=False) -> Path:
    journal = Journal(folder)
    settings = {"surrogate": "gp-slice", "acquisition": "log_ei", "maximize": maximize}
    journal.start({"space": SPACE.to_dict(), "settings": settings})
    for n, y in enumerate([3.0, 1.0, 2.0]):
        journal.append(record(n, y, phase="initial"))
    journal.append(record(3, None, error="RuntimeError: training diverged"))
    journal.append(record(4, 0.5))
    u = [0.1, 0.2]
    journal.save_pending(
        [{"proposal": 5, "u": u, "x": SPACE.from_unit(u), "info": {"phase": "bo"}}]
    )
    with open(journal.records_path, "a") as handle:
        handle.write('{"iteration": 5, "propos')  # the run is writing its next record
    return folder


def test_show_prints_a_live_run_without_touching_its_files(tmp_path):
    folder = live_run(tmp_path / "run")
    before = (folder / "journal.jsonl").read_bytes()
    result = runner.invoke(app, ["show", str(folder)], terminal_width=200, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = result.output
    assert "running or interrupted, 1 evaluation(s) in flight" in text
    assert "5 evaluations (1 failed)" in text
    assert "failed at #3 (lr=0.0001, layers=1): RuntimeError: training diverged" in text
    assert "best (min) 0.5 at lr=1e-05, layers=2 (evaluation #4)" in text
    assert "in flight, proposal 5 (lr=" in text
    assert (folder / "journal.jsonl").read_bytes() == before  # the torn line is the run's


def test_show_lists_a_step_wise_training_in_flight_with_how_far_it_got(tmp_path):
    journal = Journal(tmp_path / "run")
    settings = {"surrogate": "gp-map", "max_step": 9, "early_stopping": "asha"}
    journal.start({"space": SPACE.to_dict(), "settings": settings})
    u = [0.1, 0.2]
    entry = {"proposal": 0, "u": u, "x": SPACE.from_unit(u), "info": {"phase": "initial"},
             "curve": [[1, 2.5], [2, 1.25]], "charged": 2}  # fmt: skip
    journal.save_pending([entry])
    result = runner.invoke(app, ["show", str(tmp_path / "run")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "in flight, proposal 0 (lr=" in result.output and ": step 2, value 1.25" in result.output


def test_show_into_a_pipe_keeps_every_column_whole(tmp_path):
    """Rich lays a pipe out on 80 columns and cut the table's cells ("initi…")."""
    folder = live_run(tmp_path / "run")
    result = runner.invoke(app, ["show", str(folder)], env={"COLUMNS": None})
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if "phase" in line)
    assert "best so far" in header and "acquisition" in header, header
    assert "…" not in result.output
    narrow = runner.invoke(app, ["show", str(folder)], env={"COLUMNS": "60"})
    assert "…" in narrow.output  # a width the user sets is kept


def test_best_so_far_follows_the_goal_and_skips_failures(tmp_path):
    run = load_run(live_run(tmp_path / "min"))
    assert run.best_so_far() == [3.0, 1.0, 1.0, 1.0, 0.5]
    run = load_run(live_run(tmp_path / "max", maximize=True))
    assert run.best_so_far() == [3.0, 3.0, 3.0, 3.0, 3.0] and run.best()["iteration"] == 0


def test_show_last_limits_the_rows(tmp_path):
    folder = live_run(tmp_path / "run")
    result = runner.invoke(
        app, ["show", str(folder), "--last", "2"], terminal_width=200, env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0
    rows = [line for line in result.output.splitlines() if line.startswith("│")]
    assert [row.split("│")[1].strip() for row in rows] == ["3", "4"]
    assert "failed at #3" in result.output  # the failures among the rows shown, only
    result = runner.invoke(app, ["show", str(folder), "--last", "1"], terminal_width=200)
    assert result.exit_code == 0 and "failed at" not in result.output


def test_show_lists_the_last_thousand_rows_unless_told_otherwise(tmp_path, monkeypatch):
    """A run of 20,000 evaluations printed every row, for 20 s (review CP): by default the
    last ``SHOW_ROWS``, saying so; ``--all`` lists every one."""
    folder = live_run(tmp_path / "run")
    monkeypatch.setattr(cli, "SHOW_ROWS", 2)
    wide = {"terminal_width": 200, "env": {"COLUMNS": "200"}}

    def rows(*options):
        result = runner.invoke(app, ["show", str(folder), *options], **wide)
        assert result.exit_code == 0, result.output
        lines = [line for line in result.output.splitlines() if line.startswith("│")]
        return [line.split("│")[1].strip() for line in lines], result.output

    shown, output = rows()
    assert shown == ["3", "4"] and "the last 2 of 5 evaluations: --last N, or --all" in output
    shown, output = rows("--all")
    assert shown == ["0", "1", "2", "3", "4"] and "--all for every one" not in output
    shown, output = rows("--last", "4")
    assert shown == ["1", "2", "3", "4"] and "--all for every one" not in output
    result = runner.invoke(app, ["show", str(folder), "--last", "2", "--all"], **wide)
    assert result.exit_code == 1 and "--last and --all: give one of them" in result.output


def test_show_refuses_a_folder_without_a_run(tmp_path):
    result = runner.invoke(app, ["show", str(tmp_path)])
    assert result.exit_code == 1 and "holds no run" in result.output
    result = runner.invoke(app, ["show", str(tmp_path / "typo")], terminal_width=400)
    assert result.exit_code == 1 and "typo does not exist" in result.output  # not "no run"


@pytest.mark.parametrize("name", ["arc-seed0", "baseline-seed0"])
def test_show_reads_the_committed_report_runs(name):
    folder = Path(__file__).parents[1] / "paper_figures/arc_kernel/full/runs" / name
    result = runner.invoke(
        app, ["show", str(folder), "--last", "3"], terminal_width=200, env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((folder / "summary.json").read_text())
    assert f"{summary['best_value']:.6g}" in result.output


# -- bojax plot ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    import bojax
    from bojax.objectives.problems import get_problem

    folder = tmp_path_factory.mktemp("runs") / "branin"
    problem = get_problem("branin")
    bojax.minimize(problem, problem.space, surrogate="gp-map", iterations=3, initial=5,
                   num_candidates=128, out=folder, progress=False)  # fmt: skip
    return folder


@pytest.mark.slow
def test_plot_writes_the_progress_parameters_and_slices_of_a_run(finished_run, tmp_path):
    from PIL import Image

    result = runner.invoke(app, ["plot", str(finished_run), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for name in ("progress.png", "parameters.png", "slices.png", "slice2d.png"):
        with Image.open(tmp_path / name) as image:
            assert image.size[0] > 500 and image.size[1] > 250, name
        assert f"wrote {tmp_path / name}" in result.output.replace("\n", "")


@pytest.mark.slow
def test_the_refitted_posterior_follows_the_data_in_the_objectives_units(finished_run):
    """A sign or scale slip in undoing the loop's standardisation would show here: the
    posterior mean at the evaluated points ranks them as their values do, on their scale."""
    from scipy.stats import spearmanr

    from bojax.bo.loop import predictor
    from bojax.reports.run_figures import _state

    run = load_run(finished_run)
    u = np.array([r["u"] for r in run.records])
    y = np.array([r["y"] for r in run.records])
    mean, sd = predictor(_state(run))(u)
    assert spearmanr(mean, y).statistic > 0.7
    assert y.min() - y.std() < mean.mean() < y.max() + y.std() and np.all(sd > 0)


def test_plot_of_a_run_without_a_success_skips_the_slices(tmp_path):
    journal = Journal(tmp_path / "run")
    journal.start({"space": SPACE.to_dict(), "settings": {"surrogate": "gp-map"}})
    journal.append(record(0, None, phase="initial", error="ValueError: nan"))
    result = runner.invoke(app, ["plot", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "run/figures/progress.png").exists()
    assert not (tmp_path / "run/figures/slices.png").exists()


def test_plot_into_a_file_is_a_clear_error_not_a_traceback(tmp_path):
    journal = Journal(tmp_path / "run")
    journal.start({"space": SPACE.to_dict(), "settings": {"surrogate": "gp-map"}})
    journal.append(record(0, None, phase="initial", error="ValueError: nan"))
    (tmp_path / "a file").write_text("")
    result = runner.invoke(app, ["plot", str(tmp_path / "run"), "--out", str(tmp_path / "a file")])
    assert result.exit_code == 1 and "cannot make the figures' folder" in result.output
    assert "cannot write" not in result.output  # not wrapped twice (review CJ)


def test_a_figure_that_cannot_be_written_is_a_clear_error_not_a_traceback(tmp_path):
    """savefig's OSError (a read-only folder, a full disk, a folder in a figure's place)
    escaped as a traceback; only making the folder was guarded (review CF)."""
    journal = Journal(tmp_path / "run")
    journal.start({"space": SPACE.to_dict(), "settings": {"surrogate": "gp-map"}})
    journal.append(record(0, None, phase="initial", error="ValueError: nan"))
    (tmp_path / "out" / "progress.png").mkdir(parents=True)
    result = runner.invoke(
        app, ["plot", str(tmp_path / "run"), "--out", str(tmp_path / "out")], terminal_width=400
    )
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "cannot write" in result.output and "progress.png: Is a directory" in result.output


def test_long_names_are_cut_in_titles_and_labels_and_counts_tick_whole(tmp_path, monkeypatch):
    """A 192-character name ran across its neighbours' titles and off the figure; an
    evaluation axis of a short run ticked at 0.5 and 1.25 (review CF)."""
    import bojax.reports.run_figures as run_figures

    long = "x_" + "a" * 190
    space = Space([Real(long, 0.0, 1.0), Real("lr", 1e-4, 1e-1, log=True)])
    journal = Journal(tmp_path / "run")
    journal.start({"space": space.to_dict(), "settings": {"surrogate": "gp-map"}})
    for n in range(2):
        x = {long: 0.25 * (n + 1), "lr": 1e-3}
        journal.append({**record(n, 1.0 - n, phase="initial"), "x": x,
                        "u": space.to_unit(x).tolist()})  # fmt: skip
    drawn = []
    monkeypatch.setattr(run_figures, "save", lambda fig, path, dpi=120: drawn.append(fig))
    run_figures.plot_run(load_run(tmp_path / "run"), tmp_path / "figures", slices=False)
    texts = [t for fig in drawn for ax in fig.axes for t in (ax.get_title(), ax.get_xlabel())]
    assert max(map(len, texts)) <= run_figures.LONGEST_NAME
    assert long[:39] + "\N{HORIZONTAL ELLIPSIS}" in texts
    ticks = [tick for fig in drawn for ax in fig.axes for tick in ax.get_xticks()]
    assert ticks and all(float(tick).is_integer() for tick in ticks)
    drawn.clear()  # one evaluation: an axis from -0.5 to 0.5 holds one whole number
    journal.records_path.write_text(journal.records_path.read_text().splitlines()[0] + "\n")
    run_figures.plot_run(load_run(tmp_path / "run"), tmp_path / "figures", slices=False)
    ticks = [tick for fig in drawn for ax in fig.axes for tick in ax.get_xticks()]
    assert ticks and all(float(tick).is_integer() for tick in ticks), ticks


def test_an_integer_parameters_axis_ticks_whole_numbers(tmp_path, monkeypatch):
    """layers was ticked at 1.5 and 2.5, values it cannot take (review CK)."""
    import bojax.reports.run_figures as run_figures

    journal = Journal(tmp_path / "run")
    journal.start({"space": SPACE.to_dict(), "settings": {"surrogate": "gp-map"}})
    for n in range(3):
        journal.append(record(n, 1.0 + n, phase="initial"))
    drawn = []
    monkeypatch.setattr(run_figures, "save", lambda fig, path, dpi=120: drawn.append(fig))
    run_figures.plot_parameters(load_run(tmp_path / "run"), tmp_path / "parameters.png")
    layers = next(ax for ax in drawn[0].axes if ax.get_title() == "layers")
    assert all(float(tick).is_integer() for tick in layers.get_yticks()), layers.get_yticks()


def test_a_short_log_axis_labels_more_than_its_power_of_ten(tmp_path, monkeypatch):
    """A log integer on 1..8 was labelled 10^0 alone (review CL)."""
    import bojax.reports.run_figures as run_figures

    space = Space([Integer("n", 1, 8, log=True)])
    journal = Journal(tmp_path / "run")
    journal.start({"space": space.to_dict(), "settings": {"surrogate": "gp-map"}})
    for k, n in enumerate((1, 3, 8)):
        journal.append({**record(k, float(n), phase="initial"), "x": {"n": n},
                        "u": space.to_unit({"n": n}).tolist()})  # fmt: skip
    drawn = []
    monkeypatch.setattr(run_figures, "save", lambda fig, path, dpi=120: drawn.append(fig))
    run_figures.plot_parameters(load_run(tmp_path / "run"), tmp_path / "parameters.png")
    (ax,) = drawn[0].axes
    drawn[0].canvas.draw()
    low, high = ax.get_ylim()
    shown = [t.get_text() for t in ax.get_yticklabels() if low <= t.get_position()[1] <= high]
    assert len([t for t in shown if t]) >= 3, shown
    from bojax.reports.run_figures import _short_log_ticks

    for low, high in ((3, 7), (1, 2), (10, 15)):  # whole numbers, not 3.5, 4.5 (review CN)
        ticks = _short_log_ticks(low, high, integer=True)
        assert ticks[0] == low and ticks[-1] == high and all(t.is_integer() for t in ticks)
    assert _short_log_ticks(1e-3, 5e-2, integer=False) == pytest.approx(
        [1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2]
    )


def test_a_parameter_no_evaluation_used_says_so_instead_of_empty_axes(tmp_path, monkeypatch):
    """A conditional parameter whose condition never held drew empty axes on -0.05..0.05
    (review CK)."""
    import bojax.reports.run_figures as run_figures
    from bojax.parameters import Categorical
    from bojax.spaces import Condition

    space = Space([
        Categorical("opt", ["adam", "sgd"]),
        Real("momentum", 0.0, 0.99, condition=Condition("opt", "==", "sgd")),
    ])  # fmt: skip
    journal = Journal(tmp_path / "run")
    journal.start({"space": space.to_dict(), "settings": {"surrogate": "gp-map"}})
    for n in range(2):
        x = {"opt": "adam"}
        journal.append({**record(n, 1.0 + n, phase="initial"), "x": x,
                        "u": space.to_unit(x).tolist()})  # fmt: skip
    drawn = []
    monkeypatch.setattr(run_figures, "save", lambda fig, path, dpi=120: drawn.append(fig))
    run_figures.plot_parameters(load_run(tmp_path / "run"), tmp_path / "parameters.png")
    momentum = next(ax for ax in drawn[0].axes if ax.get_title() == "momentum")
    assert any("not used by any evaluation" in t.get_text() for t in momentum.texts)
    assert not list(momentum.get_yticks())


def test_plot_names_the_figures_an_earlier_plot_left_and_it_did_not_redraw(tmp_path):
    """plot --no-slices left an older slices.png beside the new figures, unmentioned
    (review CF)."""
    journal = Journal(tmp_path / "run")
    journal.start({"space": SPACE.to_dict(), "settings": {"surrogate": "gp-map"}})
    journal.append(record(0, None, phase="initial", error="ValueError: nan"))
    (tmp_path / "run" / "figures").mkdir()
    (tmp_path / "run" / "figures" / "slices.png").write_bytes(b"an older model's")
    result = runner.invoke(app, ["plot", str(tmp_path / "run")], terminal_width=400)
    assert result.exit_code == 0, result.output
    assert "left from an earlier plot, not redrawn: slices.png" in result.output
    assert "slice2d.png" not in result.output  # (none there)


def test_plot_of_a_run_with_nothing_journalled_says_so_and_draws_nothing(tmp_path):
    journal = Journal(tmp_path / "run")
    journal.start({"space": SPACE.to_dict(), "settings": {"surrogate": "gp-map"}})
    result = runner.invoke(app, ["plot", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "nothing to plot" in result.output
    assert not (tmp_path / "run/figures").exists()


def test_show_says_a_run_whose_evaluations_all_failed_has_ended(tmp_path):
    import bojax
    from bojax.errors import ObjectiveError

    def broken(point):
        raise RuntimeError("a typo in the training script")

    def broken_training(point, report):
        raise RuntimeError("a typo in the training script")

    runs = {
        "plain": lambda out: bojax.minimize(
            broken, SPACE, initial=2, iterations=1, progress=False, out=out
        ),
        "stepwise": lambda out: bojax.minimize(
            broken_training,
            SPACE,
            max_step=3,
            step_budget=4,
            early_stopping="asha",
            progress=False,
            out=out,
        ),
    }
    for name, run in runs.items():
        with pytest.raises(ObjectiveError):
            run(tmp_path / name)
        shown = runner.invoke(app, ["show", str(tmp_path / name)], env={"COLUMNS": "200"})
        assert shown.exit_code == 0, shown.output
        assert "running or interrupted" not in shown.output
        assert "ended: every" in shown.output and "a typo in the training script" in shown.output


def test_show_names_the_best_stopped_training_when_none_finished(tmp_path):
    import bojax

    def stops_then_crashes(point, report):
        report(1, point["lr"])
        raise RuntimeError("out of memory")

    result = bojax.minimize(
        stops_then_crashes, SPACE, max_step=3, step_budget=4, early_stopping="asha",
        surrogate="gp-map", progress=False, out=tmp_path / "run",
    )  # fmt: skip
    assert {r["status"] for r in result.history} <= {"stopped", "failed"}
    best = load_run(tmp_path / "run").best()
    assert best is not None and best["y"] == result.best_value
    shown = runner.invoke(app, ["show", str(tmp_path / "run")], env={"COLUMNS": "200"})
    assert f"best (min) {result.best_value:.6g}" in shown.output
    assert "none trained to the end, this one stopped" in shown.output


def test_show_reads_past_a_malformed_curve_of_a_training_in_flight(tmp_path):
    journal = Journal(tmp_path / "run")
    journal.start({"space": SPACE.to_dict(), "settings": {"surrogate": "gp-map"}})
    u = [0.1, 0.2]
    entry = {"proposal": 0, "u": u, "x": SPACE.from_unit(u), "info": {"phase": "initial"},
             "curve": [[3]]}  # fmt: skip
    journal.save_pending([entry])
    result = runner.invoke(app, ["show", str(tmp_path / "run")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "in flight, proposal 0 (lr=" in result.output and "step" not in result.output


def test_plot_of_a_run_stopped_inside_its_initial_design_skips_the_slices(tmp_path):
    """The refit predicts as the run would: not before its initial design is in."""
    import bojax
    from bojax.objectives.problems import get_problem

    problem, calls = get_problem("branin"), []

    def stopped(point):
        calls.append(point)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return problem(point)

    with pytest.raises(KeyboardInterrupt):
        bojax.minimize(stopped, problem.space, initial=8, iterations=2, out=tmp_path / "run",
                       progress=False)  # fmt: skip
    result = runner.invoke(app, ["plot", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "run" / "figures" / "slices.png").exists()


def test_plot_slices_an_ordinal_of_ints_and_floats(tmp_path):
    """Its values decode as objects (0, 0.5, 1 keep their types), which matplotlib's
    fill_between refused: `bojax plot` ended in a traceback (review)."""
    import bojax
    from bojax.parameters import Ordinal

    space = Space([Ordinal("o", [0, 0.5, 1]), Real("r", 0.0, 1.0)])
    bojax.minimize(lambda p: (p["o"] - 0.3) ** 2 + p["r"], space, surrogate="gp-map",
                   initial=3, iterations=0, progress=False, out=tmp_path / "run")  # fmt: skip
    result = runner.invoke(app, ["plot", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "run/figures/slices.png").exists()
