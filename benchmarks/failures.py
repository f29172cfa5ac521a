"""Failure-aware BO: wasted evaluations and regret when whole regions of the space fail.

Two objectives raise ``RuntimeError("training diverged")`` in a region that covers 30-60 %
of the space and holds no optimum, as too high a learning rate does:

* ``branin-disc``: Branin on [-5, 10] x [0, 15], failing inside the disc of radius 5.3
  around (2.5, 9) (39 % of the box; the three minima lie 1.2, 1.5 and 4.2 outside it);
* ``hartmann6-halfspace``: Hartmann-6 on [0, 1]^6, failing where x1 + x2 > 1 (50 %; the
  minimum has x1 + x2 = 0.35).

Methods, side by side on the same seeds: ``bojax gp-probit`` (the default: a GP
classifier of success weights LogEI), ``bojax drop`` (``failure_model="none"``: failures
are journalled and dropped, bojax's behaviour before failure-aware BO, without its old
more-than-half stop), and Optuna's TPE with failed trials (``catch``). Wasted
evaluations are failures after the initial design; regret is the best successful value
minus the optimum. Each (problem, method, seed) run is kept in ``<out>/failure_runs/``
as it finishes and reused, so the benchmark resumes, and processes given different
``--problems`` can share the work. ``--surrogate`` and ``--acquisition`` run the bojax
arms with another surrogate (their runs are kept apart). Prints medians and ratios and
writes ``failures.json``.

    uv run python benchmarks/failures.py [--quick] [--problems ...] [--methods ...]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import jax

import bojax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import methods  # noqa: E402

from bojax.objectives.problems import get_problem  # noqa: E402
from bojax.reports import peers  # noqa: E402

METHODS = ["bojax gp-probit", "bojax drop", "Optuna TPE"]
TARGET, BASELINE = "bojax gp-probit", "bojax drop"


class Diverged(RuntimeError):
    pass


def _branin_disc(point):
    if math.hypot(point["x1"] - 2.5, point["x2"] - 9.0) < 5.3:
        raise Diverged("training diverged")
    return get_problem("branin")(point)


def _hartmann_halfspace(point):
    if point["x1"] + point["x2"] > 1.0:
        raise Diverged("training diverged")
    return get_problem("hartmann6")(point)


PROBLEMS = {
    # name: (objective, base problem, initial design, evaluations in all)
    "branin-disc": (_branin_disc, "branin", 5, 30),
    "hartmann6-halfspace": (_hartmann_halfspace, "hartmann6", 13, 40),
}


def run_bojax(problem: str, method: str, seed: int, surrogate: dict) -> list[dict]:
    objective, base, initial, total = PROBLEMS[problem]
    spec = get_problem(base)
    result = bojax.minimize(
        objective,
        spec.space,
        iterations=total - initial,
        initial=initial,
        seed=seed,
        failure_model="gp-probit" if method == "bojax gp-probit" else "none",
        progress=False,
        **surrogate,
    )
    return [{"y": r["y"], "failed": r["status"] != "ok"} for r in result.history]


def run_optuna(problem: str, method: str, seed: int, surrogate: dict) -> list[dict]:
    """Optuna's TPE (:mod:`bojax.reports.peers`); a diverged trial is a failed one."""
    objective, base, initial, total = PROBLEMS[problem]
    tpe = peers.PEERS["tpe"].make(get_problem(base).space, seed=seed, initial=initial)
    history = peers.run(tpe, objective, total, catch=(Diverged,))
    return [{"y": r["y"], "failed": r["status"] != "ok"} for r in history]


def run(problem: str, method: str, seed: int, folder: Path, surrogate: dict | None = None) -> dict:
    """One (problem, method, seed) run, read from ``folder`` if kept there. ``surrogate``
    (bojax arms: ``surrogate`` and ``acquisition`` names) keeps its runs apart."""
    surrogate = surrogate or {}
    tag = "".join(f"__{v}" for v in surrogate.values()) if "bojax" in method else ""
    path = folder / f"{problem}__{method.replace(' ', '_')}{tag}__{seed}.json"
    if path.exists():
        return json.loads(path.read_text())
    tick = time.perf_counter()
    runner = run_optuna if method == "Optuna TPE" else run_bojax
    history = runner(problem, method, seed, surrogate)
    _, base, initial, _ = PROBLEMS[problem]
    values = [h["y"] for h in history if not h["failed"]]
    record = {
        "problem": problem,
        "method": method,
        "seed": seed,
        "evaluations": len(history),
        "wasted": sum(h["failed"] for h in history[initial:]),
        "failures": sum(h["failed"] for h in history),
        "regret": (min(values) - get_problem(base).optimum) if values else None,
        "seconds": time.perf_counter() - tick,
    }
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return record


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 seeds instead of 20")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    parser.add_argument("--methods", nargs="+", default=METHODS)
    parser.add_argument("--surrogate", default=None, help="bojax arms' surrogate [gp-slice]")
    parser.add_argument("--acquisition", default=None, help="bojax arms' acquisition [log_ei]")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    console = Console()
    unknown = [m for m in args.methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown methods {unknown}; known: {METHODS}")
    names = [m for m in args.methods if m != "Optuna TPE" or methods.available(m)]
    if len(names) < len(args.methods):
        console.print("[yellow]Optuna is not installed: its arm is skipped[/yellow]")
    seeds = args.seeds or (3 if args.quick else 20)
    folder = args.out / "failure_runs"
    surrogate = {
        k: v for k, v in (("surrogate", args.surrogate), ("acquisition", args.acquisition)) if v
    }
    rows = {}
    for problem in args.problems:
        for method in names:
            records = []
            for seed in range(seeds):
                records.append(run(problem, method, seed, folder, surrogate))
                done = records[-1]
                console.print(
                    f"{problem} {method} seed {seed}: wasted {done['wasted']}, "
                    f"regret {done['regret']}, {done['seconds']:.1f} s",
                    highlight=False,
                )
            regrets = [r["regret"] if r["regret"] is not None else math.inf for r in records]
            rows[(problem, method)] = {
                "median_wasted": float(np.median([r["wasted"] for r in records])),
                "mean_wasted": float(np.mean([r["wasted"] for r in records])),
                "median_regret": float(np.median(regrets)),
                "seconds": float(np.mean([r["seconds"] for r in records])),
                "seeds": len(records),
            }
    arms = ", ".join(surrogate.values()) or "gp-slice, log_ei"
    table = Table(title=f"Failure regions, {seeds} seeds (medians over seeds); bojax: {arms}")
    for column in ("problem", "method", "wasted (median)", "wasted (mean)", "regret (median)"):
        table.add_column(column, justify="left" if column in ("problem", "method") else "right")
    table.add_column(f"wasted vs {BASELINE}", justify="right")
    table.add_column("s/run", justify="right")
    for (problem, method), row in rows.items():
        base = rows.get((problem, BASELINE))
        ratio = (
            f"{row['mean_wasted'] / base['mean_wasted']:.2f}x"
            if base and base["mean_wasted"] > 0
            else "-"
        )
        table.add_row(
            problem,
            method,
            f"{row['median_wasted']:.1f}",
            f"{row['mean_wasted']:.2f}",
            f"{row['median_regret']:.3g}",
            ratio,
            f"{row['seconds']:.1f}",
        )
    console.print(table)
    summary = {
        "seeds": seeds,
        "bojax": surrogate,
        "machine": methods.machine(),
        "rows": [{"problem": p, "method": m, **row} for (p, m), row in rows.items()],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    name = "failures" + "".join(f"_{v}" for v in surrogate.values())
    (args.out / (name + ("_quick" if args.quick else "") + ".json")).write_text(
        json.dumps(summary, indent=2)
    )
    return summary


if __name__ == "__main__":
    main()
