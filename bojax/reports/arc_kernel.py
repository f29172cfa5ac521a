"""The arc-kernel report (Swersky et al. 2014): Table 1 and Figures 2-3 on real data.

BO of MLP classifiers with 0 to 5 hidden layers (:mod:`bojax.objectives.deepnet`: 23 conditional
hyperparameters, 6 architectures, scikit-learn's digits instead of MNIST/CIFAR-10),
minimising the log validation error as the report does on MNIST. Set-up as in the
report (sec. 3.2, after Snoek et al. 2012): Matern-5/2 GPs with slice-sampled
hyperparameters, expected improvement integrated over the samples, maximised over a
Sobol grid of the unit cube (then refined). Two surrogates:

* ``arc``: the arc kernel (:func:`bojax.gp.kernels.arc`) on the relevance-marked points;
* ``baseline``: a Matern-5/2 ARD GP that ignores relevance and sees the irrelevant
  dimensions filled at random (:func:`bojax.spaces.fill_irrelevant`).

Optionally Optuna's TPE (``peers=("tpe",)``, needs the ``bench`` dependency group) runs
on the same conditional space with the same objective.

Table 1: all evaluations of all BO runs are pooled into one regression data set and
split into ``folds`` folds; six models (separate linear / GP / arc GP per architecture,
and joint linear / GP / arc GP) predict the held-out validation errors, raw and log.
NMSE = mean squared error / variance of the held-out targets, mean +- standard error
over folds. GP hyperparameters are slice-sampled; the chain of each model continues
from one fold to the next (the training sets share most points), so only the first
fold burns in.
"""

from __future__ import annotations

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
from bojax.objectives.deepnet import DeepNetObjective, Training, deepnet_space, depth, digits
from bojax.reports import CachedObjective, override, pyplot
from bojax.reports.claims import Claim, verdict
from bojax.reports.provenance import stamp
from bojax.spaces import IRRELEVANT, Integer, fill_irrelevant
from bojax.surrogates import GPSurrogate

SURROGATE_OF = {"arc": "gp-slice-arc", "baseline": "gp-slice-filled"}
LABELS = {"arc": "arc GP", "baseline": "GP, random fill (report's baseline)", "tpe": "Optuna TPE"}
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


def config(quick: bool = False, **overrides: Any) -> Config:
    """The settings (``quick``: a few minutes on 2 cores); ``overrides`` replace fields
    (``max_layers`` and ``epochs`` also shrink the search space and the training)."""
    cfg = (
        Config(True, 2, 4, 4, 8, 32, 512, 3, 16, 8)
        if quick
        else Config(False, 3, 10, 30, 32, 128, 2048, 10, 40, 20)
    )
    epochs = overrides.pop("epochs", None)
    if epochs is not None:
        cfg = replace(cfg, training=replace(cfg.training, epochs=epochs))
    if "peers" in overrides:
        overrides["peers"] = tuple(overrides["peers"])
        unknown = set(overrides["peers"]) - {"tpe"}
        if unknown:
            raise SettingsError(f"unknown peers {sorted(unknown)}; available: ['tpe']")
    cfg = override(cfg, overrides)
    if cfg.seeds < 1 or cfg.folds < 2 or cfg.initial < 1:
        raise SettingsError("need seeds >= 1, folds >= 2 and initial >= 1")
    if cfg.training.max_layers != cfg.max_layers:
        cfg = replace(cfg, training=replace(cfg.training, max_layers=cfg.max_layers))
    return cfg


def run(cfg: Config, out: str | Path, *, fresh: bool = False, progress: bool = True) -> dict:
    """Run the BO runs (journalled under ``out/runs``; a rerun continues or re-plots them),
    the Table 1 regression, the figures and ``summary.json``; return the summary."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if fresh and (out / "runs").exists():
        shutil.rmtree(out / "runs")
    deepnet = DeepNetObjective(digits(cfg.data_seed), cfg.training)
    objective = CachedObjective(deepnet.evaluate, "log_error")
    started = time.perf_counter()
    runs: dict[str, list[list[dict]]] = {}
    with count_compilations() as compilations:
        for method in ("arc", "baseline", *cfg.peers):
            runs[method] = []
            for seed in range(cfg.seeds):
                folder = out / "runs" / f"{method}-seed{seed}"
                if progress:
                    print(f"{LABELS[method]}, seed {seed}")
                history = _bo_run(cfg, method, seed, objective, deepnet.space, folder, progress)
                runs[method].append(_rows(history, objective))
        bo_seconds = time.perf_counter() - started
        table, table_info = regression_table(cfg, [r for m in runs.values() for r in m])
    files = {
        "figure2": _plot_best_so_far(cfg, runs, out / "figure2_best_error.png"),
        "figure3": _plot_depths(cfg, runs, out / "figure3_depth_fractions.png"),
    }
    summary = {
        "report": "arc kernel (Swersky et al. 2014)",
        "config": asdict(cfg),
        "dataset": {
            "name": deepnet.data.name,
            "n_train": len(deepnet.data.y_train),
            "n_validation": len(deepnet.data.y_valid),
            "n_test": len(deepnet.data.y_test),
        },
        "table1": table,
        "table1_report": {
            m: {"raw": list(raw), "log": list(log)} for m, (raw, log) in REPORT_TABLE.items()
        },
        "table1_data": table_info,
        "curves": {m: [_best_so_far(r) for r in rs] for m, rs in runs.items()},
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


def _bo_run(cfg: Config, method, seed, objective, space, folder: Path, progress) -> list[dict]:
    if method == "tpe":
        return _tpe_run(cfg, seed, objective, space, folder)
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


def _tpe_run(cfg: Config, seed: int, objective, space, folder: Path) -> list[dict]:
    """Optuna's TPE on the same conditional space (define-by-run), ``initial`` random
    start-up trials then TPE; a finished run is kept in ``folder/history.json``."""
    path = folder / "history.json"
    if path.exists():
        history = json.loads(path.read_text())
        if len(history) == cfg.initial + cfg.iterations:
            return history
    try:
        import optuna
    except ImportError:
        raise SettingsError(
            "peers=('tpe',) needs Optuna: uv sync --group bench (or pip install optuna)"
        ) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    history: list[dict] = []

    def suggest(trial) -> dict[str, Any]:
        point = {}
        for p in space.parameters:
            c = p.condition
            if c is not None and (c.parent not in point or not c.holds(point[c.parent])):
                continue
            if isinstance(p, Integer):
                point[p.name] = trial.suggest_int(p.name, p.low, p.high, log=p.log)
            else:
                point[p.name] = trial.suggest_float(p.name, p.low, p.high, log=p.log)
        return point

    def optuna_objective(trial) -> float:
        point = suggest(trial)
        tick = time.perf_counter()
        value = objective(point)
        phase = "initial" if trial.number < cfg.initial else "bo"
        history.append(
            {
                "iteration": trial.number,
                "phase": phase,
                "x": point,
                "y": value,
                "status": "ok",
                "seconds": time.perf_counter() - tick,
            }
        )
        return value

    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=cfg.initial)
    study = optuna.create_study(sampler=sampler)
    study.optimize(optuna_objective, n_trials=cfg.initial + cfg.iterations)
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(history, indent=1))
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


def regression_table(
    cfg: Config, runs: list[list[dict]], models: tuple[str, ...] = MODELS
) -> tuple[dict, dict]:
    """NMSE (mean, standard error over folds) of each of ``models`` on raw and log outputs,
    and facts about the pooled data."""
    space = deepnet_space(cfg.max_layers, cfg.training.max_units)
    rows = [row for rows in runs for row in rows]
    # Points evaluated twice (by different runs) are kept once.
    unique = {json.dumps(r["point"], sort_keys=True): r for r in rows}
    rows = list(unique.values())
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

COLOURS = {"arc": "tab:red", "baseline": "tab:blue", "tpe": "tab:green"}


def _plot_best_so_far(cfg: Config, runs: dict, path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for method, rows_per_seed in runs.items():
        curves = [_best_so_far(rows) for rows in rows_per_seed]
        length = min(len(c) for c in curves)
        curves = 100 * np.array([c[:length] for c in curves])
        x = np.arange(1, length + 1)
        q1, median, q3 = np.percentile(curves, [25, 50, 75], axis=0)
        ax.plot(x, median, color=COLOURS[method], label=f"{LABELS[method]} (median)")
        ax.fill_between(x, q1, q3, color=COLOURS[method], alpha=0.2, lw=0)
    ax.axvline(cfg.initial + 0.5, color="0.5", ls=":", lw=1, label="end of initial design")
    ax.set(
        xlabel="function evaluations",
        ylabel="best validation error so far (%)",
        yscale="log",
        title=f"Figure 2: BO of MLPs on digits, {cfg.seeds} seeds (median, quartiles)",
    )
    ax.legend(fontsize=8)
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
    curves = summary["curves"]
    finals = {m: [c[-1] for c in cs] for m, cs in curves.items()}
    wins = sum(a < b for a, b in zip(finals["arc"], finals["baseline"], strict=True))
    median = summary["final_best_median"]
    depths = summary["depth_fractions"]
    shallow = {m: sum(f[:2]) for m, f in depths.items()}
    return [
        Claim(
            "arc kernel",
            "Table 1: the arc GP predicts BO data best (lowest NMSE)",
            verdict(len(arc_best) == 2, len(arc_best) == 1),
            "; ".join(
                f"{column}: best {best[column]} {table[best[column]][column][0]:.3f}, arc GP "
                f"{table['arc GP'][column][0]:.3f} +- {table['arc GP'][column][1]:.3f}"
                for column in ("raw", "log")
            ),
            "reproduced if the arc GP is lowest on raw and log outputs; partly if on one",
        ),
        Claim(
            "arc kernel",
            "Figure 2: BO with the arc kernel finds lower errors than the baseline",
            verdict(
                median["arc"] < median["baseline"] and wins == len(finals["arc"]) >= 5,
                median["arc"] < median["baseline"],
            ),
            f"median final best error arc {median['arc']:.4f}, baseline "
            f"{median['baseline']:.4f}; arc lower in {wins} of {len(finals['arc'])} seeds",
            "reproduced if the median is lower and the arc run wins on every seed of at least "
            "5; partly if only the median is lower",
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
    """Table 1 as text: ours beside the report's, NMSE mean +- standard error."""
    lines = [
        f"Table 1: NMSE, {summary['table1_data']['folds']}-fold CV on "
        f"{summary['table1_data']['points']} BO evaluations (report: MNIST BO data)",
        f"{'model':<17} {'ours, raw':>15} {'ours, log':>15} {'report, raw':>15} "
        f"{'report, log':>15}",
    ]
    for model in MODELS:
        ours = summary["table1"][model]
        theirs = summary["table1_report"][model]
        cells = [ours["raw"], ours["log"], theirs["raw"], theirs["log"]]
        lines.append(f"{model:<17} " + " ".join(f"{m:>7.3f} +- {s:.3f}" for m, s in cells))
    return "\n".join(lines)
