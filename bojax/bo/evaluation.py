"""The one place bojax calls a user's objective: :func:`evaluate` and :func:`evaluate_batch`.

Whatever the objective does, an evaluation ends as ``(y, None)`` or ``(nan, why)``: an
exception is recorded with its type and message, and a return value that is not one
finite number (NaN, inf, a string, an array of several values) is a failure too, never
an exception in the driver. The driver hands :func:`evaluate` to an executor (anything
with ``submit(fn, *args)`` returning a :class:`concurrent.futures.Future`); without one
the :class:`Inline` executor runs it in the driver's process. Step-wise trainings are
called by :mod:`bojax.bo.segments`, isolated ones by :mod:`bojax.bo.isolation`.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import numbers
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import numpy as np

from bojax.errors import SettingsError

Objective = Callable[[dict[str, Any]], float]
Outcome = tuple[float, "str | None"]  # (y, None) or (nan, why the evaluation failed)


def evaluate(objective: Objective, point: dict[str, Any], attempt: int = 0):
    """``(y, None)`` or ``(nan, error text)``; never raises for the objective's errors.

    This is what runs on a worker. ``attempt`` only makes a retried submission a task of
    its own (Dask caches pure tasks by their arguments)."""
    del attempt
    try:
        value = objective(dict(point))
    except KeyboardInterrupt:  # Ctrl-C stops the run; the evaluation stays pending
        raise
    except BaseException as error:  # user code: record, don't end the run (sys.exit too)
        return math.nan, failure_text(error)
    try:
        return checked(value)
    except Exception as error:  # a value whose conversion itself raises
        return math.nan, f"objective returned an unusable {type(value).__name__}: {error}"


def refused(error: Exception) -> tuple[cf.Future, str]:
    """A submission the executor refused (a broken process pool, one shut down): a future
    failed with ``error``, handled as an evaluation the executor lost, and why the run
    starts nothing more."""
    future: cf.Future = cf.Future()
    future.set_exception(error)
    why = f"the executor refused new work: {failure_text(error)}"
    cause = _first_cause(error)
    return future, why if cause is None else f"{why} (caused by {failure_text(cause)})"


def _first_cause(error: BaseException) -> BaseException | None:
    """The exception at the bottom of ``error``'s ``raise ... from`` chain, None without
    one: Dask refuses an objective it cannot pickle with "Could not serialize object of
    type LLGExpr", from the pickler's own "cannot pickle '_thread.lock' object"."""
    cause, seen = error.__cause__, {id(error)}
    while cause is not None and cause.__cause__ is not None and id(cause) not in seen:
        seen.add(id(cause))
        cause = cause.__cause__
    return cause


# The longest error text a record keeps: a 5 MB message made a 5 MB journal line that
# `bojax show` printed whole.
ERROR_LIMIT = 2000


def pickled(value: Any) -> tuple[bytes | None, str | None]:
    """``(cloudpickle's bytes of value, None)``, or ``(None, why)`` where it cannot be
    pickled (one holding a lock, an open file). Pickling runs user code (``__reduce__``):
    anything may raise."""
    import cloudpickle

    try:
        return cloudpickle.dumps(value), None
    except Exception as error:
        return None, failure_text(error)


def unsendable(objective: Any, pool: Any) -> str | None:
    """Why ``pool`` cannot take ``objective``, or None. A ``ProcessPoolExecutor`` sends
    its tasks with the standard pickle (multiprocessing's), which names a function by its
    module and qualified name, so a lambda or a nested function fails there whatever
    cloudpickle could do; Dask uses cloudpickle, which still refuses a lock or an open
    file the objective holds; threads take anything. Checked before a run, else each
    design is lost on every attempt and journalled failed, the budget spent so."""
    import concurrent.futures as cf
    from multiprocessing.reduction import ForkingPickler

    import cloudpickle

    if isinstance(pool, DaskExecutor):  # Dask: cloudpickle, by value
        try:
            cloudpickle.dumps(objective)
        except Exception as error:  # (a lock, an open file: Dask logged pages, then lost it)
            return f"{failure_text(error)} (Dask sends it to its workers with cloudpickle)"
        return None
    if not isinstance(pool, cf.ProcessPoolExecutor):
        return None
    try:
        ForkingPickler.dumps(objective)
    except Exception as error:  # pickling runs user code (__reduce__): anything may raise
        return (
            f"{failure_text(error)} (a process pool pickles by reference: define the "
            "objective at a module's top level, or use a thread pool or Dask)"
        )
    return None


def failure_text(error: BaseException) -> str:
    """How a failed evaluation is journalled: ``"Type: message"``, the type alone where
    the message is empty (``MemoryError()`` read "MemoryError: " and, in a sentence,
    "MemoryError: ."), or the exit status of an objective that called ``sys.exit``; cut
    to ``ERROR_LIMIT`` characters, and never raising (an exception whose ``__str__``
    raises is named by its type)."""
    if isinstance(error, SystemExit):
        return f"the objective called sys.exit({short_repr(error.code)})"
    try:
        message = str(error)
        text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    except Exception as broken:  # its __str__ raised: the objective's problem, not the run's
        text = f"{type(error).__name__} (its message raised {type(broken).__name__})"
    return text if len(text) <= ERROR_LIMIT else text[: ERROR_LIMIT - 3] + "..."


def named_entries(value: Any) -> Mapping | None:
    """``value`` as a mapping from names to entries when it names its entries: any
    ``Mapping``, or a row labelled with text such as a pandas Series (read by label, not
    by position: a row of a data frame need not list the metrics in the run's order);
    None for anything else. ValueError where a label repeats."""
    if isinstance(value, Mapping):
        return value
    items, keys = getattr(value, "items", None), getattr(value, "keys", None)
    if not (callable(items) and callable(keys)) or isinstance(value, type):
        return None
    try:
        pairs = list(items())
    except Exception:  # an object whose items() is something else
        return None
    if not pairs or not all(isinstance(pair, tuple) and len(pair) == 2 for pair in pairs):
        return None
    names = [name for name, _ in pairs]
    if not all(isinstance(name, str) for name in names):  # a Series of numbers: not named
        return None
    if len(set(names)) != len(names):
        repeated = sorted({name for name in names if names.count(name) > 1})
        raise ValueError(f"metrics named more than once: {repeated}")
    return dict(pairs)


def checked(value: Any) -> tuple[Any, str | None]:
    """An objective's return value as ``(y, None)``, or ``(nan, why it is unusable)``. A
    dict of metrics (or a row labelled with their names, :func:`named_entries`) comes back
    as a dict of floats, each checked as one value."""
    try:
        named = named_entries(value)
    except ValueError as error:
        return math.nan, f"objective returned {error}"
    if named is not None:
        return checked_metrics(named)
    if np.ma.is_masked(value):  # a masked entry is a missing value, not its fill
        return math.nan, f"objective returned a masked value {short_repr(value)}"
    value = unwrapped(value)
    if isinstance(value, list | tuple | np.ndarray | jax.Array):
        kind = type(value).__name__
        returned = f"objective returned {kind} {short_repr(value)}"
        return math.nan, SeveralValues(f"{returned}, expected a number", returned)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        kind = type(value).__name__
        return math.nan, f"objective returned {kind} {short_repr(value)}, expected a number"
    try:
        value = float(value)
    except (OverflowError, ValueError, TypeError) as error:  # 10**400, odd Real subclasses
        return math.nan, f"objective returned {short_repr(value)}, not a float: {error}"
    if not math.isfinite(value):
        return math.nan, f"objective returned {value!r}"
    return value, None


class SeveralValues(str):
    """Why an outcome failed, when the objective returned several values (a tuple, a
    list, an array): of a kind no run declares, so while every outcome comes back so the
    driver takes it for the run's set-up (:func:`bojax.bo.driver._misdeclared`)."""

    returned: str  # "objective returned tuple (1.0, 2.0)"

    def __new__(cls, text: str, returned: str):
        error = super().__new__(cls, text)
        error.returned = returned
        return error

    def __reduce__(self):  # pickled across processes as itself
        return SeveralValues, (str(self), self.returned)


def unwrapped(value: Any) -> Any:
    """A one-element NumPy or JAX array as its Python scalar (a loss a training loop
    computed with ``jnp``); anything else as it is."""
    if isinstance(value, np.ndarray | jax.Array) and value.size == 1:
        return value.reshape(()).item()
    return value


def finite_number(value: Any) -> float | None:
    """``value`` as a float when it is one finite number (a Python or NumPy real or a
    one-element array), else None."""
    y, error = checked(value)
    return None if error is not None or isinstance(y, dict) else y


class Unusable(NamedTuple):
    """A metric that is not one finite number, and why: it fails the evaluation where the
    run declared that metric, and is left out of the record otherwise."""

    reason: str


def checked_metrics(value: Mapping) -> tuple[Any, str | None]:
    """A dict of metrics as ``({name: float or Unusable}, None)``, or ``(nan, why)``:
    names are text, and a value that is not one finite number is :class:`Unusable`."""
    metrics = {}
    for name, entry in value.items():
        if not isinstance(name, str):
            return (
                math.nan,
                f"objective returned a metric named {short_repr(name, 80)}; names are text",
            )
        y, error = checked(entry)
        if isinstance(y, dict):  # a dict (or labelled row) inside the dict
            y, error = math.nan, "a dict"
        metrics[name] = y if error is None else Unusable(error)
    if not metrics:
        return math.nan, "objective returned an empty dict of metrics"
    return metrics, None


def short_repr(value: Any, limit: int = 200) -> str:
    """``repr(value)`` cut to ``limit`` characters: a journal line stays readable."""
    try:
        text = repr(value)
    except Exception as error:  # a broken __repr__ is the objective's problem, not ours
        text = f"<{type(value).__name__} whose repr raised {type(error).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Inline:
    """Evaluates in the driver's process at ``submit``: the executor of a sequential run."""

    def submit(self, fn, *args):
        future: cf.Future = cf.Future()
        future.set_result(fn(*args))
        return future


class DaskExecutor(cf.Executor):
    """A Dask ``Client`` as a ``concurrent.futures`` executor; tasks are impure, so a
    retried one runs again.

    Dask's own (``client.get_executor()``) completes each future from a coroutine on the
    client's event loop, and when a worker died holding a finished result, the fetch's
    ``KilledWorker`` escaped that coroutine: the future never completed and the run
    waited for ever (review CA). Here the Dask future's done-callback hands its outcome
    over from a thread of its own (fetching a result may wait for Dask to compute it
    again), and any error of the fetch becomes the future's: an evaluation lost."""

    def __init__(self, client: Any):
        self._client = client

    def submit(self, fn, *args, **kwargs) -> cf.Future:
        task = self._client.submit(fn, *args, pure=False, **kwargs)
        future: cf.Future = cf.Future()
        future.add_done_callback(lambda f: task.cancel() if f.cancelled() else None)
        task.add_done_callback(lambda done: _hand_over(done, future))
        return future


def _hand_over(task: Any, future: cf.Future) -> None:
    """Complete ``future`` with Dask future ``task``'s outcome, from a new thread."""

    def transmit() -> None:
        if task.status == "cancelled":
            if future.cancel():  # (wakes a waiter only with the call that follows)
                future.set_running_or_notify_cancel()
            return
        try:
            result = task.result()
        except BaseException as error:  # the task's, or the fetch's (KilledWorker)
            if not future.done():
                future.set_exception(error)
            return
        if not future.done():
            future.set_result(result)

    threading.Thread(target=transmit, daemon=True, name="bojax-dask-result").start()


def as_executor(executor: Any) -> Any:
    """A ``concurrent.futures``-style executor for ``executor``: a Dask ``Client`` (or the
    executor it makes) becomes a :class:`DaskExecutor`, anything else is used as it is."""
    if executor is None:
        return Inline()
    if type(executor).__module__.startswith("distributed") and hasattr(executor, "_client"):
        executor = executor._client  # client.get_executor(): the same, but safe
    if hasattr(executor, "get_executor"):
        if getattr(executor, "status", None) in ("closing", "closed"):
            raise SettingsError("executor: the Dask client is closed; pass an open one")
        return DaskExecutor(executor)
    if not callable(getattr(executor, "submit", None)):
        raise SettingsError(f"executor must have a submit(fn, *args) method, got {executor!r}")
    return executor


def workers_said(executor: Any) -> int | None:
    """How many evaluations ``executor`` says it runs at once (a Dask client: its worker
    threads now, perhaps none yet); None where it does not say, or cannot (closed)."""
    client = getattr(executor, "_client", executor)
    try:
        if hasattr(client, "nthreads"):  # Dask: one evaluation per worker thread
            return sum(client.nthreads().values())
        workers = getattr(executor, "_max_workers", None)
        return None if workers is None else int(workers)
    except Exception:  # a closed client: its submissions say so, as refusals
        return None


def concurrency(executor: Any) -> int:
    """How many evaluations ``executor`` runs at once, where it says; else 1."""
    return max(1, workers_said(executor) or 1)


# The longest a wait for evaluations lasts before it looks at them again: an executor shut
# down with ``cancel_futures=True`` cancels its queued work without waking a waiter.
POLL_SECONDS = 1.0


def first_done(futures, timeout: float | None) -> set:
    """The ``futures`` that are done, once at least one is or after ``timeout`` seconds
    (None: no limit). ``cf.wait`` alone never returned a future its executor cancelled
    (``shutdown(cancel_futures=True)`` notifies no waiter) and the run hung; those are
    looked for every ``POLL_SECONDS`` and count as done."""
    deadline = math.inf if timeout is None else time.perf_counter() + timeout
    while True:
        left = max(0.0, deadline - time.perf_counter())
        done, _ = cf.wait(futures, timeout=min(POLL_SECONDS, left), return_when=cf.FIRST_COMPLETED)
        done |= {future for future in futures if future.cancelled()}
        if done or time.perf_counter() >= deadline:
            return done


def evaluate_batch(objective: Any, points: list[dict[str, Any]]) -> list[Outcome]:
    """Outcomes of ``points`` from one ``objective.batch(points)`` call (one vmapped
    program, as :class:`bojax.objectives.ensemble.EnsembleObjective` has); if that raises
    or returns the wrong number of values, each point alone, so one bad design cannot
    fail the others."""
    try:
        values = list(objective.batch([dict(p) for p in points]))
        if len(values) != len(points):
            raise ValueError(f"batch returned {len(values)} values for {len(points)}")
        return [checked(value) for value in values]
    except Exception:
        return [evaluate(objective, point) for point in points]
