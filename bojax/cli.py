"""The ``bojax`` command line. Entry points enable float64 before any JAX work."""

from __future__ import annotations

import inspect
import shlex
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from bojax import terminal
from bojax.terminal import plain, print_error, styled

app = typer.Typer(
    help="bojax: Bayesian optimisation of neural-network designs in JAX.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


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
    Experiment 1 with a quick budget (one to three minutes on 2 CPU cores)."""
    _start_jax()
    from bojax.errors import BojaxError
    from bojax.reports import ensemble_design

    console = terminal.console(markup=True)
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
        started = time.perf_counter()
        summary = ensemble_design.run(cfg, out, fresh=True, progress=True)
    except BojaxError as error:
        print_error(console, error)
        raise typer.Exit(code=1) from None
    _print_ensemble_summary(console, summary, out, time.perf_counter() - started)


def _print_ensemble_summary(console: Console, summary: dict, out: Path, seconds: float) -> None:
    chosen = summary["selection"]
    seeds = len(chosen["training_seeds"])
    table = Table(
        title="ensemble design, Experiment 1 (quick)",
        caption=f"re-trained: the test loss with {seeds} other training seeds, mean ± sd",
    )
    for column in ("", "L, D, N, p", "test loss", "MSE", "kept", "re-trained"):
        table.add_column(column, overflow="fold")

    def design(d: dict) -> str:
        return f"({d['layers']}, {d['width']}, {d['members']}, {d['keep']:.3f})"

    best, ref = summary["best"], summary["report_best_design_on_our_data"]
    # The run's best is a minimum over noisy losses (one training seed each): its
    # re-trained loss beside the report's design's is the fair comparison (review CK).
    for label, row, again in [
        (f"best found (iteration {best['iteration']})", best, chosen["best_observed"]),
        ("the report's design", ref, chosen["report_design"]),
    ]:
        table.add_row(
            label,
            design(row["design"]),
            f"{row['test_loss']:.2f}",
            f"{row['test_mse']:.2f}",
            f"{row['kept']}/{row['design']['members']}",
            f"{again['retrained_mean']:.2f} ± {again['retrained_sd']:.2f}",
        )
    floor, n_test = summary["dataset"]["test_loss_of_truth"], summary["dataset"]["n_test"]
    table.add_row("true mean", "-", f"{floor:.2f}", f"{floor**2 / n_test:.2f}", "-", "-")
    console.print(table)
    compiled = summary["compilations_in_this_process"]["ensemble_training"]
    console.print(
        f"{summary['evaluations']} designs evaluated ({summary['wall_seconds']:.0f} s of "
        f"training; {seconds:.0f} s in all, BO and re-training included); the ensemble "
        f"trainer compiled {compiled} time(s). Figures and summary.json in {out}/"
    )


def optimize(**options: Any) -> None:
    """Run BO on a built-in problem or your own objective, journalling every evaluation to
    --out; with --workers or --scheduler, evaluations run in parallel on Dask, refilled as
    each finishes. Your objective takes a dict of the space's parameters and returns a
    number (a dict of metrics with --objective; a report parameter makes it a step-wise
    training); one that raises or returns NaN or inf is journalled as a failed evaluation.
    Every run setting is an option (bojax.bo.settings.Settings); --plugin imports your
    module first, so the kernels, acquisitions or surrogates it registers can be named."""
    import contextlib

    _start_jax()
    from bojax.bo import cluster
    from bojax.bo.driver import minimize
    from bojax.bo.interrupts import Terminated
    from bojax.bo.journal import Journal
    from bojax.bo.settings import Settings
    from bojax.errors import BojaxError, JournalError, SettingsError
    from bojax.user_code import is_reference

    console = terminal.console()  # prints user values and errors as they are
    context = options.pop("context")
    run = {name: options.pop(name) for name in _RUN_OPTIONS}
    taken: dict[str, Any] = {}  # a resume's settings from its journal
    try:
        _load_plugins(run["plugin"])
        given = {name for name in options if _given(context, name)}
        if run["resume"] and run["out"] is not None:
            taken = _journalled(options, run, given)
            if taken is None and run["space"] is None and is_reference(run["problem"]):
                raise SettingsError(
                    f"{run['out']} holds no run to resume, and a new one needs --space FILE"
                )
            if taken is None:
                console.print(plain(f"{run['out']} holds no run yet: a new one starts"))
            else:
                shown = _pairs({k: v for k, v in taken.items() if v != _default(k)})
                # (said before the journal's check: a resume it refuses says why next)
                header = Journal(run["out"]).header_path
                if shown:  # (nothing to say where the command gave every setting)
                    console.print(plain(f"{header} sets what the command does not: {shown}"))
        objective, search_space, goal, optimum = _objective_and_space(
            run["problem"], run["space"], options["maximize"]
        )
        try:
            settings = Settings(**{**options, "maximize": goal})
        except SettingsError as error:
            if not taken:
                raise
            where = Journal(run["out"]).header_path
            raise JournalError(f"{error} (settings not given here are {where}'s)") from None
        workers, scheduler = run["workers"], run["scheduler"]
        parallel = workers is not None or scheduler is not None
        with (
            cluster.connect(workers, scheduler) if parallel else contextlib.nullcontext()
        ) as client:
            result = minimize(
                objective,
                search_space,
                settings,
                executor=client,
                out=run["out"],
                resume=run["resume"],
            )
    except BojaxError as error:
        print_error(console, error)
        raise typer.Exit(code=1) from None
    except KeyboardInterrupt as interrupt:
        folder = run["out"]
        # (the settings are journalled; where the run evaluated and its plugins are not)
        again = [("--out", folder)] + [("--plugin", p) for p in run["plugin"] or []]
        again += [(f"--{n}", run[n]) for n in ("workers", "scheduler") if run[n] is not None]
        again = " ".join(f"{flag} {shlex.quote(str(value))}" for flag, value in again)
        problem = shlex.quote(run["problem"])
        then = f"; continue it with: bojax optimize {problem} --resume {again}"
        then = then if folder is not None else ""
        terminated = isinstance(interrupt, Terminated)  # SIGTERM: a scheduler's preemption
        # soft_wrap: a command to copy must not come with line breaks put in its spaces
        said = plain(f"{'terminated (SIGTERM)' if terminated else 'interrupted'}{then}")
        console.print(said, soft_wrap=True)
        raise typer.Exit(code=143 if terminated else 130) from None
    if result.pareto is not None:
        columns = list(settings.metrics.columns)
        constrained = bool(settings.metrics.constraints)
        _print_front(console, {k: getattr(result, k) for k in _FRONT}, columns, constrained)
    where = _pairs(result.best_point, 6)
    known = "" if optimum is None else f"optimum {optimum:.6g}; "
    steps = "" if result.steps is None else f"{result.steps} steps, "
    console.print(
        plain(
            f"best {result.best_value:.6g} at {where}  ({known}{result.evaluations} "
            f"evaluations, {steps}{result.failures} failed, {result.seconds:.1f} s)"
        )
    )
    if result.pareto is not None and not result.pareto:
        console.print("  (infeasible: the best of all)")
    elif result.steps is not None and not any(r["status"] == "ok" for r in result.history):
        console.print("  (none trained to the end: this one was stopped early)")
    if result.stopped:
        console.print(f"stopped early: {plain(result.stopped)}")
    if run["out"] is not None:
        console.print(f"journal: {run['out'] / 'journal.jsonl'}")


_FRONT = ("pareto", "reference_point", "hypervolume")


def _default(name: str) -> Any:
    """Setting ``name``'s default."""
    from bojax.bo.settings import Settings

    return Settings.__dataclass_fields__[name].default


def _given(context: typer.Context, name: str) -> bool:
    """Whether the command line (or the environment) set option ``name``."""
    source = context.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def _journalled(
    options: dict[str, Any], run: dict[str, Any], given: set[str]
) -> dict[str, Any] | None:
    """For ``--resume`` of a folder that holds a run: each setting this command line
    leaves at its default becomes the journalled run's (``run.json``: its settings, and
    the last call's ``iterations``, ``q``, ``timeout``...), as does the space of your own
    objective without ``--space``; so ``--resume --out DIR`` alone continues a run. A
    given ``iterations`` sets the step budget of a step-wise run, as it does in a new
    one, rather than the last call's ``step_budget``. The settings taken, or None where
    the folder holds no run."""
    import dataclasses

    from bojax.bo.journal import Journal
    from bojax.bo.settings import Settings, without_inert
    from bojax.user_code import is_reference

    journal = Journal(run["out"])
    if not journal.header_path.exists():
        return None
    stored = {**journal.section("options"), **without_inert(journal.section("settings"))}
    if "iterations" in given:
        stored.pop("step_budget", None)
    own = is_reference(run["problem"])
    taken = {}
    for spec in dataclasses.fields(Settings):
        name = spec.name
        if name in given:
            continue  # the journal checks that it matches (or, an option, keeps it)
        if name in stored and (name != "maximize" or own):  # (a built-in problem's own)
            options[name] = taken[name] = stored[name]
    if own and run["space"] is None:
        run["space"] = journal.space()
    return taken


# The options of `optimize` that are not run settings: what to optimise, where to journal
# and where to evaluate.
_RUN_PARAMETERS = [
    (
        "problem",
        Annotated[
            str,
            typer.Argument(
                help="a built-in problem (see `bojax problems`), or your objective as "
                "module:function or path/to/file.py:function (then --space is required)",
                show_default=False,
            ),
        ],
        inspect.Parameter.empty,
    ),
    (
        "space",
        Annotated[
            Path | None,
            typer.Option(help="TOML or JSON file of your objective's parameters (see README)"),
        ],
        None,
    ),
    ("out", Annotated[Path | None, typer.Option(help="folder for the run journal")], None),
    (
        "resume",
        Annotated[bool, typer.Option(help="continue the run journalled in --out")],
        False,
    ),
    (
        "workers",
        Annotated[
            int | None, typer.Option(min=1, help="evaluate on a local Dask cluster of N processes")
        ],
        None,
    ),
    (
        "scheduler",
        Annotated[
            str | None,
            typer.Option(help="evaluate on the Dask cluster at this scheduler address"),
        ],
        None,
    ),
    (
        "plugin",
        Annotated[
            list[str] | None,
            typer.Option(
                help="a module (my_pkg.extras) or file (extras.py) to import first: what it "
                "registers can then be named (repeatable)"
            ),
        ],
        None,
    ),
]
_RUN_OPTIONS = [name for name, _, _ in _RUN_PARAMETERS]


# Settings kept as tuples are repeatable options (--objective a:min --objective b:max).
_REPEATABLE = {
    tuple[str, ...] | None: list[str] | None,
    tuple[float, ...] | None: list[float] | None,
}


def _or_none(kind: type):
    """The parser of an option whose setting also takes None: ``none`` is None (to set
    back what a resume would take from its journal, or a default that is not None)."""
    said = "a whole number" if kind is int else "a number"

    def parse(text: str) -> Any:
        if not isinstance(text, str):  # the default, passed through the parser as it is
            return text
        if text.strip().lower() == "none":
            return None
        try:
            return kind(text)
        except ValueError:
            raise typer.BadParameter(f"{text!r} is not {said} or 'none'") from None

    return parse


def _setting_parameters() -> list[inspect.Parameter]:
    """One option per field of :class:`bojax.bo.settings.Settings`, with its help text
    (``--candidates`` for ``num_candidates``, ``--maximize/--no-maximize`` for a flag)."""
    import dataclasses
    import typing

    from bojax.bo.settings import Settings

    hints = typing.get_type_hints(Settings)
    parameters = []
    for spec in dataclasses.fields(Settings):
        flag = (spec.metadata.get("flag") or spec.name).replace("_", "-")
        names = [f"--{flag}/--no-{flag}"] if hints[spec.name] is bool else [f"--{flag}"]
        option = typer.Option(*names, help=spec.metadata["help"])
        kind = _REPEATABLE.get(hints[spec.name], hints[spec.name])
        number = {int | None: int, float | None: float}.get(kind)
        if number is not None:  # --exact-limit none, --timeout none: None
            option = typer.Option(
                *names,
                help=spec.metadata["help"],
                parser=_or_none(number),
                metavar=f"<{number.__name__}|none>",
            )
            kind = str  # the parser makes the value; Typer reads the annotation's type

        parameters.append(
            inspect.Parameter(
                spec.name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Annotated[kind, option],
                default=spec.default,
            )
        )
    return parameters


def _register_optimize() -> None:
    run = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=kind, default=default)
        for name, kind, default in _RUN_PARAMETERS
    ]
    context = inspect.Parameter(
        "context", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context
    )  # (which options the command line gave: a resume takes the others from the run)
    parameters = [context, *run[:1], *_setting_parameters(), *run[1:]]
    optimize.__signature__ = inspect.Signature(parameters)
    optimize.__annotations__ = {p.name: p.annotation for p in parameters}
    app.command()(optimize)


_register_optimize()


def _objective_and_space(problem: str, space: Any, maximize: bool):
    """(objective, space, maximise?, known optimum or None) for a built-in problem or a
    ``module:function`` reference with its space (a file, or a resumed run's Space);
    typed errors before any run."""
    from bojax.errors import SettingsError, UnknownNameError
    from bojax.spaces import Space, load_space
    from bojax.user_code import is_reference, load_objective

    if not is_reference(problem):
        from bojax.objectives.problems import get_problem

        try:
            spec = get_problem(problem)
        except UnknownNameError:
            if not (problem.endswith(".py") or "/" in problem):
                raise
            raise SettingsError(
                f"{problem!r} is not a built-in problem; for your own objective name its "
                f"function too: {problem}:FUNCTION"
            ) from None
        if space is not None or maximize:
            raise SettingsError(
                f"{problem!r} is a built-in problem with its own space and goal; "
                "--space and --maximize are for your own objective (module:function)"
            )
        return spec, spec.space, spec.maximize, spec.optimum
    if space is None:
        raise SettingsError(f"{problem}: your own objective needs --space FILE (TOML or JSON)")
    # (the cheaper check first; a resumed run's space is read from its run.json)
    search_space = space if isinstance(space, Space) else load_space(space)
    return load_objective(problem), search_space, maximize, None


def _format_value(value: Any, digits: int = 4) -> str:
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def _pairs(values: dict[str, Any], digits: int = 4) -> str:
    """``name=value, ...`` as show and optimize print a point or settings."""
    return ", ".join(f"{k}={_format_value(v, digits)}" for k, v in values.items())


SHOW_ROWS = 1000  # evaluations `bojax show` lists unless --last or --all says otherwise


@app.command()
def show(
    run: Annotated[Path, typer.Argument(help="a run folder (--out of optimize, or a report's)")],
    last: Annotated[
        int | None,
        typer.Option(min=1, help=f"only the last N evaluations [the last {SHOW_ROWS}]"),
    ] = None,
    every: Annotated[
        bool, typer.Option("--all", help="every evaluation, however many the run has")
    ] = False,
    plugin: Plugins = None,
) -> None:
    """Print a run while it runs or after: settings, space, its evaluations (the last
    1,000 unless asked otherwise) with the best so far, failures, the best point and the
    sampler's diagnostics. Reads only."""
    from bojax.bo.evaluation import finite_number
    from bojax.bo.runs import design_counts, load_run
    from bojax.errors import BojaxError, SettingsError

    console = terminal.console()  # a run folder is untrusted: no markup, escapes shown
    if last is not None and every:
        print_error(console, SettingsError("--last and --all: give one of them"))
        raise typer.Exit(code=1)
    try:
        _load_plugins(plugin)
        record = load_run(run)
    except BojaxError as error:
        print_error(console, error)
        raise typer.Exit(code=1) from None
    settings = record.settings
    if record.finished and record.summary.get("error"):  # nothing succeeded
        status = f"ended: {record.summary['error']}"
    elif record.finished:
        stopped = record.summary.get("stopped")
        status = "finished" + (f" (stopped early: {stopped})" if stopped else "")
    else:
        status = f"running or interrupted, {len(record.pending)} evaluation(s) in flight"
    console.print(Text.assemble((plain(run), "bold"), ": ", plain(status)))
    console.print(plain("settings: " + _pairs(settings)))
    if record.options:  # (the last call's; runs journalled before 2026-11-29 have none)
        console.print(plain("last call: " + _pairs(record.options)))
    for p in record.space.parameters:
        extra = f" if {p.condition}" if p.condition else ""
        console.print(plain(f"  {p.name}: {p.describe()}{extra}"))

    names = record.space.names
    wide = len(names) > 5  # many parameters: one column of name=value pairs
    segments = design_counts(record.records)  # freeze-thaw: a record per segment of a training
    title = f"{len(record.records)} evaluations ({len(record.failures)} failed)"
    if segments is not None:
        title = f"{len(record.records)} segments of {segments[0]} designs ({segments[1]} failed)"
    table = Table(title=title)
    several = record.metrics is not None
    outcome = list(record.metrics.columns) if several else ["y"]
    progress = "hypervolume" if several else "best so far"
    stepwise = record.stepwise  # train(point, report)
    steps = ["steps"] if stepwise else []
    shown = {"#", "phase", "point", *names, *steps, progress, "s"}
    # A metric named as a parameter (or as one of these columns) says which it is.
    labels = [f"{name} (metric)" if name in shown else name for name in outcome]
    for column in ("#", "phase", *(["point"] if wide else names), *labels, *steps, progress, "s"):
        justify = "left" if column in ("phase", "point") else "right"
        table.add_column(plain(column), justify=justify)
    for column in ("acquisition", "ess", "P(success)"):
        table.add_column(column, justify="right")
    best_so_far = record.best_so_far()
    rows = None if every else (last or SHOW_ROWS)
    start = 0 if rows is None else max(0, len(record.records) - rows)
    if start and last is None:  # (a run of 20,000 printed for 20 s, review CP)
        table.caption = (
            f"the last {SHOW_ROWS:,} of {len(record.records):,} evaluations: --last N, or "
            "--all for every one"
        )
    for entry, best in zip(record.records[start:], best_so_far[start:], strict=True):
        point = entry["x"]
        values = (
            [_pairs(point)]
            if wide
            else [_format_value(point[n]) if n in point else "-" for n in names]
        )
        values = [plain(v) for v in values]
        if entry["status"] == "failed":
            y = [styled("failed", "red")] + [""] * (len(outcome) - 1)
        elif entry["status"] == "stopped":  # a step-wise training ended early: dimmed
            y = [styled(_format_value(entry["y"]), "dim")]
        elif several:
            y = [_format_value(entry["y"][name]) for name in outcome]
        else:
            y = [_format_value(entry["y"])]
        diagnostics = entry.get("diagnostics", {})
        table.add_row(
            plain(entry["iteration"]),
            plain(entry["phase"]),
            *values,
            *y,
            *([plain(entry["curve"][-1][0] if entry["curve"] else 0)] if stepwise else []),
            _format_value(best) if finite_number(best) is not None else "-",  # (no success yet)
            f"{entry['seconds']:.2f}",
            *(_format_value(diagnostics[k]) if k in diagnostics else "-" for k in (
                # freeze-thaw's decisions keep their acquisition as expected_improvement
                "acquisition_value" if "acquisition_value" in diagnostics
                else "expected_improvement", "ess", "success_probability"
            )),
        )  # fmt: skip
    console.print(table)
    for entry in record.records[start:]:  # (--last N: the failures among the rows shown)
        if entry["status"] != "failed":
            continue
        where = _pairs(entry["x"])
        console.print(plain(f"  failed at #{entry['iteration']} ({where}): {entry['error']}"))
    for entry in record.pending:  # in flight (a step-wise training: how far it got)
        where = _pairs(entry["x"])
        curve = entry.get("curve")
        last = curve[-1] if isinstance(curve, list) and curve else None
        got = ""  # (a resume checks the curve; show prints only a well-formed last pair)
        if isinstance(last, list) and len(last) == 2:
            got = f": step {_format_value(last[0])}, value {_format_value(last[1])}"
        state = "in flight" if entry.get("over") is None else f"ended ({entry['over']})"
        console.print(plain(f"  {state}, proposal {entry['proposal']} ({where}){got}"))
    best = record.best()
    if several:
        constrained = bool(record.metrics.constraints)
        _print_front(console, record.front(), list(record.metrics.columns), constrained)
    elif best is not None:
        where = _pairs(best["x"])
        goal = "max" if record.maximize else "min"
        number = best["iteration"]
        why = "; none trained to the end, this one stopped" if best["status"] == "stopped" else ""
        console.print(
            plain(f"best ({goal}) {best['y']:.6g} at {where} (evaluation #{number}{why})")
        )
    if record.sampler is not None:
        console.print(
            plain(
                # (a chain's state, or a MAP fit's: where a resume's first fit starts)
                f"surrogate state kept from iteration {record.sampler.get('iteration')}: a "
                "resume's first fit starts there"
            )
        )


def _print_front(
    console: Console, front: dict[str, Any], columns: list[str], constrained: bool
) -> None:
    """The Pareto set of a run with several metrics, and its hypervolume."""
    table = Table(title=f"Pareto set: {len(front['pareto'])} feasible, non-dominated designs")
    for column in ("#", "point", *columns):
        table.add_column(plain(column), justify="left" if column == "point" else "right")
    for entry in front["pareto"]:
        point = _pairs(entry["x"])
        table.add_row(
            plain(entry["iteration"]),
            plain(point),
            *(_format_value(entry["metrics"][name]) for name in columns),
        )
    console.print(table)
    if not front["pareto"]:
        why = "met the constraints" if constrained else "succeeded"
        console.print(f"no evaluation {why}: the Pareto set is empty")
    if front["reference_point"] is not None:
        reference = ", ".join(_format_value(v) for v in front["reference_point"])
        volume = front["hypervolume"][-1] if front["hypervolume"] else 0.0
        console.print(plain(f"hypervolume {volume:.6g} (reference point {reference})"))


@app.command()
def plot(
    run: Annotated[Path, typer.Argument(help="a run folder (--out of optimize, or a report's)")],
    out: Annotated[Path | None, typer.Option(help="folder for the figures [RUN/figures]")] = None,
    slices: Annotated[
        bool, typer.Option(help="refit the run's surrogate for posterior slices")
    ] = True,
    plugin: Plugins = None,
) -> None:
    """Figures of a run from its journal alone: best so far, each parameter against the
    evaluation, and the refitted surrogate's mean and sd along 1-D and 2-D slices through
    the best point."""
    _start_jax()
    from bojax.bo.runs import load_run
    from bojax.errors import BojaxError
    from bojax.reports.run_figures import (
        FIGURE_NAMES,
        plot_run,
        refit_limit,
        too_long_to_refit,
    )

    console = terminal.console()
    try:
        _load_plugins(plugin)
        record = load_run(run)
        if not record.records:  # a run started, nothing journalled yet: empty axes help no one
            console.print(f"{run}: no evaluation has ended yet, nothing to plot", highlight=False)
            return
        refits = slices and record.refits
        doing = "drawing the figures" + (" (the slices refit the surrogate)" if refits else "")
        with console.status(doing):  # (seconds at thousands of evaluations; shown on a tty)
            paths = plot_run(record, out or run / "figures", slices=slices)
    except BojaxError as error:
        print_error(console, error)
        raise typer.Exit(code=1) from None
    for path in paths:
        console.print(f"wrote {path}", highlight=False)
    drawn = {path.name for path in paths}
    if refits and too_long_to_refit(record):
        console.print(
            f"no slices: {len(record.records)} evaluations are more than bojax plot refits "
            f"(at most {refit_limit(record)})",
            highlight=False,
        )
    folder = out or run / "figures"
    stale = [name for name in FIGURE_NAMES if name not in drawn and (folder / name).is_file()]
    if stale:  # an earlier plot's (slices of an older model, say): not this run's state now
        console.print(
            f"left from an earlier plot, not redrawn: {', '.join(stale)}", highlight=False
        )


# Reading a run back needs what its run imported: a plugin's parameter kind, surrogate, ...
Plugins = Annotated[
    list[str] | None,
    typer.Option(
        "--plugin",
        help="a module or file to import first, as for optimize: what the run's --plugin "
        "registered (repeatable)",
    ),
]


def _load_plugins(plugin: list[str] | None) -> None:
    from bojax.user_code import load_module

    for module in plugin or ():
        load_module(module)


@app.command(name="list")
def list_registered(
    kind: Annotated[
        str | None,
        typer.Argument(help="one kind (surrogates, acquisitions, kernels, ...) [all]"),
    ] = None,
    plugin: Plugins = None,
) -> None:
    """List what can be named in a run: surrogates, acquisitions, policies, samplers,
    kernels, means, priors, failure models and parameter kinds, with what your
    --plugin modules register."""
    _start_jax()
    import bojax.bo.loop  # noqa: F401  (imports every registry's module)
    from bojax.errors import BojaxError
    from bojax.registry import registries

    console = terminal.console(markup=True)
    try:
        _load_plugins(plugin)
    except BojaxError as error:
        print_error(console, error)
        raise typer.Exit(code=1) from None

    def names(registry) -> tuple[str, ...]:
        return (registry.kind, registry.plural, registry.plural.replace(" ", "-"))

    shown = [r for r in registries() if kind is None or kind in names(r)]
    if not shown:
        known = ", ".join(r.plural.replace(" ", "-") for r in registries())
        print_error(console, f"no registry {kind!r}; known: {known}")
        raise typer.Exit(code=1)
    for registry in shown:
        console.print(f"[bold]{registry.plural}[/bold]: {', '.join(registry.names())}")


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
    terminal.console().print(table)


@app.command()
def repair(
    run: Annotated[Path, typer.Argument(help="a run folder that --resume or show refuses")],
    plugin: Plugins = None,
) -> None:
    """Make a run's journal resumable again without losing a finished evaluation: repeated
    and unusable records go to journal.rejected.jsonl with the reason, iterations are
    renumbered, and the original stays as journal.jsonl.bak-<time>. For a journal two
    processes wrote at once, or one edited by hand. Takes the folder's lock."""
    from bojax.bo.journal import Journal
    from bojax.bo.repair import repair as repair_journal
    from bojax.errors import BojaxError

    console = terminal.console()  # a run folder is untrusted: no markup, escapes shown
    try:
        _load_plugins(plugin)
        repaired = repair_journal(Journal(run))
    except BojaxError as error:
        print_error(console, error)
        raise typer.Exit(code=1) from None
    for line in repaired.lines():
        console.print(plain(line))


def _warning_line(message, category, filename, lineno, line=None) -> str:
    """A warning as one plain line: the file, line and source line Python adds point
    into bojax, which is no help to someone running a command."""
    return f"{category.__name__}: {message}\n"


def main() -> None:
    import warnings

    warnings.formatwarning = _warning_line
    app()


if __name__ == "__main__":
    main()
