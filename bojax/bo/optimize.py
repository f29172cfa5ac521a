"""Acquisition optimisers: where to evaluate next, in unit-cube coordinates.

``propose(key, score, args, space, evaluated, ...)`` maximises ``score(x, args)`` over
``x: (M, d)``, returning ``(M,)`` scores. ``score`` is a fixed function and ``args`` the
arrays it reads (surrogate state, incumbent), so nothing recompiles between iterations:

* ``random``: score uniformly drawn candidates, keep the best (ensemble-design report).
* ``sobol``: score a scrambled Sobol grid, then refine the best few by projected Adam
  on the box ``[0, 1]^d`` (Spearmint scores a grid and refines its top points). A
  cheaper ``screen`` (the acquisition under a subset of the hyperparameter draws) may
  rank the grid; refinement and the final comparison always use the full score.

Either way, integer coordinates are snapped to their values, candidates that repeat an
evaluated or pending point are dropped, and NaN scores lose. The result is never NaN
and never out of bounds; if every candidate repeats (a small integer space that is used
up) :class:`~bojax.errors.SpaceExhaustedError` is raised.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from bojax.errors import SpaceExhaustedError
from bojax.gp import bucket_size
from bojax.spaces import Space, repeated_mask

Score = Callable[[jax.Array, object], jax.Array]


def _padded(points: np.ndarray, dim: int) -> np.ndarray:
    """Pad with NaN rows (never equal to anything) to a bucket size, so shapes repeat."""
    points = np.asarray(points, dtype=np.float64).reshape(-1, dim)
    size = bucket_size(len(points))
    return np.concatenate([points, np.full((size - len(points), dim), np.nan)])


@partial(jax.jit, static_argnums=(0, 4))
def _refine(score: Score, args, starts, learning_rate, steps):
    """Projected Adam ascent of ``score`` from each start, staying inside ``[0, 1]^d``."""
    optimiser = optax.adam(learning_rate)

    def objective(x):
        values = score(x, args)
        return -jnp.sum(jnp.where(jnp.isfinite(values), values, 0.0))

    def step(carry, _):
        x, state = carry
        grads = jax.grad(objective)(x)
        grads = jnp.where(jnp.isfinite(grads), grads, 0.0)
        updates, state = optimiser.update(grads, state, x)
        return (jnp.clip(optax.apply_updates(x, updates), 0.0, 1.0), state), None

    (x, _), _ = jax.lax.scan(step, (starts, optimiser.init(starts)), length=steps)
    return x


def _best_new(points: np.ndarray, values: np.ndarray, taken: np.ndarray) -> int | None:
    """Index of the best finite-scored point that repeats nothing taken, or None."""
    values = np.where(np.isfinite(values), values, -np.inf)
    repeats = np.asarray(repeated_mask(jnp.asarray(points), jnp.asarray(taken)))
    # Equal candidates among themselves are harmless; repeats of taken points are not.
    values = np.where(repeats, np.nan, values)
    return None if np.all(np.isnan(values)) else int(np.nanargmax(values))


def propose(
    key: jax.Array,
    score: Score,
    args,
    space: Space,
    evaluated: np.ndarray,
    pending: np.ndarray | None = None,
    *,
    method: str = "sobol",
    num_candidates: int = 2048,
    num_refine: int = 8,
    refine_steps: int = 50,
    learning_rate: float = 0.02,
    screen: Score | None = None,
) -> tuple[np.ndarray, float]:
    """The best non-repeating candidate ``u`` of shape ``(d,)`` and its score.

    ``score`` must be the same (hashable) function object from one call to the next: it
    is a static argument of the jitted refinement. Everything that changes goes in ``args``.
    ``screen`` (same arguments; ``sobol`` only) is a cheaper stand-in for ``score`` that
    ranks the grid: its ``num_refine`` best points are then scored, refined and compared
    under ``score`` alone, so the answer's score is always ``score``'s. The grid's
    screened ranking is the fallback only if all of those repeat taken points.
    """
    if method not in ("random", "sobol"):
        raise ValueError(f"method must be 'random' or 'sobol', got {method!r}")
    if num_candidates < 1:
        raise ValueError("num_candidates must be at least 1")
    d = space.dim
    taken = np.concatenate(
        [np.asarray(evaluated).reshape(-1, d), np.zeros((0, d)) if pending is None else pending]
    )
    taken = _padded(space.snap(taken), d)
    sample_key, _ = jax.random.split(key)
    candidates = space.sample(
        sample_key, num_candidates, "sobol" if method == "sobol" else "uniform"
    )
    refining = method == "sobol" and num_refine > 0
    grid_score = screen if refining and screen is not None else score
    values = np.asarray(grid_score(jnp.asarray(candidates), args))
    if refining:
        order = np.argsort(np.where(np.isfinite(values), values, -np.inf))[::-1][:num_refine]
        starts = candidates[order]
        refined = np.asarray(_refine(score, args, jnp.asarray(starts), learning_rate, refine_steps))
        refined = space.snap(np.clip(refined, 0.0, 1.0))
        if grid_score is score:
            candidates = np.concatenate([candidates, refined])
            values = np.concatenate([values, np.asarray(score(jnp.asarray(refined), args))])
        else:
            pool = np.concatenate([starts, refined])
            pool_values = np.asarray(score(jnp.asarray(pool), args))
            best = _best_new(pool, pool_values, taken)
            if best is not None:
                return pool[best], float(pool_values[best])
    best = _best_new(candidates, values, taken)
    if best is None:
        raise SpaceExhaustedError(
            f"all {len(candidates)} candidates repeat evaluated or pending points; "
            "the integer part of the space may be exhausted"
        )
    return candidates[best], float(values[best])
