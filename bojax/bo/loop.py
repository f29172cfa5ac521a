"""The BO loop as functions: ``init`` / ``ask`` (or ``ask_batch``) / ``tell``.

Proposals are numbered in the order they are issued, ``k = 0, 1, ...``. The first
``initial`` take points of a scrambled Sobol design; later ones fit the surrogate to the
successful evaluations so far (outputs warped, :mod:`bojax.bo.warping`) and
maximise the acquisition, with points still being evaluated as fantasies
(:mod:`bojax.gp.fantasies`). All randomness derives from ``fold_in(key(seed), k)``, and
the chain states of the surrogate and the failure classifier are the only things carried
between fits, which is what makes a resumed sequential run bit-identical to an
uninterrupted one (see :mod:`bojax.bo.journal`).

Failed evaluations (NaN outputs) are never the surrogate's data. Once one exists, a
failure classifier (``settings.failure_model``, :mod:`bojax.surrogates.classifier`) is
fitted to every evaluation's success or failure and each acquisition, the policies'
included, is weighted by its probability of success
(:func:`bojax.bo.acquisition.weighted_by_success`); with no success yet the loop
proposes where success is most probable (Gelbart et al. 2014). Before the first
failure nothing of this runs, so such runs are what they were without it.
:func:`bojax.bo.driver.minimize` runs the loop, sequentially or over an executor.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bojax import gp
from bojax.bo import keys, multiobjective, policies, trust, warping
from bojax.bo.acquisition import AcquisitionRecord, get_acquisition
from bojax.bo.evaluation import named_entries, short_repr
from bojax.bo.optimize import (
    ENUMERATION_LIMIT,
    candidate_grid,
    enumeration,
    propose,
    propose_within,
    repeats,
)
from bojax.bo.settings import Settings
from bojax.compilation import release_if_crowded, use_persistent_cache
from bojax.errors import (
    DataError,
    SettingsError,
    SpaceDefinitionError,
    SpaceExhaustedError,
    is_count,
    warn_user,
)
from bojax.gp import fantasies
from bojax.parameters.base import is_number
from bojax.spaces import IRRELEVANT, Space, repeated_mask
from bojax.surrogates import GPClassifier, Surrogate
from bojax.threads import with_blas_threads

Objective = Callable[[dict[str, Any]], float]


class BOState(NamedTuple):
    """The loop's state: evaluated unit points ``u`` (n, d), outputs ``y`` (NaN = failed).

    A run with several metrics (``settings.objectives``) also keeps ``metrics`` (n, K),
    each evaluation's metric columns (:class:`bojax.bo.metrics.Metrics`) in their own
    units; ``y`` is then the first objective's column."""

    space: Space
    settings: Settings
    u: np.ndarray
    y: np.ndarray
    surrogate: Any  # the surrogate's state (None before the first fit)
    classifier: Any = None  # the failure classifier's state (None before the first failure)
    metrics: np.ndarray | None = None  # (n, K) with several metrics, else None
    seconds: np.ndarray | None = None  # (n,) each evaluation's seconds where cost_aware


def init(space: Space, settings: Settings | None = None, **overrides: Any) -> BOState:
    """A run with no data yet, with ``settings`` (default :class:`Settings`) and keyword
    ``overrides`` of its fields. Turns on the persistent compilation cache (see
    :func:`bojax.compilation.use_persistent_cache`), so a second run skips compiling."""
    if not isinstance(space, Space):
        raise SpaceDefinitionError(
            f"the search space must be a bojax.Space, got {type(space).__name__}: wrap the "
            "parameters as bojax.Space([...]) (or load one with bojax.spaces.load_space)"
        )
    settings = (Settings() if settings is None else settings).replace(**overrides)
    use_persistent_cache()
    metrics = None if settings.metrics is None else np.zeros((0, len(settings.metrics.columns)))
    seconds = np.zeros(0) if settings.cost_aware else None
    return BOState(
        space, settings, np.zeros((0, space.dim)), np.zeros(0), None, None, metrics, seconds
    )


def tell(state: BOState, u: np.ndarray, y: Any, seconds: float | None = None) -> BOState:
    """Record the outcome of evaluating unit point ``u``; ``y`` NaN marks a failure. With
    several metrics ``y`` is the dict of metrics (or their columns in order, or NaN). A
    ``cost_aware`` run needs the evaluation's ``seconds`` (a positive number). Anything
    else is a :class:`DataError` saying what was expected, before the state changes."""
    u = _told_point(state.space, u)
    if state.seconds is not None:
        if not (is_number(seconds) and seconds > 0):
            raise DataError(
                f"a cost_aware run needs each evaluation's seconds (> 0): tell(state, u, y, "
                f"seconds), got seconds={seconds!r}"
            )
        state = state._replace(seconds=np.append(state.seconds, float(seconds)))
    state = state._replace(u=np.concatenate([state.u, u]))
    metrics = state.settings.metrics
    if metrics is None:
        return state._replace(y=np.append(state.y, _told_value(y)))
    row = _told_row(metrics, y)
    if not np.all(np.isfinite(row)):
        row = np.full_like(row, np.nan)  # a failure: every column missing
    return state._replace(
        y=np.append(state.y, row[0]), metrics=np.concatenate([state.metrics, row[None]])
    )


def _told_row(metrics, y: Any) -> np.ndarray:
    """The metrics' row of a told outcome: a dict of them (or a row labelled with their
    names, such as a pandas Series), their columns in order, or NaN."""
    expected = f"this run has metrics {metrics.columns}: tell a dict of them (or NaN)"
    try:
        named = named_entries(y)  # a dict, or a pandas row: read by name, not position
    except ValueError as error:
        raise DataError(str(error)) from None
    if named is not None:
        y = named
        missing = metrics.missing(y)
        if missing:
            raise DataError(f"the metrics {sorted(y)} lack {missing}")
        numbers_ = [_told_metric(y[name]) for name in metrics.columns]
        wrong = [n for n, v in zip(metrics.columns, numbers_, strict=True) if v is None]
        if wrong:
            raise DataError(f"metrics must be numbers: {wrong[0]!r} is {short_repr(y[wrong[0]])}")
        return np.array(numbers_, np.float64)
    try:
        row = np.asarray(y, dtype=object)
    except (TypeError, ValueError):  # a ragged list
        raise DataError(f"{expected}; got {short_repr(y)}") from None
    if row.ndim == 0:  # NaN (or another non-finite number) marks a failure
        value = None if y is None else _told_metric(y)
        if value is None or math.isfinite(value):
            raise DataError(f"{expected}; got {short_repr(y)}")
        return np.full(len(metrics.columns), np.nan)
    values = [_told_metric(v) for v in row.ravel()]
    if None in values or len(values) != len(metrics.columns):
        raise DataError(f"{expected}; got {short_repr(y)}")
    return np.array(values, np.float64)


def _told_metric(value: Any) -> float | None:
    """One told metric as a float: numbers of any kind (Decimal, NumPy and JAX scalars, a
    pandas row's objects), None as NaN (a failure), an int beyond float64 as an infinity;
    None (not a number) for text and booleans, which ``float`` would read as numbers."""
    if isinstance(value, np.ndarray | jax.Array) and value.size == 1:
        value = value.reshape(()).item()
    if value is None:
        return math.nan
    if isinstance(value, str | bytes | bool | np.bool_ | np.ndarray | jax.Array):
        return None
    try:
        return float(value)
    except OverflowError:  # an int beyond float64
        return -math.inf if value < 0 else math.inf
    except (TypeError, ValueError):
        return None


def _in_unit_cube(rows: np.ndarray) -> bool:
    """Whether every coordinate is in [0, 1] or the sentinel of an unused parameter."""
    return bool(np.all((rows == IRRELEVANT) | ((rows >= 0.0) & (rows <= 1.0))))


def _told_point(space: Space, u: Any) -> np.ndarray:
    """``u`` as a (1, dim) float64 row, snapped (:meth:`Space.snap`: integer and
    categorical coordinates to their bins' centres, those of parameters whose condition
    does not hold to the sentinel), as ask's points are: the overlap kernel compares
    categorical coordinates for equality, so an unsnapped one would be a choice of its
    own. DataError unless it is ``dim`` numbers, each in [0, 1] or the sentinel of a
    parameter whose condition does not hold (a point outside the cube would make every
    later ``ask`` fail)."""
    dim = space.dim
    try:
        row = np.asarray(u, dtype=np.float64)
    except (TypeError, ValueError):
        row = None
    inside = row is not None and _in_unit_cube(row)
    if row is None or row.size != dim or not inside:
        raise DataError(
            f"tell's u must be the {dim} unit coordinates ask returned (each in [0, 1]; "
            f"space.to_unit(point) gives them), got {u!r:.200}"
        )
    return _snapped(space, row.reshape(1, dim), "tell's u", u)


def _snapped(space: Space, rows: np.ndarray, what: str, given: Any) -> np.ndarray:
    """``rows`` snapped to the space; DataError where a row holds the sentinel for a
    parameter it uses (snapping would turn it into a real value: a design never asked)."""
    snapped = space.snap(rows)
    misplaced = np.argwhere((rows == IRRELEVANT) & (snapped != IRRELEVANT))
    if misplaced.size:
        name = space.parameters[misplaced[0][1]].name
        raise DataError(
            f"{what} holds the sentinel {IRRELEVANT} for {name!r}, which this point "
            f"uses (its condition holds, or it has none): got {given!r:.200}"
        )
    return snapped


def _pending_points(space: Space, pending: Any) -> np.ndarray:
    """``pending`` as (P, dim) unit rows (one point may be one row); DataError unless it
    holds rows of ``dim`` numbers in [0, 1] (or the sentinel), as ask returns them."""
    try:
        rows = np.asarray(pending, dtype=np.float64)
    except (TypeError, ValueError):
        rows = None
    fits = rows is not None and (
        rows.size == 0
        or (rows.ndim == 2 and rows.shape[1] == space.dim)
        or (rows.ndim == 1 and rows.size == space.dim)  # one point
    )
    if not fits:
        shape = "?" if rows is None else rows.shape
        raise DataError(
            f"pending must be rows of the {space.dim} unit coordinates ask returned, shape "
            f"(P, {space.dim}); got shape {shape}: {pending!r:.200}"
        )
    rows = rows.reshape(-1, space.dim)
    if not _in_unit_cube(rows):
        raise DataError(f"pending points must lie in [0, 1] (or be the sentinel): {pending!r:.200}")
    if rows.size:  # snapped as tell snaps: the overlap kernel compares categoricals for
        # equality, so an off-centre coordinate was a choice of its own (review CM)
        rows = _snapped(space, rows, "a pending point", pending)
    return rows


def _told_value(y: Any) -> float:
    """A single objective's told value as a float: NaN (a failure) where it is not finite;
    DataError where it is not a number (a string, None, a dict, a list)."""
    if isinstance(y, np.ndarray | jax.Array) and y.size == 1:
        y = y.reshape(()).item()
    try:
        several = named_entries(y) is not None
    except ValueError:  # a labelled row whose labels repeat
        several = True
    if several:
        raise DataError(
            "this run has one objective: tell a number, not a dict (declare objectives= "
            "to optimise several metrics)"
        )
    if not isinstance(y, numbers.Real) or isinstance(y, bool | np.bool_):
        raise DataError(f"tell's y must be a number (NaN for a failure), got {y!r:.200}")
    try:
        value = float(y)
    except OverflowError:  # an int beyond float64
        value = math.inf
    return value if math.isfinite(value) else math.nan


def _design_key(settings: Settings) -> jax.Array:
    return keys.design_key(settings.seed)


def _iteration_key(settings: Settings, n: int) -> jax.Array:
    return keys.iteration_key(settings.seed, n)


def output_warping(state: BOState, outputs: np.ndarray | None = None) -> warping.Warping:
    """The warping fitted to ``outputs`` (default: every successful output;
    :mod:`bojax.bo.warping`): ``settings.warping``, or the surrogate's own preference
    where that is None."""
    settings = state.settings
    kind = settings.warping or getattr(settings.make_surrogate(), "warping", "standardise")
    outputs = state.y[np.isfinite(state.y)] if outputs is None else outputs
    return warping.fit(kind, outputs, settings.maximize)


def model_based(state: BOState) -> bool:
    """Whether the next proposal comes from a model: the initial design is complete and at
    least one evaluation succeeded, or failed with failures modelled."""
    if len(state.y) < state.settings.initial:
        return False
    return bool(np.isfinite(state.y).any()) or models_failures(state)


def models_failures(state: BOState) -> bool:
    """Whether a failure classifier is fitted: one is configured and something failed."""
    failed = not bool(np.isfinite(state.y).all())
    return failed and state.settings.make_failure_model() is not None


def _keys(settings: Settings, k: int) -> tuple[jax.Array, jax.Array]:
    """The fit key and the proposal key of proposal ``k`` (issued in that order)."""
    return keys.proposal_keys(settings.seed, k)


def fit_classifier(state: BOState) -> BOState:
    """The state with the failure classifier fitted to every finished evaluation's success
    (unchanged while nothing failed or failures are not modelled). Its key is
    ``fold_in(iteration key, 4)``, apart from the surrogate's and the proposals'."""
    if not models_failures(state):
        return state
    settings, n = state.settings, len(state.y)
    classifier = settings.make_failure_model(state.space)
    previous = (
        state.classifier if state.classifier is not None else classifier.init(state.space.dim)
    )
    key = jax.random.fold_in(_iteration_key(settings, n), 4)
    u, success = state.u, np.isfinite(state.y)
    area = local_region(state)
    if area is not None:  # past exact_limit, the evaluations nearest the incumbent
        rows = trust.nearest(u, area.centre, settings.local_points)
        u, success = u[rows], success[rows]
    fitted = classifier.fit(key, previous, u, success, batch=settings.batch)
    return state._replace(classifier=fitted)


@with_blas_threads
def fit_models(state: BOState) -> BOState:
    """The state with everything the next proposal fits: the failure classifier (once
    something failed) and the surrogate (once something succeeded, unless the proposal
    opens a restarted trust region with random points, which fit none: a resume replays
    exactly the fits the run made, :func:`bojax.bo.driver._restore`)."""
    state = fit_classifier(state)
    if np.isfinite(state.y).any():
        area = local_region(state)
        if area is not None and area.designing:
            return state
        if state.settings.metrics is not None:
            models = multiobjective.fit_models(state, area=area)
            return state._replace(surrogate=models.fitted)
        state = state._replace(surrogate=fit_surrogate(state).fitted)
    return state


class SurrogateFit(NamedTuple):
    """A fitted surrogate and what it was fitted to: unit points ``x``, warped outputs
    ``y`` (minimised), the ``warping`` that made them and, past ``exact_limit``, the
    trust ``region`` whose nearest evaluations they are (:mod:`bojax.bo.trust`)."""

    surrogate: Surrogate
    fitted: Any
    x: np.ndarray
    y: np.ndarray
    warping: warping.Warping
    region: trust.Region | None


def _sign(state: BOState) -> float:
    return -1.0 if state.settings.maximize else 1.0


def local_region(state: BOState) -> trust.Region | None:
    """The trust region of the next proposal once the run is past ``exact_limit``
    successes (None before). One objective under outcome constraints centres on the best
    feasible evaluation (:func:`bojax.bo.multiobjective.violations`); several objectives
    on the feasible front's points in turn (:func:`bojax.bo.trust.front_region`)."""
    settings = state.settings
    if not trust.is_local(settings, int(np.isfinite(state.y).sum())):
        return None
    if settings.metrics is None:
        return trust.region(settings, state.u, state.y, _sign(state), state.space.dim)
    violation = multiobjective.violations(state)
    count = len(settings.metrics.objectives)
    if count > 1:
        objectives = state.metrics[:, :count] * settings.metrics.signs[:count]
        objectives = np.where(np.isfinite(state.y)[:, None], objectives, np.nan)
        return trust.front_region(settings, state.u, objectives, violation, state.space.dim)
    sign = float(settings.metrics.signs[0])  # y is the objective's column, in its units
    return trust.region(settings, state.u, state.y, sign, state.space.dim, violation)


def fit_surrogate(state: BOState) -> SurrogateFit:
    """The surrogate fitted to the successful evaluations (past ``exact_limit``, to the
    trust region's ``local_points``, nearest the incumbent and a quarter the region's
    latest proposals, by :func:`bojax.bo.trust.local_surrogate`), with the data it saw."""
    settings, n = state.settings, len(state.y)
    surrogate = settings.make_surrogate(state.space)
    ok = np.isfinite(state.y)
    x, raw = state.u[ok], state.y[ok]
    area = local_region(state)
    previous = state.surrogate
    if area is not None:
        surrogate = trust.local_surrogate(surrogate)
        x, raw = x[area.rows], raw[area.rows]
        previous = None if previous is None else trust.carried(previous)
    warp = output_warping(state, raw)  # a local model's outputs get their own scale
    y = warp.forward(raw)
    previous = previous if previous is not None else surrogate.init(state.space.dim)
    data = gp.make_data(x, y, size=gp.bucket_size(len(y), batch=settings.batch))
    fitted = surrogate.fit(_keys(settings, n)[0], previous, data)
    if area is not None:
        area = trust.with_box(area, state.space, trust.fitted_lengthscales(fitted, x.shape[1]))
    return SurrogateFit(surrogate, fitted, x, y, warp, area)


@functools.cache
def _score_function(
    surrogate: Surrogate,
    acquire: AcquisitionRecord,
    draws: int | None = None,
    classifier: GPClassifier | None = None,
    cost: Surrogate | None = None,
):
    """One jitted score per (surrogate, acquisition, draws, classifier, cost model): a
    stable object, so no recompiles. ``draws`` keeps that many evenly spaced samples (a
    cheaper screen). With a ``classifier`` the arguments carry its conditioned draws
    fourth, and the score is weighted by the probability of success as the acquisition's
    record says. With a ``cost`` model (``cost_aware``) they end with ``(its conditioned
    posterior, the sd of the log seconds)`` and the score is divided by the predicted
    seconds, through the same weighting (``log a - log c`` for log-EI, ``a / c`` for EI):
    expected improvement per second (Snoek et al. 2012). Success and cost are one
    weighting, by ``log P - log c``: weighted twice, LCB's ``softplus`` wrapped its own
    output and ranked candidates otherwise than ``softplus(best - LCB) P / c`` (review)."""

    @jax.jit
    def score(x, args):
        log_weight = None
        if cost is not None:
            *args, (cost_conditioned, cost_scale) = args
            # log c(x) up to a constant: the cost GP sees standardised log seconds.
            log_seconds = jnp.mean(cost.predictive(cost_conditioned, x)[0], axis=0)
            log_weight = -cost_scale * log_seconds
        value, best, log_success = unweighted(x, args)
        if log_success is not None:
            log_weight = log_success if log_weight is None else log_weight + log_success
        return value if log_weight is None else acquire.weighting(value, log_weight, best)

    def unweighted(x, args):
        """The acquisition, the incumbent it used and log P(success) (None without a
        classifier)."""
        conditioned, best, options, *feasibility = args
        if draws is not None:
            samples = jax.tree.leaves(conditioned)[0].shape[0]
            stride = samples // draws
            conditioned = jax.tree.map(lambda a: a[::stride][:draws], conditioned)
            if jnp.ndim(best):  # one incumbent per fantasy (S J, 1): each draw's first
                best = best[:: stride * max(1, best.shape[0] // samples)][:draws]
                if isinstance(conditioned, gp.Posterior) and conditioned.alpha.ndim == 3:
                    conditioned = conditioned._replace(alpha=conditioned.alpha[..., :1])
        mean, var = fantasies.rows(*surrogate.predictive(conditioned, x))
        value = acquire(mean, var, best, **options)
        if classifier is None:
            return value, best, None
        return value, best, classifier.log_probability(*feasibility, x)

    return score


@functools.cache
def success_score(classifier: GPClassifier):
    """``log P(success | x)``: what the loop maximises while nothing has succeeded."""
    return jax.jit(lambda x, posteriors: classifier.log_probability(posteriors, x))


def _screen_function(surrogate: Surrogate, acquire: AcquisitionRecord, classifier=None, cost=None):
    draws = surrogate.screening_draws()
    return None if draws is None else _score_function(surrogate, acquire, draws, classifier, cost)


COST_MODEL = "gp-map"  # the cost model's surrogate: log seconds are smooth and cheap to fit


class CostFit(NamedTuple):
    """A cost model fitted to the log of measured seconds: the surrogate the score reads
    (``predictive``), the score's extra arguments ``((conditioned posterior, scale),)``
    and ``seconds_at(u)``, the predicted seconds at unit point ``u`` (the exponential of
    the predicted log, averaged over the surrogate's samples)."""

    model: Any
    costing: tuple
    seconds_at: Any


@dataclass(frozen=True)
class FirstColumns:
    """``surrogate`` read on the first ``dim`` coordinates of a point: a cost that depends
    on the design and not on the step, scored over freeze-thaw's (design, step) points."""

    surrogate: Any
    dim: int

    def predictive(self, conditioned, x):
        return self.surrogate.predictive(conditioned, x[..., : self.dim])


def fit_cost(
    space: Space, u: np.ndarray, seconds: np.ndarray, key: jax.Array, batch: int = 1
) -> CostFit:
    """A MAP GP (``COST_MODEL``) fitted to the standardised log ``seconds`` at unit points
    ``u`` of ``space``, padded for a run adding ``batch`` points at a time. Each ask fits
    it afresh (nothing carried, so a resume replays it), from the two starts a
    warm-started fit gets rather than the eight of a run's first: log seconds are
    smooth, and on six smooth cost surfaces with 256 points both found the same optimum
    (1.15 s against 0.27 s a fit)."""
    from bojax.surrogates import SURROGATES, for_space

    model = for_space(SURROGATES.get(COST_MODEL), space)
    model = replace(model, map_restarts=model.map_restarts_later)
    log_seconds = np.log(seconds)
    scale = float(np.std(log_seconds)) or 1.0
    center = float(np.mean(log_seconds))
    data = gp.make_data(u, (log_seconds - center) / scale, gp.bucket_size(len(u), batch=batch))
    fitted = model.fit(key, model.init(space.dim), data)
    conditioned = model.conditioned(fitted)

    def seconds_at(point: np.ndarray) -> float:
        x = jnp.asarray(point, jnp.float64)[None, : space.dim]
        return float(np.exp(center + scale * np.mean(model.predictive(conditioned, x)[0])))

    return CostFit(model, ((conditioned, jnp.asarray(scale)),), seconds_at)


def _cost_terms(state: BOState, k: int, area: trust.Region | None = None) -> CostFit | None:
    """The cost model of a ``cost_aware`` run, None otherwise: :func:`fit_cost` on every
    evaluation's seconds so far or, in a trust ``area`` (past ``exact_limit``), on the
    ``local_points`` evaluations nearest its centre, failed ones included (their seconds
    were spent too). Proposals stay in the area, and an exact cost GP on every
    evaluation would cost ``O(n^3)`` an ask (14 s at n = 400, d = 6, against 0.3 s)."""
    if state.seconds is None or len(state.seconds) == 0:
        return None
    key = jax.random.fold_in(_iteration_key(state.settings, k), 7)
    rows = slice(None)
    if area is not None:
        rows = trust.nearest(state.u, area.centre, state.settings.local_points)
    return fit_cost(state.space, state.u[rows], state.seconds[rows], key, state.settings.batch)


def _success_diagnostics(state: BOState, u: np.ndarray, k: int) -> dict[str, float]:
    """P(success) at the proposal ``u`` and its largest value where the optimiser looked
    (its candidate grid and ``u``), which the driver's ``min_success_probability`` reads."""
    settings, classifier = state.settings, state.settings.make_failure_model(state.space)
    posteriors = classifier.conditioned(state.classifier)
    grid = candidate_grid(
        _keys(settings, k)[1], state.space, settings.optimizer, settings.num_candidates
    )
    log_p = success_score(classifier)
    at_u = float(np.exp(log_p(jnp.asarray(u[None]), posteriors)[0]))
    on_grid = float(np.exp(np.max(log_p(jnp.asarray(grid), posteriors))))
    return {"success_probability": at_u, "max_success_probability": max(at_u, on_grid)}


def ask(
    state: BOState, pending: np.ndarray | None = None
) -> tuple[np.ndarray, BOState, dict[str, Any]]:
    """The next unit point to evaluate, the state with the fitted surrogate, and diagnostics.

    ``pending`` (P, d) are unit points being evaluated: they get fantasy outcomes
    (``settings.fantasy``) and are never proposed again."""
    points, state, infos = ask_batch(state, 1, pending)
    return points[0], state, infos[0]


@with_blas_threads
def ask_batch(
    state: BOState,
    q: int,
    pending: np.ndarray | None = None,
    *,
    box: tuple[np.ndarray, np.ndarray] | None = None,
    fit: SurrogateFit | None = None,
    cost: CostFit | None = None,
    exclude: np.ndarray | None = None,
) -> tuple[np.ndarray, BOState, list[dict[str, Any]]]:
    """Up to ``q`` distinct unit points ``(q', d)`` to evaluate next, with diagnostics.

    ``box`` (unit ``(lower, upper)``) confines the model's proposals (a coordinate with
    ``lower == upper`` is held fixed); ``fit``, a :func:`fit_surrogate` of this state
    made already, saves fitting again (freeze-thaw reads the same fit's posterior);
    ``cost``, a cost model (:func:`fit_cost`), divides the acquisition by its predicted
    seconds as ``cost_aware`` does with the state's own (freeze-thaw's rates per step);
    ``exclude`` (unit rows) are points never to propose, without being believed anything
    (designs a step-wise run stopped and no longer models).

    The surrogate is fitted once, to the finished evaluations; the batch is then built
    greedily, each point proposed with the pending points and the batch so far as
    fantasies (:mod:`bojax.gp.fantasies`). Proposal ``k = n + P + j`` (finished, pending,
    position in the batch) draws its randomness from ``k``, so ``ask_batch(state, 1)``
    without pending points is the sequential loop. Fewer than ``q`` points come back only
    when a small integer space runs out; :class:`SpaceExhaustedError` if none does.

    Asking batches of more than 8, set the settings' ``q`` to that size (``init(space,
    q=16)``): the data are then padded to buckets twice the batch wide, so a batch does
    not meet new shapes, and compile the fit and acquisition again, every time.
    """
    if not is_count(q) or q < 1:
        raise SettingsError(f"q must be a positive integer, got {q!r}")
    settings, space = state.settings, state.space
    taken = np.zeros((0, space.dim)) if pending is None else _pending_points(space, pending)
    evaluated = state.u
    if exclude is not None and len(exclude):
        evaluated = np.concatenate([state.u, np.reshape(exclude, (-1, space.dim))])
    first = len(state.y) + len(taken)  # the index of this batch's first proposal
    if not model_based(state):
        points = _design_points(state, taken, first, q)
        return points, state, [{"phase": "initial"} for _ in points]

    release_if_crowded()  # outgrown buckets' programs would pile up in a long run
    state = fit_classifier(state)
    classifier = settings.make_failure_model(state.space) if models_failures(state) else None
    feasibility = () if classifier is None else (classifier.conditioned(state.classifier),)
    if not np.isfinite(state.y).any():
        return _likeliest_successes(state, classifier, taken, first, q)
    restart = local_region(state)
    if restart is not None and restart.designing:  # a new trust region's random design
        return _restart_points(state, restart, taken, first, q)
    if settings.metrics is not None:
        points, state, infos = multiobjective.propose_batch(
            state, classifier, feasibility, taken, first, q, restart
        )
        if classifier is not None:
            for k, (u, info) in enumerate(zip(points, infos, strict=True), start=first):
                info.update(_success_diagnostics(state, u, k))
        return points, state, infos
    surrogate, fitted, x, y, _, area = fit_surrogate(state) if fit is None else fit
    region = box is None and area is not None  # the box is the trust region's
    if region:
        box = (area.lower, area.upper)
    best = jnp.asarray(np.min(y))
    best_point = x[int(np.argmin(y))]
    if settings.incumbent == "posterior_mean":
        mean, _ = surrogate.predict(fitted, x)
        best = jnp.min(jnp.mean(mean, axis=0))
    acquire = get_acquisition(settings.acquisition)
    options = {name: getattr(settings, name) for name in acquire.options}
    costed = _cost_terms(state, first, area) if cost is None else cost
    cost, costing, seconds_at = costed or (None, (), None)
    points, infos = [], []
    believing = _believing_failures(state, surrogate, fitted, classifier, area, first)
    # The most fantasies this batch's proposals condition on (a run's last, shorter
    # batch pads as its others did).
    room = len(taken) + max(q, settings.batch) - 1
    for k in range(first, first + q):
        conditioned, incumbent = _conditioned(
            state, surrogate, believing, (x, y), taken, k, best, room, local=area is not None
        )
        try:
            u, value = propose_within(
                (box, None) if region else (box,),  # a used-up trust region: everywhere
                _keys(settings, k)[1],
                _score_function(surrogate, acquire, None, classifier, cost),
                (conditioned, incumbent, options, *feasibility, *costing),
                space,
                evaluated,
                taken,
                incumbent=best_point,
                method=settings.optimizer,
                num_candidates=settings.num_candidates,
                screen=_screen_function(surrogate, acquire, classifier, cost),
            )
        except SpaceExhaustedError:
            if points:
                break
            raise
        if math.isnan(value):  # NaN scores lose, so every one was NaN: a broken plugin?
            warn_user(
                f"acquisition {settings.acquisition!r} scored NaN at every candidate not "
                f"taken, at proposal {k}: the proposal is an arbitrary candidate",
                RuntimeWarning,
            )
        diagnostics = getattr(fitted, "diagnostics", None) or {}  # optional (protocol)
        info = {"phase": "bo", "acquisition_value": value, **diagnostics}
        if area is not None:
            info.update(area.info())
        if policies.explores(settings.policy) or settings.stop_tolerance is not None:
            args = (conditioned, incumbent, {}, *feasibility)
            # A trust region's box, then the whole space once every point in it is taken.
            boxes = (box, None) if region else (box,)
            if cost is not None and settings.stop_tolerance is not None:
                # The rule reads the acquisition itself, not it per relative second.
                unpriced = (conditioned, incumbent, options, *feasibility)
                value = _unpriced_best(
                    state, surrogate, acquire, classifier, unpriced, k, boxes, taken
                )
            u, choice = _apply_policy(state, surrogate, classifier, args, u, value, k, taken, boxes)
            info.update(choice)
        if classifier is not None:
            info.update(_success_diagnostics(state, u, k))
        if seconds_at is not None:
            info["predicted_seconds"] = seconds_at(u)
        points.append(u)
        infos.append(info)
        taken = np.concatenate([taken, u[None]])
        if info.get("converged"):
            break
    return np.stack(points), state._replace(surrogate=fitted), infos


def _believing_failures(state: BOState, surrogate, fitted, classifier, area, k: int):
    """``fitted`` conditioned on the failed evaluations' points with Kriging believers
    (the GP's own mean, :mod:`bojax.gp.fantasies`), for the acquisition only: the mean
    stays, the variance there shrinks. A failure says nothing of the objective, but a
    point that failed is no place to learn it either; without this the regression GP
    kept its prior variance wherever only failures were seen (a categorical choice that
    always fails), and as the rest of the space was learnt, that region's EI outgrew the
    weight P(success) put on it (the failing choice drew 7-10 of 24 proposals).
    Only with a failure model (``failure_model="none"`` drops failures) and a global GP
    (a local model past ``exact_limit`` sees its region's rows only)."""
    failed = state.u[~np.isfinite(state.y)]
    if classifier is None or area is not None or not len(failed):
        return fitted
    if not hasattr(surrogate, "fantasize") or not hasattr(fitted, "posteriors"):
        return fitted
    key = jax.random.fold_in(_iteration_key(state.settings, k), 7)
    room = gp.bucket_size(len(failed), minimum=8, batch=state.settings.batch)
    believed, _ = surrogate.fantasize(key, fitted, failed, "believer", None, room=room)
    return fitted._replace(posteriors=believed)


def _unpriced_best(
    state: BOState, surrogate, acquire, classifier, args, k, boxes, pending
) -> float:
    """The acquisition's best value without the cost weight, for ``stop_tolerance``
    under ``cost_aware``: the proposal maximises EI per relative second, whose value is
    EI times the geometric mean of the seconds over the point's own, so a run whose
    promising region was the costly one stopped with EI far above the tolerance (and
    one with cheap regions went on below it)."""
    key = _keys(state.settings, k)[1]
    return _maximise(state, surrogate, acquire, classifier, args, key, boxes, pending)[1]


def _maximise(state: BOState, surrogate, record, classifier, args, key, boxes, pending):
    """``(u, value)``: ``record``'s maximiser (weighted by P(success) with a
    ``classifier``, never by cost) in the first of ``boxes`` with a point left."""
    settings = state.settings
    return propose_within(
        boxes,
        key,
        _score_function(surrogate, record, None, classifier),
        args,
        state.space,
        state.u,
        pending,
        method=settings.optimizer,
        num_candidates=settings.num_candidates,
        screen=_screen_function(surrogate, record, classifier),
    )


def _likeliest_successes(state: BOState, classifier, taken, first: int, q: int):
    """While every evaluation has failed: the points where the classifier finds success
    most probable, i.e. away from the failures (Gelbart et al. 2014 maximise the
    probability of feasibility until a feasible point is found)."""
    settings, posteriors = state.settings, classifier.conditioned(state.classifier)
    points, infos = [], []
    for k in range(first, first + q):
        try:
            u, _ = propose(
                _keys(settings, k)[1], success_score(classifier), posteriors, state.space,
                state.u, taken, method=settings.optimizer, num_candidates=settings.num_candidates,
            )  # fmt: skip
        except SpaceExhaustedError:
            if points:
                break
            raise
        points.append(u)
        infos.append({"phase": "bo", **_success_diagnostics(state, u, k)})
        taken = np.concatenate([taken, u[None]])
    return np.stack(points), state, infos


# Uniform draws that may repeat a point before a small space's unseen points are listed.
REDRAWS = 100
EXHAUSTED = "the space is exhausted: every point is evaluated or pending"


def _restart_points(state: BOState, area: trust.Region, taken, first: int, q: int):
    """Uniform points that open a restarted trust region (:func:`bojax.bo.trust.replay`),
    proposal ``k`` drawn from its own key, a repeat drawn again (:func:`_new_points`)."""
    space = state.space

    def draws(k: int):
        key = jax.random.fold_in(_iteration_key(state.settings, k), 6)
        while True:
            key, draw = jax.random.split(key)
            yield space.sample(draw, 1)[0]

    points = _new_points(space, np.concatenate([state.u, taken]), first, q, draws)
    infos = [{"phase": "restart", **area.info()} for _ in points]
    return points, state, infos


def _design_points(state: BOState, taken: np.ndarray, first: int, q: int) -> np.ndarray:
    """Points ``first .. first + q - 1`` of the scrambled Sobol design (it runs on past
    ``initial`` while no fit is possible yet); one that repeats an evaluated, pending or
    chosen point (integers rounded together) is replaced by uniform draws
    (:func:`_new_points`)."""
    settings, space = state.settings, state.space
    design = space.sample(_design_key(settings), q, "sobol", skip=first)

    def draws(k: int):
        yield design[k - first]
        key = _iteration_key(settings, k)
        yield space.sample(key, 1)[0]
        for draw in itertools.count(1):
            yield space.sample(jax.random.fold_in(key, draw), 1)[0]

    return _new_points(space, np.concatenate([state.u, taken]), first, q, draws)


def _new_points(space: Space, seen: np.ndarray, first: int, q: int, draws) -> np.ndarray:
    """Up to ``q`` points: number ``k`` the first of ``draws(k)`` (at most ``REDRAWS + 1``
    of them) that repeats neither ``seen`` nor an earlier one, integers rounded together;
    failing that, in a small discrete space nearly used up, one of its unseen points.
    Fewer points once none is left, :class:`SpaceExhaustedError` if not even one."""
    points: list[np.ndarray] = []
    for k in range(first, first + q):
        known = space.snap(np.concatenate([seen, np.reshape(points, (-1, space.dim))]))
        candidates = itertools.islice(draws(k), REDRAWS + 1)
        u = next((c for c in candidates if not _repeats(c, known)), None)
        if u is None:
            u = _unseen_point(space, known)
        if u is None:
            if points:
                break
            raise SpaceExhaustedError(EXHAUSTED)
        points.append(u)
    return np.stack(points)


def _repeats(u: np.ndarray, known: np.ndarray) -> bool:
    return bool(repeated_mask(jnp.asarray(u[None]), jnp.asarray(known))[0])


def _unseen_point(space: Space, seen: np.ndarray) -> np.ndarray | None:
    """The first point of a discrete space's enumeration that ``seen`` (snapped) lacks;
    None when there is none, or the space is too large to list (draws find new points
    there)."""
    everything = enumeration(space, ENUMERATION_LIMIT)
    if everything is None:
        return None
    fresh = ~repeats(everything, seen)
    return everything[int(np.argmax(fresh))] if fresh.any() else None


def _conditioned(
    state: BOState, surrogate: Surrogate, fitted, data, pending, k: int, best, room, local=False
):
    """What the acquisition reads: the fitted surrogate and the incumbent, with fantasies
    for ``pending`` (then one incumbent per fantasy, :func:`bojax.gp.fantasies.incumbents`),
    padded for ``room`` of them, the most the batch reaches, so its proposals share one
    compiled acquisition.
    A ``local`` model (past ``exact_limit``) takes Kriging believers whatever
    ``settings.fantasy`` says: its one MAP draw would otherwise carry 128 fantasies, and
    a batch of 16 took 17-48 s at d = 20 instead of a few.

    A surrogate without ``fantasize`` (the BNN) gets the Kriging believer the classic way:
    it is refitted with the pooled predictive mean as the pending outcomes."""
    if len(pending) == 0:
        return surrogate.conditioned(fitted), best
    settings = state.settings
    key = jax.random.fold_in(_iteration_key(settings, k), 3)
    x, y = data
    if hasattr(surrogate, "fantasize"):
        strategy = "believer" if local else settings.fantasy
        conditioned, outcomes = surrogate.fantasize(
            key, fitted, pending, strategy, settings.fantasies, room=room
        )
        return conditioned, fantasies.incumbents(best, outcomes)
    mean, _ = surrogate.predict(fitted, jnp.asarray(pending))
    believed = np.asarray(jnp.mean(mean, axis=0))
    size = gp.bucket_size(len(y) + room, batch=settings.batch)  # one per batch, as above
    data = gp.make_data(np.concatenate([x, pending]), np.concatenate([y, believed]), size)
    refitted = surrogate.fit(key, fitted, data)
    return surrogate.conditioned(refitted), fantasies.incumbents(best, jnp.asarray(believed[None]))


def _apply_policy(
    state: BOState, surrogate: Surrogate, classifier, args, u, value, k, pending, boxes=(None,)
):
    """Choose between the acquisition maximiser ``u`` and the most uncertain point (each
    score weighted by P(success) when a ``classifier`` is fitted), the latter in the first
    of ``boxes`` with a point left (as :func:`bojax.bo.optimize.propose_within`)."""
    settings = state.settings
    # Keys of their own (fold_in 2), so the default loop's draws are left as they were.
    explore_key, draw_key = jax.random.split(jax.random.fold_in(_iteration_key(settings, k), 2))
    explore, sd, pi = u, math.nan, math.nan
    policy = policies.POLICIES.get(settings.policy)
    if policy.explores:
        explore, sd = _maximise(
            state, surrogate, policy.explore_with, classifier, args, explore_key, boxes, pending
        )
        pi_score = _score_function(surrogate, policy.improvement_with, None, classifier)
        pi = float(pi_score(jnp.asarray(explore[None]), args)[0])
    # The stopping rule reads the acquisition on its own scale: EI, not log EI (whose
    # values below a tolerance of 1e-3 meant EI below 1.001, and runs stopped at once).
    tolerance = settings.stop_tolerance
    if tolerance is not None and get_acquisition(settings.acquisition).on_log_scale:
        tolerance = math.log(tolerance)
    decision = policies.decide(
        draw_key,
        settings.policy,
        policies.Proposals(u, value, explore, sd, pi, _noise_sd(surrogate, args[0])),
        tau=settings.tau,
        scaling=settings.scaling,
        stop_tolerance=tolerance,
        stop_sd=settings.stop_sd,
        stop_noise=settings.stop_noise,
    )
    return decision.u, {
        "explored": float(decision.explored),
        "exploit_probability": decision.exploit_probability,
        "explore_sd": sd,
        "explore_pi": pi,
        "converged": float(decision.converged),
    }


def _noise_sd(surrogate: Surrogate, conditioned) -> float:
    """The surrogate's fitted noise sd in the loop's output units, NaN where it has none."""
    noise_sd = getattr(surrogate, "noise_sd", None)
    return math.nan if noise_sd is None else float(noise_sd(conditioned))


@with_blas_threads
def predictor(state: BOState) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``u -> (mean, sd)``: the posterior of the objective at unit points ``u`` (M, d), in
    the objective's own units, given every successful evaluation in ``state``.

    The surrogate is fitted once, afresh (as the next :func:`ask` would), and the
    samples' Gaussians are pooled: ``mean = E_s[mu_s]``, ``sd^2 = E_s[sigma_s^2] +
    Var_s[mu_s]``; both are then taken back through the output warping
    (:meth:`bojax.bo.warping.Warping.inverse` and ``inverse_sd``).
    """
    if not model_based(state):
        raise DataError("predict() needs the initial design evaluated and one success")
    if state.settings.metrics is not None:
        raise SettingsError("predict() models one objective; this run has several metrics")
    surrogate, fitted, *_, warp, _ = fit_surrogate(state)

    def posterior(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        u = jnp.asarray(u, dtype=jnp.float64).reshape(-1, state.space.dim)
        mean, var = (np.asarray(a) for a in surrogate.predict(fitted, u))
        pooled_mean = mean.mean(axis=0)
        pooled_sd = np.sqrt(var.mean(axis=0) + mean.var(axis=0))
        return warp.inverse(pooled_mean), warp.inverse_sd(pooled_mean, pooled_sd)

    return posterior


def success_predictor(state: BOState) -> Callable[[np.ndarray], np.ndarray] | None:
    """``u -> P(success | u)`` at unit points ``u`` (M, d) from the failure classifier,
    fitted once to every evaluation as the next :func:`ask` would fit it; None while
    nothing failed or failures are not modelled."""
    if not models_failures(state):
        return None
    state = fit_classifier(state)
    classifier = state.settings.make_failure_model(state.space)

    def probability(u: np.ndarray) -> np.ndarray:
        u = jnp.asarray(u, dtype=jnp.float64).reshape(-1, state.space.dim)
        return np.asarray(classifier.probability(state.classifier, u))

    return probability


def predict(state: BOState, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``predictor(state)(u)``: one fit, then the posterior mean and sd at ``u``."""
    return predictor(state)(u)
