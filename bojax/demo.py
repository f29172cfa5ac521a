"""``bojax demo``: a GP posterior on the Forrester function, end to end.

Draws Sobol points from the problem's space, fits the Matern-5/2 GP's hyperparameters
by maximising the log marginal likelihood (Adam on log-hyperparameters), then writes a
figure of the posterior and of the likelihood surface (one vmapped call over a grid).
It grows into the ensemble-design BO run once the engine and the ensemble objective land.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from matplotlib.figure import Figure
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bojax import gp
from bojax.compilation import count_compilations
from bojax.problems import get_problem

_CHUNK = 25  # Adam steps per jitted call; the progress bar advances once per chunk


@dataclass(frozen=True)
class DemoResult:
    figure: Path
    params: dict
    log_marginal_likelihood: float
    jitter: float
    compilations: int
    predicted_minimiser: float
    seconds: float


def _to_log(params):
    return {
        "kernel": jax.tree.map(jnp.log, params["kernel"]),
        "mean": params["mean"],  # the constant mean is unconstrained
        "noise": jnp.log(params["noise"]),
    }


def _from_log(log_params):
    return {
        "kernel": jax.tree.map(jnp.exp, log_params["kernel"]),
        "mean": log_params["mean"],
        "noise": jnp.exp(log_params["noise"]),
    }


@partial(jax.jit, static_argnums=(0, 1))
def _adam_chunk(model: gp.GP, optimiser, log_params, opt_state, data):
    """``_CHUNK`` Adam steps on -log p(y | X, params) in log-hyperparameter space."""

    def loss(lp):
        return -gp.log_marginal_likelihood(model, _from_log(lp), data)

    def step(carry, _):
        lp, state = carry
        value, grads = jax.value_and_grad(loss)(lp)
        updates, state = optimiser.update(grads, state, lp)
        return (optax.apply_updates(lp, updates), state), value

    (log_params, opt_state), losses = jax.lax.scan(step, (log_params, opt_state), length=_CHUNK)
    return log_params, opt_state, losses[-1]


@partial(jax.jit, static_argnums=0)
def _likelihood_surface(model: gp.GP, params, data, log_ell, log_noise):
    """log p(y | X) over a (length-scale, noise) grid, other hyperparameters fixed."""

    def at(le, ln):
        p = {**params, "kernel": {**params["kernel"], "lengthscales": jnp.exp(le)[None]}}
        return gp.log_marginal_likelihood(model, {**p, "noise": jnp.exp(ln)}, data)

    return jax.vmap(jax.vmap(at, (0, None)), (None, 0))(log_ell, log_noise)


def run_demo(
    out: Path = Path("bojax-demo"),
    points: int = 8,
    steps: int = 300,
    seed: int = 0,
    console: Console | None = None,
) -> DemoResult:
    """Fit and plot a GP posterior on Forrester; returns what it found and where it wrote."""
    console = console or Console()
    start = time.perf_counter()
    problem = get_problem("forrester")
    key = jax.random.key(seed)
    u = problem.space.sample(key, points, method="sobol")
    x_obs = np.array([p["x"] for p in problem.space.from_unit(u)])
    y_obs = np.array([problem({"x": x}) for x in x_obs])
    shift, scale = y_obs.mean(), y_obs.std()  # fit on standardised outputs
    data = gp.make_data(x_obs, (y_obs - shift) / scale)

    model = gp.GP(kernel="matern52", mean="constant")
    params = model.init_params(1, noise=1e-2)
    params["kernel"]["lengthscales"] = jnp.array([0.2])
    log_params = _to_log(params)
    optimiser = optax.adam(0.05)
    opt_state = optimiser.init(log_params)

    with count_compilations() as compilations:
        progress = Progress(
            TextColumn("[bold]fitting hyperparameters"),
            BarColumn(),
            TextColumn("step {task.completed}/{task.total}  -log p = {task.fields[loss]:.3f}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        with progress:
            chunks = max(1, -(-steps // _CHUNK))
            task = progress.add_task("fit", total=chunks * _CHUNK, loss=float("nan"))
            for _ in range(chunks):
                log_params, opt_state, loss = _adam_chunk(
                    model, optimiser, log_params, opt_state, data
                )
                progress.update(task, advance=_CHUNK, loss=float(loss))
        params = _from_log(log_params)
        post = gp.condition(model, params, data)
        grid = np.linspace(0.0, 1.0, 401)
        mean, var = gp.predict(model, post, grid[:, None])
        log_ell, log_noise = np.linspace(-4, 1, 80), np.linspace(-12, 1, 80)
        surface = _likelihood_surface(model, params, data, log_ell, log_noise)
        lml = float(gp.log_marginal_likelihood(model, params, data))

    mean = np.asarray(mean) * scale + shift
    sd = np.sqrt(np.asarray(var)) * scale
    truth = np.array([problem({"x": x}) for x in grid])
    out.mkdir(parents=True, exist_ok=True)
    figure_path = out / "gp_posterior.png"
    _plot(figure_path, grid, truth, mean, sd, x_obs, y_obs, log_ell, log_noise, surface, params)

    result = DemoResult(
        figure=figure_path,
        params=jax.tree.map(np.asarray, params),
        log_marginal_likelihood=lml,
        jitter=float(post.jitter),
        compilations=compilations.total,
        predicted_minimiser=float(grid[np.argmin(mean)]),
        seconds=time.perf_counter() - start,
    )
    _report(console, result, problem, points)
    return result


def _plot(path, grid, truth, mean, sd, x_obs, y_obs, log_ell, log_noise, surface, params):
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1.5, 1])
    left.fill_between(
        grid, mean - 2 * sd, mean + 2 * sd, color="C0", alpha=0.2, label="mean ± 2 sd"
    )
    left.plot(grid, truth, "k--", lw=1, label="Forrester f(x)")
    left.plot(grid, mean, "C0", label="posterior mean")
    left.plot(x_obs, y_obs, "o", color="C3", label=f"{len(x_obs)} Sobol points")
    left.set(xlabel="x", ylabel="f(x)", title="GP posterior (Matern-5/2, fitted hyperparameters)")
    left.legend(loc="upper left", fontsize=8)
    finite = np.where(np.isfinite(surface), surface, np.nan)  # -inf where the ladder failed
    levels = np.nanmax(finite) - np.array([40.0, 20, 10, 5, 2, 1, 0.5, 0])
    contour = right.contourf(
        log_ell, log_noise, finite, levels=levels, cmap="viridis", extend="min"
    )
    fig.colorbar(contour, ax=right, label="log p(y | X)")
    right.plot(
        np.log(params["kernel"]["lengthscales"][0]),
        np.log(params["noise"]),
        "r*",
        ms=12,
        label="fit",
    )
    right.set(
        xlabel="log length-scale", ylabel="log noise variance", title="Log marginal likelihood"
    )
    right.legend(loc="lower left", fontsize=8)
    fig.savefig(path, dpi=120)


def _report(console: Console, result: DemoResult, problem, points: int) -> None:
    p = result.params
    table = Table(title="Fitted GP (standardised outputs)", show_header=True)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("amplitude a", f"{float(p['kernel']['amplitude']):.4g}")
    table.add_row("length-scale", f"{float(p['kernel']['lengthscales'][0]):.4g}")
    table.add_row("noise variance s2", f"{float(p['noise']):.3g}")
    table.add_row("constant mean", f"{float(p['mean']['value']):.4g}")
    table.add_row("log marginal likelihood", f"{result.log_marginal_likelihood:.4f}")
    table.add_row("jitter used", f"{result.jitter:.3g}")
    table.add_row("XLA compilations", str(result.compilations))
    console.print(table)
    true_x = problem.optimiser["x"]
    console.print(
        f"posterior-mean minimiser x = {result.predicted_minimiser:.4f} "
        f"(true {true_x:.4f}, from {points} points)"
    )
    console.print(f"figure: [bold]{result.figure}[/bold]   ({result.seconds:.1f} s)")
