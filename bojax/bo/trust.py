"""Large runs: a local GP in a trust region once the data outgrow an exact GP.

An exact GP conditions on every observation, so its cost grows as ``n^3`` and its memory
as ``n^2`` per hyperparameter draw: at d = 20 a steady gp-slice ask took 3.6 s at n = 300
on two cores, and n = 10,000 would need hours and ~12 GiB. Past ``settings.exact_limit``
successful evaluations the loop therefore models locally, as TuRBO does (Eriksson et al.
2019, "Scalable global optimization via local Bayesian optimization"):

* **the data**: the ``settings.local_points`` evaluations nearest the incumbent (the best
  observed point), a quarter of them given up to the episode's latest proposals however
  far (a proposal the model never sees, it proposes again), with their outputs warped
  afresh, so the model's size, its compiled
  programs and its memory stay fixed however large ``n`` grows (nearest-neighbour
  selection is ``O(n d)``);
* **the hyperparameters**: a MAP fit (:func:`local_surrogate`), warm-started from the
  last fit. With hundreds of points the hyper-posterior is narrow, so integrating over
  it no longer pays for its ~5x cost (see docs/design.md);
* **the region**: proposals stay in a box around the incumbent,
  ``centre +- length * w / 2`` with ``w_i = ell_i / (prod_j ell_j)^(1/d)`` (the fitted
  length-scales, so the box is long where the function varies slowly). ``length``
  follows TuRBO's rule, replayed over the evaluations since the switch (or since the
  initial design, when it is the larger; a warm start told before the first ask counts
  as design with ``initial`` set to its size): it doubles (at
  most ``MAX_LENGTH``) after ``SUCCESSES`` improvements in a row and halves after
  ``max(4, d)`` evaluations in a row that did not improve the best by ``1e-3 |best|``
  (failed evaluations included). Below ``MIN_LENGTH`` the episode ends, as TuRBO
  restarts: ``2d`` random points open the next one, whose region centres on their best.
  TuRBO discards the old data; bojax's local GP keeps reading every evaluation near
  the new centre.

One objective under outcome constraints follows SCBO (Eriksson & Poloczek 2021): every
metric's model takes the region's rows, the centre is the best feasible evaluation (the
least violating while none is feasible), and an infeasible evaluation is a miss.

Several objectives (:func:`front_region`) follow MORBO (Daulton et al. 2022) with one
region: a front is no one point's neighbourhood, so the centre visits the feasible
front's points in turn (the ask after ``n`` evaluations are told takes point ``n mod m``
of the ``m``, in the order of the first objective; a batch's proposals share its centre,
and the next batch's is ``q`` points on), a success is an evaluation that moves the
front (no earlier feasible evaluation weakly dominates it, with the one-objective rule's
relative margin), the box is short wherever one objective's model varies fast, and EHVI
still measures against the whole front (:func:`bojax.bo.multiobjective.propose_batch`).

The region is a pure function of the run's outputs in the order they were told, so a
resumed run rebuilds it exactly (no extra state in the journal). Counting is per
evaluation, TuRBO's ``q = 1`` rule; with batches TuRBO counts per batch.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np

from bojax.bo.pareto import pareto_mask
from bojax.parameters import Integer
from bojax.spaces import Space

INITIAL_LENGTH = 0.8
MIN_LENGTH = 0.5**7
MAX_LENGTH = 1.6
SUCCESSES = 3
IMPROVEMENT = 1e-3  # relative improvement of the best that counts as a success


class Region(NamedTuple):
    """The trust region of one proposal: the rows of the data the local model sees, and
    the box (unit coordinates) proposals are drawn from. While a restarted episode draws
    its design, ``designing`` is true and there is no model."""

    rows: np.ndarray  # indices into the successful evaluations: nearest first, then latest
    centre: np.ndarray  # (d,) the episode's best point
    length: float  # the box's edge before the length-scale weights
    episode: int = 0  # restarts so far
    designing: bool = False
    lower: np.ndarray | None = None  # (d,) set once the local model's length-scales are known
    upper: np.ndarray | None = None

    def info(self) -> dict[str, float]:
        """What a proposal's journal record says about its model."""
        return {
            "local_points": float(len(self.rows)),
            "trust_length": self.length,
            "trust_episode": float(self.episode),
        }


def is_local(settings: Any, successes: int) -> bool:
    """Whether a fit on ``successes`` successful evaluations is local (``exact_limit``)."""
    limit = settings.exact_limit
    return limit is not None and successes > limit


def local_surrogate(surrogate: Any) -> Any:
    """The surrogate a local fit uses: a GP with sampled hyperparameters fitted by MAP
    instead (same kernel, mean and priors); any other surrogate (MAP, fixed, the BNN) as
    it is."""
    from bojax.surrogates import GPSurrogate

    if not isinstance(surrogate, GPSurrogate) or surrogate.sampler.point:
        return surrogate
    return replace(surrogate, method="map", chains=1, num_samples=1)


def carried(previous: Any) -> Any:
    """A sampled GP's state as the first state of its MAP fits: the first chain only
    (a MAP fit has one position), so packed states keep one shape from then on."""
    position = getattr(previous, "position", None)
    if position is None:
        return previous
    import jax

    return previous._replace(
        position=jax.tree.map(lambda a: a[:1], position), widths=previous.widths[:1]
    )


def nearest(points: np.ndarray, centre: np.ndarray, count: int) -> np.ndarray:
    """Indices of the ``count`` rows of ``points`` nearest ``centre`` (Euclidean in unit
    coordinates; irrelevant coordinates, the sentinel -1, compare as values), nearest
    first, ties broken by index so the choice is deterministic."""
    distance = np.sum((np.asarray(points) - centre) ** 2, axis=1)
    order = np.lexsort((np.arange(len(distance)), distance))
    return order[: min(count, len(order))]


class Episode(NamedTuple):
    """Where the trust region stands after the outputs told so far: restarts ``index``
    (0 before any), the first evaluation of the current episode, its box ``length``, and
    how many evaluations it has seen (a restarted episode's first ``design_size`` are
    its design)."""

    index: int
    start: int
    length: float
    seen: int


def design_size(dim: int) -> int:
    """Random points that open a restarted episode: TuRBO's ``2d``."""
    return 2 * dim


def replay(y: np.ndarray, start: int, dim: int, successes: np.ndarray | None = None) -> Episode:
    """The trust region after the outputs ``y`` (in the order told; NaN = failed,
    minimisation), counting from evaluation ``start``, the first of the local phase.

    TuRBO's rule per evaluation: better than the episode's best by ``IMPROVEMENT``
    relative is a success, anything else (a failure included) a miss; ``SUCCESSES`` in a
    row double the length (at most ``MAX_LENGTH``), ``max(4, d)`` misses in a row halve
    it. Below ``MIN_LENGTH`` the episode ends and a new one begins: ``design_size(d)``
    random points, then a region around their best. The first episode needs no design:
    the exact phase before it was one. ``successes`` (n,) bool, when given, says which
    evaluations are successes instead (several objectives: those that join the front)."""
    index, first, length, wins, losses = 0, 0, INITIAL_LENGTH, 0, 0
    patience = max(4, dim)
    finite = np.isfinite(y)
    best = np.min(y[:start][finite[:start]]) if finite[:start].any() else np.inf
    seen = start
    for k in range(start, len(y)):
        value = y[k]
        seen += 1
        designing = index > 0 and seen <= design_size(dim)
        if not designing:
            if successes is not None:
                won = bool(successes[k])
            else:
                # (Against no finite best yet, as after a design that all failed, any
                # finite value is a success: inf - IMPROVEMENT * inf is NaN.)
                won = bool(
                    np.isfinite(value)
                    and (np.isinf(best) or value < best - IMPROVEMENT * abs(best))
                )
            if won:
                wins, losses = wins + 1, 0
            else:
                wins, losses = 0, losses + 1
        if np.isfinite(value):
            best = min(best, value)
        if wins >= SUCCESSES:
            length, wins = min(2.0 * length, MAX_LENGTH), 0
        elif losses >= patience:
            length, losses = length / 2.0, 0
        if length < MIN_LENGTH:  # a new episode from the next evaluation on
            index, first, length, wins, losses, best, seen = (
                index + 1,
                k + 1,
                INITIAL_LENGTH,
                0,
                0,
                np.inf,
                0,
            )
    return Episode(index, first, length, seen)


def trust_length(y: np.ndarray, start: int, dim: int) -> float:
    """The trust region's edge after the outputs ``y`` (:func:`replay`)."""
    return replay(y, start, dim).length


def local_start(y: np.ndarray, limit: int) -> int:
    """The index of the first evaluation told after ``limit`` successes (the local phase's
    first), ``len(y)`` if none."""
    successes = np.cumsum(np.isfinite(y))
    return int(np.searchsorted(successes, limit, side="right")) + 1


def region(
    settings: Any,
    u: np.ndarray,
    y: np.ndarray,
    sign: float,
    dim: int,
    violation: np.ndarray | None = None,
) -> Region:
    """The trust region of the next proposal of a run whose evaluations are ``u``, ``y``
    (NaN = failed) and ``sign`` = -1 when maximising (so ``sign * y`` is minimised).

    With outcome constraints, ``violation`` (n,) is each evaluation's (0 where feasible),
    as in SCBO (Eriksson & Poloczek 2021): only a feasible improvement counts as a
    success, and the centre is the best feasible evaluation, or while none is feasible
    the least violating one."""
    ok = np.isfinite(y)
    violation = np.zeros(len(y)) if violation is None else np.asarray(violation, np.float64)
    feasible = ok & (violation <= 0)
    # The initial design's points are no proposals of a region: a design larger than
    # exact_limit (or data told as one, initial=len(data)) would otherwise count as misses.
    start = min(max(local_start(y, settings.exact_limit), settings.initial), len(y))
    episode = replay(sign * np.where(feasible, y, np.nan), start, dim)
    # The episode's own best (the first episode's is the run's); while a restarted
    # episode is designing, or has no success yet, it proposes random points (the
    # region then stands at the run's best, where the failure classifier looks).
    mine = ok & (np.arange(len(y)) >= episode.start)
    designing = episode.index > 0 and (episode.seen < design_size(dim) or not mine.any())
    own = np.flatnonzero(ok if episode.index == 0 or designing else mine)
    rank = np.lexsort((sign * y[own], violation[own], ~feasible[own]))  # feasible first
    centre = u[own[rank[0]]]
    rows = _rows(settings, u, ok, centre, max(start, episode.start))
    return Region(rows, centre, episode.length, episode.index, designing)


def _rows(settings: Any, u: np.ndarray, ok: np.ndarray, centre: np.ndarray, since: int):
    """The rows (indices into the successful evaluations) a local model sees: the
    episode's latest proposals (evaluations from ``since`` on) and the nearest
    ``centre``. A proposal the model never sees, it keeps proposing (a categorical
    switched away from the centre's, its children irrelevant, is far in unit coordinates:
    20 proposals of a conditional space, 9 of them repeats)."""
    ok_rows = np.flatnonzero(ok)
    latest = np.flatnonzero(ok_rows >= since)[-latest_count(settings) :]
    closest = nearest(u[ok], centre, settings.local_points)
    closest = closest[~np.isin(closest, latest)][: settings.local_points - len(latest)]
    return np.concatenate([closest, latest[::-1]])


def front_improvements(objectives: np.ndarray, feasible: np.ndarray) -> np.ndarray:
    """``(n,)`` bool: the evaluations that moved the front when told, feasible ones
    (finite ``objectives`` (n, K), minimised) that no earlier feasible evaluation weakly
    dominates even ``IMPROVEMENT`` times the earlier ones' range better in every
    objective, the one-objective rule's relative margin. A near-copy of a front point
    joins the front but is no success (7 of 27 local ZDT1 proposals were, review)."""
    joined = np.zeros(len(objectives), dtype=bool)
    current = np.zeros((0, objectives.shape[1]))
    low = high = None
    for k in np.flatnonzero(feasible):
        point = objectives[k]
        margin = 0.0 if low is None else IMPROVEMENT * (high - low)
        joined[k] = not np.any(np.all(current <= point + margin, axis=1))
        if not np.any(np.all(current <= point, axis=1)):  # on the front, a success or not
            current = np.concatenate([current[~np.all(point <= current, axis=1)], point[None]])
        low = point if low is None else np.minimum(low, point)
        high = point if high is None else np.maximum(high, point)
    return joined


def front_region(
    settings: Any, u: np.ndarray, objectives: np.ndarray, violation: np.ndarray, dim: int
) -> Region:
    """The trust region of the next proposal of a run with several objectives
    (``objectives`` (n, K) oriented to be minimised, NaN rows failed; ``violation`` (n,)
    0 where feasible), MORBO's rule (Daulton et al. 2022) with one region: the episode
    replays TuRBO's counts with an evaluation that moves the feasible front as the
    success (:func:`front_improvements`), and the centre is the feasible front's point
    ``n mod m`` (n evaluations told, the ``m`` points in lexicographic order of the
    objectives), so successive asks look along the whole front (a batch's proposals
    share one centre). While nothing is feasible the centre is the least violating
    evaluation, as in SCBO."""
    objectives = np.asarray(objectives, dtype=np.float64)
    violation = np.asarray(violation, dtype=np.float64)
    ok = np.isfinite(objectives).all(axis=1)
    feasible = ok & (violation <= 0)
    y = np.where(ok, 0.0, np.nan)  # only which evaluations failed is read
    start = min(max(local_start(y, settings.exact_limit), settings.initial), len(y))
    joined = front_improvements(np.where(feasible[:, None], objectives, 0.0), feasible)
    episode = replay(y, start, dim, joined)
    designing = episode.index > 0 and episode.seen < design_size(dim)
    if feasible.any():
        on_front = np.flatnonzero(feasible)
        on_front = on_front[pareto_mask(objectives[on_front])]
        on_front = on_front[np.lexsort(objectives[on_front].T[::-1])]
        centre = u[on_front[len(y) % len(on_front)]]
    else:
        own = np.flatnonzero(ok)
        centre = u[own[np.lexsort((np.arange(len(own)), violation[own]))[0]]]
    rows = _rows(settings, u, ok, centre, max(start, episode.start))
    return Region(rows, centre, episode.length, episode.index, designing)


def latest_count(settings: Any) -> int:
    """How many of a local model's ``local_points`` are its episode's latest proposals
    (the rest are the nearest the centre): a quarter."""
    return settings.local_points // 4


def weights(lengthscales: np.ndarray | None, dim: int) -> np.ndarray:
    """TuRBO's box weights ``ell_i / (prod_j ell_j)^(1/d)``; ones without length-scales."""
    if lengthscales is None:
        return np.ones(dim)
    ell = np.asarray(lengthscales, dtype=np.float64).reshape(-1, dim).mean(axis=0)
    ell = np.clip(ell, 1e-6, 1e6)
    return ell / np.exp(np.mean(np.log(ell)))


def fitted_lengthscales(fitted: Any, dim: int) -> np.ndarray | None:
    """The fitted GP's ARD length-scales (averaged over draws), None for a surrogate
    without them (the BNN, composite kernels)."""
    samples = getattr(fitted, "samples", None)
    kernel = samples.get("kernel") if isinstance(samples, dict) else None
    ell = kernel.get("lengthscales") if isinstance(kernel, dict) else None
    if ell is None or np.shape(ell)[-1] != dim:
        return None
    return np.asarray(ell)


def shortest_lengthscales(fitted: Any, dim: int) -> np.ndarray | None:
    """Per coordinate, the shortest of the models' mean length-scales (None if one has
    none): several objectives' box is short wherever one of them varies fast. The first
    objective's alone pinned ZDT1's first coordinate, the only one f1 reads, to a box
    1e-3 wide, and left the others, along which f2 varies, at their whole range
    (review)."""
    found = [fitted_lengthscales(model, dim) for model in fitted]
    if any(ell is None for ell in found):
        return None
    return np.min([np.asarray(ell).reshape(-1, dim).mean(axis=0) for ell in found], axis=0)


def with_box(area: Region, space: Space, lengthscales: np.ndarray | None) -> Region:
    """``area`` with its box: ``centre +- length * w / 2`` clipped to the cube on numeric
    coordinates (an integer's narrowed to the codes of the integers in it, so rounding
    keeps a proposal inside); categorical and ordinal ones keep their whole range (they
    move by discrete steps)."""
    half = area.length * weights(lengthscales, space.dim) / 2.0
    centre = np.where(area.centre < 0, 0.5, area.centre)  # an irrelevant coordinate
    lower, upper = np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)
    discrete = np.array([not p.continuous for p in space.parameters])
    lower, upper = np.where(discrete, 0.0, lower), np.where(discrete, 1.0, upper)
    for i, parameter in enumerate(space.parameters):
        if isinstance(parameter, Integer):
            lower[i], upper[i] = _integer_span(parameter, lower[i], upper[i], centre[i])
    return area._replace(lower=lower, upper=upper)


def _integer_span(parameter: Integer, low: float, high: float, centre: float):
    """An integer coordinate's box ``[low, high]`` narrowed to the codes of the integers
    whose codes lie in it (at least the centre's own integer), so a proposal rounded to
    an integer stays in the box: refined to the box's edge, a point rounded into the
    neighbouring integer's bin, outside (5 of 30 local proposals, review BI)."""

    def code(k) -> float:
        return float(parameter.encode(np.array([float(k)]))[0])

    first, last, own = parameter.decode(np.array([low, high, centre]))
    first += code(first) < low  # its code below the box: the next integer's is in it
    last -= code(last) > high
    if first > last:  # the box lies inside one integer's bin
        first = last = own
    return code(first), code(last)
