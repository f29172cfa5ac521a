"""Proposals for a run with several metrics: ``settings.objectives`` (and ``constraints``).

Every distinct metric is a column (:class:`bojax.bo.metrics.Metrics`), oriented so that
the loop minimises it and standardised on the successful evaluations; each column gets a
surrogate of its own, of the kind ``settings.surrogate`` names, fitted as in a
single-objective run (fully Bayesian by default), and their predictives are stacked into
``(S, M, K)`` for the acquisition. Draw ``s`` of one column is paired with draw ``s`` of
the others: the columns' chains are independent, so the pairs are draws from the joint
posterior, and the acquisition's mean over ``s`` integrates it.

* ``log_ehvi`` (the default for surrogates other than GPs): the observed feasible front,
  and the believed outcomes of pending points, cut the non-dominated region into boxes
  (:mod:`bojax.bo.pareto`); the acquisition is
  :func:`bojax.bo.acquisition.log_expected_hypervolume_improvement`. With
  ``incumbent="posterior_mean"`` (the noisy variant) the front is the pooled posterior
  mean at the feasible evaluations instead, which a lucky noisy observation cannot
  push out (the plug-in counterpart of Daulton et al. 2021's noisy EHVI).
* ``log_nehvi`` (noisy EHVI, Daulton et al. 2021; the default with a GP): the front
  itself is uncertain. Per hyperparameter draw, ``J`` joint samples of the noise-free
  objectives at the baseline (the feasible evaluations on the observed or the
  posterior-mean front, as BoTorch prunes its baseline) each give a front and its boxes,
  and each sample's GPs are conditioned on those values, so a candidate correlated with
  a front point cannot claim to improve on it (:func:`sampled_fronts`). The acquisition
  is the same integrand, averaged over draws and fronts: ``log mean_{s,j} EHVI_{sj}(x)``.
  ``J`` is ``settings.fantasies`` (default: :data:`FRONTS` fronts in all); the
  refinement costs about ``J`` times ``log_ehvi``'s. Exact EHVI, by contrast, rates an
  evaluated extreme of the front as improvable by the fitted noise alone, and on ZDT1
  its proposals kept returning there (``docs/design.md``).
* ``parego`` (Knowles 2006): each proposal draws weights ``lambda`` uniformly on the
  simplex, scalarises the objectives (normalised to [0, 1] on the observed values) as
  ``max_k lambda_k f_k + 0.05 sum_k lambda_k f_k``, fits one surrogate to that and
  maximises log-EI on the best feasible scalarised value.

Constraints multiply in the probability of feasibility under their own columns' models;
failed evaluations still go to the failure classifier, which weights the acquisition as
in a single-objective run. Pending points are Kriging believers for every column (the
believed objectives join the front), whatever ``settings.fantasy`` says. The reference
point is ``settings.reference_point`` (objectives' units) or, without one,
:func:`bojax.bo.pareto.search_reference_point` of the feasible observations (each
objective's worst value, standardised, moved out by a tenth of its size), recomputed as
they grow.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bojax import gp
from bojax.bo import keys, pareto, trust, warping
from bojax.bo.acquisition import AcquisitionRecord, MultiIncumbent, get_acquisition
from bojax.bo.metrics import Metrics
from bojax.bo.optimize import propose_within
from bojax.errors import SettingsError, SpaceExhaustedError
from bojax.surrogates import Surrogate

PAREGO_RHO = 0.05  # the weight of ParEGO's linear term (Knowles 2006)
CHUNK_FLOATS = 2**23  # at most this many floats per box-sum chunk of candidates
# Box coordinates (fronts x boxes x objectives, boxes padded to a power of two) EHVI may
# sum over per candidate. Fronts of mutually non-dominated points measured: 3 objectives
# 2m + 1 boxes for m points (the sweep); 4 objectives 1,677 at 20, 10,325 at 40; 5
# objectives 20,288 at 20, where 32 sampled fronts of 16,384 padded boxes (2.6 million
# floats) asked for 34 GB in one ask. With 32 fronts and 3 objectives 2**19 is 4,096
# padded boxes, a front of about 2,000 points.
BOX_FLOATS = 2**19


def standardised(state, rows=None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x, z, shift, scale)``: the successful unit points (those of them at ``rows``, a
    trust region's), their metric columns oriented and standardised,
    ``z = (sign v - shift) / scale``, and the shift and scale."""
    metrics: Metrics = state.settings.metrics
    ok = np.isfinite(state.y)
    x, oriented = state.u[ok], state.metrics[ok] * metrics.signs
    if rows is not None:
        x, oriented = x[rows], oriented[rows]
    shift, scale = warping.mean_and_spread(oriented, axis=0)
    scale = warping.usable_scale(shift, scale)
    return x, (oriented - shift) / scale, shift, scale


def violations(state) -> np.ndarray:
    """``(n,)``: how far each evaluation misses the constraints, the sum of its
    standardised shortfalls (``max(0, a z - t)`` per constraint, :meth:`Metrics.thresholds`),
    0 where feasible and NaN where it failed: SCBO's ranking of infeasible points."""
    metrics: Metrics = state.settings.metrics
    ok = np.isfinite(state.y)
    out = np.full(len(state.y), np.nan)
    if not ok.any():
        return out
    _, z, shift, scale = standardised(state)
    index, orient, bounds = metrics.thresholds(shift, scale)
    shortfall = np.maximum(0.0, orient * z[:, index] - bounds)
    # A row the constraints call feasible counts as 0 whatever rounding the warp adds.
    out[ok] = np.where(metrics.feasible(state.metrics[ok]), 0.0, shortfall.sum(axis=1))
    return out


def _fit_column(surrogate: Surrogate, key, previous, dim: int, x, y, batch: int):
    previous = surrogate.init(dim) if previous is None else previous
    return surrogate.fit(key, previous, gp.make_data(x, y, gp.bucket_size(len(y), batch=batch)))


def _modelled(metrics: Metrics, parego: bool) -> tuple[list[int], dict[int, int]]:
    """The metric columns with a model of their own, and the model output of each. EHVI
    models every column; ParEGO models its scalarisation as output 0, then only the
    constrained columns."""
    if not parego:
        everything = list(range(len(metrics.columns)))
        return everything, {j: j for j in everything}
    constrained = sorted({metrics.columns.index(c[0]) for c in metrics.constraints})
    return constrained, {j: 1 + i for i, j in enumerate(constrained)}


def chebyshev(key, objectives: np.ndarray) -> np.ndarray:
    """ParEGO's augmented Chebyshev scalarisation of ``objectives`` (n, T), normalised to
    [0, 1] per objective, with weights drawn uniformly on the simplex by ``key``,
    standardised for the surrogate."""
    weights = np.asarray(jax.random.dirichlet(key, jnp.ones(objectives.shape[1])))
    low, high = objectives.min(axis=0), objectives.max(axis=0)
    scaled = (objectives - low) / np.where(high > low, high - low, 1.0)
    weighted = scaled * weights
    target = weighted.max(axis=1) + PAREGO_RHO * weighted.sum(axis=1)
    spread = target.std()
    return (target - target.mean()) / (spread if spread > 1e-12 else 1.0)


class Models(NamedTuple):
    """The fitted models of one proposal and what they were fitted to."""

    surrogate: Surrogate
    fitted: tuple  # one state per model output
    outputs: list[np.ndarray]  # per model output, the warped values it was fitted to
    x: np.ndarray
    z: np.ndarray  # the metric columns, oriented and standardised
    shift: np.ndarray
    scale: np.ndarray
    area: trust.Region | None = None  # a trust region's, with its box; None when exact
    feasible: np.ndarray | None = None  # (len(x),) the rows meeting every constraint


def _scalarised(state, z: np.ndarray, k: int) -> np.ndarray:
    count = len(state.settings.metrics.objectives)
    return chebyshev(
        jax.random.fold_in(keys.iteration_key(state.settings.seed, k), 5), z[:, :count]
    )


def fit_models(state, k: int | None = None, area: trust.Region | None = None) -> Models:
    """The surrogates proposal ``k`` (default: the next, ``n``) fits, each output ``i``
    continuing its own chain with key ``fold_in(fit key of n, i)``. In a trust ``area``
    (past ``exact_limit``, :func:`bojax.bo.loop.local_region`) they are
    local MAP fits to its rows, standardised afresh, as a single-metric run's are
    (:mod:`bojax.bo.trust`); the area comes back with its box."""
    settings, space = state.settings, state.space
    n = len(state.y)
    parego = settings.acquisition == "parego"
    surrogate = settings.make_surrogate(space)
    x, z, shift, scale = standardised(state, None if area is None else area.rows)
    ok = np.isfinite(state.y)
    feasible = settings.metrics.feasible(state.metrics[ok])
    feasible = feasible if area is None else feasible[area.rows]
    columns, _ = _modelled(settings.metrics, parego)
    outputs = [z[:, j] for j in columns]
    if parego:
        outputs.insert(0, _scalarised(state, z, n if k is None else k))
    previous = state.surrogate or (None,) * len(outputs)
    if area is not None:
        surrogate = trust.local_surrogate(surrogate)
        previous = tuple(None if p is None else trust.carried(p) for p in previous)
    fit_key = keys.proposal_keys(settings.seed, n)[0]
    batch = settings.batch
    fitted = tuple(
        _fit_column(surrogate, jax.random.fold_in(fit_key, i), previous[i], space.dim, x, y, batch)
        for i, y in enumerate(outputs)
    )
    if area is not None:  # the box follows the objectives' models' length-scales
        count = 1 if parego else len(settings.metrics.objectives)
        area = trust.with_box(area, space, trust.shortest_lengthscales(fitted[:count], space.dim))
    return Models(surrogate, fitted, outputs, x, z, shift, scale, area, feasible)


@functools.cache
def score_function(surrogate: Surrogate, acquire: AcquisitionRecord, draws=None, classifier=None):
    """One jitted score per (surrogate, acquisition, draws, classifier), reading a tuple
    of conditioned outputs and a :class:`MultiIncumbent`; candidates are scored in chunks
    so that the ``(S, chunk, boxes, T)`` intermediate stays near ``CHUNK_FLOATS``."""

    def one_chunk(x, conditioned, incumbent, feasibility):
        outputs = [surrogate.predictive(c, x) for c in conditioned]
        if incumbent.lower.ndim == 4:  # sampled fronts: one row per front
            outputs = [_per_front(m, v, incumbent.lower.shape[0]) for m, v in outputs]
        mean = jnp.stack([m for m, _ in outputs], axis=-1)
        var = jnp.stack([v for _, v in outputs], axis=-1)
        value = acquire(mean, var, incumbent)
        if classifier is None:
            return value
        return acquire.weighting(value, classifier.log_probability(*feasibility, x), incumbent.best)

    @jax.jit
    def score(x, args):
        conditioned, incumbent, _, *feasibility = args
        samples = jax.tree.leaves(conditioned[0])[0].shape[0]
        fronts = incumbent.lower.ndim == 4  # sampled fronts: (S J, 1, B, T) boxes
        if draws is not None:
            stride = samples // draws
            conditioned = jax.tree.map(lambda a: a[::stride][:draws], conditioned)
            if fronts:  # the strided draws' fronts too
                per_draw = incumbent.lower.shape[0] // samples
                incumbent = incumbent._replace(
                    **{
                        f: _strided(getattr(incumbent, f), per_draw, stride, draws)
                        for f in ("lower", "upper", "live")
                    }
                )
            samples = draws
        rows = incumbent.lower.shape[0] if fronts else samples
        per_candidate = rows * math.prod(incumbent.lower.shape[-2:])
        chunk = max(8, CHUNK_FLOATS // max(per_candidate, 1))
        m = x.shape[0]
        if m <= chunk:
            return one_chunk(x, conditioned, incumbent, feasibility)
        parts = -(-m // chunk)
        padded = jnp.concatenate([x, jnp.repeat(x[:1], parts * chunk - m, axis=0)])
        values = jax.lax.map(
            lambda part: one_chunk(part, conditioned, incumbent, feasibility),
            padded.reshape(parts, chunk, x.shape[1]),
        )
        return values.reshape(-1)[:m]

    return score


def _per_front(mean, var, fronts: int):
    """``(fronts, M)`` mean and variance, one row per sampled front ``r = s J + j``: a
    sampled-front posterior's ``(S, M, J)`` means in order, and a plain posterior's
    ``(S, M)`` repeated ``J`` times, as is every variance (it does not depend on the
    sampled values)."""
    per_draw = fronts // var.shape[0]
    if mean.ndim == 3:  # the first per_draw of each draw's J (all J but when screening)
        mean = jnp.moveaxis(mean[..., :per_draw], -1, 1).reshape(fronts, -1)
    else:
        mean = jnp.repeat(mean, per_draw, axis=0)
    return mean, jnp.repeat(var, per_draw, axis=0)


def _strided(a, per_draw: int, stride: int, draws: int):
    """The first sampled front of every ``stride``-th of the ``S`` draws (``a`` is
    ``(S J, ...)``): the screen of the candidate grid reads one front per draw."""
    return a.reshape(-1, per_draw, *a.shape[1:])[::stride][:draws, 0]


def _boxes(front_points: np.ndarray, reference: np.ndarray, draws: int = 1):
    """The non-dominated boxes, padded to a bucket (copies of box 0, not live); each of
    the ``draws`` hyperparameter draws sums over all of them."""
    lower, upper = pareto.nondominated_boxes(front_points, reference)
    size = gp.bucket_size(len(lower), minimum=4)
    _check_boxes(draws, size, len(reference))
    padded = _padded(lower, upper, size)
    return tuple(jnp.asarray(a) for a in padded)


def _check_boxes(fronts: int, boxes: int, count: int) -> None:
    """SettingsError where ``fronts`` fronts of ``boxes`` boxes in ``count`` objectives
    pass :data:`BOX_FLOATS`, before the acquisition asks for the memory."""
    if fronts * boxes * count > BOX_FLOATS:
        raise SettingsError(
            f"EHVI's box decomposition needs {boxes} boxes per front ({fronts} front(s), "
            f"{count} objectives), more than this run can score: the boxes number 2m + 1 "
            "for a front of m points with 3 objectives and grow about as m to the power "
            "objectives - 1 beyond, and the acquisition's time and memory with them; use "
            "acquisition='parego' (the default from 4 objectives)"
        )


def _padded(lower: np.ndarray, upper: np.ndarray, size: int):
    live = np.arange(size) < len(lower)
    lower = np.concatenate([lower, np.repeat(lower[:1], size - len(lower), axis=0)])
    upper = np.concatenate([upper, np.repeat(upper[:1], size - len(upper), axis=0)])
    return lower, upper, live


def _believed(surrogate: Surrogate, fitted, key, x, y, pending: np.ndarray, room: int, batch):
    """``(conditioned, believed outcomes (P,))``: the Kriging believer for one output
    (padded for ``room`` pending points in a run adding ``batch`` at a time, as
    :func:`bojax.bo.loop.ask_batch` does)."""
    if len(pending) == 0:
        return surrogate.conditioned(fitted), np.zeros(0)
    if hasattr(surrogate, "fantasize"):
        conditioned, outcomes = surrogate.fantasize(key, fitted, pending, "believer", 1, room=room)
        return conditioned, np.asarray(jnp.mean(outcomes, axis=0))[: len(pending)]
    mean, _ = surrogate.predict(fitted, jnp.asarray(pending))
    believed = np.asarray(jnp.mean(mean, axis=0))
    size = gp.bucket_size(len(y) + room, batch=batch)
    data = gp.make_data(np.concatenate([x, pending]), np.concatenate([y, believed]), size)
    return surrogate.conditioned(surrogate.fit(key, fitted, data)), believed


def propose_batch(state, classifier, feasibility, taken, first: int, q: int, area=None):
    """Up to ``q`` points ``(q', d)``, the state with the fitted models, and diagnostics,
    for a run with several metrics: greedily, each proposal with the pending points and
    the batch so far as believers. ``classifier`` and ``feasibility`` weight by
    P(success) as in :func:`bojax.bo.loop.ask_batch`; a trust ``area`` confines the
    proposals to its box (anywhere, should its points all be taken)."""
    settings, space = state.settings, state.space
    metrics: Metrics = settings.metrics
    acquire = get_acquisition(settings.acquisition)
    parego = acquire.name == "parego"
    sampled = acquire.name == "log_nehvi"
    count = len(metrics.objectives)
    models = fit_models(state, first, area)
    x, z, surrogate, area = models.x, models.z, models.surrogate, models.area
    feasible = models.feasible
    found = bool(feasible.any())
    boxes_tried = (None,) if area is None else ((area.lower, area.upper), None)
    _, output_of = _modelled(metrics, parego)
    index, orient, bounds = metrics.thresholds(models.shift, models.scale)
    index = np.array([output_of[j] for j in index], dtype=np.int32)
    beyond, feasible_z = _front_beyond(state, models, count)
    reference = _reference(settings, metrics, feasible_z, models.shift, models.scale)
    score = score_function(surrogate, acquire, None, classifier)
    draws = surrogate.screening_draws()
    if sampled and draws is None:  # the grid is ranked under one sampled front per draw
        draws = surrogate.samples_per_fit
    screen = None if draws is None else score_function(surrogate, acquire, draws, classifier)
    fitted, outputs = models.fitted, models.outputs
    observed_front = z[feasible, :count]
    if settings.incumbent == "posterior_mean" and found and not parego:  # the noisy variant
        observed_front = pooled_means(surrogate, fitted, x[feasible], count, settings.batch)
    if sampled and found:  # the baseline depends on the fit only, not on the batch so far
        kept = baseline(x[feasible], observed_front, surrogate, fitted, count, settings.batch)
        at = x[feasible][kept]
    # Rows each box sum runs over: the predictive's draws (a GP's samples; one for a BNN,
    # whose predictive is one Gaussian however many networks it keeps).
    draws = surrogate.predictive(surrogate.conditioned(fitted[0]), jnp.asarray(x[:1]))[0]
    draws = int(np.shape(draws)[0]) if np.ndim(draws) > 1 else 1
    points, infos = [], []
    room = len(taken) + max(q, settings.batch) - 1
    for k in range(first, first + q):
        if parego and k > first:  # a new scalarisation per proposal
            outputs = [_scalarised(state, z, k), *outputs[1:]]
            key = jax.random.fold_in(keys.proposal_keys(settings.seed, k)[0], 0)
            refit = _fit_column(surrogate, key, fitted[0], space.dim, x, outputs[0], settings.batch)
            fitted = (refit, *fitted[1:])
        believe_key = jax.random.fold_in(keys.iteration_key(settings.seed, k), 3)
        conditioned, believed = [], []
        for i, (model, y) in enumerate(zip(fitted, outputs, strict=True)):
            c, b = _believed(
                surrogate, model, jax.random.fold_in(believe_key, i), x, y, taken, room,
                settings.batch,
            )  # fmt: skip
            conditioned.append(c)
            believed.append(b)
        believed = np.stack(believed, axis=1) if len(taken) else np.zeros((0, len(fitted)))
        if parego:
            best = float(np.min(outputs[0][feasible])) if found else 0.0
            if len(taken):
                best = min(best, float(np.min(believed[:, 0])))
            boxes = _boxes(np.zeros((0, 1)), np.zeros(1))  # unread
        else:
            best = 0.0
            front_points = np.concatenate([observed_front, beyond])
            if len(taken):  # believed outcomes that are believed feasible join the front
                ok = np.all(orient * believed[:, index] <= bounds, axis=1)
                front_points = np.concatenate([front_points, believed[ok, :count]])
            if sampled and found:
                extra = front_points[len(observed_front) :]
                front_key = jax.random.fold_in(keys.iteration_key(settings.seed, k), 6)
                conditioned, boxes = sampled_fronts(
                    surrogate, front_key, conditioned, count, at, extra, reference,
                    settings.fantasies,
                )  # fmt: skip
            else:
                boxes = _boxes(front_points, reference, draws)
        incumbent = MultiIncumbent(
            *boxes,
            found=jnp.asarray(found),
            best=jnp.asarray(best, jnp.float64),
            columns=jnp.asarray(index),
            orient=jnp.asarray(orient),
            bounds=jnp.asarray(bounds),
        )
        try:
            u, value = propose_within(
                boxes_tried,
                keys.proposal_keys(settings.seed, k)[1],
                score,
                (tuple(conditioned), incumbent, {}, *feasibility),
                space,
                state.u,
                taken,
                incumbent=_start(x, z[:, :count], feasible, k),
                method=settings.optimizer,
                num_candidates=settings.num_candidates,
                screen=screen,
            )
        except SpaceExhaustedError:
            if points:
                break
            raise
        points.append(u)
        infos.append({"phase": "bo", "acquisition_value": value, **(area.info() if area else {})})
        taken = np.concatenate([taken, u[None]])
    # The chains the next ask continues are this ask's first fit's: a resume replays that
    # fit only, so ParEGO's refits for a batch's later scalarisations are not carried on.
    return np.stack(points), state._replace(surrogate=models.fitted), infos


def _front_beyond(state, models: Models, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``(beyond, feasible)`` in the models' standardised units: the feasible front's
    points a local model's rows leave out (none when exact), which the boxes keep
    fixed so EHVI measures against the whole front, and every feasible evaluation's
    objectives, which the reference point is read from."""
    if models.area is None:
        return np.zeros((0, count)), models.z[models.feasible, :count]
    metrics: Metrics = state.settings.metrics
    ok = np.isfinite(state.y)
    values = state.metrics[ok]
    z = (values * metrics.signs - models.shift) / models.scale
    feasible = metrics.feasible(values)
    outside = np.ones(len(z), dtype=bool)
    outside[models.area.rows] = False
    on_front = np.zeros(len(z), dtype=bool)
    on_front[np.flatnonzero(feasible)[pareto.pareto_mask(z[feasible, :count])]] = True
    return z[on_front & outside, :count], z[feasible, :count]


def pooled_means(surrogate, fitted, x: np.ndarray, count: int, batch: int = 1) -> np.ndarray:
    """``(n, count)``: each objective's posterior mean at ``x``, pooled over the draws."""
    n = len(x)  # padded to a bucket: one compilation per bucket, not per step
    size = gp.bucket_size(n, batch=batch)
    at = jnp.asarray(np.concatenate([x, np.repeat(x[:1], size - n, axis=0)]))
    means = [jnp.mean(surrogate.predict(fitted[j], at)[0], axis=0) for j in range(count)]
    return np.stack([np.asarray(m)[:n] for m in means], axis=1)


FRONTS = 32  # sampled fronts in all by default: 2 per draw of a 16-draw chain
BASELINE_LIMIT = 64  # sampled fronts: at most this many baseline points


def baseline(
    x: np.ndarray, observed: np.ndarray, surrogate, fitted, count: int, batch: int = 1
) -> np.ndarray:
    """Indices of the feasible points whose fronts noisy EHVI samples: those on the
    observed front or on the front of the pooled posterior means (a point just behind
    the observed front may lead in a sample), at most :data:`BASELINE_LIMIT`."""
    believed = pooled_means(surrogate, fitted, x, count, batch)
    keep = pareto.pareto_mask(observed) | pareto.pareto_mask(believed)
    return np.flatnonzero(keep)[:BASELINE_LIMIT]


def sampled_fronts(surrogate, key, conditioned, count: int, at, extra, reference, fantasies):
    """``(conditioned, boxes)`` for noisy EHVI. Each objective's ``S`` posteriors draw
    ``J`` joint noise-free samples at ``at`` (the baseline, (b, d)) and are conditioned
    on them (:func:`bojax.gp.fantasies.sample_latent`: ``J`` means per prediction,
    sample ``r = s J + j``); the constraints' posteriors stay as they are, each draw's
    prediction repeated for its ``J`` fronts (:func:`_per_front`). Sample ``r``'s front
    is its values at ``at`` plus ``extra`` (believed pending outcomes, and past
    ``exact_limit`` the front's points outside the local rows), cut into boxes
    padded to one bucket: lower and upper ``(S J, 1, B, T)``, live ``(S J, 1, B)``."""
    samples = jax.tree.leaves(conditioned[0])[0].shape[0]
    per_draw = fantasies if fantasies is not None else max(1, math.ceil(FRONTS / samples))
    baseline_data = gp.fantasies.pending_data(at)
    values, sampled = [], list(conditioned)
    for i in range(count):
        sampled[i], outcomes = gp.fantasies.sample_latent(
            surrogate.model, per_draw, jax.random.fold_in(key, i), conditioned[i], baseline_data
        )
        values.append(np.asarray(outcomes)[:, : len(at)])
    fronts = np.stack(values, axis=-1)  # (S J, b, T)
    raw = [pareto.nondominated_boxes(np.concatenate([f, extra]), reference) for f in fronts]
    # Powers of two: the largest of S J box counts moves at nearly every step, and each
    # new size would compile the score again.
    size = 1 << max(2, (max(len(lower) for lower, _ in raw) - 1).bit_length())
    _check_boxes(len(fronts), size, count)
    boxes = [_padded(lower, upper, size) for lower, upper in raw]
    lower, upper, live = (jnp.asarray(np.stack([b[i] for b in boxes])[:, None]) for i in range(3))
    return sampled, (lower, upper, live)


def _reference(settings, metrics: Metrics, feasible_z: np.ndarray, shift, scale) -> np.ndarray:
    """The reference point in warped units: the user's, or the search rule's on the
    feasible observations (a unit box beyond the origin while none is feasible; unused
    then)."""
    count = len(metrics.objectives)
    if settings.reference_point is not None:
        given = np.asarray(settings.reference_point, dtype=np.float64) * metrics.signs[:count]
        return (given - shift[:count]) / scale[:count]
    if len(feasible_z) == 0:
        return np.ones(count)
    return pareto.search_reference_point(feasible_z)


def _start(x: np.ndarray, objectives: np.ndarray, feasible: np.ndarray, k: int) -> np.ndarray:
    """A refinement start: the feasible front's points in turn (all points if none)."""
    pool = np.flatnonzero(feasible) if feasible.any() else np.arange(len(x))
    on_front = pool[pareto.pareto_mask(objectives[pool])]
    return x[on_front[k % len(on_front)]]
