"""Reproduce the ensemble-design report (Wilton 2020): Experiment 1 (Figures 3-5) or
Experiment 2 (Figures 6-8), with a summary.json.

    uv run python experiments/ensemble_design.py --experiment 1 [--quick] [--seed S] [--out DIR]

Writes into ``DIR/experiment<k>/`` (``experiment<k>-quick/`` with ``--quick``; default
``DIR`` is ``paper_figures/ensemble_design``). The run is journalled in ``run/`` there: a
killed run continues where it stopped when started again with the same settings, a
finished one is re-plotted; ``--fresh`` discards the old journal instead.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "paper_figures" / "ensemble_design"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", type=int, choices=(1, 2), required=True)
    parser.add_argument("--quick", action="store_true", help="small budget (a few minutes)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--fresh", action="store_true", help="discard a journalled run first")
    parser.add_argument("--no-progress", action="store_true")
    reduced = parser.add_argument_group("overrides (for reduced runs)")
    for name in ("iterations", "initial", "samples", "candidates", "min-epochs", "max-epochs"):
        reduced.add_argument(f"--{name}", type=int)
    args = parser.parse_args(argv)

    import jax

    jax.config.update("jax_enable_x64", True)  # GP numerics in float64; networks stay float32
    from bojax.errors import BojaxError, JournalError
    from bojax.reports import ensemble_design

    overrides = {
        key: value
        for key in ("iterations", "initial", "samples", "candidates", "min_epochs", "max_epochs")
        if (value := getattr(args, key)) is not None
    }
    cfg = ensemble_design.config(args.experiment, args.quick, args.seed, **overrides)
    out = args.out / f"experiment{args.experiment}{'-quick' if args.quick else ''}"
    try:
        summary = ensemble_design.run(cfg, out, fresh=args.fresh, progress=not args.no_progress)
    except BojaxError as error:
        print(f"error: {error}", file=sys.stderr)
        if isinstance(error, JournalError):
            print("(pass --fresh to discard that run, or choose another --out)", file=sys.stderr)
        return {}
    best, ref = summary["best"], summary["report_best_design_on_our_data"]
    print(f"best design {best['design']} at iteration {best['iteration']}:")
    print(f"  test loss {best['test_loss']:.2f} (MSE {best['test_mse']:.2f})")
    print(
        f"report's best design {ref['design']}: test loss {ref['test_loss']:.2f} "
        f"(MSE {ref['test_mse']:.2f})"
    )
    chosen = summary["selection"]
    for label, key in (
        ("best observed", "best_observed"),
        ("posterior-mean pick", "posterior_mean"),
        ("re-evaluated pick", "reevaluated"),
        ("report's design", "report_design"),
    ):
        entry = chosen[key]
        print(
            f"{label:<20} {entry['design']}: mean test loss {entry['retrained_mean']:.2f} "
            f"(sd {entry['retrained_sd']:.2f}) over training seeds {chosen['training_seeds']}"
        )
    print(
        f"noise floor (true mean function): test loss "
        f"{summary['dataset']['test_loss_of_truth']:.2f}"
    )
    print(f"{summary['evaluations']} evaluations in {summary['wall_seconds']:.0f} s; wrote {out}")
    return summary


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
