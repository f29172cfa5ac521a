"""The arc-kernel report's Figures 2 (best error so far, final errors paired by seed) and
3 (where the evaluations went, by depth)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bojax.reports.arc_kernel.runs import curves as runs_curves
from bojax.reports.arc_kernel.runs import depth_fractions, figure2_statistics
from bojax.reports.arc_kernel.settings import Config
from bojax.reports.figures import pyplot, save

COLOURS = {"arc": "tab:red", "baseline": "tab:blue", "tpe": "tab:green", "smac": "tab:purple"}
LABELS = {
    "arc": "arc GP",
    "baseline": "GP, random fill (report's baseline)",
    "tpe": "Optuna TPE",
    "smac": "SMAC3 random forest",
}
SHORT = {"arc": "arc GP", "baseline": "random fill", "tpe": "TPE", "smac": "SMAC3"}


def median_band(cfg: Config, curves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The median over seeds (rows) at each step, and the 2.5 / 97.5 percentiles of the
    medians of ``cfg.bootstrap`` resamples of the seeds (a percentile bootstrap band)."""
    rng = np.random.default_rng([cfg.data_seed, 2])
    picks = rng.integers(0, len(curves), size=(cfg.bootstrap, len(curves)))
    medians = np.median(curves[picks], axis=1)
    low, high = np.percentile(medians, [2.5, 97.5], axis=0)
    return np.median(curves, axis=0), low, high


def plot_best_so_far(cfg: Config, runs: dict, path: Path) -> Path:
    plt = pyplot()
    fig, (ax, paired) = plt.subplots(
        1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1.6, 1]}
    )
    for method, rows_per_seed in runs.items():
        curves = 100 * runs_curves(rows_per_seed)
        x = np.arange(1, curves.shape[1] + 1)
        median, low, high = median_band(cfg, curves)
        ax.plot(x, median, color=COLOURS[method], label=f"{LABELS[method]} (median)")
        ax.fill_between(x, low, high, color=COLOURS[method], alpha=0.2, lw=0)
    ax.axvline(cfg.initial + 0.5, color="0.5", ls=":", lw=1, label="end of initial design")
    ax.set(
        xlabel="function evaluations",
        ylabel="best validation error so far (%)",
        title=f"(a) {cfg.seeds} seeds: median, 95 % bootstrap band",
    )
    ax.legend(fontsize=8)
    stats = figure2_statistics(cfg, runs)
    methods = list(runs)
    finals = 100 * np.array([stats["final_best"][m] for m in methods])
    for seed in range(finals.shape[1]):
        paired.plot(range(len(methods)), finals[:, seed], color="0.7", lw=0.8, zorder=1)
    for i, method in enumerate(methods):
        paired.scatter(np.full(finals.shape[1], i), finals[i], color=COLOURS[method], zorder=2)
    tests = "\n".join(
        f"arc vs {SHORT[m]}: Wilcoxon p = {stats[f'arc_vs_{m}']['wilcoxon_p']:.3f}"
        for m in methods
        if m != "arc"
    )
    paired.text(0.98, 0.98, tests, transform=paired.transAxes, ha="right", va="top", fontsize=7)
    paired.set(
        xticks=range(len(methods)),
        xticklabels=[SHORT[m] for m in methods],
        ylabel="final best validation error (%)",
        title="(b) final errors, one line per seed",
    )
    fig.suptitle(f"Figure 2: BO of MLPs on {cfg.dataset}")
    return save(fig, path)


def plot_depths(cfg: Config, runs: dict, path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    depths = np.arange(cfg.max_layers + 1)
    width = 0.8 / len(runs)
    for i, (method, rows_per_seed) in enumerate(runs.items()):
        fractions = depth_fractions(cfg, rows_per_seed)
        ax.bar(
            depths + (i - (len(runs) - 1) / 2) * width,
            fractions,
            width,
            color=COLOURS[method],
            label=LABELS[method],
        )
    ax.set(
        xlabel="hidden layers",
        ylabel="fraction of BO evaluations",
        xticks=depths,
        title="Figure 3: where the evaluations went (after the initial design)",
    )
    ax.legend(fontsize=8)
    return save(fig, path)
