"""Reproduce the ensemble-design report (Wilton 2020): Experiment 1 (Figures 3-5) or
Experiment 2 (Figures 6-8), with a summary.json.

    uv run python experiments/ensemble_design.py --experiment 1 [--quick] [--seed S] [--out DIR]

Writes into ``DIR/experiment<k>/`` (``experiment<k>-quick/`` with ``--quick``; default
``DIR`` is ``paper_figures/ensemble_design``). The run is journalled in ``run/`` there: a
killed run continues where it stopped when started again with the same settings, a
finished one is re-plotted; ``--fresh`` discards the old journal instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "paper_figures" / "ensemble_design"
OVERRIDES = ("iterations", "initial", "samples", "candidates", "min-epochs", "max-epochs")


def _extra(parser) -> None:
    from bojax.reports import non_negative

    parser.add_argument("--experiment", type=int, choices=(1, 2), required=True)
    parser.add_argument("--seed", type=non_negative, default=0)
    parser.add_argument("--fresh", action="store_true", help="discard a journalled run first")


def main(argv: list[str] | None = None) -> dict:
    from bojax.reports import run_script, script_arguments

    args, overrides = script_arguments(__doc__, DEFAULT_OUT, OVERRIDES, argv, _extra)
    out = args.out / f"experiment{args.experiment}{'-quick' if args.quick else ''}"
    overrides |= {"experiment": args.experiment, "seed": args.seed}
    return run_script(
        args, "ensemble_design", overrides, _show, out, ["experiment"], fresh=args.fresh
    )


def _show(summary: dict) -> str:
    best, ref = summary["best"], summary["report_best_design_on_our_data"]
    lines = [
        f"best design {best['design']} at iteration {best['iteration']}:",
        f"  test loss {best['test_loss']:.2f} (MSE {best['test_mse']:.2f})",
        f"report's best design {ref['design']}: test loss {ref['test_loss']:.2f} "
        f"(MSE {ref['test_mse']:.2f})",
    ]
    chosen = summary["selection"]
    for label, key in (
        ("best observed", "best_observed"),
        ("posterior-mean pick", "posterior_mean"),
        ("re-evaluated pick", "reevaluated"),
        ("report's design", "report_design"),
    ):
        entry = chosen[key]
        lines.append(
            f"{label:<20} {entry['design']}: mean test loss {entry['retrained_mean']:.2f} "
            f"(sd {entry['retrained_sd']:.2f}) over training seeds {chosen['training_seeds']}"
        )
    truth = summary["dataset"]["test_loss_of_truth"]
    lines.append(f"noise floor (true mean function): test loss {truth:.2f}")
    lines.append(f"{summary['evaluations']} evaluations in {summary['wall_seconds']:.0f} s")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
