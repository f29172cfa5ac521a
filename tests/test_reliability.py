"""Runs that survive their objective: evaluations in a process of their own (timeouts,
crashes, kills), evaluations written down as started before they start (a design that
kills the driver is retried a bounded number of times, then recorded as failed), the run
folder's lock, objective returns that cannot be numbers, and `bojax show` of an
untrusted folder. Real subprocesses and real signals throughout."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import errno
import fractions
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import bojax
from bojax.bo import isolation
from bojax.bo.evaluation import evaluate
from bojax.bo.isolation import PREFIX, _remove_orphaned_folders, evaluate_isolated
from bojax.bo.journal import Journal
from bojax.bo.repair import repair
from bojax.bo.runs import load_run
from bojax.cli import app
from bojax.errors import (
    JournalError,
    ObjectiveError,
    RunFolderError,
    RunLockedError,
    SettingsError,
    SpaceDefinitionError,
)
from bojax.parameters import Categorical
from bojax.spaces import Integer, Real, Space

SPACE = Space([Real("x", 0.0, 1.0)])
FAST = dict(surrogate="gp-map", num_candidates=64, progress=False)


# -- evaluations in a process of their own -------------------------------------------------
def test_an_isolated_evaluation_returns_what_the_objective_returns_or_raises():
    assert evaluate_isolated(lambda p: p["x"] ** 2, {"x": 3.0}) == (9.0, None)

    def raises(p):
        raise ValueError(f"bad x {p['x']}")

    y, why = evaluate_isolated(raises, {"x": 1.0})
    assert math.isnan(y) and why == "ValueError: bad x 1.0"


def _kill_myself(p):
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


def _segfault(p):
    import ctypes

    ctypes.string_at(0)


def _exit_3(p):
    import os

    os._exit(3)


@pytest.mark.parametrize(
    ("objective", "reason"),
    [
        (_kill_myself, "killed by SIGKILL (out of memory?)"),
        (_segfault, "killed by SIGSEGV"),
        (_exit_3, "exited with status 3 before returning"),
    ],
)
def test_a_crash_of_an_isolated_evaluation_is_a_failure_with_its_reason(objective, reason):
    y, why = evaluate_isolated(objective, {"x": 0.5})
    assert math.isnan(y) and reason in why, why


def test_a_hanging_evaluation_is_killed_at_its_timeout_with_what_it_started(tmp_path):
    marker = tmp_path / "child.pid"

    def hangs(p):
        import subprocess
        import time

        child = subprocess.Popen(["sleep", "300"])  # a data loader, say
        marker.write_text(str(child.pid))
        time.sleep(300)

    tick = time.monotonic()
    y, why = evaluate_isolated(hangs, {"x": 0.5}, timeout=4.0)
    assert math.isnan(y) and why == "timed out after 4 s"
    assert time.monotonic() - tick < 30
    grandchild = int(marker.read_text())
    time.sleep(0.2)
    assert not _alive(grandchild)  # killed with its whole session


def _starts_a_loader(marker: str, then: str):
    def objective(p):
        import os
        import signal
        import subprocess

        child = subprocess.Popen(["sleep", "300"])  # a data-loader worker, say
        with open(marker, "w") as out:
            out.write(str(child.pid))
        if then == "crash":
            os.kill(os.getpid(), signal.SIGKILL)  # killed for memory
        return p["x"]

    return objective


@pytest.mark.parametrize("then", ["return", "crash"])
def test_what_an_isolated_evaluation_started_ends_with_it(tmp_path, then):
    """Only a timeout killed the child's session: a crashed, OOM-killed or even
    successful evaluation left its loader re-parented to init and running (review BP)."""
    marker = tmp_path / "child.pid"
    y, why = evaluate_isolated(_starts_a_loader(str(marker), then), {"x": 0.5})
    assert (y == 0.5) if then == "return" else "SIGKILL" in why
    grandchild = int(marker.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def _hang_for_an_hour():
    time.sleep(3600)


def test_an_evaluation_whose_driver_died_while_it_started_ends_itself(tmp_path):
    """The child learns its driver's pid from the driver: a driver killed during the
    child's seconds of imports left it re-parented to init and running (review)."""
    import cloudpickle

    gone = subprocess.Popen(["true"])
    gone.wait()  # the driver, killed before the child's first line
    folder = tmp_path / "task"
    folder.mkdir()
    (folder / "task.pkl").write_bytes(cloudpickle.dumps((_hang_for_an_hour, ())))
    child = subprocess.Popen(
        [sys.executable, "-m", "bojax.bo.isolation", str(folder / "task.pkl"),
         str(folder / "outcome.pkl"), str(gone.pid)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        start_new_session=True,
    )  # fmt: skip
    try:
        assert child.wait(timeout=60) != 0
    finally:
        child.kill()
    assert not folder.exists()


def _holds_the_gil(marker: str):
    Path(marker).write_text(str(os.getpid()))
    sum(range(10**15))  # one C call: no other thread of this process runs meanwhile


def test_an_evaluation_holding_the_gil_ends_with_its_killed_driver(tmp_path):
    """The evaluation's own thread watched for its driver's death, but no thread runs
    while the evaluation holds the GIL in C: it ran on after its driver was SIGKILLed.
    The driver's watchdog process ends it, and its task folder goes."""
    import cloudpickle

    marker, scratch = tmp_path / "child.pid", tmp_path / "scratch"
    scratch.mkdir()
    (tmp_path / "task.pkl").write_bytes(cloudpickle.dumps((_holds_the_gil, (str(marker),))))
    driver = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import cloudpickle
            from bojax.bo.isolation import run_isolated
            with open({str(tmp_path / "task.pkl")!r}, "rb") as sent:
                run_isolated(*cloudpickle.loads(sent.read()))
        """)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
             "TMPDIR": str(scratch)},
    )  # fmt: skip
    child = None
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # well into the C call
        child = int(marker.read_text())
        driver.kill()
        driver.wait()
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
        assert not list(scratch.iterdir())  # its task folder
    finally:
        driver.kill()
        if child is not None and _alive(child):
            os.killpg(child, signal.SIGKILL)


def test_an_evaluation_whose_driver_died_before_its_watchdog_never_runs(tmp_path):
    """A driver killed between starting the evaluation and its watchdog: the evaluation's
    thread saw it, but the GIL-holding task it raced took the GIL for good (review CU).
    The task now waits for the driver's word that the watchdog runs."""
    import cloudpickle

    marker, scratch = tmp_path / "child.pid", tmp_path / "scratch"
    scratch.mkdir()
    (tmp_path / "task.pkl").write_bytes(cloudpickle.dumps((_holds_the_gil, (str(marker),))))
    driver = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(f"""
            import os, signal, cloudpickle
            from bojax.bo import isolation
            def killed(child, folder):
                with open({str(tmp_path / "evaluation.pid")!r}, "w") as out:
                    out.write(str(child))
                os.kill(os.getpid(), signal.SIGKILL)
            isolation._start_watchdog = killed
            with open({str(tmp_path / "task.pkl")!r}, "rb") as sent:
                isolation.run_isolated(*cloudpickle.loads(sent.read()))
        """)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
             "TMPDIR": str(scratch)},
        timeout=120,
    )  # fmt: skip
    assert driver.returncode == -signal.SIGKILL
    child = int((tmp_path / "evaluation.pid").read_text())
    try:
        deadline = time.monotonic() + 60
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
        assert not marker.exists()  # the task never ran
        assert not list(scratch.iterdir())
    finally:
        if _alive(child):
            os.killpg(child, signal.SIGKILL)


def _marks(marker: str):
    Path(marker).write_text("ran")


def test_an_evaluation_waits_for_the_drivers_word_before_its_task(tmp_path):
    import cloudpickle

    from bojax.bo.isolation import WATCHED

    folder = tmp_path / "task"
    folder.mkdir()
    marker = tmp_path / "ran"
    (folder / "task.pkl").write_bytes(cloudpickle.dumps((_marks, (str(marker),))))
    child = subprocess.Popen(
        [sys.executable, "-m", "bojax.bo.isolation", str(folder / "task.pkl"),
         str(folder / "outcome.pkl"), str(os.getpid()), WATCHED],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        start_new_session=True,
    )  # fmt: skip
    try:
        time.sleep(2)  # its imports take well under a second alone
        assert not marker.exists() and child.poll() is None
        (folder / WATCHED).touch()
        assert child.wait(timeout=60) == 0
        assert marker.read_text() == "ran"
    finally:
        child.kill()


def test_an_evaluation_that_cannot_be_told_to_start_fails_and_leaves_nothing(tmp_path, monkeypatch):
    from bojax.bo.isolation import WATCHED

    marker = tmp_path / "ran"
    touch = Path.touch

    def full_disk(path, *args, **kwargs):
        if path.name == WATCHED:
            raise OSError(28, "No space left on device")
        return touch(path, *args, **kwargs)

    monkeypatch.setattr(Path, "touch", full_disk)
    y, why = evaluate_isolated(lambda p: _marks(str(marker)), {"x": 1.0})
    assert math.isnan(y) and "could not be told to start" in why and "No space" in why
    assert not marker.exists()


def _reaps_every_child(p):
    # Kept referenced: a dropped Popen polls its process at once, and reaps it if done.
    started = subprocess.Popen(["true"])  # noqa: F841
    reaped = 0
    while True:  # a "wait for all children" loop
        try:
            os.waitpid(-1, 0)
            reaped += 1
        except ChildProcessError:
            return float(reaped)


def test_an_evaluation_that_reaps_all_its_children_returns():
    """The watchdog is the driver's child, not the evaluation's: an evaluation that waits
    for all its children would have waited for it forever (review CT)."""
    assert evaluate_isolated(_reaps_every_child, {"x": 1.0}, timeout=30) == (1.0, None)


def test_task_folders_of_killed_processes_are_removed_and_live_ones_kept(tmp_path, monkeypatch):
    from bojax.bo.isolation import _owner

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()  # a driver SIGKILLed after its evaluation's child ended
    mine = f"{PREFIX}{_owner()}"
    (tmp_path / f"{mine}-{gone.pid}-abc").mkdir()
    (tmp_path / f"{mine}-{gone.pid}-abc" / "task.pkl").write_bytes(b"x")
    kept = [
        f"{mine}-{os.getpid()}-def",  # a running process's evaluation
        f"{PREFIX}0123456789-{gone.pid}-ghi",  # another container's: its pids are not ours
        f"{PREFIX}old",  # no owner or pid in its name: not ours to judge
    ]
    for name in kept:
        (tmp_path / name).mkdir()
    _remove_orphaned_folders.__wrapped__()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)


def test_an_error_text_is_cut_and_a_message_that_raises_is_named_by_its_type():
    from bojax.bo.evaluation import ERROR_LIMIT, failure_text

    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("cannot format the message")

    assert failure_text(Unprintable()) == "Unprintable (its message raised RuntimeError)"
    long = failure_text(ValueError("x" * 5_000_000))
    assert len(long) == ERROR_LIMIT and long.startswith("ValueError: xxx") and long.endswith("...")
    assert failure_text(SystemExit(3)) == "the objective called sys.exit(3)"
    assert failure_text(MemoryError()) == "MemoryError"  # not "MemoryError: "

    def raises_unprintable(p):
        raise Unprintable()

    with pytest.raises(ObjectiveError, match=r"Unprintable \(its message raised"):  # typed
        bojax.minimize(raises_unprintable, SPACE, **FAST, max_failures=2)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed and not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


# -- objective returns --------------------------------------------------------------------
class _BrokenFloat(float):
    def __float__(self):
        raise RuntimeError("no")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (10**400, "not a float"),
        ("1.0", "expected a number"),
        ([1.0, 2.0], "expected a number"),
        (np.array([1.0, 2.0]), "expected a number"),
        (None, "expected a number"),
        (True, "expected a number"),
        (math.inf, "returned inf"),
        ("x" * 10_000, "..."),
    ],
)
def test_an_unusable_return_is_a_failure_with_a_short_reason_never_an_exception(value, reason):
    y, why = evaluate(lambda p: value, {"x": 0.5})
    assert math.isnan(y) and reason in why and len(why) < 400, why


def test_numbers_of_any_kind_are_accepted():
    for value, expected in [(fractions.Fraction(1, 4), 0.25), (np.float32(0.5), 0.5), (3, 3.0)]:
        assert evaluate(lambda p, v=value: v, {}) == (expected, None)
    assert evaluate(lambda p: np.array([[2.0]]), {}) == (2.0, None)


def test_a_run_survives_an_objective_returning_a_number_too_large_for_a_float():
    def objective(p):
        return 10**400 if p["x"] > 0.5 else p["x"]

    result = bojax.minimize(objective, SPACE, initial=6, iterations=0, **FAST)
    assert result.failures >= 1 and result.evaluations == 6
    assert all("not a float" in r["error"] for r in result.history if r["status"] == "failed")


# -- the run folder's lock ------------------------------------------------------------------
def test_a_second_run_in_a_locked_folder_is_refused_naming_the_holder(tmp_path):
    with Journal(tmp_path).lock():
        with pytest.raises(RunLockedError, match=f"pid {os.getpid()} on "):
            bojax.minimize(lambda p: p["x"], SPACE, initial=2, iterations=0, out=tmp_path, **FAST)
    assert not (tmp_path / "run.json").exists()  # the refused run wrote nothing


def test_the_lock_of_a_killed_process_is_not_stale(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from bojax.bo.journal import Journal
            held = Journal({str(tmp_path)!r}).lock()  # kept: a collected one unlocks
            held.__enter__()
            print("locked", flush=True)
            time.sleep(300)
        """)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError, match=f"pid {holder.pid} "):
            with Journal(tmp_path).lock():
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with Journal(tmp_path).lock():  # the kernel released it with its holder
        pass


def _ends_its_worker(p):
    os._exit(3)  # a crash in native code, say: the process pool is broken for good


@pytest.mark.slow  # a process pool of fresh Pythons
@pytest.mark.parametrize("stepwise", [False, True])
def test_a_process_pool_a_worker_broke_ends_the_run_with_a_typed_error(tmp_path, stepwise):
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # (fork and JAX's threads do not mix)
    out = tmp_path / "run"
    objective, settings = _ends_its_worker, dict(initial=2, iterations=1)
    if stepwise:
        objective = _train_and_end_its_worker
        settings = dict(max_step=3, early_stopping="asha", step_budget=6)
    # A plain run's design is journalled failed after its retry, run on a new pool by the
    # resume (the broken pool refused it: no attempt); a step-wise run's retry is spent.
    for resume in [False, True] if not stepwise else [False]:
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
            with pytest.raises(ObjectiveError, match="BrokenProcessPool"):  # typed, not raw
                bojax.minimize(
                    objective, SPACE, **FAST, **settings, executor=pool, out=out, resume=resume
                )
    records = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    assert records and all("BrokenProcessPool" in r["error"] for r in records)
    if not stepwise:
        assert "lost after 2 attempt(s)" in records[0]["error"]


def _train_and_end_its_worker(p, report):
    os._exit(3)


def test_an_unwritable_run_folder_is_a_typed_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(RunFolderError, match="cannot write the run folder"):
        bojax.minimize(lambda p: p["x"], SPACE, out=blocker / "run", **FAST)


# -- a design that kills the driver ----------------------------------------------------------
_DRIVER = """
import os, signal, sys
import bojax
from bojax.spaces import Integer, Real, Space

def objective(p):
    if p["x"] < 0.35:  # this design takes the whole process down (an OOM kill, say)
        os.kill(os.getpid(), signal.SIGKILL)
    return (p["x"] - 0.7) ** 2

out, isolate = sys.argv[1], sys.argv[2] == "isolate"
result = bojax.minimize(objective, Space([Real("x", 0.0, 1.0)]), initial=4, iterations=2,
                        surrogate="gp-map", num_candidates=64, progress=False, seed=1,
                        out=out, resume=os.path.exists(out), isolate=isolate)
print("finished", result.evaluations, result.failures)
"""


def _launches_until_finished(script: Path, out: Path, mode: str, limit: int) -> int:
    for launch in range(1, limit + 1):
        done = subprocess.run(
            [sys.executable, str(script), str(out), mode], capture_output=True, text=True
        )
        if done.returncode == 0:
            assert "finished 6" in done.stdout, done.stdout
            return launch
        assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    raise AssertionError(f"the run did not finish in {limit} launches")


@pytest.mark.slow  # several fresh Pythons that import JAX
def test_a_design_that_kills_the_driver_is_retried_then_recorded_as_failed(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    out = tmp_path / "run"
    # retries = 1: killed at its first start and at its one retry, recorded on the third
    # launch; every later killing design costs two launches more, never an endless loop.
    launches = _launches_until_finished(script, out, "inline", limit=12)
    records = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    died = [r for r in records if r["status"] == "failed"]
    assert died and all("the process died during this evaluation" in r["error"] for r in died)
    assert all(r["x"]["x"] < 0.35 for r in died)
    assert launches == 1 + 2 * len(died)
    assert [r["iteration"] for r in records] == list(range(6))


@pytest.mark.slow  # fresh Pythons that import JAX, one per evaluation
def test_with_isolate_a_design_that_kills_its_process_fails_alone(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    out = tmp_path / "run"
    assert _launches_until_finished(script, out, "isolate", limit=1) == 1
    records = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    failed = [r for r in records if r["status"] == "failed"]
    assert failed and all("killed by SIGKILL" in r["error"] for r in failed)
    assert all(r["x"]["x"] < 0.35 for r in failed)


_STARTS_A_TRAINING = """
import subprocess, sys, time
import bojax
from bojax.spaces import Real, Space

MARKER = sys.argv[1]  # (travels with the pickled objective)

def objective(p):  # a wrapper that runs the real training as a process of its own
    training = subprocess.Popen(["sleep", "300"])
    open(MARKER, "w").write(str(training.pid))
    time.sleep(300)

bojax.minimize(objective, Space([Real("x", 0.0, 1.0)]), initial=1, iterations=0,
               progress=False, isolate=True)
"""


@pytest.mark.slow  # a driver and an isolated evaluation, fresh Pythons that import JAX
def test_a_killed_driver_leaves_no_training_its_isolated_evaluation_started(tmp_path):
    script, marker = tmp_path / "driver.py", tmp_path / "training.pid"
    script.write_text(_STARTS_A_TRAINING)
    driver = subprocess.Popen([sys.executable, str(script), str(marker)])
    try:
        deadline = time.time() + 120
        while not (marker.exists() and marker.read_text()) and time.time() < deadline:
            time.sleep(0.2)
        training = int(marker.read_text())
        assert _alive(training)
    finally:
        driver.kill()
        driver.wait()
    deadline = time.time() + 10  # the evaluation notices within half a second
    while _alive(training) and time.time() < deadline:
        time.sleep(0.2)
    assert not _alive(training)


# -- bojax show of an untrusted folder ---------------------------------------------------------
def test_show_prints_markup_and_escape_sequences_as_text(tmp_path):
    space = Space([Categorical("[bold]choice", ["[/data]", "b"]), Real("x", 0.0, 1.0)])
    journal = Journal(tmp_path)
    journal.start({"space": space.to_dict(), "settings": {"surrogate": "gp-slice"}})
    error = "RuntimeError: [/data] \x1b]0;owned\x07\x1b[2J done"
    for n, (y, why) in enumerate([(1.0, None), (None, error)]):
        journal.append({
            "iteration": n, "proposal": n, "phase": "initial",
            "x": {"[bold]choice": "[/data]", "x": 0.5}, "u": [0.0, 0.5], "y": y,
            "status": "failed" if why else "ok", "error": why, "seconds": 0.1,
            "diagnostics": {},
        })  # fmt: skip
    result = CliRunner().invoke(app, ["show", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "[/data] \\x1b]0;owned\\x07\\x1b[2J done" in result.output
    assert "[bold]choice" in result.output


def tampered_run(folder: Path, settings=None, space=SPACE, records=4) -> Path:
    """A finished-looking run of ``records`` evaluations (all but the last successful), as
    a hand-edited ``run.json`` with ``settings`` would leave it."""
    journal = Journal(folder)
    settings = {"surrogate": "gp-map", **(settings or {})}
    journal.start({"space": space.to_dict(), "settings": settings})
    points = space.from_unit(space.sample(__import__("jax").random.key(0), records))
    for n, x in enumerate(points):
        failed = n == records - 1
        journal.append({
            "iteration": n, "proposal": n, "phase": "initial", "x": x,
            "u": [float(v) for v in space.to_unit(x)], "y": None if failed else float(n),
            "status": "failed" if failed else "ok", "error": "E" if failed else None,
            "seconds": 0.1, "diagnostics": {},
        })  # fmt: skip
    return folder


@pytest.fixture
def no_refit(monkeypatch):
    """Any refit fails the test: a tampered folder must be refused before the work."""

    def refit(*args, **kwargs):
        raise AssertionError("bojax plot started a refit")

    monkeypatch.setattr("bojax.bo.loop.fit_surrogate", refit)
    monkeypatch.setattr("bojax.bo.loop.fit_classifier", refit)


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"samples": 10**12}, "samples = 1000000000000 is more than bojax plot refits"),
        ({"burn_in": 10**9}, "burn_in = 1000000000 is more than"),
        ({"seed": 2**64}, "seed must be"),  # an OverflowError at the first key before
        ({"samples": "many"}, "samples must be"),
        ({"samples": True}, "samples must be"),
        ({"surrogate": "gp-nope"}, "unknown surrogate 'gp-nope'"),
        ({"num_candidatez": 5}, "unknown setting 'num_candidatez'"),  # a TypeError before
    ],
)
def test_plot_refuses_refit_settings_of_a_tampered_folder_before_any_work(
    tmp_path, no_refit, settings, key
):
    folder = tampered_run(tmp_path / "run", settings)
    result = CliRunner().invoke(app, ["plot", str(folder)], env={"COLUMNS": "300"})
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    text = result.output.replace("\n", "")
    assert f"{folder / 'run.json'}: " in text and key in text, text
    assert not (folder / "figures").exists()  # refused before the first figure


def test_plot_refuses_a_journal_longer_than_a_refit_takes(tmp_path, no_refit):
    from bojax.bo.runs import load_run
    from bojax.reports.run_figures import REFIT_LIMITS, refit_settings

    exact = {"exact_limit": None}  # (past exact_limit the refit is local, and takes more)
    run = load_run(tampered_run(tmp_path / "run", settings=exact, records=3))
    run = dataclasses.replace(run, records=run.records * (REFIT_LIMITS["evaluations"] // 3 + 1))
    with pytest.raises(JournalError, match="evaluations are more than bojax plot refits"):
        refit_settings(run)


@pytest.mark.parametrize(
    ("header", "summary", "message"),
    [
        ("[1, 2]", None, "run.json is corrupt: not a JSON object"),
        ('{"format": 1, "space": %s, "settings": [1, 2]}', None,
         "run.json: 'settings' is not an object"),
        ('{"format": 1, "space": {"parameters": "x"}, "settings": {}}', None,
         "run.json: 'space': not a"),
        ('{"format": 1, "settings": {}}', None, "run.json: 'space': not a serialised space"),
        ('{"format": 1, "space": {"parameters": [{"name": "x", "type": "real", "low": 1, '
         '"high": 0}]}}', None, "run.json: 'space': 'x': need low < high"),
        ('{"space": %s, "settings": {"seed": 1' + "0" * 5000 + "}}", None, "run.json is corrupt"),
        ('{"format": 1, "space": %s, "settings": {}}', "[]",
         "summary.json: expected a JSON object"),
    ],
)  # fmt: skip
def test_show_and_plot_name_the_file_and_key_of_a_run_json_that_is_no_header(
    tmp_path, header, summary, message
):
    folder = tampered_run(tmp_path / "run")
    text = header.replace("%s", json.dumps(SPACE.to_dict()))
    (folder / "run.json").write_text(text)
    if summary is not None:
        (folder / "summary.json").write_text(summary)
    for command in (["show", str(folder)], ["plot", str(folder), "--no-slices"]):
        result = CliRunner().invoke(app, command, env={"COLUMNS": "300"})
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
        assert message in result.output.replace("\n", ""), result.output


def test_plot_draws_a_bounded_number_of_panels_and_labels(tmp_path):
    """Figures grow with the parameters of the folder's space: 200 parameters drew 51
    rows of panels (1 000 cannot be allocated at all), 3 000 choices as many labels."""
    from PIL import Image

    from bojax.parameters import Ordinal
    from bojax.reports.figures import pyplot
    from bojax.reports.run_figures import _scale

    space = Space([Real(f"x{i}", 0.0, 1.0) for i in range(200)])
    folder = tampered_run(tmp_path / "run", space=space, records=3)
    result = CliRunner().invoke(app, ["plot", str(folder), "--no-slices"])
    assert result.exit_code == 0, result.output
    with Image.open(folder / "figures/parameters.png") as image:
        assert image.size[1] < 4000, image.size  # 12 rows of 4 panels
    fig, ax = pyplot().subplots()
    _scale(ax, Categorical("c", [f"choice {k}" for k in range(3000)]), "x")
    _scale(ax, Ordinal("o", tuple(range(3000))), "y")
    assert len(ax.get_xticks()) <= 40 and len(ax.get_yticks()) <= 40
    assert ax.get_xticklabels()[-1].get_text() == "choice 2999"
    pyplot().close(fig)


def _optimize_command(tmp_path: Path, file: str, *options: str) -> list[str]:
    """``bojax optimize FILE:objective`` over x in [0, 1], journalling to ``tmp_path/run``."""
    (tmp_path / "space.toml").write_text("[x]\ntype = 'real'\nlow = 0\nhigh = 1\n")
    return [
        sys.executable, "-m", "bojax.cli", "optimize", f"{tmp_path / file}:objective",
        "--space", str(tmp_path / "space.toml"), "--out", str(tmp_path / "run"), *options,
    ]  # fmt: skip


# -- a file objective on Dask workers ------------------------------------------------------------
@pytest.mark.slow  # a local Dask cluster of worker processes
def test_a_file_objective_runs_on_dask_workers_through_the_cli(tmp_path):
    """The workers cannot import ``bojax_user_train``: the objective must travel by value
    (it hung forever with 0 records while standard pickle sent it by reference)."""
    (tmp_path / "helper.py").write_text("def shift():\n    return 0.25\n")
    (tmp_path / "train.py").write_text(
        "from helper import shift\n\ndef objective(p):\n    return (p['x'] - shift()) ** 2\n"
    )
    out = tmp_path / "run"
    command = _optimize_command(
        tmp_path, "train.py", "--workers", "2", "--initial", "3", "--iterations", "1",
        "--surrogate", "gp-map", "--candidates", "64",
    )  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    records = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(r["status"] == "ok" for r in records), records


# -- an executor that never answers ------------------------------------------------------------
class _Forgetful:
    """An executor that silently drops the tasks of designs with x < 0.35 (a hung worker, a
    task its scheduler lost); the others run here, unisolated, to keep the test fast."""

    def __init__(self):
        self.dropped = 0

    def submit(self, fn, objective, point, *args):
        future = concurrent.futures.Future()
        if point["x"] < 0.35:
            self.dropped += 1
            return future  # never completes
        future.set_result(evaluate(objective, point))
        return future


@pytest.mark.slow
def test_an_evaluation_the_executor_never_answers_is_retried_then_recorded(monkeypatch):
    monkeypatch.setattr(isolation, "NO_ANSWER_GRACE", 0.05)
    monkeypatch.setattr(isolation, "STARTUP_SECONDS", 0.0)  # (no process starts here)
    executor, results = _Forgetful(), []
    run = threading.Thread(
        target=lambda: results.append(bojax.minimize(
            lambda p: (p["x"] - 0.7) ** 2, SPACE, executor=executor, q=2, timeout=0.05,
            initial=4, iterations=2, seed=3, **FAST,
        )),
        daemon=True,
    )  # fmt: skip
    run.start()
    run.join(timeout=60)
    assert results, "the driver is still waiting for an answer that never comes"
    (result,) = results
    lost = [r for r in result.history if r["status"] == "failed"]
    assert lost and all(r["x"]["x"] < 0.35 for r in lost)
    assert all("lost after 2 attempt(s)" in r["error"] for r in lost)
    assert all("gave no answer 0.1 s after" in r["error"] for r in lost)
    assert executor.dropped == 2 * len(lost)  # retries = 1: two submissions each
    assert result.evaluations == 6


class _ForgetfulSegments:
    """The same for a step-wise run's segments (``run_segment_isolated(timeout, train,
    point, ...)``, run here unisolated)."""

    _max_workers = 2

    def __init__(self):
        self.dropped = 0

    def submit(self, fn, timeout, train, point, *args):
        from bojax.bo.segments import run_segment

        future = concurrent.futures.Future()
        if point["x"] < 0.35:
            self.dropped += 1
            return future
        future.set_result(run_segment(train, point, *args))
        return future


@pytest.mark.slow  # 18 s and 26 s: step-wise runs waiting out dropped segments
@pytest.mark.parametrize("early_stopping", ["asha", "freeze-thaw"])
def test_a_segment_the_executor_never_answers_is_retried_then_its_design_fails(
    monkeypatch, early_stopping
):
    """The step-wise runs waited forever on a dropped segment, timeout or not (review)."""
    monkeypatch.setattr(isolation, "NO_ANSWER_GRACE", 0.05)
    monkeypatch.setattr(isolation, "STARTUP_SECONDS", 0.0)

    def train(point, report):
        for step in range(1, 10):
            report(step, (point["x"] - 0.7) ** 2 + 1 / step)
        return (point["x"] - 0.7) ** 2

    executor, results = _ForgetfulSegments(), []
    run = threading.Thread(
        target=lambda: results.append(bojax.minimize(
            train, SPACE, executor=executor, timeout=0.05, max_step=9,
            early_stopping=early_stopping, initial=4, iterations=1, seed=3, **FAST,
        )),
        daemon=True,
    )  # fmt: skip
    run.start()
    run.join(timeout=120)
    assert results, "the run is still waiting for a segment that never comes back"
    lost = [r for r in results[0].history if r["status"] == "failed"]
    assert lost and executor.dropped == 2 * len(lost)  # retries = 1
    assert all("gave no answer 0.1 s after the segment" in r["error"] for r in lost)


@pytest.mark.parametrize("stepwise", [False, True])
def test_a_dropped_task_is_given_up_while_others_keep_finishing(monkeypatch, stepwise):
    """The overdue check ran only when a wait returned nothing: while the other worker's
    tasks kept finishing, the dropped one held its worker until the run's end (review)."""
    monkeypatch.setattr(isolation, "NO_ANSWER_GRACE", 0.05)
    monkeypatch.setattr(isolation, "STARTUP_SECONDS", 0.0)
    submitted = []

    class DropsTheFirst:
        _max_workers = 2

        def submit(self, fn, *args):
            submitted.append(args)
            future = concurrent.futures.Future()
            if len(submitted) > 1:  # run here, unisolated: (timeout, task, ...) or evaluate's
                if stepwise:
                    from bojax.bo.segments import run_segment

                    future.set_result(run_segment(*args[1:]))
                else:
                    future.set_result(evaluate(*args[:2]))
            return future

    def value(point):
        time.sleep(0.02)
        return (point["x"] - 0.7) ** 2

    def train(point, report):
        for step in (1, 2):
            report(step, value(point))
        return value(point)

    run = dict(executor=DropsTheFirst(), timeout=0.05, initial=30, iterations=0, **FAST)
    if stepwise:
        result = bojax.minimize(train, SPACE, max_step=2, early_stopping="none", **run)
    else:
        result = bojax.minimize(value, SPACE, **run)
    first = submitted[0][2 if stepwise else 1]  # the dropped task's point
    again = [k for k, args in enumerate(submitted) if k and args[2 if stepwise else 1] == first]
    assert again and again[0] < len(submitted) - 5, (again, len(submitted))
    assert len(result.history) == 30


@pytest.mark.parametrize("stepwise", [False, True])
def test_work_queued_behind_the_executors_workers_is_not_given_up_for_waiting(
    monkeypatch, stepwise
):
    """With q above the workers, the answer limit counted from submission, so work that
    waited its turn in the executor's queue was given up as lost and run again (review).
    One worker, eight at once, 0.25 s each: the last waits 1.75 s, past the 1 s limit."""
    monkeypatch.setattr(isolation, "NO_ANSWER_GRACE", 0.05)
    monkeypatch.setattr(isolation, "STARTUP_SECONDS", 0.0)
    submitted = []

    class OneWorker(concurrent.futures.ThreadPoolExecutor):
        def __init__(self):
            super().__init__(max_workers=1)

        def submit(self, fn, *args):  # run here, unisolated
            submitted.append(args)
            if stepwise:
                from bojax.bo.segments import run_segment

                return super().submit(run_segment, *args[1:])
            return super().submit(evaluate, *args[:2])

    def value(point):
        time.sleep(0.25)
        return (point["x"] - 0.7) ** 2

    def train(point, report):
        y = value(point)
        report(1, y)
        return y

    run = dict(q=8, timeout=0.5, initial=8, iterations=0, **FAST)
    with OneWorker() as executor:
        if stepwise:
            result = bojax.minimize(
                train, SPACE, executor=executor, max_step=1, early_stopping="none", **run
            )
        else:
            result = bojax.minimize(value, SPACE, executor=executor, **run)
    assert [r["status"] for r in result.history] == ["ok"] * 8
    assert len(submitted) == 8  # none given up and handed over again
    if not stepwise:  # and what cost_aware learns is the evaluation, not its wait
        assert max(r["evaluation_seconds"] for r in result.history) < 0.75


def test_a_segment_that_answers_as_its_limit_passes_is_taken_not_given_up(monkeypatch):
    """The overdue check cancelled a future that had just completed, and the segment's
    steps were trained again (review)."""
    import types

    from bojax.bo import segments

    monkeypatch.setattr(isolation, "NO_ANSWER_GRACE", 0.0)
    monkeypatch.setattr(isolation, "STARTUP_SECONDS", 0.0)

    class Pooled(segments._Pooled):
        def _finish(self, future):
            self.running.pop(future)
            return {"outcome": future.exception() or future.result()}

    settings = types.SimpleNamespace(retries=1, timeout=0.01, isolated=True)
    pooled = Pooled(types.SimpleNamespace(_max_workers=2), 2, settings)
    late, dropped = concurrent.futures.Future(), concurrent.futures.Future()
    for future in (late, dropped):
        pooled.running[future] = 0
        pooled.clock.submitted(future)
        pooled.clock.began[future] -= 1.0  # both a second into their limit of 0.01 s
    late.set_result("nine steps")
    records = pooled._give_up_overdue()
    assert list(pooled.running) == [late]  # left to the next wait
    assert [type(r["outcome"]) for r in records] == [TimeoutError]
    from bojax.bo.evaluation import first_done

    assert first_done(pooled.running, pooled._until_overdue()) == {late}  # taken at once


@pytest.mark.parametrize("broken, journalled", [(False, False), (True, False), (False, True)])
def test_a_step_wise_run_on_a_pool_that_refuses_work_ends_saying_why(broken, journalled, tmp_path):
    """The refused first segment left its design queued with no curve, and ending the run
    stopped it at its last value: an IndexError (review). A pool shut down is none of the
    design's doing: no attempt counts; a broken one may be, and its retries are spent."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    pool.shutdown()
    if broken:
        pool.submit = _raises(concurrent.futures.BrokenExecutor("a worker died"))

    def train(point, report):
        report(1, point["x"])
        return point["x"]

    said = r"lost after 1 attempt.*a worker died" if broken else (
        r"before its training reported a step; the executor refused new work.*cannot schedule"
    )  # fmt: skip
    if journalled:  # its design kept for a resume: nothing failed
        said = r"^no training ended; the executor refused new work.*1 training\(s\) are kept"
    with pytest.raises(ObjectiveError, match=said):
        bojax.minimize(train, SPACE, executor=pool, max_step=3, early_stopping="asha",
                       initial=2, iterations=1, retries=1, out=tmp_path if journalled else None,
                       **FAST)  # fmt: skip


def _raises(error):
    def submit(*args, **kwargs):
        raise error

    return submit


@pytest.mark.parametrize("stepwise", [False, True])
def test_an_executor_that_cancels_its_queued_work_neither_hangs_the_run_nor_fails_a_design(
    tmp_path, stepwise
):
    """A pool shut down with cancel_futures=True never woke the driver's wait: the run hung.
    A cancelled evaluation (a Dask client closing does the same) was also journalled failed
    with retries=0, though no fault of its design; it waits in pending.json for a resume."""
    import json

    pool = concurrent.futures.ThreadPoolExecutor(1)
    calls = []

    def value(point):
        calls.append(point)
        if len(calls) == 1:
            time.sleep(0.3)  # the other two wait in the pool's queue meanwhile
            pool.shutdown(wait=False, cancel_futures=True)
        return (point["x"] - 0.7) ** 2

    def train(point, report):
        report(1, value(point))
        return (point["x"] - 0.7) ** 2

    out, run = tmp_path / "run", dict(q=3, retries=0, initial=5, iterations=0, **FAST)
    finished = []
    thread = threading.Thread(
        target=lambda: finished.append(bojax.minimize(
            train if stepwise else value, SPACE, executor=pool, out=out,
            **(dict(max_step=1, early_stopping="none") if stepwise else {}), **run,
        )),
        daemon=True,
    )  # fmt: skip
    thread.start()
    thread.join(timeout=60)
    assert finished, "the run still waits for evaluations its executor cancelled"
    (result,) = finished
    assert [r["status"] for r in result.history] == ["ok"]
    assert "executor cancelled" in result.stopped and "2 " in result.stopped
    assert "kept in pending.json for a resume" in result.stopped
    pending = json.loads((out / "pending.json").read_text())
    if stepwise:  # the two designs proposed, neither started
        kept = [p["x"] for p in pending]
        assert len(kept) == 2 and all(not p["curve"] for p in pending)
        assert "; 2 training(s) are kept in pending.json" in result.stopped
    else:
        assert [f["attempts"] for f in pending] == [0, 0]
        kept = [f["x"] for f in pending]
    with concurrent.futures.ThreadPoolExecutor(1) as fresh:
        resumed = bojax.minimize(
            train if stepwise else value, SPACE, executor=fresh, out=out, resume=True,
            **(dict(max_step=1, early_stopping="none") if stepwise else {}), **run,
        )  # fmt: skip
    assert [r["status"] for r in resumed.history] == ["ok"] * 5
    assert [r["x"] for r in resumed.history[1:3]] == kept


@pytest.mark.slow  # (20 s: freeze-thaw's fits, then a resume)
def test_freeze_thaw_segments_an_executor_cancels_are_not_journalled_failed(tmp_path):
    """Freeze-thaw's cancelled segments were retried into the closed pool and journalled
    failed; they end the run as a killed driver would, and a resume goes on."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    calls = []

    def train(point, report):
        calls.append(point)
        if len(calls) == 1:
            time.sleep(0.3)  # the other two wait in the pool's queue meanwhile
            pool.shutdown(wait=False, cancel_futures=True)
        for step in (1, 2):
            report(step, (point["x"] - 0.7) ** 2 + 1 / step)
        return (point["x"] - 0.7) ** 2 + 0.5

    out = tmp_path / "run"
    run = dict(q=3, retries=0, initial=4, iterations=2, max_step=2, **FAST)
    result = bojax.minimize(train, SPACE, executor=pool, out=out, early_stopping="freeze-thaw",
                            **run)  # fmt: skip
    assert [r["status"] for r in result.history] == ["stopped"]
    assert "executor cancelled a segment" in result.stopped
    with concurrent.futures.ThreadPoolExecutor(1) as fresh:
        resumed = bojax.minimize(train, SPACE, executor=fresh, out=out, resume=True,
                                 early_stopping="freeze-thaw", **run)  # fmt: skip
    assert resumed.stopped is None and resumed.steps == 12
    assert "failed" not in {r["status"] for r in resumed.history}


def test_a_checkpoint_that_cannot_leave_its_process_is_dropped_and_the_steps_come_back():
    """Isolated, every segment whose checkpoint held a lock failed ("exited with status
    1"), its steps lost; inline such a checkpoint is only left out of the journal."""
    from bojax.bo.segments import portable_segment

    def train(point, report, checkpoint=None):
        for step in range(1, 4):
            report(step, point["x"] + 1 / step, checkpoint={"lock": threading.Lock()})
        return point["x"]

    with pytest.warns(UserWarning, match="checkpoint cannot leave its process"):
        segment = portable_segment(train, {"x": 0.5}, 0, 3, 9, None, 0)
    assert [s for s, _ in segment.curve] == [1, 2, 3] and segment.checkpoint is None
    # Any other result that cannot be pickled back fails with that reason.
    done, why = isolation.run_isolated(threading.Lock, (), timeout=None)
    assert not done and "result cannot be sent back from its process" in why

    class Elsewhere(concurrent.futures.Executor):  # a process or Dask pool, run here
        _max_workers = 1

        def submit(self, fn, *args):
            future = concurrent.futures.Future()
            future.set_result(fn(*args))
            return future

    run = dict(max_step=3, early_stopping="none", initial=1, iterations=0, **FAST)
    with pytest.warns(UserWarning, match="checkpoint cannot leave its process"):
        pooled = bojax.minimize(train, SPACE, executor=Elsewhere(), **run)
    isolated = bojax.minimize(train, SPACE, isolate=True, **run)  # (warned in the child)
    for result in (pooled, isolated):
        assert [r["status"] for r in result.history] == ["ok"]
        assert [s for s, _ in result.history[0]["curve"]] == [1, 2, 3]


# -- chaos: hangs, worker crashes and driver kills on Dask, with resumes ----------------------
_CHAOS_OBJECTIVE = """
import fcntl, json, os, signal, time
from pathlib import Path

DIR = Path(os.environ["BOJAX_CHAOS_DIR"])
# What the n-th call does, whichever design it evaluates.
FAULTS = {1: "hang", 3: "crash-worker", 5: "kill-driver", 7: "segfault", 9: "hang",
          11: "kill-driver", 13: "crash-worker", 15: "hang"}


def _log(name, entry):
    with open(DIR / name, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        n = len(handle.read().splitlines())
        handle.write(json.dumps({"n": n, **entry}) + "\\n")
    return n


def objective(p):
    n = _log("calls", {"pid": os.getpid(), "x": p})
    fault = FAULTS.get(n)
    if fault == "hang":
        time.sleep(600)
    elif fault == "crash-worker":  # the isolated evaluation's parent is its Dask worker
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(600)
    elif fault == "kill-driver":
        os.kill(int((DIR / "driver.pid").read_text()), signal.SIGKILL)
        time.sleep(600)
    elif fault == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    y = (p["x"] - 0.3) ** 2 + (0.1 if p["kind"] == "b" else 0.0)
    _log("returned", {"x": p, "y": y})
    return y
"""


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow  # a Dask cluster per launch, a fresh Python per evaluation: ~2 minutes
def test_chaos_every_evaluation_is_recorded_exactly_once(tmp_path):
    """Hangs, segfaults, killed workers and a driver killed by its objective and at random
    moments, resumed until the run ends: each proposal is recorded once, in sequence, with
    the value the objective returned or the reason it failed; no design runs more than
    ``retries + 1`` times (Dask's own rescheduling used to multiply that by 4); and no
    evaluation's process outlives the run."""
    (tmp_path / "objective.py").write_text(_CHAOS_OBJECTIVE)
    (tmp_path / "space.toml").write_text(
        "[x]\ntype = 'real'\nlow = 0\nhigh = 1\n\n"
        "[kind]\ntype = 'categorical'\nchoices = ['a', 'b']\n"
    )
    out, total = tmp_path / "run", 12
    command = [
        sys.executable, "-m", "bojax.cli", "optimize", f"{tmp_path / 'objective.py'}:objective",
        "--space", str(tmp_path / "space.toml"), "--workers", "2", "--out", str(out),
        "--initial", "6", "--iterations", "6", "--surrogate", "gp-map", "--candidates", "64",
        "--timeout", "4", "--seed", "0",
    ]  # fmt: skip
    scratch = tmp_path / "scratch"  # the evaluations' task folders
    scratch.mkdir()
    env = {**os.environ, "BOJAX_CHAOS_DIR": str(tmp_path), "TMPDIR": str(scratch)}
    rng = np.random.default_rng(0)
    for launch in range(20):
        resume = ["--resume"] if out.exists() else []
        log = tmp_path / f"launch-{launch}.log"  # a file: an orphan would hold a pipe open
        with open(log, "w") as sink:
            driver = subprocess.Popen(
                command + resume, env=env, cwd=tmp_path, stdout=sink, stderr=subprocess.STDOUT
            )
        (tmp_path / "driver.pid").write_text(str(driver.pid))
        try:  # the first launches are also killed at a random moment
            driver.wait(timeout=rng.uniform(8, 25) if launch < 3 else 400)
        except subprocess.TimeoutExpired:
            driver.kill()
            driver.wait()
            continue
        output = log.read_text()
        if driver.returncode == 0:
            break
        assert driver.returncode == -signal.SIGKILL, output[-3000:]
    else:
        raise AssertionError("the run did not finish in 20 launches")
    assert f"{total} evaluations" in output, output[-2000:]

    records, calls = _jsonl(out / "journal.jsonl"), _jsonl(tmp_path / "calls")
    assert [r["iteration"] for r in records] == list(range(total))
    assert sorted(r["proposal"] for r in records) == list(range(total))  # each exactly once
    returned = {json.dumps(r["x"], sort_keys=True): r["y"] for r in _jsonl(tmp_path / "returned")}
    reasons = ("timed out after 4 s", "killed by SIGSEGV", "KilledWorker", "process died")
    for record in records:
        if record["status"] == "ok":  # the value the objective returned for that design
            assert returned[json.dumps(record["x"], sort_keys=True)] == record["y"]
        else:
            assert any(reason in record["error"] for reason in reasons), record["error"]
    assert any(r["status"] == "failed" for r in records)
    # Calls 1-11 hold every kind of fault; at least `total` calls ran, so all of them happened.
    # Calls 13 and 15 run only when random kills and retries add calls (CI once stopped at 15).
    assert len(calls) >= total
    per_design = {}
    for call in calls:
        key = json.dumps(call["x"], sort_keys=True)
        per_design[key] = per_design.get(key, 0) + 1
    assert max(per_design.values()) <= 2  # retries = 1
    deadline = time.time() + 10  # the hung evaluations whose driver or worker died
    while any(_alive(c["pid"]) for c in calls) and time.time() < deadline:
        time.sleep(0.5)
    assert not [c["pid"] for c in calls if _alive(c["pid"])]
    # ... nor their task folders: a process whose parent died removes its own
    assert not [p.name for p in scratch.iterdir() if p.name.startswith(PREFIX)]


# -- untrusted journals: every record checked, other formats, repair ----------------------------
MIXED = Space([Real("x", 0.0, 1.0), Integer("n", 1, 4)])


def _bowl(p):
    return (p["x"] - 0.3) ** 2 + p["n"]


def _lines(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "journal.jsonl").read_text().splitlines()]


def _write_lines(folder: Path, records: list[dict]) -> None:
    (folder / "journal.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture(scope="module")
def three_evaluations(tmp_path_factory):
    """A real run's folder: three initial evaluations (no fit), copied by each test."""
    folder = tmp_path_factory.mktemp("journals") / "run"
    bojax.minimize(_bowl, MIXED, initial=3, iterations=0, out=folder, **FAST)
    return folder


def _copy(folder: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(folder, tmp_path / "run"))


def _resume(folder: Path, iterations: int = 1):
    return bojax.minimize(
        _bowl, MIXED, initial=3, iterations=iterations, out=folder, resume=True, **FAST
    )


def _put(record, key, value):
    record[key] = value


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r["x"].update(z=1), "'x': parameter 'z': not in the space"),
        (lambda r: r["x"].pop("n"), "'x': parameter 'n': missing"),
        (lambda r: r["x"].update(x=7.0), r"'x': parameter 'x': value 7.0 is outside \[0.0, 1.0\]"),
        (lambda r: r["x"].update(n=2.5), "'x': parameter 'n': expected an integer"),
        (lambda r: r["x"].update(n="2"), "'x': parameter 'n': expected a number"),
        (lambda r: r["u"].__setitem__(0, 0.999), "'x' and 'u' disagree on parameter 'x'"),
        (lambda r: r["u"].pop(), "'u' has 1 coordinate"),
        (lambda r: r["u"].__setitem__(0, 1.5), r"'u' of parameter 'x' is 1.5, outside \[0, 1\]"),
        (lambda r: r["u"].__setitem__(0, math.nan), "'u' must be a list of finite numbers"),
        (lambda r: _put(r, "y", "0.5"), "'y' of an ok evaluation must be a finite number"),
        (lambda r: _put(r, "y", None), "'y' of an ok evaluation must be a finite number"),
        (lambda r: _put(r, "status", "failed"), "'y' of a failed evaluation must be null"),
        (lambda r: _put(r, "status", "done"), "'status' must be 'ok', 'failed' or 'stopped'"),
        (lambda r: r.pop("status"), "the record has no 'status'"),
        (lambda r: _put(r, "iteration", "1"), "'iteration' must be a whole number"),
        (lambda r: _put(r, "proposal", -1), "'proposal' must be a whole number"),
        (lambda r: _put(r, "seconds", "fast"), "'seconds' must be a finite number"),
        (lambda r: _put(r, "error", 3), "'error' must be text or null"),
        (lambda r: _put(r, "diagnostics", {"ess": "many"}), "'diagnostics' must map names"),
    ],
)
def test_a_bad_record_is_refused_by_resume_and_show_naming_line_and_field(
    three_evaluations, tmp_path, edit, message
):
    folder = _copy(three_evaluations, tmp_path)
    records = _lines(folder)
    edit(records[1])
    _write_lines(folder, records)
    where = f"{folder / 'journal.jsonl'}:2: "
    with pytest.raises(JournalError, match=re.escape(where) + message) as caught:
        _resume(folder)
    assert f"run `bojax repair {folder}`" in str(caught.value)
    shown = CliRunner().invoke(app, ["show", str(folder)], env={"COLUMNS": "400"})
    assert shown.exit_code == 1 and where in shown.output, shown.output


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda e: e["x"].update(x=7.0), "'x': parameter 'x': value 7.0 is outside"),
        (lambda e: e["u"].append(0.5), "'u' has 3 coordinate"),
        (lambda e: e["u"].__setitem__(0, 0.9), "'x' and 'u' disagree on parameter 'x'"),
        (lambda e: e["info"].pop("phase"), "'info' must be a JSON object with a text 'phase'"),
        (lambda e: _put(e, "proposal", "5"), "'proposal' must be a whole number"),
    ],
)
def test_a_bad_pending_entry_is_refused_naming_the_entry(
    three_evaluations, tmp_path, edit, message
):
    folder = _copy(three_evaluations, tmp_path)
    u = [0.25, 0.625]
    entry = {"proposal": 5, "u": u, "x": MIXED.from_unit(u), "info": {"phase": "bo"}}
    edit(entry)
    (folder / "pending.json").write_text(json.dumps([entry]))
    where = f"{folder / 'pending.json'}, entry 1: "
    with pytest.raises(JournalError, match=re.escape(where) + message):
        _resume(folder)
    with pytest.raises(JournalError, match=re.escape(where) + message):
        load_run(folder)


@pytest.mark.parametrize("kept", [0, 2, None])
def test_a_journal_shorter_than_its_summary_is_refused_and_nothing_runs_again(
    three_evaluations, tmp_path, kept
):
    """A deleted journal (``kept=None``) or one restored from an older copy, beside the
    summary of the finished call: resume would run the lost evaluations again."""
    folder = _copy(three_evaluations, tmp_path)
    if kept is None:
        (folder / "journal.jsonl").unlink()
    else:
        _write_lines(folder, _lines(folder)[:kept])
    state = "is missing" if kept is None else f"holds {kept} record(s)"
    message = re.escape(f"{folder / 'journal.jsonl'} {state}, but ") + r".* counts 3 finished"
    before = sorted(p.name for p in folder.iterdir())
    with pytest.raises(JournalError, match=message):
        _resume(folder)
    assert sorted(p.name for p in folder.iterdir()) == before  # the summary stays
    shown = CliRunner().invoke(app, ["show", str(folder)], env={"COLUMNS": "400"})
    assert shown.exit_code == 1 and "records were lost" in shown.output, shown.output
    (folder / "summary.json").unlink()  # the way on the message names
    assert len(_resume(folder, iterations=0).history) == 3  # the design completed again


@pytest.mark.parametrize(
    ("stored", "message"),
    [
        (2, r"made by a newer bojax \(run-folder format 2\); .*: upgrade bojax"),
        (0, r"made by an older bojax \(run-folder format 0\); .*: resume or show it with that"),
        (None, r"names no run-folder format.*; .*: start a new run"),
        ("1", r"an unknown run-folder format '1'; .*: start a new run"),
    ],
)
def test_a_folder_of_another_format_says_which_made_it_and_what_to_do(
    three_evaluations, tmp_path, stored, message
):
    folder = _copy(three_evaluations, tmp_path)
    header = json.loads((folder / "run.json").read_text())
    header.pop("format")
    if stored is not None:
        header["format"] = stored
    (folder / "run.json").write_text(json.dumps(header))
    for attempt in (_resume, load_run, lambda f: repair(Journal(f))):
        with pytest.raises(
            JournalError,
            match=message.replace("; .*:", r"; this bojax \(.*\) reads run-folder format 1:"),
        ):
            attempt(folder)


@pytest.mark.slow
def test_the_best_point_of_a_resumed_run_is_never_outside_the_space(three_evaluations, tmp_path):
    """A hand-edited record with a point outside the space and the best value used to be
    resumed silently and reported as the best point."""
    folder = _copy(three_evaluations, tmp_path)
    records = _lines(folder)
    records[1]["x"]["x"], records[1]["y"] = 7.0, -100.0
    _write_lines(folder, records)
    with pytest.raises(JournalError, match=r"value 7\.0 is outside"):
        _resume(folder)
    repaired = repair(Journal(folder))
    assert (repaired.kept, repaired.invalid) == (2, 1)
    result = _resume(folder, iterations=2)
    assert MIXED.validate(result.best_point) == result.best_point and result.best_value > 0
    assert all(MIXED.validate(r["x"]) == r["x"] for r in result.history)
    (aside,) = [json.loads(line) for line in (folder / "journal.rejected.jsonl").open()]
    assert aside["record"]["y"] == -100.0 and "outside" in aside["reason"]


def _shifted(p):
    """The second driver's objective: another minimum, so its proposals part ways."""
    return (p["x"] - 0.8) ** 2 + 0.1 * p["n"]


@pytest.mark.filterwarnings("ignore:.*journalled for the objective")  # (a second driver's)
def test_repair_of_a_journal_two_drivers_wrote_keeps_every_distinct_evaluation(
    three_evaluations, tmp_path
):
    import shutil

    # Two drivers resume the same three-evaluation run and append to the same journal;
    # both propose the same point first, then part ways (the second sees other values).
    runs = {}
    for name, objective in (("a", _bowl), ("b", _shifted)):
        folder = Path(shutil.copytree(three_evaluations, tmp_path / name))
        bojax.minimize(objective, MIXED, initial=3, iterations=3, out=folder, resume=True, **FAST)
        runs[name] = _lines(folder)
    a, b = runs["a"][3:], runs["b"][3:]
    assert a[0]["u"] == b[0]["u"] and a[1]["u"] != b[1]["u"]  # the scenario holds
    folder = Path(shutil.copytree(tmp_path / "a", tmp_path / "run"))
    _write_lines(folder, runs["a"][:3] + [r for pair in zip(a, b, strict=True) for r in pair])
    done = {r["proposal"]: r for r in a}  # proposal 5 finished while still listed as running
    unfinished = {"proposal": 6, "u": [0.5, 0.625], "x": MIXED.from_unit([0.5, 0.625])}
    pending = [
        {**{k: done[5][k] for k in ("proposal", "u", "x")}, "info": {"phase": "bo"}},
        {**unfinished, "info": {"phase": "bo"}, "attempts": 1},
    ]
    (folder / "pending.json").write_text(json.dumps(pending))
    original = (folder / "journal.jsonl").read_bytes()
    with pytest.raises(JournalError, match=r"journal\.jsonl:5 is out of sequence.*bojax repair"):
        _resume(folder)

    repaired = repair(Journal(folder))
    assert (repaired.kept, repaired.duplicates, repaired.invalid) == (8, 1, 0)
    assert (repaired.reproposed, repaired.pending_dropped) == (2, 1)
    assert repaired.backup.read_bytes() == original  # never deletes data
    assert not (folder / "sampler.json").exists()
    records = _lines(folder)
    assert [r["iteration"] for r in records] == list(range(8))
    assert len({r["proposal"] for r in records}) == 8
    kept = {(tuple(r["u"]), r["y"]) for r in records}
    every = {(tuple(r["u"]), r["y"]) for r in runs["a"] + runs["b"]}
    (second,) = [json.loads(line) for line in (folder / "journal.rejected.jsonl").open()]
    assert second["record"] == {**b[0]} and "second evaluation of proposal 3" in second["reason"]
    assert kept == every - {(tuple(b[0]["u"]), b[0]["y"])}  # each distinct evaluation stays
    assert [e["proposal"] for e in json.loads((folder / "pending.json").read_text())] == [6]

    result = _resume(folder, iterations=7)  # 8 kept + the pending one + one new proposal
    assert [r["x"] for r in result.history[:8]] == [r["x"] for r in records]
    assert result.history[8]["u"] == unfinished["u"] and result.history[8]["proposal"] == 6
    new = result.history[9]
    assert new["proposal"] == 9 and tuple(new["u"]) not in {tuple(r["u"]) for r in records}
    assert repair(Journal(folder)).lines()[0].startswith("nothing to repair")


def test_repair_keeps_the_saved_chains_while_the_records_they_were_fitted_to_stand(tmp_path):
    """A repeated last record set aside changes no record a fit saw: sampler.json stays,
    so the resume does not refit at every past ask (a review: 78 s against 17 s at 380
    evaluations). A change before its iteration removes it, as before."""
    import shutil

    folder = tmp_path / "run"
    bojax.minimize(_bowl, MIXED, initial=3, iterations=3, out=folder, **FAST)
    saved = json.loads((folder / "sampler.json").read_text())["iteration"]
    records = _lines(folder)
    assert 3 < saved <= len(records)
    late, early = Path(shutil.copytree(folder, tmp_path / "late")), folder
    _write_lines(late, [*records, records[-1]])  # a second driver's copy of the last
    assert not repair(Journal(late)).sampler_removed
    assert (late / "sampler.json").exists() and _resume(late, iterations=4).evaluations == 7
    # A record inserted under the next number sets none aside but renumbers the rest
    # (a review: sampler.json stayed, fitted to records that had moved).
    moved = Path(shutil.copytree(folder, tmp_path / "moved"))
    inserted = {**records[0], "proposal": records[2]["proposal"], "iteration": 2}
    _write_lines(moved, [*records[:2], inserted, *records[2:]])
    repaired = repair(Journal(moved))
    assert repaired.invalid == 0 and repaired.renumbered and repaired.reproposed == 1
    assert repaired.sampler_removed and not (moved / "sampler.json").exists()
    _write_lines(early, [records[0], records[0], *records[1:]])
    assert repair(Journal(early)).sampler_removed and not (early / "sampler.json").exists()


def test_repair_keeps_the_success_when_a_proposal_first_failed(tmp_path):
    journal = Journal(tmp_path)
    journal.start({"space": MIXED.to_dict(), "settings": {"surrogate": "gp-map"}})
    u = [0.5, 0.375]

    def record(n, y, error=None):
        return {
            "iteration": n, "proposal": 0, "phase": "initial", "x": MIXED.from_unit(u),
            "u": u, "y": y, "status": "failed" if error else "ok", "error": error,
            "seconds": 1.0, "diagnostics": {},
        }  # fmt: skip

    journal.append(record(0, None, error="evaluation lost after 1 attempt(s)"))
    journal.append(record(0, 2.5))
    repaired = repair(journal)
    assert repaired.duplicates == 1 and [r["y"] for r in journal.read(space=MIXED)] == [2.5]
    (aside,) = [json.loads(line) for line in (tmp_path / "journal.rejected.jsonl").open()]
    assert aside["record"]["status"] == "failed" and aside["line"] == 1


@pytest.mark.filterwarnings("ignore:.*journalled for the objective")  # (the counting one)
@pytest.mark.parametrize("mend", ["resume", "repair"])
def test_a_whole_last_record_without_its_newline_is_kept_not_redone(
    three_evaluations, tmp_path, mend
):
    """An editor or a kill between the record and its newline leaves a finished
    evaluation: resume and repair keep it (it was dropped and evaluated again)."""
    folder = _copy(three_evaluations, tmp_path)
    text = (folder / "journal.jsonl").read_text()
    (folder / "journal.jsonl").write_text(text.rstrip("\n"))
    if mend == "repair":
        assert repair(Journal(folder)).lines()[0].startswith("nothing to repair: 3 record(s)")
    calls = []
    result = bojax.minimize(
        lambda p: calls.append(p) or _bowl(p), MIXED, initial=3, iterations=1, out=folder,
        resume=True, **FAST,
    )  # fmt: skip
    assert result.evaluations == 4 and len(calls) == 1  # only the new proposal ran
    assert [r["x"] for r in _lines(folder)[:3]] == [json.loads(t)["x"] for t in text.splitlines()]


def test_repair_judges_a_record_as_resume_does_curves_statuses_and_extra_metrics(tmp_path):
    """What resume refuses, repair sets aside (a bad curve of a step-wise run, 'stopped'
    in a run that is not step-wise); what resume accepts (a note among an evaluation's
    metrics) repair keeps."""
    u = [0.5, 0.375]

    def journal_with(settings, records):
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        journal = Journal(folder)
        journal.start({"space": MIXED.to_dict(), "settings": settings})
        for n, fields in enumerate(records):
            journal.append({
                "iteration": n, "proposal": n, "phase": "initial", "x": MIXED.from_unit(u),
                "u": u, "y": 1.0, "status": "ok", "error": None, "seconds": 1.0,
                "diagnostics": {}, **fields,
            })  # fmt: skip
        return journal

    stepwise = {"max_step": 3, "early_stopping": "asha"}
    bad_curve = journal_with(
        stepwise, [{"curve": [[1, 2.0], [3, 1.0]]}, {"curve": [[2, 1.0], [1, 0.5]]}]
    )
    with pytest.raises(JournalError, match=r"journal\.jsonl:2: 'curve' must be"):
        bad_curve.read(space=MIXED)
    assert (repair(bad_curve).kept, repair(bad_curve).invalid) == (1, 0)  # (then nothing)
    no_curve = journal_with(stepwise, [{}])
    assert repair(no_curve).invalid == 1
    plain = journal_with({"surrogate": "gp-map"}, [{}, {"status": "stopped"}])
    with pytest.raises(JournalError, match="'stopped' is a step-wise training's"):
        plain.read(space=MIXED)
    assert repair(plain).kept == 1
    several = {"objectives": ["a:min", "b:min"]}
    noted = journal_with(several, [{"y": {"a": 1.0, "b": 2.0, "note": "good run"}}])
    assert noted.read(space=MIXED, metrics=noted.metrics())[0]["y"]["note"] == "good run"
    assert repair(noted).lines()[0].startswith("nothing to repair: 1 record(s)")
    stopped = journal_with(several, [{"status": "stopped", "y": 1.0}])
    assert repair(stopped).invalid == 1


def test_bojax_repair_prints_what_it_did(three_evaluations, tmp_path):
    folder = _copy(three_evaluations, tmp_path)
    records = _lines(folder)
    _write_lines(folder, [*records[:2], records[1], *records[2:]])
    with open(folder / "journal.jsonl", "a") as handle:
        handle.write('{"iteration": 4, "x": {"x": 0.')  # torn
    (folder / "sampler.json").write_text('{"iteration": 3, "fits": 0}')
    runner = CliRunner()
    done = runner.invoke(app, ["repair", str(folder)], env={"COLUMNS": "400"})
    assert done.exit_code == 0, done.output
    assert "kept 3 evaluation(s), 0 renumbered; set aside 1 repeated evaluation(s) and 1 " in (
        done.output
    )
    assert "removed sampler.json" in done.output and "journal.jsonl.bak-" in done.output
    again = runner.invoke(app, ["repair", str(folder)], env={"COLUMNS": "400"})
    assert again.exit_code == 0 and "nothing to repair: 3 record(s)" in again.output
    assert _resume(folder).evaluations == 4
    with Journal(folder).lock():
        held = runner.invoke(app, ["repair", str(folder)], env={"COLUMNS": "400"})
    assert held.exit_code == 1 and "in use by another run" in held.output
    empty = runner.invoke(app, ["repair", str(tmp_path / "nothing")])
    assert empty.exit_code == 1 and "nothing does not exist" in empty.output
    (tmp_path / "nothing").mkdir()
    empty = runner.invoke(app, ["repair", str(tmp_path / "nothing")])
    assert empty.exit_code == 1 and "holds no run (run.json is missing)" in empty.output


@pytest.mark.slow  # a local Dask cluster of worker processes
def test_a_design_that_kills_its_dask_worker_runs_retries_plus_one_times(tmp_path):
    """Dask's own rescheduling (4 attempts) times bojax's 2 submissions ran such a design
    8 times; now bojax's ``retries`` alone bounds it."""
    (tmp_path / "train.py").write_text(
        "import os, signal\n\n"
        "def objective(p):\n"
        "    if p['x'] < 0.5:\n"
        "        with open('calls', 'a') as log:\n"
        "            log.write(repr(p['x']) + '\\n')\n"
        "        os.kill(os.getpid(), signal.SIGKILL)  # the worker itself, not isolated\n"
        "    return p['x']\n"
    )
    out = tmp_path / "run"
    command = _optimize_command(
        tmp_path, "train.py", "--workers", "1", "--initial", "4", "--iterations", "0",
        "--retries", "1",
    )  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    records = _jsonl(out / "journal.jsonl")
    killed = [r for r in records if r["status"] == "failed"]
    assert killed and all("lost after 2 attempt(s): KilledWorker" in r["error"] for r in killed)
    calls = (tmp_path / "calls").read_text().split()
    assert sorted(calls) == sorted(repr(r["x"]["x"]) for r in killed for _ in range(2))


def test_a_key_given_twice_in_a_record_or_run_json_is_refused(three_evaluations, tmp_path):
    """``json`` keeps the last of two keys silently; which ``"y"`` an edit meant is not
    bojax's to guess."""
    folder = _copy(three_evaluations, tmp_path)
    lines = (folder / "journal.jsonl").read_text().splitlines()
    lines[1] = lines[1].replace('"y": ', '"y": -100.0, "y": ', 1)
    (folder / "journal.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(JournalError, match=r"journal.jsonl:2 is corrupt: the key 'y' appears"):
        _resume(folder)
    header = (folder / "run.json").read_text()
    (folder / "run.json").write_text(header.replace('"format": 1', '"format": 1, "format": 1'))
    with pytest.raises(JournalError, match=r"run.json is corrupt: the key 'format' appears"):
        load_run(folder)


def test_a_full_disk_stops_the_run_with_the_unwritten_record_in_the_error(tmp_path, monkeypatch):
    """The disk fills after two records: the run stops with a typed error that carries
    the record it could not write, and the two written ones resume."""
    from bojax.bo import journal as journal_module

    real_fsync, writes = os.fsync, []

    def fsync(descriptor):
        if Path(f"/proc/self/fd/{descriptor}").resolve().name == "journal.jsonl":
            writes.append(descriptor)
            if len(writes) > 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(descriptor)

    monkeypatch.setattr(journal_module.os, "fsync", fsync)
    out = tmp_path / "run"
    with pytest.raises(RunFolderError, match="No space left on device") as caught:
        bojax.minimize(lambda p: p["x"], SPACE, initial=4, iterations=0, out=out, **FAST)
    assert "its record is: {" in str(caught.value) and '"iteration": 2' in str(caught.value)
    monkeypatch.setattr(journal_module.os, "fsync", real_fsync)
    result = bojax.minimize(
        lambda p: p["x"], SPACE, initial=4, iterations=0, out=out, resume=True, **FAST
    )
    assert result.evaluations == 4


@pytest.mark.parametrize("name", ["journal.jsonl", "pending.json"])
def test_a_folder_in_place_of_a_run_file_is_a_typed_error_for_show_resume_and_repair(
    tmp_path, name
):
    folder = tmp_path / "run"
    settings = dict(initial=2, iterations=0, **FAST)
    bojax.minimize(lambda p: p["x"], SPACE, out=folder, **settings)
    (folder / name).unlink(missing_ok=True)
    (folder / name).mkdir()
    for args in (["show", str(folder)], ["repair", str(folder)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
        output = result.output.replace("\n", "")  # the console wraps long paths
        assert "cannot read" in output and name in output and "Is a directory" in output
    with pytest.raises((JournalError, RunFolderError), match="cannot read"):
        bojax.minimize(lambda p: p["x"], SPACE, out=folder, resume=True, **settings)


def test_repair_that_sets_a_record_aside_removes_the_summary_it_no_longer_tells(
    three_evaluations, tmp_path
):
    folder = _copy(three_evaluations, tmp_path)
    assert (folder / "summary.json").exists()
    lines = (folder / "journal.jsonl").read_text().splitlines()
    lines[1] = lines[1].replace('"status": "ok"', '"status": "okay"')
    (folder / "journal.jsonl").write_text("\n".join(lines) + "\n")
    assert repair(Journal(folder)).invalid == 1
    assert not (folder / "summary.json").exists()  # show: not finished until resumed
    assert len(_resume(folder, iterations=0).history) == 3  # the set-aside one again
    assert (folder / "summary.json").exists()


def test_repair_sets_aside_a_pending_json_that_is_not_utf8(tmp_path):
    folder = tampered_run(tmp_path / "run")
    (folder / "pending.json").write_bytes(b"\xff\xfe\xfd[")
    repaired = repair(Journal(folder))
    assert repaired.kept == 4 and Journal(folder).load_pending() == []
    rejected = _jsonl(folder / "journal.rejected.jsonl")
    assert "pending.json is not JSON" in rejected[0]["reason"]


@pytest.mark.parametrize(
    ("raise_it", "reason"),
    [
        (lambda: sys.exit(0), "called sys.exit(0)"),
        (lambda: sys.exit("bad --lr"), "called sys.exit('bad --lr')"),
        (lambda: (_ for _ in ()).throw(type("Stop", (BaseException,), {})("why")), "Stop: why"),
    ],
)
def test_sys_exit_or_a_base_exception_in_the_objective_fails_that_evaluation(raise_it, reason):
    def objective(p):
        if p["x"] > 0.5:
            raise_it()
        return p["x"]

    result = bojax.minimize(objective, SPACE, initial=6, iterations=0, **FAST)
    assert result.evaluations == 6 and result.failures >= 1
    assert all(r["error"].endswith(reason) for r in result.history if r["status"] == "failed")


def test_ctrl_c_in_the_objective_still_stops_the_run():
    def objective(p):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        evaluate(objective, {"x": 0.5})


def test_a_timeout_too_long_for_a_lock_wait_runs(monkeypatch):
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        result = bojax.minimize(
            lambda p: p["x"], SPACE, executor=pool, timeout=1e300, initial=2, iterations=0, **FAST
        )
    assert result.evaluations == 2 and result.failures == 0


def test_ctrl_c_during_an_evaluation_does_not_count_against_its_design(tmp_path):
    """Interrupted twice in the same evaluation, a design was journalled on the next
    resume as one that kills its process (its two starts exceeded retries = 1)."""
    out, interrupts = tmp_path / "run", []

    def objective(p):
        if len(interrupts) < 2 and len(list(out.glob("journal.jsonl"))) and _count(out) == 1:
            interrupts.append(p["x"])
            raise KeyboardInterrupt  # the user's Ctrl-C, arriving during this evaluation
        return (p["x"] - 0.3) ** 2

    run = dict(initial=3, iterations=0, out=out, **FAST)
    for resume in (False, True):
        with pytest.raises(KeyboardInterrupt):
            bojax.minimize(objective, SPACE, resume=resume, **run)
        (pending,) = json.loads((out / "pending.json").read_text())
        assert pending["attempts"] == 0
    result = bojax.minimize(objective, SPACE, resume=True, **run)
    assert interrupts == [interrupts[0]] * 2
    assert result.failures == 0 and result.history[1]["x"]["x"] == interrupts[0]


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signals: main thread"
)
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # (the child only reads a handler)
def test_sigterm_during_an_evaluation_stops_the_run_as_ctrl_c_does(tmp_path):
    """A scheduler's preemption (SIGTERM) killed Python with the evaluation's start
    charged: preempted twice, a good design was journalled as one that kills its process
    (review BX). Forked children get SIGTERM's default action back."""
    from bojax.bo.interrupts import Terminated

    out, terminations, children = tmp_path / "run", [], []

    def objective(p):
        if len(terminations) < 2 and len(list(out.glob("journal.jsonl"))) and _count(out) == 1:
            terminations.append(p["x"])
            child = os.fork()
            if child == 0:  # a forked worker: SIGTERM must still end it at once
                os._exit(0 if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL else 1)
            children.append(os.waitpid(child, 0)[1])
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # (the handler raises here)
        return (p["x"] - 0.3) ** 2

    run = dict(initial=3, iterations=0, out=out, **FAST)
    for resume in (False, True):
        with pytest.raises(Terminated):
            bojax.minimize(objective, SPACE, resume=resume, **run)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # restored
        (pending,) = json.loads((out / "pending.json").read_text())
        assert pending["attempts"] == 0
    result = bojax.minimize(objective, SPACE, resume=True, **run)
    assert terminations == [terminations[0]] * 2 and children == [0, 0]
    assert result.failures == 0 and result.history[1]["x"]["x"] == terminations[0]

    def theirs(signum, frame):  # a handler the objective (or a library it starts) sets
        pass

    def setting(p):
        signal.signal(signal.SIGTERM, theirs)
        return p["x"]

    try:  # kept: restoring the default would throw it away (review BZ)
        bojax.minimize(setting, SPACE, initial=1, iterations=0, **FAST)
        assert signal.getsignal(signal.SIGTERM) is theirs
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _count(out: Path) -> int:
    return len((out / "journal.jsonl").read_text().splitlines())


@pytest.mark.slow  # two fresh Pythons that import JAX
@pytest.mark.parametrize(
    "stop, code, said",
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")],
)
def test_sigint_of_the_cli_says_how_to_resume_and_the_resume_loses_nothing(
    stop, code, said, tmp_path
):
    """As Ctrl-C, so SIGTERM (a scheduler's preemption; review BX)."""
    (tmp_path / "slow.py").write_text(
        "import time\n\ndef objective(p):\n    time.sleep(1.0)\n    return (p['x'] - 0.3) ** 2\n"
    )
    (tmp_path / "space.toml").write_text("[x]\ntype = 'real'\nlow = 0\nhigh = 1\n")
    out = tmp_path / "run"
    # Python's Ctrl-C handler, which a child of an ignoring parent (a test runner's worker)
    # would not install on its own.
    cli = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv[0] = 'bojax'; runpy.run_module('bojax.cli', run_name='__main__')"
    )
    command = [
        sys.executable, "-c", cli, "optimize", f"{tmp_path / 'slow.py'}:objective",
        "--space", str(tmp_path / "space.toml"), "--out", str(out), "--initial", "4",
        "--iterations", "0",
    ]  # fmt: skip
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (out / "journal.jsonl").exists():
        time.sleep(0.05)
    while time.time() < deadline and _count(out) < 2:
        time.sleep(0.05)
    time.sleep(0.3)  # inside the third evaluation
    driver.send_signal(stop)
    output, _ = driver.communicate(timeout=60)
    assert driver.returncode == code, output[-2000:]
    said = f"{said}; continue it with: bojax optimize {tmp_path / 'slow.py'}:objective"
    assert f"{said} --resume --out {out}" in output  # on one line, to copy (a long path wrapped)
    assert "Traceback" not in output
    (pending,) = json.loads((out / "pending.json").read_text())
    assert pending["attempts"] == 0  # stopped by the user, not by its design
    resume = [*command[:5], "--out", str(out), "--resume"]  # as it says: the rest journalled
    done = subprocess.run(resume, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    records = _jsonl(out / "journal.jsonl")
    assert [r["status"] for r in records] == ["ok"] * 4
    assert records[2]["proposal"] == pending["proposal"]


@pytest.mark.parametrize("name", ["a\x1b[31mb", "tab\there", "x" * 201])
def test_a_parameter_name_with_control_characters_or_past_a_line_is_refused(name):
    with pytest.raises(SpaceDefinitionError, match="no control characters"):
        Real(name, 0.0, 1.0)


def test_a_masked_return_is_a_failure_not_its_fill_value():
    masked = np.ma.masked_array([1.0], mask=[True])
    assert math.isnan(evaluate(lambda p: masked, {"x": 0.5})[0])
    assert evaluate(lambda p: np.ma.masked_array([1.0], mask=[False]), {"x": 0.5}) == (1.0, None)


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_a_space_file_saved_with_a_byte_order_mark_loads(tmp_path, suffix):
    from bojax.spaces import load_space

    text = "[x]\ntype = 'real'\nlow = 0\nhigh = 1\n"
    if suffix == ".json":
        text = '{"x": {"type": "real", "low": 0, "high": 1}}'
    path = tmp_path / f"space{suffix}"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert load_space(path) == SPACE


class _SlowToLoad:
    """Unpickles as ``time.sleep(seconds)``: a task whose loading (imports) is slow."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __reduce__(self):
        return time.sleep, (self.seconds,)


def test_an_isolated_timeout_counts_from_the_tasks_start_not_the_processs(monkeypatch):
    """Under load a process start and its imports took seconds, and healthy segments were
    journalled 'timed out' (review: 83 of 129 at --timeout 5). The start is bounded too."""

    assert isolation.run_isolated(str, (_SlowToLoad(3.0),), timeout=1.0) == (True, "None")
    assert isolation.run_isolated(time.sleep, (3.0,), timeout=1.0) == (
        False,
        "timed out after 1 s",
    )
    monkeypatch.setattr(isolation, "STARTUP_SECONDS", 0.5)
    done, why = isolation.run_isolated(str, (_SlowToLoad(30.0),), timeout=1.0)
    assert not done and why == "the evaluation's process did not start in 0.5 s"
    # Without a timeout nothing is bounded, the start neither.
    assert isolation.run_isolated(str, (_SlowToLoad(1.5),), timeout=None) == (True, "None")


def test_a_run_past_its_exact_limit_is_refitted_locally_so_plot_takes_more_of_it(tmp_path):
    """Past exact_limit the refit is a local GP on local_points evaluations: slices were
    withheld from every run over 5,000 evaluations, the sizes that setting is for."""
    from bojax.bo.runs import load_run
    from bojax.reports import run_figures

    run = load_run(tampered_run(tmp_path / "run", records=6))
    many = dataclasses.replace(run, records=run.records * 1000)  # 6,000, 5,000 successes
    assert run_figures.refit_limit(many) == run_figures.LOCAL_REFIT_EVALUATIONS
    assert not run_figures.too_long_to_refit(many)  # past the default exact_limit, 300
    exact = dataclasses.replace(many, settings={**many.settings, "exact_limit": None})
    assert run_figures.too_long_to_refit(exact)  # an exact refit: 5,000 at most
    high = dataclasses.replace(many, settings={**many.settings, "exact_limit": 5_001})
    assert run_figures.refit_limit(high) == 5_000


def test_plot_draws_a_journal_longer_than_a_refit_takes_without_its_slices(tmp_path, monkeypatch):
    """It wrote nothing: 5,202 records got only 'plot it with --no-slices' (review)."""
    from bojax.reports import run_figures

    folder = tampered_run(tmp_path / "run", records=6)
    monkeypatch.setattr(run_figures, "REFIT_LIMITS", {**run_figures.REFIT_LIMITS, "evaluations": 5})
    result = CliRunner().invoke(app, ["plot", str(folder)])
    assert result.exit_code == 0, result.output
    drawn = sorted(p.name for p in (folder / "figures").glob("*.png"))
    assert drawn == ["parameters.png", "progress.png"]
    assert "no slices: 6 evaluations are more than bojax plot refits (at most 5)" in " ".join(
        result.output.split()
    )


def test_the_figures_of_a_run_where_everything_failed_show_no_value(tmp_path, monkeypatch):
    """Failures were drawn as x's at objective 0 (read as values of 0), and a step-wise
    run's curves as empty axes around 0 with a legend of lines that were not there."""
    from bojax.bo.runs import load_run
    from bojax.reports import run_figures

    figures = {}

    def keep(fig, path, dpi):
        figures[path.name] = fig

    monkeypatch.setattr(run_figures, "save", keep)
    folder = tampered_run(tmp_path / "run", records=4)
    lines = (folder / "journal.jsonl").read_text().splitlines()
    failed = [{**json.loads(line), "status": "failed", "y": None, "error": "E"} for line in lines]
    (folder / "journal.jsonl").write_text("".join(json.dumps(r) + "\n" for r in failed))
    run_figures.plot_progress(load_run(folder), tmp_path / "progress.png")
    (ax,) = figures["progress.png"].axes
    assert ax.get_title() == "no evaluation succeeded (4 failed)"
    (marks,) = [line for line in ax.get_lines() if line.get_label() == "failed"]
    assert marks.get_transform() == ax.get_xaxis_transform()  # on the edge, not at y = 0
    stepwise = [{**r, "curve": []} for r in failed]
    (folder / "journal.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stepwise))
    run_figures.plot_curves(load_run(folder), tmp_path / "curves.png")
    left, right = figures["curves.png"].axes
    assert [t.get_text() for t in left.texts] == ["no training reported a value\n(4 failed)"]
    assert left.get_legend() is None and list(right.get_yticks()) == []
    # A training that failed after one report is a dot where it failed (a one-point line
    # drew nothing: a review).
    once = [{**r, "curve": [[1, 0.5 + k]]} for k, r in enumerate(failed)]
    (folder / "journal.jsonl").write_text("".join(json.dumps(r) + "\n" for r in once))
    run_figures.plot_curves(load_run(folder), tmp_path / "curves.png")
    left, _ = figures["curves.png"].axes
    dots = [line for line in left.get_lines() if line.get_marker() == "o"]
    assert sorted(float(line.get_ydata()[0]) for line in dots) == [0.5, 1.5, 2.5, 3.5]
    # The legend names only the kinds of curve drawn (a run with no failure had one).
    assert [t.get_text() for t in left.get_legend().get_texts()] == ["failed"]


def test_show_prints_no_nan_best_before_the_first_success(tmp_path):
    folder = tampered_run(tmp_path / "run", records=4)
    lines = [json.loads(line) for line in (folder / "journal.jsonl").read_text().splitlines()]
    lines[0].update(status="failed", y=None, error="E")  # the first evaluation failed
    (folder / "journal.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    result = CliRunner().invoke(app, ["show", str(folder)], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and not re.search(r"\bnan\b", result.output), result.output


class _BreaksAtItsSecondTask(concurrent.futures.ThreadPoolExecutor):
    """A pool as a process pool is when a worker dies: the second task's future fails
    with BrokenProcessPool, and the pool takes nothing after it."""

    def __init__(self):
        super().__init__(2)
        self.tasks = 0

    def submit(self, fn, *args, **kwargs):
        self.tasks += 1
        if self.tasks > 2:
            raise concurrent.futures.process.BrokenProcessPool("the pool is not usable anymore")
        if self.tasks == 2:
            died: concurrent.futures.Future = concurrent.futures.Future()
            died.set_exception(concurrent.futures.process.BrokenProcessPool("a child died"))
            return died
        return super().submit(fn, *args, **kwargs)


@pytest.mark.parametrize("journalled", [True, False])
def test_a_retry_a_broken_pool_refused_is_no_attempt_and_waits_for_a_resume(journalled, tmp_path):
    """The evaluation running when a process pool broke was retried into the broken pool
    and journalled failed after one run, as was any running beside it: a resume with a
    new pool now gives it the attempt the broken one refused (review)."""
    space = Space([Real("x", 0.0, 1.0)])
    run = dict(initial=4, iterations=0, q=2, surrogate="gp-map", progress=False)
    run |= dict(out=tmp_path) if journalled else {}
    result = bojax.minimize(
        lambda p: (p["x"] - 0.3) ** 2, space, executor=_BreaksAtItsSecondTask(), **run
    )
    assert [r["status"] for r in result.history] == ["ok"]
    kept = "kept in pending.json for a resume" if journalled else "left out (no run folder"
    assert "refused new work: BrokenProcessPool" in result.stopped and kept in result.stopped
    if not journalled:
        return
    (waiting,) = json.loads((tmp_path / "pending.json").read_text())
    assert waiting["proposal"] == 1 and waiting["attempts"] == 1  # its one real run
    with concurrent.futures.ThreadPoolExecutor(1) as again:
        resumed = bojax.minimize(
            lambda p: (p["x"] - 0.3) ** 2, space, executor=again, resume=True, **run
        )
    assert [r["status"] for r in resumed.history] == ["ok"] * 4
    assert resumed.history[1]["u"] == waiting["u"]


def test_evaluations_an_executor_shut_down_did_not_take_are_kept_for_a_resume(tmp_path):
    """A pool shut down (a Dask client closed, its scheduler gone) mid-run: its queued
    evaluation was retried into the closed pool and journalled failed for good (review);
    it is kept in pending.json instead, and a resume with a new pool evaluates it."""
    space = Space([Real("x", 0.0, 1.0)])
    pool = concurrent.futures.ThreadPoolExecutor(1)
    started = threading.Event()

    def objective(p):
        if not started.is_set():  # the first: shuts the pool, its queued sibling cancelled
            started.set()
            pool.shutdown(wait=False, cancel_futures=True)
        return (p["x"] - 0.3) ** 2

    run = dict(initial=4, iterations=0, q=2, surrogate="gp-map", progress=False, out=tmp_path)
    result = bojax.minimize(objective, space, executor=pool, **run)
    # Which the driver meets first is a race: the queued sibling's cancellation, or the
    # pool refusing the next evaluation (the other path was red on a loaded CI machine).
    said = ("refused new work", "the executor cancelled an evaluation")
    assert any(why in result.stopped for why in said), result.stopped
    assert "kept in pending.json" in result.stopped
    assert all(r["status"] == "ok" for r in result.history) and len(result.history) == 1
    assert len(json.loads((tmp_path / "pending.json").read_text())) == 1
    with concurrent.futures.ThreadPoolExecutor(1) as again:
        resumed = bojax.minimize(objective, space, executor=again, resume=True, **run)
    assert [r["status"] for r in resumed.history] == ["ok"] * 4
    assert sorted(r["proposal"] for r in resumed.history) == [0, 1, 2, 3]


class _HoldsALock:
    def __init__(self):
        self.lock = threading.Lock()

    def __call__(self, p):
        return p["x"]


def test_an_objective_a_process_pool_cannot_receive_is_refused_before_any_evaluation(tmp_path):
    """Each design was sent, lost twice and journalled failed, the whole budget so (review)."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        with pytest.raises(ObjectiveError, match=r"cannot be sent to the executor's workers.*lock"):
            bojax.minimize(_HoldsALock(), SPACE, **FAST, executor=pool, out=tmp_path / "run")
    assert not (tmp_path / "run" / "journal.jsonl").exists()


def _closure(offset):
    def train(point, report):
        report(1, point["x"] + offset)

    return train


@pytest.mark.parametrize("kind", ["lambda", "step-wise closure"])
def test_a_process_pool_is_checked_with_its_own_pickler_before_any_evaluation(tmp_path, kind):
    """The check used cloudpickle, which takes lambdas and closures; the pool's standard
    pickle does not, so each design was lost twice and journalled failed (review BK), and a
    step-wise objective was not checked at all."""
    import multiprocessing

    objective = (lambda p: p["x"]) if kind == "lambda" else _closure(0.5)
    extra = {} if kind == "lambda" else {"max_step": 3, "early_stopping": "asha"}
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        with pytest.raises(ObjectiveError, match=r"process pool.*by reference"):
            bojax.minimize(objective, SPACE, **FAST, **extra, executor=pool, out=tmp_path / "r")
        assert not pool._processes  # nothing was submitted: no worker was started
    assert not (tmp_path / "r" / "journal.jsonl").exists()


def test_a_closed_dask_client_counts_as_one_worker_so_its_refusal_can_say_why():
    """Counting a closed client's workers raised AttributeError before any submission."""
    from bojax.bo.evaluation import concurrency

    class Closed:
        def nthreads(self):
            raise AttributeError("'NoneType' object has no attribute 'ncores'")

    assert concurrency(Closed()) == 1


@pytest.mark.slow  # 10 s of grace per evaluation for the thread that never ends
def test_an_isolated_evaluation_that_leaves_a_thread_running_returns_its_value(tmp_path):
    """The child's exit joined the objective's leftover non-daemon thread: the driver,
    waiting for the exit, timed out with the value written (review CO). A thread that
    ends soon (an asynchronous save) still finishes."""

    def leaves_threads_running(point, folder=tmp_path):
        import threading
        import time

        def save():
            time.sleep(1.0)
            (folder / f"saved-{point['x']:.9f}").write_text("done")

        threading.Thread(target=save).start()
        threading.Thread(target=time.sleep, args=(3600,)).start()  # a loader's, never ends
        return point["x"]

    result = bojax.minimize(leaves_threads_running, SPACE, initial=2, iterations=0,
                            isolate=True, timeout=40, **FAST)  # fmt: skip
    assert [r["status"] for r in result.history] == ["ok", "ok"]
    assert all(r["seconds"] < 30 for r in result.history)
    assert len(list(tmp_path.glob("saved-*"))) == 2

    def keeps_a_pool(point):  # its idle workers end at Python's exit when told to
        from concurrent.futures import ThreadPoolExecutor

        keeps_a_pool.pool = ThreadPoolExecutor(2)
        return sum(keeps_a_pool.pool.map(float, [point["x"]]))

    result = bojax.minimize(keeps_a_pool, SPACE, initial=2, iterations=0, isolate=True,
                            timeout=40, **FAST)  # fmt: skip
    assert all(r["status"] == "ok" and r["seconds"] < 8 for r in result.history)


def test_a_closed_dask_client_is_refused_as_a_setting_before_any_evaluation(tmp_path):
    """It ran as an objective's failure: ObjectiveError 'no evaluation finished'."""
    from distributed import Client, LocalCluster

    client = Client(LocalCluster(n_workers=1, processes=False, dashboard_address="127.0.0.1:0"))
    client.close()
    for executor in (client, client.get_executor()):
        with pytest.raises(SettingsError, match="the Dask client is closed"):
            bojax.minimize(lambda p: p["x"], SPACE, **FAST, executor=executor, out=tmp_path)
    assert not (tmp_path / "journal.jsonl").exists()


@pytest.mark.parametrize(
    "objective, says",
    [
        (lambda: 1.0, "objective(point): too many positional arguments"),
        (lambda a, b, c: 1.0, "objective(point): missing a required argument: 'b'"),
        (lambda point, callback: 1.0, "missing a required argument: 'callback'"),
        (lambda point, report, extra: 1.0, "train(point, report): missing a required argument"),
    ],
)
def test_an_objective_that_cannot_take_a_point_is_refused_before_it_runs(objective, says):
    """Each design was evaluated and journalled failed with the same TypeError (review)."""
    with pytest.raises(ObjectiveError, match=re.escape(says)):
        step_wise = dict(max_step=3) if "report" in says else {}
        bojax.minimize(objective, SPACE, initial=2, iterations=0, **step_wise, **FAST)


def test_a_decorator_that_hands_the_objective_an_argument_of_its_own_is_not_refused():
    """The signature check read the wrapped function's (point, data) and refused it."""
    import functools

    def with_data(f):
        @functools.wraps(f)
        def wrapper(point):
            return f(point, 0.7)

        return wrapper

    @with_data
    def objective(point, target):
        return (point["x"] - target) ** 2

    assert bojax.minimize(objective, SPACE, initial=2, iterations=0, **FAST).evaluations == 2


def test_run_options_from_numpy_are_journalled(tmp_path):
    """np.int64 iterations (a sweep's) passed the checks, then run.json could not be
    written: TypeError, not JSON serializable (review)."""
    import numpy as np

    run = dict(initial=np.int64(2), iterations=np.int64(0), retries=np.int64(2),
               time_budget=np.float32(100.0), out=tmp_path, **FAST)  # fmt: skip
    assert bojax.minimize(lambda p: p["x"], SPACE, **run).evaluations == 2
    header = json.loads((tmp_path / "run.json").read_text())
    assert header["options"]["time_budget"] == 100.0 and header["settings"]["initial"] == 2
    assert bojax.minimize(lambda p: p["x"], SPACE, resume=True, **run).evaluations == 2


def test_a_decorator_decides_whether_its_objective_is_step_wise_by_its_own_signature():
    """A wrapper that supplies report itself was sent down the step-wise path (its
    function has a report) and refused; one that passes its arguments on is step-wise."""
    import functools

    def quietly(train):  # supplies the report: a plain objective
        @functools.wraps(train)
        def wrapper(point):
            return train(point, report=lambda step, value: None)

        return wrapper

    def logged(train):  # passes everything on: step-wise as the function it wraps
        @functools.wraps(train)
        def wrapper(*args, **kwargs):
            return train(*args, **kwargs)

        return wrapper

    def train(point, *, report):
        for step in (1, 2):
            report(step, (point["x"] - 0.7) ** 2 + 1 / step)
        return (point["x"] - 0.7) ** 2 + 0.5

    plain = bojax.minimize(quietly(train), SPACE, initial=2, iterations=0, **FAST)
    assert plain.evaluations == 2 and plain.steps is None
    from bojax.bo.stepwise import takes_report

    assert takes_report(functools.lru_cache(train))  # (its own signature is unreadable)
    step_wise = bojax.minimize(logged(train), SPACE, initial=2, iterations=0, max_step=2,
                               early_stopping="none", **FAST)  # fmt: skip
    assert step_wise.steps == 4 and [r["status"] for r in step_wise.history] == ["ok"] * 2


def test_hung_work_is_given_up_once_workers_join_a_cluster_that_had_none(monkeypatch):
    """With no worker at the first count, nothing was ever counted as started, and the
    driver waited a day for a task that would never answer (review)."""
    monkeypatch.setattr(isolation, "NO_ANSWER_GRACE", 0.05)
    monkeypatch.setattr(isolation, "STARTUP_SECONDS", 0.0)
    monkeypatch.setattr(isolation.AnswerClock, "RECOUNT", 0.05)
    first = []

    class Joining:
        @property
        def _max_workers(self):  # none until half a second after the first submission
            return 1 if first and time.perf_counter() - first[0] > 0.5 else 0

        def submit(self, *args):
            first.append(time.perf_counter())
            return concurrent.futures.Future()  # never answers

    results = []

    def minimize():
        try:
            bojax.minimize(lambda p: p["x"], SPACE, executor=Joining(), q=1, timeout=0.05,
                           retries=0, initial=2, iterations=0, **FAST)  # fmt: skip
        except ObjectiveError as error:  # (every evaluation failed)
            results.append(error)

    run = threading.Thread(target=minimize, daemon=True)
    run.start()
    run.join(timeout=60)
    assert results, "the driver still waits for work no worker ever took"
    assert "gave no answer" in str(results[0])


def test_an_executor_that_cannot_send_the_objective_says_why_it_could_not():
    """Dask refuses an objective it cannot pickle with "Could not serialize object of
    type LLGExpr", raised from the pickler's reason: the run's error names that reason."""

    class Unsendable:
        def submit(self, fn, *args):
            try:
                raise TypeError("cannot pickle '_thread.lock' object")
            except TypeError as reason:
                raise TypeError("Could not serialize object of type LLGExpr") from reason

    with pytest.raises(ObjectiveError, match=r"LLGExpr.*caused by TypeError: cannot pickle"):
        bojax.minimize(lambda p: p["x"], Space([Real("x", 0.0, 1.0)]), executor=Unsendable(),
                       initial=2, iterations=0, progress=False)  # fmt: skip


def _crashes_at_step_two(point, report):
    import os

    for step in (1, 2, 3):
        if step == 2:
            os._exit(3)  # the process dies, and the reports of its segment with it
        report(step, point["x"] + 1.0 / step)


@pytest.mark.slow  # 9 s: four processes that import bojax
def test_an_isolated_segment_that_crashes_is_charged_a_step_as_in_freeze_thaw():
    """A later segment of an ASHA training that crashed (or timed out) came back with no
    reports and was charged nothing, though it trained; freeze-thaw charges such a
    segment one step, the floor of a failure that reports nothing (review BT)."""
    run = bojax.minimize(_crashes_at_step_two, SPACE, max_step=3, eta=3, early_stopping="asha",
                         step_budget=4, isolate=True, **FAST)  # fmt: skip
    record = run.history[0]  # its first segment (1 step), then the crash at step 2
    assert record["status"] == "failed" and "status 3" in record["error"]
    assert record["diagnostics"]["charged"] == 2
    assert run.steps == sum(r["diagnostics"]["charged"] for r in run.history) == 4


class _LosesLaterSegments(concurrent.futures.Executor):
    """Runs the first segment, loses the next two (a killed worker, then its retry)."""

    def __init__(self):
        self.submitted = 0

    def submit(self, fn, *args, **kwargs):
        self.submitted += 1
        future: concurrent.futures.Future = concurrent.futures.Future()
        if self.submitted in (2, 3):
            future.set_exception(RuntimeError("the worker was killed"))
        else:
            future.set_result(fn(*args, **kwargs))
        return future


def test_a_segment_the_executor_loses_is_charged_a_step_as_a_crashed_one():
    """A later segment that the executor lost (after its retries) was charged nothing,
    where a crashed one is charged a step (review of 12a0da1)."""

    def train(point, report):
        for step in (1, 2, 3):
            report(step, point["x"] + 1.0 / step)

    run = bojax.minimize(train, SPACE, max_step=3, eta=3, early_stopping="asha", q=1,
                         step_budget=4, executor=_LosesLaterSegments(), **FAST)  # fmt: skip
    record = run.history[0]  # its first segment (1 step), then lost at step 2
    assert record["status"] == "failed" and "segment lost" in record["error"]
    assert record["diagnostics"]["charged"] == 2
    assert run.steps == sum(r["diagnostics"]["charged"] for r in run.history) == 4


def test_a_resume_with_the_budget_spent_says_it_evaluated_nothing(tmp_path):
    """Every evaluation failed; the objective fixed, the resume with the same budget
    repeated the journalled error as if the fixed objective had failed again (review CI)."""
    with pytest.raises(ObjectiveError, match="every evaluation failed: 2 of 2") as first:
        bojax.minimize(lambda p: "hello", SPACE, initial=2, iterations=0, out=tmp_path, **FAST)
    assert "evaluated nothing" not in str(first.value)
    fixed = dict(initial=2, out=tmp_path, resume=True, **FAST)
    with pytest.raises(ObjectiveError, match="This call evaluated nothing: the run's 2 journal"):
        bojax.minimize(lambda p: p["x"], SPACE, iterations=0, **fixed)
    assert bojax.minimize(lambda p: p["x"], SPACE, iterations=1, **fixed).evaluations == 3


def test_a_resume_of_a_stopped_run_says_it_evaluated_nothing(tmp_path):
    """Stopped at max_failures, a resume ran nothing and repeated the error (review CJ)."""

    def boom(point):
        raise ValueError("boom")

    stopped = dict(initial=4, iterations=2, max_failures=2, out=tmp_path, **FAST)
    with pytest.raises(ObjectiveError, match="max_failures=2") as first:
        bojax.minimize(boom, SPACE, **stopped)
    assert "evaluated nothing" not in str(first.value)
    said = r"evaluated nothing: it stopped at once.*raise max_failures \(--max-failures\)"
    with pytest.raises(ObjectiveError, match=said):
        bojax.minimize(boom, SPACE, **stopped, resume=True)


def test_a_step_wise_resume_that_trains_nothing_says_so(tmp_path):
    """A step-wise resume repeated 'every training failed' as news (review CJ)."""

    def train(point, report):
        raise ValueError("tboom")

    run = dict(initial=2, iterations=0, max_step=3, out=tmp_path, **FAST)
    with pytest.raises(ObjectiveError, match="every training failed") as first:
        bojax.minimize(train, SPACE, **run)
    assert "trained nothing" not in str(first.value)
    with pytest.raises(ObjectiveError, match="This call trained nothing: the run's step budget"):
        bojax.minimize(train, SPACE, **run, resume=True)
