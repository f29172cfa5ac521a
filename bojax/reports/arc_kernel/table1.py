"""The arc-kernel report's Table 1: how well six regression models predict the BO runs'
validation errors (NMSE over cross-validation folds)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bojax import gp
from bojax.objectives.deepnet import deepnet_space, depth
from bojax.reports import read_kept, run_tasks, write_kept
from bojax.reports.arc_kernel.settings import MODELS, Config
from bojax.spaces import IRRELEVANT, fill_irrelevant
from bojax.surrogates import GPSurrogate


def regression_tables(cfg: Config, sets: dict, folder: Path, progress: bool, executor=None):
    """:func:`regression_table` of each named data set (a list of runs' rows), each kept in
    ``folder/<name>.json`` with what it was computed from; on ``executor`` if given."""
    folder.mkdir(parents=True, exist_ok=True)
    settings = {k: getattr(cfg, k) for k in ("folds", "table_burn_in", "table_samples")}
    settings |= {"table_points": cfg.table_points, "data_seed": cfg.data_seed}
    results, missing = {}, {}
    for name, runs in sets.items():
        rows = [row for rows in runs for row in rows]
        digest = hashlib.sha256(json.dumps([rows, settings], sort_keys=True).encode()).hexdigest()
        path = folder / f"{name}.json"
        kept = read_kept(path, "digest", digest)
        if kept is not None:
            results[name] = kept
        else:
            missing[name] = (runs, path, digest)

    def keep(name: str, table_and_info) -> None:
        table, info = table_and_info
        _, path, digest = missing[name]
        results[name] = {"table": table, "info": info, "digest": digest}
        write_kept(path, results[name])
        if progress:
            log = {m: table[m]["log"][0] for m in table}
            print(f"  Table 1 on {name}: best (log) {min(log, key=log.get)}", flush=True)

    tasks = {name: (cfg, runs) for name, (runs, _, _) in missing.items()}
    run_tasks(regression_table, tasks, keep, executor)
    return results


def regression_table(
    cfg: Config, runs: list[list[dict]], models: tuple[str, ...] = MODELS
) -> tuple[dict, dict]:
    """NMSE (mean, standard error over folds) of each of ``models`` on raw and log outputs,
    and facts about the data: the runs' evaluations, each point once, at most
    ``cfg.table_points`` of them drawn at random."""
    space = deepnet_space(cfg.max_layers, cfg.training.max_units)
    rows = [row for rows in runs for row in rows]
    # Points evaluated twice (by different runs) are kept once.
    unique = {json.dumps(r["point"], sort_keys=True): r for r in rows}
    rows = list(unique.values())
    available = len(rows)
    if available > cfg.table_points:
        keep = np.random.default_rng([cfg.data_seed, 1]).choice(
            available, cfg.table_points, replace=False
        )
        rows = [rows[i] for i in np.sort(keep)]
    u = space.to_unit([r["point"] for r in rows])
    depths = np.array([depth(r["point"]) for r in rows])
    targets = {
        "raw": np.array([r["validation_error"] for r in rows]),
        "log": np.array([r["log_error"] for r in rows]),
    }
    folds = np.random.default_rng(cfg.data_seed).permutation(len(rows)) % cfg.folds
    table: dict[str, dict[str, list[float]]] = {}
    for output, y in targets.items():
        scores = {m: [] for m in models}
        chains: dict[Any, Any] = {}
        for fold in range(cfg.folds):
            train, test = folds != fold, folds == fold
            for model in models:
                prediction = _predict(cfg, model, chains, fold, u, depths, y, train, test)
                residual = y[test] - prediction
                scores[model].append(float(np.mean(residual**2) / np.var(y[test])))
        table[output] = {
            m: [float(np.mean(s)), float(np.std(s, ddof=1) / np.sqrt(len(s)))]
            for m, s in scores.items()
        }
    info = {
        "points": len(rows),
        "points_available": available,
        "points_per_depth": np.bincount(depths, minlength=cfg.max_layers + 1).tolist(),
        "folds": cfg.folds,
    }
    return {m: {o: table[o][m] for o in targets} for m in models}, info


def _linear(x_train, y_train, x_test) -> np.ndarray:
    """Least squares with an intercept (a 1e-6 ridge keeps rank-deficient fits defined)."""
    design = np.column_stack([np.ones(len(x_train)), x_train])
    gram = design.T @ design + 1e-6 * np.eye(design.shape[1])
    weights = np.linalg.solve(gram, design.T @ y_train)
    return np.column_stack([np.ones(len(x_test)), x_test]) @ weights


def _gp(cfg: Config, kernel: str, chains: dict, name, key, x_train, y_train, x_test):
    """Posterior mean (averaged over slice samples) of a Matern-5/2-based GP."""
    shift, scale = y_train.mean(), y_train.std()
    scale = scale if scale > 1e-12 else 1.0
    surrogate = GPSurrogate(
        model=gp.GP(kernel=kernel),
        method="slice",
        num_samples=cfg.table_samples,
        burn_in=cfg.table_burn_in,
    )
    state = chains.get(name) or surrogate.init(x_train.shape[1])
    state = surrogate.fit(key, state, gp.make_data(x_train, (y_train - shift) / scale))
    chains[name] = state
    mean, _ = surrogate.predict(state, jnp.asarray(x_test))
    return shift + scale * np.asarray(jnp.mean(mean, axis=0))


def _predict(cfg, model, chains, fold, u, depths, y, train, test) -> np.ndarray:
    key = jax.random.fold_in(jax.random.key(cfg.data_seed), fold)
    if not model.startswith("separate"):
        if model == "linear":
            filled = np.asarray(fill_irrelevant(u))
            return _linear(filled[train], y[train], filled[test])
        kernel = "arc" if model == "arc GP" else "matern52-filled"
        return _gp(cfg, kernel, chains, model, key, u[train], y[train], u[test])
    # One model per architecture, on that architecture's (always relevant) dimensions.
    prediction = np.full(int(test.sum()), y[train].mean())
    for d in np.unique(depths[test]):
        tr, te = train & (depths == d), (depths == d)[test]
        if tr.sum() < 3:  # too few points of this depth to fit: its training mean, or all's
            prediction[te] = y[tr].mean() if tr.any() else y[train].mean()
            continue
        # The relevant dimensions, less "layers" (constant within one architecture).
        columns = np.flatnonzero(u[depths == d][0] != IRRELEVANT)[1:]
        x_tr, x_te = u[tr][:, columns], u[test & (depths == d)][:, columns]
        if model == "separate linear":
            prediction[te] = _linear(x_tr, y[tr], x_te)
        else:
            kernel = "arc" if model == "separate arc GP" else "matern52"
            prediction[te] = _gp(cfg, kernel, chains, (model, d), key, x_tr, y[tr], x_te)
    return prediction
