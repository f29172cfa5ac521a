"""The hybrid-exploration report (Brofos 2014): Figures 1-2 and Table 2, with the
exploration policies of :mod:`bojax.bo.policies`.

The report's GP is a squared-exponential GP fitted by maximum evidence with EI as the
"anticipation equation"; here that is ``gp-map-se`` (MAP under bojax's weak default
priors) with integrated EI, maximised over a Sobol grid and refined. Four policies run
side by side: the plain EI loop (Algorithm 1), the hybrid (Algorithm 2, tau = 4/5), and
the variable threshold (Algorithm 3, basis tau = 1) in both readings of its scaling
(``pseudocode``: exploit with probability nu tau; ``prose``: explore with it). Every
policy stops early by the same rule (:mod:`bojax.bo.policies`): EI below
``stop_tolerance``, and for the exploring policies the largest posterior sd below
``stop_sd`` as well, all in standardised output units. On the noisy CV accuracy of
Table 2 the sd threshold is relative to the fitted noise, ``max(stop_sd, rf_stop_noise *
sigma_n)``: with ``stop_sd = 0.1`` alone the exploring policies never stopped there (10
of 10 runs used the whole budget). The toy function is noise-free and keeps the absolute
rule: from three nearly flat points a MAP fit explains them as noise, and a
noise-relative rule stopped every policy there before it saw the main lobe (0 of 50
runs from the report's start reached the maximum).

* Toy problem: maximise ``sin(x) / (pi x)`` on [-4, 12] (our domain; the report gives
  none) from x = 6, 8, 10, around the side lobe at 7.725, for up to 20 iterations.
  Figures 1-2 show the posterior at the end of seed 0's EI and hybrid runs; beyond the
  report, the fraction of ``toy_seeds`` seeded runs that reach the global maximum, from
  the report's start and from random starts.
* Random forest (Table 2): the number of trees (1-200) of a random forest, scored by
  5-fold CV accuracy on modeldata's ``credit_data`` (:mod:`bojax.objectives.forest`; the report's
  Australian credit data is not available offline), ``rf_seeds`` runs per policy from a
  3-point Sobol design. Each seed fixes its folds and forests, and the policies share the
  evaluations of a seed.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bojax.bo import policies
from bojax.bo.loop import Settings, ask, init, predict, tell
from bojax.objectives.forest import ForestObjective, credit_data, tree_space
from bojax.objectives.problems import sinc
from bojax.reports import CachedObjective, configure, prepare_out, write_summary
from bojax.reports.claims import Claim, verdict
from bojax.reports.figures import pyplot, save
from bojax.reports.provenance import begin
from bojax.spaces import Real, Space

# label -> (policy, scaling)
POLICY_RUNS = {
    "EI": ("acquisition", "pseudocode"),
    "hybrid": ("hybrid", "pseudocode"),
    "variable (pseudo-code)": ("variable-threshold", "pseudocode"),
    "variable (prose)": ("variable-threshold", "prose"),
}
GLOBAL_MAX = 1 / np.pi
SIDE_LOBE_MAX = float(sinc({"x": 7.725251836937707}))  # the best local maximum
# The report's Table 2 (variable threshold, Australian credit): average, min, max, sd.
REPORT_TABLE = {"accuracy": (85.0, 81.0, 90.0, 3.24), "convergence": (10.0, 7.0, 12.0, 2.2)}


@dataclass(frozen=True)
class Config:
    quick: bool = False
    surrogate: str = "gp-map-se"
    stop_tolerance: float = 1e-3
    stop_sd: float = 0.1
    rf_stop_noise: float | None = 1.0  # Table 2 only (noisy); the toy is noise-free
    candidates: int = 512
    toy_domain: tuple[float, float] = (-4.0, 12.0)
    toy_start: tuple[float, ...] = (6.0, 8.0, 10.0)
    toy_iterations: int = 20
    toy_seeds: int = 50
    rf_rows: int = 690
    rf_max_trees: int = 200
    rf_folds: int = 5
    rf_seeds: int = 20
    rf_initial: int = 3
    rf_iterations: int = 20


QUICK = {"toy_seeds": 8, "rf_seeds": 3, "rf_max_trees": 60, "rf_folds": 3, "rf_iterations": 12}


def config(quick: bool = False, **overrides: Any) -> Config:
    """The full settings, or with ``quick`` a few-minute version; then ``overrides``."""
    return configure(Config(), quick, QUICK, overrides)


def _settings(
    cfg: Config, label: str, seed: int, initial: int, iterations: int, stop_noise=None
) -> Settings:
    policy, scaling = POLICY_RUNS[label]
    return Settings(
        surrogate=cfg.surrogate,
        acquisition="ei",  # the report's; its stopping tolerance is on the EI scale
        initial=initial,
        iterations=iterations,
        seed=seed,
        maximize=True,
        num_candidates=cfg.candidates,
        policy=policy,
        scaling=scaling,
        stop_tolerance=cfg.stop_tolerance,
        # EI stops on stop_tolerance alone: the sd bounds are the exploring policies'
        stop_sd=cfg.stop_sd if policies.explores(policy) else None,
        stop_noise=stop_noise if policies.explores(policy) else None,
    )


def policy_run(objective, space: Space, settings: Settings, start=()) -> dict[str, Any]:
    """One BO run with the functional loop, from the points ``start`` (dicts; the loop's
    Sobol design when empty), until the budget or the stopping rule. Returns the unit
    points, outputs, which BO steps explored, and the evaluations at the stop (or None)."""
    state = init(space, settings)
    for point in start:
        state = tell(state, space.to_unit(point), objective(point))
    explored, converged = [], None
    while len(state.y) < settings.initial + settings.iterations:
        u, state, info = ask(state)
        if info.get("converged"):
            converged = len(state.y)
            break
        state = tell(state, u, objective(space.from_unit(u)))
        explored.append(bool(info.get("explored", 0.0)))
    return {"state": state, "explored": explored, "converged": converged}


def _summary_of(run: dict, initial: int, budget: int) -> dict[str, Any]:
    state = run["state"]
    best = int(np.nanargmax(state.y))
    bo_steps = len(state.y) - initial
    return {
        "best": float(state.y[best]),
        "best_point": state.space.from_unit(state.u[best]),
        "evaluations": len(state.y),
        "iterations": bo_steps,
        "stopped": run["converged"] is not None,
        "iterations_to_best": max(best - initial + 1, 0),
        "explored": int(sum(run["explored"])),
        "budget": budget,
    }


# -- the toy problem ------------------------------------------------------------------------


def toy(cfg: Config) -> dict[str, Any]:
    space = Space([Real("x", *cfg.toy_domain)])
    starts = {
        "report's start": lambda seed: [{"x": x} for x in cfg.toy_start],
        "random start": lambda seed: [
            {"x": float(x)}
            for x in np.random.default_rng([seed, 7]).uniform(*cfg.toy_domain, len(cfg.toy_start))
        ],
    }
    results: dict[str, Any] = {"runs": {}, "figure_runs": {}}
    for start_name, start_of in starts.items():
        for label in POLICY_RUNS:
            rows = []
            for seed in range(cfg.toy_seeds):
                settings = _settings(cfg, label, seed, len(cfg.toy_start), cfg.toy_iterations)
                run = policy_run(sinc, space, settings, start_of(seed))
                rows.append(_summary_of(run, len(cfg.toy_start), cfg.toy_iterations))
                if seed == 0 and start_name == "report's start":
                    results["figure_runs"][label] = run
            results["runs"].setdefault(start_name, {})[label] = rows
    results["fractions"] = {
        start: {label: _fractions(rows) for label, rows in per.items()}
        for start, per in results["runs"].items()
    }
    return results


def _fractions(rows: list[dict]) -> dict[str, float]:
    best = np.array([r["best"] for r in rows])
    return {
        "global_within_1pct": float(np.mean(best >= 0.99 * GLOBAL_MAX)),
        "main_lobe": float(np.mean(best > SIDE_LOBE_MAX)),
        "stopped_early": float(np.mean([r["stopped"] for r in rows])),
        "median_evaluations": float(np.median([r["evaluations"] for r in rows])),
    }


def _values(space: Space, u: np.ndarray) -> np.ndarray:
    """The one parameter's values at unit coordinates ``u``."""
    name = space.names[0]
    return np.array([space.from_unit(np.array([v]))[name] for v in u], dtype=np.float64)


def _plot_posterior(ax, state, upto: int, initial: int, explored: list[bool], title: str):
    grid = np.linspace(0, 1, 400)
    xs = _values(state.space, grid)
    sub = state._replace(u=state.u[:upto], y=state.y[:upto])
    mean, sd = predict(sub, grid[:, None])
    ax.plot(xs, [sinc({"x": x}) for x in xs], "k-", lw=1, label="sin(x) / (pi x)")
    ax.plot(xs, mean, "C3-", lw=1.2, label="posterior mean")
    ax.fill_between(xs, mean - 1.96 * sd, mean + 1.96 * sd, color="C3", alpha=0.2, lw=0)
    x_seen = _values(state.space, sub.u[:, 0])
    ax.plot(x_seen[:initial], sub.y[:initial], "kx", ms=8, mew=1.5, label="initial points")
    steps = np.arange(initial, upto)
    took = np.array(explored[: len(steps)], dtype=bool)
    ax.plot(x_seen[steps[~took]], sub.y[steps[~took]], "C0o", ms=5, label="EI step")
    if took.any():
        ax.plot(x_seen[steps[took]], sub.y[steps[took]], "C2s", ms=6, label="max-sd step")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("x")
    ax.set_ylim(-0.45, 0.75)


def plot_toy(results: dict, cfg: Config, out: Path) -> list[Path]:
    plt = pyplot()
    initial = len(cfg.toy_start)
    ei, hybrid = results["figure_runs"]["EI"], results["figure_runs"]["hybrid"]
    ei_end = len(ei["state"].y)
    paths = []
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    _plot_posterior(axes[0], ei["state"], initial, initial, [], "(a) the three initial points")
    stop = "stopped" if ei["converged"] else "budget used"
    _plot_posterior(
        axes[1], ei["state"], ei_end, initial, ei["explored"], f"(b) EI loop, {stop} at n={ei_end}"
    )
    axes[0].legend(fontsize=7, loc="upper right")
    fig.suptitle("Figure 1: EI alone on sin(x)/(pi x) (seed 0)", fontsize=10)
    paths.append(save(fig, out / "figure1_ei.png", dpi=130))

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    state, explored = hybrid["state"], hybrid["explored"]
    upto = min(ei_end, len(state.y))
    _plot_posterior(axes[0], state, upto, initial, explored, f"(a) hybrid at n={upto}")
    _plot_posterior(
        axes[1], state, len(state.y), initial, explored, f"(b) hybrid at n={len(state.y)}"
    )
    axes[1].legend(fontsize=7, loc="upper right")
    fig.suptitle("Figure 2: the hybrid policy, tau = 4/5 (seed 0)", fontsize=10)
    paths.append(save(fig, out / "figure2_hybrid.png", dpi=130))
    return paths


# -- the random forest --------------------------------------------------------------------


def forest(cfg: Config, progress: bool = True) -> dict[str, Any]:
    space = tree_space(cfg.rf_max_trees)
    data = credit_data(cfg.rf_rows)
    rows: dict[str, list[dict]] = {label: [] for label in POLICY_RUNS}
    figure_runs: dict[str, dict] = {}
    for seed in range(cfg.rf_seeds):
        objective = CachedObjective(
            lambda p, s=seed: {"accuracy": ForestObjective(data, s, cfg.rf_folds)(p)}, "accuracy"
        )
        for label in POLICY_RUNS:
            tick = time.perf_counter()
            settings = _settings(
                cfg, label, seed, cfg.rf_initial, cfg.rf_iterations, cfg.rf_stop_noise
            )
            run = policy_run(objective, space, settings)
            row = _summary_of(run, cfg.rf_initial, cfg.rf_iterations)
            row["trees"] = int(row.pop("best_point")["trees"])
            row["accuracy"] = row.pop("best")
            rows[label].append(row)
            if seed == 0:
                figure_runs[label] = run
            if progress:
                print(
                    f"  forest seed {seed} {label:<24} {100 * row['accuracy']:.2f}% "
                    f"with {row['trees']:>3} trees, {row['iterations']:>2} iterations"
                    f"{' (stopped)' if row['stopped'] else ''}, {time.perf_counter() - tick:.0f} s"
                )
    table = {label: _table_row(r) for label, r in rows.items()}
    return {"runs": rows, "table": table, "figure_runs": figure_runs}


def _stats(values) -> dict[str, float]:
    values = np.asarray(values, dtype=np.float64)
    return {
        "average": float(values.mean()),
        "minimum": float(values.min()),
        "maximum": float(values.max()),
        "sd": float(values.std(ddof=1)) if len(values) > 1 else 0.0,
    }


def _table_row(rows: list[dict]) -> dict[str, Any]:
    return {
        "accuracy_percent": _stats([100 * r["accuracy"] for r in rows]),
        "iterations_to_convergence": _stats([r["iterations"] for r in rows]),
        "iterations_to_best": _stats([r["iterations_to_best"] for r in rows]),
        "stopped": int(sum(r["stopped"] for r in rows)),
        "runs": len(rows),
        "trees": [r["trees"] for r in rows],
    }


def plot_forest(results: dict, cfg: Config, out: Path) -> Path:
    plt = pyplot()
    labels = ("EI", "variable (pseudo-code)")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, label in zip(axes, labels, strict=True):
        run = results["figure_runs"][label]
        state = run["state"]
        grid = np.linspace(0, 1, 300)
        trees = _values(state.space, grid)
        mean, sd = predict(state, grid[:, None])
        ax.plot(trees, 100 * mean, "C3-", lw=1.2, label="posterior mean")
        ax.fill_between(
            trees, 100 * (mean - 1.96 * sd), 100 * (mean + 1.96 * sd), color="C3", alpha=0.2, lw=0
        )
        seen = _values(state.space, state.u[:, 0])
        ax.plot(
            seen[: cfg.rf_initial],
            100 * state.y[: cfg.rf_initial],
            "kx",
            ms=8,
            mew=1.5,
            label="initial design",
        )
        steps = np.arange(cfg.rf_initial, len(state.y))
        took = np.array(run["explored"][: len(steps)], dtype=bool)
        ax.plot(seen[steps[~took]], 100 * state.y[steps[~took]], "C0o", ms=5, label="EI step")
        if took.any():
            ax.plot(seen[steps[took]], 100 * state.y[steps[took]], "C2s", ms=6, label="max-sd step")
        ax.set_title(f"{label}: {len(state.y)} evaluations", fontsize=9)
        ax.set_xlabel("number of trees")
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_ylabel(f"{cfg.rf_folds}-fold CV accuracy (%)")
    fig.suptitle("Random forest on credit_data: final posteriors (seed 0)", fontsize=10)
    return save(fig, out / "figure3_forest.png", dpi=130)


# -- the whole report -------------------------------------------------------------------------


def run(cfg: Config, out: str | Path, *, progress: bool = True) -> dict[str, Any]:
    """Run both experiments, write the figures and ``summary.json`` into ``out``."""
    out = prepare_out(out, "hybrid_exploration")
    started = begin(cfg)
    toy_results = toy(cfg)
    toy_seconds = started.seconds()
    if progress:
        print(
            f"toy problem: {len(POLICY_RUNS)} policies x {cfg.toy_seeds} seeds x 2 starts "
            f"in {toy_seconds:.0f} s"
        )
    forest_results = forest(cfg, progress)
    figures = [*plot_toy(toy_results, cfg, out), plot_forest(forest_results, cfg, out)]
    summary = {
        "config": asdict(cfg),
        "toy": {
            "fractions": toy_results["fractions"],
            "runs": toy_results["runs"],
        },
        "forest": {"table": forest_results["table"], "runs": forest_results["runs"]},
        "report_table2": REPORT_TABLE,
        "seconds": {"toy": toy_seconds, "total": started.seconds()},
        "figures": [p.name for p in figures],
    }
    return write_summary(out, summary, started, cfg, config(cfg.quick), indent=2, default=_plain)


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not serialisable: {type(value).__name__}")


def claims(summary: dict[str, Any]) -> list[Claim]:
    """The toy problem's and Table 2's claims, judged from ``summary``."""
    toy = summary["toy"]["fractions"]["report's start"]
    table = summary["forest"]["table"]
    ei, hybrid = toy["EI"], toy["hybrid"]
    seeds = len(summary["toy"]["runs"]["report's start"]["EI"])
    variable = table["variable (pseudo-code)"]
    stopped = variable["stopped"] / variable["runs"]
    iterations = variable["iterations_to_convergence"]["average"]
    trees = {name: float(np.mean(row["trees"])) for name, row in table.items()}
    accuracy = {name: row["accuracy_percent"]["average"] for name, row in table.items()}
    return [
        Claim(
            "hybrid exploration",
            "Toy problem: EI stops on the side lobe, the hybrid finds the global maximum",
            verdict(hybrid["global_within_1pct"] >= 0.9 and ei["global_within_1pct"] <= 0.1),
            f"within 1 % of the maximum from the report's start: EI "
            f"{ei['global_within_1pct']:.2f}, hybrid {hybrid['global_within_1pct']:.2f} "
            f"of {seeds} seeds",
            "reproduced if the hybrid gets there in 90 % of seeds and EI in at most 10 %",
        ),
        Claim(
            "hybrid exploration",
            "Table 2: the variable threshold converges, in 7-12 iterations",
            verdict(stopped >= 0.5 and iterations <= 12, stopped > 0),
            f"variable threshold (pseudo-code) stopped in {variable['stopped']} of "
            f"{variable['runs']} runs, average {iterations:.1f} iterations; EI stopped in "
            f"{table['EI']['stopped']} of {table['EI']['runs']}",
            "reproduced if it stops in half the runs within 12 iterations on average; partly "
            "if it ever stops",
        ),
        Claim(
            "hybrid exploration",
            "Table 2: the variable threshold picks fewer trees than EI at the same accuracy",
            verdict(
                trees["variable (pseudo-code)"] < trees["EI"]
                and abs(accuracy["variable (pseudo-code)"] - accuracy["EI"]) <= 0.5,
                trees["variable (pseudo-code)"] < trees["EI"],
            ),
            f"mean trees {trees['variable (pseudo-code)']:.1f} (variable) vs {trees['EI']:.1f} "
            f"(EI); accuracy {accuracy['variable (pseudo-code)']:.2f} % vs {accuracy['EI']:.2f} %",
            "reproduced if fewer trees on average with accuracy within 0.5 points",
        ),
    ]


def format_tables(summary: dict) -> str:
    """The toy fractions and Table 2 as printed text."""
    lines = ["Toy problem: fraction of seeded runs reaching the global maximum (within 1%)"]
    fractions = summary["toy"]["fractions"]
    starts = list(fractions)
    lines.append(f"{'policy':<24}" + "".join(f"{s:>22}" for s in starts))
    for label in POLICY_RUNS:
        cells = "".join(
            f"{f['global_within_1pct']:>12.2f} (stop {f['stopped_early']:.2f})"
            for f in (fractions[s][label] for s in starts)
        )
        lines.append(f"{label:<24}{cells}")
    lines.append("")
    lines.append("Table 2: random forest on credit_data, over runs (report: variable threshold)")
    lines.append(
        f"{'policy':<24}{'accuracy % avg/min/max/sd':>30}{'iterations avg/min/max/sd':>30}"
        f"{'stopped':>9}  trees chosen"
    )

    def cells(stats, digits):
        return "/".join(f"{stats[k]:.{digits}f}" for k in ("average", "minimum", "maximum", "sd"))

    for label, row in summary["forest"]["table"].items():
        lines.append(
            f"{label:<24}{cells(row['accuracy_percent'], 2):>30}"
            f"{cells(row['iterations_to_convergence'], 1):>30}"
            f"{row['stopped']:>5}/{row['runs']:<3}  {row['trees']}"
        )
    acc, conv = REPORT_TABLE["accuracy"], REPORT_TABLE["convergence"]
    lines.append(
        f"{'report (Australian)':<24}{'/'.join(f'{v:g}' for v in acc):>30}"
        f"{'/'.join(f'{v:g}' for v in conv):>30}"
    )
    return "\n".join(lines)
