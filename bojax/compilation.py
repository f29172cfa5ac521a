"""Counting XLA compilations, to prove that a BO loop does not recompile every iteration.

    with count_compilations() as counts:
        run_the_loop()
    counts.of("log_marginal_likelihood")   # compilations of that jitted function

Listens to JAX's public monitoring event for backend compilations, which names the
jitted function (``jit(name)``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import jax

_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


class CompilationCounts:
    """Compilations seen inside :func:`count_compilations`, by jitted function name."""

    def __init__(self) -> None:
        self.by_function: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.by_function.values())

    def of(self, name: str) -> int:
        """Compilations of jitted functions whose name is ``name`` (``jit(name)``)."""
        return sum(c for fn, c in self.by_function.items() if fn in (name, f"jit({name})"))

    def __repr__(self) -> str:
        return f"CompilationCounts(total={self.total}, by_function={dict(self.by_function)})"


@contextmanager
def count_compilations() -> Iterator[CompilationCounts]:
    """Count every XLA compilation that happens inside the ``with`` block."""
    counts = CompilationCounts()

    def listener(event: str, duration: float, **kwargs) -> None:
        if event == _COMPILE_EVENT:
            counts.by_function[kwargs.get("fun_name", "?")] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield counts
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
