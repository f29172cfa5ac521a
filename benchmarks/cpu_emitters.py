"""XLA's CPU fusion emitters: compile and run times of bojax's work with each.

jaxlib 0.9.1 made XLA's CPU compiler emit fused loops with a tiled fusion emitter
(``--xla_cpu_use_fusion_emitters``, on by default), where it had used loop emitters.
The test suite turns it off (``tests/conftest.py``): its many small programs compile
about twice as fast without it. This runs the same work in fresh processes with each
setting, alternating, with no persistent compilation cache:

* two BO runs, Forrester with ``gp-slice`` (the default) and Branin with ``gp-map``:
  ``cold`` is the first run of the process (tracing, compiling and running), ``warm``
  the same run again (its programs compiled, so only running);
* the ensemble trainer (30 DropConnect MLPs, 5 layers of 15 units, 1000 epochs):
  ``cold`` one call after ``jax.clear_caches()``, ``warm`` the mean of three more. It
  compiles at LLVM level 1 (:func:`bojax.compilation.jit_quick_compile`) in both modes.

It prints the medians over ``--repeats`` processes, the ratios (tiled / loop: above 1,
the loop emitters are quicker), whether each setting's processes computed the same
values bit for bit (``n/a`` with one process each), and the largest relative difference
between the settings' values (the BO runs' outputs, the members' training losses).
``--suite`` adds the test suite's other flags (LLVM's passes off), as the suite compiles;
without it the processes get XLA's defaults, whatever ``XLA_FLAGS`` this one was given.

    uv run python benchmarks/cpu_emitters.py [--repeats 3] [--suite]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SETTINGS = {"tiled": "true", "loop": "false"}  # xla_cpu_use_fusion_emitters
WORKLOADS = ("forrester gp-slice", "branin gp-map", "ensemble training")


def _child() -> None:
    """One process's times and values, as JSON on stdout."""
    import jax

    import bojax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from bojax.objectives import datasets
    from bojax.objectives import ensemble as E
    from bojax.objectives.problems import get_problem

    out = {}
    for name, problem, settings in [
        ("forrester gp-slice", "forrester", dict(surrogate="gp-slice", iterations=8)),
        ("branin gp-map", "branin", dict(surrogate="gp-map", iterations=10)),
    ]:
        objective = get_problem(problem)
        times, values = [], None
        for _ in range(2):
            tick = time.perf_counter()
            result = bojax.minimize(
                objective, objective.space, initial=3, seed=0, progress=False, **settings
            )
            times.append(time.perf_counter() - tick)
            values = [record["y"] for record in result.history]
        out[name] = {"cold": times[0], "warm": times[1], "values": values}

    arch = E.Architecture(max_layers=5, max_width=15, max_members=30)
    training = E.Training(min_epochs=1000, max_epochs=1000)
    design = E.Design(jnp.int32(5), jnp.int32(15), jnp.int32(30), jnp.float32(0.9))
    data = datasets.experiment1(seed=0)
    x, y = data.x_train.astype("float32"), data.y_train.astype("float32")

    def call():
        ensemble = E.jit_train_ensemble(jax.random.key(0), arch, training, design, x, y)
        return ensemble.train_loss.block_until_ready()

    jax.clear_caches()
    tick = time.perf_counter()
    call()
    cold = time.perf_counter() - tick
    warm = []
    for _ in range(3):
        tick = time.perf_counter()
        loss = call()
        warm.append(time.perf_counter() - tick)
    out["ensemble training"] = {
        "cold": cold,
        "warm": sum(warm) / len(warm),
        "values": [float(v) for v in loss.ravel()],
    }
    print(json.dumps(out))


SUITE_FLAGS = ["--xla_backend_optimization_level=0", "--xla_llvm_disable_expensive_passes=true"]
CHOSEN_HERE = ("fusion_emitters", "xla_backend_optimization_level", "xla_llvm_disable_expensive")


def _run(setting: str, suite: bool) -> dict:
    # No persistent cache (bojax's, or one given to JAX): a repeat would load its programs
    env = dict(os.environ, BOJAX_COMPILATION_CACHE="off", JAX_ENABLE_COMPILATION_CACHE="false")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not any(c in f for c in CHOSEN_HERE)]
    flags += SUITE_FLAGS if suite else []
    env["XLA_FLAGS"] = " ".join([*flags, f"--xla_cpu_use_fusion_emitters={SETTINGS[setting]}"])
    done = subprocess.run(
        [sys.executable, __file__, "--child"], env=env, capture_output=True, text=True
    )
    if "Unknown flag in XLA_FLAGS: --xla_cpu_use_fusion_emitters" in done.stderr:
        raise SystemExit("this jaxlib has no --xla_cpu_use_fusion_emitters (0.12 has none)")
    if done.returncode != 0:
        raise SystemExit(f"the {setting} run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="processes per setting")
    parser.add_argument("--suite", action="store_true", help="as the test suite compiles")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child()
        return None
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")

    import numpy as np
    from rich.console import Console
    from rich.table import Table

    runs: dict[str, list[dict]] = {setting: [] for setting in SETTINGS}
    for repeat in range(args.repeats):
        for setting in SETTINGS:  # alternating, so drifts in the machine's speed share out
            runs[setting].append(_run(setting, args.suite))
            print(f"repeat {repeat + 1}/{args.repeats}: {setting} done", flush=True)

    pipeline = "the suite's flags" if args.suite else "XLA's defaults"
    table = Table(title=f"XLA CPU fusion emitters ({pipeline}), median of {args.repeats}")
    for column in ("work", "cold tiled s", "cold loop s", "ratio", "warm tiled s",
                   "warm loop s", "ratio", "reproducible", "largest rel. diff"):  # fmt: skip
        table.add_column(column, justify="left" if column == "work" else "right")
    summary = {}
    for work in WORKLOADS:
        row = {}
        for phase in ("cold", "warm"):
            for setting in SETTINGS:
                row[f"{phase} {setting}"] = float(
                    np.median([run[work][phase] for run in runs[setting]])
                )
        values = {s: [run[work]["values"] for run in runs[s]] for s in SETTINGS}
        compared = args.repeats > 1
        row["reproducible"] = (
            all(v == values[s][0] for s in SETTINGS for v in values[s]) if compared else None
        )
        tiled, loop = (np.asarray(values[s][0], dtype=float) for s in SETTINGS)
        scale = np.maximum(np.abs(tiled), np.finfo(float).tiny)
        row["largest relative difference"] = float(np.max(np.abs(tiled - loop) / scale))
        summary[work] = row
        table.add_row(
            work,
            f"{row['cold tiled']:.2f}",
            f"{row['cold loop']:.2f}",
            f"{row['cold tiled'] / row['cold loop']:.2f}x",
            f"{row['warm tiled']:.3f}",
            f"{row['warm loop']:.3f}",
            f"{row['warm tiled'] / row['warm loop']:.2f}x",
            {True: "yes", False: "no", None: "n/a"}[row["reproducible"]],
            f"{row['largest relative difference']:.1e}",
        )
    Console(width=150).print(table)
    print(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()
