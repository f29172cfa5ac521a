"""Reproduce the hybrid-exploration report (Brofos 2014): Figures 1-2 (EI alone against
the hybrid policy on sin(x)/(pi x)), the fraction of seeded runs that reach the global
maximum per policy, and Table 2 (a random forest's tree count on credit data).

    uv run python experiments/hybrid_exploration.py [--quick] [--out DIR]

Writes figures and ``summary.json`` into ``DIR/full/`` (``DIR/quick/`` with ``--quick``;
default ``DIR`` is ``paper_figures/hybrid_exploration``).
"""

from __future__ import annotations

import sys
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "paper_figures" / "hybrid_exploration"
OVERRIDES = ("toy-seeds", "toy-iterations", "rf-seeds", "rf-iterations", "rf-max-trees")
OVERRIDES += ("rf-folds", "rf-rows", "candidates")


def main(argv: list[str] | None = None) -> dict:
    from bojax.reports import run_script, script_arguments

    args, overrides = script_arguments(__doc__, DEFAULT_OUT, OVERRIDES, argv)
    return run_script(args, "hybrid_exploration", overrides, "format_tables")


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
