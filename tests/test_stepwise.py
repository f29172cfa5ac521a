"""Step-wise objectives ``train(point, report)`` under ASHA, Hyperband and freeze-thaw,
inline, on executors and in isolated processes (issue 40)."""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import json
import math
import re
import threading
import time

import jax.numpy as jnp
import numpy as np
import pytest

import bojax
from bojax.bo import schedulers
from bojax.bo.journal import Journal
from bojax.bo.segments import run_segment
from bojax.bo.stepwise import Checkpoint, StopTraining, rung_values, takes_report
from bojax.errors import JournalError, ObjectiveError, SettingsError
from bojax.parameters import Real

SPACE = bojax.Space([Real("lr", 1e-4, 1e-1, log=True), Real("w", 0.0, 1.0)])


def final_value(point) -> float:
    a = math.log10(point["lr"]) + 2.5
    return a * a + (point["w"] - 0.3) ** 2


def make_train(max_step: int = 27, log: list | None = None):
    """Curves falling as 1/step to the design's final value; ``log`` gets every report."""

    def train(point, report):
        final = final_value(point)
        for step in range(1, max_step + 1):
            value = final + 2.0 / step
            if log is not None:
                log.append((point["lr"], step))
            report(step, value)
        return final

    return train


KEYS = ("x", "u", "y", "status", "curve", "phase")


def untimed(record):
    """``record``'s fields for comparing two runs: its diagnostics without the segment's
    timed seconds, which differ from run to run (reported seconds do not)."""
    info = {k: v for k, v in record["diagnostics"].items() if k != "training_seconds"}
    return {**record, "diagnostics": info}


def same_records(a, b):
    return [{k: r[k] for k in KEYS} for r in a] == [{k: r[k] for k in KEYS} for r in b]


# -- the scheduler's rules -------------------------------------------------------------
def test_milestones_are_geometric_and_end_at_max_step():
    assert schedulers.milestones(1, 52, 3) == (1, 3, 9, 27, 52)
    assert schedulers.milestones(2, 8, 2) == (2, 4, 8)
    assert schedulers.milestones(5, 5, 3) == (5,)
    # A power max_step follows by less than sqrt(eta) is no milestone: no training is
    # stopped one step short of complete (27 of 28; 9 of 10; 4 of 5 with eta = 2).
    assert schedulers.milestones(1, 28, 3) == (1, 3, 9, 28)
    assert schedulers.milestones(1, 10, 3) == (1, 3, 10)
    assert schedulers.milestones(1, 5, 2) == (1, 2, 5)
    assert schedulers.milestones(1, 6, 2) == (1, 2, 4, 6)  # 6 / 4 >= sqrt(2)
    assert schedulers.milestones(5, 6, 3) == (5, 6)  # min_step stays, however close
    with pytest.raises(SettingsError, match="min_step"):
        schedulers.milestones(6, 5, 3)
    with pytest.raises(SettingsError, match="min_step = 9 exceeds max_step = 5"):
        bojax.Settings(max_step=5, min_step=9)


def test_hyperband_sizes_brackets_as_li_et_al_and_interleaves_them():
    assert schedulers.bracket_sizes(5, 3) == (81, 34, 15, 8, 5)
    rungs = schedulers.hyperband((1, 3, 9, 27, 52), 3)
    cycle = [rungs.bracket(j) for j in range(143)]
    assert [cycle.count(b) for b in range(5)] == [81, 34, 15, 8, 5]
    assert [rungs.bracket(j) for j in range(143, 286)] == cycle  # it repeats
    assert set(cycle[:12]) >= {0, 1, 2}  # interleaved, not 81 aggressive designs first
    assert [schedulers.asha((1, 3), 3).bracket(j) for j in range(5)] == [0] * 5


def test_a_milestone_keeps_the_best_third_of_its_values_so_far():
    rungs = schedulers.asha((1, 3, 9), 3)
    decisions = [rungs.keep(0, 0, v) for v in [5.0, 6.0, 4.0, 7.0, 3.0, 4.5]]
    # 1 value: top 1; 2: top 1 (6 > 5); 3: top 1 (4 best); 4: top 1; 5: top 1 (3 best);
    # 6 values: top 2 (4.5 is third: 3, 4 lower)
    assert decisions == [True, False, True, False, True, False]
    assert rungs.keep(0, 0, 3.5) is True  # 7 values, top 2: 3 < 3.5, second
    assert rungs.keep(0, 2, 0.0) is False  # the last milestone: the training is complete


def test_equal_values_at_a_milestone_rank_together():
    # A metric that cannot tell designs apart yet stops none of them (as Optuna's
    # SuccessiveHalvingPruner): fewer than max(1, m // eta) values are strictly better.
    rungs = schedulers.asha((1, 3, 9), 3)
    assert [rungs.keep(0, 0, 0.5) for _ in range(9)] == [True] * 9
    assert rungs.keep(0, 0, 0.6) is False  # nine values below it
    assert rungs.keep(0, 0, 0.4) is True


def test_rung_values_take_the_first_report_at_or_past_each_milestone():
    assert rung_values((1, 3, 9), [[1, 5.0], [2, 4.0], [4, 3.0], [9, 2.0]]) == {
        0: 5.0,
        1: 3.0,
        2: 2.0,
    }
    assert rung_values((2, 4), [[1, 1.0]]) == {}


class _AtSubmit:
    """A deterministic pool of three "workers" that runs each task as it is submitted,
    so trainings end in another order than they reached their milestones."""

    _max_workers = 3

    def submit(self, fn, *args):
        future = cf.Future()
        future.set_result(fn(*args))
        return future


@pytest.mark.parametrize("scheduler", ["asha", "hyperband"])
def test_a_parallel_run_whose_reports_jump_milestones_resumes_to_the_same_decisions(
    scheduler, tmp_path
):
    """A report past several milestones is recorded at each of them whatever the first
    decides, so a resume, which replays curves in the order trainings ended, rebuilds
    the milestones' records the run held. Stopping at the first refusal left later
    milestones to the order of the calls: resumed, designs the uninterrupted run stopped
    at step 12 trained to 27 (review)."""
    calls = {"n": 0, "kill": None}

    def train(point, report, checkpoint=None):
        calls["n"] += 1
        if calls["n"] == calls["kill"]:
            raise KeyboardInterrupt
        final = (np.log10(point["lr"]) + 2.5) ** 2 + (point["w"] - 0.6) ** 2
        for step in (4, 8, 12, 16, 20, 24, 27):  # past milestones 1 and 3 at once
            if step > (checkpoint or 0):
                report(step, final + 1.0 / step, checkpoint=step)
        return final

    def run(out, kill=None, resume=False):
        calls.update(n=0, kill=kill)
        with contextlib.suppress(KeyboardInterrupt):
            bojax.minimize(
                train, SPACE, max_step=27, early_stopping=scheduler, eta=3, step_budget=400,
                initial=4, proposer="random", seed=3, progress=False, out=out,
                resume=resume, executor=_AtSubmit(),
            )  # fmt: skip

    def records(out):
        lines = (out / "journal.jsonl").read_text().splitlines()
        rows = [json.loads(line) for line in lines]
        return sorted(
            (r["proposal"], r["status"], [c[0] for c in r["curve"]], r["y"])
            for r in rows
            if "curve" in r
        )

    run(tmp_path / "whole")
    run(tmp_path / "killed", kill=9)
    run(tmp_path / "killed", resume=True)
    whole = records(tmp_path / "whole")
    assert any(status == "stopped" and curve[-1] > 4 for _, status, curve, _ in whole)
    assert records(tmp_path / "killed") == whole


def reference_asha(curves: list[list[list[float]]], steps, eta) -> list[int]:
    """The step where each training should stop under ASHA (the last one it reported if it
    went on), from the curves in order: an independent replay of the rule."""
    recorded: dict[int, list[float]] = {}
    stops = []
    for curve in curves:
        stop = curve[-1][0] if curve else 0
        rung = 0
        for step, value in curve:
            while rung < len(steps) and step >= steps[rung]:
                values = recorded.setdefault(rung, [])
                values.append(value)
                top = max(1, len(values) // eta)
                if rung < len(steps) - 1 and sorted(values).index(value) >= top:
                    stop = step
                rung += 1
            if stop == step:
                break
        stops.append(stop)
    return stops


# -- the driver ------------------------------------------------------------------------
def test_asha_stops_trainings_where_the_rule_says_and_spends_the_budget_exactly():
    result = bojax.minimize(
        make_train(), SPACE, max_step=27, early_stopping="asha", proposer="random",
        step_budget=300, progress=False,
    )  # fmt: skip
    curves = [r["curve"] for r in result.history]
    expected = reference_asha(curves, (1, 3, 9, 27), 3)
    assert [c[-1][0] for c in curves] == expected
    assert result.steps == 300 == sum(c[-1][0] for c in curves)
    statuses = [r["status"] for r in result.history]
    assert statuses.count("stopped") >= len(statuses) // 2  # most trainings stop early
    assert all(r["status"] == "ok" for r in result.history if r["curve"][-1][0] == 27)
    complete = [r for r in result.history if r["status"] == "ok"]
    assert result.best_value == min(r["y"] for r in complete)
    assert result.best_value == pytest.approx(final_value(result.best_point))


def test_no_early_stopping_trains_every_design_to_max_step():
    result = bojax.minimize(
        make_train(9), SPACE, max_step=9, early_stopping="none", proposer="random",
        initial=2, iterations=3, progress=False,
    )  # fmt: skip
    assert [r["curve"][-1][0] for r in result.history] == [9] * 5
    assert result.steps == 45


@pytest.mark.slow  # 9 s: a whole ASHA run with model proposals (fast tier at 300 s)
def test_model_proposals_follow_the_highest_milestone_with_enough_values():
    result = bojax.minimize(
        make_train(), SPACE, max_step=27, early_stopping="hyperband", surrogate="gp-map",
        step_budget=400, progress=False,
    )  # fmt: skip
    phases = [r["phase"] for r in result.history]
    # max(initial = 5, d + 2 = 4) values at step 1 after the first 5 designs
    assert phases[:5] == ["initial"] * 5 and phases[5] != "initial"
    model = [r for r in result.history if r["phase"] != "initial"]
    assert model and all(r["diagnostics"]["model_step"] in (1, 3, 9, 27) for r in model)
    assert all(r["diagnostics"]["model_points"] >= 5 for r in model)
    points = np.array([r["u"] for r in result.history])
    assert len(np.unique(points.round(12), axis=0)) == len(points)  # no design twice
    assert {r["diagnostics"]["bracket"] for r in result.history} >= {0, 1, 2}
    # the model finds the basin: the best complete design is far better than random's
    randoms = [final_value(SPACE.from_unit(u)) for u in np.random.default_rng(0).random((20, 2))]
    assert result.best_value < np.quantile(randoms, 0.1)


def test_the_stop_passes_through_the_objectives_own_except_exception():
    caught = []

    def train(point, report):
        for step in range(1, 10):
            try:
                report(step, final_value(point) + 1.0 / step)
            except Exception as error:  # must not see the stop
                caught.append(error)
        return final_value(point)

    result = bojax.minimize(
        train, SPACE, max_step=9, early_stopping="asha", proposer="random", step_budget=40,
        progress=False,
    )  # fmt: skip
    assert not caught
    assert "stopped" in [r["status"] for r in result.history]
    assert issubclass(StopTraining, BaseException) and not issubclass(StopTraining, Exception)


@pytest.mark.parametrize("pool", [False, True])
@pytest.mark.parametrize(
    "steps, nan_at, refused",
    [
        ((1, 2, 3, 4), 3, "value must be a finite number, got nan"),
        ((1, 2, 3, 2, 4), None, "whole number above the last one (3), got 2"),
        ((1, 2, 7), None, "step 7 is past max_step = 4, and the training reported only up"),
    ],
)
def test_a_refused_report_fails_the_training_even_if_it_catches_the_error(
    pool, steps, nan_at, refused, tmp_path
):
    """A NaN value, a step back or a jump past max_step raises ValueError in report; a
    training that logged it and went on was journalled ok, steps missing from its curve
    (review)."""

    def train(point, report):
        for step in steps:
            try:
                report(step, math.nan if step == nan_at else final_value(point))
            except Exception:
                pass
        return final_value(point)

    executor = cf.ThreadPoolExecutor(1) if pool else None
    with contextlib.suppress(ObjectiveError):  # (raised when every training failed)
        bojax.minimize(train, SPACE, max_step=4, early_stopping="none", initial=2, iterations=0,
                       executor=executor, progress=False, seed=0, out=tmp_path)  # fmt: skip
    history = Journal(tmp_path).read()
    failed = [r for r in history if r["status"] == "failed"]
    assert "ok" not in {r["status"] for r in history}
    misuse = "whole number" in refused  # the objective's code: the run stops at the first
    assert len(failed) == 1 if misuse else len(failed) >= 2
    kind = "ReportMisuse: " if misuse else "ValueError: "
    assert all(r["error"].startswith(kind) and refused in r["error"] for r in failed)


@pytest.mark.parametrize(
    "report_as, says, trainings",
    [
        (lambda report, epoch, loss: report(epoch - 1, loss), "above the last one (0), got 0", 1),
        (lambda report, epoch, loss: report(loss), "was given one argument", 1),
        (lambda report, epoch, loss: report(epoch, {"loss": loss}), "got {'loss'", 3),
    ],
)
def test_report_called_wrongly_by_every_training_stops_the_run(report_as, says, trainings):
    """0-based epochs, a value without its step, a dict: each design trained a step, then
    failed, until the whole step budget was spent so (review: 350 designs). A value that
    is not a number may be one design's (a metric it lacks): the third stops the run."""
    started = []

    def train(point, report):
        started.append(point)
        for epoch in range(1, 10):
            report_as(report, epoch, final_value(point) + 1 / epoch)
        return final_value(point)

    with pytest.raises(ObjectiveError, match="called report wrongly") as raised:
        bojax.minimize(train, SPACE, progress=False, **ASHA)
    assert says in str(raised.value) and "ReportMisuse: " in str(raised.value)
    assert len(started) == trainings


def test_a_value_that_diverges_at_every_step_is_a_design_failure_not_a_misuse():
    def train(point, report):
        for epoch in range(1, 4):
            report(epoch, math.nan)
        return math.nan

    with pytest.raises(ObjectiveError, match=r"every training failed \((\d+)\)") as raised:
        bojax.minimize(train, SPACE, progress=False, max_step=3, early_stopping="none",
                       initial=3, iterations=0, surrogate="gp-map")  # fmt: skip
    assert int(re.search(r"failed \((\d+)\)", str(raised.value)).group(1)) > 1  # went on
    assert "ValueError: " in str(raised.value)


def test_the_step_a_training_diverges_at_is_charged_and_resumed_alike(tmp_path):
    """A training that reports inf at step 2 trained two steps: both are charged, in the
    run's spend and its record, and a resume replays the same spend (review CW: step 2
    was not charged, so a design that always diverged at step k cost k - 1). Freeze-thaw's
    segments: the test below."""

    def train(point, report):
        report(1, final_value(point))
        report(2, math.inf)

    settings = dict(max_step=4, early_stopping="asha", proposer="random", step_budget=30,
                    seed=1, progress=False)  # fmt: skip
    result = bojax.minimize(train, SPACE, out=tmp_path, **settings)
    failed = [r for r in result.history if r["status"] == "failed"]
    assert failed and all(r["curve"] == r["curve"][:1] for r in failed)
    assert all(r["diagnostics"]["charged"] == 2 for r in failed)
    spent = sum(r["diagnostics"].get("charged", r["curve"][-1][0]) for r in result.history)
    assert result.steps == spent >= 30
    again = bojax.minimize(train, SPACE, out=tmp_path, resume=True, **settings)
    assert again.steps == result.steps and again.history == result.history


def test_a_segment_charges_the_step_it_diverges_at():
    def train(point, report, checkpoint=None):
        for step in range(checkpoint + 1, 10):
            report(step, math.nan if step == 5 else 1.0 / step, checkpoint=step)

    seen = []  # what an isolated segment's progress file is told, step by step
    segment = run_segment(train, {"lr": 1e-3, "w": 0.3}, 3, 9, 9, checkpoint=Checkpoint(3, 3),
                          on_report=lambda report: seen.append(report.charged))  # fmt: skip
    assert segment.status == "failed" and "finite number" in segment.error
    assert segment.curve == [[4, 0.25]] and segment.charged == 2  # steps 4 and 5
    assert seen == [1, 2]


def test_failing_and_misreporting_trainings_are_recorded_and_the_run_goes_on():
    calls = []

    def train(point, report):
        calls.append(point)
        k = len(calls)
        if k == 2:
            raise RuntimeError("out of memory")
        if k == 3:
            report(1, math.nan)
        if k == 4:
            report(2, 1.0)
            report(2, 0.5)  # not above the last step
        for step in range(1, 4):
            report(step, final_value(point) + 1.0 / step)
        return final_value(point)

    result = bojax.minimize(
        train, SPACE, max_step=3, early_stopping="none", proposer="random", step_budget=18,
        progress=False,
    )  # fmt: skip
    errors = [r["error"] for r in result.history]
    assert errors[1] == "RuntimeError: out of memory"
    assert "finite number" in errors[2] and "above the last one (2)" in errors[3]
    assert [r["status"] for r in result.history[1:4]] == ["failed"] * 3
    assert result.failures == 3 and result.steps == 18


def test_a_keyword_only_report_and_whole_float_steps_are_taken_and_half_steps_are_not():
    def train(point, *, report):  # passed by name; steps as floats, as epoch / 1.0 gives
        for step in (1.0, np.float32(2.0), 3.0):
            report(step, final_value(point) + 1.0 / step)
        return final_value(point)

    result = bojax.minimize(
        train, SPACE, max_step=3, early_stopping="none", proposer="random", step_budget=9,
        progress=False,
    )  # fmt: skip
    assert [r["status"] for r in result.history] == ["ok"] * 3
    assert [step for step, _ in result.history[0]["curve"]] == [1, 2, 3]

    def halves(point, report):
        report(1.5, 1.0)

    with pytest.raises(ObjectiveError, match=r"whole number above the last one \(0\), got 1.5"):
        bojax.minimize(
            halves, SPACE, max_step=3, early_stopping="none", proposer="random", step_budget=3,
            progress=False,
        )  # fmt: skip


def test_step_wise_settings_are_checked():
    with pytest.raises(SettingsError, match="set max_step"):
        bojax.minimize(make_train(), SPACE, progress=False)
    with pytest.raises(SettingsError, match="max_step is for step-wise"):
        bojax.minimize(final_value, SPACE, max_step=5, progress=False)
    # Without max_step, step-wise settings on a plain objective were silently ignored
    # (early_stopping="asha" trained every design in full).
    for setting in (dict(early_stopping="asha"), dict(eta=2), dict(step_budget=50)):
        with pytest.raises(SettingsError, match=f"{next(iter(setting))} is for step-wise"):
            bojax.minimize(final_value, SPACE, progress=False, **setting)
    plain = bojax.minimize(final_value, SPACE, progress=False, early_stopping="none",
                           surrogate="gp-map", initial=2, iterations=0)  # fmt: skip
    assert plain.evaluations == 2  # "none" says what a plain objective does anyway
    with pytest.raises(SettingsError, match="freeze-thaw trains q > 1 designs"):
        bojax.minimize(make_train(), SPACE, max_step=5, q=2, early_stopping="freeze-thaw")
    with pytest.raises(SettingsError, match=r"pass executor=.*--workers"):
        bojax.minimize(make_train(), SPACE, max_step=5, q=2, progress=False)
    with pytest.raises(SettingsError, match=r"stop_tolerance .* is for plain objectives"):
        bojax.minimize(make_train(), SPACE, max_step=5, stop_tolerance=1e-3, progress=False)
    with pytest.raises(SettingsError, match="early_stopping must be one of"):
        bojax.Settings(early_stopping="bohb")
    assert takes_report(make_train()) and not takes_report(final_value)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*journalled for the objective")  # (a wrapper)
def test_a_killed_run_resumes_to_the_uninterrupted_runs_records(tmp_path):
    settings = dict(max_step=27, early_stopping="hyperband", surrogate="gp-map", step_budget=260)
    whole = bojax.minimize(make_train(), SPACE, progress=False, out=tmp_path / "a", **settings)

    reports = []

    def dies(point, report):
        def dying(step, value):
            reports.append(step)
            if len(reports) > 150:
                raise KeyboardInterrupt  # the driver dies mid-training
            report(step, value)

        return make_train()(point, dying)

    with pytest.raises(KeyboardInterrupt):
        bojax.minimize(dies, SPACE, progress=False, out=tmp_path / "b", **settings)
    done = len((tmp_path / "b" / "journal.jsonl").read_text().splitlines())
    assert 0 < done < len(whole.history)
    resumed = bojax.minimize(
        make_train(), SPACE, progress=False, out=tmp_path / "b", resume=True, **settings
    )
    keys = ("x", "u", "y", "status", "curve", "phase")
    assert [{k: r[k] for k in keys} for r in resumed.history] == [
        {k: r[k] for k in keys} for r in whole.history
    ]
    assert resumed.steps == whole.steps == 260
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["steps"] == 260 and summary["best_value"] == whole.best_value


def test_a_tampered_curve_is_refused_on_resume(tmp_path):
    settings = dict(max_step=9, early_stopping="asha", proposer="random", step_budget=30)
    bojax.minimize(make_train(9), SPACE, progress=False, out=tmp_path, **settings)
    path = tmp_path / "journal.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[0])
    record["curve"] = [[3, 1.0], [2, 1.0]]
    path.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    with pytest.raises(JournalError, match=r"journal\.jsonl:1: 'curve'"):
        bojax.minimize(make_train(9), SPACE, progress=False, out=tmp_path, resume=True, **settings)


def test_a_file_objective_with_report_runs_from_the_command_line_and_shows(tmp_path):
    from typer.testing import CliRunner

    from bojax.cli import app

    (tmp_path / "train.py").write_text(
        "import math\n\n"
        "def train(point, report):\n"
        "    final = (math.log10(point['lr']) + 2.5) ** 2\n"
        "    for epoch in range(1, 10):\n"
        "        report(epoch, final + 1.0 / epoch)\n"
        "    return final\n"
    )
    (tmp_path / "space.toml").write_text(
        '[[parameters]]\nname = "lr"\ntype = "real"\nlow = 0.0001\nhigh = 0.1\nlog = true\n'
    )
    run = tmp_path / "run"
    command = [
        "optimize", str(tmp_path / "train.py") + ":train", "--space",
        str(tmp_path / "space.toml"), "--max-step", "9", "--early-stopping", "asha",
        "--proposer", "random", "--iterations", "3", "--out", str(run),
    ]  # fmt: skip
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 0, result.output
    assert "72 steps" in result.output  # (5 + 3) * 9
    records = [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]
    assert "stopped" in {r["status"] for r in records}
    shown = CliRunner().invoke(app, ["show", str(run)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "steps" in shown.output and "failed at" not in shown.output
    plotted = CliRunner().invoke(app, ["plot", str(run)])
    assert plotted.exit_code == 0, plotted.output
    assert (run / "figures" / "curves.png").stat().st_size > 10_000


def test_the_curves_figure_joins_segments_and_counts_the_steps_charged():
    from bojax.reports.run_figures import best_against_steps, design_curves

    def segment(design, curve, status, charged, y=None):
        return {"curve": curve, "status": status, "y": y,
                "diagnostics": {"design": design, "charged": charged}}  # fmt: skip

    records = [
        segment(0, [[1, 5.0]], "stopped", 1),  # paused after one step
        segment(1, [[1, 4.0], [2, 3.0], [3, 2.5]], "stopped", 3),
        segment(0, [[2, 2.0], [3, 1.5]], "ok", 3, y=1.5),  # thawed and trained again from 0
    ]
    assert design_curves(records) == [
        ([[1, 5.0], [2, 2.0], [3, 1.5]], "ok"),  # one line, not marked as stopped
        ([[1, 4.0], [2, 3.0], [3, 2.5]], "stopped"),
    ]
    xs, best, done = best_against_steps(records)
    assert xs == [0, 1, 2, 3, 4, 6, 7]  # the thaw's repeated first step is spent too
    assert np.allclose(best, [np.nan, 5.0, 4.0, 3.0, 2.5, 2.0, 1.5], equal_nan=True)
    assert np.isnan(done[:-1]).all() and done[-1] == 1.5
    # Records of an older journal (no charged steps): a thaw starts at its from_step.
    older = [{**r, "diagnostics": {"design": r["diagnostics"]["design"]}} for r in records[:2]]
    older.append({**records[2], "diagnostics": {"design": 0, "from_step": 1}})
    assert best_against_steps(older)[0] == [0, 1, 2, 3, 4, 5, 6]
    # Three records, two designs: a result and `bojax show` count designs, not segments.
    from bojax.bo.runs import design_counts

    assert design_counts(records) == (2, 0)
    assert design_counts([*records, segment(2, [], "failed", 0)]) == (3, 1)
    assert design_counts([{"status": "ok", "diagnostics": {}}]) is None  # whole evaluations


@pytest.mark.slow  # 10 s compiling the epoch program, which no other fast test needs
def test_the_mnist1d_trainer_reports_each_epoch_and_is_stopped_early():
    from bojax.compilation import count_compilations
    from bojax.objectives.mixednet import MixedNetObjective, Training

    objective = MixedNetObjective(training=Training(epochs=3))
    good = {"optimizer": "adam", "activation": "relu", "normalisation": "none", "layers": 2,
            "width": 64, "learning_rate": 3e-3}  # fmt: skip
    reports, saved = [], {}

    def report(step, value, checkpoint=None):
        reports.append((step, value))
        saved[step] = checkpoint

    with count_compilations(fresh=True) as counts:
        final = objective.train(good, report)
    assert [s for s, _ in reports] == [1, 2, 3] and final == reports[-1][1]
    assert reports[-1][1] < reports[0][1] < 0.9  # it learns epoch by epoch (chance: 0.9)
    assert final == objective(good)  # a stable training ends where the full one does
    assert counts.of("_epoch_and_score") == 1, counts  # one program for every epoch
    # Paused after epoch 1 and thawed from its checkpoint: the same epochs 2 and 3.
    thawed = []
    objective.train(good, lambda step, value, checkpoint: thawed.append((step, value)), saved[1])
    assert thawed == reports[1:]
    # q = 3: each batch of designs trains as one vmapped program (train_batch), with
    # the curves each design has alone, up to float32 rounding (a batched matmul sums in
    # another order; 0.742 against 0.733 was seen at a third epoch). Rounding is all a
    # stable training sees; one at a high learning rate (the first design: rmsprop at
    # 0.81) amplifies it from epoch to epoch in float32 (0.76 against 0.782 at its
    # second), so only its first epoch is compared.
    result = bojax.minimize(
        objective.train, objective.space, max_step=3, early_stopping="asha",
        proposer="random", step_budget=15, q=3, progress=False,
    )  # fmt: skip
    assert result.steps == 15 and "stopped" in {r["status"] for r in result.history}
    compared = 0
    for record in result.history[:3]:
        batched = [v for _, v in record["curve"]]
        alone = list(objective.curve(record["x"]))[: len(batched)]
        assert abs(batched[0] - alone[0]) <= 0.005
        if record["x"]["learning_rate"] < 0.3:
            assert np.allclose(batched, alone, atol=0.02), (record["x"], batched, alone)
            compared += len(batched) > 1
    assert compared >= 1  # a stable design trained past its first epoch was compared


@pytest.mark.slow  # compiles the batched epoch program for 4 rows
def test_a_batch_of_three_trains_each_design_on_its_own_state():
    """Three designs pad to four rows; the padding's copy of the last design must be
    written nowhere, and each design must go on from its own weights each epoch."""
    from bojax.objectives.mixednet import MixedNetObjective, Training

    objective = MixedNetObjective(training=Training(epochs=2))
    designs = [
        {"optimizer": "adam", "activation": "relu", "normalisation": "none", "layers": 2,
         "width": 64, "learning_rate": 3e-3},
        {"optimizer": "sgd", "momentum": 0.9, "activation": "tanh", "normalisation": "none",
         "layers": 1, "width": 32, "learning_rate": 1e-4},
        {"optimizer": "rmsprop", "activation": "gelu", "normalisation": "layernorm",
         "layers": 3, "width": 128, "learning_rate": 1e-3},
    ]  # fmt: skip
    curves = [[], [], []]
    reports = [lambda step, value, c=c: c.append(value) for c in curves]
    finals = objective.train_batch(designs, reports)
    for design, curve, final in zip(designs, curves, finals, strict=True):
        alone = list(objective.curve(design))
        assert len(curve) == 2 and final == curve[-1]
        assert np.allclose(curve, alone, atol=0.01), (design, curve, alone)


# -- freeze-thaw ----------------------------------------------------------------------
def resumable(log: list | None = None, max_step: int = 27, cost=None):
    """make_train's curves, continued from a checkpoint (the last step reported); with
    ``cost(point)``, each step reports that many seconds."""

    def train(point, report, checkpoint=None):
        final = final_value(point)
        seconds = {} if cost is None else {"seconds": cost(point)}
        for step in range(1 + (checkpoint or 0), max_step + 1):
            if log is not None:
                log.append(step)
            report(step, final + 2.0 / step, checkpoint=step, **seconds)
        return final

    return train


FREEZE_THAW = dict(max_step=27, early_stopping="freeze-thaw", surrogate="gp-map")


def designs_of(history):
    curves: dict[int, list] = {}
    for record in history:
        curves.setdefault(record["diagnostics"]["design"], []).extend(record["curve"])
    return curves


@pytest.mark.slow  # 16 s: whole freeze-thaw runs (the fast tier reached 300 s)
def test_freeze_thaw_pauses_and_thaws_trainings_from_their_checkpoints():
    trained = []
    settings = {**FREEZE_THAW, "max_step": 9}  # milestones 1, 3, 9: a short test
    result = bojax.minimize(
        resumable(trained, 9), SPACE, step_budget=45, progress=False, **settings
    )
    phases = [r["phase"] for r in result.history]
    assert phases[:5] == ["initial"] * 5 and {"new", "thaw"} <= set(phases)
    curves = designs_of(result.history)
    for curve in curves.values():  # each design's segments join into one rising curve
        steps = [s for s, _ in curve]
        assert steps == list(range(1, len(steps) + 1))
    # checkpoints: nothing trained twice, and the budget is exactly the steps trained
    assert len(trained) == sum(len(c) for c in curves.values()) == result.steps == 45
    assert result.evaluations == len(curves) < len(result.history)  # designs, not segments
    thawed = [r for r in result.history if r["phase"] == "thaw"]
    for r in thawed:  # a thaw continues where its design paused, to its next milestone
        assert r["curve"][0][0] == r["diagnostics"]["from_step"] + 1
        assert r["curve"][-1][0] in (3, 9) or r is result.history[-1]
    assert result.best_value == pytest.approx(final_value(result.best_point))
    assert result.best_value < 0.05  # the model finds the basin within 45 epochs


@pytest.mark.slow  # 8 s: three freeze-thaw runs
def test_freeze_thaw_on_workers_thaws_no_design_twice_at_once():
    settings = {**FREEZE_THAW, "max_step": 9, "step_budget": 40}
    inline = bojax.minimize(resumable(None, 9), SPACE, progress=False, **settings)
    with cf.ThreadPoolExecutor(1) as pool:  # one worker: the inline run's decisions
        one = bojax.minimize(resumable(None, 9), SPACE, progress=False, executor=pool, **settings)
    assert same_records(one.history, inline.history)

    lock, training, overlaps, trained = threading.Lock(), set(), [], []

    def guarded(point, report, checkpoint=None):
        key = tuple(point.values())
        with lock:
            overlaps.append(key in training)
            training.add(key)
        try:
            for step in range(1 + (checkpoint or 0), 10):
                time.sleep(0.003)
                with lock:
                    trained.append((key, step))
                report(step, final_value(point) + 2.0 / step, checkpoint=step)
            return final_value(point)
        finally:
            with lock:
                training.discard(key)

    with cf.ThreadPoolExecutor(3) as pool:
        result = bojax.minimize(guarded, SPACE, progress=False, executor=pool, **settings)
    assert not any(overlaps)  # a design in flight is never thawed again meanwhile
    assert len(trained) == len(set(trained)) == result.steps == 40  # checkpoints, exact budget
    assert {"new", "thaw"} <= {r["phase"] for r in result.history}
    for curve in designs_of(result.history).values():
        steps = [s for s, _ in curve]
        assert steps == list(range(1, len(steps) + 1))


@pytest.mark.slow  # a parallel freeze-thaw run
def test_parallel_freeze_thaw_with_sparse_checkpoints_spends_its_budget_exactly():
    def every_second(point, report, checkpoint=None):  # paused at 3, continued from 2
        for step in range(1 + (checkpoint or 0), 10):
            saved = step if step % 2 == 0 else None
            report(step, final_value(point) + 2.0 / step, checkpoint=saved)
        return final_value(point)

    settings = {**FREEZE_THAW, "max_step": 9, "step_budget": 40}
    with cf.ThreadPoolExecutor(2) as pool:
        result = bojax.minimize(every_second, SPACE, progress=False, executor=pool, **settings)
    charged = sum(r["diagnostics"]["charged"] for r in result.history)
    assert charged == result.steps == 40
    thawed = [r for r in result.history if r["diagnostics"].get("from_step") == 3]
    assert thawed and all(r["diagnostics"]["charged"] == len(r["curve"]) + 1 for r in thawed)
    for curve in designs_of(result.history).values():
        assert [s for s, _ in curve] == list(range(1, len(curve) + 1))


def test_a_thaw_without_checkpoints_retrains_and_charges_the_repeated_steps():
    from types import SimpleNamespace

    from bojax.bo.freezethaw import Decision, Design, train_segment

    settings = bojax.Settings(max_step=27, early_stopping="freeze-thaw")
    run = SimpleNamespace(space=SPACE, train=make_train(), budget=100, spent=9,
                          settings=settings, journal=None)  # fmt: skip
    u = np.array([0.5, 0.5])
    designs = [Design(u, SPACE.from_unit(u), [[s, 3.0 / s] for s in range(1, 10)])]
    record = train_segment(run, Decision(0, u, 27, "thaw", {}), designs)
    assert [s for s, _ in record["curve"]] == list(range(10, 28))  # recorded once
    assert record["diagnostics"]["charged"] == 27 and run.spent == 36  # trained from step 1
    assert record["status"] == "ok" and designs[0].complete


@pytest.mark.slow  # 11 s: a freeze-thaw run (the checkpointed one stays fast)
def test_freeze_thaw_without_checkpoints_spends_its_budget_and_records_each_step_once():
    result = bojax.minimize(make_train(), SPACE, step_budget=120, progress=False, **FREEZE_THAW)
    curves = designs_of(result.history)
    charged = sum(r["diagnostics"]["charged"] for r in result.history)
    assert charged == result.steps == 120
    for curve in curves.values():
        assert [s for s, _ in curve] == list(range(1, len(curve) + 1))  # nothing twice


def test_freeze_thaw_keeps_a_bounded_summary_of_many_curves():
    from bojax.bo.freezethaw import Design, observations

    rng = np.random.default_rng(0)
    designs = [
        Design(rng.random(2), {}, [[s, 1.0 + j + 1.0 / s] for s in range(1, 41)]) for j in range(50)
    ]  # 2,000 (design, step) values
    rows = observations(designs, 128)
    assert len(rows) == 128
    assert {(j, s) for j, s, _ in rows} >= {(j, 40) for j in range(50)}  # every last value
    earlier = [(j, s) for j, s, _ in rows if s != 40]
    assert {s for _, s in earlier} <= {1, 2, 4, 8, 16, 32}
    assert max(j for j, _ in earlier) < 20  # the best curves (lowest values) keep more
    assert observations(designs, 30) == [(j, 40, 1.0 + j + 1.0 / 40) for j in range(30)]


@pytest.mark.slow
def test_freeze_thaw_starts_a_new_design_when_none_is_paused():
    from bojax.bo.freezethaw import Design, FreezeThaw

    rng = np.random.default_rng(1)
    designs = []
    for _ in range(6):  # every design trained to the end: nothing to thaw
        u = rng.random(2)
        point = SPACE.from_unit(u)
        curve = [[s, final_value(point) + 2.0 / s] for s in range(1, 10)]
        designs.append(Design(u, point, curve, complete=True))
    decision = FreezeThaw(SPACE, bojax.Settings(**FREEZE_THAW | {"max_step": 9})).decide(designs, 6)
    assert decision.phase == "new" and decision.design == 6 and decision.until == 1


@pytest.mark.slow  # 25 s: a freeze-thaw run with failures
def test_freeze_thaw_learns_where_trainings_fail():
    """Failed trainings are the failure classifier's labels: before, freeze-thaw left them
    out and started 33 of 39 designs where every training diverged (review)."""

    def train(point, report, checkpoint=None):
        for step in range(1 if checkpoint is None else checkpoint + 1, 10):
            if step == 2 and point["w"] < 0.2:
                raise FloatingPointError("loss diverged")
            report(step, final_value(point) + 1 / step, checkpoint=step)
        return final_value(point)

    result = bojax.minimize(train, SPACE, max_step=9, early_stopping="freeze-thaw", initial=3,
                            iterations=6, surrogate="gp-map", progress=False, seed=3)  # fmt: skip
    designs: dict[int, list] = {}
    for record in result.history:
        designs.setdefault(record["diagnostics"]["design"], []).append(record["status"])
    failed = sum("failed" in statuses for statuses in designs.values())
    assert len(designs) >= 12 and failed <= len(designs) // 4, (failed, len(designs))
    first = next(k for k, r in enumerate(result.history) if r["status"] == "failed")
    weights = [r["diagnostics"].get("success_probability") for r in result.history]
    assert all(p is None for p in weights[: first + 1]), weights  # EI weighed once one fails
    assert all(0 < p < 1 for p in weights[first + 1 :] if p is not None), weights
    assert any(p is not None for p in weights[first + 1 :]), weights


@pytest.mark.slow  # 27 s: two fits with a failure classifier
def test_freeze_thaw_weighs_a_paused_design_by_its_chance_of_finishing():
    """Thawing a paused design is worth its expected improvement at max_step times the
    failure classifier's P(success) there, as a new design's proposal is: unweighted, a
    design that looked good at step 1 before its neighbours' trainings diverged kept
    winning its thaw."""
    from bojax.bo.freezethaw import Design, FreezeThaw

    def design(lr, w, steps, failed=False):
        point = {"lr": lr, "w": w}
        curve = [[s, final_value(point) + 2.0 / s] for s in steps]
        return Design(SPACE.to_unit(point), point, curve, complete=steps[-1] == 9, failed=failed)

    # Trainings with w < 0.2 diverge after step 1; the others were trained to the end.
    designs = [design(lr, w, [1] if w < 0.2 else [1, 3, 9], failed=w < 0.2)
               for lr in (1e-4, 1e-3, 1e-2, 1e-1) for w in (0.05, 0.15, 0.5, 0.9)]  # fmt: skip
    # Two paused designs, as good at step 1: one among the failed trainings.
    designs += [design(3e-3, 0.1, [1]), design(3e-3, 0.45, [1])]
    among_failures, clear = len(designs) - 2, len(designs) - 1

    def gains(failure_model):
        settings = bojax.Settings(**FREEZE_THAW | {"max_step": 9, "failure_model": failure_model})
        worth = FreezeThaw(SPACE, settings).worth(designs, [among_failures, clear])
        return worth[1][1:], worth[4][1:]

    (weighted, success), (unweighted, none) = gains("gp-probit"), gains("none")
    assert list(none) == [1.0, 1.0] and success[0] < 0.5 < success[1]
    assert unweighted[0] > 0.5 * unweighted[1]  # as good a bet by the curves alone
    assert weighted[0] < 0.2 * weighted[1], (weighted, unweighted)
    assert weighted[1] == pytest.approx(unweighted[1], rel=0.3)  # far from the failures


def test_freeze_thaw_counts_only_designs_with_a_point_towards_its_initial_design():
    """A resumed parallel run's placeholders (designs whose first segment was lost) are
    not designs: the model waits for max(initial, d + 2) real ones."""
    from bojax.bo.freezethaw import Design, FreezeThaw

    settings = bojax.Settings(**FREEZE_THAW | {"max_step": 9, "initial": 3})
    placeholder = Design(np.full(2, np.nan), {}, failed=True)
    rng = np.random.default_rng(1)
    designs = [placeholder]
    for _ in range(3):  # with the placeholder, d + 2 = 4 entries; 3 real designs
        u = rng.random(2)
        point = SPACE.from_unit(u)
        designs.append(Design(u, point, [[1, final_value(point) + 2.0]]))
    decision = FreezeThaw(SPACE, settings).decide(designs, 4)
    assert decision.phase == "initial" and decision.design == 4
    steps = FreezeThaw(SPACE, settings).steps
    assert decision.until == steps[3 % len(steps)]  # the fourth real design's milestone


def test_freeze_thaw_models_power_warped_values_unless_the_run_names_a_warping():
    from bojax.bo.freezethaw import FreezeThaw
    from bojax.bo.loop import init, output_warping, tell

    settings = bojax.Settings(**FREEZE_THAW | {"max_step": 9})
    model = FreezeThaw(SPACE, settings).model
    assert model.warping == "power" and settings.warping is None  # the run's own is unchanged
    state = init(SPACE, model)
    for k, value in enumerate([0.6, 0.3, 0.05, 0.01, 0.004, 0.0036]):  # a curve's range
        state = tell(state, np.array([k / 6, 0.5]), value)
    warp = output_warping(state)
    assert warp.kind == "power" and warp.method == "box-cox" and abs(warp.power) < 0.5
    named = bojax.Settings(**FREEZE_THAW | {"max_step": 9, "warping": "standardise"})
    assert FreezeThaw(SPACE, named).model.warping == "standardise"


def test_freeze_thaw_models_curves_with_the_learning_curve_kernel():
    from bojax.bo.freezethaw import FreezeThaw, curve_space
    from bojax.gp.kernels import LearningCurves

    settings = FreezeThaw(SPACE, bojax.Settings(**FREEZE_THAW | {"max_step": 9})).model
    surrogate = settings.make_surrogate(curve_space(SPACE, 9))
    assert isinstance(surrogate.model.kernel, LearningCurves)
    assert surrogate.model.kernel.max_step == 9.0
    assert not isinstance(settings.make_surrogate(SPACE).model.kernel, LearningCurves)
    assert surrogate.method == "map"  # these tests' surrogate; a sampled one changes:
    sampled = settings.replace(surrogate="gp-slice")
    surrogate = sampled.make_surrogate(curve_space(SPACE, 9))
    assert surrogate.method == "slice-fixed"  # a decision's sweeps without stepping out
    assert surrogate.screening_draws() == 4  # of its 16, to rank the candidate grid
    plain = sampled.make_surrogate(SPACE)
    assert plain.method == "slice" and plain.screening_draws() is None


@pytest.mark.slow  # ~25 s: a sampled freeze-thaw run (the fast tier's runs use gp-map)
def test_a_sampled_freeze_thaw_run_compiles_its_fit_once_per_bucket_of_rows():
    """Under gp-slice a decision's fit burns in once, then sweeps with fixed brackets
    (``"slice-fixed"``); the fit compiles once for each padded size of the model's rows,
    not once per decision."""
    from bojax.compilation import bucket_size, count_compilations

    settings = dict(FREEZE_THAW, surrogate="gp-slice", step_budget=120)
    with count_compilations(fresh=True) as counts:
        result = bojax.minimize(resumable(), SPACE, progress=False, **settings)
    rows = [r["diagnostics"]["model_points"] for r in result.history if r["phase"] != "initial"]
    assert len(rows) >= 8
    assert counts.of("_fit") == len({bucket_size(n) for n in rows}) < len(rows), counts


def test_the_curve_kernel_widens_the_final_value_of_designs_seen_only_early():
    """A design trained to step 27 of 27 and a neighbour seen at steps 1-3: the decaying
    part private to each design (Swersky et al. 2014) adds uncertainty to the neighbour's
    value at step 27, more the larger its amplitude ``c``, and none to the finished
    design's, which its own last value pins."""
    from bojax import gp
    from bojax.gp.kernels import LearningCurves, ard_params, get_kernel

    top = 27.0
    tau = lambda t: np.log(t) / np.log(top)  # noqa: E731
    x = [[0.5, 0.4, tau(t)] for t in range(1, 28)] + [[0.5, 0.6, tau(t)] for t in (1, 2, 3)]
    y = [1.0 / t for t in range(1, 28)] + [1.0 + 1.0 / t for t in (1, 2, 3)]
    data = gp.make_data(np.asarray(x), np.asarray(y))
    base = {**ard_params(3, amplitude=1.0, lengthscale=0.5), "curve_alpha": jnp.asarray(1.0),
            "curve_beta": jnp.asarray(1.0)}  # fmt: skip
    finals = jnp.asarray([[0.5, 0.4, 1.0], [0.5, 0.6, 1.0]])  # finished, seen early
    model = gp.GP(kernel=LearningCurves(get_kernel("matern52"), top))
    variances = []
    for c in (0.0, 1.0, 10.0):
        params = {"kernel": {**base, "curve_amplitude": jnp.asarray(c)},
                  "mean": {"value": jnp.asarray(0.0)}, "noise": jnp.asarray(1e-4)}  # fmt: skip
        _, var = gp.predict(model, gp.posterior(model, params, data), finals)
        variances.append(np.asarray(var))
    finished, early = np.transpose(variances)
    assert early[0] < early[1] < early[2], early
    np.testing.assert_allclose(finished, finished[0], atol=1e-4)
    assert finished[2] < 0.01 * early[0]


def test_freeze_thaw_expected_improvement_matches_the_closed_form():
    from scipy.stats import norm

    from bojax.bo.freezethaw import _expected_improvement

    mean = np.array([[0.2, 1.0, -0.5], [0.4, 0.8, -0.1]])
    var = np.array([[0.3, 0.01, 1.0], [0.1, 0.2, 0.5]])
    sd = np.sqrt(var)
    z = (0.1 - mean) / sd
    expected = ((0.1 - mean) * norm.cdf(z) + sd * norm.pdf(z)).mean(axis=0)
    np.testing.assert_allclose(_expected_improvement(mean, var, 0.1), expected, rtol=1e-10)


def wide_is_slow(point) -> float:
    """Seconds a step of ``point`` reports: 0.01 at w = 0 to 10 at w = 1."""
    return 0.01 * 1000.0 ** point["w"]


@pytest.mark.slow  # 13 s each: whole freeze-thaw runs (the fast tier reached 300 s)
@pytest.mark.parametrize("cost", [None, wide_is_slow], ids=["steps", "seconds"])
@pytest.mark.filterwarnings("ignore:.*journalled for the objective")  # (a wrapper)
def test_a_killed_freeze_thaw_run_resumes_to_the_uninterrupted_runs_records(tmp_path, cost):
    settings = dict(step_budget=150, cost_aware=cost is not None, **FREEZE_THAW)
    whole = bojax.minimize(
        resumable(cost=cost), SPACE, progress=False, out=tmp_path / "a", **settings
    )
    reports, before, after = [], [], []

    def dies(point, report, checkpoint=None):
        def dying(step, value, checkpoint=None, seconds=None):
            reports.append(step)
            if len(reports) > 90 and step not in (1, 2, 4, 10):  # a segment's later step
                raise KeyboardInterrupt
            report(step, value, checkpoint=checkpoint, seconds=seconds)

        return resumable(before, cost=cost)(point, dying, checkpoint)

    with pytest.raises(KeyboardInterrupt):
        bojax.minimize(dies, SPACE, progress=False, out=tmp_path / "b", **settings)
    assert (tmp_path / "b" / "checkpoints").is_dir()
    # The segment in flight was journalled step by step, and is finished on resume from
    # its last checkpoint: not one step is trained twice, beyond the one the kill cut.
    (in_flight,) = json.loads((tmp_path / "b" / "pending.json").read_text())
    records = (tmp_path / "b" / "journal.jsonl").read_text().splitlines()
    assert in_flight["proposal"] == len(records) and in_flight["curve"]
    import shutil

    from bojax.errors import JournalError

    shutil.copytree(tmp_path / "b", tmp_path / "c")
    (tmp_path / "c" / "pending.json").write_text(
        json.dumps([{**in_flight, "info": {**in_flight["info"], "design": 999}}])
    )
    with pytest.raises(JournalError, match="'design' \\(at most"):
        bojax.minimize(resumable(), SPACE, progress=False, out=tmp_path / "c", resume=True,
                       **settings)  # fmt: skip
    (tmp_path / "c" / "pending.json").write_text(json.dumps([{**in_flight, "seconds": -1.0}]))
    with pytest.raises(JournalError, match="'seconds' must be a finite number >= 0"):
        bojax.minimize(resumable(), SPACE, progress=False, out=tmp_path / "c", resume=True,
                       **settings)  # fmt: skip
    resumed = bojax.minimize(
        resumable(after, cost=cost), SPACE, progress=False, out=tmp_path / "b", resume=True,
        **settings,
    )  # fmt: skip
    assert len(before) - 1 + len(after) == whole.steps == 150
    assert json.loads((tmp_path / "b" / "pending.json").read_text()) == []
    keys = ("x", "y", "status", "curve", "phase", "diagnostics")
    assert all(r["decision_seconds"] >= 0 for r in resumed.history)
    assert (resumed.evaluations, resumed.failures) == (whole.evaluations, whole.failures)
    from typer.testing import CliRunner

    from bojax.cli import app

    shown = CliRunner().invoke(app, ["show", str(tmp_path / "b")], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    title = f"{len(whole.history)} segments of {whole.evaluations} designs (0 failed)"
    assert title in " ".join(shown.output.split()), shown.output

    def kept(record):  # timed seconds differ from run to run; reported ones do not
        return {k: (untimed(record) if cost is None else record)[k] for k in keys}

    assert [kept(r) for r in resumed.history] == [kept(r) for r in whole.history]
    if cost is not None:  # priced in seconds: each design's steps at its reported rate
        for record in whole.history:
            info = record["diagnostics"]
            assert info["training_seconds"] == pytest.approx(
                info["charged"] * cost(record["x"]), rel=1e-12
            )


@pytest.mark.slow  # 25-40 s: three freeze-thaw runs and two resumes of each
@pytest.mark.parametrize("surrogate", ["gp-map", "gp-slice"])
@pytest.mark.filterwarnings("ignore:.*journalled for the objective")  # (a wrapper)
def test_a_resumed_freeze_thaw_run_fits_only_the_decisions_its_saved_chains_lack(
    tmp_path, monkeypatch, surrogate
):
    """Each decision keeps the chains it starts from (``sampler.json``), so a resume
    replays no fit; with the file corrupt it replays every one. Either way the resumed
    run's records are the uninterrupted run's."""
    import shutil

    from bojax.bo import freezethaw

    settings = dict(FREEZE_THAW, surrogate=surrogate, step_budget=100)
    whole = bojax.minimize(resumable(), SPACE, progress=False, **settings)
    reports = []

    def dies(point, report, checkpoint=None):
        def dying(step, value, checkpoint=None):
            reports.append(step)
            if len(reports) > 90 and step not in (1, 3, 9, 27):  # inside a segment
                raise KeyboardInterrupt
            report(step, value, checkpoint=checkpoint)

        return resumable()(point, dying, checkpoint)

    with pytest.raises(KeyboardInterrupt):
        bojax.minimize(dies, SPACE, progress=False, out=tmp_path / "a", **settings)
    killed = len((tmp_path / "a" / "journal.jsonl").read_text().splitlines())
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    (tmp_path / "b" / "sampler.json").write_text('{"iteration": 1, "position": "torn')
    fits, worth = [], freezethaw.FreezeThaw.worth
    monkeypatch.setattr(
        freezethaw.FreezeThaw, "worth", lambda self, *a, **k: fits.append(1) or worth(self, *a, **k)
    )
    fitted = [r["phase"] != "initial" for r in whole.history]
    keys = ("x", "y", "status", "curve", "phase", "diagnostics")
    for folder, replayed in (("a", 0), ("b", sum(fitted[:killed]))):
        fits.clear()
        resumed = bojax.minimize(
            resumable(), SPACE, progress=False, out=tmp_path / folder, resume=True, **settings
        )
        assert [{k: untimed(r)[k] for k in keys} for r in resumed.history] == [
            {k: untimed(r)[k] for k in keys} for r in whole.history
        ]
        assert sum(fitted[:killed]) > 5 and len(fits) == replayed + sum(fitted[killed:])


@pytest.mark.slow  # whole freeze-thaw runs
@pytest.mark.parametrize("checkpoints", [True, False], ids=["checkpoints", "none"])
@pytest.mark.filterwarnings("ignore:.*journalled for the objective")  # (a wrapper)
def test_a_freeze_thaw_segment_killed_at_its_end_is_journalled_without_training(
    tmp_path, monkeypatch, checkpoints
):
    """Killed between a segment's last report and its record: the resumed run journals
    the segment as it stood, training nothing more for it, with or without checkpoints."""
    from bojax.bo.journal import Journal

    settings = dict(step_budget=80, **FREEZE_THAW)
    train = resumable() if checkpoints else make_train()
    whole = bojax.minimize(train, SPACE, progress=False, **settings)
    append, records = Journal.append, []

    def dies_at_the_tenth_record(self, record):
        records.append(record)
        if len(records) == 10:
            raise KeyboardInterrupt  # after the segment's last report, before its record
        append(self, record)

    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(Journal, "append", dies_at_the_tenth_record)
        bojax.minimize(train, SPACE, progress=False, out=tmp_path, **settings)
    (in_flight,) = json.loads((tmp_path / "pending.json").read_text())
    assert in_flight["curve"] == records[9]["curve"] and in_flight["proposal"] == 9
    trained = []

    def logged_train(point, report, checkpoint=None):
        def logging(step, value, checkpoint=None):
            trained.append(step)
            return report(step, value, checkpoint=checkpoint)

        kwargs = {"checkpoint": checkpoint} if checkpoints else {}
        return train(point, logging, **kwargs)

    run = logged_train if checkpoints else (lambda point, report: logged_train(point, report))
    resumed = bojax.minimize(run, SPACE, progress=False, out=tmp_path, resume=True, **settings)
    # A segment killed after its training returned keeps its last reported value: the
    # returned one was never journalled (the same whenever the training ends below
    # max_step or returns its last report).
    killed, kept = resumed.history[9], whole.history[9]
    if killed["status"] == "ok":
        assert killed["y"] == killed["curve"][-1][1]
        killed["y"] = kept["y"]
    assert same_records(resumed.history, whole.history) and resumed.steps == whole.steps
    assert untimed(killed)["diagnostics"] == untimed(kept)["diagnostics"]
    before = sum(record["diagnostics"]["charged"] for record in whole.history[:10])
    assert len(trained) == whole.steps - before  # every step after the tenth record's


# -- ask and tell ---------------------------------------------------------------------
def test_ask_and_tell_make_the_records_minimize_makes():
    settings = dict(max_step=27, early_stopping="hyperband", surrogate="gp-map", step_budget=150)
    whole = bojax.minimize(make_train(), SPACE, progress=False, **settings)
    trainings = bojax.Trainings(SPACE, **settings)
    while not trainings.done:
        design, point = trainings.ask()
        final = final_value(point)
        for step in range(1, 28):
            if not trainings.tell(design, step, final + 2.0 / step):
                break  # stopped, or complete at max_step (the loop's last step)
        trainings.finish(design, final if step == 27 else None)  # train's return value
    keys = ("x", "y", "status", "curve", "phase", "diagnostics")
    assert [{k: r[k] for k in keys} for r in trainings.history] == [
        {k: r[k] for k in keys} for r in whole.history
    ]
    assert trainings.spent == 150


def test_finishing_a_training_with_no_step_told_fails_it_in_trainings_words():
    trainings = bojax.Trainings(SPACE, max_step=9, early_stopping="asha")
    design, _ = trainings.ask()
    record = trainings.finish(design, 0.5)
    assert record["status"] == "failed" and "finish(0) came with no step told" in record["error"]
    assert "report(" not in record["error"]  # a step-wise objective's words
    design, _ = trainings.ask()
    trainings.tell(design, 1, 0.4)
    record = trainings.finish(design, math.nan)
    assert record["error"] == f"finish({design}, value=nan): the value is not a finite number"


def test_telling_a_step_a_value_that_is_no_number_is_a_data_error_not_a_failure():
    """A string told as a step's value failed the whole training, with the step-wise
    objective's words ('report(step, value)'); NaN still fails it (review BV)."""
    from bojax.errors import DataError

    trainings = bojax.Trainings(SPACE, max_step=9, early_stopping="none")
    design, _ = trainings.ask()
    for bad in ("0.4", None, True, [0.4]):
        with pytest.raises(DataError, match=rf"tell\({design}, 1, value\): value must be a n"):
            trainings.tell(design, 1, bad)
    assert trainings.tell(design, 1, np.float32(0.4))  # nothing was lost: it goes on
    assert not trainings.tell(design, 2, math.inf)  # a diverged training fails
    assert trainings.finish(design)["status"] == "failed"


def test_worker_threads_share_one_journalled_trainings(tmp_path):
    """Four threads each ask, tell and finish on one run: without a lock two were handed
    one design, and their writes of pending.json through one temporary file failed."""
    from bojax.bo.runs import load_run

    trainings = bojax.Trainings(SPACE, max_step=9, early_stopping="asha", proposer="random",
                                step_budget=120, out=tmp_path / "run")  # fmt: skip
    errors, designs = [], []

    def worker():
        try:
            while True:
                try:
                    design, point = trainings.ask()
                except bojax.errors.SettingsError:  # the budget is spent
                    return
                designs.append(design)
                _tell_curve(trainings, design, point, last=9)
                trainings.finish(design)
        except BaseException as error:  # reported below, in the test thread
            errors.append(error)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    trainings.close()
    assert errors == [] and len(designs) == len(set(designs))
    run = load_run(tmp_path / "run")
    assert sorted(r["proposal"] for r in run.records) == sorted(designs) and run.finished


def _tell_curve(trainings, design, point, last=27):
    """Tell ``design``'s curve up to step ``last`` (or until it is stopped); its last step."""
    final = final_value(point)
    for step in range(1, last + 1):
        if not trainings.tell(design, step, final + 2.0 / step):
            break
    return step


def test_ask_and_tell_journal_a_run_that_resumes_as_if_never_interrupted(tmp_path):
    from bojax.bo.runs import load_run
    from bojax.errors import RunLockedError

    settings = dict(max_step=27, early_stopping="asha", surrogate="gp-map", step_budget=120)
    whole = bojax.Trainings(SPACE, **settings)
    while not whole.done:
        design, point = whole.ask()
        whole.finish(
            design, final_value(point) if _tell_curve(whole, design, point) == 27 else None
        )

    out = tmp_path / "run"
    first = bojax.Trainings(SPACE, **settings, out=out)
    with pytest.raises(RunLockedError):  # the folder is held while the run is open
        bojax.Trainings(SPACE, **settings, out=out, resume=True)
    for _ in range(6):
        design, point = first.ask()
        first.finish(
            design, final_value(point) if _tell_curve(first, design, point) == 27 else None
        )
    open_design, open_point = first.ask()
    # A training under way (a value ASHA keeps at its first milestone) ...
    assert first.tell(open_design, 1, -100.0) and first.tell(open_design, 2, -100.0)
    first.close()  # ... when its loop died
    assert len(load_run(out).records) == 6 and not load_run(out).finished
    with pytest.raises(JournalError, match="'settings' differs"):
        bojax.Trainings(SPACE, **{**settings, "eta": 2}, out=out, resume=True)

    with bojax.Trainings(SPACE, **settings, out=out, resume=True) as resumed:
        assert resumed.ask() == (open_design, open_point)  # handed out again, first
        design, point = open_design, open_point
        while True:
            resumed.finish(
                design, final_value(point) if _tell_curve(resumed, design, point) == 27 else None
            )
            if resumed.done:
                break
            design, point = resumed.ask()
    assert same_records(resumed.history, whole.history) and resumed.spent == whole.spent
    run = load_run(out)  # what bojax show and plot read
    assert same_records(run.records, whole.history) and run.pending == []
    assert run.summary["steps"] == whole.spent and run.summary["best_value"] == pytest.approx(
        min(r["y"] for r in whole.history if r["status"] == "ok")
    )
    with bojax.Trainings(SPACE, **settings, out=out, resume=True) as again:  # nothing to do
        assert again.done and load_run(out).finished  # its summary stands
    with pytest.raises(SettingsError, match="pass out="):
        bojax.Trainings(SPACE, **settings, resume=True)


def test_a_resume_journals_the_trainings_that_ended_but_were_not_finished(tmp_path):
    """Told False (stopped, complete or failed) and then the loop died before finish:
    the resume journals each as finish(design) would have, from pending.json's curve,
    and its steps stay spent; it is not handed out again from step 1."""
    settings = dict(max_step=9, eta=3, early_stopping="asha", proposer="random", step_budget=200)

    def run(out, crash):
        trainings = bojax.Trainings(SPACE, **settings, out=out)
        ended = []
        for k in range(7):
            design, point = trainings.ask()
            if k == 5:  # diverges at step 2
                assert trainings.tell(design, 1, 0.5) and not trainings.tell(design, 2, math.nan)
            else:
                _tell_curve(trainings, design, point, last=9)
            ended.append(design)
            if not crash or k < 4:
                trainings.finish(design)
        return trainings, ended

    whole, _ = run(tmp_path / "whole", crash=False)
    crashed, ended = run(tmp_path / "crashed", crash=True)
    statuses = {r["proposal"]: r["status"] for r in whole.history}
    assert {statuses[d] for d in ended[4:]} == {"ok", "stopped", "failed"}  # each kind
    spent = crashed.spent
    crashed.close()
    with bojax.Trainings(SPACE, **settings, out=tmp_path / "crashed", resume=True) as resumed:
        assert resumed.training == [] and resumed.spent == spent == whole.spent
        assert same_records(resumed.history, whole.history)
        assert resumed.ask()[0] == 7  # a new design: none is handed out again
    failed = next(r for r in resumed.history if r["status"] == "failed")
    assert "finite" in failed["error"] and failed["curve"] == [[1, 0.5]]


def test_journalling_ended_trainings_on_resume_keeps_the_others_pending(tmp_path):
    """The resume journals the ended training; the one still going stays in pending.json
    until it is handed out, so a second kill before that loses nothing (review)."""
    settings = dict(max_step=9, eta=3, early_stopping="asha", proposer="random", step_budget=200)

    def pending():
        entries = json.loads((tmp_path / "pending.json").read_text())
        return [(e["proposal"], e.get("over")) for e in entries]

    trainings = bojax.Trainings(SPACE, **settings, out=tmp_path)
    complete, going = trainings.ask()[0], trainings.ask()[0]
    for step in range(1, 10):
        trainings.tell(complete, step, 1.0 / step)
    assert trainings.tell(going, 1, -100.0)
    assert pending() == [(complete, "max_step"), (going, None)]
    trainings.close()
    bojax.Trainings(SPACE, **settings, out=tmp_path, resume=True).close()  # killed again
    assert pending() == [(going, None)]
    with bojax.Trainings(SPACE, **settings, out=tmp_path, resume=True) as again:
        assert [r["proposal"] for r in again.history] == [complete] and again.spent == 9
        assert again.ask()[0] == going and again.ask()[0] == going + 1
        assert pending() == [(going, None), (going + 1, None)]


def test_hand_edited_ended_trainings_in_pending_json_are_refused(tmp_path):
    from bojax.bo.repair import repair

    settings = dict(max_step=9, eta=3, early_stopping="asha", proposer="random", step_budget=200)
    trainings = bojax.Trainings(SPACE, **settings, out=tmp_path)
    design, _ = trainings.ask()
    for step in range(1, 10):
        trainings.tell(design, step, 1.0 / step)
    trainings.close()
    path = tmp_path / "pending.json"
    good = json.loads(path.read_text())
    for edit, message in [
        (lambda e: e.update(charged=3), "not below its last step"),
        (lambda e: e.update(curve=e["curve"][:2]), "ending there for 'max_step'"),
        (lambda e: e.pop("seconds"), "'seconds' a finite number"),
        (lambda e: e.update(over="failed"), "a text 'error'"),
        (lambda e: e.update(over="stoped"), "'over' must be one of"),
    ]:
        entry = json.loads(json.dumps(good[0]))
        edit(entry)
        path.write_text(json.dumps([entry]))
        with pytest.raises(JournalError, match=message):
            bojax.Trainings(SPACE, **settings, out=tmp_path, resume=True)
    path.write_text(json.dumps(good * 2))
    with pytest.raises(JournalError, match="in flight twice"):
        bojax.Trainings(SPACE, **settings, out=tmp_path, resume=True)
    path.write_text(json.dumps([{**good[0], "over": "stoped"}]))
    repair(Journal(tmp_path))  # sets the unknown 'over' aside
    assert json.loads(path.read_text()) == []


def test_a_training_that_ended_itself_when_the_driver_died_trains_again_under_minimize(
    tmp_path,
):
    """Its record's value is what train returns after its last report (here, or a
    failure), which the killed run never saw: it is not journalled from pending.json."""
    state = {"kill": False, "calls": 0}

    def train(point, report):
        state["calls"] += 1
        for step in range(1, 28):
            value = final_value(point) + 2.0 / step
            if step == 5 and point["w"] > 0.5:  # the training's own early stopping
                report(step, value, last=True)
                if state["kill"] and state["calls"] >= 3:
                    raise KeyboardInterrupt  # Ctrl-C while it computes its test score
                return final_value(point) + 0.1
            report(step, value)
        return final_value(point)

    settings = {**ASHA, "proposer": "random"}
    whole = bojax.minimize(train, SPACE, progress=False, **settings)
    state.update(kill=True, calls=0)
    with pytest.raises(KeyboardInterrupt):
        bojax.minimize(train, SPACE, progress=False, out=tmp_path, **settings)
    assert json.loads((tmp_path / "pending.json").read_text())[0]["over"] == "last"
    state.update(kill=False)
    resumed = bojax.minimize(train, SPACE, progress=False, out=tmp_path, resume=True, **settings)
    assert same_records(resumed.history, whole.history) and resumed.steps == whole.steps


@pytest.mark.parametrize("q", [1, 2, "pool"])
def test_a_step_wise_run_ends_when_its_discrete_space_is_exhausted(q):
    """As a plain run does (review: it ended with an error, exit 1 on the CLI)."""
    from bojax.parameters import Categorical

    def train(point, report):
        final = {"a": 0.1, "b": 0.5, "c": 0.9, "d": 0.3}[point["c"]]
        for epoch in range(1, 10):
            time.sleep(0.01 if q == "pool" else 0.0)  # (kept ones still out when none is new)
            report(epoch, final + 1.0 / epoch)
        return final

    def train_batch(points, reports):
        finals = []
        for point, report in zip(points, reports, strict=True):
            try:
                finals.append(train(point, report))
            except StopTraining:  # that design only
                finals.append(None)
        return finals

    train.batch = train_batch
    space = bojax.Space([Categorical("c", ("a", "b", "c", "d"))])
    with cf.ThreadPoolExecutor(2) as pool:  # the kept trainings go on once none is new
        options = {"executor": pool} if q == "pool" else {"q": q}
        result = bojax.minimize(train, space, max_step=9, step_budget=200, early_stopping="asha",
                                progress=False, **options)  # fmt: skip
    assert "exhausted" in result.stopped and result.best_value == 0.1
    assert sorted(r["x"]["c"] for r in result.history) == ["a", "b", "c", "d"]
    assert next(r for r in result.history if r["x"]["c"] == "a")["status"] == "ok"


def test_pending_curves_are_written_at_milestones_and_ends_not_every_step(tmp_path, monkeypatch):
    """Rewriting every open curve at every step made a tell's cost grow with the curve
    (5.7 ms a tell at step 4,000): between milestones it is written when stale."""
    from bojax.bo import stepwise
    from bojax.bo.journal import Journal

    writes = []
    save = Journal.save_pending
    monkeypatch.setattr(  # (a copy: the curves are the trainings' own lists)
        Journal, "save_pending", lambda j, p: (writes.append(json.loads(json.dumps(p))), save(j, p))
    )
    monkeypatch.setattr(stepwise, "PROGRESS_SECONDS", 1e9)  # never stale
    trainings = bojax.Trainings(SPACE, max_step=500, eta=3, early_stopping="asha", out=tmp_path)
    design, _ = trainings.ask()
    for step in range(1, 501):
        trainings.tell(design, step, 1.0 / step)
    # the ask, seven milestones (1, 3, 9, 27, 81, 243, 500) and the end there
    assert len(writes) == 9 and writes[-1][0]["over"] == "max_step"
    assert [len(w[0]["curve"]) for w in writes[1:]] == [1, 3, 9, 27, 81, 243, 500, 500]
    monkeypatch.setattr(stepwise, "PROGRESS_SECONDS", 0.0)  # always stale
    design, _ = trainings.ask()
    writes.clear()
    for step in range(1, 11):
        assert trainings.tell(design, step, 0.5 / step)  # (kept: better than the first)
    assert [len(w[1]["curve"]) for w in writes] == list(range(1, 11))
    trainings.close()


def test_ask_and_tell_refuse_out_of_order_calls_and_fail_a_diverged_training():
    from bojax.errors import DataError

    trainings = bojax.Trainings(SPACE, max_step=9, early_stopping="asha", proposer="random")
    design, _ = trainings.ask()
    assert trainings.tell(design, 1, 0.5)
    with pytest.raises(DataError, match="above the last one"):
        trainings.tell(design, 1, 0.4)
    with pytest.raises(SettingsError, match="design 7 is not training"):
        trainings.tell(7, 2, 0.4)
    assert trainings.tell(design, 2, math.inf) is False  # a diverged training fails
    record = trainings.finish(design)
    assert record["status"] == "failed" and record["diagnostics"]["charged"] == 2  # it ran step 2
    assert record["error"].startswith("ValueError: ") and "finite number" in record["error"]
    with pytest.raises(SettingsError, match="freeze-thaw"):
        bojax.Trainings(SPACE, max_step=9, early_stopping="freeze-thaw")
    # Limits on how trainings run are the user's loop's here: refused, not ignored.
    for limit in ({"time_budget": 60.0}, {"max_failures": 2}, {"isolate": True},
                  {"timeout": 5.0}, {"q": 4}):  # fmt: skip
        with pytest.raises(SettingsError, match=f"{next(iter(limit))}: for runs bojax drives"):
            bojax.Trainings(SPACE, max_step=9, early_stopping="asha", **limit)


def test_believers_at_a_milestone_no_design_reaches_any_more_stay_bounded(monkeypatch):
    """Four designs complete, then every later one is stopped at the first milestone: the
    top milestone's data no longer grows, so each proposal's believers (designs proposed
    since) would grow with the run; only the latest max(least, 32, eta^(K - 1)) are kept
    (the floor set aside here), and the earlier ones are excluded from the proposals."""
    import bojax.bo.stepwise as stepwise

    settings = dict(max_step=8, eta=2, early_stopping="asha", surrogate="gp-map", initial=2)
    assert bojax.Trainings(SPACE, **settings)._run.most_believers == 32  # the floor
    monkeypatch.setattr(stepwise, "FEWEST_BELIEVERS", 0)
    trainings = bojax.Trainings(
        SPACE, max_step=8, eta=2, early_stopping="asha", surrogate="gp-map", initial=2,
        step_budget=1000,
    )  # fmt: skip
    cap = max(2, SPACE.dim + 2, 2 ** (len(schedulers.milestones(1, 8, 2)) - 1))
    assert cap == 8
    believers, excluded, points = [], [], []
    for k in range(4 + 12):
        design, point = trainings.ask()
        points.append(tuple(point.values()))
        if k < 4:  # each better than all before it: kept to max_step
            for step in range(1, 9):
                going = trainings.tell(design, step, 10.0 - k)
            assert going is False
        else:  # worse than all before it: stopped at step 1
            assert trainings.tell(design, 1, 100.0 + k) is False
        record = trainings.finish(design)
        believers.append(record["diagnostics"].get("believers"))
        excluded.append(record["diagnostics"].get("excluded"))
    assert [r["curve"][-1][0] for r in trainings.history] == [8] * 4 + [1] * 12
    assert believers[:4] == [None] * 4  # the Sobol design while no milestone has 4 values
    assert believers[4:] == [min(j, cap) for j in range(12)]
    assert excluded[4:] == [max(0, j - cap) for j in range(12)] and len(set(points)) == 16
    # eta = 2 up to step 1000 (11 milestones) would allow 1,024: the ceiling holds
    from bojax.bo.stepwise import MOST_BELIEVERS

    deep = bojax.Trainings(SPACE, max_step=1000, eta=2, early_stopping="asha")
    assert deep._run.most_believers == MOST_BELIEVERS == 128


@pytest.mark.parametrize("on_pool", [False, True])
def test_report_says_a_training_is_complete_at_max_step(on_pool):
    trained = []

    def endless(point, report):  # no end of its own: it stops when report says so
        step = 0
        while True:
            step += 1
            trained.append(step)
            if not report(step, final_value(point) + 1.0 / step):
                return final_value(point)

    settings = dict(max_step=4, early_stopping="none", proposer="random", step_budget=12)
    with cf.ThreadPoolExecutor(1) if on_pool else contextlib.nullcontext() as pool:
        result = bojax.minimize(endless, SPACE, progress=False, executor=pool, **settings)
    assert trained == [1, 2, 3, 4] * 3 and result.steps == 12  # no step past max_step
    assert [r["status"] for r in result.history] == ["ok"] * 3
    assert [r["y"] for r in result.history] == [final_value(r["x"]) for r in result.history]


def test_tell_says_a_training_complete_at_max_step_goes_no_further():
    trainings = bojax.Trainings(
        SPACE, max_step=3, early_stopping="none", proposer="random", step_budget=9
    )
    design, _ = trainings.ask()
    assert [trainings.tell(design, s, 1.0 / s) for s in (1, 2, 3)] == [True, True, False]
    with pytest.raises(SettingsError, match="stopped or complete"):
        trainings.tell(design, 4, 0.1)
    record = trainings.finish(design)
    assert record["status"] == "ok" and record["y"] == pytest.approx(1 / 3)
    assert trainings.spent == 3


def test_ask_and_tell_keep_several_trainings_open_for_the_users_own_workers():
    settings = dict(max_step=9, early_stopping="asha", surrogate="gp-map", step_budget=60)
    trainings = bojax.Trainings(SPACE, **settings)
    open_designs = dict(trainings.ask() for _ in range(3))  # three workers start
    assert trainings.training == [0, 1, 2]
    steps = {design: 0 for design in open_designs}
    while open_designs:
        # The open designs are pending points of each proposal: never two alike.
        assert len({tuple(p.values()) for p in open_designs.values()}) == len(open_designs)
        for design, point in list(open_designs.items()):  # one epoch each, in turn
            steps[design] += 1
            value = final_value(point) + 2.0 / steps[design]
            going = trainings.tell(design, steps[design], value) and steps[design] < 9
            if not going:
                trainings.finish(design)
                del open_designs[design]
                if not trainings.done:
                    design, point = trainings.ask()
                    open_designs[design], steps[design] = point, 0
    statuses = {r["status"] for r in trainings.history}
    # Trainings still open when the budget ran out had each trained the step they told.
    assert 60 <= trainings.spent <= 62 and {"ok", "stopped"} <= statuses
    assert sorted(r["proposal"] for r in trainings.history) == list(range(len(trainings.history)))


# -- parallel trainings: segments on executors and in isolated processes -----------------
ASHA = dict(max_step=27, early_stopping="asha", surrogate="gp-map", step_budget=120)


def test_a_segment_records_the_steps_past_the_last_and_pauses_at_until():
    train = resumable(max_step=9)
    segment = run_segment(train, {"lr": 1e-3, "w": 0.3}, 3, 9, 9, checkpoint=Checkpoint(3, 3))
    assert [s for s, _ in segment.curve] == [4, 5, 6, 7, 8, 9]
    assert segment.status == "complete" and segment.charged == 6
    assert segment.checkpoint == Checkpoint(9, 9)
    paused = run_segment(train, {"lr": 1e-3, "w": 0.3}, 0, 3, 9)
    assert paused.status == "paused" and [s for s, _ in paused.curve] == [1, 2, 3]
    # Without a checkpoint parameter the training starts again: charged, not recorded.
    again = run_segment(make_train(9), {"lr": 1e-3, "w": 0.3}, 3, 6, 9, Checkpoint(3, 3))
    assert [s for s, _ in again.curve] == [4, 5, 6] and again.charged == 6
    broken = run_segment(lambda point, report: 1 / 0, {"lr": 1e-3, "w": 0.3}, 0, 3, 9)
    assert broken.status == "failed" and broken.error.startswith("ZeroDivisionError")


def every_third(point, report, checkpoint=None):
    """``resumable``'s curves (max_step 9), checkpointed at every third step only."""
    for step in range(1 + (checkpoint or 0), 10):
        report(step, final_value(point) + 2.0 / step, checkpoint=step if step % 3 == 0 else None)
    return final_value(point)


def test_a_segment_continues_from_a_checkpoint_older_than_its_last_report():
    point = {"lr": 1e-3, "w": 0.3}
    paused = run_segment(every_third, point, 0, 5, 9)
    assert [s for s, _ in paused.curve] == [1, 2, 3, 4, 5] and paused.checkpoint == Checkpoint(3, 3)
    # From step 3's state: steps 4 and 5 are trained again (charged), recorded once.
    rest = run_segment(every_third, point, 5, 9, 9, paused.checkpoint)
    assert rest.status == "complete" and [s for s, _ in rest.curve] == [6, 7, 8, 9]
    assert rest.charged == 6 and rest.checkpoint == Checkpoint(9, 9)
    # A checkpoint journalled before bojax kept its step resumes after the curve's last.
    old = run_segment(resumable(max_step=9), point, 5, 9, 9, Checkpoint(None, 5))
    assert [s for s, _ in old.curve] == [6, 7, 8, 9] and old.charged == 4


def test_jax_numbers_are_values_and_steps_like_python_ones():
    def train(point, report):  # a training loop that never leaves jnp
        for step in jnp.arange(1, 4):
            report(step, jnp.float32(1.0) / step)
        return jnp.asarray([0.25])

    segment = run_segment(train, {"lr": 1e-3, "w": 0.3}, 0, 3, 3)
    assert segment.status == "complete" and segment.y == 0.25
    assert segment.curve == [[1, 1.0], [2, 0.5], [3, pytest.approx(1 / 3)]]
    assert all(type(s) is int and type(v) is float for s, v in segment.curve)
    trainings = bojax.Trainings(SPACE, max_step=9, early_stopping="asha", proposer="random")
    design, _ = trainings.ask()
    assert trainings.tell(design, jnp.int32(1), jnp.float32(0.5))
    assert trainings.tell(design, 2, jnp.array(jnp.nan)) is False  # still a failure
    assert "finite number" in trainings.finish(design)["error"]


def test_cost_aware_is_refused_for_step_wise_runs_but_freeze_thaw():
    for stopping in ("asha", "hyperband"):
        with pytest.raises(SettingsError, match=f"cost_aware.*{stopping}"):
            bojax.minimize(make_train(9), SPACE, max_step=9, cost_aware=True,
                           early_stopping=stopping, progress=False)  # fmt: skip


def test_a_segment_adds_up_its_steps_reported_seconds_or_times_them():
    def train(point, report, checkpoint=None, cost=None):
        for step in range(1, 4):
            time.sleep(0.02)
            report(step, 1.0 / step, **({} if cost is None else {"seconds": cost}))
        return 1.0 / 3

    reported = run_segment(lambda p, r: train(p, r, cost=2.5), {}, 0, 3, 3)
    assert reported.status == "complete" and reported.seconds == 7.5
    timed = run_segment(train, {}, 0, 2, 3)  # paused at step 2: two steps timed
    assert timed.status == "paused" and timed.charged == 2
    assert 0.04 <= timed.seconds < 1.0
    for bad in (-1.0, float("nan"), "1 s"):
        failed = run_segment(lambda p, r, bad=bad: train(p, r, cost=bad), {}, 0, 3, 3)
        assert failed.status == "failed" and "seconds=s" in failed.error, failed.error
    trainings = bojax.Trainings(SPACE, max_step=9, early_stopping="asha", proposer="random")
    design, _ = trainings.ask()
    from bojax.bo.stepwise import _Reporter  # ASHA's report checks seconds too

    reporter = _Reporter(trainings._run, trainings._opened(design).training)
    assert reporter(1, 0.5, seconds=3.0)
    with pytest.raises(ValueError, match="seconds=s"):
        reporter(2, 0.4, seconds=-3.0)


def priced_designs(cheap: int):
    """Six complete curves around the basin and two paused ones (designs 6 and 7) whose
    values are equal, at steps of 10 s except design ``cheap``'s (0.01 s)."""
    from bojax.bo.freezethaw import Design

    designs = []
    grid = [(1e-4, 0.1), (1e-3, 0.9), (1e-2, 0.5), (1e-1, 0.2), (3e-4, 0.6), (3e-2, 0.8),
            (3e-3, 0.25), (3e-3, 0.35)]  # fmt: skip
    for k, (lr, w) in enumerate(grid):
        point = {"lr": lr, "w": w}
        final = final_value(point)
        steps = 27 if k < 6 else 3
        curve = [[s, final + 2.0 / s] for s in range(1, steps + 1)]
        rate = 0.01 if k == cheap else 10.0
        designs.append(Design(SPACE.to_unit(point), point, curve, complete=k < 6,
                              charged=steps, seconds=steps * rate))  # fmt: skip
    return designs


def test_each_design_is_priced_at_its_own_rate_with_untimed_and_free_ones_bounded():
    from bojax.bo.freezethaw import Design, rates_of

    u = np.zeros(2)
    designs = [
        Design(u, {}, [[1, 0.5]], charged=2, seconds=4.0),  # 2 s a step
        Design(u, {}, [[1, 0.5]], charged=1, seconds=8.0),  # 8 s
        Design(u, {}, [[1, 0.5]], charged=3, seconds=0.0),  # reported free: floored
        Design(u, {}, [[1, 0.5]]),  # never timed (an old journal): the median
        Design(u, {}, [[1, 0.5]], charged=1, seconds=1e4, failed=True),  # not in the median
        Design(u, {}, []),  # nothing trained: no rate
    ]
    assert rates_of(designs) == {0: 2.0, 1: 8.0, 2: 5e-4, 3: 5.0, 4: 1e4}
    assert rates_of([Design(u, {}, [[1, 0.5]])]) == {0: 1.0}


@pytest.mark.parametrize("cheap", [pytest.param(6, marks=pytest.mark.slow), 7])  # (6: 31 s)
def test_cost_aware_freeze_thaw_prices_its_choices_in_seconds(cheap):
    from bojax.bo.freezethaw import FreezeThaw

    settings = bojax.Settings(max_step=27, early_stopping="freeze-thaw", surrogate="gp-map",
                              cost_aware=True)  # fmt: skip
    designs = priced_designs(cheap)
    costs = FreezeThaw(SPACE, settings).worth(designs, [6, 7])[2]
    # 24 steps each still to go, at the design's own seconds per step
    np.testing.assert_allclose(costs[1:], [24 * (0.01 if j == cheap else 10.0) for j in (6, 7)])
    # a new design: 27 steps at the rate the cost GP predicts where EI per second is
    # highest, below the 10 s of 7 designs of 8
    assert 0 < costs[0] < 27 * 10.0
    decision = FreezeThaw(SPACE, settings).decide(designs, 20)
    assert (decision.phase, decision.design) == ("thaw", cheap)  # mirrored costs, choices
    assert decision.diagnostics["cost"] == pytest.approx(24 * 0.01)
    steps = FreezeThaw(SPACE, settings.replace(cost_aware=False)).worth(designs, [6, 7])[2]
    np.testing.assert_array_equal(steps, [27, 24, 24])  # priced in steps without it


def test_a_thaw_is_priced_from_its_checkpoints_step():
    from bojax.bo.freezethaw import Design, FreezeThaw

    model = FreezeThaw(SPACE, bojax.Settings(max_step=27, early_stopping="freeze-thaw"))
    paused = Design(np.full(2, 0.5), {}, [[s, 1.0 / s] for s in range(1, 10)])
    assert model._cost(paused) == 18  # no checkpoint: from its last step
    assert model._cost(Design(paused.u, {}, paused.curve, checkpoint=Checkpoint(6, 0))) == 21
    assert model._cost(Design(paused.u, {}, paused.curve, checkpoint=Checkpoint(None, 0))) == 18


@pytest.mark.slow
def test_one_worker_makes_the_records_of_the_inline_run():
    inline = bojax.minimize(resumable(), SPACE, progress=False, **ASHA)
    with cf.ThreadPoolExecutor(1) as pool:
        pooled = bojax.minimize(resumable(), SPACE, progress=False, executor=pool, **ASHA)
    assert same_records(inline.history, pooled.history)
    assert pooled.steps == inline.steps == 120
    assert "stopped" in {r["status"] for r in pooled.history}


def test_trainings_run_at_once_and_checkpoints_mean_no_step_trains_twice():
    trained: list[tuple[float, float, int]] = []
    running, most = set(), [0]
    lock = threading.Lock()

    def train(point, report, checkpoint=None):
        with lock:
            running.add(threading.get_ident())
            most[0] = max(most[0], len(running))
        try:
            for step in range(1 + (checkpoint or 0), 28):
                time.sleep(0.002)
                with lock:
                    trained.append((point["lr"], point["w"], step))
                report(step, final_value(point) + 2.0 / step, checkpoint=step)
        finally:
            with lock:
                running.discard(threading.get_ident())

    with cf.ThreadPoolExecutor(3) as pool:  # random proposals: no two designs alike
        result = bojax.minimize(
            train, SPACE, progress=False, executor=pool, **ASHA | {"proposer": "random"}
        )
    assert most[0] == 3  # three trainings at once
    assert len(trained) == len(set(trained)) == result.steps == 120
    assert sum(r["diagnostics"]["charged"] for r in result.history) == 120
    milestones = schedulers.milestones(1, 27, 3)
    cut = [r for r in result.history if r["curve"][-1][0] not in milestones]
    assert len(cut) <= 3 and all(r["status"] == "stopped" for r in cut)  # by the budget
    assert any(r["status"] == "ok" for r in result.history)


def test_without_checkpoints_a_kept_training_retrains_and_is_charged_for_it():
    with cf.ThreadPoolExecutor(1) as pool:
        result = bojax.minimize(make_train(), SPACE, progress=False, executor=pool, **ASHA)
    milestones = schedulers.milestones(1, 27, 3)
    for record in result.history:
        reached = [m for m in milestones if m <= record["curve"][-1][0]]
        if record["curve"][-1][0] in milestones:  # not cut by the budget
            assert record["diagnostics"]["charged"] == sum(reached)
    assert result.steps == sum(r["diagnostics"]["charged"] for r in result.history) == 120
    assert any(r["diagnostics"]["charged"] > r["curve"][-1][0] for r in result.history)


def test_a_lost_segment_is_retried_then_fails_its_design():
    class Flaky(cf.ThreadPoolExecutor):
        calls = 0

        def submit(self, fn, *args):
            Flaky.calls += 1
            if Flaky.calls in (2, 5, 6):  # the executor loses these segments
                future: cf.Future = cf.Future()
                future.set_exception(ConnectionError("worker died"))
                return future
            return super().submit(fn, *args)

    settings = dict(ASHA, step_budget=40, retries=1, proposer="random")
    with Flaky(1) as pool:
        result = bojax.minimize(resumable(), SPACE, progress=False, executor=pool, **settings)
    errors = [r["error"] for r in result.history if r["status"] == "failed"]
    assert errors == ["segment lost after 2 attempt(s): ConnectionError: worker died"]
    assert result.steps == 40


def logged(log: list, checkpoints: bool = True):
    """``resumable`` (or, without checkpoints, ``make_train``) curves; ``log`` gets
    ``(point, step)`` for every step trained."""

    def train(point, report, checkpoint=None):
        for step in range(1 + (checkpoint or 0), 28):
            log.append((tuple(point.values()), step))
            value = final_value(point) + 2.0 / step
            report(step, value, checkpoint=step if checkpoints else None)
        return final_value(point)

    if checkpoints:
        return train
    return lambda point, report: train(point, report)


@pytest.mark.parametrize(
    "pooled, checkpoints",
    [
        (False, True),
        (True, False),
        pytest.param(True, True, marks=pytest.mark.slow),
        pytest.param(False, False, marks=pytest.mark.slow),
    ],
    ids=["inline-checkpoints", "pool-none", "pool-checkpoints", "inline-none"],
)
@pytest.mark.filterwarnings("ignore:.*journalled for the objective")  # (its killer wraps it)
def test_a_run_killed_mid_training_continues_what_was_in_flight(
    tmp_path, monkeypatch, pooled, checkpoints
):
    from bojax.bo import stepwise

    monkeypatch.setattr(stepwise, "PROGRESS_SECONDS", 1e9)  # (the curve in pending.json)
    with cf.ThreadPoolExecutor(1) as pool:  # (a pool's segments without checkpoints
        executor = pool if pooled else None  # train again: its own uninterrupted run)
        whole = bojax.minimize(
            logged([], checkpoints), SPACE, progress=False, executor=executor, **ASHA
        )
    before, after = [], []
    train = logged(before, checkpoints)

    def dies(point, report, checkpoint=None):
        def dying(step, value, checkpoint=None):
            if step == 5:  # a kept training, past its second milestone
                raise KeyboardInterrupt  # the driver dies mid-training
            report(step, value, checkpoint=checkpoint)

        return train(point, dying, checkpoint) if checkpoints else train(point, dying)

    run = dies if checkpoints else (lambda point, report: dies(point, report))
    with cf.ThreadPoolExecutor(1) as pool, pytest.raises(KeyboardInterrupt):
        executor = pool if pooled else None
        bojax.minimize(run, SPACE, progress=False, executor=executor, out=tmp_path, **ASHA)
    in_flight = json.loads((tmp_path / "pending.json").read_text())
    # Inline, a checkpoint writes the curve at each step; without one the curve is
    # written at milestones (3), as a pool's segments are (and when stale, never here).
    assert len(in_flight) == 1 and in_flight[0]["curve"][-1][0] == (
        4 if checkpoints and not pooled else 3
    )
    with cf.ThreadPoolExecutor(1) as pool:
        executor = pool if pooled else None
        resumed = bojax.minimize(
            logged(after, checkpoints), SPACE, progress=False, executor=executor,
            out=tmp_path, resume=True, **ASHA,
        )  # fmt: skip
    assert same_records(resumed.history, whole.history) and resumed.steps == 120
    point = tuple(in_flight[0]["x"].values())
    first = min(step for p, step in after if p == point)
    if not checkpoints:
        assert first == 1  # it trained again from its first step
    elif pooled:
        assert first == 4  # from the checkpoint of its last milestone (3)
    else:
        assert first == 5  # from the checkpoint of its last report
        assert len(before) - 1 + len(after) == 120  # not one step trained twice


def test_a_killed_training_resumes_from_a_checkpoint_older_than_its_last_report(
    tmp_path, monkeypatch
):
    from bojax.bo import stepwise

    # Every report's curve written (as when PROGRESS_SECONDS pass between two reports):
    # the curve then runs past the last checkpoint.
    monkeypatch.setattr(stepwise, "PROGRESS_SECONDS", 0.0)
    trained = []

    def train(point, report, checkpoint=None):  # every_third at max_step 27, logged
        for step in range(1 + (checkpoint or 0), 28):
            trained.append((tuple(point.values()), step))
            if step == 5 and checkpoint is None and len(trained) > 40:
                raise KeyboardInterrupt  # the driver dies in a kept training
            saved = step if step % 3 == 0 else None
            report(step, final_value(point) + 2.0 / step, checkpoint=saved)
        return final_value(point)

    with pytest.raises(KeyboardInterrupt):
        bojax.minimize(train, SPACE, progress=False, out=tmp_path, **ASHA)
    died = len(trained) - 1  # the step it died in was never reported
    in_flight = json.loads((tmp_path / "pending.json").read_text())[0]
    assert in_flight["curve"][-1][0] == 4
    resumed = bojax.minimize(train, SPACE, progress=False, out=tmp_path, resume=True, **ASHA)
    point = tuple(in_flight["x"].values())
    assert trained[died + 1] == (point, 4)  # from step 3's state: step 4 trained again
    record = next(r for r in resumed.history if r["proposal"] == in_flight["proposal"])
    assert [s for s, _ in record["curve"]] == list(range(1, len(record["curve"]) + 1))
    # Step 4, trained again because the kill lost its state, is charged once: the run
    # spends its budget as the uninterrupted run would (not the step it died in either).
    assert record["diagnostics"].get("charged", record["curve"][-1][0]) == record["curve"][-1][0]
    assert resumed.steps == len(trained) - 2 == 120
    # A checkpoint saved past the journalled curve (killed between the two writes) is not
    # used: the steps between were never recorded.
    from bojax.bo.journal import Journal
    from bojax.bo.stepwise import load_checkpoint, save_checkpoint

    journal = Journal(tmp_path)
    save_checkpoint(journal, 99, Checkpoint(6, "state"))
    assert load_checkpoint(journal, 99, 6) == Checkpoint(6, "state")
    assert load_checkpoint(journal, 99, 5) is None


def test_checkpoints_of_stopped_trainings_are_removed_and_complete_ones_kept(tmp_path):
    def train(point, report):
        for step in range(1, 28):
            report(step, final_value(point) + 2.0 / step, checkpoint={"step": step})
        return final_value(point)

    result = bojax.minimize(train, SPACE, progress=False, out=tmp_path, **ASHA)
    kept = {int(p.stem) for p in (tmp_path / "checkpoints").glob("*.pkl")}
    complete = {r["proposal"] for r in result.history if r["status"] == "ok"}
    stopped = {r["proposal"] for r in result.history if r["status"] == "stopped"}
    assert kept == complete and complete and stopped


def test_a_training_stopped_when_the_driver_died_is_journalled_stopped_on_resume(tmp_path):
    """Killed between the scheduler's stop and the record (Ctrl-C in the training's own
    cleanup): the resume journals it as stopped, not trained again past the stop."""
    calls, kill = [], [False]

    def train(point, report, checkpoint=None):
        calls.append(point)
        try:
            for step in range(1 + (checkpoint or 0), 28):
                report(step, final_value(point) + 2.0 / step, checkpoint=step)
        except BaseException:
            if kill[0] and len(calls) == 6:  # the sixth training's stop
                raise KeyboardInterrupt from None
            raise
        return final_value(point)

    whole = bojax.minimize(train, SPACE, progress=False, **ASHA)
    assert whole.history[5]["status"] == "stopped"  # (so the kill falls in a stop)
    calls.clear()
    kill[0] = True
    with pytest.raises(KeyboardInterrupt):
        bojax.minimize(train, SPACE, progress=False, out=tmp_path, **ASHA)
    assert json.loads((tmp_path / "pending.json").read_text())[0]["over"] == "scheduler"
    calls.clear()
    kill[0] = False
    resumed = bojax.minimize(train, SPACE, progress=False, out=tmp_path, resume=True, **ASHA)
    assert same_records(resumed.history, whole.history) and resumed.steps == whole.steps
    assert len(calls) == len(whole.history) - 6  # the stopped one was not trained again


def hangs_when_wide(point, report, checkpoint=None):
    """A training that hangs at its second step for w > 0.7 (a dead data loader)."""
    for step in range(1 + (checkpoint or 0), 5):
        if step == 2 and point["w"] > 0.7:
            time.sleep(600)
        report(step, final_value(point) + 1.0 / step, checkpoint=step)
    return final_value(point)


@pytest.mark.slow
@pytest.mark.parametrize("early_stopping", ["asha", "freeze-thaw"])
def test_a_hanging_training_is_killed_by_its_timeout_and_the_run_goes_on(early_stopping, tmp_path):
    settings = dict(
        max_step=4, eta=2, early_stopping=early_stopping, proposer="random",
        surrogate="gp-map", initial=4, step_budget=14, timeout=8,
    )  # fmt: skip
    result = bojax.minimize(hangs_when_wide, SPACE, progress=False, out=tmp_path, **settings)
    failed = [r for r in result.history if r["status"] == "failed"]
    assert failed and all(r["error"] == "timed out after 8 s" for r in failed)
    assert all(r["x"]["w"] > 0.7 for r in failed)
    assert any(r["status"] == "ok" for r in result.history)
    if early_stopping == "freeze-thaw":  # checkpoints travel back from the processes
        assert any(r["phase"] == "thaw" for r in result.history)
        assert any((tmp_path / "checkpoints").iterdir())


def hangs_at_third(point, report, checkpoint=None):
    """Reports two steps, then hangs (a training stuck in its third epoch)."""
    for step in (1, 2):
        report(step, 1.0 / step, seconds=0.5)
    time.sleep(600)


@pytest.mark.slow
def test_a_segment_killed_by_its_timeout_keeps_the_steps_it_reported():
    from bojax.bo.segments import run_segment_isolated

    segment = run_segment_isolated(3, hangs_at_third, {"lr": 0.01, "w": 0.5}, 0, 4, 4, None)
    assert segment.status == "failed" and segment.error == "timed out after 3 s"
    assert segment.curve == [[1, 1.0], [2, 0.5]] and segment.charged == 2
    assert segment.seconds == 1.0


def test_a_segments_progress_file_is_read_back_without_a_line_the_kill_cut(tmp_path):
    from bojax.bo.segments import SegmentReport, StopTraining, _progress, _write_progress

    path = tmp_path / "progress.jsonl"
    report = SegmentReport(after=1, until=3, max_step=4, on_report=_write_progress(path))
    report(1, 0.9, seconds=0.25)  # charged, not recorded (a repeat of step 1)
    report(2, 0.8, seconds=0.25)
    with pytest.raises(StopTraining):
        report(3, 0.7, seconds=0.25)
    with open(path, "a") as file:
        file.write("[[4, 0.6], 4, 1.")  # cut by the kill
    segment = _progress(path)
    assert segment.curve == [[2, 0.8], [3, 0.7]] and segment.charged == 3
    assert segment.seconds == 0.75 and segment.status == "failed"
    assert _progress(tmp_path / "absent.jsonl").curve == []


# -- several trainings in one call (a vmapped trainer) --------------------------------
class BatchTrainer:
    """make_train's curves, several designs a call: epoch by epoch over the live ones."""

    def __init__(self):
        self.calls: list[int] = []

    def train(self, point, report):
        return self.train_batch([point], [report])[0]

    def train_batch(self, points, reports):
        self.calls.append(len(points))
        live = list(range(len(points)))
        for step in range(1, 28):
            going = []
            for i in live:
                try:
                    reports[i](step, final_value(points[i]) + 2.0 / step)
                    going.append(i)
                except StopTraining:
                    pass
            live = going
        return [final_value(p) for p in points]


def test_q_designs_train_in_one_batch_call_and_are_decided_one_by_one():
    trainer = BatchTrainer()
    settings = dict(ASHA, proposer="random", q=4)
    result = bojax.minimize(trainer.train, SPACE, progress=False, **settings)
    assert set(trainer.calls[:-1]) == {4} and sum(trainer.calls) == len(result.history)
    assert {"ok", "stopped"} <= {r["status"] for r in result.history}
    # The last batch opens no more designs than steps are left: the budget is not overrun.
    assert result.steps == 120
    # The same designs, in the same order, as one at a time: the Sobol design.
    one = bojax.minimize(make_train(), SPACE, progress=False, **ASHA | {"proposer": "random"})
    n = min(len(one.history), len(result.history))
    assert [r["u"] for r in result.history[:n]] == [r["u"] for r in one.history[:n]]


def test_a_failing_batch_fails_its_designs_and_a_bad_value_fails_only_its_own():
    class Diverges(BatchTrainer):
        def train_batch(self, points, reports):
            if len(self.calls) == 1:
                self.calls.append(len(points))
                raise RuntimeError("out of memory")
            for i, report in enumerate(reports):
                try:
                    report(1, math.nan if i == 0 else 1.0)
                except StopTraining:
                    pass
            self.calls.append(len(points))
            return [1.0] * len(points)

    trainer = Diverges()
    trainer.calls.append(0)
    settings = dict(max_step=1, early_stopping="none", proposer="random", q=2, step_budget=4)
    result = bojax.minimize(trainer.train, SPACE, progress=False, **settings)
    statuses = [(r["status"], r["error"]) for r in result.history[:4]]
    assert statuses[0] == statuses[1] == ("failed", "RuntimeError: out of memory")
    assert statuses[2][0] == "failed" and "finite number" in statuses[2][1]
    assert statuses[2][1].startswith("ValueError: ")  # as a training alone journals it
    assert statuses[3] == ("ok", None)


@pytest.mark.slow  # (the fast tier's heaviest: 31 s; CI runs it)
def test_a_training_that_edits_its_point_or_calls_sys_exit_leaves_the_journal_sound(tmp_path):
    from bojax.bo.runs import load_run

    def careless(point, report):
        point["lr"] *= 100  # e.g. a learning-rate warm-up written into the dict
        point["batch"] = 64  # and a setting of its own
        if point["w"] > 0.8:
            raise SystemExit("data loader gave up")  # fails this design, not the run
        return make_train()(dict(lr=point["lr"] / 100, w=point["w"]), report)

    out = tmp_path / "run"
    result = bojax.minimize(careless, SPACE, progress=False, out=out, **ASHA)
    run = load_run(out)  # every record as proposed: show, plot and resume read it
    assert [r["x"] for r in run.records] == [r["x"] for r in result.history]
    assert all(SPACE.validate(r["x"]) == r["x"] for r in run.records)
    exited = [r for r in result.history if r["x"]["w"] > 0.8]
    assert exited and all(r["status"] == "failed" for r in exited)
    assert all(r["error"] == "the objective called sys.exit('data loader gave up')" for r in exited)
    trainings = bojax.Trainings(SPACE, **ASHA)
    design, point = trainings.ask()
    point["lr"] = 99.0  # the user's copy
    trainings.tell(design, 1, 0.5)
    assert trainings.finish(design)["x"]["lr"] != 99.0


# -- a training that ends by itself (its own early stopping) -----------------------------
def ends_itself(point, report):
    """make_train's curve, but a design with w > 0.5 ends by itself at step 3, the second
    ASHA milestone (its own early stopping), however poor its value there."""
    for step in range(1, 28):
        value = final_value(point) + 2.0 / step
        if report(step, value, last=step == 3 and point["w"] > 0.5) is False:
            break
    return value


def _ended_at_three(history):
    ended = [r for r in history if r["x"]["w"] > 0.5 and r["curve"][-1][0] == 3]
    assert ended, "no design ended by itself"
    return ended


@pytest.mark.parametrize("how", ["inline", "executor", "batch"])
def test_a_training_that_ends_by_itself_at_a_milestone_is_complete_not_stopped(how):
    settings = dict(ASHA, proposer="random")
    if how == "batch":

        class Batch:  # the same trainings, two at a time in one call
            def train(self, point, report):
                return self.train_batch([point], [report])[0]

            def train_batch(self, points, reports):
                out = []
                for point, report in zip(points, reports, strict=True):
                    try:
                        out.append(ends_itself(point, report))
                    except StopTraining:
                        out.append(None)
                return out

        train, settings = Batch().train, settings | {"q": 2}
    else:
        train = ends_itself
    with cf.ThreadPoolExecutor(2) if how == "executor" else contextlib.nullcontext() as pool:
        result = bojax.minimize(train, SPACE, progress=False, executor=pool, **settings)
    for record in _ended_at_three(result.history):
        assert record["status"] == "ok" and record["y"] == record["curve"][-1][1]
    # Ask and tell: the same, said by tell(..., last=True).
    trainings = bojax.Trainings(SPACE, **settings | {"q": None})
    while not trainings.done:
        design, point = trainings.ask()
        for step in range(1, 28):
            last = step == 3 and point["w"] > 0.5
            if not trainings.tell(design, step, final_value(point) + 2.0 / step, last=last):
                break
        trainings.finish(design)
    assert all(r["status"] == "ok" for r in _ended_at_three(trainings.history))


# -- trainings that fail before a step, or misreport their steps -------------------------
def fails_first(calls: list, failing: int, max_step: int = 9):
    """A checkpointed training whose first ``failing`` calls raise before any report."""

    def train(point, report, checkpoint=None):
        calls.append(point)
        if len(calls) <= failing:
            raise OSError("the data loader is not there")
        for step in range(1 + (checkpoint or 0), max_step + 1):
            report(step, final_value(point) + 1.0 / step, checkpoint=step)
        return final_value(point)

    return train


@pytest.mark.parametrize(
    "early_stopping, pooled",
    [("asha", False), ("asha", True), ("freeze-thaw", False)],
    ids=["asha", "asha-pool", "freeze-thaw"],
)
def test_trainings_that_all_fail_before_a_step_end_the_run_within_its_budget(
    early_stopping, pooled
):
    settings = dict(
        max_step=9, early_stopping=early_stopping, surrogate="gp-map", proposer="random",
        step_budget=12, initial=4, progress=False,
    )  # fmt: skip
    calls: list = []
    with cf.ThreadPoolExecutor(2) if pooled else contextlib.nullcontext() as pool:
        with pytest.raises(ObjectiveError, match=r"every training failed.*data loader"):
            bojax.minimize(fails_first(calls, 10**6), SPACE, executor=pool, **settings)
    assert len(calls) == 12  # each failure costs one step of the budget (it looped forever)


@pytest.mark.slow  # 7 s: a freeze-thaw run (the all-failing run covers the fast tier)
def test_freeze_thaw_whose_first_designs_all_failed_goes_on_to_model_the_rest(tmp_path):
    settings = dict(FREEZE_THAW, max_step=9, step_budget=26, initial=4, out=tmp_path)
    calls: list = []
    result = bojax.minimize(fails_first(calls, 5), SPACE, progress=False, **settings)
    failed = [r for r in result.history if r["status"] == "failed"]
    assert len(failed) == 5 and result.steps == 26
    phases = [r["phase"] for r in result.history[5:]]
    assert "initial" in phases and {"new", "thaw"} & set(phases)  # then it fitted a model
    assert math.isfinite(result.best_value)


def test_a_training_returning_without_a_report_fails_and_max_failures_stops_the_run():
    def silent(point, report):
        return final_value(point)  # never calls report

    settings = dict(max_step=9, early_stopping="asha", proposer="random", step_budget=40)
    with pytest.raises(ObjectiveError, match="without reporting a step"):
        bojax.minimize(silent, SPACE, progress=False, **settings)

    def fails_wide(point, report):
        if point["w"] > 0.5:
            raise OSError("out of memory")
        return make_train(9)(point, report)

    result = bojax.minimize(fails_wide, SPACE, progress=False, max_failures=2, **settings)
    assert result.stopped == "2 trainings failed (max_failures=2)" and result.failures == 2
    assert result.steps < 40 and result.evaluations > 2


@pytest.mark.parametrize("pooled", [False, True], ids=["inline", "pool"])
def test_a_step_past_max_step_fails_a_training_that_skipped_its_last_steps(pooled):
    def skips(point, report, checkpoint=None):  # an epoch count that disagrees with max_step
        for step in (1, 2, 3, 12) if point["w"] < 0.5 else range(1, 15):
            report(step, final_value(point) + 1.0 / step)
        return final_value(point)

    settings = dict(max_step=9, early_stopping="none", step_budget=36, progress=False)
    with cf.ThreadPoolExecutor(1) if pooled else contextlib.nullcontext() as pool:
        result = bojax.minimize(skips, SPACE, executor=pool, **settings)
    for record in result.history:
        if record["x"]["w"] < 0.5:  # reported 12 after 3: not complete
            assert (
                record["status"] == "failed" and "step 12 is past max_step = 9" in record["error"]
            )
        else:  # ran on past step 9: complete, at step 9
            assert record["status"] == "ok" and record["curve"][-1][0] == 9
    assert {r["status"] for r in result.history} == {"ok", "failed"}


def test_an_unreadable_checkpoint_restarts_its_training_and_bad_pending_charges_are_refused(
    tmp_path,
):
    trained, died = [], []

    def train(point, report, checkpoint=None):
        for step in range(1 + (checkpoint or 0), 28):
            trained.append((point["w"], step))
            if step == 5 and len(trained) > 40 and not died:
                died.append(step)
                raise KeyboardInterrupt  # the driver dies in a kept training
            report(step, final_value(point) + 2.0 / step, checkpoint=step)
        return final_value(point)

    with pytest.raises(KeyboardInterrupt):
        bojax.minimize(train, SPACE, progress=False, out=tmp_path, **ASHA)
    pending = json.loads((tmp_path / "pending.json").read_text())
    design = pending[0]["proposal"]
    saved = tmp_path / "checkpoints" / f"{design}.pkl"
    good = saved.read_bytes()
    (tmp_path / "pending.json").write_text(json.dumps([{**pending[0], "charged": "x"}]))
    with pytest.raises(JournalError, match="'charged' must be a whole number"):
        bojax.minimize(train, SPACE, progress=False, out=tmp_path, resume=True, **ASHA)
    (tmp_path / "pending.json").write_text(json.dumps(pending))
    saved.write_bytes(good[: len(good) // 2])  # torn
    before = len(trained)
    with pytest.warns(RuntimeWarning, match=rf"{design}\.pkl cannot be read back"):
        resumed = bojax.minimize(train, SPACE, progress=False, out=tmp_path, resume=True, **ASHA)
    assert trained[before] == (pending[0]["x"]["w"], 1)  # from its first step again
    assert resumed.steps == 120


def test_a_freeze_thaw_record_without_its_design_is_refused_on_resume(tmp_path):
    settings = dict(FREEZE_THAW, max_step=9, step_budget=20, initial=4, out=tmp_path)
    bojax.minimize(resumable(None, 9), SPACE, progress=False, **settings)
    path = tmp_path / "journal.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[1])
    del record["diagnostics"]["design"]
    path.write_text("\n".join([lines[0], json.dumps(record), *lines[2:]]) + "\n")
    with pytest.raises(JournalError, match=r"journal\.jsonl:2: a freeze-thaw record needs"):
        bojax.minimize(resumable(None, 9), SPACE, progress=False, resume=True, **settings)


@pytest.mark.slow  # 10-15 s: two freeze-thaw runs and a resume
@pytest.mark.filterwarnings("ignore:.*journalled for the objective")  # (a wrapper)
def test_a_killed_freeze_thaw_run_without_checkpoints_resumes_to_the_uninterrupted_records(
    tmp_path,
):
    settings = dict(FREEZE_THAW, max_step=9, step_budget=60, initial=4)
    whole = bojax.minimize(make_train(9), SPACE, progress=False, **settings)
    reports = []

    def dies(point, report):
        def dying(step, value):
            reports.append(step)
            if len(reports) > 40 and step not in (1, 3, 9):  # inside a segment
                raise KeyboardInterrupt
            report(step, value)

        return make_train(9)(point, dying)

    with pytest.raises(KeyboardInterrupt):
        bojax.minimize(dies, SPACE, progress=False, out=tmp_path, **settings)
    (in_flight,) = json.loads((tmp_path / "pending.json").read_text())
    assert in_flight["charged"] > 0  # steps the killed run trained in its segment
    resumed = bojax.minimize(
        make_train(9), SPACE, progress=False, out=tmp_path, resume=True, **settings
    )
    keys = ("x", "y", "status", "curve", "phase", "diagnostics")
    # The segment trains again from its first step and is charged as then: no more.
    assert [{k: untimed(r)[k] for k in keys} for r in resumed.history] == [
        {k: untimed(r)[k] for k in keys} for r in whole.history
    ]


def test_the_parameters_figure_marks_stopped_trainings_apart_from_failed_ones(
    tmp_path, monkeypatch
):
    from bojax.bo.runs import Run
    from bojax.reports import run_figures

    def record(k, status, y):
        return {"iteration": k, "status": status, "y": y, "x": {"lr": 0.01, "w": k / 10},
                "curve": [[1, y or 1.0]]}  # fmt: skip

    records = [record(0, "ok", 0.5), record(1, "stopped", 0.9), record(2, "stopped", 0.8),
               record(3, "failed", None)]  # fmt: skip
    run = Run(tmp_path, SPACE, {}, records, [], None, None, None)
    drawn = {}
    monkeypatch.setattr(run_figures, "save", lambda fig, path, dpi: drawn.update(fig=fig))
    run_figures.plot_parameters(run, tmp_path / "parameters.png")
    for ax in drawn["fig"].axes:
        by_label = {line.get_label(): len(line.get_xdata()) for line in ax.lines}
        assert by_label["failed"] == 1 and by_label["stopped"] == 2


def test_a_resumed_scheduler_holds_every_milestone_value_its_journal_holds():
    """A parallel run journals trainings in the order they end. Design 0 reached
    milestone 1 first and alone (kept), then went on to 3 and 9; designs 1-3 reached
    milestone 1 later with better values. Replayed in the journal's order, design 0's
    value at 1 is no longer among the best, yet its values at 3 and 9 were recorded by
    the run and must be in the resumed scheduler too."""
    from bojax.bo.stepwise import StepRun

    settings = bojax.Settings(max_step=9, early_stopping="asha", eta=3, initial=2)

    def record(proposal, curve, status):
        u = [0.1 * (proposal + 1), 0.5]
        return {"proposal": proposal, "u": u, "x": SPACE.from_unit(np.array(u)),
                "curve": curve, "status": status, "diagnostics": {}}  # fmt: skip

    history = [
        record(1, [[1, 0.1]], "stopped"),
        record(2, [[1, 0.2]], "stopped"),
        record(3, [[1, 0.3]], "stopped"),
        record(0, [[s, 5.0 + 1.0 / s] for s in range(1, 10)], "ok"),
    ]
    run = StepRun(None, SPACE, settings, None, history, False)
    counts = {rung: len(values) for (_, rung), values in run.rungs.values.items()}
    assert counts == {0: 4, 1: 1, 2: 1}
    assert run.spent == 12


def test_the_progress_line_counts_freeze_thaw_designs_not_segments():
    from types import SimpleNamespace

    from bojax.bo.stepwise import _StepProgress

    def segment(design, status, y):
        return {"status": status, "y": y, "diagnostics": {"design": design}}

    history = [segment(0, "stopped", 2.0), segment(1, "stopped", 3.0), segment(0, "ok", 1.0)]
    run = SimpleNamespace(budget=10, spent=6, history=history)
    with _StepProgress(True, run) as bar:
        bar.update(history[-1])
        fields = bar.progress.tasks[0].fields
    assert fields == {"designs": 2, "best": "1"}


@pytest.mark.slow  # 24 s: 60 proposals, each fitting the failure classifier too
def test_model_proposals_learn_where_trainings_fail():
    """Trainings with w > 0.9 (a tenth of the space) always fail. The failures are the
    classifier's labels, as in a plain run; before, 30-56 % of model proposals went on
    into that region (seeds 0-2), now 2-7 %."""

    def train(point, report):
        if point["w"] > 0.9:
            raise RuntimeError("out of memory")
        for step in range(1, 10):
            report(step, final_value(point) + 2.0 / step)
        return final_value(point)

    result = bojax.minimize(
        train, SPACE, max_step=9, early_stopping="asha", iterations=8, initial=4,
        surrogate="gp-map", progress=False, seed=0,
    )  # fmt: skip
    model = [r for r in result.history if r["phase"] != "initial"]
    assert len(model) > 30
    assert sum(r["status"] == "failed" for r in model) <= len(model) // 8


@pytest.mark.slow  # 13 s: compiles the failure classifier's fit
def test_a_training_that_failed_past_the_modelled_milestone_is_told_once(monkeypatch):
    """Its value at the milestone is data; telling it a failure too put a success and a
    failure at one point."""
    import bojax.bo.stepwise as stepwise
    from bojax.bo.stepwise import StepRun

    settings = bojax.Settings(max_step=9, early_stopping="asha", initial=3, surrogate="gp-map")

    def record(j, curve, status):
        u = [0.15 + 0.2 * j, 0.3 + 0.1 * j]
        return {"proposal": j, "u": u, "x": SPACE.from_unit(np.array(u)), "curve": curve,
                "status": status, "diagnostics": {}}  # fmt: skip

    history = [
        record(0, [[1, 0.5], [2, 0.4], [3, 0.3]], "stopped"),
        record(1, [[1, 0.6], [2, math.nan]], "failed"),  # reached step 1, then diverged
        record(2, [[1, 0.7]], "stopped"),
        record(3, [], "failed"),  # failed before its first step
        record(4, [[1, 0.8]], "stopped"),
    ]
    run = StepRun(None, SPACE, settings, None, history, False)
    told = []
    real = stepwise.tell
    monkeypatch.setattr(
        stepwise, "tell", lambda state, u, y: told.append((tuple(u), y)) or real(state, u, y)
    )
    run.propose(5)
    points = [u for u, _ in told]
    assert len(points) == len(set(points)) == 5  # each design once
    assert sum(math.isnan(y) for _, y in told) == 1  # only design 3 is a failure
    # in design order, the failure where it happened: past exact_limit the trust region
    # counts misses in this order, and failures told last ended its episodes
    assert points == [tuple(r["u"]) for r in history] and math.isnan(told[3][1])


@pytest.mark.slow  # 6 s: a model proposal's fit
def test_stopped_designs_out_of_the_believers_window_are_never_proposed_again(monkeypatch):
    """Designs stopped before the milestone's data last grew were forgotten: the search
    went back to them exactly (a corner trained 7 times in a 62-design run, 0.09 at the
    end; 0.006 now). They are excluded from the proposals, not believed."""
    import bojax.bo.stepwise as stepwise
    from bojax.bo.stepwise import StepRun

    settings = bojax.Settings(max_step=9, early_stopping="asha", initial=3, surrogate="gp-map")
    rng = np.random.default_rng(0)
    climbed, stopped = [[1, 0.5], [2, 0.45], [3, 0.4]], [[1, 0.9]]
    curves = [climbed, stopped, climbed, climbed, stopped, climbed, stopped]
    history = []
    for j, curve in enumerate(curves):
        u = rng.uniform(size=2).tolist()
        history.append({"proposal": j, "u": u, "x": SPACE.from_unit(np.array(u)),
                        "curve": curve, "status": "stopped", "diagnostics": {}})  # fmt: skip
    run = StepRun(None, SPACE, settings, None, history, False)
    seen = []
    real = stepwise.ask_batch

    def spy(state, q, pending=None, **options):
        seen.append((pending, options.get("exclude")))
        return real(state, q, pending, **options)

    monkeypatch.setattr(stepwise, "ask_batch", spy)
    u, info = run.propose(7, training=[[0.5, 0.5]])
    ((pending, exclude),) = seen
    np.testing.assert_array_equal(pending, [history[6]["u"], [0.5, 0.5]])  # since, training
    np.testing.assert_array_equal(exclude, [history[1]["u"], history[4]["u"]])
    assert (info["believers"], info["excluded"], info["model_points"]) == (2, 2, 4)
    assert not any(np.array_equal(u, r["u"]) for r in history)


@pytest.mark.parametrize(
    "how", [dict(early_stopping="asha"), dict(early_stopping="asha", pool=2),
            dict(early_stopping="freeze-thaw")], ids=["asha", "asha-pool", "freeze-thaw"],
)  # fmt: skip
def test_a_training_that_catches_its_stop_is_still_stopped(how, monkeypatch):
    """A report called in a trainer thread: the StopTraining it raises ends that thread
    only and the training returns normally. It is stopped (or paused) all the same, never
    complete after one step, and its later reports are refused."""
    monkeypatch.setattr(threading, "excepthook", lambda args: None)
    after_stop = []

    def train(point, report):
        def epochs():
            for epoch in range(1, 10):
                try:
                    if not report(epoch, point["w"] + 1.0 / epoch):
                        break
                except StopTraining:
                    with contextlib.suppress(StopTraining):
                        after_stop.append(report(epoch + 1, 0.0))  # refused: not recorded
                    raise

        worker = threading.Thread(target=epochs)
        worker.start()
        worker.join()
        return point["w"]

    how = dict(how)
    pool = how.pop("pool", None)
    run = dict(max_step=9, initial=3, step_budget=24, seed=0, proposer="random",
               surrogate="gp-map", progress=False, **how)  # fmt: skip
    with cf.ThreadPoolExecutor(pool) if pool else contextlib.nullcontext() as executor:
        result = bojax.minimize(train, SPACE, executor=executor, **run)
    ends = {(r["status"], r["curve"][-1][0] == 9) for r in result.history}
    assert ends <= {("ok", True), ("stopped", False)} and ("stopped", False) in ends
    assert after_stop == []


def test_a_pooled_run_resumed_inline_numbers_new_trainings_past_the_pools(tmp_path):
    """A pool journals trainings in the order they end, so the records' count can be a
    number the pool used; the inline resume first finishes the trainings that were in
    flight, then numbers new ones past every used number (no number twice)."""
    calls = []

    def train(point, report, checkpoint=None):
        calls.append(point)
        if len(calls) == 9:
            raise KeyboardInterrupt  # Ctrl-C: the run stops, its trainings in flight kept
        if len(calls) == 1:
            time.sleep(1.0)  # the first training ends after later ones
        for epoch in range((checkpoint or 0) + 1, 10):
            if not report(epoch, point["w"] + 1.0 / epoch, checkpoint=epoch):
                break

    run = dict(max_step=9, early_stopping="asha", initial=3, iterations=5, seed=0,
               proposer="random", progress=False, out=tmp_path)  # fmt: skip
    with pytest.raises(KeyboardInterrupt), cf.ThreadPoolExecutor(3) as pool:
        bojax.minimize(train, SPACE, executor=pool, **run)
    pending = {e["proposal"] for e in json.loads((tmp_path / "pending.json").read_text())}
    lines = (tmp_path / "journal.jsonl").read_text().splitlines()
    used = pending | {json.loads(line)["proposal"] for line in lines}
    assert 0 in pending and len(lines) in used  # the records' count is a number taken
    result = bojax.minimize(train, SPACE, resume=True, **run)
    proposals = [r["proposal"] for r in result.history]
    assert len(proposals) == len(set(proposals)) and pending <= set(proposals)
    assert sorted(proposals) == list(range(len(proposals)))


@pytest.mark.parametrize("pool", [None, 2], ids=["inline", "thread-pool"])
def test_a_checkpoint_that_cannot_be_pickled_is_not_journalled_and_the_run_goes_on(tmp_path, pool):
    """A model state holding a lock: the run with a journal goes on as without one (the
    checkpoint kept in memory), with a warning that a resume starts such a design again."""

    def train(point, report, checkpoint=None):
        start = 0 if checkpoint is None else checkpoint["step"]
        for epoch in range(start + 1, 10):
            state = {"step": epoch, "lock": threading.Lock()}
            if not report(epoch, point["w"] + 1.0 / epoch, checkpoint=state):
                break

    run = dict(max_step=9, early_stopping="asha", initial=3, iterations=2, seed=0,
               proposer="random", progress=False)  # fmt: skip
    with cf.ThreadPoolExecutor(pool) if pool else contextlib.nullcontext() as executor:
        plain = bojax.minimize(train, SPACE, executor=executor, **run)
    with (
        cf.ThreadPoolExecutor(pool) if pool else contextlib.nullcontext() as executor,
        pytest.warns(UserWarning, match="checkpoint cannot be saved"),
    ):
        journalled = bojax.minimize(train, SPACE, executor=executor, out=tmp_path, **run)
    assert journalled.failures == 0 and journalled.steps == plain.steps
    assert not list(tmp_path.glob("checkpoints/*.pkl"))


def test_a_kill_between_the_curve_and_its_checkpoint_repeats_one_step(tmp_path):
    """The curve in flight is written before its checkpoint: a driver killed between the
    two resumes from the checkpoint before, training one step again, not from step 1."""
    import subprocess
    import sys
    import textwrap

    log = tmp_path / "trained.txt"
    code = textwrap.dedent(f"""
        import os, signal, sys, bojax
        from bojax.parameters import Real
        from bojax.bo.journal import Journal
        def train(point, report, checkpoint=None):
            for epoch in range((checkpoint or 0) + 1, 10):
                with open({str(log)!r}, "a") as file:
                    file.write(f"{{epoch}}\\n")
                if not report(epoch, point["x"] + 1.0 / epoch, checkpoint=epoch):
                    break
        if sys.argv[1] == "kill":  # dies as the curve to step 5 is written
            save = Journal.save_pending
            def dying(self, entries):
                save(self, entries)
                if any(e["curve"] and e["curve"][-1][0] == 5 for e in entries):
                    os.kill(os.getpid(), signal.SIGKILL)
            Journal.save_pending = dying
        bojax.minimize(train, bojax.Space([Real("x", 0.0, 1.0)]), max_step=9,
                       early_stopping="none", initial=1, iterations=0, progress=False,
                       out={str(tmp_path / "run")!r}, resume=sys.argv[1] == "resume")
    """)
    killed = subprocess.run([sys.executable, "-c", code, "kill"], capture_output=True)
    assert killed.returncode == -9
    subprocess.run([sys.executable, "-c", code, "resume"], check=True, capture_output=True)
    trained = [int(e) for e in log.read_text().split()]
    assert trained[:7] == [1, 2, 3, 4, 5, 5, 6] and trained.count(1) == 1  # (step 5 charged)


@pytest.mark.slow  # 10 s each: three runs, one killed in a subprocess
@pytest.mark.parametrize(
    "kill, pending_over",
    [
        ("report", [None, "scheduler"]),
        ("ended", ["last", "scheduler"]),
        ("first-append", ["last", "scheduler"]),
        ("append", ["scheduler"]),
    ],
)
def test_a_batch_killed_after_one_of_its_designs_was_stopped_resumes_to_the_same_run(
    tmp_path, kill, pending_over
):
    """Design 1 stopped by the scheduler, design 0 of its batch still training, then the
    driver dies: the resume journalled design 1 at once and batched design 0 with a new
    design, so every later record differed (review). A batch's trainings start again from
    step 1, so the stopped one trains again beside design 0, also when design 0 had
    ended too (its last step) but the batch had not returned; killed after the batch
    returned, between its records, the rest are journalled as the batch returned them,
    in its order (review: trained again, the complete one came after the stopped one)."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import math, os, signal, sys, bojax
        from bojax.parameters import Real
        from bojax.bo.journal import Journal
        from bojax.bo.stepwise import StopTraining
        calls = [0]
        if sys.argv[1].endswith("append"):  # dies before the batch's first or second record
            append, appended = Journal.append, [0]
            def dying(self, record):
                appended[0] += 1
                if appended[0] == (1 if sys.argv[1] == "first-append" else 2):
                    os.kill(os.getpid(), signal.SIGKILL)
                return append(self, record)
            Journal.append = dying
        def train(point, report):
            return batch([point], [report])[0]
        def batch(points, reports):
            live = list(range(len(points)))
            for step in range(1, 10):
                for i in list(live):
                    calls[0] += 1
                    if sys.argv[1] == "report" and calls[0] == 5:
                        os.kill(os.getpid(), signal.SIGKILL)
                    try:
                        reports[i](step, points[i]["x"] + 1.0 / step, last=step == 9)
                    except StopTraining:
                        live.remove(i)
            if sys.argv[1] == "ended":  # the first batch's designs ended, not returned
                os.kill(os.getpid(), signal.SIGKILL)
            return [p["x"] for p in points]
        train.batch = batch
        bojax.minimize(train, bojax.Space([Real("x", 0.0, 1.0)]), q=2, max_step=9,
                       early_stopping="asha", initial=2, iterations=3, surrogate="gp-map",
                       progress=False, seed=1, out=sys.argv[2], resume=sys.argv[1] == "resume")
    """)
    runs = {name: str(tmp_path / name) for name in ("whole", "killed")}
    subprocess.run([sys.executable, "-c", code, "whole", runs["whole"]], check=True)
    killed = subprocess.run([sys.executable, "-c", code, kill, runs["killed"]])
    assert killed.returncode == -9
    pending = json.loads((tmp_path / "killed" / "pending.json").read_text())
    assert [e.get("over") for e in pending] == pending_over  # the case in question
    subprocess.run([sys.executable, "-c", code, "resume", runs["killed"]], check=True)
    keys = ("x", "u", "y", "status", "curve", "phase")
    read = [[{k: r[k] for k in keys} for r in Journal(path).read()] for path in runs.values()]
    assert read[0] == read[1]


def test_a_training_killed_after_its_last_report_finishes_from_its_checkpoint_in_a_pool(
    tmp_path,
):
    """Killed between the last report (max_step) and train's return: a resume on a pool
    hands the training its checkpoint at max_step, so it returns its value without
    training a step again."""
    ended, starts = [], []

    def train(point, report, checkpoint=None):
        starts.append(checkpoint or 0)
        for step in range(1 + (checkpoint or 0), 10):
            report(step, point["w"] + 1.0 / step, checkpoint=step)
        ended.append(point)
        if len(ended) == 2 and checkpoint is None:
            raise KeyboardInterrupt  # the driver dies before train returns
        return point["w"]

    run = dict(max_step=9, early_stopping="asha", initial=3, iterations=4, seed=0,
               proposer="random", progress=False, out=tmp_path)  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        bojax.minimize(train, SPACE, **run)
    (killed,) = json.loads((tmp_path / "pending.json").read_text())
    assert killed["curve"][-1][0] == 9
    starts.clear()
    with cf.ThreadPoolExecutor(2) as pool:
        result = bojax.minimize(train, SPACE, executor=pool, resume=True, **run)
    record = next(r for r in result.history if r["proposal"] == killed["proposal"])
    assert record["status"] == "ok" and record["y"] == killed["x"]["w"]
    assert record["diagnostics"]["charged"] == 9 and starts[0] == 9


@pytest.mark.slow  # (compiles the model's fit and proposal: about 30 s each)
@pytest.mark.parametrize("pool", [False, True], ids=["inline", "pool"])
def test_freeze_thaw_thaws_every_design_of_an_exhausted_space_then_ends(pool):
    """A discrete space smaller than the budget: each design is started once (never
    started over while paused), the paused ones are thawed once no new one is left, and
    the run ends there as a plain run does (review: SpaceExhaustedError, after starting
    copies of paused designs)."""
    from bojax.parameters import Categorical, Integer

    def train(point, report, checkpoint=None):
        final = point["a"] + (point["c"] == "x")
        for epoch in range(1 + (checkpoint or 0), 10):
            report(epoch, final + 1.0 / epoch, checkpoint=epoch)
        return final

    space = bojax.Space([Integer("a", 0, 2), Categorical("c", ("x", "y"))])
    with cf.ThreadPoolExecutor(2) if pool else contextlib.nullcontext() as executor:
        result = bojax.minimize(train, space, max_step=9, step_budget=200, initial=3,
                                early_stopping="freeze-thaw", surrogate="gp-map",
                                executor=executor, progress=False)  # fmt: skip
    assert "exhausted" in result.stopped and result.best_value == 0
    started = [tuple(r["x"].values()) for r in result.history if r["phase"] != "thaw"]
    assert len(started) == len(set(started)) == 6  # each design started once
    assert result.steps == 54  # every design trained to max_step, no step twice


@pytest.mark.parametrize("pool", [False, True], ids=["inline", "pool"])
def test_a_report_after_its_training_returned_is_refused(pool):
    """A stashed report called later (from the next training, or a thread) was taken:
    it charged steps and fed the scheduler a value the journal never held."""
    stash, refused, calls = [], [], []

    def train(point, report):
        calls.append(point)
        if stash:
            try:
                stash.pop()(27, -5.0)
            except RuntimeError as error:
                refused.append(str(error))
        stash.append(report)
        report(1, final_value(point) + 1.0)
        return final_value(point)

    run = dict(max_step=27, early_stopping="asha", proposer="random", initial=3, iterations=1,
               progress=False)  # fmt: skip
    with cf.ThreadPoolExecutor(1) if pool else contextlib.nullcontext() as executor:
        result = bojax.minimize(train, SPACE, executor=executor, **run)
    assert len(refused) == len(calls) - 1 and "after" in refused[0]  # (a pool's segments)
    assert result.steps == 4 * 27  # the budget: no stale step charged
    if not pool:  # (a pool's trainings without checkpoints repeat steps, charged)
        assert sum(len(r["curve"]) for r in result.history) == result.steps
    assert all(value != -5.0 for r in result.history for _, value in r["curve"])


def test_freeze_thaw_writes_a_long_curve_in_flight_now_and_then_not_at_every_report(
    tmp_path, monkeypatch
):
    """Rewriting pending.json (the whole curve, fsynced) at every report was quadratic in
    the curve: 114 s for a 20,000-step training that takes 2 s under ASHA."""
    from bojax.bo.journal import Journal

    writes = []
    real = Journal.save_pending
    monkeypatch.setattr(Journal, "save_pending", lambda self, e: (writes.append(1), real(self, e)))

    def train(point, report):
        for step in range(1, 2001):
            if not report(step, final_value(point) + 1.0 / step):
                break
        return final_value(point)

    result = bojax.minimize(train, SPACE, max_step=2000, min_step=2000, initial=1, iterations=0,
                            early_stopping="freeze-thaw", progress=False, out=tmp_path)  # fmt: skip
    assert result.steps == 2000 and len(result.history[0]["curve"]) == 2000
    assert len(writes) < 20  # the segment's end, and once a PROGRESS_SECONDS


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [12, 21])
def test_a_freeze_thaw_run_stopped_between_checkpoints_resumes_as_if_never_stopped(
    tmp_path, kill_at
):
    """Ctrl-C between two checkpoints: a flush of the steps since the last checkpoint
    made the resume train them again (charged twice, a later record changed)."""
    calls = [-(10**9)]  # (the uninterrupted run first)

    def train(point, report, checkpoint=None):
        for step in range((checkpoint or 0) + 1, 10):
            calls[0] += 1
            if calls[0] == kill_at:
                raise KeyboardInterrupt
            saved = step if step % 3 == 0 else None
            if not report(step, (point["x"] - 0.3) ** 2 + 1.0 / step, checkpoint=saved):
                break
        return (point["x"] - 0.3) ** 2

    space = bojax.Space([Real("x", 0.0, 1.0)])
    run = dict(max_step=9, step_budget=70, initial=3, seed=1, early_stopping="freeze-thaw",
               surrogate="gp-map", progress=False)  # fmt: skip
    whole = bojax.minimize(train, space, **run)
    calls[0] = 0
    with pytest.raises(KeyboardInterrupt):
        bojax.minimize(train, space, out=tmp_path, **run)
    calls[0] = -(10**9)  # no more interruptions
    resumed = bojax.minimize(train, space, out=tmp_path, resume=True, **run)
    assert same_records(resumed.history, whole.history) and resumed.steps == whole.steps
    charged = [
        [r["diagnostics"].get("charged") for r in h] for h in (resumed.history, whole.history)
    ]
    assert charged[0] == charged[1]


def _batch_to_nine(points, reports):
    live = list(range(len(points)))
    for step in range(1, 10):
        for i in list(live):
            try:
                reports[i](step, points[i]["x"] + 1.0 / step, last=step == 9)
            except StopTraining:
                live.remove(i)
    return [p["x"] for p in points]


def _train_to_nine(point, report):
    return _batch_to_nine([point], [report])[0]


_train_to_nine.batch = _batch_to_nine


def test_a_returned_batch_killed_before_its_records_resumes_as_it_returned(tmp_path, monkeypatch):
    """pending.json keeps each design's record once its batch returned: killed before the
    batch's records, the resume journals them in its order (review: the complete design
    trained again, after the stopped one, and the run parted from the uninterrupted one);
    a hand-edited record is refused."""
    space = bojax.Space([Real("x", 0.0, 1.0)])
    run = dict(q=2, max_step=9, early_stopping="asha", initial=2, iterations=3,
               proposer="random", progress=False, seed=1)  # fmt: skip
    whole = bojax.minimize(_train_to_nine, space, **run)

    def killed(self, record):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(Journal, "append", killed)
        with pytest.raises(KeyboardInterrupt):
            bojax.minimize(_train_to_nine, space, out=tmp_path, **run)
    path = tmp_path / "pending.json"
    good = json.loads(path.read_text())
    assert [(e.get("over"), e["returned"]["status"]) for e in good] == [
        ("last", "ok"), ("scheduler", "stopped")
    ]  # fmt: skip
    for edit in [
        lambda r: r.update(status="done"),
        lambda r: r.update(y=0.5) if r["status"] == "stopped" else r.update(y="0.5"),
        lambda r: r.update(error="E"),
        lambda r: r.pop("error"),
    ]:
        entries = json.loads(json.dumps(good))
        for entry in entries:
            edit(entry["returned"])
        path.write_text(json.dumps(entries))
        with pytest.raises(JournalError, match="returned batch must hold"):
            bojax.minimize(_train_to_nine, space, out=tmp_path, resume=True, **run)
    path.write_text(json.dumps(good))
    resumed = bojax.minimize(_train_to_nine, space, out=tmp_path, resume=True, **run)
    assert same_records(resumed.history, whole.history) and resumed.steps == whole.steps


def _sometimes_checkpointing(passes: str, trained: list, kill_at: int | None = None):
    """A training of ``a + exp(-s)`` over 9 steps that takes a ``checkpoint`` and passes
    ``passes`` ones: "never", or "even" steps' only (it resumes from an older one than
    its curve's last); ``kill_at``: the objective step at which the driver dies."""

    def train(point, report, checkpoint=None):
        for step in range(1 + (checkpoint or 0), 10):
            trained.append(step)
            if len(trained) == kill_at:
                raise KeyboardInterrupt
            kept = step if passes == "even" and step % 2 == 0 else None
            if not report(step, point["a"] + math.exp(-step), checkpoint=kept):
                break
        return None

    return train


@pytest.mark.parametrize("passes", ["never", "even"])
@pytest.mark.parametrize("cut", [2, 3])
def test_a_killed_segment_the_resume_trains_again_is_charged_once(tmp_path, passes, cut):
    """The steps a resumed freeze-thaw segment trains again (past the checkpoint it
    continues from, or all of them without one) are charged when trained again, not also
    for the killed run: the resumed records are the uninterrupted run's (review BB: an
    objective taking a checkpoint and passing none was charged them twice)."""
    space = bojax.Space([bojax.Real("a", 0.0, 1.0)])
    settings = dict(max_step=9, early_stopping="freeze-thaw", step_budget=30, initial=2,
                    progress=False, seed=0, surrogate="gp-map")  # fmt: skip
    trained: list = []
    whole = bojax.minimize(_sometimes_checkpointing(passes, trained), space, **settings)
    assert whole.steps == 30
    done, kill_at = 0, None  # a thaw segment's ``cut``-th trained step
    for record in whole.history:
        charged = record["diagnostics"]["charged"]
        if kill_at is None and record["phase"] == "thaw" and charged >= 3:
            kill_at = done + cut
        done += charged
    assert kill_at is not None
    trained.clear()
    with pytest.raises(KeyboardInterrupt):
        bojax.minimize(_sometimes_checkpointing(passes, trained, kill_at), space,
                       out=tmp_path, **settings)  # fmt: skip
    (in_flight,) = json.loads((tmp_path / "pending.json").read_text())
    assert in_flight["charged"] >= 1  # the killed segment had charged steps
    resumed = bojax.minimize(_sometimes_checkpointing(passes, []), space, out=tmp_path,
                             resume=True, **settings)  # fmt: skip
    keys = ("x", "y", "status", "curve", "phase", "diagnostics")
    assert [{k: untimed(r)[k] for k in keys} for r in resumed.history] == [
        {k: untimed(r)[k] for k in keys} for r in whole.history
    ]
    assert resumed.steps == whole.steps


def test_a_killed_asha_training_resumed_from_an_older_checkpoint_is_charged_once(tmp_path):
    """A training continued from a checkpoint older than its journalled curve's last step
    trains the steps between again: charged then, not also for the killed run."""
    space = bojax.Space([bojax.Real("a", 0.0, 1.0)])
    settings = dict(max_step=9, early_stopping="asha", step_budget=30, initial=2,
                    progress=False, seed=0, surrogate="gp-map")  # fmt: skip
    whole = bojax.minimize(_sometimes_checkpointing("even", []), space, **settings)
    with pytest.raises(KeyboardInterrupt):
        bojax.minimize(_sometimes_checkpointing("even", [], 4), space, out=tmp_path,
                       **settings)  # fmt: skip
    (in_flight,) = json.loads((tmp_path / "pending.json").read_text())
    assert in_flight["curve"][-1][0] % 2 == 1  # past the even checkpoint it resumes from
    resumed = bojax.minimize(_sometimes_checkpointing("even", []), space, out=tmp_path,
                             resume=True, **settings)  # fmt: skip
    keys = ("x", "y", "status", "curve", "phase", "diagnostics")
    assert [{k: untimed(r)[k] for k in keys} for r in resumed.history] == [
        {k: untimed(r)[k] for k in keys} for r in whole.history
    ]
    assert resumed.steps == whole.steps


def test_a_paused_design_the_model_does_not_see_is_no_thaw_candidate():
    """Past MODEL_POINTS designs the model sees the best curves' last values: a paused
    design with a poor curve is left out, and priced as a new design at its point (its
    own curve ignored) it was thawed (review BJ)."""
    from bojax.bo import freezethaw

    space = bojax.Space([bojax.Real("a", 0.0, 1.0), bojax.Real("b", 0.0, 1.0)])
    settings = bojax.Settings(max_step=27, early_stopping="freeze-thaw", surrogate="gp-map")
    rng = np.random.default_rng(0)

    def design(u, curve, complete):
        return freezethaw.Design(np.asarray(u), space.from_unit(np.asarray(u)), curve, complete)

    designs = []
    for _ in range(freezethaw.MODEL_POINTS + 3):  # complete, 1 + |u|^2 + 1 / step
        u = rng.random(2) * 0.8
        designs.append(design(u, [[s, 1 + float(u @ u) + 1 / s] for s in (1, 3, 9, 27)], True))
    designs.append(design([0.5, 0.5], [[1, 1.7], [3, 1.6]], False))  # seen: among the best
    designs.append(design([0.0, 0.0], [[1, 4.9], [3, 4.7], [9, 4.1]], False))  # unseen
    shown = {j for j, _, _ in freezethaw.observations(designs, freezethaw.MODEL_POINTS)}
    assert len(designs) - 2 in shown and len(designs) - 1 not in shown
    calls = []
    model = freezethaw.FreezeThaw(space, settings)
    worth = model.worth
    model.worth = lambda d, going, pending=(): calls.append(list(going)) or worth(d, going, pending)
    decision = model.decide(designs, len(designs))
    assert calls == [[len(designs) - 2]] and decision.design != len(designs) - 1


@pytest.mark.slow  # (12 s: three step-wise runs with a journal)
@pytest.mark.parametrize(
    "scheduler, pool",
    [("asha", 2), ("freeze-thaw", None), ("freeze-thaw", 2)],
    ids=["asha-thread-pool", "freeze-thaw-inline", "freeze-thaw-thread-pool"],
)
def test_a_complete_training_keeps_its_final_checkpoint(tmp_path, scheduler, pool):
    """On an executor an ASHA training's checkpoint stayed at its first segment's end, and
    a freeze-thaw design's at its last pause: the complete one's is its final state
    (README; review CB)."""
    from bojax.bo.journal import Journal
    from bojax.bo.stepwise import load_checkpoint

    def train(point, report, checkpoint=None):
        for epoch in range(1 if checkpoint is None else checkpoint + 1, 10):
            if not report(epoch, point["w"] + 1.0 / epoch, checkpoint=epoch):
                break

    run = dict(max_step=9, early_stopping=scheduler, step_budget=40, initial=3, seed=0,
               proposer="random", progress=False, surrogate="gp-map")  # fmt: skip
    with cf.ThreadPoolExecutor(pool) if pool else contextlib.nullcontext() as executor:
        result = bojax.minimize(train, SPACE, executor=executor, out=tmp_path, **run)
    complete = [r for r in result.history if r["status"] == "ok"]
    assert complete
    for record in complete:
        design = int(record["diagnostics"].get("design", record["proposal"]))  # (freeze-thaw's)
        saved = load_checkpoint(Journal(tmp_path), design, 9)
        assert saved is not None and saved.step == saved.state == 9, (design, saved)
