"""Counting XLA compilations, to prove that a BO loop does not recompile every iteration.

    with count_compilations() as counts:
        run_the_loop()
    counts.of("log_marginal_likelihood")   # compilations of that jitted function

Listens to JAX's public monitoring event for backend compilations, which names the
jitted function (``jit(name)``).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

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


def jit_quick_compile(fn: Callable, static_argnums: tuple[int, ...] = ()) -> Callable:
    """``jax.jit(fn)``, compiled at LLVM optimisation level 1 when running on CPU.

    For the network trainers (a long ``while_loop``/``scan`` of small matmuls): on CPU the
    ensemble trainer compiled in 1.6 s instead of 2.4 s at level 1, with the same speed
    afterwards (docs/design.md). Other backends keep their defaults.
    """
    jitted: dict[str, Any] = {}

    @functools.wraps(fn)
    def call(*args):
        backend = jax.default_backend()
        if backend not in jitted:
            options = {"xla_backend_optimization_level": 1} if backend == "cpu" else None
            jitted[backend] = jax.jit(fn, static_argnums=static_argnums, compiler_options=options)
        return jitted[backend](*args)

    return call
