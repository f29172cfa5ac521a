"""The arc-kernel report's claims, judged from its summary, and Table 1 as text."""

from __future__ import annotations

from typing import Any

from bojax.reports.arc_kernel.settings import MODELS
from bojax.reports.claims import Claim, verdict


def claims(summary: dict[str, Any]) -> list[Claim]:
    """Table 1's and Figures 2-3's claims, judged from ``summary``."""
    table = summary["table1"]
    best = {column: min(table, key=lambda m: table[m][column][0]) for column in ("raw", "log")}
    arc_best = [column for column, model in best.items() if model == "arc GP"]
    by_method = summary.get("table1_by_method", {})
    arc_best_own = [
        m for m, t in by_method.items() if min(t, key=lambda k: t[k]["log"][0]) == "arc GP"
    ]
    median = summary["final_best_median"]
    stats = summary.get("figure2_statistics", {}).get("arc_vs_baseline")
    finals = {m: [c[-1] for c in cs] for m, cs in summary["curves"].items()}
    wins = sum(a < b for a, b in zip(finals["arc"], finals["baseline"], strict=True))
    seeds = len(finals["arc"])
    significant = stats is not None and stats["wilcoxon_p"] < 0.05 and stats["mean_difference"] < 0
    test = (
        f"; paired difference {100 * stats['mean_difference']:+.2f} points (95 % interval "
        f"{100 * stats['interval_95'][0]:+.2f} to {100 * stats['interval_95'][1]:+.2f}), "
        f"Wilcoxon p = {stats['wilcoxon_p']:.3f}"
        if stats
        else ""
    )
    depths = summary["depth_fractions"]
    shallow = {m: sum(f[:2]) for m, f in depths.items()}
    own = (
        f"; arc GP best (log) on {len(arc_best_own)} of {len(by_method)} methods' own points"
        if by_method
        else ""
    )
    return [
        Claim(
            "arc kernel",
            "Table 1: the arc GP predicts BO data best (lowest NMSE)",
            verdict(
                len(arc_best) == 2,
                len(arc_best) == 1 or 2 * len(arc_best_own) > max(len(by_method), 1),
            ),
            "pooled: "
            + "; ".join(
                f"{column}: best {best[column]} {table[best[column]][column][0]:.3f}, arc GP "
                f"{table['arc GP'][column][0]:.3f} +- {table['arc GP'][column][1]:.3f}"
                for column in ("raw", "log")
            )
            + own,
            "reproduced if the arc GP is lowest on raw and log outputs of the pooled data; "
            "partly if on one, or on the log outputs of most methods' own points",
        ),
        Claim(
            "arc kernel",
            "Figure 2: BO with the arc kernel finds lower errors than the baseline",
            verdict(median["arc"] < median["baseline"] and significant, wins > seeds / 2),
            f"median final best error arc {median['arc']:.4f}, baseline "
            f"{median['baseline']:.4f}; arc lower in {wins} of {seeds} seeds{test}",
            "reproduced if the median is lower and the paired Wilcoxon test gives p < 0.05; "
            "partly if arc is lower on most seeds",
        ),
        Claim(
            "arc kernel",
            "Figure 3: the baseline favours small nets, the arc GP deeper ones",
            verdict(
                shallow["baseline"] >= shallow["arc"] + 0.2, shallow["baseline"] > shallow["arc"]
            ),
            f"BO evaluations at depth 0-1: baseline {shallow['baseline']:.2f}, arc "
            f"{shallow['arc']:.2f}",
            "reproduced if the baseline's share at depth 0-1 exceeds the arc GP's by 0.2",
        ),
    ]


def format_table(summary: dict) -> str:
    """Table 1 as text: ours (pooled) beside the report's, NMSE mean +- standard error,
    then the log NMSE on each method's own evaluations."""
    data = summary["table1_data"]
    lines = [
        f"Table 1: NMSE, {data['folds']}-fold CV on {data['points']} of "
        f"{data.get('points_available', data['points'])} pooled BO evaluations "
        "(report: MNIST BO data)",
        f"{'model':<17} {'ours, raw':>15} {'ours, log':>15} {'report, raw':>15} "
        f"{'report, log':>15}",
    ]
    for model in MODELS:
        ours = summary["table1"][model]
        theirs = summary["table1_report"][model]
        cells = [ours["raw"], ours["log"], theirs["raw"], theirs["log"]]
        lines.append(f"{model:<17} " + " ".join(f"{m:>7.3f} +- {s:.3f}" for m, s in cells))
    by_method = summary.get("table1_by_method")
    if by_method:
        lines.append("Log NMSE on each method's own evaluations")
        lines.append(f"{'model':<17} " + " ".join(f"{m:>15}" for m in by_method))
        for model in MODELS:
            cells = [by_method[m][model]["log"] for m in by_method]
            lines.append(f"{model:<17} " + " ".join(f"{m:>7.3f} +- {s:.3f}" for m, s in cells))
    return "\n".join(lines)
