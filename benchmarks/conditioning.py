"""Conditioning on pending points: extending each GP's Cholesky factor by a block against
refactorising the joined data, side by side in one process.

For S hyperparameter draws (each GP already conditioned on n real observations) and P
pending points, both arms produce the S GPs conditioned on the real data plus the
pending points' outcomes, as integrated fantasies do for every proposal while
evaluations are in flight:

* ``refactorise``: the joined data padded to their bucket, every GP factorised again
  (bojax before engine v2);
* ``extend``: :func:`bojax.gp.extend`, one block ``O(n^2 P + P^3)`` per GP.

Times are medians of ``--repeats`` calls after one compiling call. Writes
``conditioning.json`` into ``--out``.

    uv run python benchmarks/conditioning.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import date
from functools import partial
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import speed  # noqa: E402

from bojax import gp  # noqa: E402

MODEL = gp.GP()


@partial(jax.jit, static_argnums=0)
def refactorise(model, params, joined):
    return jax.vmap(lambda p: gp.posterior(model, p, joined))(params)


@partial(jax.jit, static_argnums=0)
def extend(model, posteriors, new):
    return jax.vmap(lambda post: gp.extend(model, post, new))(posteriors)


def draws(dim: int, samples: int, seed: int = 0) -> dict:
    """S hyperparameter sets spread like a posterior's: length-scales 0.1 to 1."""
    rng = np.random.default_rng(seed)
    return {
        "kernel": {
            "amplitude": jnp.asarray(rng.uniform(0.5, 2.0, samples)),
            "lengthscales": jnp.asarray(rng.uniform(0.1, 1.0, (samples, dim))),
        },
        "mean": {"value": jnp.asarray(rng.normal(size=samples))},
        "noise": jnp.asarray(rng.uniform(1e-4, 1e-2, samples)),
    }


def median_seconds(call, repeats: int) -> float:
    jax.block_until_ready(call())  # compiles
    times = []
    for _ in range(repeats):
        tick = time.perf_counter()
        jax.block_until_ready(call())
        times.append(time.perf_counter() - tick)
    return float(np.median(times))


def measure(dim: int, n: int, pending: int, samples: int, repeats: int) -> dict:
    u, y = speed.observations(dim, n + pending)
    y = (y - y.mean()) / y.std()
    params = draws(dim, samples)
    real = gp.make_data(u[:n], y[:n])
    posteriors = jax.vmap(lambda p: gp.posterior(MODEL, p, real))(params)
    new = gp.make_data(u[n:], y[n:], size=gp.bucket_size(pending, minimum=8))
    joined = gp.make_data(u, y)
    slow = median_seconds(lambda: refactorise(MODEL, params, joined), repeats)
    fast = median_seconds(lambda: extend(MODEL, posteriors, new), repeats)
    # Both arms predict the same at the pending points (a check, not a timing).
    x_star = jnp.asarray(u[n:])
    a = jax.vmap(lambda post: gp.predict(MODEL, post, x_star)[0])(
        refactorise(MODEL, params, joined)
    )
    b = jax.vmap(lambda post: gp.predict(MODEL, post, x_star)[0])(extend(MODEL, posteriors, new))
    return {
        "d": dim,
        "n": n,
        "pending": pending,
        "samples": samples,
        "refactorise_s": slow,
        "extend_s": fast,
        "speedup": slow / fast,
        "max_abs_difference": float(jnp.max(jnp.abs(a - b))),
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 30, 120 and P = 4 only")
    parser.add_argument("--sizes", type=int, nargs="+", default=[30, 60, 120, 250])
    parser.add_argument("--pending", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--dim", type=int, default=6)
    parser.add_argument("--samples", type=int, default=128, help="hyperparameter draws S")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.pending, args.repeats = [30, 120], [4], 3
    rows = [
        measure(args.dim, n, p, args.samples, args.repeats)
        for n in args.sizes
        for p in args.pending
    ]
    out = Table(title=f"Conditioning {args.samples} GPs on pending points, d = {args.dim}")
    for column in ("n", "P", "refactorise ms", "extend ms", "speed-up", "max |diff|"):
        out.add_column(column, justify="right")
    for row in rows:
        out.add_row(
            str(row["n"]),
            str(row["pending"]),
            f"{1e3 * row['refactorise_s']:.2f}",
            f"{1e3 * row['extend_s']:.2f}",
            f"{row['speedup']:.1f}x",
            f"{row['max_abs_difference']:.1e}",
        )
    Console(width=100).print(out)
    args.out.mkdir(parents=True, exist_ok=True)
    name = "conditioning_quick.json" if args.quick else "conditioning.json"
    (args.out / name).write_text(json.dumps({"date": str(date.today()), "rows": rows}, indent=1))
    return rows


if __name__ == "__main__":
    main()
