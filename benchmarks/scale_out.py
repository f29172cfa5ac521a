"""Scale-out: BO on 1 against 4 Dask workers, and ensemble designs per second batched.

``workers``: 16 evaluations (4 Sobol + 12 BO steps, gp-slice, integrated fantasies) of
an objective that sleeps 1 s and returns Branin, on a Dask ``LocalCluster`` of 1 worker,
then of 4 (each a fresh cluster), in one process. A throwaway run on a thread pool
compiles the surrogate's programs first (q = 1 and q = 4 shapes), so neither timed run
pays compilation. Ideal: 16 s against 4 s; the driver's fits and proposals come on top.

``designs``: the ensemble-design report's Experiment 1 objective (designs up to L = 5,
D = 15, N = 30; 1000-5000 Adadelta epochs) on q random designs, one ``evaluate`` call
after another against one ``evaluate_batch`` call (vmapped, sharded over the local
devices), after a compiling call of each. To shard over several CPU devices:

    XLA_FLAGS=--xla_force_host_platform_device_count=2 uv run python benchmarks/scale_out.py designs

    uv run python benchmarks/scale_out.py workers [--sleep 1.0]
    uv run python benchmarks/scale_out.py designs [--q 4 8] [--max-epochs 1000]

Results go to ``benchmarks/results/scale_out_workers.json`` and
``scale_out_designs_<backend>_<n>dev.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax
import numpy as np
from rich.console import Console
from rich.table import Table

jax.config.update("jax_enable_x64", True)

import bojax  # noqa: E402
from bojax.objectives import ensemble as E  # noqa: E402
from bojax.objectives.datasets import get_dataset  # noqa: E402
from bojax.objectives.problems import get_problem  # noqa: E402

RESULTS = Path(__file__).parent / "results"
BRANIN = get_problem("branin")


class Sleeping:
    """Branin after ``seconds`` of sleep: an expensive objective that leaves the CPU idle."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __call__(self, point):
        time.sleep(self.seconds)
        return BRANIN(point)


def run_bo(executor, q: int, seconds: float, seed: int = 0) -> tuple[float, float]:
    tick = time.perf_counter()
    result = bojax.minimize(
        Sleeping(seconds), BRANIN.space, iterations=12, initial=4, seed=seed,
        executor=executor, q=q, progress=False,
    )  # fmt: skip
    return time.perf_counter() - tick, result.best_value


def workers(sleep: float) -> list[dict]:
    with ThreadPoolExecutor(4) as pool:  # compile q = 1 and q = 4 programs, untimed
        run_bo(pool, 1, 0.0, seed=99)
        run_bo(pool, 4, 0.0, seed=99)
    rows = []
    for count in (1, 4):
        with bojax.bo.cluster.connect(workers=count) as client:
            client.submit(BRANIN, BRANIN.space.from_unit(np.full(2, 0.5))).result()  # warm
            seconds, best = run_bo(client, count, sleep)
        rows.append({"workers": count, "seconds": seconds, "best": best})
    table = Table(title=f"16 evaluations of a {sleep:g}-s objective (BO, gp-slice)")
    for column in ("workers", "wall s", "ideal s", "best value", "speed-up"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            str(row["workers"]),
            f"{row['seconds']:.1f}",
            f"{16 * sleep / row['workers']:.1f}",
            f"{row['best']:.4g}",
            f"{rows[0]['seconds'] / row['seconds']:.2f}x",
        )
    Console().print(table)
    return rows


def designs(qs: list[int], max_epochs: int) -> list[dict]:
    data = get_dataset("experiment1", 0)
    space = E.design_space(5, 15, 30)
    training = E.Training(min_epochs=min(1000, max_epochs), max_epochs=max_epochs)
    objective = E.EnsembleObjective(space, data.arrays, training, seed=0)
    rng = np.random.default_rng(0)
    rows = []
    devices = len(jax.local_devices())
    for q in qs:
        points = [space.from_unit(u) for u in rng.uniform(size=(q, 4))]
        objective(points[0]), objective.evaluate_batch(points)  # compile both
        tick = time.perf_counter()
        alone = [objective(p) for p in points]
        one_at_a_time = time.perf_counter() - tick
        tick = time.perf_counter()
        batched = objective.batch(points)
        batch = time.perf_counter() - tick
        gap = float(np.max(np.abs(np.subtract(alone, batched)) / np.abs(alone)))
        rows.append(
            {"q": q, "devices": devices, "one_at_a_time_s": one_at_a_time, "batch_s": batch,
             "max_relative_difference": gap}
        )  # fmt: skip
    table = Table(
        title=f"Ensemble designs per second ({jax.default_backend()}, {devices} device(s))"
    )
    for column in ("q", "one at a time", "batched", "speed-up", "max rel. diff"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            str(row["q"]),
            f"{row['q'] / row['one_at_a_time_s']:.2f}/s",
            f"{row['q'] / row['batch_s']:.2f}/s",
            f"{row['one_at_a_time_s'] / row['batch_s']:.2f}x",
            f"{row['max_relative_difference']:.1e}",
        )
    Console().print(table)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("part", choices=["workers", "designs"])
    parser.add_argument("--sleep", type=float, default=1.0)
    parser.add_argument("--q", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--max-epochs", type=int, default=5000)
    args = parser.parse_args()
    if args.part == "workers":
        rows = workers(args.sleep)
    else:
        rows = designs(args.q, args.max_epochs)
    RESULTS.mkdir(exist_ok=True)
    devices = f"_{jax.default_backend()}_{len(jax.local_devices())}dev"
    suffix = "" if args.part == "workers" else devices
    (RESULTS / f"scale_out_{args.part}{suffix}.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
