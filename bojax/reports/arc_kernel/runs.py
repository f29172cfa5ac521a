"""The arc-kernel report's BO runs: bojax's two surrogates and the peers, one folder per
(method, seed) under ``runs/``, and the statistics of their best-so-far errors."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from bojax.bo.driver import minimize
from bojax.bo.journal import Journal
from bojax.errors import JournalError
from bojax.objectives.deepnet import DATASETS, DeepNetObjective, depth
from bojax.reports import CachedObjective, read_kept, run_tasks, write_kept
from bojax.reports.arc_kernel.settings import PEERS, SURROGATE_OF, Config
from bojax.reports.peers import PEERS as PEER_RECORDS
from bojax.reports.peers import run as run_peer
from bojax.reports.provenance import code_fingerprint


def task_identity(cfg: Config, method: str, seed: int) -> dict[str, Any]:
    """What a kept run depends on: its method and seed, the data and the BO budget."""
    keys = ("dataset", "data_seed", "max_layers", "initial", "iterations", "samples")
    keys += ("burn_in", "candidates")
    settings = {k: getattr(cfg, k) for k in keys} | {"training": asdict(cfg.training)}
    return {"method": method, "seed": seed, **settings}


_OBJECTIVES: dict[tuple, tuple[CachedObjective, Any]] = {}


def _objective(cfg: Config) -> tuple[CachedObjective, Any]:
    """The (cached) objective and space for ``cfg``'s data, once per process."""
    key = (cfg.dataset, cfg.data_seed, cfg.training)
    if key not in _OBJECTIVES:
        deepnet = DeepNetObjective(DATASETS[cfg.dataset](cfg.data_seed), cfg.training)
        _OBJECTIVES[key] = (CachedObjective(deepnet.evaluate, "log_error"), deepnet.space)
    return _OBJECTIVES[key]


def bo_run_rows(cfg: Config, method: str, seed: int, folder: Path, progress: bool) -> list[dict]:
    """One BO run (continued from its journal if one is kept), as rows with the
    validation and test errors; the rows are kept in ``folder/rows.json``."""
    objective, space = _objective(cfg)
    history = _bo_run(cfg, method, seed, objective, space, folder, progress)
    rows = _rows(history, objective)
    identity = task_identity(cfg, method, seed)
    kept = {"task": identity, "rows": rows, "code_fingerprint": code_fingerprint("arc_kernel")}
    write_kept(folder / "rows.json", kept)
    return rows


def kept_runs(out: Path) -> list[tuple[Path, str | None]]:
    """The BO runs kept under ``out/runs`` (their folders), each with the fingerprint of
    the code that made it (None: not recorded, or the run has not finished)."""
    found = []
    for folder in sorted((Path(out) / "runs").glob("*-seed*")):
        kept = read_kept(folder / "rows.json") or {}
        found.append((folder, kept.get("code_fingerprint")))
    return found


def bo_runs(cfg: Config, methods, runs_dir: Path, progress: bool, executor=None) -> dict:
    """Every (method, seed) run: kept rows are reused, missing runs run here or on
    ``executor``. Folders kept for other settings (another data set or budget; or not
    saying which) are never discarded here: they raise a :class:`JournalError` naming
    them, before any run (``run(..., fresh=True)`` discards them)."""
    from bojax.reports.arc_kernel.figures import LABELS

    rows: dict[tuple[str, int], list[dict]] = {}
    missing, other = [], []
    for method in methods:
        for seed in range(cfg.seeds):
            folder = runs_dir / f"{method}-seed{seed}"
            kept = read_kept(folder / "task.json")
            if kept != task_identity(cfg, method, seed) and folder.exists():
                if any(p.name != "task.json" for p in folder.iterdir()):  # not only task.json
                    other.append(folder)
    if other:
        raise JournalError(
            f"{runs_dir} keeps runs made with other settings (data set, budget): "
            f"{', '.join(p.name for p in other)}; this run would replace them"
        )
    for method in methods:
        for seed in range(cfg.seeds):
            folder = runs_dir / f"{method}-seed{seed}"
            identity = task_identity(cfg, method, seed)
            if read_kept(folder / "task.json") != identity:
                folder.mkdir(parents=True, exist_ok=True)
                write_kept(folder / "task.json", identity)
            done = read_kept(folder / "rows.json")
            if done is not None and len(done["rows"]) >= cfg.initial + cfg.iterations:
                rows[method, seed] = done["rows"]
            else:
                missing.append((method, seed, folder))

    def keep(task, done) -> None:
        rows[task] = done
        if progress:
            best = min(r["validation_error"] for r in done)
            print(f"  {LABELS[task[0]]}, seed {task[1]}: best error {best:.4f}", flush=True)

    # A local run shows each run's progress bar; on workers only the summaries print.
    show = progress and executor is None
    tasks = {(m, seed): (cfg, m, seed, folder, show) for m, seed, folder in missing}
    run_tasks(bo_run_rows, tasks, keep, executor)
    return {m: [rows[m, seed] for seed in range(cfg.seeds)] for m in methods}


def _bo_run(cfg: Config, method, seed, objective, space, folder: Path, progress) -> list[dict]:
    if method in PEERS:
        return _peer_run(cfg, method, seed, objective, space, folder)
    result = minimize(
        objective,
        space,
        surrogate=SURROGATE_OF[method],
        acquisition="ei",
        optimizer="sobol",
        iterations=cfg.iterations,
        initial=cfg.initial,
        seed=seed,
        num_candidates=cfg.candidates,
        samples=cfg.samples,
        burn_in=cfg.burn_in,
        out=folder,
        resume=Journal(folder).exists(),
        progress=progress,
    )
    return result.history


def _peer_run(cfg: Config, peer: str, seed: int, objective, space, folder: Path) -> list[dict]:
    """A peer's run on the same conditional space (:mod:`bojax.reports.peers`):
    ``initial`` random start-up trials, then its model; a finished run is kept in
    ``folder/history.json``."""
    path, budget = folder / "history.json", cfg.initial + cfg.iterations
    history = read_kept(path)
    if history is not None and len(history) == budget:
        return history
    folder.mkdir(parents=True, exist_ok=True)
    optimiser = PEER_RECORDS[peer].make(
        space, seed=seed, initial=cfg.initial, budget=budget, folder=folder
    )
    history = run_peer(optimiser, objective, budget, initial=cfg.initial)
    write_kept(path, history, indent=1)
    return history


def _rows(history: list[dict], objective: CachedObjective) -> list[dict[str, Any]]:
    rows = []
    for record in history:
        if record["status"] != "ok":
            continue
        rows.append(
            {
                "iteration": record["iteration"],
                "phase": record["phase"],
                "point": record["x"],
                "seconds": record["seconds"],
                **objective.evaluate(record["x"]),
            }
        )
    return rows


def best_so_far(rows: list[dict]) -> list[float]:
    return np.minimum.accumulate([row["validation_error"] for row in rows]).tolist()


def curves(rows_per_seed: list[list[dict]]) -> np.ndarray:
    """Best-so-far errors, one row per seed, cut to the shortest run."""
    found = [best_so_far(rows) for rows in rows_per_seed]
    length = min(len(c) for c in found)
    return np.array([c[:length] for c in found])


def best(rows_per_seed: list[list[dict]]) -> dict[str, Any]:
    row = min((row for rows in rows_per_seed for row in rows), key=lambda r: r["log_error"])
    return {k: row[k] for k in ("point", "validation_error", "test_error", "iteration")}


def depth_fractions(cfg: Config, rows_per_seed: list[list[dict]]) -> list[float]:
    """Fraction of the BO-phase evaluations (after the initial design) at each depth."""
    depths = [depth(r["point"]) for rows in rows_per_seed for r in rows if r["phase"] != "initial"]
    counts = np.bincount(depths, minlength=cfg.max_layers + 1)
    return (counts / max(counts.sum(), 1)).tolist()


def figure2_statistics(cfg: Config, runs: dict) -> dict[str, Any]:
    """Final best validation errors per seed, and for each other method against ``arc``:
    the paired differences (arc - other, by seed), their mean with a 95 % bootstrap
    interval, the number of seeds arc wins / ties / loses, and the two-sided Wilcoxon
    signed-rank p-value (exact for few seeds; zero differences dropped)."""
    from scipy.stats import wilcoxon

    finals = {m: curves(rs)[:, -1] for m, rs in runs.items()}
    rng = np.random.default_rng([cfg.data_seed, 3])
    stats: dict[str, Any] = {"final_best": {m: f.tolist() for m, f in finals.items()}}
    for other in finals:
        if other == "arc":
            continue
        diff = finals["arc"] - finals[other]
        means = diff[rng.integers(0, len(diff), size=(cfg.bootstrap, len(diff)))].mean(axis=1)
        nonzero = diff[diff != 0]
        p = float(wilcoxon(nonzero).pvalue) if len(nonzero) >= 1 else 1.0
        stats[f"arc_vs_{other}"] = {
            "mean_difference": float(diff.mean()),
            "interval_95": np.percentile(means, [2.5, 97.5]).tolist(),
            "arc_wins": int(np.sum(diff < 0)),
            "ties": int(np.sum(diff == 0)),
            "arc_loses": int(np.sum(diff > 0)),
            "wilcoxon_p": p,
        }
    return stats
