"""The ``bojax`` command line. Entry points enable float64 before any JAX work."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(
    help="bojax: Bayesian optimisation of neural-network designs in JAX.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


# The registries' names, spelled out so that help texts need no JAX import (a test keeps
# them equal to bojax.surrogates.SURROGATES and bojax.bo.acquisition.ACQUISITIONS).
SURROGATE_NAMES = (
    "gp-slice", "gp-ess", "gp-hmc", "gp-map", "gp-slice-exploration", "gp-slice-arc",
    "gp-slice-filled", "gp-map-se", "gp-fixed-se", "gp-slice-se", "bnn-hmc", "bnn-report",
)  # fmt: skip
ACQUISITION_NAMES = ("log_ei", "ei", "pi", "lcb", "max_variance")
FAILURE_MODEL_NAMES = ("gp-probit", "none")


def _start_jax() -> None:
    """What every command that computes does first (listing commands skip JAX's import)."""
    import jax

    from bojax.compilation import use_persistent_cache

    jax.config.update("jax_enable_x64", True)  # GP numerics in float64 (docs/design.md)
    use_persistent_cache()


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="folder for figures and summary (replaced)")] = Path(
        "bojax-demo"
    ),
    seed: Annotated[int, typer.Option(min=0, help="random seed (data, designs, training)")] = 0,
    iterations: Annotated[
        int | None, typer.Option(min=0, help="BO steps after the 3 initial designs [12]")
    ] = None,
    samples: Annotated[
        int | None, typer.Option(min=1, help="slice-sampled hyperparameter draws per fit [512]")
    ] = None,
    max_epochs: Annotated[
        int | None, typer.Option(min=1, help="training epochs per member, at most [5000]")
    ] = None,
    min_epochs: Annotated[
        int | None, typer.Option(min=1, help="training epochs per member, at least [1000]")
    ] = None,
) -> None:
    """Bayesian optimisation of an MLP-ensemble design: the ensemble-design report's
    Experiment 1 with a quick budget (about a minute or two on 2 CPU cores)."""
    _start_jax()
    from bojax.errors import BojaxError
    from bojax.reports import ensemble_design

    console = Console()
    overrides = {
        name: value
        for name, value in [
            ("iterations", iterations),
            ("samples", samples),
            ("max_epochs", max_epochs),
            ("min_epochs", min_epochs),
        ]
        if value is not None
    }
    try:
        cfg = ensemble_design.config(1, quick=True, seed=seed, **overrides)
        console.print(
            "BO of (L layers, D width, N members, p keep) for a DropConnect MLP ensemble on "
            f"the report's Experiment 1 data; {cfg.initial} initial designs + "
            f"{cfg.iterations} BO steps, "
            f"GP with {cfg.samples} slice-sampled hyperparameter draws, {cfg.candidates} "
            f"random candidates per step."
        )
        summary = ensemble_design.run(cfg, out, fresh=True, progress=True)
    except BojaxError as error:
        console.print(f"[bold red]error:[/bold red] {error}")
        raise typer.Exit(code=1) from None
    _print_ensemble_summary(console, summary, out)


def _print_ensemble_summary(console: Console, summary: dict, out: Path) -> None:
    table = Table(title="ensemble design, Experiment 1 (quick)")
    for column in ("", "design (L, D, N, p)", "test loss", "test MSE", "kept members"):
        table.add_column(column)

    def design(d: dict) -> str:
        return f"({d['layers']}, {d['width']}, {d['members']}, {d['keep']:.3f})"

    best, ref = summary["best"], summary["report_best_design_on_our_data"]
    for label, row in [
        (f"best found (iteration {best['iteration']})", best),
        ("the report's best design", ref),
    ]:
        table.add_row(
            label,
            design(row["design"]),
            f"{row['test_loss']:.2f}",
            f"{row['test_mse']:.2f}",
            f"{row['kept']}/{row['design']['members']}",
        )
    floor, n_test = summary["dataset"]["test_loss_of_truth"], summary["dataset"]["n_test"]
    table.add_row("true mean function", "-", f"{floor:.2f}", f"{floor**2 / n_test:.2f}", "-")
    console.print(table)
    compiled = summary["compilations_in_this_process"]["ensemble_training"]
    console.print(
        f"{summary['evaluations']} designs evaluated in {summary['wall_seconds']:.0f} s; "
        f"the ensemble trainer compiled {compiled} time(s). Figures and summary.json in {out}/"
    )


@app.command()
def optimize(
    problem: Annotated[
        str,
        typer.Argument(
            help="a built-in problem (see `bojax problems`), or your objective as "
            "module:function or path/to/file.py:function (then --space is required)"
        ),
    ],
    space: Annotated[
        Path | None,
        typer.Option(help="TOML or JSON file of your objective's parameters (see README)"),
    ] = None,
    maximize: Annotated[
        bool, typer.Option("--maximize", help="your objective is to be maximised")
    ] = False,
    surrogate: Annotated[str, typer.Option(help=", ".join(SURROGATE_NAMES))] = "gp-slice",
    acquisition: Annotated[str, typer.Option(help=", ".join(ACQUISITION_NAMES))] = "log_ei",
    optimizer: Annotated[
        str, typer.Option(help="acquisition optimiser: sobol or random")
    ] = "sobol",
    iterations: Annotated[int, typer.Option(min=0, help="BO steps after the initial design")] = 20,
    initial: Annotated[int, typer.Option(min=1, help="Sobol points before BO starts")] = 5,
    seed: Annotated[int, typer.Option(min=0, help="random seed")] = 0,
    candidates: Annotated[int, typer.Option(min=1, help="acquisition candidates per step")] = 2048,
    out: Annotated[Path | None, typer.Option(help="folder for the run journal")] = None,
    resume: Annotated[bool, typer.Option(help="continue the run journalled in --out")] = False,
    workers: Annotated[
        int | None, typer.Option(min=1, help="evaluate on a local Dask cluster of N processes")
    ] = None,
    scheduler: Annotated[
        str | None, typer.Option(help="evaluate on the Dask cluster at this scheduler address")
    ] = None,
    q: Annotated[
        int | None, typer.Option(min=1, help="evaluations in flight [the cluster's threads]")
    ] = None,
    fantasy: Annotated[
        str, typer.Option(help="pending points: integrated (Snoek 2012) or believer")
    ] = "integrated",
    retries: Annotated[
        int, typer.Option(min=0, help="resubmissions of an evaluation a worker lost")
    ] = 1,
    failure_model: Annotated[
        str,
        typer.Option(
            help="what learns where evaluations fail: "
            + ", ".join(FAILURE_MODEL_NAMES)
            + " (none: failures are only dropped)"
        ),
    ] = "gp-probit",
    max_failures: Annotated[
        int | None, typer.Option(min=1, help="stop after this many failed evaluations [no limit]")
    ] = None,
    min_success_probability: Annotated[
        float | None,
        typer.Option(help="stop once P(success) is below this everywhere the optimiser looks"),
    ] = None,
    warping: Annotated[
        str | None,
        typer.Option(help="outputs the surrogate sees: standardise or rank [the surrogate's]"),
    ] = None,
) -> None:
    """Run BO on a built-in problem or your own objective, journalling every evaluation to
    --out; with --workers or --scheduler, evaluations run in parallel on Dask, refilled as
    each finishes. Your objective takes a dict of the space's parameters and returns a
    number; one that raises or returns NaN or inf is journalled as a failed evaluation."""
    import contextlib

    _start_jax()
    from bojax.bo import cluster
    from bojax.bo.driver import minimize
    from bojax.errors import BojaxError

    console = Console()
    try:
        objective, search_space, goal, optimum = _objective_and_space(problem, space, maximize)
        parallel = workers is not None or scheduler is not None
        with (
            cluster.connect(workers, scheduler) if parallel else contextlib.nullcontext()
        ) as client:
            result = minimize(
                objective,
                search_space,
                surrogate=surrogate,
                acquisition=acquisition,
                optimizer=optimizer,
                iterations=iterations,
                initial=initial,
                seed=seed,
                maximize=goal,
                num_candidates=candidates,
                fantasy=fantasy,
                failure_model=failure_model,
                max_failures=max_failures,
                min_success_probability=min_success_probability,
                warping=warping,
                executor=client,
                q=q,
                retries=retries,
                out=out,
                resume=resume,
            )
    except BojaxError as error:
        console.print(f"[bold red]error:[/bold red] {error}")
        raise typer.Exit(code=1) from None
    where = ", ".join(f"{k}={v:.6g}" for k, v in result.best_point.items())
    known = "" if optimum is None else f"optimum {optimum:.6g}; "
    console.print(
        f"best {result.best_value:.6g} at {where}  ({known}"
        f"{result.evaluations} evaluations, {result.failures} failed, {result.seconds:.1f} s)"
    )
    if result.stopped:
        console.print(f"stopped early: {result.stopped}")
    if out is not None:
        console.print(f"journal: {out / 'journal.jsonl'}")


def _objective_and_space(problem: str, space: Path | None, maximize: bool):
    """(objective, space, maximise?, known optimum or None) for a built-in problem or a
    ``module:function`` reference with its space file; typed errors before any run."""
    from bojax.errors import SettingsError
    from bojax.spaces import load_space
    from bojax.user_code import is_reference, load_objective

    if not is_reference(problem):
        from bojax.objectives.problems import get_problem

        if space is not None or maximize:
            raise SettingsError(
                f"{problem!r} is a built-in problem with its own space and goal; "
                "--space and --maximize are for your own objective (module:function)"
            )
        spec = get_problem(problem)
        return spec, spec.space, spec.maximize, spec.optimum
    if space is None:
        raise SettingsError(f"{problem}: your own objective needs --space FILE (TOML or JSON)")
    search_space = load_space(space)  # the cheaper check first
    return load_objective(problem), search_space, maximize, None


def _format_value(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


@app.command()
def show(
    run: Annotated[Path, typer.Argument(help="a run folder (--out of optimize, or a report's)")],
    last: Annotated[
        int | None, typer.Option(min=1, help="only the last N evaluations [all]")
    ] = None,
) -> None:
    """Print a run while it runs or after: settings, space, every evaluation with the best
    so far, failures, the best point and the sampler's diagnostics. Reads only."""
    from bojax.bo.runs import load_run
    from bojax.errors import BojaxError

    console = Console()
    try:
        record = load_run(run)
    except BojaxError as error:
        console.print(f"[bold red]error:[/bold red] {error}")
        raise typer.Exit(code=1) from None
    settings = record.settings
    if record.finished:
        stopped = record.summary.get("stopped")
        status = "finished" + (f" (stopped early: {stopped})" if stopped else "")
    else:
        status = f"running or interrupted, {len(record.pending)} evaluation(s) in flight"
    console.print(f"[bold]{run}[/bold]: {status}")
    console.print(
        "settings: " + ", ".join(f"{k}={_format_value(v)}" for k, v in settings.items()),
        highlight=False,
    )
    for p in record.space.parameters:
        kind = type(p).__name__.lower()
        extra = (" log" if p.log else "") + (f" if {p.condition}" if p.condition else "")
        console.print(f"  {p.name}: {kind} [{p.low}, {p.high}]{extra}", highlight=False)

    names = record.space.names
    wide = len(names) > 5  # many parameters: one column of name=value pairs
    table = Table(title=f"{len(record.records)} evaluations ({len(record.failures)} failed)")
    for column in ("#", "phase", *(["point"] if wide else names), "y", "best so far", "s"):
        table.add_column(column, justify="left" if column in ("phase", "point") else "right")
    for column in ("acquisition", "ess", "P(success)"):
        table.add_column(column, justify="right")
    best_so_far = record.best_so_far()
    start = 0 if last is None else max(0, len(record.records) - last)
    for entry, best in zip(record.records[start:], best_so_far[start:], strict=True):
        point = entry["x"]
        values = (
            [", ".join(f"{k}={_format_value(v)}" for k, v in point.items())]
            if wide
            else [_format_value(point[n]) if n in point else "-" for n in names]
        )
        y = _format_value(entry["y"]) if entry["status"] == "ok" else "[red]failed[/red]"
        diagnostics = entry.get("diagnostics", {})
        table.add_row(
            str(entry["iteration"]),
            entry["phase"],
            *values,
            y,
            _format_value(best),
            f"{entry['seconds']:.2f}",
            *(_format_value(diagnostics[k]) if k in diagnostics else "-" for k in (
                "acquisition_value", "ess", "success_probability"
            )),
        )  # fmt: skip
    console.print(table)
    for entry in record.failures:
        where = ", ".join(f"{k}={_format_value(v)}" for k, v in entry["x"].items())
        console.print(
            f"  failed at #{entry['iteration']} ({where}): {entry['error']}", highlight=False
        )
    best = record.best()
    if best is not None:
        where = ", ".join(f"{k}={_format_value(v)}" for k, v in best["x"].items())
        goal = "max" if record.maximize else "min"
        console.print(
            f"best ({goal}) {best['y']:.6g} at {where} (evaluation #{best['iteration']})",
            highlight=False,
        )
    if record.sampler is not None:
        console.print(
            f"sampler: chain state kept for iteration {record.sampler.get('iteration')} "
            f"after {record.sampler.get('fits', '?')} fits",
            highlight=False,
        )


@app.command()
def plot(
    run: Annotated[Path, typer.Argument(help="a run folder (--out of optimize, or a report's)")],
    out: Annotated[Path | None, typer.Option(help="folder for the figures [RUN/figures]")] = None,
    slices: Annotated[
        bool, typer.Option(help="refit the run's surrogate for posterior slices")
    ] = True,
) -> None:
    """Figures of a run from its journal alone: best so far, each parameter against the
    evaluation, and the refitted surrogate's mean and sd along 1-D and 2-D slices through
    the best point."""
    _start_jax()
    from bojax.bo.runs import load_run
    from bojax.errors import BojaxError
    from bojax.reports.run_figures import plot_run

    console = Console()
    try:
        paths = plot_run(load_run(run), out or run / "figures", slices=slices)
    except BojaxError as error:
        console.print(f"[bold red]error:[/bold red] {error}")
        raise typer.Exit(code=1) from None
    for path in paths:
        console.print(f"wrote {path}", highlight=False)


@app.command()
def problems() -> None:
    """List the built-in benchmark problems and their known minima."""
    from bojax.objectives.problems import PROBLEMS

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
