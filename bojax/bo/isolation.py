"""Evaluations in a process of their own: a hang, a crash or an out-of-memory kill of the
objective is recorded as a failed evaluation instead of taking the run down.

:func:`evaluate_isolated` starts a fresh Python (``python -m bojax.bo.isolation``), hands
it the objective and the point (pickled with ``cloudpickle``, so functions of ``__main__``
and of objective files travel by value), waits at most ``timeout`` seconds, and reads the
outcome back from a file (the objective's own prints go to the terminal as usual). The
child runs in a session of its own, so a timeout kills it together with anything it
started (data-loader processes, compilers), and whatever it started and left running
when it ended (returned, crashed, killed for memory) is killed then: what stays in its
process group, which is all a plain ``subprocess``/``multiprocessing`` start does (one
that moves itself to a group of its own is beyond reach). What is recorded when it
goes wrong:

* a timeout: ``"timed out after 60 s"``;
* a signal: ``"the evaluation's process was killed by SIGKILL (out of memory?)"``, or
  ``SIGSEGV`` and so on;
* ``sys.exit(3)`` in the objective: ``"the objective called sys.exit(3)"``, as inline;
* an exit without an outcome (``os._exit``): its exit status.

Each evaluation pays for a process start and the imports of the objective (about a
second with JAX, several under load), so isolate objectives that take much longer than
that or that may hang or crash. The ``timeout`` counts from the objective's start, after
that (with a timeout, a start itself is bounded by ``STARTUP_SECONDS``). Inside a Dask
worker or a process pool it works the same way, and the worker survives what kills the
objective. The child ends itself when the process that started it dies, so a killed
driver or worker leaves no orphaned training behind; the task's folder (``bojax-
evaluation-<host and PID namespace>-<pid>-*`` in the temporary directory, which holds
the pickled objective and whatever data it closes over) goes with it, and the first
isolated evaluation of a later process in the same PID namespace removes those of
processes killed after their child ended.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bojax.bo.evaluation import Inline, Objective, Outcome, evaluate, pickled, workers_said


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _why_died(returncode: int) -> str:
    if returncode < 0:
        name = _signal_name(-returncode)
        hint = " (out of memory?)" if name == "SIGKILL" else ""
        return f"the evaluation's process was killed by {name}{hint}"
    return f"the evaluation's process exited with status {returncode} before returning"


def _kill(process: subprocess.Popen) -> None:
    """Kill the child and everything in its session, then reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.wait()


def _end_session(process: subprocess.Popen) -> None:
    """Kill what an ended child left running in its process group (a data loader, a
    training run as a subprocess): a process that crashed, was killed for memory or
    returned left them re-parented to init, holding memory or a GPU. Its pid stays
    reserved while the group has members, so the kill reaches none but them."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # none left


def evaluate_isolated(
    objective: Objective, point: dict[str, Any], timeout: float | None = None, attempt: int = 0
) -> Outcome:
    """``(y, None)`` or ``(nan, why)`` from ``objective(point)`` run in a fresh process,
    killed after ``timeout`` seconds (no limit when None). Never raises for what the
    objective or its process does; ``attempt`` only keeps retried tasks distinct."""
    del attempt
    done, result = run_isolated(evaluate, (objective, dict(point)), timeout)
    return result if done else (math.nan, result)


PREFIX = "bojax-evaluation-"
STARTED = "started"  # the child's mark that its task is loaded (imports done)
WATCHED = "watched"  # the driver's mark that its watchdog runs (or cannot run)
# How long a process may take to start and load its task before it counts as failed
# (the timeout then counts from the task's start).
STARTUP_SECONDS = 120.0
# Seconds past its ``timeout`` (at least; or the timeout itself, if longer) that a run
# waits for an executor's answer before it counts the evaluation or segment as lost:
# room for a process start, imports and a busy scheduler.
NO_ANSWER_GRACE = 60.0


def answer_limit(timeout: float | None) -> float | None:
    """Seconds after handing work with ``timeout`` to an executor past which an answer
    is given up (a hung worker, a task its scheduler dropped): the process's start, the
    timeout and the grace; None without a timeout (nothing bounds the work)."""
    if timeout is None:
        return None
    return STARTUP_SECONDS + timeout + max(NO_ANSWER_GRACE, timeout)


class AnswerClock:
    """When work handed to an executor that runs ``workers()`` tasks at once could start,
    when it ended, and so when its answer is overdue: ``limit`` seconds
    (:func:`answer_limit`) after it could start.

    An executor runs its tasks first in, first out; those beyond its workers wait in its
    queue, and a task's clock starts when an earlier one ends (or is given up), not at its
    submission: with ``q`` above the workers, an evaluation queued behind slow ones was
    given up as lost before it began (review). Ends are taken from the futures' done
    callbacks, so a driver busy fitting its model neither delays a start nor lengthens a
    measured evaluation. ``workers()`` is read again at most every ``RECOUNT`` seconds (a
    Dask cluster grows); where it is None (an executor that does not say, or inline
    work) nothing is queued: each clock starts as the work is handed over."""

    RECOUNT = 5.0

    def __init__(self, limit: float | None, workers=lambda: None):
        self.limit, self._workers = limit, workers
        self._lock = threading.Lock()  # (done callbacks run on the executor's threads)
        self._count, self._counted = None, -math.inf
        self.handed: dict[Any, float] = {}  # every future taken, as it was handed over
        self.queued: dict[Any, None] = {}  # waiting for a worker, in submission order
        self.began: dict[Any, float] = {}  # once it could start
        self.busy: set = set()  # holding a worker
        self.ended: dict[Any, float] = {}  # once done

    @classmethod
    def for_pool(cls, pool: Any, timeout: float | None) -> AnswerClock:
        """The clock of work handed to ``pool`` with ``timeout``: its workers as the pool
        says them (:func:`~bojax.bo.evaluation.workers_said`), none for inline work."""
        if isinstance(pool, Inline):
            return cls(answer_limit(timeout))
        return cls(answer_limit(timeout), lambda: workers_said(pool))

    def submitted(self, future: Any, at: float | None = None) -> None:
        """``future`` handed over at ``at`` (a ``perf_counter``; default now)."""
        self._recount()
        with self._lock:
            self.handed[future] = time.perf_counter() if at is None else at
            self.queued[future] = None
            self._start(since=-math.inf)  # a free worker takes it as it is handed over
        future.add_done_callback(self._done)  # (at once where it is done already)

    def _done(self, future: Any) -> None:
        with self._lock:
            if future in self.handed and future not in self.ended:
                self.ended[future] = time.perf_counter()
                self._free(future)

    def answered(self, future: Any) -> None:
        """Forget ``future``, back or given up (its worker then takes the next task)."""
        self._recount()
        with self._lock:
            self._free(future)
            for taken in (self.handed, self.queued, self.began, self.ended):
                taken.pop(future, None)

    def ended_at(self, future: Any) -> float:
        """The ``perf_counter`` at which ``future`` ended (its done callback ran); inf
        while that is not known."""
        with self._lock:
            return self.ended.get(future, math.inf)

    def start(self, future: Any) -> float:
        """The ``perf_counter`` at which ``future`` could start: as it was handed over, or
        once a worker was free for it (as handed over for one that ended while counted
        as queued: the executor runs more at once than it says)."""
        with self._lock:
            return self.began.get(future, self.handed[future])

    def seconds(self, future: Any) -> float:
        """Seconds from when ``future`` could start to its end (or now)."""
        began = self.start(future)
        with self._lock:
            return self.ended.get(future, time.perf_counter()) - began

    def _free(self, future: Any) -> None:
        self.queued.pop(future, None)
        self.busy.discard(future)
        self._start(since=time.perf_counter())  # (its worker, or one counted anew)

    def _recount(self) -> None:
        """Ask for the workers again if ``RECOUNT`` seconds have passed; never under the
        lock: a Dask client answers on its event loop's thread, which runs done callbacks."""
        now = time.perf_counter()
        if now - self._counted >= self.RECOUNT:
            count = self._workers()
            with self._lock:
                self._count, self._counted = count, now
                self._start(since=now)  # workers that joined take the queue's first

    def _start(self, since: float) -> None:
        """Start the queue's first while workers are free, not before ``since``."""
        workers = math.inf if self._count is None else self._count
        while self.queued and len(self.busy) < workers:
            future = next(iter(self.queued))
            del self.queued[future]
            self.busy.add(future)
            self.began[future] = max(self.handed[future], since)

    def seconds_left(self) -> float | None:
        """Seconds until the first task holding a worker is overdue, at least 0; None
        without a limit or any task; ``RECOUNT`` while all wait (none may run yet: a
        cluster whose workers have not joined)."""
        self._recount()
        with self._lock:
            if self.limit is None or not (self.busy or self.queued):
                return None
            if not self.busy:
                return self.RECOUNT
            first = min(self.began[future] for future in self.busy)
        return max(0.0, first + self.limit - time.perf_counter())

    def overdue(self, timeout: float | None, what: str) -> tuple[list, TimeoutError | None]:
        """``(futures, error)``: the started futures past the limit, in submission order,
        and the TimeoutError that says so for a ``what`` ("evaluation", "segment"). One
        that has just answered is left to the next wait."""
        if self.limit is None:
            return [], None
        self._recount()
        now = time.perf_counter()
        with self._lock:
            late = [f for f in self.handed if f in self.busy and now - self.began[f] >= self.limit]
        error = TimeoutError(
            f"the executor gave no answer {self.limit:g} s after the {what} could start "
            f"(timeout={timeout:g} s)"
        )
        return [f for f in late if not f.done()], error


@functools.cache
def _owner() -> str | None:
    """A tag of this host and PID namespace, or None where it cannot be known (no
    ``/proc``): a pid means a process only within its namespace, and another container
    sharing ``/tmp`` would see this one's live pids as dead."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return hashlib.sha256(f"{socket.gethostname()} {namespace}".encode()).hexdigest()[:10]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


@functools.cache  # once per process: the folders left behind do not grow during a run
def _remove_orphaned_folders() -> None:
    """Remove the task folders of this user's processes, on this host and in this PID
    namespace, that were killed before they could (a driver or Dask worker SIGKILLed
    while its evaluation's child was done)."""
    owner = _owner()
    if owner is None:  # pids cannot be told apart from another namespace's: keep all
        return
    for folder in Path(tempfile.gettempdir()).glob(f"{PREFIX}{owner}-*-*"):
        pid = folder.name[len(PREFIX) + len(owner) + 1 :].split("-", 1)[0]
        try:
            mine = folder.stat().st_uid == os.getuid()
        except OSError:
            continue
        if mine and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


_task_folder: Path | None = None  # set in an isolated child: its task's folder


def task_folder() -> Path | None:
    """The folder of the isolated task this process runs (where it may leave what a
    ``salvage`` of :func:`run_isolated` reads back if it is killed), None elsewhere."""
    return _task_folder


def run_isolated(
    task: Any, args: tuple, timeout: float | None = None, salvage=None
) -> tuple[bool, Any]:
    """``(True, task(*args))`` computed in a fresh process, or ``(False, why)`` when the
    task could not be sent, timed out or its process died; then ``salvage(folder)``, if
    given, reads what the task left in its folder (:func:`task_folder`) before the folder
    goes. ``task`` must not raise for what user code does
    (:func:`~bojax.bo.evaluation.evaluate` does not); what it returns travels back
    pickled."""
    _remove_orphaned_folders()
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}{_owner()}-{os.getpid()}-") as folder:
        done, result = _run_in(Path(folder), task, args, timeout)
        if not done and salvage is not None:
            salvage(Path(folder))
        return done, result


def _run_in(folder: Path, task: Any, args: tuple, timeout: float | None) -> tuple[bool, Any]:
    """:func:`run_isolated` with its task's ``folder``."""
    import cloudpickle

    sent, outcome = folder / "task.pkl", folder / "outcome.pkl"
    try:
        sent.write_bytes(cloudpickle.dumps((task, args)))
    except Exception as error:
        return False, f"the objective cannot be sent to a process: {error}"
    env = dict(os.environ)
    # The child sees the modules the parent sees (a script's folder, plugins).
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    process = subprocess.Popen(
        [sys.executable, "-m", "bojax.bo.isolation", str(sent), str(outcome), str(os.getpid()),
         WATCHED],
        env=env,
        start_new_session=True,
    )  # fmt: skip
    watchdog = None
    try:
        watchdog = _start_watchdog(process.pid, folder)
        try:
            (folder / WATCHED).touch()  # the child may start its task
        except OSError as error:  # (a full disk, a folder removed meanwhile)
            _kill(process)
            return False, f"the evaluation's process could not be told to start: {error}"
        # The timeout counts from the task's start, not the process's: a start and
        # its imports take seconds under load (review: 83 healthy segments of 129
        # timed out at 5 s with two workers on a busy core).
        if timeout is not None and not _wait_for_start(process, folder / STARTED):
            _kill(process)
            return False, f"the evaluation's process did not start in {STARTUP_SECONDS:g} s"
        returncode = process.wait(timeout=timeout)
        _end_session(process)
    except subprocess.TimeoutExpired:
        _kill(process)
        return False, f"timed out after {timeout:g} s"
    except BaseException:  # the driver is interrupted: leave no orphan behind
        _kill(process)
        raise
    finally:
        if watchdog is not None:
            watchdog.kill()
            watchdog.wait()
    if returncode == 0 and outcome.exists():
        return cloudpickle.loads(outcome.read_bytes())
    return False, _why_died(returncode)


# The watchdog, a process of the driver's: the evaluation's own watching thread never
# runs while the evaluation holds the GIL in C (a regex backtracking, an extension's
# loop), and such an evaluation outlived its SIGKILLed driver. Once the driver is gone
# (the watchdog's parent changed), it kills the evaluation's process group (the
# evaluation and what it started) unless the evaluation's pid now names a process
# started at another time (a reused pid; while the group has members its id is not
# reused), then removes the folder. A child of the driver, not of the evaluation: an
# evaluation that reaps all its children (waitpid(-1) until none) would wait for it
# forever, and a driver that is PID 1 reaps it (review CT).
_WATCHDOG = """\
import os, shutil, signal, sys, time
driver, child, birth = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
folder, interval = sys.argv[4], float(sys.argv[5])
while os.getppid() == driver:
    time.sleep(interval)
try:
    with open(f"/proc/{child}/stat") as stat:
        now = stat.read().rsplit(")", 1)[1].split()[19]
except (OSError, IndexError):
    now = None
if now in (birth, None):
    try:
        os.killpg(child, signal.SIGKILL)
    except OSError:
        pass
shutil.rmtree(folder, ignore_errors=True)
"""


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` from ``/proc`` (Linux), None if unreadable or if
    ``/proc`` is not this process's PID namespace's (then its pids name others)."""
    try:
        if os.readlink("/proc/self") != str(os.getpid()):
            return None
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _start_watchdog(child: int, folder: Path, interval: float = 0.5):
    """The watchdog of the evaluation process ``child`` (:data:`_WATCHDOG`), or None where
    it cannot run (no usable ``/proc``, or no process to spare): the evaluation's thread
    then watches alone."""
    birth = _start_time(child)
    if birth is None:
        return None
    arguments = [str(os.getpid()), str(child), birth, str(folder), str(interval)]
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG, *arguments],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C of the terminal's group leaves it be
        )
    except OSError:
        return None


def _wait_for_start(process: subprocess.Popen, started: Path) -> bool:
    """Wait until the child has loaded its task (``started`` exists) or ended; False if
    neither within ``STARTUP_SECONDS``."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while not started.exists() and process.poll() is None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _exit_with_parent(
    folder: Path, parent: int, interval: float = 0.5, watched: bool = False
) -> None:
    """End this process once ``parent``, the process that started it, is gone (a
    SIGKILLed driver or Dask worker): its timeout died with it, and a hung training must
    not hold a GPU on. The task's folder goes too: the parent that would have removed it
    is gone. ``parent`` comes from the parent itself: read here, after the seconds of
    importing bojax, it would be init's pid for a parent killed meanwhile (review).
    A thread of this process watches, which cannot while the evaluation holds the GIL in
    C: on Linux the driver's watchdog (:func:`_start_watchdog`) covers that, so with
    ``watched`` (a driver that marks it) the task waits here for the driver's word that
    it runs (a driver killed before starting it left a thread that lost the GIL to the
    task for good, review CU). A driver of an older bojax marks nothing (review CV)."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        _abandon(folder)

    threading.Thread(target=watch, name="bojax-parent-watch", daemon=True).start()
    while watched and not (folder / WATCHED).exists():
        if os.getppid() != parent:
            _abandon(folder)
        time.sleep(0.005)


def _abandon(folder: Path) -> None:
    """End this evaluation, whose driver is gone, with its folder and what it started
    (a training run as a subprocess)."""
    shutil.rmtree(folder, ignore_errors=True)
    try:
        os.killpg(os.getpid(), signal.SIGKILL)  # (this process leads its session)
    finally:
        os._exit(70)


def _leave(seconds: float = 10.0) -> None:
    """End the child once its outcome is written. The threads the evaluation left
    running (an asynchronous save, say) and then the exit handlers (a log's flush) get
    ``seconds`` in all; then the process exits without waiting further. Python's own exit
    joined every non-daemon thread without a limit: a data loader's that never ends made
    the parent, waiting for the exit, time out or hang with the result written (review
    CO)."""
    import atexit
    import threading

    deadline = time.monotonic() + seconds
    # First what Python's exit does before joining: its threading hooks tell a kept
    # ThreadPoolExecutor's idle workers to end (else each evaluation waited the grace).
    for hook in reversed(getattr(threading, "_threading_atexits", [])):
        try:
            hook()
        except Exception:  # (as at Python's exit: one hook's error stops no other)
            pass
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    handlers = threading.Thread(target=atexit._run_exitfuncs, daemon=True)
    handlers.start()
    handlers.join(max(1.0, deadline - time.monotonic()))
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed by the evaluation
            pass
    os._exit(0)


def _child(sent: str, outcome: str, parent: int, watched: bool = False) -> None:
    """The child's side: load the task, run it, write ``(done, result)`` atomically."""
    import cloudpickle

    # This file runs as __main__: the tasks read the folder from the imported module.
    from bojax.bo import isolation

    isolation._task_folder = Path(sent).parent
    _exit_with_parent(isolation._task_folder, parent, watched=watched)
    try:
        task, args = cloudpickle.loads(Path(sent).read_bytes())
    except Exception as error:
        result = (
            False,
            f"the objective could not be loaded in a fresh process: {type(error).__name__}: "
            f"{error}",
        )
    else:
        (Path(sent).parent / STARTED).touch()  # the parent's timeout starts now
        result = (True, task(*args))
    payload, why = pickled(result)
    if payload is None:
        payload = cloudpickle.dumps(
            (False, f"its result cannot be sent back from its process: {why}")
        )
    partial = Path(outcome + ".tmp")
    partial.write_bytes(payload)
    os.replace(partial, outcome)
    _leave()


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:] == [WATCHED])
