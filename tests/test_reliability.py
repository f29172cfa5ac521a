"""Runs that survive their objective: evaluations in a process of their own (timeouts,
crashes, kills), evaluations written down as started before they start (a design that
kills the driver is retried a bounded number of times, then recorded as failed), the run
folder's lock, objective returns that cannot be numbers, and `bojax show` of an
untrusted folder. Real subprocesses and real signals throughout."""

from __future__ import annotations

import fractions
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import bojax
from bojax.bo.evaluation import evaluate
from bojax.bo.isolation import evaluate_isolated
from bojax.bo.journal import Journal
from bojax.cli import app
from bojax.errors import RunFolderError, RunLockedError
from bojax.parameters import Categorical
from bojax.spaces import Real, Space

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


def test_an_unwritable_run_folder_is_a_typed_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(RunFolderError, match="cannot write the run folder"):
        bojax.minimize(lambda p: p["x"], SPACE, out=blocker / "run", **FAST)


# -- a design that kills the driver ----------------------------------------------------------
_DRIVER = """
import os, signal, sys
import bojax
from bojax.spaces import Real, Space

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


# -- a file objective on Dask workers ------------------------------------------------------------
@pytest.mark.slow  # a local Dask cluster of worker processes
def test_a_file_objective_runs_on_dask_workers_through_the_cli(tmp_path):
    """The workers cannot import ``bojax_user_train``: the objective must travel by value
    (it hung forever with 0 records while standard pickle sent it by reference)."""
    (tmp_path / "helper.py").write_text("def shift():\n    return 0.25\n")
    (tmp_path / "train.py").write_text(
        "from helper import shift\n\ndef objective(p):\n    return (p['x'] - shift()) ** 2\n"
    )
    (tmp_path / "space.toml").write_text("[x]\ntype = 'real'\nlow = 0\nhigh = 1\n")
    out = tmp_path / "run"
    command = [
        sys.executable, "-m", "bojax.cli", "optimize", f"{tmp_path / 'train.py'}:objective",
        "--space", str(tmp_path / "space.toml"), "--workers", "2", "--out", str(out),
        "--initial", "3", "--iterations", "1", "--surrogate", "gp-map", "--candidates", "64",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    records = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(r["status"] == "ok" for r in records), records
