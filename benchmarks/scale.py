"""Thousands of evaluations: seconds and memory per ask as n grows, and regret with large
budgets proposed in batches, bojax and its peers side by side in one run.

``--speed``: a steady ``ask`` of bojax's defaults at n in {100, 300, 1000, 3000, 10000}
observations (Ackley, uniform random points) and d in {6, 20}, each size in a fresh
process: the median of four asks after the first, the compilations of those asks (0
when nothing recompiles) and the process's peak resident memory. ``--exact`` adds the
same with ``exact_limit=None`` (every observation in one exact GP) up to n = 1000.

Regret (the default): Hartmann-6 (500 evaluations), Ackley-10 and Ackley-20 on
``[-5, 10]^d`` (1000) and Rosenbrock-10 on ``[-5, 10]^d`` (1000), proposed in batches of
16 after a shared scrambled Sobol design of ``16 ceil(2d / 16)`` points. Arms:

* ``bojax``: ``ask_batch`` with the defaults (exact fully Bayesian GP up to 300
  successes, then local GPs in a trust region, :mod:`bojax.bo.trust`);
* ``bojax-exact``: the same with ``exact_limit=None`` (Hartmann-6 only: its cost grows
  as n^3);
* ``turbo``: TuRBO-1 (Eriksson et al. 2019) as BoTorch's tutorial builds it: a
  ``SingleTaskGP`` (Matern-5/2 ARD, fitted by marginal likelihood) on the current
  trust region's data, Thompson sampling over candidates that perturb the centre in
  ``min(1, 20/d)`` of the coordinates, counters per batch, and a fresh Sobol design when
  the region collapses;
* ``optuna-gp``: Optuna's GPSampler, asked 16 trials at a time (at most 500 evaluations,
  the scale Optuna documents for it: its regret is reported at its last evaluation);
* ``tpe``: Optuna's TPE with ``constant_liar`` (Optuna's way to run it in parallel);
* ``random``: uniform points.

Printed: median final regret with quartiles and the mean rank over seeds, the median
seconds per batch and each arm's evaluations; the regret curves go to ``scale.png``.
Each (problem, arm, seed) run is kept in ``<out>/scale_runs/`` and reused; seeds run
seed-major, so a stopped benchmark has every arm at equal seeds.

    uv run --group bench python benchmarks/scale.py [--quick] [--seeds N] [--problems ...]
    uv run python benchmarks/scale.py --speed [--exact] [--float32]

On an accelerator the table adds the device's own peak memory (its allocator's
``peak_bytes_in_use``; run with ``XLA_PYTHON_CLIENT_PREALLOCATE=false``) and names the
device; the results go to ``scale_speed_<backend>[_float32].json``.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from scipy.stats import qmc, rankdata  # noqa: E402

import bojax  # noqa: E402
from bojax.objectives.problems import hartmann6  # noqa: E402

Q = 16


def ackley(x: np.ndarray) -> float:
    d = x.shape[-1]
    return float(
        -20 * np.exp(-0.2 * np.sqrt(np.sum(x**2) / d))
        - np.exp(np.sum(np.cos(2 * np.pi * x)) / d)
        + 20
        + np.e
    )


def rosenbrock(x: np.ndarray) -> float:
    return float(np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2))


# name: (function of the problem's own x, d, low, high, optimum value, budget)
PROBLEMS = {
    "hartmann6": (
        lambda x: float(hartmann6({f"x{i + 1}": v for i, v in enumerate(x)})),
        6,
        0.0,
        1.0,
        -3.32237,
        500,
    ),
    "ackley10": (ackley, 10, -5.0, 10.0, 0.0, 1000),
    "ackley20": (ackley, 20, -5.0, 10.0, 0.0, 1000),
    "rosenbrock10": (rosenbrock, 10, -5.0, 10.0, 0.0, 1000),
}
ARMS = ["bojax", "bojax-exact", "turbo", "optuna-gp", "tpe", "random"]
OPTUNA_GP_LIMIT = 500


def objective(problem: str):
    f, _, low, high, *_ = PROBLEMS[problem]
    return lambda u: f(low + (high - low) * np.asarray(u, dtype=np.float64))


def initial_design(d: int, seed: int) -> np.ndarray:
    count = Q * math.ceil(2 * d / Q)
    return qmc.Sobol(d, scramble=True, rng=np.random.default_rng(10_000 + seed)).random(count)


# -- arms: tell(U, Y) the shared design and each batch, ask(q) -> (q, d) unit points -----
class Bojax:
    def __init__(self, d: int, seed: int, initial: int, **settings):
        space = bojax.Space([bojax.Real(f"x{i}", 0.0, 1.0) for i in range(d)])
        self.state = bojax.init(space, initial=initial, seed=seed, **settings)

    def tell(self, u: np.ndarray, y: np.ndarray) -> None:
        for row, value in zip(u, y, strict=True):
            self.state = bojax.tell(self.state, row, float(value))

    def ask(self, q: int) -> np.ndarray:
        points, self.state, _ = bojax.ask_batch(self.state, q)
        return points


class Random:
    def __init__(self, d: int, seed: int, initial: int):
        self.d, self.rng = d, np.random.default_rng(seed)

    def tell(self, u, y) -> None:
        pass

    def ask(self, q: int) -> np.ndarray:
        return self.rng.uniform(size=(q, self.d))


class Optuna:
    def __init__(self, d: int, seed: int, initial: int, sampler: str):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        if sampler == "tpe":
            made = optuna.samplers.TPESampler(
                seed=seed, n_startup_trials=initial, constant_liar=True
            )
        else:
            made = optuna.samplers.GPSampler(seed=seed, n_startup_trials=initial)
        self.optuna, self.d = optuna, d
        self.study = optuna.create_study(sampler=made)
        self.space = {f"x{i}": optuna.distributions.FloatDistribution(0.0, 1.0) for i in range(d)}
        self.trials: list = []

    def tell(self, u, y) -> None:
        if not self.trials:  # the shared design: finished trials
            for row, value in zip(u, y, strict=True):
                params = {f"x{i}": float(v) for i, v in enumerate(row)}
                trial = self.optuna.trial.create_trial(
                    params=params, distributions=self.space, value=float(value)
                )
                self.study.add_trial(trial)
            return
        for trial, value in zip(self.trials, y, strict=True):
            self.study.tell(trial, float(value))
        self.trials = []

    def ask(self, q: int) -> np.ndarray:
        self.trials = [self.study.ask(self.space) for _ in range(q)]
        return np.array([[t.params[f"x{i}"] for i in range(self.d)] for t in self.trials])


class Turbo:
    """TuRBO-1 (Eriksson et al. 2019) after BoTorch's tutorial, restarting from a fresh
    Sobol design of ``2d`` points when the trust region collapses; maximises ``-y``."""

    LENGTH, LENGTH_MIN, LENGTH_MAX, SUCCESSES = 0.8, 0.5**7, 1.6, 10

    def __init__(self, d: int, seed: int, initial: int):
        import torch

        self.torch, self.d, self.seed, self.restarts = torch, d, seed, 0
        self.failure_tolerance = math.ceil(max(4.0 / Q, d / Q))
        self.x = np.zeros((0, d))
        self.y = np.zeros(0)
        self.queue: list[np.ndarray] = []  # a restart's design, handed out first
        self.designing = False  # whether the last batch came from that design
        self.failed_fits = 0  # fits BoTorch gave up on (the model then keeps its last state)
        self._reset()

    def _reset(self) -> None:
        self.length, self.wins, self.losses, self.best = self.LENGTH, 0, 0, -math.inf

    def tell(self, u, y) -> None:
        values = -np.asarray(y, dtype=np.float64)
        if len(self.x) and not self.designing:  # a batch of the region, not a design
            if values.max() > self.best + 1e-3 * abs(self.best):
                self.wins, self.losses = self.wins + 1, 0
            else:
                self.wins, self.losses = 0, self.losses + 1
            if self.wins == self.SUCCESSES:
                self.length, self.wins = min(2.0 * self.length, self.LENGTH_MAX), 0
            elif self.losses == self.failure_tolerance:
                self.length, self.losses = self.length / 2.0, 0
        self.best = max(self.best, values.max())
        self.x, self.y = np.concatenate([self.x, u]), np.concatenate([self.y, values])
        if self.length < self.LENGTH_MIN:  # restart: a new region from a new design
            self.restarts += 1
            self.x, self.y = np.zeros((0, self.d)), np.zeros(0)
            self._reset()
            design = qmc.Sobol(self.d, scramble=True, rng=self.seed * 1000 + self.restarts)
            self.queue = list(design.random(2 * self.d))

    def ask(self, q: int) -> np.ndarray:
        if self.queue:
            batch, self.queue = self.queue[:q], self.queue[q:]
            self.designing = True
            return np.array(batch)
        self.designing = False
        torch = self.torch
        from botorch.exceptions import ModelFittingError
        from botorch.fit import fit_gpytorch_mll
        from botorch.generation import MaxPosteriorSampling
        from botorch.models import SingleTaskGP
        from gpytorch.constraints import Interval
        from gpytorch.kernels import MaternKernel, ScaleKernel
        from gpytorch.likelihoods import GaussianLikelihood
        from gpytorch.mlls import ExactMarginalLogLikelihood
        from torch.quasirandom import SobolEngine

        torch.manual_seed(self.seed * 100_003 + len(self.y) + 7919 * self.restarts)
        x = torch.tensor(self.x)
        y = torch.tensor((self.y - self.y.mean()) / (self.y.std() or 1.0)).unsqueeze(-1)
        kernel = ScaleKernel(
            MaternKernel(nu=2.5, ard_num_dims=self.d, lengthscale_constraint=Interval(0.005, 4.0))
        )
        likelihood = GaussianLikelihood(noise_constraint=Interval(1e-8, 1e-3))
        model = SingleTaskGP(x, y, covar_module=kernel, likelihood=likelihood)
        try:
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        except ModelFittingError:  # Rosenbrock's outputs: go on with the model as it is
            self.failed_fits += 1
        centre = x[int(np.argmax(self.y))]
        ell = model.covar_module.base_kernel.lengthscale.squeeze().detach()
        weights = ell / ell.mean()
        weights = weights / torch.prod(weights.pow(1.0 / self.d))
        lower = torch.clamp(centre - weights * self.length / 2.0, 0.0, 1.0)
        upper = torch.clamp(centre + weights * self.length / 2.0, 0.0, 1.0)
        count = min(5000, max(2000, 200 * self.d))
        sobol = SobolEngine(self.d, scramble=True, seed=int(torch.randint(10**6, (1,))))
        perturbed = lower + (upper - lower) * sobol.draw(count).to(dtype=x.dtype)
        mask = torch.rand(count, self.d) <= min(20.0 / self.d, 1.0)
        empty = torch.where(mask.sum(dim=1) == 0)[0]
        mask[empty, torch.randint(0, self.d, (len(empty),))] = True
        candidates = centre.expand(count, self.d).clone()
        candidates[mask] = perturbed[mask]
        with torch.no_grad():
            chosen = MaxPosteriorSampling(model=model, replacement=False)(candidates, q)
        return chosen.detach().numpy()


def make_arm(arm: str, d: int, seed: int, initial: int):
    if arm == "bojax":
        return Bojax(d, seed, initial, q=Q)
    if arm == "bojax-exact":
        return Bojax(d, seed, initial, q=Q, exact_limit=None)
    if arm == "turbo":
        return Turbo(d, seed, initial)
    if arm in ("optuna-gp", "tpe"):
        return Optuna(d, seed, initial, "tpe" if arm == "tpe" else "gp")
    return Random(d, seed, initial)


def budget_of(problem: str, arm: str, evaluations: int | None) -> int:
    budget = evaluations or PROBLEMS[problem][5]
    return min(budget, OPTUNA_GP_LIMIT) if arm == "optuna-gp" else budget


def run_one(problem: str, arm: str, seed: int, budget: int) -> dict:
    f, d = objective(problem), PROBLEMS[problem][1]
    design = initial_design(d, seed)
    optimiser = make_arm(arm, d, seed, len(design))
    ys = [f(u) for u in design]
    optimiser.tell(design, np.array(ys))
    seconds = []
    while len(ys) < budget:
        tick = time.perf_counter()
        batch = np.clip(optimiser.ask(min(Q, budget - len(ys))), 0.0, 1.0)
        seconds.append(time.perf_counter() - tick)
        values = np.array([f(u) for u in batch])
        optimiser.tell(batch, values)
        ys.extend(values.tolist())
    return {"y": ys, "batch_seconds": seconds}


def available(arm: str) -> bool:
    import importlib.util

    needs = {"turbo": ("botorch",), "optuna-gp": ("optuna", "torch"), "tpe": ("optuna",)}
    return all(importlib.util.find_spec(m) is not None for m in needs.get(arm, ()))


def collect(problems, arms, seeds, evaluations, runs: Path, console) -> dict:
    results: dict = {}
    for seed in range(seeds):  # seed-major: a stopped run has every arm at equal seeds
        for problem in problems:
            for arm in arms:
                if arm == "bojax-exact" and problem != "hartmann6" and evaluations is None:
                    continue
                budget = budget_of(problem, arm, evaluations)
                path = runs / problem / arm / f"seed{seed}.json"
                if path.exists():
                    run = json.loads(path.read_text())
                    if len(run["y"]) == budget:
                        results.setdefault(problem, {}).setdefault(arm, []).append(run)
                        continue
                tick = time.perf_counter()
                path.parent.mkdir(parents=True, exist_ok=True)
                # One process per run: each run compiles from scratch, as a user's first
                # would, and a run's memory is its own.
                command = [sys.executable, __file__, "--run-one", problem, arm, str(seed)]
                command += ["--budget", str(budget), "--to", str(path)]
                subprocess.run(command, check=True)
                run = json.loads(path.read_text())
                results.setdefault(problem, {}).setdefault(arm, []).append(run)
                optimum = PROBLEMS[problem][4]
                console.print(
                    f"{problem:>12} {arm:>11} seed {seed}: regret {min(run['y']) - optimum:.4g} "
                    f"after {budget} ({time.perf_counter() - tick:.0f} s)",
                    highlight=False,
                )
    return results


def summarise(results: dict) -> dict:
    summary = {}
    for problem, by_arm in results.items():
        optimum = PROBLEMS[problem][4]
        arms = list(by_arm)
        seeds = min(len(runs) for runs in by_arm.values())
        final = np.array([[min(r["y"]) - optimum for r in by_arm[a][:seeds]] for a in arms])
        ranks = np.array([rankdata(final[:, s]) for s in range(seeds)])
        summary[problem] = {
            arm: {
                "median": float(np.median(final[i])),
                "q25": float(np.quantile(final[i], 0.25)),
                "q75": float(np.quantile(final[i], 0.75)),
                "mean_rank": float(ranks[:, i].mean()),
                "batch_seconds": float(
                    np.median([s for r in by_arm[arm] for s in r["batch_seconds"]] or [np.nan])
                ),
                "evaluations": len(by_arm[arm][0]["y"]),
                "seeds": seeds,
                # regret after 300 evaluations (where bojax's exact phase ends)
                "median_at_300": float(
                    np.median([min(r["y"][:300]) - optimum for r in by_arm[arm][:seeds]])
                ),
            }
            for i, arm in enumerate(arms)
        }
    return summary


def table(summary: dict) -> Table:
    arms = list(dict.fromkeys(a for by_arm in summary.values() for a in by_arm))
    t = Table(title="final regret: median \\[q25, q75] (mean rank) {evaluations}; lowest in bold")
    t.add_column("problem")
    for arm in arms:
        t.add_column(arm, justify="right")
    for problem, by_arm in summary.items():
        best = min(s["median"] for s in by_arm.values())
        cells = []
        for a in arms:
            s = by_arm.get(a)
            if s is None:
                cells.append("-")
                continue
            cell = (
                f"{s['median']:.3g} [{s['q25']:.3g}, {s['q75']:.3g}] ({s['mean_rank']:.2f}) "
                f"{{{s['evaluations']}}}"
            )
            cells.append(f"[bold]{cell}[/bold]" if s["median"] == best else cell)
        t.add_row(f"{problem} ({next(iter(by_arm.values()))['seeds']} seeds)", *cells)
    seconds = {
        a: np.nanmedian([by[a]["batch_seconds"] for by in summary.values() if a in by])
        for a in arms
    }
    t.add_row("s / batch of 16", *(f"{seconds[a]:.2f}" for a in arms))
    return t


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.4), squeeze=False)
    for ax, (problem, by_arm) in zip(axes[0], results.items(), strict=True):
        optimum = PROBLEMS[problem][4]
        for arm, runs in by_arm.items():
            curves = np.array([np.minimum.accumulate(r["y"]) - optimum for r in runs])
            ax.plot(np.arange(1, curves.shape[1] + 1), np.median(curves, axis=0), label=arm)
        ax.set_yscale("log")
        ax.set_title(problem)
        ax.set_xlabel("evaluations")
    axes[0][0].set_ylabel("median regret")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -- speed: one size per process, for its peak memory ------------------------------------
def speed_one(d: int, n: int, exact: bool, float32: bool = False) -> dict:
    from bojax.compilation import count_compilations

    if float32:  # before any array exists; the module turned float64 on
        jax.config.update("jax_enable_x64", False)
    settings = {"exact_limit": None} if exact else {}
    space = bojax.Space([bojax.Real(f"x{i}", 0.0, 1.0) for i in range(d)])
    state = bojax.init(space, initial=5, seed=0, **settings)
    u = np.random.default_rng(0).uniform(size=(n, d))

    def f(x):
        return ackley(-5.0 + 15.0 * np.asarray(x))

    state = state._replace(u=u, y=np.array([f(row) for row in u]))
    times, compiled = [], 0
    for k in range(5):
        with count_compilations() as counts:
            tick = time.perf_counter()
            point, state, _ = bojax.ask(state)
            times.append(time.perf_counter() - tick)
        compiled += counts.total if k else 0
        state = bojax.tell(state, point, f(point))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    device = jax.devices()[0]
    stats = device.memory_stats() or {}  # None on CPU; an accelerator's own allocator
    return {"d": d, "n": n, "exact": exact, "float32": float32, "first": times[0],
            "steady": float(np.median(times[1:])), "steady_compilations": compiled,
            "peak_mib": peak, "device": device.device_kind,
            "device_peak_mib": stats.get("peak_bytes_in_use", 0) / 2**20 or None}  # fmt: skip


def speed(console: Console, exact: bool, sizes, dims, float32: bool = False) -> list[dict]:
    rows = []
    kind = jax.devices()[0].device_kind
    precision = "float32" if float32 else "float64"
    t = Table(title=f"bojax ask at n observations (Ackley, {kind}, {precision}): "
                    "steady = median of 4 asks")  # fmt: skip
    columns = ("d", "n", "model", "first ask s", "steady s", "steady compiles", "peak MiB")
    for column in columns + (("device peak MiB",) if jax.default_backend() != "cpu" else ()):
        t.add_column(column, justify="right")
    for d in dims:
        for n in sizes:
            for whole in (False, True) if exact else (False,):
                if whole and n > 1000:
                    continue
                command = [sys.executable, __file__, "--speed-one", str(d), str(n)]
                command += ["--exact"] if whole else []
                command += ["--float32"] if float32 else []
                done = subprocess.run(command, capture_output=True, text=True, check=True)
                row = json.loads(done.stdout.strip().splitlines()[-1])
                rows.append(row)
                # the first ask sees n points, the steady ones n + 1 .. n + 4
                model = "exact" if whole or n + 4 <= 300 else "local" if n >= 300 else "both"
                model = "exact, then local" if model == "both" or n == 300 else model
                cells = [str(d), str(n), model, f"{row['first']:.2f}", f"{row['steady']:.3f}",
                         str(row["steady_compilations"]), f"{row['peak_mib']:.0f}"]  # fmt: skip
                if row["device_peak_mib"]:
                    cells.append(f"{row['device_peak_mib']:.0f}")
                t.add_row(*cells)
                console.print(row, highlight=False)
    console.print(t)
    return rows


def main(argv: list[str] | None = None) -> dict | list:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 seeds, 120 evaluations")
    parser.add_argument("--seeds", type=int, help="seeds (default 5; quick 2)")
    parser.add_argument("--evaluations", type=int, help="budget of every problem")
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    parser.add_argument("--arms", nargs="+", default=ARMS, choices=ARMS)
    parser.add_argument("--speed", action="store_true", help="seconds and memory against n")
    parser.add_argument("--exact", action="store_true", help="with --speed: exact GPs too")
    parser.add_argument("--float32", action="store_true", help="with --speed: single precision")
    parser.add_argument("--sizes", nargs="+", type=int, default=[100, 300, 1000, 3000, 10000])
    parser.add_argument("--dims", nargs="+", type=int, default=[6, 20])
    parser.add_argument("--speed-one", nargs=2, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--run-one", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--to", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    console = Console(width=220)
    if args.run_one:
        problem, arm, seed = args.run_one
        args.to.write_text(json.dumps(run_one(problem, arm, int(seed), args.budget)))
        return []
    if args.speed_one:
        print(json.dumps(speed_one(*args.speed_one, args.exact, args.float32)))
        return []
    if args.speed:
        rows = speed(console, args.exact, args.sizes, args.dims, args.float32)
        args.out.mkdir(parents=True, exist_ok=True)
        backend = "" if jax.default_backend() == "cpu" else f"_{jax.default_backend()}"
        name = f"scale_speed{backend}{'_float32' if args.float32 else ''}.json"
        (args.out / name).write_text(json.dumps(rows, indent=1))
        return rows
    seeds = args.seeds or (2 if args.quick else 5)
    evaluations = args.evaluations or (120 if args.quick else None)
    arms = []
    for arm in args.arms:
        if available(arm):
            arms.append(arm)
        else:
            console.print(f"[yellow]{arm} is not installed: skipped[/yellow]")
    runs = args.out / ("scale_runs_quick" if args.quick else "scale_runs")
    results = collect(args.problems, arms, seeds, evaluations, runs, console)
    summary = summarise(results)
    console.print(table(summary))
    name = "scale_quick" if args.quick else "scale"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(summary, indent=1))
    plot(results, args.out / f"{name}.png")
    return summary


if __name__ == "__main__":
    main()
