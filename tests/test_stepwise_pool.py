"""Step-wise trainings as segments on executors and in isolated processes (issue 40)."""

from __future__ import annotations

import concurrent.futures as cf
import json
import threading
import time

import pytest
from test_stepwise import SPACE, final_value, make_train, resumable

import bojax
from bojax.bo import schedulers
from bojax.bo.segments import run_segment

ASHA = dict(max_step=27, early_stopping="asha", surrogate="gp-map", step_budget=200)
KEYS = ("x", "u", "y", "status", "curve", "phase")


def same_records(a, b):
    return [{k: r[k] for k in KEYS} for r in a] == [{k: r[k] for k in KEYS} for r in b]


def test_a_segment_records_the_steps_past_the_last_and_pauses_at_until():
    train = resumable(max_step=9)
    segment = run_segment(train, {"lr": 1e-3, "w": 0.3}, 3, 9, 9, checkpoint=3)
    assert [s for s, _ in segment.curve] == [4, 5, 6, 7, 8, 9]
    assert segment.status == "complete" and segment.charged == 6 and segment.checkpoint == 9
    paused = run_segment(train, {"lr": 1e-3, "w": 0.3}, 0, 3, 9)
    assert paused.status == "paused" and [s for s, _ in paused.curve] == [1, 2, 3]
    # Without a checkpoint parameter the training starts again: charged, not recorded.
    again = run_segment(make_train(9), {"lr": 1e-3, "w": 0.3}, 3, 6, 9, checkpoint=3)
    assert [s for s, _ in again.curve] == [4, 5, 6] and again.charged == 6
    broken = run_segment(lambda point, report: 1 / 0, {"lr": 1e-3, "w": 0.3}, 0, 3, 9)
    assert broken.status == "failed" and broken.error.startswith("ZeroDivisionError")


def test_one_worker_makes_the_records_of_the_inline_run():
    inline = bojax.minimize(resumable(), SPACE, progress=False, **ASHA)
    with cf.ThreadPoolExecutor(1) as pool:
        pooled = bojax.minimize(resumable(), SPACE, progress=False, executor=pool, **ASHA)
    assert same_records(inline.history, pooled.history)
    assert pooled.steps == inline.steps == 200
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
    assert len(trained) == len(set(trained)) == result.steps == 200
    assert sum(r["diagnostics"]["charged"] for r in result.history) == 200
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
    assert result.steps == sum(r["diagnostics"]["charged"] for r in result.history) == 200
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


def test_a_pooled_run_killed_mid_training_resumes_and_restarts_what_was_in_flight(tmp_path):
    whole = bojax.minimize(resumable(), SPACE, progress=False, out=tmp_path / "a", **ASHA)
    reports = []

    def dies(point, report, checkpoint=None):
        def dying(step, value, checkpoint=None):
            reports.append(step)
            if len(reports) > 120:
                raise KeyboardInterrupt  # the driver dies mid-training
            report(step, value, checkpoint=checkpoint)

        return resumable()(point, dying, checkpoint)

    with cf.ThreadPoolExecutor(1) as pool, pytest.raises(KeyboardInterrupt):
        bojax.minimize(dies, SPACE, progress=False, executor=pool, out=tmp_path / "b", **ASHA)
    pending = tmp_path / "b" / "pending.json"
    saved = pending.read_text()
    with cf.ThreadPoolExecutor(1) as pool:
        resumed = bojax.minimize(
            resumable(), SPACE, progress=False, executor=pool, out=tmp_path / "b",
            resume=True, **ASHA,
        )  # fmt: skip
    # The design in flight trained again from its first step (the steps it had trained
    # died with the driver, unjournalled): the uninterrupted run's records.
    restarted = [e["proposal"] for e in json.loads(saved)]
    assert len(restarted) == 1 and restarted[0] in [r["proposal"] for r in resumed.history]
    assert same_records(resumed.history, whole.history)
    assert resumed.steps == 200


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
