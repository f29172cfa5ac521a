"""The ``bojax`` command line. Entry points enable float64 before any JAX work."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(
    help="bojax: Bayesian optimisation of neural-network designs in JAX.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


@app.callback()
def _setup() -> None:
    import jax

    jax.config.update("jax_enable_x64", True)  # GP numerics in float64 (docs/design.md)


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="folder for the figure")] = Path("bojax-demo"),
    points: Annotated[int, typer.Option(min=2, max=200, help="Sobol design points")] = 8,
    steps: Annotated[int, typer.Option(min=1, max=100_000, help="Adam steps of the fit")] = 300,
    seed: Annotated[int, typer.Option(min=0, help="random seed")] = 0,
) -> None:
    """Fit a GP to the Forrester function and plot its posterior (the main job, for now)."""
    from bojax.demo import run_demo

    run_demo(out=out, points=points, steps=steps, seed=seed)


@app.command()
def optimize(
    problem: Annotated[str, typer.Argument(help="a built-in problem (see `bojax problems`)")],
    surrogate: Annotated[str, typer.Option(help="gp-slice, gp-hmc or gp-map")] = "gp-slice",
    acquisition: Annotated[str, typer.Option(help="ei, log_ei, pi, lcb or max_variance")] = "ei",
    optimizer: Annotated[
        str, typer.Option(help="acquisition optimiser: sobol or random")
    ] = "sobol",
    iterations: Annotated[int, typer.Option(min=0, help="BO steps after the initial design")] = 20,
    initial: Annotated[int, typer.Option(min=1, help="Sobol points before BO starts")] = 5,
    seed: Annotated[int, typer.Option(min=0, help="random seed")] = 0,
    candidates: Annotated[int, typer.Option(min=1, help="acquisition candidates per step")] = 2048,
    out: Annotated[Path | None, typer.Option(help="folder for the run journal")] = None,
    resume: Annotated[bool, typer.Option(help="continue the run journalled in --out")] = False,
) -> None:
    """Run BO on a built-in problem, journalling every evaluation to --out."""
    from bojax.errors import BojaxError
    from bojax.loop import minimize
    from bojax.problems import get_problem

    console = Console()
    try:
        spec = get_problem(problem)
        result = minimize(
            spec,
            spec.space,
            surrogate=surrogate,
            acquisition=acquisition,
            optimizer=optimizer,
            iterations=iterations,
            initial=initial,
            seed=seed,
            maximize=spec.maximize,
            num_candidates=candidates,
            out=out,
            resume=resume,
        )
    except BojaxError as error:
        console.print(f"[bold red]error:[/bold red] {error}")
        raise typer.Exit(code=1) from None
    where = ", ".join(f"{k}={v:.6g}" for k, v in result.best_point.items())
    console.print(
        f"best {result.best_value:.6g} at {where}  (optimum {spec.optimum:.6g}; "
        f"{result.evaluations} evaluations, {result.failures} failed, {result.seconds:.1f} s)"
    )
    if result.stopped:
        console.print(f"stopped early: {result.stopped}")
    if out is not None:
        console.print(f"journal: {out / 'journal.jsonl'}")


@app.command()
def problems() -> None:
    """List the built-in benchmark problems and their known minima."""
    from bojax.problems import PROBLEMS

    table = Table(title="bojax problems")
    for column in ("name", "dim", "goal", "optimum", "at", "description"):
        table.add_column(column)
    for p in PROBLEMS.values():
        where = ", ".join(f"{k}={v:.4g}" for k, v in p.optimiser.items())
        goal = "max" if p.maximize else "min"
        table.add_row(p.name, str(p.space.dim), goal, f"{p.optimum:.6g}", where, p.description)
    Console().print(table)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
