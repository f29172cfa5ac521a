"""Reproduce the arc-kernel report (Swersky et al. 2014): Table 1 (regression NMSE of six
models on BO data) and Figures 2-3 (arc-kernel BO against the report's baseline), on
MLP classifiers of 0-5 hidden layers trained on MNIST-1D (generated locally).

    uv run python experiments/arc_kernel.py [--quick] [--out DIR] [--peers tpe smac]
        [--workers N | --scheduler ADDRESS]

Writes into ``DIR/full/`` (``DIR/quick/`` with ``--quick``; default ``DIR`` is
``paper_figures/arc_kernel``). Every BO run is journalled under ``runs/`` there: a killed
reproduction continues where it stopped when started again with the same settings; runs
kept for other settings refuse the run, and ``--fresh`` discards the old runs instead.
``--peers tpe smac`` adds Optuna's TPE and SMAC3 on the same space (``uv sync --group
bench`` installs them). ``--workers N`` runs the BO runs and the Table 1 regressions on
a local Dask cluster of N processes. Overrides of the settings (a reduced run) need
``--out``.
"""

from __future__ import annotations

import sys
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "paper_figures" / "arc_kernel"
OVERRIDES = ("seeds", "initial", "iterations", "samples", "burn-in", "candidates", "folds")
OVERRIDES += ("table-burn-in", "table-samples", "max-layers", "epochs", "table-points")


def _extra(parser) -> None:
    from bojax.reports import positive

    parser.add_argument("--fresh", action="store_true", help="discard journalled runs first")
    parser.add_argument("--peers", nargs="*", default=[], choices=["tpe", "smac"])
    parser.add_argument("--workers", type=positive, help="BO runs on N local Dask processes")
    parser.add_argument("--scheduler", help="BO runs on this Dask scheduler")


def main(argv: list[str] | None = None) -> dict:
    from bojax.reports import run_script, script_arguments

    args, overrides = script_arguments(__doc__, DEFAULT_OUT, OVERRIDES, argv, _extra)
    overrides |= {"peers": args.peers}  # which peers run beside bojax, not a reduction
    return run_script(args, "arc_kernel", overrides, _show, selection=["peers"], fresh=args.fresh)


def _show(summary: dict) -> str:
    from bojax.reports.arc_kernel import format_table

    lines = [format_table(summary)]
    for method, best in summary["best"].items():
        lines.append(
            f"{method}: median final best validation error "
            f"{100 * summary['final_best_median'][method]:.2f}%; best overall "
            f"{100 * best['validation_error']:.2f}% (test {100 * best['test_error']:.2f}%), "
            f"{best['point']['layers']} hidden layers"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    from bojax.reports.peers import fixed_hash_seed

    fixed_hash_seed()  # SMAC3's runs follow Python's string hashes
    sys.exit(0 if main() else 1)
