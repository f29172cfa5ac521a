"""Freeze-thaw: trainings paused and thawed by a GP over (design, step) (issue 40)."""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time

import numpy as np
import pytest
from curves import SPACE, final_value, make_train, resumable, same_records

import bojax

FREEZE_THAW = dict(max_step=27, early_stopping="freeze-thaw", surrogate="gp-map")


def designs_of(history):
    curves: dict[int, list] = {}
    for record in history:
        curves.setdefault(record["diagnostics"]["design"], []).extend(record["curve"])
    return curves


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


def test_freeze_thaw_without_checkpoints_retrains_and_charges_the_repeated_steps():
    result = bojax.minimize(make_train(), SPACE, step_budget=120, progress=False, **FREEZE_THAW)
    curves = designs_of(result.history)
    recorded = sum(len(c) for c in curves.values())
    charged = sum(r["diagnostics"]["charged"] for r in result.history)
    assert charged == result.steps == 120 and recorded < charged  # thaws started over
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


def test_freeze_thaw_expected_improvement_matches_the_closed_form():
    from scipy.stats import norm

    from bojax.bo.freezethaw import _expected_improvement

    mean = np.array([[0.2, 1.0, -0.5], [0.4, 0.8, -0.1]])
    var = np.array([[0.3, 0.01, 1.0], [0.1, 0.2, 0.5]])
    sd = np.sqrt(var)
    z = (0.1 - mean) / sd
    expected = ((0.1 - mean) * norm.cdf(z) + sd * norm.pdf(z)).mean(axis=0)
    np.testing.assert_allclose(_expected_improvement(mean, var, 0.1), expected, rtol=1e-10)


def test_a_killed_freeze_thaw_run_resumes_to_the_uninterrupted_runs_records(tmp_path):
    settings = dict(step_budget=150, **FREEZE_THAW)
    whole = bojax.minimize(resumable(), SPACE, progress=False, out=tmp_path / "a", **settings)
    reports = []

    def dies(point, report, checkpoint=None):
        def dying(step, value, checkpoint=None):
            reports.append(step)
            if len(reports) > 90:
                raise KeyboardInterrupt
            report(step, value, checkpoint=checkpoint)

        return resumable()(point, dying, checkpoint)

    with pytest.raises(KeyboardInterrupt):
        bojax.minimize(dies, SPACE, progress=False, out=tmp_path / "b", **settings)
    assert (tmp_path / "b" / "checkpoints").is_dir()
    resumed = bojax.minimize(
        resumable(), SPACE, progress=False, out=tmp_path / "b", resume=True, **settings
    )
    keys = ("x", "y", "status", "curve", "phase", "diagnostics")
    assert all(r["decision_seconds"] >= 0 for r in resumed.history)
    assert [{k: r[k] for k in keys} for r in resumed.history] == [
        {k: r[k] for k in keys} for r in whole.history
    ]
