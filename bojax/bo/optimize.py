"""Acquisition optimisers: where to evaluate next, in unit-cube coordinates.

``propose(key, score, args, space, evaluated, ...)`` maximises ``score(x, args)`` over
``x: (M, d)``, returning ``(M,)`` scores. ``score`` is a fixed function and ``args`` the
arrays it reads (surrogate state, incumbent), so nothing recompiles between iterations:

* ``random``: score uniformly drawn candidates, keep the best (ensemble-design report).
* ``sobol``: score a scrambled Sobol grid, then refine the grid's best points, the
  incumbent and a few grid points drawn with probability proportional to ``exp(score)``
  (EI itself, for LogEI) by L-BFGS-B inside the box ``[0, 1]^d``, all starts at once
  (Spearmint scores a grid and refines its top points; the incumbent and the drawn
  starts follow Optuna's ``GPSampler``). A cheaper ``screen`` (the acquisition under a
  subset of the hyperparameter draws) may rank the grid; refinement and the final
  comparison always use the full score.

On a space with categorical or ordinal parameters the refinement alternates: L-BFGS-B
moves the numeric coordinates with the discrete ones held, then each point takes its
best single discrete move (another choice, the next grid value) if that scores higher,
until nothing moves. A space with finitely many points, at most ``num_candidates``, is
enumerated and scored whole instead.

Either way, integer coordinates are snapped to their values, candidates that repeat an
evaluated or pending point are dropped, and NaN scores lose. The result is never NaN
and never out of bounds; if every candidate repeats (a small integer space that is used
up) :class:`~bojax.errors.SpaceExhaustedError` is raised.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bojax.errors import SpaceExhaustedError
from bojax.spaces import IRRELEVANT, Integer, Space, repeated_mask

Score = Callable[[jax.Array, object], jax.Array]
Box = tuple[np.ndarray, np.ndarray]  # lower and upper corners in unit coordinates
POLISHED = 3
REPEAT_CHUNK = 64


@partial(jax.jit, static_argnums=(0, 3))
def _negated_total(score: Score, args, flat, shape):
    """``-sum score(x)`` over a batch of starts, its gradient, and the scores themselves;
    a non-finite score counts as a large finite loss with no gradient, so the line search
    backs off. The scores let :func:`propose` compare refined points through this one
    program instead of compiling ``score`` for a second batch shape."""

    def loss(flat):
        values = score(flat.reshape(shape), args)
        return -jnp.sum(jnp.where(jnp.isfinite(values), values, -1e10)), values

    (value, values), grad = jax.value_and_grad(loss, has_aux=True)(flat)
    return value, jnp.where(jnp.isfinite(grad), grad, 0.0), values


def _scores(score: Score, args, points: np.ndarray) -> np.ndarray:
    """``score`` at a batch of points shaped like the refinement's starts."""
    return np.asarray(_negated_total(score, args, points.ravel(), points.shape)[2])


def _refine(
    score: Score,
    args,
    starts: np.ndarray,
    max_iterations: int,
    tolerance: float,
    fixed: tuple[int, ...] = (),
    held: np.ndarray | None = None,
    box: Box | None = None,
):
    """Maximise ``score`` from every start inside ``box`` (default ``[0, 1]^d``) by
    L-BFGS-B (SciPy) on the
    sum over starts, as BoTorch's ``gen_candidates_scipy`` does: the starts do not
    interact, so the joint problem is the separate ones solved in one batched pass. Stops
    at ``max_iterations`` or when the projected gradient's largest entry is below
    ``tolerance``; one compiled value-and-gradient program per batch shape. Coordinates
    ``fixed`` (categorical and ordinal ones) keep their start values, and so do all
    coordinates of the rows where ``held`` is true (the batch keeps its shape). An
    irrelevant coordinate (``IRRELEVANT``) stays so: refined as a value in [0, 1], the
    point would be scored as one where that parameter exists."""
    from scipy.optimize import minimize

    def objective(flat):
        # The NumPy array goes in as it is: jnp.asarray first cost ~0.2 of the ~2 ms a call.
        value, grad, _ = _negated_total(score, args, flat, starts.shape)
        return float(value), np.asarray(grad, dtype=np.float64)

    lower, upper = _limits(box, starts.shape[1])
    bounds = list(zip(np.tile(lower, len(starts)), np.tile(upper, len(starts)), strict=True))
    absent = starts == IRRELEVANT
    starts = np.where(absent, IRRELEVANT, np.clip(starts, 0.0, 1.0))
    d = starts.shape[1]
    for i in range(starts.shape[0]):
        columns = range(d) if held is not None and held[i] else fixed
        for j in {*columns, *np.flatnonzero(absent[i])}:
            bounds[i * d + j] = (float(starts[i, j]),) * 2
    result = minimize(
        objective,
        starts.ravel(),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": max_iterations, "gtol": tolerance},
    )
    return np.where(absent, IRRELEVANT, np.clip(result.x.reshape(starts.shape), 0.0, 1.0))


def _limits(box: Box | None, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The lower and upper corners of ``box``, the unit cube's without one."""
    if box is None:
        return np.zeros(dim), np.ones(dim)
    return np.asarray(box[0], np.float64), np.asarray(box[1], np.float64)


def _inside(points: np.ndarray, box: Box) -> np.ndarray:
    """Which of ``points`` lie in ``box`` (an irrelevant coordinate anywhere: it has no
    value to place). A trust region's integer coordinates span their codes exactly
    (:func:`bojax.bo.trust`), so the comparison needs only a rounding margin."""
    lower, upper = _limits(box, points.shape[1])
    within = (points >= lower - 1e-12) & (points <= upper + 1e-12)
    return np.all(within | (points == IRRELEVANT), axis=1)


def _power_of_two_rows(points: np.ndarray) -> np.ndarray:
    """``points`` padded with copies of its first row to a power of two (at least 16)
    rows: batches of varying size then compile a logarithmic number of programs."""
    size = max(16, 1 << (len(points) - 1).bit_length())
    return np.concatenate([points, np.repeat(points[:1], size - len(points), axis=0)])


def _batch_scores(score: Score, args, points: np.ndarray) -> np.ndarray:
    """``score`` at any number of points, through padded batches."""
    return np.asarray(score(jnp.asarray(_power_of_two_rows(points)), args))[: len(points)]


def _neighbours(space: Space, points: np.ndarray, moves: tuple[int, ...]):
    """Every point one discrete move from each of ``points`` (one categorical switched,
    one ordinal stepped), snapped so that children a move makes relevant or irrelevant
    follow; with the index of the point each came from."""
    rows, owners = [], []
    for i, point in enumerate(points):
        for j in moves:
            if point[j] == IRRELEVANT:
                continue
            for value in space.parameters[j].neighbours(point[j]):
                moved = point.copy()
                moved[j] = value
                rows.append(moved)
                owners.append(i)
    if not rows:
        return np.zeros((0, space.dim)), np.zeros(0, int)
    return space.snap(np.stack(rows)), np.asarray(owners)


def _alternate(score, args, space, starts, moves, max_iterations, tolerance, box=None):
    """Local search on a mixed space from every start: gradient refinement of the numeric
    coordinates with the discrete ones held, then the best single discrete move of each
    point if it scores higher, until no point moves (the alternating scheme of BoTorch's
    mixed optimiser, with Optuna's one-move neighbours). At most ``max(4, 2 m)`` rounds for
    ``m`` discrete parameters, so a walk can change each of them."""
    points = space.snap(starts)
    held = np.zeros(len(points), bool)  # rows whose numeric part is already refined
    numeric = len(moves) < space.dim
    # The batched L-BFGS-B runs until its slowest start converges, while the best start
    # settles in a few tens of steps; the rounds only need their ranking, so they get a
    # quarter of the budget and the winner alone is polished with all of it at the end.
    round_iterations = max(1, max_iterations // 4)
    for _ in range(max(4, 2 * len(moves))):
        if numeric:
            refined = _refine(score, args, points, round_iterations, tolerance, moves, held, box)
            points = space.snap(refined)
        values = _scores(score, args, points)
        moved, owners = _neighbours(space, points, moves)
        if not len(moved):
            break
        moved_values = _batch_scores(score, args, moved)
        held[:] = True
        for i in range(len(points)):
            own = np.flatnonzero(owners == i)
            if own.size and np.nanmax(moved_values[own], initial=-np.inf) > values[i]:
                points[i] = moved[own[np.nanargmax(moved_values[own])]]
                held[i] = False  # moved: its numeric part is refined again
        if held.all():
            break
    if numeric:
        values = _scores(score, args, points)
        for best in np.argsort(np.where(np.isfinite(values), values, -np.inf))[::-1][:POLISHED]:
            alone = points[best : best + 1]
            points[best] = space.snap(
                _refine(score, args, alone, max_iterations, tolerance, moves, box=box)
            )[0]
    return points


def _size(p) -> int | None:
    """How many values a parameter has (None for a continuum), an integer's counted
    without building its grid: ``[0, 10**12]`` is a valid range and no array."""
    if isinstance(p, Integer):
        return p.high - p.low + 1
    grid = p.grid()
    return None if grid is None else len(grid)


def enumeration(space: Space, limit: int) -> np.ndarray | None:
    """Every distinct point of a space whose parameters all have finitely many values,
    snapped (conditions collapse the irrelevant ones), when there are at most ``limit``
    combinations; None otherwise. Kept per (space, limit): asks list it again and again."""
    sizes = [_size(p) for p in space.parameters]
    if None in sizes or math.prod(sizes) > limit:
        return None
    # Keyed by the space's text: spaces compare equal across the choices 1 and True,
    # which are different points here.
    key = repr(space.to_dict())
    if key not in _ENUMERATED:
        grids = [p.grid() for p in space.parameters]
        points = np.array(list(itertools.product(*grids)), dtype=np.float64)
        if len(_ENUMERATED) >= 16:
            _ENUMERATED.pop(next(iter(_ENUMERATED)))  # the oldest
        _ENUMERATED[key] = np.unique(space.snap(points), axis=0)
    return _ENUMERATED[key].copy()


_ENUMERATED: dict[str, np.ndarray] = {}  # the distinct points of the spaces listed lately


# Combinations a discrete space may have and still be listed to find how few distinct
# points its conditions leave (14 nested binary choices: 16,384 combinations, 15 points).
ENUMERATION_LIMIT = 1 << 16


def _starts(key, candidates, values, incumbent, num_refine: int, num_drawn: int) -> np.ndarray:
    """The ``num_refine`` best grid points, the incumbent (if any) and ``num_drawn`` grid
    points drawn with probability proportional to ``exp(value)``."""
    finite = np.where(np.isfinite(values), values, -np.inf)
    order = np.argsort(finite)[::-1]
    chosen = [candidates[order[:num_refine]]]
    if incumbent is not None:
        chosen.append(np.asarray(incumbent, dtype=np.float64).reshape(1, -1))
    if num_drawn and np.isfinite(finite).any():
        weights = np.exp(finite - finite.max())
        rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel())
        drawn = rng.choice(len(candidates), size=num_drawn, p=weights / weights.sum())
        chosen.append(candidates[drawn])
    return np.concatenate(chosen)


def _best_new(points: np.ndarray, values: np.ndarray, taken: np.ndarray) -> int | None:
    """Index of the best finite-scored point that repeats nothing taken, or None.

    Points are checked best first, ``REPEAT_CHUNK`` at a time: comparing every candidate
    with every taken point costs ``M n d`` (2048 x 10,000 x 20 is 400 M comparisons),
    while the best few almost never all repeat. Equal candidates among themselves are
    harmless; repeats of taken points are not."""
    values = np.where(np.isfinite(values), values, -np.inf)
    order = np.lexsort((np.arange(len(values)), -values))  # best first, ties by index
    for begin in range(0, len(order), REPEAT_CHUNK):
        chunk = order[begin : begin + REPEAT_CHUNK]
        rows = np.concatenate([points[chunk], np.full((REPEAT_CHUNK - len(chunk),
                              points.shape[1]), np.nan)])  # fmt: skip
        repeats = np.asarray(repeated_mask(jnp.asarray(rows), taken))[: len(chunk)]
        if not repeats.all():
            return int(chunk[int(np.argmin(repeats))])
    return None


def candidate_grid(
    key: jax.Array, space: Space, method: str, num_candidates: int, box: Box | None = None
) -> np.ndarray:
    """The ``num_candidates`` points ``propose(key, ...)`` scores first: scrambled Sobol for
    ``sobol``, uniform for ``random`` (the loop reads P(success) over the same points),
    mapped into ``box`` where given."""
    sample_key = jax.random.split(key)[0]
    grid = space.sample(sample_key, num_candidates, "sobol" if method == "sobol" else "uniform")
    if box is None:
        return grid
    lower, upper = _limits(box, space.dim)
    # Irrelevant coordinates take a value again, so relevance follows the mapped parents.
    unit = np.where(grid == IRRELEVANT, 0.5, grid)
    return space.snap(lower + (upper - lower) * unit)


def propose(
    key: jax.Array,
    score: Score,
    args,
    space: Space,
    evaluated: np.ndarray,
    pending: np.ndarray | None = None,
    *,
    incumbent: np.ndarray | None = None,
    method: str = "sobol",
    num_candidates: int = 2048,
    num_refine: int = 8,
    num_drawn: int = 4,
    refine_iterations: int = 100,
    refine_tolerance: float = 1e-6,
    screen: Score | None = None,
    box: Box | None = None,
) -> tuple[np.ndarray, float]:
    """The best non-repeating candidate ``u`` of shape ``(d,)`` and its score.

    ``score`` must be the same (hashable) function object from one call to the next: it
    is a static argument of the jitted refinement. Everything that changes goes in ``args``.
    ``screen`` (same arguments; ``sobol`` only) is a cheaper stand-in for ``score`` that
    ranks the grid: its ``num_refine`` best points are then scored, refined and compared
    under ``score`` alone, so the answer's score is always ``score``'s. The grid's
    screened ranking is the fallback only if all of those repeat taken points.
    ``incumbent`` (a unit point, the best evaluated so far) is refined too. ``box``
    (lower and upper corners) confines the grid and the refinement to a trust region
    (:mod:`bojax.bo.trust`), and a small discrete space's enumeration to its points there.
    """
    if method not in ("random", "sobol"):
        raise ValueError(f"method must be 'random' or 'sobol', got {method!r}")
    if num_candidates < 1:
        raise ValueError("num_candidates must be at least 1")
    d = space.dim
    taken = np.concatenate(
        [np.asarray(evaluated).reshape(-1, d), np.zeros((0, d)) if pending is None else pending]
    )
    taken = np.asarray(space.snap(taken), dtype=np.float64).reshape(-1, d)  # repeated_mask pads
    draw_key = jax.random.split(key)[1]
    # Categorical and ordinal coordinates move by discrete steps, never by gradient.
    moves = tuple(j for j, p in enumerate(space.parameters) if not p.continuous)
    if moves:
        everything = enumeration(space, max(num_candidates, ENUMERATION_LIMIT))
        if everything is not None and len(everything) > num_candidates:
            everything = None  # more distinct points than candidates: sample them
        if everything is not None:  # a small discrete space: score every point exactly
            which = f"all {len(everything)} of its points are"
            if box is not None:  # (else a trust region's local model chose anywhere)
                everything = everything[_inside(everything, box)]
                which = f"all {len(everything)} of its points in the trust region are"
            values = _batch_scores(score, args, everything) if len(everything) else np.zeros(0)
            return _best_or_exhausted(everything, values, taken, which)
    candidates = candidate_grid(key, space, method, num_candidates, box)
    refining = method == "sobol" and num_refine > 0
    grid_score = screen if refining and screen is not None else score
    values = np.asarray(grid_score(jnp.asarray(candidates), args))
    if refining:
        starts = _starts(draw_key, candidates, values, incumbent, num_refine, num_drawn)
        if moves:
            refined = _alternate(
                score, args, space, starts, moves, refine_iterations, refine_tolerance, box
            )
        else:
            refined = space.snap(
                _refine(score, args, starts, refine_iterations, refine_tolerance, box=box)
            )
        if grid_score is score:
            candidates = np.concatenate([candidates, refined])
            values = np.concatenate([values, _scores(score, args, refined)])
        else:
            pool = np.concatenate([starts, refined])
            pool_values = np.concatenate(
                [_scores(score, args, starts), _scores(score, args, refined)]
            )
            best = _best_new(pool, pool_values, taken)
            if best is not None:
                return pool[best], float(pool_values[best])
    best = _best_new(candidates, values, taken)
    if best is not None:
        return candidates[best], float(values[best])
    return _best_untried(draw_key, score, args, space, taken, box, num_candidates, len(candidates))


def repeats(points: np.ndarray, taken: np.ndarray, chunk: int = 1024) -> np.ndarray:
    """Which of ``points`` repeat a ``taken`` one, ``chunk`` rows at a time (NaN-padded):
    one program and bounded memory for a listing of up to ``ENUMERATION_LIMIT`` points
    (in one piece, 32,768 of them against a nearly used-up space took 1.5 GB)."""
    taken = jnp.asarray(taken)
    found = []
    for begin in range(0, len(points), chunk):
        rows = points[begin : begin + chunk]
        padded = np.concatenate([rows, np.full((chunk - len(rows), points.shape[1]), np.nan)])
        found.append(np.asarray(repeated_mask(jnp.asarray(padded), taken))[: len(rows)])
    return np.concatenate(found) if found else np.zeros(0, dtype=bool)


def _best_untried(key, score: Score, args, space: Space, taken, box, limit: int, sampled: int):
    """When every candidate repeats a taken point: the best of a discrete space's points
    that none does (at most ``limit`` of them, drawn), scored exactly. A sample of a
    space with more points than candidates misses some, and the run stopped as if the
    space were used up (review CY: an integer run of 41 points with 4 untried).
    :class:`SpaceExhaustedError` when nothing is left, or the space is too large (or
    continuous) to list."""
    everything = enumeration(space, ENUMERATION_LIMIT)
    if everything is None:
        raise SpaceExhaustedError(
            f"the space is exhausted: all {sampled} candidates are evaluated or pending"
        )
    which = f"all {len(everything)} of its points are"
    if box is not None:
        everything = everything[_inside(everything, box)]
        which = f"all {len(everything)} of its points in the trust region are"
    fresh = everything[~repeats(everything, taken)]
    if len(fresh) > limit:  # a sample of them, as the grid is
        rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel())
        fresh = fresh[np.sort(rng.choice(len(fresh), size=limit, replace=False))]
    values = _batch_scores(score, args, fresh) if len(fresh) else np.zeros(0)
    return _best_or_exhausted(fresh, values, taken, which)


def propose_within(boxes, *args, **kwargs) -> tuple[np.ndarray, float]:
    """:func:`propose` in the first of ``boxes`` (``None``: the whole space) that has a
    point left: every point of a trust region of integers may be evaluated while the
    rest of the space is not (a run of 400 points stopped at 33)."""
    for last, box in enumerate(boxes, start=1 - len(boxes)):
        try:
            return propose(*args, box=box, **kwargs)
        except SpaceExhaustedError:
            if last == 0:
                raise
    raise ValueError("propose_within needs at least one box (None for the whole space)")


def _best_or_exhausted(points, values, taken, which: str) -> tuple[np.ndarray, float]:
    """The best new point and its score, or :class:`SpaceExhaustedError` saying that
    ``which`` (``"all 9 of its points are"``) evaluated or pending."""
    best = _best_new(points, values, taken)
    if best is None:
        raise SpaceExhaustedError(f"the space is exhausted: {which} evaluated or pending")
    return points[best], float(values[best])
