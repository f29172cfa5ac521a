"""Several step-wise trainings as one vmapped program per step (issue 40, item 4).

The trainings' states are stacked on axis 0, one row per design. Each step trains only
the rows still live: they are gathered, padded to a power of two (so a batch compiles at
most ``log2(designs) + 1`` step programs), trained as one program, and written back; the
padding's copies of the last row are written nowhere. A design leaves the batch when its
``report`` returns False (complete at the run's ``max_step``) or raises
:class:`~bojax.bo.stepwise.StopTraining` (stopped by the scheduler), or when its training
ends by itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def stacked(trees: Sequence[Any]) -> Any:
    """One tree whose leaves stack ``trees``' leaves on a new axis 0."""
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *trees)


def padded(items: list) -> list:
    """``items`` repeated up to a power of two: one batched program per size."""
    size = 1 << max(0, len(items) - 1).bit_length()
    return items + [items[-1]] * (size - len(items))


def _rows(tree: Any, rows: jax.Array) -> Any:
    return jax.tree.map(lambda leaf: leaf[rows], tree)


# The live rows of the stacked state, and the trained rows written back, as one small
# program each: on a GPU the eager gathers and scatters of every leaf cost more than a
# small batch's epoch (at one design, 88 ms against 13 ms per epoch on an H100). Kept
# apart from the step's program, which then compiles once per padded size alone.
gather = jax.jit(_rows)


@jax.jit
def scatter(tree: Any, targets: jax.Array, new: Any) -> Any:
    """``tree`` with rows ``targets`` set to ``new``'s; out-of-range targets dropped."""
    return jax.tree.map(lambda leaf, value: leaf.at[targets].set(value, mode="drop"), tree, new)


def train_live_rows(
    state: Any, reports: Sequence[Callable], advance: Callable, steps: int
) -> list[float]:
    """Train the stacked ``state`` (one row per ``reports[i]``) for up to ``steps`` steps.

    ``advance(rows, step)`` trains the gathered rows one step (``step`` counts from 0)
    and returns ``(rows, values, over)``: the new rows, each row's value after the step,
    and whether its training ended by itself (None: none did). ``reports[i](step + 1,
    value)`` is called for every live design after each step (with ``last=True`` where
    its training ended by itself). Returns each
    design's last value."""
    from bojax.bo.stepwise import StopTraining, takes

    count = len(reports)
    values = [float("nan")] * count
    live = list(range(count))
    says_last = [takes(report, "last") for report in reports]
    for step in range(steps):
        if not live:
            break
        rows = padded(live)
        targets = jnp.asarray(live + [count] * (len(rows) - len(live)))
        trained, out, over = advance(gather(state, jnp.asarray(rows)), step)
        state = scatter(state, targets, trained)
        out = np.asarray(jax.device_get(out), np.float64)
        over = np.zeros(len(rows), bool) if over is None else np.asarray(jax.device_get(over))
        going = []
        for row, i in enumerate(live):
            values[i] = float(out[row])
            try:
                ended = {"last": True} if over[row] and says_last[i] else {}
                if reports[i](step + 1, values[i], **ended) is not False and not over[row]:
                    going.append(i)
            except StopTraining:
                pass
        live = going
    return values
