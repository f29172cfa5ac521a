"""A run's wall-clock budget (the ``time_budget`` setting).

Once ``time_budget`` seconds have passed since the call began, the run starts no new
work: no new evaluation, training or training segment. What is running finishes and is
journalled (stopping it would lose it), so a call may end later than its budget by one
evaluation or segment, and it always finishes one. The run's ``Result.stopped`` says
why it ended, and ``resume=True`` continues it with a fresh budget for the new call (the
way a job scheduler's time limit counts each job). Not part of the run's identity: a
resumed run may change it.
"""

from __future__ import annotations

import time


class Deadline:
    """Whether ``seconds`` (None: no limit) have passed since ``started`` (a
    ``time.perf_counter()`` reading; default now)."""

    def __init__(self, seconds: float | None, started: float | None = None):
        self.seconds = seconds
        self.started = time.perf_counter() if started is None else started

    def reached(self, finished: int) -> bool:
        """Whether to start nothing more: the seconds have passed and at least one
        evaluation or segment has ``finished`` (so that every run has a result)."""
        spent = time.perf_counter() - self.started
        return finished > 0 and self.seconds is not None and spent >= self.seconds

    def why(self, done: str) -> str:
        """``Result.stopped`` for a run the deadline ended after ``done``."""
        return f"time_budget of {self.seconds:g} s spent after {done}; resume the run to continue"
