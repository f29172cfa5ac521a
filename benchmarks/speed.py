"""Time per BO iteration (surrogate fit + acquisition maximisation) against n and d.

For each dimension d (Branin for d = 2, Hartmann-6 for d = 6, Styblinski-Tang for
d = 12) and each number of observations n, every method is given the same n scrambled
Sobol points and asked for the next point; only ``ask`` is timed. Each method is timed
as a BO run meets it:

* ``first``: the first iteration of a fresh run at this n, compilation excluded (bojax
  burns in its chains here: Spearmint's burn-in of one slice chain for ``gp-slice``,
  128 steps of 16 elliptical slice chains for ``gp-ess``, NUTS window adaptation, 1000
  BNN sweeps);
* ``steady``: the median of ``--repeats`` later iterations (bojax continues its chains:
  2 steps of each of 16 chains, NUTS with 64 warm-up steps, 100 BNN sweeps; the peers
  refit from scratch, which is how their loops run);
* ``compile``: bojax's compilation for this data bucket, the first call's time minus
  the same call repeated on a fresh run, paid once per bucket per process.

Peers are timed when installed (see benchmarks/README.md); BoTorch's SAAS model is
fitted by NumPyro, whose NUTS compiles inside every fit, so its compilation is part of
its per-iteration time. Writes ``speed.json`` and ``speed.png`` (log-log time against
n) into ``--out`` and prints a table with ratios to bojax ``gp-slice``.

    uv run --group bench python benchmarks/speed.py [--quick] [--methods ...]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import methods  # noqa: E402

from bojax.compilation import count_compilations  # noqa: E402
from bojax.objectives.problems import get_problem  # noqa: E402
from bojax.reports.figures import pyplot, save  # noqa: E402

ALL_METHODS = [
    "bojax gp-slice",
    "bojax gp-hmc",
    "bojax gp-map",
    "bojax bnn-hmc",
    "BoTorch SAAS",
    "BoTorch GP",
    "Optuna GP",
]
PROBLEMS = {2: "branin", 6: "hartmann6"}  # other d: Styblinski-Tang on [-5, 5]^d
FULL = {"sizes": [10, 30, 60, 120, 250], "dims": [2, 6, 12], "repeats": 3}
QUICK = {"sizes": [10, 30], "dims": [2, 6], "repeats": 1}


def problem_name(dim: int) -> str:
    return PROBLEMS.get(dim, "Styblinski-Tang")


def cholesky_microseconds(size: int = 128, repeats: int = 500) -> float:
    """Median microseconds of one jitted float64 Cholesky of a ``size`` x ``size`` matrix
    under bojax's BLAS setting: how fast this machine's LAPACK is, to read the absolute
    times against (the GP fits are thousands of these)."""
    import jax.numpy as jnp

    from bojax.threads import blas_threads

    factor = jax.jit(jnp.linalg.cholesky)
    matrix = jnp.eye(size) + 0.5
    factor(matrix).block_until_ready()
    with blas_threads():
        times = []
        for _ in range(repeats):
            tick = time.perf_counter()
            factor(matrix).block_until_ready()
            times.append(time.perf_counter() - tick)
    return 1e6 * float(np.median(times))


def observations(dim: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    u = methods.sobol_design(dim, n, seed)
    if dim not in PROBLEMS:
        x = 10.0 * u - 5.0
        return u, 0.5 * np.sum(x**4 - 16 * x**2 + 5 * x, axis=1)
    problem = get_problem(PROBLEMS[dim])
    return u, np.array([problem(p) for p in problem.space.from_unit(u)])


def fresh(name: str, u: np.ndarray, y: np.ndarray, seed: int):
    arm = methods.make(name, u.shape[1], seed, initial=len(y))
    for point, value in zip(u, y, strict=True):
        arm.tell(point, value)
    return arm


def timed_ask(arm) -> float:
    tick = time.perf_counter()
    arm.ask()
    return time.perf_counter() - tick


def time_method(name: str, u: np.ndarray, y: np.ndarray, repeats: int) -> dict:
    """First, steady and (bojax) compile seconds of one method at one (n, d)."""
    bojax_arm = name in methods.BOJAX_ARMS
    # A throwaway run pays the compilations: of the first (burn-in) fit, then of the later fits.
    with count_compilations() as compiling:
        warm = fresh(name, u, y, seed=0)
        warm_first, warm_later = timed_ask(warm), timed_ask(warm)
    compilations = compiling.total
    arm = fresh(name, u, y, seed=1)
    first = timed_ask(arm)
    with count_compilations() as compiling:
        steady = [
            timed_ask(arm if bojax_arm else fresh(name, u, y, seed=2 + i)) for i in range(repeats)
        ]
    median = float(np.median(steady))
    return {
        "first": first,
        "steady": median,
        "steady_all": steady,
        "compile": max(warm_first - first, 0.0) + max(warm_later - median, 0.0)
        if bojax_arm
        else None,
        "compilations": compilations if bojax_arm else None,
        "steady_compilations": compiling.total if bojax_arm else None,
    }


def run(cfg: dict, names: list[str], console: Console, save, kept: list[dict]) -> list[dict]:
    """Time every (d, n, method) not in ``kept`` (rows of an earlier run with the same
    repeats), calling ``save(rows)`` after each, so a stopped run keeps what it measured
    and a rerun continues."""
    done = {
        (r["method"], r["d"], r["n"]): r for r in kept if len(r["steady_all"]) == cfg["repeats"]
    }
    grid = {(name, dim, n) for name in names for dim in cfg["dims"] for n in cfg["sizes"]}
    rows = [r for key, r in done.items() if key not in grid]  # kept, outside this grid
    for dim in cfg["dims"]:
        for n in cfg["sizes"]:
            u, y = observations(dim, n)
            for name in names:
                if (name, dim, n) in done:
                    rows.append(done[(name, dim, n)])
                    continue
                result = time_method(name, u, y, cfg["repeats"])
                rows.append({"method": name, "d": dim, "n": n, **result})
                save(rows)
                console.print(
                    f"  d={dim} n={n:<4} {name:<15} steady {result['steady']:8.3f} s"
                    f"   first {result['first']:8.3f} s",
                    highlight=False,
                )
    return rows


def table(rows: list[dict]) -> Table:
    reference = {(r["d"], r["n"]): r["steady"] for r in rows if r["method"] == "bojax gp-slice"}
    out = Table(
        title="Seconds per BO iteration (fit + acquisition), median of steady iterations",
        caption="compiles: bojax compilations in the first two iterations, then in the steady ones",
    )
    columns = ("d", "n", "method", "steady s", "first s", "compile s", "compiles", "vs gp-slice")
    for column in columns:
        out.add_column(column, justify="left" if column == "method" else "right")
    order = [*methods.BOJAX_ARMS, *methods.PEERS]
    rows = sorted(rows, key=lambda r: (r["d"], r["n"], order.index(r["method"])))
    for r in rows:
        ratio = r["steady"] / reference[(r["d"], r["n"])] if (r["d"], r["n"]) in reference else None
        out.add_row(
            str(r["d"]),
            str(r["n"]),
            r["method"],
            f"{r['steady']:.3f}",
            f"{r['first']:.3f}",
            "-" if r["compile"] is None else f"{r['compile']:.2f}",
            "-"
            if r["compilations"] is None
            else f"{r['compilations']} then {r['steady_compilations']}",
            "-" if ratio is None else f"{ratio:.1f}x",
        )
    return out


def plot(rows: list[dict], path: Path) -> None:
    plt = pyplot()
    dims = sorted({r["d"] for r in rows})
    fig, axes = plt.subplots(1, len(dims), figsize=(5.2 * len(dims), 4.2), squeeze=False)
    names = list(dict.fromkeys(r["method"] for r in rows))
    for ax, dim in zip(axes[0], dims, strict=True):
        for k, name in enumerate(names):
            mine = sorted(
                (r for r in rows if r["d"] == dim and r["method"] == name), key=lambda r: r["n"]
            )
            n = [r["n"] for r in mine]
            ax.loglog(n, [r["steady"] for r in mine], "o-", color=f"C{k}", label=name)
            if mine and mine[0]["compile"] is not None:
                ax.loglog(
                    n, [max(r["compile"], 1e-3) for r in mine], "x:", color=f"C{k}", alpha=0.6
                )
        ax.set_title(f"d = {dim} ({problem_name(dim)})")
        ax.set_xlabel("observations n")
        ax.set_ylabel("seconds per iteration")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(
        "Steady time per BO iteration (solid); bojax compilation per data bucket (dotted)",
        fontsize=9,
    )
    save(fig, path, dpi=120)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="n in {10, 30}, one repeat")
    parser.add_argument("--methods", nargs="+", default=ALL_METHODS, metavar="NAME")
    parser.add_argument("--sizes", nargs="+", type=int, help="override the n values")
    parser.add_argument("--dims", nargs="+", type=int, help="override the d values")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--fresh", action="store_true", help="re-time rows already kept")
    args = parser.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    cfg.update({k: v for k in ("sizes", "dims", "repeats") if (v := getattr(args, k)) is not None})
    console = Console()
    names = methods.select(args.methods, parser.error, console)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / ("speed_quick.json" if args.quick else "speed.json")
    machine = {**methods.machine(), "cholesky_128_us": cholesky_microseconds()}
    console.print(f"this machine: a 128 x 128 Cholesky takes {machine['cholesky_128_us']:.0f} us")
    header = {"date": date.today().isoformat(), "machine": machine, "config": cfg}
    kept = [] if args.fresh or not path.exists() else json.loads(path.read_text())["rows"]

    def save(rows: list[dict]) -> None:
        path.write_text(json.dumps({**header, "rows": rows}, indent=1))

    rows = run(cfg, names, console, save, kept)
    console.print(table(rows))
    plot(rows, path.with_suffix(".png"))
    console.print(f"wrote {path} and {path.with_suffix('.png').name}")
    return rows


if __name__ == "__main__":
    main()
