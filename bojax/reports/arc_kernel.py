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
forest with a conditional ConfigSpace (``"smac"``, its hyperparameter-optimisation
facade). ``seeds`` runs per method; a
seed fixes the initial Sobol design, so the methods' runs pair up by seed.

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
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bojax import gp
from bojax.bo.driver import minimize
from bojax.bo.journal import Journal
from bojax.compilation import count_compilations
from bojax.errors import SettingsError
from bojax.objectives.deepnet import DATASETS, DeepNetObjective, Training, deepnet_space, depth
from bojax.reports import CachedObjective, override, pyplot, run_tasks
from bojax.reports.claims import Claim, verdict
from bojax.reports.provenance import code_fingerprint, stamp
from bojax.spaces import IRRELEVANT, Integer, fill_irrelevant
from bojax.surrogates import GPSurrogate

SURROGATE_OF = {"arc": "gp-slice-arc", "baseline": "gp-slice-filled"}
LABELS = {
    "arc": "arc GP",
    "baseline": "GP, random fill (report's baseline)",
    "tpe": "Optuna TPE",
    "smac": "SMAC3 random forest",
}
SHORT = {"arc": "arc GP", "baseline": "random fill", "tpe": "TPE", "smac": "SMAC3"}
PEERS = ("tpe", "smac")
MODELS = ("separate linear", "separate GP", "separate arc GP", "linear", "GP", "arc GP")
# The report's Table 1 (MNIST BO data): NMSE mean and standard error, raw and log outputs.
REPORT_TABLE = {
    "separate linear": ((0.812, 0.045), (0.737, 0.049)),
    "separate GP": ((0.546, 0.038), (0.446, 0.041)),
    "separate arc GP": ((0.535, 0.030), (0.440, 0.031)),
    "linear": ((0.876, 0.043), (0.834, 0.047)),
    "GP": ((0.481, 0.031), (0.401, 0.028)),
    "arc GP": ((0.421, 0.033), (0.335, 0.028)),
}


@dataclass(frozen=True)
class Config:
    """Everything that defines one reproduction."""

    quick: bool
    seeds: int  # BO runs per method (seeds 0..seeds-1)
    initial: int  # Sobol points before BO
    iterations: int  # BO iterations per run
    samples: int  # slice draws per BO fit (the chain continues across iterations)
    burn_in: int  # slice sweeps before the first BO fit
    candidates: int  # Sobol grid scored per acquisition maximisation
    folds: int  # Table 1 cross-validation folds
    table_burn_in: int  # slice sweeps before the first fold's fit, per model
    table_samples: int  # slice draws per fold and model
    training: Training = field(default_factory=Training)
    max_layers: int = 5
    data_seed: int = 0
    peers: tuple[str, ...] = ()
    dataset: str = "mnist1d"
    table_points: int = 200  # at most this many evaluations per Table 1 data set
    bootstrap: int = 2000  # resamples of the seeds for Figure 2's band


def config(quick: bool = False, **overrides: Any) -> Config:
    """The settings (``quick``: a few minutes on 2 cores); ``overrides`` replace fields
    (``max_layers`` and ``epochs`` also shrink the search space and the training)."""
    cfg = (
        Config(True, 2, 4, 4, 8, 32, 512, 3, 16, 8, Training(epochs=10), table_points=60)
        if quick
        else Config(False, 10, 10, 30, 32, 128, 2048, 5, 40, 20)
    )
    epochs = overrides.pop("epochs", None)
    if epochs is not None:
        cfg = replace(cfg, training=replace(cfg.training, epochs=epochs))
    if "peers" in overrides:
        overrides["peers"] = tuple(overrides["peers"])
        unknown = set(overrides["peers"]) - set(PEERS)
        if unknown:
            raise SettingsError(f"unknown peers {sorted(unknown)}; available: {list(PEERS)}")
    cfg = override(cfg, overrides)
    if cfg.seeds < 1 or cfg.folds < 2 or cfg.initial < 1:
        raise SettingsError("need seeds >= 1, folds >= 2 and initial >= 1")
    if cfg.dataset not in DATASETS:
        raise SettingsError(f"unknown dataset {cfg.dataset!r}; available: {sorted(DATASETS)}")
    if cfg.table_points < 2 * cfg.folds or cfg.bootstrap < 1:
        raise SettingsError("need table_points >= 2 * folds and bootstrap >= 1")
    if cfg.training.max_layers != cfg.max_layers:
        cfg = replace(cfg, training=replace(cfg.training, max_layers=cfg.max_layers))
    return cfg


def run(
    cfg: Config,
    out: str | Path,
    *,
    fresh: bool = False,
    progress: bool = True,
    executor: Any = None,
) -> dict:
    """Run the BO runs (each kept under ``out/runs``; a rerun continues or re-plots them),
    the Table 1 regressions (kept under ``out/table1``), the figures and ``summary.json``;
    return the summary. With ``executor`` (a ``concurrent.futures`` executor or a Dask
    client) the BO runs and the Table 1 data sets are tasks of their own."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if fresh:
        for folder in ("runs", "table1"):
            shutil.rmtree(out / folder, ignore_errors=True)
    data = DATASETS[cfg.dataset](cfg.data_seed)
    started = time.perf_counter()
    methods = ("arc", "baseline", *cfg.peers)
    with count_compilations() as compilations:
        runs = bo_runs(cfg, methods, out / "runs", progress, executor)
        bo_seconds = time.perf_counter() - started
        sets = {**{m: runs[m] for m in methods}, "pooled": [r for m in methods for r in runs[m]]}
        tables = regression_tables(cfg, sets, out / "table1", progress, executor)
    files = {
        "figure2": _plot_best_so_far(cfg, runs, out / "figure2_best_error.png"),
        "figure3": _plot_depths(cfg, runs, out / "figure3_depth_fractions.png"),
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
        "curves": {m: [_best_so_far(r) for r in rs] for m, rs in runs.items()},
        "test_error_of_best": {m: [_best([r])["test_error"] for r in rs] for m, rs in runs.items()},
        "figure2_statistics": figure2_statistics(cfg, runs),
        "depth_fractions": {m: _depth_fractions(cfg, rs) for m, rs in runs.items()},
        "best": {m: _best(rs) for m, rs in runs.items()},
        "final_best_median": {
            m: float(np.median([_best_so_far(r)[-1] for r in rs])) for m, rs in runs.items()
        },
        "run_seconds": {
            m: [float(sum(row["seconds"] for row in r)) for r in rs] for m, rs in runs.items()
        },
        "this_process_seconds": {
            "bo_runs": bo_seconds,
            "total": time.perf_counter() - started,
        },
        "compilations_in_this_process": {
            "total": compilations.total,
            "network_training": compilations.of("_train_and_score"),
            "gp_fit": compilations.of("_fit"),
        },
        "figures": {k: v.name for k, v in files.items()},
    }
    summary = stamp(summary, started, cfg, config(cfg.quick))
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


# -- the BO runs -------------------------------------------------------------------------------


def _task_identity(cfg: Config, method: str, seed: int) -> dict[str, Any]:
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
    identity = _task_identity(cfg, method, seed)
    kept = {"task": identity, "rows": rows, "code_fingerprint": code_fingerprint()}
    (folder / "rows.json").write_text(json.dumps(kept))
    return rows


def kept_runs(out: Path) -> list[tuple[Path, str | None]]:
    """The BO runs kept under ``out/runs`` (their folders), each with the fingerprint of
    the code that made it (None: not recorded, or the run has not finished)."""
    found = []
    for folder in sorted((Path(out) / "runs").glob("*-seed*")):
        saved = folder / "rows.json"
        kept = json.loads(saved.read_text()) if saved.exists() else {}
        found.append((folder, kept.get("code_fingerprint")))
    return found


def bo_runs(cfg: Config, methods, runs_dir: Path, progress: bool, executor=None) -> dict:
    """Every (method, seed) run: kept rows are reused, a folder kept for other settings
    (another data set or budget) is discarded, missing runs run here or on ``executor``."""
    rows: dict[tuple[str, int], list[dict]] = {}
    missing = []
    for method in methods:
        for seed in range(cfg.seeds):
            folder = runs_dir / f"{method}-seed{seed}"
            identity = _task_identity(cfg, method, seed)
            task_file = folder / "task.json"
            kept = json.loads(task_file.read_text()) if task_file.exists() else None
            if kept != identity:
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True)
                task_file.write_text(json.dumps(identity))
            saved = folder / "rows.json"
            done = json.loads(saved.read_text()) if saved.exists() else None
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
    """A peer's run on the same conditional space: ``initial`` random start-up trials, then
    its model; a finished run is kept in ``folder/history.json``."""
    path = folder / "history.json"
    if path.exists():
        history = json.loads(path.read_text())
        if len(history) == cfg.initial + cfg.iterations:
            return history
    history: list[dict] = []

    def record(point: dict[str, Any]) -> float:
        tick = time.perf_counter()
        value = objective(point)
        history.append(
            {
                "iteration": len(history),
                "phase": "initial" if len(history) < cfg.initial else "bo",
                "x": point,
                "y": value,
                "status": "ok",
                "seconds": time.perf_counter() - tick,
            }
        )
        return value

    (_tpe if peer == "tpe" else _smac)(cfg, seed, space, record, folder)
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(history, indent=1))
    return history


def _missing_peer(peer: str, package: str) -> SettingsError:
    return SettingsError(
        f"peers=('{peer}',) needs {package}: uv sync --group bench (or pip install {package})"
    )


def _tpe(cfg: Config, seed: int, space, record, folder: Path) -> None:
    """Optuna's TPE, define-by-run: a layer's parameters are asked for only if it exists."""
    try:
        import optuna
    except ImportError:
        raise _missing_peer("tpe", "optuna") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def suggest(trial) -> float:
        point = {}
        for p in space.parameters:
            c = p.condition
            if c is not None and (c.parent not in point or not c.holds(point[c.parent])):
                continue
            if isinstance(p, Integer):
                point[p.name] = trial.suggest_int(p.name, p.low, p.high, log=p.log)
            else:
                point[p.name] = trial.suggest_float(p.name, p.low, p.high, log=p.log)
        return record(point)

    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=cfg.initial)
    study = optuna.create_study(sampler=sampler)
    study.optimize(suggest, n_trials=cfg.initial + cfg.iterations)


def _smac(cfg: Config, seed: int, space, record, folder: Path) -> None:
    """SMAC3's hyperparameter-optimisation facade (random forest, log EI, local and random
    search) on a ConfigSpace with the same conditions: layer k's parameters are active
    when ``layers > k - 1``. ``initial`` random configurations start it."""
    try:
        import ConfigSpace as cs
        from smac import HyperparameterOptimizationFacade, Scenario
        from smac.initial_design import RandomInitialDesign
    except ImportError:
        raise _missing_peer("smac", "smac") from None
    import logging

    logging.getLogger("smac").setLevel(logging.ERROR)
    configspace = cs.ConfigurationSpace(seed=seed)
    made = {}
    for p in space.parameters:
        kind = cs.Integer if isinstance(p, Integer) else cs.Float
        made[p.name] = kind(p.name, (p.low, p.high), log=p.log)
    configspace.add(list(made.values()))
    conditions = []
    for p in space.parameters:
        c = p.condition
        if c is not None:
            if c.op != ">=":
                raise SettingsError(f"the SMAC3 peer handles '>=' conditions only, not {c.op!r}")
            conditions.append(cs.GreaterThanCondition(made[p.name], made[c.parent], c.value - 1))
    configspace.add(conditions)
    scenario = Scenario(
        configspace,
        deterministic=True,
        n_trials=cfg.initial + cfg.iterations,
        seed=seed,
        output_directory=folder / "smac",
    )
    initial = RandomInitialDesign(scenario, n_configs=cfg.initial)
    smac = HyperparameterOptimizationFacade(
        scenario,
        lambda config, seed=0: record(dict(config)),
        initial_design=initial,
        overwrite=True,
        logging_level=40,
    )
    smac.optimize()


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


def _best_so_far(rows: list[dict]) -> list[float]:
    return np.minimum.accumulate([row["validation_error"] for row in rows]).tolist()


def _best(rows_per_seed: list[list[dict]]) -> dict[str, Any]:
    best = min((row for rows in rows_per_seed for row in rows), key=lambda r: r["log_error"])
    return {k: best[k] for k in ("point", "validation_error", "test_error", "iteration")}


def _depth_fractions(cfg: Config, rows_per_seed: list[list[dict]]) -> list[float]:
    """Fraction of the BO-phase evaluations (after the initial design) at each depth."""
    depths = [depth(r["point"]) for rows in rows_per_seed for r in rows if r["phase"] != "initial"]
    counts = np.bincount(depths, minlength=cfg.max_layers + 1)
    return (counts / max(counts.sum(), 1)).tolist()


# -- Table 1 --------------------------------------------------------------------------------


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
        kept = json.loads(path.read_text()) if path.exists() else None
        if kept is not None and kept["digest"] == digest:
            results[name] = kept
        else:
            missing[name] = (runs, path, digest)

    def keep(name: str, table_and_info) -> None:
        table, info = table_and_info
        _, path, digest = missing[name]
        results[name] = {"table": table, "info": info, "digest": digest}
        path.write_text(json.dumps(results[name]))
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


# -- figures ---------------------------------------------------------------------------------

COLOURS = {"arc": "tab:red", "baseline": "tab:blue", "tpe": "tab:green", "smac": "tab:purple"}


def _curves(rows_per_seed: list[list[dict]]) -> np.ndarray:
    curves = [_best_so_far(rows) for rows in rows_per_seed]
    length = min(len(c) for c in curves)
    return np.array([c[:length] for c in curves])


def median_band(cfg: Config, curves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The median over seeds (rows) at each step, and the 2.5 / 97.5 percentiles of the
    medians of ``cfg.bootstrap`` resamples of the seeds (a percentile bootstrap band)."""
    rng = np.random.default_rng([cfg.data_seed, 2])
    picks = rng.integers(0, len(curves), size=(cfg.bootstrap, len(curves)))
    medians = np.median(curves[picks], axis=1)
    low, high = np.percentile(medians, [2.5, 97.5], axis=0)
    return np.median(curves, axis=0), low, high


def figure2_statistics(cfg: Config, runs: dict) -> dict[str, Any]:
    """Final best validation errors per seed, and for each other method against ``arc``:
    the paired differences (arc - other, by seed), their mean with a 95 % bootstrap
    interval, the number of seeds arc wins / ties / loses, and the two-sided Wilcoxon
    signed-rank p-value (exact for few seeds; zero differences dropped)."""
    from scipy.stats import wilcoxon

    finals = {m: _curves(rs)[:, -1] for m, rs in runs.items()}
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


def _plot_best_so_far(cfg: Config, runs: dict, path: Path) -> Path:
    plt = pyplot()
    fig, (ax, paired) = plt.subplots(
        1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1.6, 1]}
    )
    for method, rows_per_seed in runs.items():
        curves = 100 * _curves(rows_per_seed)
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
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _plot_depths(cfg: Config, runs: dict, path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    depths = np.arange(cfg.max_layers + 1)
    width = 0.8 / len(runs)
    for i, (method, rows_per_seed) in enumerate(runs.items()):
        fractions = _depth_fractions(cfg, rows_per_seed)
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
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


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
