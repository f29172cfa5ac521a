"""The arc-kernel report (Swersky et al. 2014): Table 1 and Figures 2-3 on real data.

BO of MLP classifiers with 0 to 5 hidden layers (:mod:`bojax.objectives.deepnet`: 23
conditional hyperparameters, 6 architectures), minimising the log validation error as the
report does on MNIST. The data are MNIST-1D (:func:`bojax.objectives.deepnet.mnist1d`,
made locally), on which depth matters: a linear classifier errs on ~69 % of the
validation set, one hidden layer on ~41 %, four on ~37 % (our trainer, 30 epochs). On
scikit-learn's 8x8 digits, the first version's data, every depth reached 2.5-3 %, so the
kernel's advantage on deeper nets could not show. Set-up as in the report (sec. 3.2,
after Snoek et al. 2012): Matern-5/2 GPs with slice-sampled hyperparameters, expected
improvement integrated over the samples, maximised over a Sobol grid (then refined).
Two surrogates:

* ``arc``: the arc kernel (:func:`bojax.gp.kernels.arc`) on the relevance-marked points;
* ``baseline``: a Matern-5/2 ARD GP that ignores relevance and sees the irrelevant
  dimensions filled at random (:func:`bojax.spaces.fill_irrelevant`).

Optionally peers run on the same conditional space with the same objective (the
``bench`` dependency group installs them): Optuna's TPE (``"tpe"``) and SMAC3's random
forest with a conditional ConfigSpace (``"smac"``), from :mod:`bojax.reports.peers`.
``seeds`` runs per method; a seed fixes the initial Sobol design, so the methods' runs
pair up by seed.

Figure 2: the median best-so-far error over seeds with a 95 % bootstrap band (seeds
resampled), and the final errors seed by seed with a Wilcoxon signed-rank test of the
paired differences.

Table 1: a data set of BO evaluations (each method's own runs, and all methods pooled),
at most ``table_points`` of them drawn at random, split into ``folds`` folds; six
models (separate linear / GP / arc GP per architecture, and joint linear / GP / arc GP)
predict the held-out validation errors, raw and log. NMSE = mean squared error /
variance of the held-out targets, mean +- standard error over folds. GP
hyperparameters are slice-sampled; the chain of each model continues from one fold to
the next (the training sets share most points), so only the first fold burns in.

The package by concern: :mod:`~.settings` (``config``), :mod:`~.runs` (the BO runs and
their statistics), :mod:`~.table1`, :mod:`~.figures` and :mod:`~.claims`; ``run`` here
puts them together.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from bojax.compilation import count_compilations
from bojax.objectives.deepnet import DATASETS
from bojax.reports import prepare_out, write_summary
from bojax.reports.arc_kernel.claims import claims, format_table
from bojax.reports.arc_kernel.figures import LABELS, median_band, plot_best_so_far, plot_depths
from bojax.reports.arc_kernel.runs import (
    best,
    best_so_far,
    bo_run_rows,
    bo_runs,
    depth_fractions,
    figure2_statistics,
    kept_runs,
    task_identity,
)
from bojax.reports.arc_kernel.settings import (
    MODELS,
    PEERS,
    REPORT_TABLE,
    SURROGATE_OF,
    Config,
    config,
)
from bojax.reports.arc_kernel.table1 import regression_table, regression_tables
from bojax.reports.provenance import begin

__all__ = [
    "LABELS", "MODELS", "PEERS", "REPORT_TABLE", "SURROGATE_OF", "Config", "bo_run_rows",
    "bo_runs", "claims", "config", "figure2_statistics", "format_table", "kept_runs",
    "median_band", "regression_table", "run", "task_identity",
]  # fmt: skip


def run(
    cfg: Config,
    out: str | Path,
    *,
    fresh: bool = False,
    progress: bool = True,
    executor: Any = None,
) -> dict:
    """Run the BO runs (each kept under ``out/runs``; a rerun continues or re-plots them;
    runs kept for other settings raise :class:`~bojax.errors.JournalError` unless
    ``fresh`` discards every kept run and table first),
    the Table 1 regressions (kept under ``out/table1``), the figures and ``summary.json``;
    return the summary. With ``executor`` (a ``concurrent.futures`` executor or a Dask
    client) the BO runs and the Table 1 data sets are tasks of their own."""
    out = prepare_out(out, "arc_kernel")
    if fresh:
        for folder in ("runs", "table1"):
            shutil.rmtree(out / folder, ignore_errors=True)
    data = DATASETS[cfg.dataset](cfg.data_seed)
    started = begin(cfg)
    methods = ("arc", "baseline", *cfg.peers)
    with count_compilations() as compilations:
        runs = bo_runs(cfg, methods, out / "runs", progress, executor)
        bo_seconds = started.seconds()
        sets = {**{m: runs[m] for m in methods}, "pooled": [r for m in methods for r in runs[m]]}
        tables = regression_tables(cfg, sets, out / "table1", progress, executor)
    files = {
        "figure2": plot_best_so_far(cfg, runs, out / "figure2_best_error.png"),
        "figure3": plot_depths(cfg, runs, out / "figure3_depth_fractions.png"),
    }
    summary = {
        "report": "arc kernel (Swersky et al. 2014)",
        "config": asdict(cfg),
        "dataset": {
            "name": data.name,
            "n_train": len(data.y_train),
            "n_validation": len(data.y_valid),
            "n_test": len(data.y_test),
        },
        "table1": tables["pooled"]["table"],
        "table1_data": tables["pooled"]["info"],
        "table1_by_method": {m: tables[m]["table"] for m in methods},
        "table1_data_by_method": {m: tables[m]["info"] for m in methods},
        "table1_report": {
            m: {"raw": list(raw), "log": list(log)} for m, (raw, log) in REPORT_TABLE.items()
        },
        "curves": {m: [best_so_far(r) for r in rs] for m, rs in runs.items()},
        "test_error_of_best": {m: [best([r])["test_error"] for r in rs] for m, rs in runs.items()},
        "figure2_statistics": figure2_statistics(cfg, runs),
        "depth_fractions": {m: depth_fractions(cfg, rs) for m, rs in runs.items()},
        "best": {m: best(rs) for m, rs in runs.items()},
        "final_best_median": {
            m: float(np.median([best_so_far(r)[-1] for r in rs])) for m, rs in runs.items()
        },
        "run_seconds": {
            m: [float(sum(row["seconds"] for row in r)) for r in rs] for m, rs in runs.items()
        },
        "this_process_seconds": {
            "bo_runs": bo_seconds,
            "total": started.seconds(),
        },
        "compilations_in_this_process": {
            "total": compilations.total,
            "network_training": compilations.of("_train_and_score"),
            "gp_fit": compilations.of("_fit"),
        },
        "figures": {k: v.name for k, v in files.items()},
    }
    return write_summary(out, summary, started, cfg, config(cfg.quick))
