"""Compilation: counting XLA compilations, and the persistent cache that spares a second run
the compile wait.

    with count_compilations() as counts:
        run_the_loop()
    counts.of("log_marginal_likelihood")   # compilations of that jitted function

Counting listens to JAX's public monitoring event for backend compilations, which names
the jitted function (``jit(name)``). :func:`use_persistent_cache` points JAX's
persistent compilation cache at a per-user folder (``BOJAX_COMPILATION_CACHE`` moves it,
``off`` disables it); BO runs and the ``bojax`` command call it. :func:`bucket_size` is
the padded size that keeps a growing array's shapes, and so its compilations, few.
"""

from __future__ import annotations

import functools
import math
import os
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
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
def count_compilations(fresh: bool = False) -> Iterator[CompilationCounts]:
    """Count every XLA compilation that happens inside the ``with`` block.

    ``fresh=True`` first drops every compiled program of this process
    (``jax.clear_caches()``), so the counts do not depend on what ran before: a guard
    such as ``counts.of("_fit") == 1`` then also fails where a function compiles once per
    iteration and earlier code had happened to compile the same shapes."""
    if fresh:
        jax.clear_caches()
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


# A compiled XLA program stays mapped into the process until JAX drops it (on CPU some
# 180 memory maps each); a long exact phase in batches of 16 adds ~1,800 maps a batch and
# passed Linux's default limit of 65,530 maps (LLVM "Cannot allocate memory", then a
# segfault). Past this share of the limit, every compiled program is dropped.
MAP_SHARE = 0.5
releases = 0  # how often this process dropped its programs (read by tests and benchmarks)
# Reading /proc/self/maps costs about 1 ms per thousand maps (10 ms at 8,400, an ASHA
# run's): a look is taken only after a compilation since the last one, the only thing
# that adds programs' maps, unless that look was already past the share.
_compiled = 0  # programs this process compiled (counted by _on_compile)
_last_look: tuple[int, int] | None = None  # (_compiled, maps) at the last look


def _on_compile(event: str, duration: float, **kwargs) -> None:
    global _compiled
    if event == _COMPILE_EVENT:
        _compiled += 1


jax.monitoring.register_event_duration_secs_listener(_on_compile)


def _count_lines(path: str) -> int | None:
    try:
        with open(path, "rb") as lines:
            return sum(1 for _ in lines)
    except OSError:  # no /proc (macOS, Windows): nothing to guard
        return None


@functools.cache
def _map_limit() -> int | None:
    """The kernel's limit on a process's memory maps, read once (None without /proc)."""
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        return None


def release_if_crowded(share: float | None = None) -> bool:
    """Drop every compiled program (``jax.clear_caches()``) when this process's memory
    maps pass ``share`` (default :data:`MAP_SHARE`) of the kernel's limit
    (``/proc/sys/vm/max_map_count``); return whether it did.

    Called by every model-based :func:`bojax.bo.loop.ask_batch`: a program the run still
    needs compiles again (or loads from the persistent cache), once; results do not
    change. Where there is no ``/proc`` it does nothing."""
    global releases, _last_look
    share = MAP_SHARE if share is None else share
    limit = _map_limit()
    if limit is None:
        return False
    if _last_look is not None and _last_look[0] == _compiled and _last_look[1] < share * limit:
        return False  # nothing compiled since a look below the share
    used = _count_lines("/proc/self/maps")
    if used is None:
        return False
    _last_look = (_compiled, used)
    if used < share * limit:
        return False
    jax.clear_caches()
    releases += 1
    return True


CACHE_VARIABLE = "BOJAX_COMPILATION_CACHE"
# Every program is cached: JAX's default (only those that compile in over 1 s) kept 5 of
# the 37 programs of `bojax optimize forrester`; a cached one loads in ~7 ms.
_CACHE_MIN_COMPILE_SECONDS = 0.0


def default_cache_folder() -> Path:
    """``$XDG_CACHE_HOME/bojax/jax`` (``~/.cache/bojax/jax`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "bojax" / "jax"


def _xla_logs_quiet() -> bool:
    """Whether XLA's C++ log hides errors. It reads ``TF_CPP_MIN_LOG_LEVEL`` once, when
    jaxlib loads; JAX itself sets 1 if unset, and bojax sets 3 when imported first."""
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0")) >= 3
    except ValueError:
        return False


def use_persistent_cache() -> Path | None:
    """Turn on JAX's persistent compilation cache in bojax's folder; return the folder in use.

    ``BOJAX_COMPILATION_CACHE`` names another folder, or ``off`` (also ``0``, ``false``,
    ``no``, empty) to leave the cache off. A folder the user already gave JAX
    (``jax_compilation_cache_dir``) is kept. Compiled programs are keyed by their code,
    JAX version and device, so a stale entry is never used. Idempotent, and effective
    even after other programs compiled: JAX opens the cache at the first compilation
    that finds a folder set.

    On CPU the cache stays off unless XLA's log level silences its errors
    (``TF_CPP_MIN_LOG_LEVEL=3``, which ``import bojax`` sets when it comes before JAX's):
    XLA logs 3 KB for every program it reads back (``cpu_aot_loader``), 118 KB for a
    small second run of a script that imported JAX first. Import bojax first, or set the
    variable, to keep the cache.
    """
    import jax

    configured = jax.config.jax_compilation_cache_dir
    if configured:
        return Path(configured)
    setting = os.environ.get(CACHE_VARIABLE)
    if setting is not None and setting.strip().lower() in ("", "0", "off", "false", "no"):
        return None
    if jax.default_backend() == "cpu" and not _xla_logs_quiet():
        return None
    folder = Path(setting).expanduser() if setting is not None else default_cache_folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # a read-only home: run without the cache rather than fail
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", _CACHE_MIN_COMPILE_SECONDS)
    return folder


def bucket_size(n: int, minimum: int = 16, batch: int = 1) -> int:
    """Padded size for ``n`` observations: ``minimum``, 32, then multiples of 16 up to 256,
    multiples of 64 up to 1024, and past that the smallest of the sizes
    ``64 ceil(1024 (9/8)^k / 64)`` that holds ``n`` (so a bucket is its own bucket).

    ``batch``, the points a run adds at a time, widens the buckets up to 1024 to at
    least twice that when it is over 8 (multiples of ``16 * 2^ceil(log2(batch / 8))``,
    at most 1024): else a run adding 16 points an iteration met a new bucket, and
    compiled its fit and acquisition anew, every iteration (79 % of a q = 16 run's
    seconds went to compiling). Past 1024 the geometric buckets are already 128 wide or
    more.

    Padding rows cost as much as real ones in every Cholesky and triangular solve, so
    buckets stay tight (at most 15 spare rows up to 256): at n = 80, padding to 128
    instead of 80 made one slice-sampled BO iteration 3.8x slower. Each new bucket costs
    one compilation, once per run, so past 1024 the buckets grow geometrically: their
    number grows as ``log n`` (48 buckets up to n = 10,000 where multiples of 64 made
    169), for at most 17 % spare rows.
    """
    if batch > 8 and n <= 1024:
        granule = min(1024, 16 * 2 ** math.ceil(math.log2(batch / 8)))
        return max(bucket_size(n, minimum), granule * math.ceil(n / granule))
    if n <= minimum:
        return minimum
    if n <= 32:
        return 32
    if n <= 256:
        return 16 * math.ceil(n / 16)
    if n <= 1024:
        return 64 * math.ceil(n / 64)
    # From one step below the power that holds n: rounding up to 64 can make that
    # step's bucket hold n already.
    steps = max(0, math.ceil(math.log(n / 1024) / math.log(9 / 8) - 1e-12) - 1)
    size = 64 * math.ceil(1024 * (9 / 8) ** steps / 64)
    while size < n:
        steps += 1
        size = 64 * math.ceil(1024 * (9 / 8) ** steps / 64)
    return size
