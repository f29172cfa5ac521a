"""Mixed spaces: regret on problems with categorical parameters, bojax and its peers side
by side in one run.

Problems (``bojax.objectives.mixed``): Func2C, Func3C, Ackley with five binary
categoricals (d = 10), pest control (25 categoricals of 5 choices), and a real training
task, ``mnist1d-net`` (``bojax.objectives.mixednet``: an optimizer, activation and
normalisation choice, momentum for SGD only, depth, an ordinal width and a learning rate
for MLPs on MNIST-1D; the validation error, 10 seeds at most). Arms: bojax with
categorical parameters (``gp-slice`` + LogEI, the defaults), bojax with the same space
written as integer codes (the workaround without categoricals), Optuna's GPSampler, Optuna
TPE, SMAC3 and random search (``bojax.reports.peers``; peers that are not installed are
skipped with a note). Every arm starts with ``initial`` random points of its own and has
``evaluations`` in all (40; 20 seeds, 3 with ``--quick``). Regret after k evaluations is
``min(y_1..y_k) - f*``; where ``f*`` is unknown (pest control, the training task) it is the
best value any run of this benchmark found. Printed: median final regret with quartiles,
the mean rank of each arm over seeds (ranks per seed by final regret, ties averaged) and
the median seconds an arm spent proposing one point after its initial design.

``--speed`` times a steady ``ask`` of bojax at d = 10 (5 categorical, 5 real; Ackley-5c5)
with n = 100 observations, and counts the compilations of the later asks.

Each (problem, arm, seed) run is kept in ``<out>/mixed_runs/`` and reused.

    uv run --group bench python benchmarks/mixed.py [--quick] [--problems ...] [--arms ...]
    uv run python benchmarks/mixed.py --speed
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from scipy.stats import rankdata  # noqa: E402

import bojax  # noqa: E402
from bojax.objectives.mixed import MIXED_PROBLEMS, integer_coded  # noqa: E402
from bojax.objectives.problems import Problem  # noqa: E402
from bojax.reports.peers import PEERS  # noqa: E402

TRAINING = "mnist1d-net"  # the real training task: 10 seeds where the others have 20
PROBLEMS = [*MIXED_PROBLEMS, TRAINING]


@functools.cache
def get(problem: str) -> Problem:
    if problem != TRAINING:
        return MIXED_PROBLEMS[problem]
    from bojax.objectives.mixednet import MixedNetObjective

    objective = MixedNetObjective(seed=0)  # one fixed task; the seeds vary the optimisers
    return Problem(TRAINING, objective.space, objective, math.nan, {}, "MLPs on MNIST-1D")


ARMS = ["bojax", "bojax integer codes", "optuna-gp", "tpe", "smac", "random"]


def make_arm(arm: str, space, seed: int, initial: int, budget: int):
    """``(optimiser, decode)``: the optimiser proposes points of the space it was given,
    ``decode`` maps them to the problem's own points."""
    decode = dict
    if arm == "bojax integer codes":  # the same peer on the space written as codes
        (space, decode), arm = integer_coded(space), "bojax"
    return PEERS.get(arm).make(space, seed=seed, initial=initial, budget=budget), decode


def run_one(problem: str, arm: str, seed: int, evaluations: int, initial: int) -> dict:
    p = get(problem)
    optimiser, decode = make_arm(arm, p.space, seed, initial, evaluations)
    ys, seconds = [], []
    for k in range(evaluations):
        tick = time.perf_counter()
        point = optimiser.ask()
        if k >= initial:
            seconds.append(time.perf_counter() - tick)
        value = p(decode(point))
        optimiser.tell(point, value)
        ys.append(value)
    return {"y": ys, "propose_seconds": seconds}


def collect(problems, arms, seeds, evaluations, initial, runs: Path, console,
            training_seeds: int = 10) -> dict:  # fmt: skip
    results: dict = {}
    for problem in problems:
        for arm in arms:
            for seed in range(min(seeds, training_seeds) if problem == TRAINING else seeds):
                path = runs / problem / arm.replace(" ", "-") / f"seed{seed}.json"
                if path.exists():
                    run = json.loads(path.read_text())
                    if len(run["y"]) == evaluations:
                        results.setdefault(problem, {}).setdefault(arm, []).append(run)
                        continue
                tick = time.perf_counter()
                run = run_one(problem, arm, seed, evaluations, initial)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(run))
                results.setdefault(problem, {}).setdefault(arm, []).append(run)
                console.print(
                    f"{problem:>13} {arm:>20} seed {seed:>2}: best {min(run['y']):.5g} "
                    f"({time.perf_counter() - tick:.1f} s)",
                    highlight=False,
                )
    return results


def summarise(results: dict) -> dict:
    summary = {}
    for problem, by_arm in results.items():
        optimum = get(problem).optimum
        if not math.isfinite(optimum):  # unknown: the best any run found
            optimum = min(min(r["y"]) for runs in by_arm.values() for r in runs)
        arms = list(by_arm)
        final = np.array([[min(r["y"]) - optimum for r in by_arm[a]] for a in arms])
        seeds = min(len(v) for v in final)
        ranks = np.array([rankdata(final[:, s]) for s in range(seeds)])  # (seeds, arms)
        summary[problem] = {
            arm: {
                "median": float(np.median(final[i])),
                "q25": float(np.quantile(final[i], 0.25)),
                "q75": float(np.quantile(final[i], 0.75)),
                "mean_rank": float(ranks[:, i].mean()),
                "propose_seconds": float(
                    np.median([s for r in by_arm[arm] for s in r["propose_seconds"]] or [np.nan])
                ),
                "seeds": len(final[i]),
            }
            for i, arm in enumerate(arms)
        }
    return summary


def table(summary: dict) -> Table:
    arms = list(next(iter(summary.values())))
    t = Table(title="final regret: median \\[q25, q75] (mean rank); lowest median in bold")
    t.add_column("problem")
    for arm in arms:
        t.add_column(arm, justify="right")
    for problem, by_arm in summary.items():
        best = min(by_arm[a]["median"] for a in arms)
        cells = []
        for a in arms:
            s = by_arm[a]
            cell = f"{s['median']:.3g} [{s['q25']:.3g}, {s['q75']:.3g}] ({s['mean_rank']:.2f})"
            cells.append(f"[bold]{cell}[/bold]" if s["median"] == best else cell)
        t.add_row(problem, *cells)
    ranks = {a: np.mean([summary[p][a]["mean_rank"] for p in summary]) for a in arms}
    t.add_row("mean rank", *(f"{ranks[a]:.2f}" for a in arms))
    seconds = {a: np.median([summary[p][a]["propose_seconds"] for p in summary]) for a in arms}
    t.add_row("s / proposal", *(f"{seconds[a]:.3f}" for a in arms))
    return t


def speed(console: Console, n: int = 100, asks: int = 5) -> dict:
    """Seconds per steady ``ask`` at d = 10 (Ackley-5c5) with ``n`` observations."""
    from bojax.compilation import count_compilations

    problem = MIXED_PROBLEMS["ackley-5c5"]
    space = problem.space
    state = bojax.init(space, bojax.Settings(initial=n, seed=0))
    u = space.sample(jax.random.key(0), n, "sobol")
    for row in u:
        state = bojax.tell(state, row, problem(space.from_unit(row)))
    times = []
    for k in range(asks + 1):
        with count_compilations() as counts:
            tick = time.perf_counter()
            point, state, _ = bojax.ask(state)
            times.append(time.perf_counter() - tick)
        compiled = counts.total
        state = bojax.tell(state, point, problem(space.from_unit(point)))
        console.print(
            f"ask {k} at n = {n + k}: {times[-1]:.3f} s, {compiled} compilations"
            + (" (first: compiles)" if k == 0 else ""),
            highlight=False,
        )
    steady = float(np.median(times[1:]))
    console.print(f"steady ask, d = 10 (5 categorical), n = {n}: {steady:.3f} s (median)")
    return {"n": n, "steady_seconds": steady, "seconds": times}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 seeds, 25 evaluations")
    parser.add_argument("--seeds", type=int, help="seeds (default 20; quick 3)")
    parser.add_argument("--evaluations", type=int, help="evaluations per run (default 40)")
    parser.add_argument("--initial", type=int, default=10, help="random points first")
    parser.add_argument("--training-seeds", type=int, default=10, help="seeds of the training task")
    parser.add_argument("--problems", nargs="+", default=PROBLEMS, choices=PROBLEMS)
    parser.add_argument("--arms", nargs="+", default=ARMS, choices=ARMS)
    parser.add_argument("--speed", action="store_true", help="time a steady ask only")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    console = Console()
    if args.speed:
        return speed(console)
    seeds = args.seeds or (3 if args.quick else 20)
    evaluations = args.evaluations or (25 if args.quick else 40)
    arms = []
    for arm in args.arms:
        if arm.startswith("bojax") or PEERS.get(arm).available():
            arms.append(arm)
        else:
            console.print(f"[yellow]{arm} is not installed: skipped[/yellow]")
    runs = args.out / "mixed_runs"
    results = collect(
        args.problems, arms, seeds, evaluations, args.initial, runs, console, args.training_seeds
    )
    summary = summarise(results)
    console.print(table(summary))
    name = "mixed_quick.json" if args.quick else "mixed.json"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / name).write_text(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    from bojax.reports.peers import fixed_hash_seed

    fixed_hash_seed()  # SMAC3's runs follow Python's string hashes
    main()
