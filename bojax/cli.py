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
def problems() -> None:
    """List the built-in benchmark problems and their known minima."""
    from bojax.problems import PROBLEMS

    table = Table(title="bojax problems")
    for column in ("name", "dim", "minimum", "minimiser", "description"):
        table.add_column(column)
    for p in PROBLEMS.values():
        where = ", ".join(f"{k}={v:.6g}" for k, v in p.minimiser.items())
        table.add_row(p.name, str(p.space.dim), f"{p.minimum:.6g}", where, p.description)
    Console().print(table)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
