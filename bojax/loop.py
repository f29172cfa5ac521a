"""The BO loop: a functional ``init`` / ``ask`` / ``tell`` and the one-call :func:`minimize`.

Iteration ``n`` (the number of finished evaluations) is the unit of everything: the
first ``initial`` iterations take points of a scrambled Sobol design, later ones fit
the surrogate to the successful evaluations so far (outputs standardised, negated when
maximising) and maximise the acquisition. All randomness derives from
``fold_in(key(seed), n)``, and the surrogate's chain state is the only thing carried
between iterations, which is what makes a resumed run bit-identical to an uninterrupted
one (see :mod:`bojax.journal`).
"""

from __future__ import annotations

import functools
import math
import numbers
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bojax import gp, policies
from bojax.acquisition import get_acquisition
from bojax.errors import (
    DataError,
    JournalError,
    ObjectiveError,
    SettingsError,
    SpaceExhaustedError,
)
from bojax.journal import Journal
from bojax.optimize import propose
from bojax.spaces import Space, repeated_mask
from bojax.surrogates import Surrogate, get_surrogate

Objective = Callable[[dict[str, Any]], float]


def _is_count(value: Any) -> bool:
    """A non-negative integer, and not a bool."""
    return not isinstance(value, bool) and isinstance(value, numbers.Integral) and value >= 0


@dataclass(frozen=True)
class Settings:
    """Everything that defines a run; a resume must use the same settings."""

    surrogate: str = "gp-slice"
    acquisition: str = "ei"
    optimizer: str = "sobol"
    iterations: int = 20
    initial: int = 5
    seed: int = 0
    maximize: bool = False
    num_candidates: int = 2048
    kappa: float = 2.0
    incumbent: str = "observed"
    samples: int | None = None  # hyperparameter draws per fit; None: the surrogate's default
    burn_in: int | None = None  # burn-in sweeps of the first fit; None: the surrogate's default
    policy: str = "acquisition"  # exploration policy (bojax.policies)
    tau: float | None = None  # the policy's threshold; None: its default
    scaling: str = "pseudocode"  # variable threshold: the report's pseudo-code or prose
    stop_tolerance: float | None = None  # early stop when the acquisition falls below
    stop_sd: float | None = None  # ... and, for exploring policies, the largest sd too

    def __post_init__(self) -> None:
        for name in ("iterations", "initial", "seed", "num_candidates"):
            value = getattr(self, name)
            if not _is_count(value):
                raise SettingsError(f"{name} must be a non-negative integer, got {value!r}")
        if self.initial < 1 or self.num_candidates < 1:
            raise SettingsError("initial and num_candidates must be at least 1")
        if self.optimizer not in ("sobol", "random"):
            raise SettingsError(f"optimizer must be 'sobol' or 'random', got {self.optimizer!r}")
        if self.incumbent not in ("observed", "posterior_mean"):
            raise SettingsError(
                f"incumbent must be 'observed' or 'posterior_mean', got {self.incumbent!r}"
            )
        if not (
            isinstance(self.kappa, numbers.Real) and math.isfinite(self.kappa) and self.kappa >= 0
        ):
            raise SettingsError(f"kappa must be a finite non-negative number, got {self.kappa!r}")
        if self.samples is not None and not (_is_count(self.samples) and self.samples >= 1):
            raise SettingsError(f"samples must be a positive integer or None, got {self.samples!r}")
        if self.burn_in is not None and not _is_count(self.burn_in):
            raise SettingsError(
                f"burn_in must be a non-negative integer or None, got {self.burn_in!r}"
            )
        for name in ("stop_tolerance", "stop_sd"):
            value = getattr(self, name)
            if value is not None and not (
                isinstance(value, numbers.Real) and not isinstance(value, bool) and value > 0
            ):
                raise SettingsError(f"{name} must be a positive number or None, got {value!r}")
        policies.check(self.policy, self.tau, self.scaling)
        get_surrogate(self.surrogate), get_acquisition(self.acquisition)  # typed errors if unknown

    def make_surrogate(self) -> Surrogate:
        """The named surrogate, with ``samples`` draws per fit and ``burn_in`` if set."""
        return get_surrogate(self.surrogate).configured(self.samples, self.burn_in)

    def identity(self) -> dict[str, Any]:
        """What a journal records and a resume must match: every setting but ``iterations``
        (a resume may extend the budget); optional settings left at their defaults are
        omitted, so adding one keeps older journals resumable."""
        return {
            k: v
            for k, v in asdict(self).items()
            if k != "iterations" and not (k in _OPTIONAL and v == _OPTIONAL[k])
        }


# Settings added after journals existed, with the value that leaves a run unchanged.
_OPTIONAL = {
    "samples": None,
    "burn_in": None,
    "policy": "acquisition",
    "tau": None,
    "scaling": "pseudocode",
    "stop_tolerance": None,
    "stop_sd": None,
}


class BOState(NamedTuple):
    """The loop's state: evaluated unit points ``u`` (n, d), outputs ``y`` (NaN = failed)."""

    space: Space
    settings: Settings
    u: np.ndarray
    y: np.ndarray
    surrogate: Any  # the surrogate's state (None before the first fit)


def init(space: Space, settings: Settings = Settings()) -> BOState:
    return BOState(space, settings, np.zeros((0, space.dim)), np.zeros(0), None)


def tell(state: BOState, u: np.ndarray, y: float) -> BOState:
    """Record the outcome of evaluating unit point ``u``; ``y`` NaN marks a failure."""
    u = np.asarray(u, dtype=np.float64).reshape(1, state.space.dim)
    return state._replace(u=np.concatenate([state.u, u]), y=np.append(state.y, float(y)))


def _design_key(settings: Settings) -> jax.Array:
    return jax.random.split(jax.random.key(settings.seed))[0]


def _iteration_key(settings: Settings, n: int) -> jax.Array:
    return jax.random.fold_in(jax.random.split(jax.random.key(settings.seed))[1], n)


def _standardisation(settings: Settings, y: np.ndarray) -> tuple[float, float, float]:
    """``(sign, shift, scale)`` with ``(sign y - shift) / scale`` the outputs the surrogate
    sees: negated to minimise if maximising, centred and scaled. A constant or single
    output keeps scale 1, so no division by zero."""
    sign = -1.0 if settings.maximize else 1.0
    shift, scale = float(np.mean(sign * y)), float(np.std(sign * y))
    if not scale > 1e-12 * max(1.0, abs(shift)):
        scale = 1.0
    return sign, shift, scale


def _standardised(settings: Settings, y: np.ndarray) -> np.ndarray:
    sign, shift, scale = _standardisation(settings, y)
    return (sign * y - shift) / scale


def _fits_at(state: BOState) -> bool:
    return len(state.y) >= state.settings.initial and bool(np.isfinite(state.y).any())


def _fit(state: BOState) -> tuple[Surrogate, Any, gp.Data, jax.Array]:
    settings, n = state.settings, len(state.y)
    surrogate = settings.make_surrogate()
    ok = np.isfinite(state.y)
    data = gp.make_data(state.u[ok], _standardised(settings, state.y[ok]))
    fit_key, propose_key = jax.random.split(jax.random.fold_in(_iteration_key(settings, n), 1))
    previous = state.surrogate if state.surrogate is not None else surrogate.init(state.space.dim)
    return surrogate, surrogate.fit(fit_key, previous, data), data, propose_key


@functools.cache
def _score_function(surrogate: Surrogate, acquisition: str, draws: int | None = None):
    """One jitted score per (surrogate, acquisition, draws): a stable object, so no
    recompiles. ``draws`` keeps that many evenly spaced samples (a cheaper screen)."""
    acquire = get_acquisition(acquisition)

    @jax.jit
    def score(x, args):
        conditioned, best, options = args
        if draws is not None:
            stride = jax.tree.leaves(conditioned)[0].shape[0] // draws
            conditioned = jax.tree.map(lambda a: a[::stride][:draws], conditioned)
        mean, var = surrogate.predictive(conditioned, x)
        return acquire(mean, var, best, **options)

    return score


def _screen_function(surrogate: Surrogate, acquisition: str):
    draws = surrogate.screening_draws()
    return None if draws is None else _score_function(surrogate, acquisition, draws)


def ask(state: BOState) -> tuple[np.ndarray, BOState, dict[str, Any]]:
    """The next unit point to evaluate, the state with the fitted surrogate, and diagnostics."""
    settings, space, n = state.settings, state.space, len(state.y)
    if not _fits_at(state):
        design = space.sample(_design_key(settings), max(settings.initial, n + 1), "sobol")
        u = design[n]
        if bool(repeated_mask(jnp.asarray(u[None]), jnp.asarray(space.snap(state.u)))[0]):
            # The design repeats an evaluated point (integers rounded together): draw afresh.
            u = space.sample(_iteration_key(settings, n), 1)[0]
        return u, state, {"phase": "initial"}

    surrogate, fitted, data, propose_key = _fit(state)
    best = jnp.min(jnp.where(data.mask, data.y, jnp.inf))
    if settings.incumbent == "posterior_mean":
        mean, _ = surrogate.predict(fitted, state.u[np.isfinite(state.y)])
        best = jnp.min(jnp.mean(mean, axis=0))
    options = {"kappa": settings.kappa} if settings.acquisition == "lcb" else {}
    u, value = propose(
        propose_key,
        _score_function(surrogate, settings.acquisition),
        (surrogate.conditioned(fitted), best, options),
        space,
        state.u,
        method=settings.optimizer,
        num_candidates=settings.num_candidates,
        screen=_screen_function(surrogate, settings.acquisition),
    )
    info = {"phase": "bo", "acquisition_value": value, **fitted.diagnostics}
    if settings.policy != "acquisition" or settings.stop_tolerance is not None:
        args = (surrogate.conditioned(fitted), best, {})
        u, choice = _apply_policy(state, surrogate, args, u, value)
        info.update(choice)
    return u, state._replace(surrogate=fitted), info


def _apply_policy(state: BOState, surrogate: Surrogate, args, u, value):
    """Choose between the acquisition maximiser ``u`` and the most uncertain point."""
    settings, n = state.settings, len(state.y)
    # Keys of their own (fold_in 2), so the default loop's draws are left as they were.
    explore_key, draw_key = jax.random.split(jax.random.fold_in(_iteration_key(settings, n), 2))
    explore, sd, pi = u, math.nan, math.nan
    if policies.explores(settings.policy):
        explore, sd = propose(
            explore_key,
            _score_function(surrogate, "max_variance"),
            args,
            state.space,
            state.u,
            method=settings.optimizer,
            num_candidates=settings.num_candidates,
            screen=_screen_function(surrogate, "max_variance"),
        )
        pi = float(_score_function(surrogate, "pi")(jnp.asarray(explore[None]), args)[0])
    decision = policies.decide(
        draw_key,
        settings.policy,
        policies.Proposals(u, value, explore, sd, pi),
        tau=settings.tau,
        scaling=settings.scaling,
        stop_tolerance=settings.stop_tolerance,
        stop_sd=settings.stop_sd,
    )
    return decision.u, {
        "explored": float(decision.explored),
        "exploit_probability": decision.exploit_probability,
        "explore_sd": sd,
        "explore_pi": pi,
        "converged": float(decision.converged),
    }


def predict(state: BOState, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and standard deviation of the objective at unit points ``u`` (M, d),
    in the objective's own units, given every successful evaluation in ``state``.

    The surrogate is fitted afresh (as the next :func:`ask` would), and the samples'
    Gaussians are pooled: ``mean = E_s[mu_s]``, ``sd^2 = E_s[sigma_s^2] + Var_s[mu_s]``.
    """
    if not _fits_at(state):
        raise DataError("predict() needs the initial design evaluated and one success")
    surrogate, fitted, _, _ = _fit(state)
    u = jnp.asarray(u, dtype=jnp.float64).reshape(-1, state.space.dim)
    mean, var = surrogate.predict(fitted, u)
    mean, var = np.asarray(mean), np.asarray(var)
    sign, shift, scale = _standardisation(state.settings, state.y[np.isfinite(state.y)])
    pooled_sd = np.sqrt(var.mean(axis=0) + mean.var(axis=0))
    return sign * (mean.mean(axis=0) * scale + shift), pooled_sd * scale


# -- the one-call driver ------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """Outcome of :func:`minimize`: the best successful evaluation and the full history."""

    best_point: dict[str, Any]
    best_value: float
    history: list[dict[str, Any]]
    evaluations: int
    failures: int
    seconds: float
    stopped: str | None = None  # why the run ended before its budget, if it did


def _evaluate(objective: Objective, point: dict[str, Any]) -> tuple[float, str | None]:
    """``(y, None)`` or ``(nan, error text)``; never raises for the objective's errors."""
    try:
        value = objective(dict(point))
    except Exception as error:  # the objective is user code: record, don't crash the run
        return math.nan, f"{type(error).__name__}: {error}"
    if isinstance(value, np.ndarray | jax.Array) and value.size == 1:
        value = value.reshape(()).item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return math.nan, f"objective returned {type(value).__name__} {value!r}, expected a number"
    if not math.isfinite(value):
        return math.nan, f"objective returned {value!r}"
    return float(value), None


def _pack(settings: Settings, state: Any) -> dict[str, Any]:
    return {"fits": 0} if state is None else settings.make_surrogate().pack(state)


def _unpack(settings: Settings, space: Space, saved: Mapping[str, Any]) -> Any:
    if saved["fits"] == 0:
        return None
    return settings.make_surrogate().unpack(space.dim, dict(saved))


def _restore(state: BOState, journal: Journal, records: list[dict[str, Any]]) -> BOState:
    """Rebuild the state after ``records``, replaying at most the fits the file lacks."""
    settings, space = state.settings, state.space
    saved = journal.load_sampler()
    start, surrogate_state = 0, None
    if saved is not None and saved.get("iteration", -1) <= len(records):
        start, surrogate_state = saved["iteration"], _unpack(settings, space, saved)
    state = state._replace(surrogate=surrogate_state)
    for n, record in enumerate(records):
        if n >= start and _fits_at(state):
            state = state._replace(surrogate=_fit(state)[1])  # the fit iteration n made
        y = record["y"] if record["status"] == "ok" else math.nan
        state = tell(state, np.asarray(record["u"], dtype=np.float64), y)
    return state


def _record(n: int, point, u, y, error, seconds, info) -> dict[str, Any]:
    diagnostics = {k: v for k, v in info.items() if k != "phase" and math.isfinite(v)}
    return {
        "iteration": n,
        "phase": info["phase"],
        "x": point,
        "u": np.asarray(u).tolist(),
        "y": None if error else y,
        "status": "failed" if error else "ok",
        "error": error,
        "seconds": seconds,
        "diagnostics": diagnostics,
    }


def minimize(
    objective: Objective,
    space: Space,
    *,
    surrogate: str = "gp-slice",
    acquisition: str = "ei",
    optimizer: str = "sobol",
    iterations: int = 20,
    initial: int = 5,
    seed: int = 0,
    maximize: bool = False,
    num_candidates: int = 2048,
    kappa: float = 2.0,
    incumbent: str = "observed",
    samples: int | None = None,
    burn_in: int | None = None,
    policy: str = "acquisition",
    tau: float | None = None,
    scaling: str = "pseudocode",
    stop_tolerance: float | None = None,
    stop_sd: float | None = None,
    out: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
) -> Result:
    """Minimise (or maximise) ``objective(point: dict) -> float`` over ``space``.

    Runs ``initial`` Sobol points, then ``iterations`` BO steps. With ``out``, every
    evaluation is journalled there as it finishes; ``resume=True`` continues a killed
    run without repeating or losing a finished evaluation. A failing objective (raises,
    returns NaN/inf or a non-number) is recorded and skipped; if more than half of the
    evaluations after the initial design have failed, :class:`ObjectiveError` is raised.
    ``samples`` overrides the surrogate's number of hyperparameter draws per fit, and
    ``burn_in`` its burn-in on the first fit. ``policy`` (``"hybrid"``,
    ``"variable-threshold"``) sometimes evaluates the most uncertain point instead of the
    acquisition maximiser, with threshold ``tau`` and, for the variable threshold, the
    ``scaling`` direction; ``stop_tolerance`` (and ``stop_sd``) end the run early once
    nothing is expected to improve (see :mod:`bojax.policies`).
    """
    settings = Settings(
        surrogate=surrogate,
        acquisition=acquisition,
        optimizer=optimizer,
        iterations=iterations,
        initial=initial,
        seed=seed,
        maximize=maximize,
        num_candidates=num_candidates,
        kappa=kappa,
        incumbent=incumbent,
        samples=samples,
        burn_in=burn_in,
        policy=policy,
        tau=tau,
        scaling=scaling,
        stop_tolerance=stop_tolerance,
        stop_sd=stop_sd,
    )
    state = init(space, settings)
    journal = Journal(out) if out is not None else None
    header = {"space": space.to_dict(), "settings": settings.identity()}
    history: list[dict[str, Any]] = []
    if journal is not None:
        if resume and journal.exists():
            journal.check(header)
            history = journal.read()
            if len(history) > initial + iterations:
                raise JournalError(
                    f"{journal.folder} holds more evaluations than this run asks for"
                )
            state = _restore(state, journal, history)
        else:
            journal.start(header)

    total = initial + iterations
    started, stopped = time.perf_counter(), None
    with _Progress(progress, total, len(history)) as bar:
        while len(state.y) < total:
            n = len(state.y)
            if journal is not None and _fits_at(state):
                journal.save_sampler(n, _pack(settings, state.surrogate))
            tick = time.perf_counter()
            try:
                u, state, info = ask(state)
            except SpaceExhaustedError as error:
                stopped = str(error)
                break
            if info.get("converged"):
                stopped = f"converged after {n} evaluations (the policy's stopping rule)"
                break
            point = space.from_unit(u)
            y, error = _evaluate(objective, point)
            state = tell(state, u, y)
            record = _record(n, point, u, y, error, time.perf_counter() - tick, info)
            history.append(record)
            if journal is not None:
                journal.append(record)
            bar.update(state, record)
            failures = int(np.sum(~np.isfinite(state.y)))
            if n + 1 >= initial and 2 * failures > n + 1:
                raise ObjectiveError(
                    f"{failures} of {n + 1} evaluations failed (last: {error or 'ok'}); stopping. "
                    + (f"Finished evaluations are in {journal.records_path}." if journal else "")
                )

    result = _result(space, settings, history, time.perf_counter() - started, stopped)
    if journal is not None:
        journal.write_summary(
            {
                "best_point": result.best_point,
                "best_value": result.best_value,
                "evaluations": result.evaluations,
                "failures": result.failures,
                "seconds": result.seconds,
                "stopped": result.stopped,
            }
        )
    return result


def _result(
    space: Space, settings: Settings, history: list[dict], seconds: float, stopped=None
) -> Result:
    ok = [r for r in history if r["status"] == "ok"]
    if not ok:
        raise ObjectiveError("every evaluation failed; see the history for the errors")
    pick = max if settings.maximize else min
    best = pick(ok, key=lambda r: r["y"])
    return Result(
        best["x"], best["y"], history, len(history), len(history) - len(ok), seconds, stopped
    )


class _Progress:
    """A live line: iteration, best so far, seconds per iteration (rich)."""

    def __init__(self, enabled: bool, total: int, done: int):
        self.enabled, self.total, self.done = enabled, total, done
        self.best = math.nan

    def __enter__(self):
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self.progress = Progress(
                TextColumn("[bold]BO"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("best {task.fields[best]}  last {task.fields[last]:.2f} s/it"),
                TimeElapsedColumn(),
            )
            self.progress.__enter__()
            self.task = self.progress.add_task(
                "bo", total=self.total, completed=self.done, best="-", last=0.0
            )
        return self

    def update(self, state: BOState, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        ok = state.y[np.isfinite(state.y)]
        best = "-" if ok.size == 0 else f"{(ok.max() if state.settings.maximize else ok.min()):.6g}"
        self.progress.update(self.task, advance=1, best=best, last=record["seconds"])

    def __exit__(self, *exc):
        if self.enabled:
            self.progress.__exit__(*exc)
        return False
