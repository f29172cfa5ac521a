"""BLAS threads for bojax's small dense algebra.

JAX runs Cholesky factorisations and triangular solves on the CPU through SciPy's
OpenBLAS, one small matrix at a time (N <= a few hundred in BO), while XLA's own thread
pool runs everything else. OpenBLAS's threads then mostly wait for or spin against
XLA's: on a 2-core machine a 128 x 128 Cholesky took ~210 us with OpenBLAS's default
threads and ~120 us with one (``benchmarks/README.md``, "Engine v2, part 3"), and a GP fit
is a few thousand of them. :func:`blas_threads` limits OpenBLAS (and any other BLAS)
to ``BOJAX_BLAS_THREADS`` threads (default 1) for the duration of a ``with`` block,
which the BO loop wraps around its fits and proposals; ``BOJAX_BLAS_THREADS=off``
leaves the threads alone (a machine with many cores and thousands of observations).
The user's own code outside the block keeps its threads.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

THREADS_VARIABLE = "BOJAX_BLAS_THREADS"

F = TypeVar("F", bound=Callable)


def configured_threads() -> int | None:
    """The BLAS thread count ``BOJAX_BLAS_THREADS`` asks for: default 1, None for ``off``
    (also ``0``, ``false``, ``no``, empty). A value that is not a positive integer raises
    ``ValueError`` naming the variable."""
    setting = os.environ.get(THREADS_VARIABLE, "1").strip().lower()
    if setting in ("", "0", "off", "false", "no"):
        return None
    try:
        threads = int(setting)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ValueError(f"{THREADS_VARIABLE} must be a positive integer or 'off', got {setting!r}")
    return threads


@contextmanager
def blas_threads() -> Iterator[None]:
    """Limit BLAS libraries to :func:`configured_threads` threads inside the block."""
    threads = configured_threads()
    if threads is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(threads, user_api="blas"):
        yield


def with_blas_threads(fn: F) -> F:
    """``fn`` run inside :func:`blas_threads`."""

    @functools.wraps(fn)
    def limited(*args, **kwargs):
        with blas_threads():
            return fn(*args, **kwargs)

    return limited  # type: ignore[return-value]
