"""Reproduce the BNN-surrogate report (Agrawal 2016): the HMC verification on
sin(7x) + cos(17x) (Figures 6-9), BO of Forrester with the BNN (Figure 10), and BNN
against GP on four test functions (Figure 11).

    uv run python experiments/bnn_surrogate.py [--quick] [--out DIR] [--problems ...]
        [--workers N | --scheduler ADDRESS]

Writes figures and ``summary.json`` into ``DIR/full/`` (``DIR/quick/`` with ``--quick``;
default ``DIR`` is ``paper_figures/bnn_surrogate``). Each Figure 11 repeat is kept in
``runs/``: an interrupted run continues where it stopped, and ``--problems`` lets two
processes share the work before a last call without it gathers every problem.
``--workers N`` runs the Figure 11 repeats on a local Dask cluster of N processes, one
repeat per task (``--scheduler`` joins a running cluster; docs/scale-out.md). Repeats
kept for other settings are not replaced: the run is refused, and ``--fresh`` discards
them first.
"""

from __future__ import annotations

import sys
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "paper_figures" / "bnn_surrogate"
OVERRIDES = ("samples", "burn-in", "repeats", "iterations", "candidates", "points", "seed")


def _extra(parser) -> None:
    from bojax.reports import positive
    from bojax.reports.bnn_surrogate import ARMS, PROBLEMS

    parser.add_argument("--problems", nargs="+", choices=PROBLEMS, help="Figure 11 subset")
    parser.add_argument("--arms", nargs="+", choices=ARMS, help="Figure 11 surrogates")
    parser.add_argument("--fresh", action="store_true", help="discard kept repeats first")
    parser.add_argument("--workers", type=positive, help="Figure 11 repeats on N Dask processes")
    parser.add_argument("--scheduler", help="Figure 11 repeats on this Dask scheduler")


def main(argv: list[str] | None = None) -> dict:
    from bojax.reports import run_script, script_arguments

    args, overrides = script_arguments(__doc__, DEFAULT_OUT, OVERRIDES, argv, _extra)
    overrides |= {k: tuple(v) for k in ("problems", "arms") if (v := getattr(args, k))}
    # --problems splits the work between processes (a last call gathers every problem).
    return run_script(
        args, "bnn_surrogate", overrides, "format_summary", selection=["problems"],
        fresh=args.fresh,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
