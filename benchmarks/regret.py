"""Sample efficiency: simple regret against evaluations, bojax and its peers side by side.

Six test functions (Forrester, Branin, Six-Hump Camel, McCormick, Rosenbrock, Hartmann-6),
each method started from the same 2d + 1 scrambled Sobol points per seed, 30
evaluations in all (60 for Hartmann-6), 20 seeds (3 with ``--quick``). Simple regret
after k evaluations is ``min(y_1..y_k) - f*``. Methods (see ``methods.py``): bojax
``gp-slice`` + LogEI, ``gp-map`` + EI, ``bnn-hmc`` + LCB and + LogEI, the BNN report's
set-up ``bnn-report`` + LCB, BoTorch ``SingleTaskGP`` + LogEI, Optuna TPE and
``GPSampler``, random search; peers that are not installed are skipped with a note.

Each (function, method, seed) run is kept in ``<out>/regret_runs/`` as it finishes and
reused when present, so an interrupted benchmark continues, and processes given
different ``--functions`` or ``--methods`` can share the work. Writes ``regret.json``
(final-regret table with ranks) and ``regret.png`` (median and quartiles per function).

    uv run --group bench python benchmarks/regret.py [--quick] [--functions ...] [--methods ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import date
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from scipy.stats import rankdata  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import methods  # noqa: E402

from bojax.objectives.problems import get_problem  # noqa: E402
from bojax.reports.figures import pyplot, quartile_band, save  # noqa: E402

FUNCTIONS = ["forrester", "branin", "six_hump_camel", "mccormick", "rosenbrock", "hartmann6"]
ALL_METHODS = [
    "bojax gp-slice",
    "bojax gp-map",
    "bojax bnn-hmc",
    "bojax bnn-hmc-logei",
    "bojax bnn-report",
    "BoTorch GP",
    "Optuna TPE",
    "Optuna GP",
    "Optuna bojax",
    "random",
]
REFERENCE, TARGET_PEER = "bojax gp-slice", "BoTorch GP"


def budget(function: str) -> int:
    """Evaluations in all, the initial design included."""
    return 60 if function == "hartmann6" else 30


def run_one(function: str, name: str, seed: int) -> dict:
    """One optimisation: the shared design, then the method's proposals; every y kept."""
    problem = get_problem(function)
    dim = problem.space.dim
    initial = 2 * dim + 1
    arm = methods.make(name, dim, seed, initial)
    ys = []
    tick = time.perf_counter()
    design = methods.sobol_design(dim, initial, seed)
    for k in range(budget(function)):
        u = design[k] if k < initial else np.clip(arm.ask(), 0.0, 1.0)
        y = problem(problem.space.from_unit(u))
        arm.tell(u, y)
        ys.append(y)
    return {
        "function": function,
        "method": name,
        "seed": seed,
        "initial": initial,
        "y": ys,
        "seconds": time.perf_counter() - tick,
    }


def slug(name: str) -> str:
    return name.lower().replace(" ", "_")


def collect(functions, names, seeds: int, runs: Path, console: Console) -> dict:
    """``{function: {method: (seeds, evaluations) simple regret}}``, running what is missing
    seed by seed (so an interrupted benchmark has every function and method at equal seeds)."""
    for seed in range(seeds):
        for function in functions:
            for name in names:
                path = runs / function / slug(name) / f"seed{seed}.json"
                if path.exists() and len(json.loads(path.read_text())["y"]) == budget(function):
                    continue
                row = run_one(function, name, seed)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(row))
                console.print(
                    f"  seed {seed:>2} {function:<15} {name:<15} best "
                    f"{min(row['y']):.5g} in {row['seconds']:.1f} s",
                    highlight=False,
                )
    regrets: dict[str, dict[str, np.ndarray]] = {}
    for function in functions:
        optimum = get_problem(function).optimum
        for name in names:
            rows = [
                json.loads((runs / function / slug(name) / f"seed{seed}.json").read_text())
                for seed in range(seeds)
            ]
            curves = np.array([np.minimum.accumulate(row["y"]) for row in rows]) - optimum
            regrets.setdefault(function, {})[name] = np.maximum(curves, 0.0)
    return regrets


def summarise(regrets: dict) -> dict:
    """Final-regret quartiles, per-function ranks of the median (1 = best), mean rank."""
    summary = {"functions": {}, "mean_rank": {}}
    ranks: dict[str, list[float]] = {}
    for function, by_method in regrets.items():
        names = list(by_method)
        medians = [float(np.median(by_method[m][:, -1])) for m in names]
        for name, rank in zip(names, rankdata(medians), strict=True):
            ranks.setdefault(name, []).append(float(rank))
        summary["functions"][function] = {
            name: {
                "final_quartiles": np.percentile(by_method[name][:, -1], [25, 50, 75]).tolist(),
                "rank": ranks[name][-1],
                "seeds": int(by_method[name].shape[0]),
            }
            for name in names
        }
    summary["mean_rank"] = {name: float(np.mean(r)) for name, r in ranks.items()}
    if REFERENCE in summary["mean_rank"] and TARGET_PEER in summary["mean_rank"]:
        wins = [
            f
            for f, rows in summary["functions"].items()
            if rows[REFERENCE]["final_quartiles"][1] <= rows[TARGET_PEER]["final_quartiles"][1]
        ]
        summary["gp_slice_at_most_botorch_on"] = wins
    return summary


def tables(summary: dict) -> tuple[Table, Table]:
    """Final regret per (function, method), and the ranks with their mean."""
    names = list(summary["mean_rank"])
    regret = Table(title="Final simple regret over seeds")
    for column in ("function", "method", "q25", "median", "q75", "rank"):
        regret.add_column(column, justify="left" if column in ("function", "method") else "right")
    ranks = Table(title="Rank of the median final regret (1 = best)")
    ranks.add_column("method")
    for function in summary["functions"]:
        ranks.add_column(function[:10], justify="right")
    ranks.add_column("mean", justify="right")
    for function, rows in summary["functions"].items():
        for k, name in enumerate(names):
            q25, q50, q75 = rows[name]["final_quartiles"]
            regret.add_row(
                function if k == 0 else "",
                name,
                f"{q25:.3g}",
                f"{q50:.3g}",
                f"{q75:.3g}",
                f"{rows[name]['rank']:g}",
                end_section=k == len(names) - 1,
            )
    for name in names:
        cells = [f"{rows[name]['rank']:g}" for rows in summary["functions"].values()]
        ranks.add_row(name, *cells, f"{summary['mean_rank'][name]:.2f}")
    return regret, ranks


def plot(regrets: dict, path: Path) -> None:
    plt = pyplot()
    functions = list(regrets)
    columns = min(3, len(functions))
    rows = -(-len(functions) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.6 * columns, 3.6 * rows), squeeze=False)
    for ax, function in zip(axes.flat, functions, strict=False):
        for k, (name, curves) in enumerate(regrets[function].items()):
            style = "-" if name.startswith("bojax") else "--"
            quartile_band(ax, np.maximum(curves, 1e-8), f"C{k}", name, 0.12, ls=style, lw=1.4)
        ax.set_yscale("log")
        dim = get_problem(function).space.dim
        ax.axvline(2 * dim + 1, color="grey", lw=0.8, ls=":")
        ax.set_title(f"{function} (d = {dim}, {curves.shape[0]} seeds)", fontsize=9)
        ax.set_xlabel("evaluations")
        ax.set_ylabel("simple regret")
        ax.grid(True, which="both", alpha=0.25)
    for ax in axes.flat[len(functions) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle("Median simple regret with quartiles; dotted: end of the initial design")
    save(fig, path, dpi=120)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 seeds instead of 20")
    parser.add_argument("--seeds", type=int, help="number of seeds (default 20, quick 3)")
    parser.add_argument("--functions", nargs="+", default=FUNCTIONS, choices=FUNCTIONS)
    parser.add_argument("--methods", nargs="+", default=ALL_METHODS, metavar="NAME")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    seeds = args.seeds or (3 if args.quick else 20)
    console = Console()
    names = methods.select(args.methods, parser.error, console)
    regrets = collect(args.functions, names, seeds, args.out / "regret_runs", console)
    summary = summarise(regrets)
    for printed in tables(summary):
        console.print(printed)
    if "gp_slice_at_most_botorch_on" in summary:
        wins = summary["gp_slice_at_most_botorch_on"]
        console.print(
            f"bojax gp-slice median final regret <= BoTorch GP's on {len(wins)} of "
            f"{len(regrets)} functions: {', '.join(wins) or 'none'}",
            highlight=False,
        )
    name = "regret_quick" if args.quick else "regret"
    record = {"date": date.today().isoformat(), "machine": methods.machine(), **summary}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(record, indent=1))
    plot(regrets, args.out / f"{name}.png")
    console.print(f"wrote {args.out / name}.json and .png")
    return summary


if __name__ == "__main__":
    main()
