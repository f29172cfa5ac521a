"""Hyperparameter chains: effective samples per second, before and after engine v2.

On fixed data (the speed benchmark's Sobol points on Branin, d = 2, and Hartmann-6,
d = 6), each configuration burns in once and is then fitted ``--fits`` times, every fit
continuing its chains as a BO run does. The kept draws of all fits form each chain's
trace; ESS is BlackJAX's multi-chain estimator, the smallest over the unconstrained
hyperparameters, and ESS/s divides it by the seconds of those later fits (compilation
and burn-in excluded). Configurations:

* ``spearmint``: one coordinate-slice chain keeping 128 consecutive sweeps per fit,
  Half-Cauchy priors (bojax's ``gp-slice`` before engine v2 part 3; the reports' set-up);
* ``gp-slice, 16 sweeps``: today's ``gp-slice``, the same chain keeping 16 sweeps per
  fit under the ``small-noise`` prior set;
* ``slice xK``: K coordinate-slice chains side by side, ``thin`` sweeps per kept draw;
* ``elliptical xK``: K elliptical slice chains in two groups, each moving with a
  Gaussian reference fitted to the other group (Nishihara et al. 2014), ``thin`` steps
  per kept draw; ``elliptical x1``: one chain with the prior as reference.

    uv run python benchmarks/chains.py [--quick] [--fits 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import date
from pathlib import Path

import blackjax
import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import speed  # noqa: E402

from bojax import gp  # noqa: E402
from bojax.gp import priors  # noqa: E402
from bojax.surrogates import GPSurrogate  # noqa: E402
from bojax.threads import blas_threads  # noqa: E402

CONFIGS = {
    "spearmint": dict(method="slice", num_samples=128, prior="half-cauchy"),
    # The registry's gp-slice since engine v2 part 3: the same chain, 16 sweeps per fit.
    "gp-slice, 16 sweeps": dict(method="slice", num_samples=16, prior="small-noise"),
    "slice x16, 4 sweeps": dict(method="slice", chains=16, num_samples=16, thin=4, burn_in=64),
    "elliptical x16, 2 steps": dict(
        method="elliptical", chains=16, num_samples=16, thin=2, burn_in=128
    ),
    # The registry's gp-ess (bojax.surrogates.SURROGATES): 4 draws per chain, 2 steps apart.
    "elliptical x16, 8 steps": dict(
        method="elliptical", chains=16, num_samples=64, thin=2, burn_in=128
    ),
    # One chain, the prior as reference: BlackJAX's kernel as it stands.
    "elliptical x1, 32 steps": dict(
        method="elliptical", chains=1, num_samples=16, thin=2, burn_in=128
    ),
}


def measure(config: dict, prior: str, u: np.ndarray, y: np.ndarray, fits: int) -> dict:
    surrogate = GPSurrogate(**{"prior": prior, **config})
    data = gp.make_data(u, (y - y.mean()) / y.std())
    state = surrogate.fit(jax.random.key(0), surrogate.init(u.shape[1]), data)
    surrogate.fit(jax.random.key(0), state, data)  # compiles the later fit, untimed
    traces, seconds = [], 0.0
    for i in range(fits):
        tick = time.perf_counter()
        state = surrogate.fit(jax.random.key(i + 1), state, data)
        jax.block_until_ready(state.posteriors)
        seconds += time.perf_counter() - tick
        flat = jax.vmap(lambda z: jax.flatten_util.ravel_pytree(z)[0])(
            priors.to_unconstrained(state.prior, state.samples)
        )
        traces.append(np.asarray(flat).reshape(surrogate.chains, -1, flat.shape[-1]))
    trace = np.concatenate(traces, axis=1)  # (chains, draws, coordinates)
    ess = float(np.min(blackjax.ess(trace, chain_axis=0, sample_axis=1)))
    return {
        "ess": ess,
        "seconds": seconds,
        "ess_per_s": ess / seconds,
        "draws": trace.shape[1] * trace.shape[0],
    }


def measure_all(args, console: Console) -> list[dict]:
    rows = []
    for dim in args.dims:
        for n in args.sizes:
            u, y = speed.observations(dim, n)
            for name in args.configs:
                result = measure(CONFIGS[name], args.prior, u, y, args.fits)
                rows.append({"d": dim, "n": n, "config": name, **result})
                console.print(
                    f"  d={dim} n={n:<4} {name:<24} ESS {result['ess']:7.1f} "
                    f"in {result['seconds']:6.2f} s",
                    highlight=False,
                )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="d = 2, n = 30 only, 8 fits")
    parser.add_argument("--fits", type=int, default=20)
    parser.add_argument("--sizes", type=int, nargs="+", default=[30, 60, 120])
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 6])
    parser.add_argument("--prior", default="half-cauchy", help="prior set of the other chains")
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS))
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.dims, args.fits = [30], [2], 8
    console = Console(width=120)
    with blas_threads():  # as the BO loop fits (bojax.threads)
        rows = measure_all(args, console)
    out = Table(title=f"Hyperparameter chains: ESS per second over {args.fits} continued fits")
    for column in (
        "d",
        "n",
        "configuration",
        "kept draws",
        "min ESS",
        "s per fit",
        "ESS/s",
        "vs spearmint",
    ):
        out.add_column(column, justify="left" if column == "configuration" else "right")
    for row in rows:
        base = next(
            (
                r["ess_per_s"]
                for r in rows
                if (r["d"], r["n"], r["config"]) == (row["d"], row["n"], "spearmint")
            ),
            None,
        )
        out.add_row(
            str(row["d"]),
            str(row["n"]),
            row["config"],
            str(row["draws"]),
            f"{row['ess']:.1f}",
            f"{row['seconds'] / args.fits:.3f}",
            f"{row['ess_per_s']:.1f}",
            "-" if base is None else f"{row['ess_per_s'] / base:.1f}x",
        )
    console.print(out)
    args.out.mkdir(parents=True, exist_ok=True)
    name = "chains_quick.json" if args.quick else "chains.json"
    (args.out / name).write_text(
        json.dumps(
            {"date": str(date.today()), "fits": args.fits, "prior": args.prior, "rows": rows},
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
