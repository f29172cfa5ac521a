"""A run's wall-clock budget (``time_budget``), and parallel step-wise journals, whose
trainings end out of order, read back and resumed."""

from __future__ import annotations

import concurrent.futures as cf
import json
import time

import pytest

import bojax
from bojax.bo.journal import Journal
from bojax.parameters import Real

SPACE = bojax.Space([Real("lr", 1e-4, 1e-1, log=True), Real("w", 0.0, 1.0)])


def final_value(point) -> float:
    return (point["w"] - 0.3) ** 2 + 0.1 * abs(point["lr"] - 0.01)


def slow(point) -> float:
    time.sleep(0.1)
    return final_value(point)


def steps(log: list | None = None, max_step: int = 9):
    """A checkpointed training whose steps take longer for larger ``w`` (so parallel
    trainings end out of order); ``log`` gets ``(w, step)`` for every step trained."""

    def train(point, report, checkpoint=None):
        for step in range(1 + (checkpoint or 0), max_step + 1):
            time.sleep(0.004 * (1 + 4 * point["w"]))
            if log is not None:
                log.append((point["w"], step))
            report(step, final_value(point) + 1.0 / step, checkpoint=step)
        return final_value(point)

    return train


@pytest.mark.filterwarnings("ignore:.*journalled for the objective")  # (a wrapper)
def test_a_time_budget_stops_issuing_points_and_a_resume_finishes_the_run(tmp_path):
    settings = dict(initial=12, iterations=0, seed=3, progress=False, out=tmp_path)
    cut = bojax.minimize(slow, SPACE, time_budget=0.35, **settings)
    assert 1 <= len(cut.history) < 12  # 0.1 s each: it stopped well short of 12
    assert cut.stopped.startswith("time_budget of 0.35 s spent after")
    assert "resume the run" in cut.stopped
    summary = tmp_path / "summary.json"
    assert json.loads(summary.read_text())["stopped"] == cut.stopped

    def interrupted(point):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # a resume killed in its turn
        bojax.minimize(interrupted, SPACE, resume=True, **settings)
    assert not summary.exists()  # so `bojax show` does not call the run finished
    whole = bojax.minimize(slow, SPACE, resume=True, **settings)  # no budget: to the end
    assert len(whole.history) == 12 and whole.stopped is None
    assert whole.history[: len(cut.history)] == cut.history  # nothing lost or repeated
    fresh = bojax.minimize(final_value, SPACE, **{**settings, "out": tmp_path / "fresh"})
    assert [r["x"] for r in whole.history] == [r["x"] for r in fresh.history]


def test_a_spent_time_budget_still_finishes_one_evaluation():
    result = bojax.minimize(slow, SPACE, initial=5, iterations=0, time_budget=1e-9, progress=False)
    assert len(result.history) == 1 and "time_budget" in result.stopped


@pytest.mark.parametrize(
    "early_stopping",
    ["asha", pytest.param("freeze-thaw", marks=pytest.mark.slow)],  # 15-25 s: 26 fits
)
def test_a_parallel_step_wise_journal_ending_out_of_order_reads_back_and_resumes(
    tmp_path, monkeypatch, early_stopping
):
    from bojax.bo import freezethaw

    fits, worth = [], freezethaw.FreezeThaw.worth
    monkeypatch.setattr(
        freezethaw.FreezeThaw, "worth", lambda self, *a, **k: fits.append(1) or worth(self, *a, **k)
    )
    settings = dict(
        max_step=9, eta=3, early_stopping=early_stopping, surrogate="gp-map", initial=4,
        step_budget=60, progress=False, out=tmp_path,
    )  # fmt: skip
    with cf.ThreadPoolExecutor(3) as pool:
        run = bojax.minimize(steps(), SPACE, executor=pool, **settings)
        proposals = [r["proposal"] for r in run.history]
        assert proposals != sorted(proposals)  # the case: trainings ended out of order
        records = Journal(tmp_path).read(space=SPACE)
        assert [r["iteration"] for r in records] == list(range(len(records)))
        assert len(set(proposals)) == len(proposals)
        fits.clear()
        again = bojax.minimize(steps(), SPACE, executor=pool, resume=True, **settings)
    assert again.history == records and again.steps == run.steps == 60
    # Freeze-thaw keeps its chains as it decides (sampler.json): a resume refits only the
    # records journalled after the last decision, one per worker at most (all 24 before).
    assert len(fits) <= 3


KEYS = ("proposal", "x", "u", "y", "status", "curve", "phase")


@pytest.mark.filterwarnings("ignore:.*journalled for the objective")  # (a wrapper)
def test_a_time_budget_keeps_a_paused_training_open_and_a_resume_continues_it(
    tmp_path, monkeypatch
):
    from types import SimpleNamespace

    from bojax.bo import deadline

    settings = dict(
        max_step=9, eta=3, early_stopping="asha", surrogate="gp-map", initial=4,
        step_budget=60, progress=False, proposer="random",
    )  # fmt: skip
    with cf.ThreadPoolExecutor(1) as pool:  # one worker: one order of events
        whole = bojax.minimize(steps(), SPACE, executor=pool, **settings)
    # A design that went on past milestone 3, after others had ended.
    promoted = next(r for r in whole.history[2:] if r["curve"][-1][0] > 3)
    skip = [0.0]  # the clock's jump: the time budget runs out at that design's step 3
    monkeypatch.setattr(
        deadline, "time", SimpleNamespace(perf_counter=lambda: time.perf_counter() + skip[0])
    )
    trained: list = []
    train = steps(trained)

    def clocked(point, report, checkpoint=None):
        def report_at(step, value, checkpoint=None):
            if point == promoted["x"] and step == 3:
                skip[0] = 1e9
            return report(step, value, checkpoint=checkpoint)

        return train(point, report_at, checkpoint)

    with cf.ThreadPoolExecutor(1) as pool:
        cut = bojax.minimize(
            clocked, SPACE, executor=pool, out=tmp_path, time_budget=3600.0, **settings
        )
        assert "time_budget of 3600 s spent" in cut.stopped and cut.steps < 60
        (kept,) = json.loads((tmp_path / "pending.json").read_text())  # paused, open
        assert kept["x"] == promoted["x"] and kept["curve"][-1][0] == 3
        resumed = bojax.minimize(train, SPACE, executor=pool, out=tmp_path, resume=True, **settings)
    assert resumed.steps == 60 and resumed.stopped is None
    rows = [[r[k] for k in KEYS] for r in resumed.history]
    assert rows == [[r[k] for k in KEYS] for r in whole.history]
    assert len(trained) == 60  # it continued from its checkpoint: no step trained twice


def _proposer(kind: str):
    """``(owner, name)`` of what takes a run's proposals or decisions, with its fit."""
    from bojax.bo import driver, freezethaw, stepwise

    return {
        "plain": (driver, "ask_batch"),
        "asha": (stepwise.StepRun, "begin"),
        "asha-batch": (stepwise.StepRun, "begin"),
        "freeze-thaw": (freezethaw.FreezeThaw, "decide"),
    }[kind]


@pytest.mark.filterwarnings("ignore:.*journalled for the objective")  # (a wrapper)
@pytest.mark.parametrize("kind", ["plain", "asha", "asha-batch", "freeze-thaw"])
@pytest.mark.parametrize("pool", [None, "threads"])
def test_nothing_starts_after_a_fit_that_outlasts_the_time_budget(
    tmp_path, monkeypatch, kind, pool
):
    """The budget was read before the fit only: a fit that outlasted it went on to start
    the evaluation, training or segment it chose (a fit of 2.6 s past a 1 s budget; review
    BM). What it chose is kept for the resume, which ends as the uninterrupted run."""
    from types import SimpleNamespace

    from bojax.bo import deadline

    if kind == "asha-batch" and pool is not None:
        pytest.skip("a batch(points, reports) trainer is called without an executor")
    if kind == "plain":
        settings = dict(initial=3, iterations=3, surrogate="gp-map", seed=1, progress=False)
        objective = final_value
    else:
        settings = dict(max_step=9, eta=3, early_stopping=kind.split("-batch")[0],
                        surrogate="gp-map", initial=3, progress=False,
                        step_budget=24 if kind == "freeze-thaw" else 40)  # fmt: skip
        objective = steps()

    def run(folder, **more):
        if pool is None:
            return bojax.minimize(objective_, SPACE, out=folder, **settings, **more)
        with cf.ThreadPoolExecutor(1) as threads:
            return bojax.minimize(objective_, SPACE, executor=threads, out=folder, **settings,
                                  **more)  # fmt: skip

    late: list = []
    skip = [0.0]  # the clock's jump: the budget runs out during the fifth fit

    def plain(point):
        late.append(skip[0] > 0)
        return objective(point)

    def train(point, report, checkpoint=None):
        late.append(skip[0] > 0)
        return objective(point, report, checkpoint)

    def batch(points, reports):  # one after another: the call, not the vmap, is the case
        from bojax.bo.stepwise import StopTraining

        returned = []
        for point, report in zip(points, reports, strict=True):
            try:
                returned.append(train(point, report))
            except StopTraining:
                returned.append(None)
        return returned

    objective_ = plain if kind == "plain" else train
    if kind == "asha-batch":
        train.batch = batch
        settings["q"] = 2

    whole = run(tmp_path / "whole")
    monkeypatch.setattr(
        deadline, "time", SimpleNamespace(perf_counter=lambda: time.perf_counter() + skip[0])
    )
    owner, name = _proposer(kind)
    fit, calls = getattr(owner, name), []

    def outlasting(*args, **kwargs):
        chosen = fit(*args, **kwargs)
        calls.append(1)
        if len(calls) == 5:
            skip[0] = 1e9
        return chosen

    monkeypatch.setattr(owner, name, outlasting)
    late.clear()
    cut = run(tmp_path / "cut", time_budget=3600.0)
    assert "time_budget of 3600 s spent" in cut.stopped
    assert late and not any(late)  # nothing started once the budget was spent
    if kind == "plain":
        assert "1 proposal(s) made as it ran out are kept in pending.json" in cut.stopped
    monkeypatch.setattr(owner, name, fit)
    skip[0] = 0.0
    resumed = run(tmp_path / "cut", resume=True)
    assert resumed.stopped is None
    keys = KEYS[:-2] if kind == "plain" else KEYS  # (no curves, no phase)
    assert [[r[k] for k in keys] for r in resumed.history] == [
        [r[k] for k in keys] for r in whole.history
    ]


def test_a_budget_spent_with_proposals_queued_after_another_stop_ends_the_run(monkeypatch):
    """An inline batch whose first evaluation reached max_failures, the budget then spent
    with its second one queued: the loop went round forever, starting nothing (review
    BR). It ends with the first reason and starts nothing after the budget."""
    from bojax.bo import driver

    passes, out_of_time = [0], driver._Run._out_of_time

    def counted(self, state):
        passes[0] += 1
        if passes[0] > 1000:
            raise RuntimeError("the driver's loop goes round without end")
        return out_of_time(self, state)

    monkeypatch.setattr(driver._Run, "_out_of_time", counted)
    calls: list = []

    def objective(point):
        calls.append(point)
        time.sleep(0.4)  # past the budget: the next one must not start
        return float("nan") if len(calls) == 1 else final_value(point)

    from bojax.errors import ObjectiveError

    with pytest.raises(ObjectiveError, match="max_failures=1"):  # (nothing succeeded)
        bojax.minimize(objective, SPACE, initial=4, iterations=2, q=2, max_failures=1,
                       time_budget=0.3, progress=False)  # fmt: skip
    assert len(calls) == 1


@pytest.mark.filterwarnings("ignore:.*journalled for the objective")  # (a wrapper)
def test_a_resume_fills_the_slot_its_reissued_proposal_leaves_free(tmp_path, monkeypatch):
    """A run cut with one proposal kept, resumed with two workers: the driver waited for
    the re-issued evaluation before asking for the next, so the resumed run asked one
    evaluation late and its journal parted from the uninterrupted run's (review BS)."""
    import threading
    from types import SimpleNamespace

    from bojax.bo import deadline, driver

    settings = dict(initial=3, iterations=4, surrogate="gp-map", seed=1, progress=False)
    skip, asked, ask = [0.0], [], driver.ask_batch

    def outlasting(*args, **kwargs):
        chosen = ask(*args, **kwargs)
        asked.append(1)
        if len(asked) == 5:
            skip[0] = 1e9
        return chosen

    monkeypatch.setattr(
        deadline, "time", SimpleNamespace(perf_counter=lambda: time.perf_counter() + skip[0])
    )
    monkeypatch.setattr(driver, "ask_batch", outlasting)
    with cf.ThreadPoolExecutor(1) as pool:
        cut = bojax.minimize(final_value, SPACE, executor=pool, out=tmp_path, time_budget=3600.0,
                             **settings)  # fmt: skip
    assert "1 proposal(s) made as it ran out are kept" in cut.stopped
    monkeypatch.setattr(driver, "ask_batch", ask)
    second, waited, calls = threading.Event(), [], []

    def objective(point):
        calls.append(point)
        if len(calls) == 1:  # the re-issued one: the next must start beside it
            waited.append(second.wait(30))
        else:
            second.set()
        return final_value(point)

    with cf.ThreadPoolExecutor(2) as pool:
        bojax.minimize(objective, SPACE, executor=pool, out=tmp_path, resume=True, q=2,
                       **settings)  # fmt: skip
    assert waited == [True]
