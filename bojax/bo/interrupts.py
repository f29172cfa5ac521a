"""SIGTERM stops a run the way Ctrl-C does.

A cluster's scheduler preempts a job with SIGTERM (SLURM, Kubernetes, ``timeout``,
``kill``), and by default that kills Python at once: the evaluation in flight keeps the
start it was charged, so a design preempted ``retries + 1`` times was journalled as
failed, as if it killed its process. While :func:`minimize <bojax.bo.driver.minimize>`
runs, SIGTERM raises :class:`Terminated` (a ``KeyboardInterrupt``) instead, and every
path that handles Ctrl-C handles it: the starts of the evaluations in flight are given
back in ``pending.json`` and a resume runs them again.

Only where that is safe: in the main thread (the only one Python delivers signals to),
and only while SIGTERM has its default action, so a handler of the user's (or of an
enclosing run) is left alone. Processes forked while the handler is installed (a process
pool's workers, isolated evaluations) get the default action back, so terminating them
still ends them at once.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_installed = False  # whether this module's handler is SIGTERM's now (read after a fork)


class Terminated(KeyboardInterrupt):
    """The run received SIGTERM; handled as Ctrl-C (nothing finished is lost)."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated("SIGTERM")


def _default_in_child() -> None:
    if _installed:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


os.register_at_fork(after_in_child=_default_in_child)


def sigterm_as_interrupt(function: F) -> F:
    """``function`` with SIGTERM raising :class:`Terminated` while it runs (where that is
    safe: see the module docstring), and the default action restored afterwards unless
    something (the objective, a library it started) installed a handler of its own."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _installed
        main = threading.current_thread() is threading.main_thread()
        if not main or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return function(*args, **kwargs)
        signal.signal(signal.SIGTERM, _raise_terminated)
        _installed = True
        try:
            return function(*args, **kwargs)
        finally:
            _installed = False
            if signal.getsignal(signal.SIGTERM) is _raise_terminated:  # (not one set since)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)

    return wrapper  # type: ignore[return-value]
