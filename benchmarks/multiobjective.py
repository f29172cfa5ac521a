"""Several objectives: hypervolume of bojax's noisy and exact LogEHVI and ParEGO against
their peers, side by side in one run.

Problems (``bojax.objectives.multiobjective``): Branin-Currin (d = 2), ZDT1-3 (d = 4),
DTLZ2 with three objectives (d = 6), Branin-Currin under a disc constraint, and one real
trade-off, ``mnist1d-size``: the validation error of MLPs on MNIST-1D (bojax's own
vmapped trainer, ``bojax.objectives.mixednet``, a mixed space of seven choices) against
their parameter count. Arms: bojax ``log_nehvi`` (the default), ``log_ehvi`` and
``parego`` (all on ``gp-slice``, the default surrogate), Optuna's GPSampler
(multi-objective LogEHVI with point-estimated hyperparameters), Optuna TPE, Optuna
NSGA-II (population = the initial design), BoTorch
``qLogNoisyExpectedHypervolumeImprovement`` on a ``ModelListGP`` of ``SingleTaskGP``s
(continuous problems only; torch and botorch installed beside the lock, see README) and
random search. Each arm draws ``initial`` points of its own (2(d + 1)) and has
``evaluations`` in all (30; 20 more for DTLZ2; 10 seeds, 3 with ``--quick``).

The score is the hypervolume of the feasible evaluations against the problem's reference
point, after each evaluation; printed: median final hypervolume with quartiles (mean rank
over seeds, higher is better) and the median seconds an arm spent proposing a point after
its initial design.

``--speed`` times a steady bojax ``ask`` (the default acquisition) with two objectives at
d = 6, n = 100 (ZDT1), and counts the compilations of the later asks; ``--speed 3`` with
three (DTLZ2); ``--observations 500 2000`` at other sizes (past ``--exact-limit``, 300 as
bojax's default, local models; ``none`` keeps them exact).

Each (problem, arm, seed) run is kept in ``<out>/multiobjective_runs/`` and reused. The
table and ``multiobjective.json`` also hold every arm not asked for whose kept runs cover
the seeds, and the file keeps the problems this run left out: running one arm or one
problem adds to the summary instead of replacing it.

    uv run --group bench python benchmarks/multiobjective.py [--quick] [--problems ...] [--arms ...]
    uv run python benchmarks/multiobjective.py --speed [3] [--observations N ...]
                                               [--exact-limit N|none]
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
from bojax.bo import pareto  # noqa: E402
from bojax.objectives.multiobjective import MULTI_PROBLEMS, MultiProblem  # noqa: E402
from bojax.parameters import Categorical, Integer, Ordinal  # noqa: E402

TRAINING = "mnist1d-size"
PROBLEMS = [*MULTI_PROBLEMS, TRAINING]
ARMS = [
    "bojax-ehvi",
    "bojax-nehvi",
    "bojax-parego",
    "optuna-gp",
    "tpe",
    "nsga2",
    "botorch",
    "random",
]


def _parameters(design: dict, inputs: int = 40, classes: int = 10) -> int:
    """Weights and biases of an MLP of ``layers`` x ``width``: its layer norm
    (:mod:`bojax.objectives.mixednet`) learns no scale or shift, so it adds none (it
    was charged ``2 width layers``, review BH)."""
    layers, width = int(design["layers"]), int(design["width"])
    count = inputs * width + width + (layers - 1) * (width * width + width)
    return count + width * classes + classes


@functools.cache
def get(problem: str) -> MultiProblem:
    if problem != TRAINING:
        return MULTI_PROBLEMS[problem]
    from bojax.objectives.mixednet import MixedNetObjective

    network = MixedNetObjective(seed=0)

    def error_and_size(point):
        return {"error": network(point), "params": float(_parameters(point))}

    return MultiProblem(
        TRAINING, network.space, error_and_size, {"error": "min", "params": "min"},
        (1.0, 150_000.0),
    )  # fmt: skip


def evaluations_for(problem: str, default: int) -> int:
    """DTLZ2's three objectives and six inputs get 20 evaluations more."""
    return default + 20 if problem == "dtlz2" else default


# -- arms: ask() -> point, tell(point, metrics or None) ----------------------------------
class BojaxArm:
    def __init__(self, problem: MultiProblem, seed: int, initial: int, acquisition: str):
        settings = bojax.Settings(initial=initial, seed=seed, acquisition=acquisition,
                                  **problem.settings())  # fmt: skip
        self.space, self.state, self.asked = (
            problem.space,
            bojax.init(problem.space, settings),
            None,
        )

    def ask(self):
        self.asked, self.state, _ = bojax.ask(self.state)
        return self.space.from_unit(self.asked)

    def tell(self, point, metrics):
        self.state = bojax.tell(self.state, self.asked, math.nan if metrics is None else metrics)


class OptunaArm:
    def __init__(self, problem: MultiProblem, seed: int, initial: int, sampler: str):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.problem, self.names = problem, list(problem.objectives)
        constraints = None
        if problem.constraints:  # Optuna: feasible where every value is <= 0
            constraints = lambda trial: trial.user_attrs["constraints"]  # noqa: E731
        made = {
            "gp": lambda: optuna.samplers.GPSampler(
                seed=seed, n_startup_trials=initial, constraints_func=constraints
            ),
            "tpe": lambda: optuna.samplers.TPESampler(
                seed=seed, n_startup_trials=initial, constraints_func=constraints
            ),
            "nsga2": lambda: optuna.samplers.NSGAIISampler(
                seed=seed, population_size=initial, constraints_func=constraints
            ),
        }[sampler]()
        directions = ["minimize" if d == "min" else "maximize" for d in problem.objectives.values()]
        self.study = optuna.create_study(sampler=made, directions=directions)
        self.trial = None

    def ask(self):
        self.trial = trial = self.study.ask()
        point = {}
        for p in self.problem.space.parameters:
            c = p.condition
            if c is not None and (c.parent not in point or not c.holds(point[c.parent])):
                continue
            if isinstance(p, Categorical | Ordinal):
                choices = list(p.choices if isinstance(p, Categorical) else p.values)
                point[p.name] = trial.suggest_categorical(p.name, choices)
            elif isinstance(p, Integer):
                point[p.name] = trial.suggest_int(p.name, p.low, p.high, log=p.log)
            else:
                point[p.name] = trial.suggest_float(p.name, p.low, p.high, log=p.log)
        return point

    def tell(self, point, metrics):
        import optuna

        if metrics is None:
            self.study.tell(self.trial, state=optuna.trial.TrialState.FAIL)
            return
        violations = []
        for name, (op, bound) in self.problem.constraints.items():
            violations.append(metrics[name] - bound if op == "<=" else bound - metrics[name])
        self.trial.set_user_attr("constraints", violations)
        self.study.tell(self.trial, [metrics[n] for n in self.names])


class BoTorchArm:
    """qLogNEHVI (Daulton et al. 2021; Ament et al. 2023) on independent SingleTaskGPs
    fitted by marginal likelihood, constraints as BoTorch's outcome constraints."""

    def __init__(self, problem: MultiProblem, seed: int, initial: int):
        import torch

        if any(isinstance(p, Categorical | Ordinal | Integer) for p in problem.space.parameters):
            raise ValueError("the BoTorch arm runs on continuous spaces only")
        torch.manual_seed(seed)
        self.torch, self.problem, self.initial = torch, problem, initial
        self.rng = np.random.default_rng(seed)
        self.x, self.y = [], []
        self.names = list(problem.objectives) + list(problem.constraints)

    def ask(self):
        space = self.problem.space
        if len(self.x) < self.initial:
            return space.from_unit(self.rng.uniform(size=space.dim))
        torch = self.torch
        from botorch.acquisition.multi_objective.logei import (
            qLogNoisyExpectedHypervolumeImprovement,
        )
        from botorch.fit import fit_gpytorch_mll
        from botorch.models import ModelListGP, SingleTaskGP
        from botorch.models.transforms import Standardize
        from botorch.optim import optimize_acqf
        from gpytorch.mlls import SumMarginalLogLikelihood

        ok = [i for i, y in enumerate(self.y) if y is not None]
        x = torch.tensor(np.array([self.x[i] for i in ok]), dtype=torch.float64)
        values = np.array([[self.y[i][n] for n in self.names] for i in ok])
        signs = [1.0 if d == "min" else -1.0 for d in self.problem.objectives.values()]
        count = len(signs)
        values[:, :count] *= -np.array(signs)  # BoTorch maximises
        y = torch.tensor(values, dtype=torch.float64)
        models = [SingleTaskGP(x, y[:, j : j + 1], outcome_transform=Standardize(1))
                  for j in range(y.shape[1])]  # fmt: skip
        model = ModelListGP(*models)
        fit_gpytorch_mll(SumMarginalLogLikelihood(model.likelihood, model))
        reference = -np.array(self.problem.reference_point) * np.array(signs)
        constraints = []
        for j, (op, bound) in enumerate(self.problem.constraints.values(), start=count):
            side = 1.0 if op == "<=" else -1.0  # feasible where the callable is <= 0
            constraints.append(lambda z, j=j, side=side, b=bound: side * (z[..., j] - b))
        objective = None
        if constraints:
            from botorch.acquisition.multi_objective.objective import (
                IdentityMCMultiOutputObjective,
            )

            objective = IdentityMCMultiOutputObjective(outcomes=list(range(count)))
        acquisition = qLogNoisyExpectedHypervolumeImprovement(
            model, ref_point=reference.tolist(), X_baseline=x, prune_baseline=True,
            objective=objective, constraints=constraints or None,
        )  # fmt: skip
        bounds = torch.tensor([[0.0] * x.shape[1], [1.0] * x.shape[1]], dtype=torch.float64)
        candidate, _ = optimize_acqf(acquisition, bounds, q=1, num_restarts=10, raw_samples=512)
        return self.problem.space.from_unit(candidate[0].numpy())

    def tell(self, point, metrics):
        self.x.append(self.problem.space.to_unit(point))
        self.y.append(metrics)


class RandomArm:
    def __init__(self, problem: MultiProblem, seed: int, **_):
        self.space, self.rng = problem.space, np.random.default_rng(seed)

    def ask(self):
        return self.space.from_unit(self.space.snap(self.rng.uniform(size=self.space.dim)))

    def tell(self, point, metrics):
        pass


def make_arm(arm: str, problem: MultiProblem, seed: int, initial: int):
    if arm.startswith("bojax"):
        acquisition = {"bojax-ehvi": "log_ehvi", "bojax-nehvi": "log_nehvi"}.get(arm, "parego")
        return BojaxArm(problem, seed, initial, acquisition)
    if arm in ("optuna-gp", "tpe", "nsga2"):
        return OptunaArm(problem, seed, initial, arm.removeprefix("optuna-"))
    if arm == "botorch":
        return BoTorchArm(problem, seed, initial)
    return RandomArm(problem, seed)


def available(arm: str) -> bool:
    import importlib.util

    needs = {"optuna-gp": ("optuna", "torch"), "tpe": ("optuna",), "nsga2": ("optuna",),
             "botorch": ("botorch", "torch")}.get(arm, ())  # fmt: skip
    return all(importlib.util.find_spec(m) is not None for m in needs)


def hypervolumes(problem: MultiProblem, metrics: list[dict | None]) -> list[float]:
    """The feasible hypervolume after each evaluation (objectives oriented to minimise)."""
    history = [
        {"iteration": i, "status": "ok" if m is not None else "failed", "y": m, "x": {}}
        for i, m in enumerate(metrics)
    ]
    settings = bojax.Settings(**problem.settings())
    return pareto.summary(settings.metrics, history, problem.reference_point)["hypervolume"]


def run_one(problem_name: str, arm: str, seed: int, evaluations: int, initial: int) -> dict:
    problem = get(problem_name)
    optimiser = make_arm(arm, problem, seed, initial)
    metrics, seconds = [], []
    for k in range(evaluations):
        tick = time.perf_counter()
        point = optimiser.ask()
        if k >= initial:
            seconds.append(time.perf_counter() - tick)
        try:
            value = problem(point)
        except Exception:  # a failed training: recorded as failed for every arm alike
            value = None
        optimiser.tell(point, value)
        metrics.append(value)
    return {"metrics": metrics, "hypervolume": hypervolumes(problem, metrics),
            "propose_seconds": seconds}  # fmt: skip


def collect(problems, arms, seeds, evaluations, runs: Path, console) -> dict:
    results: dict = {}
    for problem in problems:
        initial = 2 * (get(problem).space.dim + 1)
        budget = evaluations_for(problem, evaluations)
        for arm in arms:
            if arm == "botorch" and problem == TRAINING:
                continue  # a mixed space: the arm is for continuous ones
            for seed in range(seeds):
                path = runs / problem / arm / f"seed{seed}.json"
                if path.exists():
                    run = json.loads(path.read_text())
                    if len(run["metrics"]) == budget:
                        results.setdefault(problem, {}).setdefault(arm, []).append(run)
                        continue
                tick = time.perf_counter()
                run = run_one(problem, arm, seed, budget, initial)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(run))
                results.setdefault(problem, {}).setdefault(arm, []).append(run)
                console.print(
                    f"{problem:>15} {arm:>13} seed {seed:>2}: hypervolume "
                    f"{run['hypervolume'][-1]:.5g} ({time.perf_counter() - tick:.1f} s)",
                    highlight=False,
                )
    return results


def summarise(results: dict) -> dict:
    summary = {}
    for problem, by_arm in results.items():
        arms = list(by_arm)
        seeds = min(len(v) for v in by_arm.values())
        final = np.array([[r["hypervolume"][-1] for r in by_arm[a][:seeds]] for a in arms])
        ranks = np.array([rankdata(-final[:, s]) for s in range(seeds)])  # 1 = highest
        summary[problem] = {
            arm: {
                "median": float(np.median(final[i])),
                "q25": float(np.quantile(final[i], 0.25)),
                "q75": float(np.quantile(final[i], 0.75)),
                "mean_rank": float(ranks[:, i].mean()),
                "history_median": np.median(
                    [r["hypervolume"] for r in by_arm[arm][:seeds]], axis=0
                ).tolist(),
                "propose_seconds": float(
                    np.median([s for r in by_arm[arm] for s in r["propose_seconds"]] or [np.nan])
                ),
                "seeds": seeds,
            }
            for i, arm in enumerate(arms)
        }
    return summary


def table(summary: dict) -> Table:
    arms = list(dict.fromkeys(a for by_arm in summary.values() for a in by_arm))
    t = Table(title="final hypervolume: median \\[q25, q75] (mean rank); highest median in bold")
    t.add_column("problem")
    for arm in arms:
        t.add_column(arm, justify="right")
    for problem, by_arm in summary.items():
        best = max(s["median"] for s in by_arm.values())
        cells = []
        for a in arms:
            if a not in by_arm:
                cells.append("-")
                continue
            s = by_arm[a]
            cell = f"{s['median']:.4g} [{s['q25']:.4g}, {s['q75']:.4g}] ({s['mean_rank']:.2f})"
            cells.append(f"[bold]{cell}[/bold]" if s["median"] == best else cell)
        t.add_row(problem, *cells)
    seconds = {
        a: np.nanmedian([summary[p][a]["propose_seconds"] for p in summary if a in summary[p]])
        for a in arms
    }
    t.add_row("s / proposal", *(f"{seconds[a]:.3f}" for a in arms))
    return t


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problems = list(summary)
    columns = min(4, len(problems))
    rows = -(-len(problems) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4 * columns, 3.2 * rows), squeeze=False)
    for ax, problem in zip(axes.flat, problems, strict=False):
        for arm, s in summary[problem].items():
            # One colour per arm in every panel: the cycle's next colour gave the training
            # task's random search BoTorch's (it has no BoTorch arm).
            colour = f"C{ARMS.index(arm) % 10}" if arm in ARMS else None
            ax.plot(np.arange(1, len(s["history_median"]) + 1), s["history_median"], label=arm,
                    color=colour)  # fmt: skip
        ax.set_title(problem)
        ax.set_xlabel("evaluations")
        ax.set_ylabel("median hypervolume")
    for ax in list(axes.flat)[len(problems) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def speed(
    console: Console, n: int = 100, asks: int = 5, objectives: int = 2, exact_limit=300
) -> dict:
    """Seconds per steady ``ask`` with two objectives (ZDT1 at d = 6) or three (DTLZ2),
    ``n`` observations; past ``exact_limit`` (None: never) the asks fit local models."""
    from bojax.compilation import count_compilations
    from bojax.objectives.multiobjective import _dtlz2, _zdt

    d = 6
    if objectives == 2:
        fn = _zdt(lambda f, g: 1 - math.sqrt(f / g), d)
    else:
        fn = _dtlz2(d, objectives)
    space = bojax.Space([bojax.Real(f"x{i}", 0.0, 1.0) for i in range(d)])
    names = {f"f{i + 1}": "min" for i in range(objectives)}
    settings = bojax.Settings(initial=n, seed=0, objectives=names, exact_limit=exact_limit)
    state = bojax.init(space, settings)
    for row in space.sample(jax.random.key(0), n, "sobol"):
        state = bojax.tell(state, row, fn(space.from_unit(row)))
    times = []
    for k in range(asks + 1):
        with count_compilations() as counts:
            tick = time.perf_counter()
            point, state, _ = bojax.ask(state)
            times.append(time.perf_counter() - tick)
        state = bojax.tell(state, point, fn(space.from_unit(point)))
        console.print(
            f"ask {k} at n = {n + k}: {times[-1]:.3f} s, {counts.total} compilations"
            + (" (first: compiles)" if k == 0 else ""),
            highlight=False,
        )
    steady = float(np.median(times[1:]))
    mode = "exact" if exact_limit is None or n <= exact_limit else "local"
    console.print(
        f"steady ask, {objectives} objectives, d = {d}, n = {n} ({mode}): {steady:.3f} s (median)"
    )
    return {
        "n": n,
        "objectives": objectives,
        "mode": mode,
        "steady_seconds": steady,
        "seconds": times,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 seeds, 16 evaluations")
    parser.add_argument("--seeds", type=int, help="seeds (default 10; quick 3)")
    parser.add_argument("--evaluations", type=int, help="evaluations per run (default 30)")
    parser.add_argument("--problems", nargs="+", default=PROBLEMS, choices=PROBLEMS)
    parser.add_argument("--arms", nargs="+", default=ARMS, choices=ARMS)
    parser.add_argument(
        "--speed", type=int, nargs="?", const=2, choices=(2, 3), metavar="OBJECTIVES",
        help="time a steady ask only, with 2 (default) or 3 objectives",
    )  # fmt: skip
    parser.add_argument(
        "--observations", type=int, nargs="+", default=[100],
        help="--speed: evaluations told before the asks (several: one timing each)",
    )  # fmt: skip
    parser.add_argument(
        "--exact-limit", type=lambda t: None if t == "none" else int(t), default=300,
        help="--speed: the run's exact_limit ('none': exact at any size)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    console = Console()
    if args.speed:
        timings = [
            speed(console, n=n, objectives=args.speed, exact_limit=args.exact_limit)
            for n in args.observations
        ]
        return timings[0] if len(timings) == 1 else {"timings": timings}
    seeds = args.seeds or (3 if args.quick else 10)
    evaluations = args.evaluations or (16 if args.quick else 30)
    arms = []
    for arm in args.arms:
        if available(arm):
            arms.append(arm)
        else:
            console.print(f"[yellow]{arm} is not installed: skipped[/yellow]")
    name = "multiobjective_quick" if args.quick else "multiobjective"
    runs = args.out / f"{name}_runs"
    results = collect(args.problems, arms, seeds, evaluations, runs, console)
    add_kept_arms(results, runs, seeds, evaluations)
    summary = summarise(results)
    console.print(table(summary))
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{name}.json"
    kept = json.loads(path.read_text()) if path.exists() else {}
    merged = {**kept, **summary}  # problems this run did not touch keep their summary
    path.write_text(json.dumps(merged, indent=1))
    plot(merged, args.out / f"{name}.png")
    return summary


def add_kept_arms(results: dict, runs: Path, seeds: int, evaluations: int) -> None:
    """Add to ``results`` every other arm whose kept runs cover the same seeds, in
    :data:`ARMS` order, so running one arm adds it to the table instead of replacing it."""
    for problem, by_arm in results.items():
        budget = evaluations_for(problem, evaluations)
        for arm in ARMS:
            if arm in by_arm:
                continue
            paths = [runs / problem / arm / f"seed{seed}.json" for seed in range(seeds)]
            if not all(p.exists() for p in paths):
                continue
            kept = [json.loads(p.read_text()) for p in paths]
            if all(len(run["metrics"]) == budget for run in kept):
                by_arm[arm] = kept
        results[problem] = {arm: by_arm[arm] for arm in ARMS if arm in by_arm}


if __name__ == "__main__":
    main()
