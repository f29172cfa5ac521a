"""Reproduce the architecture-search report (Twist 2019): Figures 3-8 and BO over
architecture vectors [n_1 .. n_L, E, eta] with the report's fixed-hyperparameter GP
beside the same GP with slice-sampled hyperparameters.

    uv run python experiments/architecture_search.py [--quick] [--out DIR]

Writes figures and ``summary.json`` into ``DIR/full/`` (``DIR/quick/`` with ``--quick``;
default ``DIR`` is ``paper_figures/architecture_search``).
"""

from __future__ import annotations

import sys
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "paper_figures" / "architecture_search"
OVERRIDES = ("seeds", "initial", "iterations", "candidates", "samples", "burn-in")
OVERRIDES += ("max-layers", "max-units", "figure-epochs")


def main(argv: list[str] | None = None) -> dict:
    from bojax.reports import run_script, script_arguments

    args, overrides = script_arguments(__doc__, DEFAULT_OUT, OVERRIDES, argv)
    return run_script(args, "architecture_search", overrides, "format_summary")


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
