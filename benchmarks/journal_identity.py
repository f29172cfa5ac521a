"""Journals of a fixed set of runs, to check that a refactoring changes no result.

Runs small BO runs that together touch every engine path a restructuring can move:
Forrester with ``gp-slice`` (the default), Branin with ``gp-map``, a conditional space
with the arc kernel (``gp-slice-arc``), an objective that fails in a region (the failure
classifier), the BNN surrogate (``bnn-hmc``), a space with a categorical choice, two
objectives under a constraint, and step-wise trainings under ASHA and under freeze-thaw
(paused ones continued from their checkpoints). Each journal is written to
``<out>/<run>/journal.jsonl``; ``--compare REFERENCE`` then checks every record's
point, unit coordinates, output, status and diagnostics (everything but the wall-clock
seconds), the run header (space and settings), the saved chain states and the summary
for bit-identity against the journals in ``REFERENCE``.

    uv run python benchmarks/journal_identity.py --out /tmp/after --compare /tmp/before

Run it once on the commit before a change (``--out /tmp/before``), once after.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # XLA's cache-loading log lines
import jax

jax.config.update("jax_enable_x64", True)

import bojax  # noqa: E402
from bojax import Categorical, Integer, Real, Space  # noqa: E402
from bojax.objectives.problems import get_problem  # noqa: E402


def _conditional_objective(point):
    """A depth-dependent toy: each present layer's width pulls towards its own optimum."""
    value = (point["layers"] - 2) ** 2 * 0.3 + (math.log10(point["lr"]) + 2.5) ** 2
    for k in range(1, 4):
        if f"units{k}" in point:
            value += ((point[f"units{k}"] - 10 * k) / 30.0) ** 2
    return value


def _conditional_space():
    return Space(
        [
            Integer("layers", 0, 3),
            Real("lr", 1e-4, 1e-1, log=True),
            *[Integer(f"units{k}", 4, 40, condition=("layers", ">=", k)) for k in range(1, 4)],
        ]
    )


def _failing(point):
    if math.hypot(point["x1"] - 2.5, point["x2"] - 9.0) < 5.3:
        raise RuntimeError("training diverged")
    return get_problem("branin")(point)


def _mixed_objective(point):
    """A categorical choice with its own optimum per option, and an integer."""
    shift = {"relu": 0.0, "tanh": 0.4, "gelu": 0.15}[point["activation"]]
    return (math.log10(point["lr"]) + 2.5 - shift) ** 2 + 0.1 * abs(point["layers"] - 2)


def _mixed_space():
    return Space(
        [
            Categorical("activation", ["relu", "tanh", "gelu"]),
            Real("lr", 1e-4, 1e-1, log=True),
            Integer("layers", 1, 4),
        ]
    )


def _two_objectives(point):
    error = (math.log10(point["lr"]) + 2.5) ** 2 + 1.0 / point["width"]
    return {"error": error, "params": 40.0 * point["width"], "latency": 0.01 * point["width"]}


def _curve(point, report, checkpoint=None):
    """A learning curve falling to the design's final value, resumable from a checkpoint."""
    final = (math.log10(point["lr"]) + 2.5) ** 2 + (point["decay"] - 0.3) ** 2
    start = 1 if checkpoint is None else checkpoint + 1
    for epoch in range(start, 28):
        report(epoch, final + 2.0 / epoch * (1.0 + point["decay"]), checkpoint=epoch)
    return final


def _curve_space():
    return Space([Real("lr", 1e-4, 1e-1, log=True), Real("decay", 0.0, 1.0)])


def runs():
    """``{name: (objective, space, settings)}`` of the fixed set."""
    forrester, branin = get_problem("forrester"), get_problem("branin")
    return {
        "forrester-gp-slice": (forrester, forrester.space, dict(surrogate="gp-slice")),
        "branin-gp-map": (branin, branin.space, dict(surrogate="gp-map", iterations=10)),
        "conditional-arc": (
            _conditional_objective,
            _conditional_space(),
            dict(surrogate="gp-slice-arc", samples=16, burn_in=32, iterations=8),
        ),
        "failing-branin": (_failing, branin.space, dict(surrogate="gp-map", iterations=10)),
        "bnn-forrester": (forrester, forrester.space, dict(surrogate="bnn-hmc", iterations=5)),
        "mixed-categorical": (_mixed_objective, _mixed_space(), dict(surrogate="gp-map")),
        "two-objectives": (
            _two_objectives,
            Space([Real("lr", 1e-3, 1e-1, log=True), Integer("width", 8, 256)]),
            dict(
                surrogate="gp-map",
                objectives={"error": "min", "params": "min"},
                constraints={"latency": ("<=", 2.0)},
            ),
        ),
        "curves-asha": (
            _curve,
            _curve_space(),
            dict(surrogate="gp-map", max_step=27, early_stopping="asha", iterations=6),
        ),
        "curves-freeze-thaw": (
            _curve,
            _curve_space(),
            dict(surrogate="gp-map", max_step=27, early_stopping="freeze-thaw", iterations=4),
        ),
    }


def run_all(out: Path, only: list[str] | None = None) -> None:
    for name, (objective, space, settings) in runs().items():
        if only and name not in only:
            continue
        settings = {"iterations": 8, "initial": 3, "seed": 0, **settings}
        folder = out / name
        shutil.rmtree(folder, ignore_errors=True)
        bojax.minimize(objective, space, **settings, out=folder, progress=False)
        print(f"ran {name}", flush=True)


def _comparable(value):
    """``value`` without its wall-clock fields (every key ending in ``seconds``: an
    evaluation's, a decision's, a segment's training), which differ on every run."""
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items() if not k.endswith("seconds")}
    return value


def compare(out: Path, reference: Path) -> int:
    """Print one line per run; the number of runs that differ."""
    differ = 0
    for name in runs():
        mine, theirs = out / name / "journal.jsonl", reference / name / "journal.jsonl"
        if not (mine.exists() and theirs.exists()):
            print(f"{name}: missing ({mine.exists()=}, {theirs.exists()=})")
            differ += 1
            continue
        a = [_comparable(json.loads(line)) for line in mine.read_text().splitlines()]
        b = [_comparable(json.loads(line)) for line in theirs.read_text().splitlines()]
        same = a == b
        for extra in ("run.json", "sampler.json", "summary.json"):  # header, chains, result
            paths = [p.parent / extra for p in (mine, theirs)]
            if not any(path.exists() for path in paths):  # a run with no chains
                continue
            pair = [json.loads(p.read_text()) if p.exists() else None for p in paths]
            same = same and pair[0] is not None and _comparable(pair[0]) == _comparable(pair[1])
        first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
        where = "" if same else f" (first difference at record {first}; {len(a)} vs {len(b)})"
        print(f"{name}: {len(a)} records, {'bit-identical' if same else 'DIFFERENT'}{where}")
        differ += not same
    return differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compare", type=Path, help="reference folder of journals")
    parser.add_argument("--only", nargs="*", help="run only these of the fixed set")
    parser.add_argument("--no-run", action="store_true", help="only compare")
    args = parser.parse_args()
    if not args.no_run:
        run_all(args.out, args.only)
    if args.compare is not None:
        sys.exit(1 if compare(args.out, args.compare) else 0)


if __name__ == "__main__":
    main()
