"""The BNN-surrogate report (Agrawal 2016): Figures 6-11 with :mod:`bojax.surrogates.bnn`.

* Verification (Figures 6-9), with the report's set-up (``bnn-report``):
  ``points`` noisy draws of ``sin(7x) + cos(17x)`` on
  [-1, 1] (noise sd ``noise``; the report does not give it), a 3 x 50 tanh BNN, and
  ``samples`` kept HMC sweeps. Figure 6 traces three parameters, Figure 7 is the
  histogram of parameter 2501, Figure 8 the fits of four well-spaced samples, Figure 9
  the averaged fit with a two-sd band (eqs. 5.8-5.9). The summary gives the acceptance
  rate, effective sample sizes and the held-out log-likelihood.
* Figure 10: BO of Forrester with the report's BNN and LCB from four random points; the model
  before evaluations ``snapshots``.
* Figure 11: the BNN, in the report's set-up (``bnn-report``) and bojax's
  (``bnn-hmc``: layerwise priors, least-squares warm start, two chains, rank-warped outputs),
  against the engine's GP (``gp-map``, maximum a posteriori like the report's GPyOpt,
  and ``gp-slice``, slice-sampled) with LCB
  (kappa = 2) on Forrester (2 random initial points), Rosenbrock, McCormick and
  Six-Hump Camel (5), ``repeats`` times: median and quartiles of the running minimum.
  Every arm of a repeat starts from the same random points. A repeat's result is kept
  in ``runs/``, so an interrupted run continues, and two processes can split the
  problems (``problems=...``) before a last call gathers them.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import blackjax
import jax
import jax.numpy as jnp
import numpy as np

from bojax import gp
from bojax.bo.loop import Settings, ask, init, predict, tell
from bojax.errors import JournalError
from bojax.objectives.problems import get_problem, sin_cos
from bojax.reports import configure, prepare_out, read_kept, run_tasks, write_kept, write_summary
from bojax.reports.claims import Claim, not_judged, verdict
from bojax.reports.figures import pyplot, quartile_band, save
from bojax.reports.provenance import begin, code_fingerprint
from bojax.surrogates.bnn import REPORT_BNN, mixture_log_likelihood


def _dict(value: Any) -> dict:
    """``value`` if it is a dict (a kept file may hold anything), else an empty one."""
    return value if isinstance(value, dict) else {}


PROBLEMS = ("forrester", "rosenbrock", "mccormick", "six_hump_camel")
ARMS = ("bnn-report", "bnn-hmc", "gp-map", "gp-slice")
ARM_LABELS = {
    "bnn-report": "BNN (report)",
    "bnn-hmc": "BNN (bojax)",
    "gp-map": "GP (MAP)",
    "gp-slice": "GP (slice)",
}
# A run "finds the minimum" when its best is within this of the optimum (our criterion).
FOUND_GAP = 0.05
TRACED = 2501  # the report's Figure 7 parameter


@dataclass(frozen=True)
class Config:
    quick: bool = False
    seed: int = 0
    # verification, Figures 6-9
    points: int = 20
    noise: float = 0.1
    hidden: tuple[int, ...] = (50, 50, 50)
    samples: int = 5000
    burn_in: int = 2000
    leapfrog_steps: int = 50
    # Figure 10
    forrester_initial: int = 4
    snapshots: tuple[int, ...] = (0, 1, 3, 6)
    # Figure 11
    problems: tuple[str, ...] = PROBLEMS
    arms: tuple[str, ...] = ARMS
    repeats: int = 50
    iterations: int = 20
    kappa: float = 2.0
    candidates: int = 1024


QUICK = {"samples": 600, "burn_in": 600, "repeats": 2, "iterations": 8, "candidates": 512}
QUICK |= {"snapshots": (0, 1, 3, 5)}


def config(quick: bool = False, **overrides: Any) -> Config:
    """The report's settings, or with ``quick`` a few-minute version; then ``overrides``."""
    return configure(Config(), quick, QUICK, overrides)


def initial_count(problem: str) -> int:
    """Random initial points: 2 on Forrester, 5 on the 2-D functions (the report's)."""
    return 2 if problem == "forrester" else 5


# -- verification: Figures 6-9 -------------------------------------------------------------


def verification(cfg: Config) -> dict[str, Any]:
    """Sample the BNN posterior on the sin/cos data; figures' arrays and diagnostics."""
    rng = np.random.default_rng([cfg.seed, 6])
    x = rng.uniform(-1, 1, cfg.points)
    y = np.array([sin_cos({"x": v}) for v in x]) + cfg.noise * rng.normal(size=cfg.points)
    x_test = rng.uniform(-1, 1, 500)
    y_test = np.array([sin_cos({"x": v}) for v in x_test]) + cfg.noise * rng.normal(size=500)
    shift, scale = y.mean(), y.std()
    surrogate = replace(
        REPORT_BNN,
        hidden=cfg.hidden,
        num_samples=cfg.samples,
        thin=1,
        burn_in=cfg.burn_in,
        leapfrog_steps=cfg.leapfrog_steps,
    )
    data = gp.make_data(((x + 1) / 2)[:, None], (y - shift) / scale)
    tick = time.perf_counter()
    state = surrogate.fit(jax.random.key(cfg.seed), surrogate.init(1), data)
    jax.block_until_ready(state.theta)
    seconds = time.perf_counter() - tick
    grid = np.linspace(-1, 1, 400)
    outputs = np.asarray(surrogate.outputs(state, jnp.asarray((grid + 1) / 2)[:, None]))
    outputs = outputs * scale + shift
    test = np.asarray(surrogate.outputs(state, jnp.asarray((x_test + 1) / 2)[:, None]))
    test = test * scale + shift
    noise_var = np.asarray(1 / state.tau_n) * scale**2
    theta = np.asarray(state.theta)
    traced = sorted({*np.random.default_rng([cfg.seed, 7]).choice(theta.shape[1], 3, False)})
    ess_theta = np.asarray(blackjax.ess(theta[None], chain_axis=0, sample_axis=1))
    ess_f = np.asarray(blackjax.ess(outputs[None, :, ::10], chain_axis=0, sample_axis=1))
    return {
        "x": x,
        "y": y,
        "grid": grid,
        "outputs": outputs,
        "theta_traces": {int(i): theta[:, i] for i in [*traced, min(TRACED, theta.shape[1] - 1)]},
        "traced": [int(i) for i in traced],
        "summary": {
            "parameters": int(theta.shape[1]),
            "samples": int(theta.shape[0]),
            "seconds_incl_compile": seconds,
            **{k: v for k, v in state.diagnostics.items()},
            "ess_parameters_min_median": [float(ess_theta.min()), float(np.median(ess_theta))],
            "ess_function_min_median": [float(ess_f.min()), float(np.median(ess_f))],
            "noise_sd_posterior_mean": float(np.mean(np.sqrt(noise_var))),
            "noise_sd_true": cfg.noise,
            "test_log_likelihood": mixture_log_likelihood(test, noise_var, y_test),
            "test_rmse_of_mean": float(
                np.sqrt(np.mean((test.mean(0) - y_test + 0.0) ** 2))  # against noisy y
            ),
        },
    }


def plot_verification(result: dict, out: Path) -> list[Path]:
    plt = pyplot()
    paths = []
    traces = result["theta_traces"]
    fig, axes = plt.subplots(3, 1, figsize=(8, 5.5), sharex=True)
    for ax, index in zip(axes, result["traced"], strict=True):
        ax.plot(traces[index], lw=0.5)
        ax.set_ylabel(f"theta_{index}", fontsize=8)
    axes[-1].set_xlabel("kept HMC sweep")
    fig.suptitle("Figure 6: traces of three parameters", fontsize=10)
    paths.append(save(fig, out / "figure6_traces.png", dpi=130))

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    index = max(traces)
    ax.hist(traces[index], bins=60, color="C0")
    ax.set_xlabel(f"theta_{index}")
    ax.set_title(f"Figure 7: posterior histogram of parameter {index}", fontsize=10)
    paths.append(save(fig, out / "figure7_histogram.png", dpi=130))

    grid, outputs = result["grid"], result["outputs"]
    truth = [sin_cos({"x": v}) for v in grid]
    fig, axes = plt.subplots(2, 2, figsize=(9, 6), sharex=True, sharey=True)
    picks = np.linspace(0, len(outputs) - 1, 4).astype(int)
    for ax, s in zip(axes.flat, picks, strict=True):
        ax.plot(grid, truth, "k-", lw=1, label="sin(7x) + cos(17x)")
        ax.plot(grid, outputs[s], "C0-", lw=1.2, label=f"network of sample {s}")
        ax.plot(result["x"], result["y"], "ko", ms=3)
        ax.set_ylim(-4, 4)
        ax.legend(fontsize=7, loc="lower left")
    fig.suptitle("Figure 8: fits of individual posterior samples", fontsize=10)
    paths.append(save(fig, out / "figure8_samples.png", dpi=130))

    mean, sd = outputs.mean(0), outputs.std(0)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(grid, truth, "k-", lw=1, label="sin(7x) + cos(17x)")
    ax.plot(grid, mean, "C0-", lw=1.3, label="BNN mean (eq. 5.8)")
    ax.fill_between(grid, mean - 2 * sd, mean + 2 * sd, color="C0", alpha=0.25, lw=0)
    ax.plot(result["x"], result["y"], "ko", ms=4, label="training points")
    ax.set_ylim(-4, 4)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title(f"Figure 9: the BNN's fit, mean +- 2 sd over {len(outputs)} samples", fontsize=10)
    paths.append(save(fig, out / "figure9_fit.png", dpi=130))
    return paths


# -- Figure 10: BO of Forrester ------------------------------------------------------------


def _settings(cfg: Config, arm: str, problem: str, seed: int, iterations: int) -> Settings:
    return Settings(
        surrogate=arm,
        acquisition="lcb",
        kappa=cfg.kappa,
        initial=initial_count(problem),
        iterations=iterations,
        seed=seed,
        num_candidates=cfg.candidates,
    )


def _random_start(problem, seed: int, count: int) -> list[np.ndarray]:
    """``count`` uniform random unit points of a repeat, shared by every arm."""
    index = PROBLEMS.index(problem.name) if problem.name in PROBLEMS else 99
    rng = np.random.default_rng([seed, index, 11])
    return list(rng.uniform(size=(count, problem.space.dim)))


def bo_snapshots(cfg: Config) -> list[dict[str, Any]]:
    problem = get_problem("forrester")
    settings = replace(
        _settings(cfg, "bnn-report", "forrester", cfg.seed, max(cfg.snapshots) + 1),
        initial=cfg.forrester_initial,
    )
    state = init(problem.space, settings)
    for u in _random_start(problem, cfg.seed + 1000, cfg.forrester_initial):
        state = tell(state, u, problem(problem.space.from_unit(u)))
    grid = np.linspace(0, 1, 300)
    snapshots = []
    for step in range(max(cfg.snapshots) + 1):
        if step in cfg.snapshots:
            mean, sd = predict(state, grid[:, None])
        u, state, _ = ask(state)
        if step in cfg.snapshots:
            snapshots.append(
                {"step": step, "u": state.u.copy(), "y": state.y.copy(), "mean": mean, "sd": sd}
            )
            snapshots[-1]["proposal"] = float(u[0])
        state = tell(state, u, problem(problem.space.from_unit(u)))
    return snapshots


def plot_snapshots(snapshots: list[dict], out: Path) -> Path:
    plt = pyplot()
    problem = get_problem("forrester")
    grid = np.linspace(0, 1, 300)
    truth = [problem({"x": v}) for v in grid]
    fig, axes = plt.subplots(2, 2, figsize=(9, 6.4), sharex=True, sharey=True)
    for ax, snap, letter in zip(axes.flat, snapshots, "abcd", strict=False):
        mean, sd = snap["mean"], snap["sd"]
        ax.plot(grid, truth, "k-", lw=1, label="Forrester")
        ax.plot(grid, mean, "C0-", lw=1.2, label="BNN mean")
        ax.fill_between(grid, mean - 1.96 * sd, mean + 1.96 * sd, color="C0", alpha=0.25, lw=0)
        ax.plot(snap["u"][:, 0], snap["y"], "ko", ms=4, label="evaluated")
        ax.axvline(snap["proposal"], color="C3", ls="--", lw=1, label="LCB proposal")
        ax.set_title(f"({letter}) after {snap['step']} BO evaluations", fontsize=9)
        ax.set_ylim(-12, 18)
    axes.flat[0].legend(fontsize=7, loc="upper left")
    fig.suptitle("Figure 10: BO of Forrester with the BNN and LCB (95% band)", fontsize=10)
    return save(fig, out / "figure10_forrester_bo.png", dpi=130)


# -- Figure 11: BNN against GP -------------------------------------------------------------


def bo_run(cfg: Config, arm: str, problem_name: str, seed: int) -> dict[str, Any]:
    """One repeat: random initial points, then ``iterations`` LCB steps; running minimum."""
    problem = get_problem(problem_name)
    settings = _settings(cfg, arm, problem_name, seed, cfg.iterations)
    state = init(problem.space, settings)
    code = code_fingerprint("bnn_surrogate")  # the code that runs, before an edit can land
    tick = time.perf_counter()
    for u in _random_start(problem, seed, settings.initial):
        state = tell(state, u, problem(problem.space.from_unit(u)))
    for _ in range(cfg.iterations):
        u, state, _ = ask(state)
        state = tell(state, u, problem(problem.space.from_unit(u)))
    return {
        "settings": settings.identity() | {"iterations": cfg.iterations},
        "y": state.y.tolist(),
        "running_min": np.minimum.accumulate(state.y).tolist(),
        "seconds": time.perf_counter() - tick,
        "code_fingerprint": code,
    }


def kept_runs(out: Path) -> list[tuple[Path, str | None]]:
    """The Figure 11 repeats kept under ``out/runs``, each with the fingerprint of the code
    that made it (None: made before fingerprints were recorded)."""
    return [
        (path, _dict(read_kept(path)).get("code_fingerprint"))
        for path in sorted((Path(out) / "runs").glob("*/*/seed*.json"))
    ]


def kept_repeats(cfg: Config, runs_dir: Path) -> tuple[dict[tuple, Path], list[tuple]]:
    """Each Figure 11 repeat's file under ``runs_dir`` by ``(problem, arm, seed)``, and
    the repeats not kept there yet. Repeats kept for other settings are never replaced: a
    :class:`JournalError` names them (``run(..., fresh=True)`` discards them)."""
    paths, expected, missing, other = {}, {}, [], []
    for problem in cfg.problems:
        get_problem(problem)  # a typed error for an unknown name, before any work
        for arm in cfg.arms:
            folder = runs_dir / problem / arm
            for seed in range(cfg.repeats):
                task = (problem, arm, seed)
                paths[task] = folder / f"seed{seed}.json"
                identity = _settings(cfg, arm, problem, seed, cfg.iterations).identity()
                expected[task] = identity | {"iterations": cfg.iterations}
                kept = read_kept(paths[task])
                if kept is None:
                    missing.append(task)
                elif not isinstance(kept, dict) or kept.get("settings") != expected[task]:
                    other.append(paths[task])
    if other:
        shown = ", ".join(str(p.relative_to(runs_dir)) for p in other[:5])
        more = f" and {len(other) - 5} more" if len(other) > 5 else ""
        raise JournalError(
            f"{runs_dir} keeps Figure 11 repeats made with other settings: {shown}{more}; "
            "this run would replace them"
        )
    return paths, missing


def comparison(
    cfg: Config, runs_dir: Path, progress: bool, executor: Any = None
) -> dict[str, dict[str, list]]:
    """Every (problem, arm, repeat), each kept in ``runs_dir`` and reused when present
    (:func:`kept_repeats`).

    Missing repeats run one after another, or, with ``executor`` (a ``concurrent.futures``
    executor or a Dask client), one per task; only this process writes the files."""
    paths, missing = kept_repeats(cfg, runs_dir)

    def keep(task, row) -> None:
        paths[task].parent.mkdir(parents=True, exist_ok=True)
        write_kept(paths[task], row)
        if progress:
            problem, arm, seed = task
            print(
                f"  {problem:<15} {arm:<9} seed {seed:>2}: best "
                f"{row['running_min'][-1]:.4g} in {row['seconds']:.1f} s",
                flush=True,
            )

    tasks = {task: (cfg, task[1], task[0], task[2]) for task in missing}
    run_tasks(bo_run, tasks, keep, executor)
    results: dict[str, dict[str, list]] = {}
    for (problem, arm, _), path in paths.items():
        results.setdefault(problem, {}).setdefault(arm, []).append(json.loads(path.read_text()))
    return results


def comparison_summary(results: dict[str, dict[str, list]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for problem, arms in results.items():
        optimum = get_problem(problem).optimum
        n0 = initial_count(problem)
        per_arm = {}
        for arm, rows in arms.items():
            curves = np.array([r["running_min"] for r in rows])
            gaps = curves - optimum
            found = gaps <= FOUND_GAP
            first = [max(int(np.argmax(f)) - n0 + 1, 0) if f.any() else None for f in found]
            reached = [i for i in first if i is not None]
            after7 = min(n0 + 6, curves.shape[1] - 1)
            per_arm[arm] = {
                "final_quartiles": np.percentile(curves[:, -1], [25, 50, 75]).tolist(),
                "median_after_7_iterations": float(np.median(curves[:, after7])),
                "found_fraction_final": float(found[:, -1].mean()),
                "found_fraction_after_7_iterations": float(found[:, after7].mean()),
                "median_iterations_to_find": float(np.median(reached)) if reached else None,
                "mean_seconds_per_run": float(np.mean([r["seconds"] for r in rows])),
                "repeats": len(rows),
            }
        summary[problem] = {"optimum": optimum, "initial": n0, "arms": per_arm}
    return summary


def plot_comparison(results: dict[str, dict[str, list]], out: Path) -> Path:
    plt = pyplot()
    problems = list(results)
    cols = 2 if len(problems) > 1 else 1
    rows_n = (len(problems) + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(5 * cols, 3.6 * rows_n), squeeze=False)
    for ax, problem in zip(axes.flat, problems, strict=False):
        for colour, (arm, rows) in enumerate(results[problem].items()):
            curves = np.array([r["running_min"] for r in rows])
            quartile_band(ax, curves, f"C{colour}", ARM_LABELS.get(arm), marker="o", ms=3, lw=1)
        ax.axhline(get_problem(problem).optimum, color="k", lw=0.8, ls=":")
        if problem == "rosenbrock":
            ax.set_yscale("symlog", linthresh=0.1)
        ax.set_title(f"{problem} ({len(rows)} repeats)", fontsize=9)
        ax.set_xlabel("function evaluations")
        ax.set_ylabel("running minimum")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(problems) :]:
        ax.axis("off")
    fig.suptitle("Figure 11: BNN against GP with LCB, median and quartiles", fontsize=10)
    return save(fig, out / "figure11_comparison.png", dpi=130)


# -- the whole report ----------------------------------------------------------------------


def run(
    cfg: Config,
    out: str | Path,
    *,
    fresh: bool = False,
    progress: bool = True,
    executor: Any = None,
) -> dict[str, Any]:
    """Run every part, write the figures and ``summary.json`` into ``out``; the Figure 11
    repeats over ``executor`` if given (see :func:`comparison`); ``fresh`` discards the
    kept repeats (``out/runs``) first."""
    out = prepare_out(out, "bnn_surrogate")
    if fresh:
        shutil.rmtree(out / "runs", ignore_errors=True)
    kept_repeats(cfg, out / "runs")  # repeats kept for other settings: refused before any work
    started = begin(cfg)
    if progress:
        print("verification: sampling the BNN posterior on sin(7x) + cos(17x)", flush=True)
    check = verification(cfg)
    figures = plot_verification(check, out)
    if progress:
        print("Figure 10: BO of Forrester with the BNN", flush=True)
    figures.append(plot_snapshots(bo_snapshots(cfg), out))
    if progress:
        print("Figure 11: BNN against GP", flush=True)
    results = comparison(cfg, out / "runs", progress, executor)
    figures.append(plot_comparison(results, out))
    summary = {
        "config": asdict(cfg),
        "verification": check["summary"],
        "comparison": comparison_summary(results),
        "found_gap": FOUND_GAP,
        "figures": [p.name for p in figures],
        "wall_seconds": started.seconds(),
    }
    return write_summary(out, summary, started, cfg, config(cfg.quick), indent=2)


CLAIMS = {
    "forrester": "Forrester: the BNN is competitive with the GP",
    "rosenbrock": "Rosenbrock: the BNN finds the minimum in about 7 iterations, the GP not always",
    "mccormick": "McCormick: the BNN ends slightly above the minimum, the GP finds it",
    "six_hump_camel": "Six-Hump Camel: the GP does much better, the BNN stays in a local minimum",
}


def claims(summary: dict[str, Any]) -> list[Claim]:
    """Figure 11's four claims, judged with the report's BNN (``bnn-report``) against the
    MAP GP (``gp-map``, as GPyOpt fits its GP); "found" is within ``found_gap`` of the
    optimum after the 20 BO iterations, "@7" after 7."""
    comparison = summary["comparison"]

    def arm(problem: str, name: str) -> dict[str, Any]:
        return comparison[problem]["arms"][name]

    def lacking(problem: str) -> str:
        """The arms these claims compare that ``problem``'s results lack, as evidence."""
        lacks = [a for a in ("bnn-report", "gp-map") if a not in comparison[problem]["arms"]]
        if not lacks:
            return ""
        return f"the summary has no {' or '.join(lacks)} runs (run without --arms to judge)"

    def numbers(problem: str) -> str:
        parts = []
        for name, row in comparison[problem]["arms"].items():
            parts.append(
                f"{ARM_LABELS.get(name, name)}: median {row['final_quartiles'][1]:.4g}, "
                f"found {row['found_fraction_final']:.2f} (@7 "
                f"{row['found_fraction_after_7_iterations']:.2f})"
            )
        repeats = min(row["repeats"] for row in comparison[problem]["arms"].values())
        return f"{repeats} repeats; " + "; ".join(parts)

    out = []
    if "forrester" in comparison and (lacks := lacking("forrester")):
        out.append(not_judged("BNN surrogate", CLAIMS["forrester"], lacks))
    elif "forrester" in comparison:
        bnn, gp_ = arm("forrester", "bnn-report"), arm("forrester", "gp-map")
        out.append(Claim(
            "BNN surrogate", CLAIMS["forrester"],
            verdict(bnn["found_fraction_final"] >= gp_["found_fraction_final"] - 0.1),
            numbers("forrester"), "reproduced if the BNN finds the minimum at least as "
            "often as the MAP GP, less 0.1",
        ))  # fmt: skip
    if "rosenbrock" in comparison and (lacks := lacking("rosenbrock")):
        out.append(not_judged("BNN surrogate", CLAIMS["rosenbrock"], lacks))
    elif "rosenbrock" in comparison:
        bnn, gp_ = arm("rosenbrock", "bnn-report"), arm("rosenbrock", "gp-map")
        out.append(Claim(
            "BNN surrogate",
            CLAIMS["rosenbrock"],
            verdict(
                bnn["found_fraction_after_7_iterations"] >= 0.5
                and gp_["found_fraction_final"] < 1.0,
                bnn["found_fraction_final"] > gp_["found_fraction_final"],
            ),
            numbers("rosenbrock"), "reproduced if the BNN finds it @7 in half the repeats "
            "and the GP misses in some; partly if the BNN finds it more often by the end",
        ))  # fmt: skip
    if "mccormick" in comparison and (lacks := lacking("mccormick")):
        out.append(not_judged("BNN surrogate", CLAIMS["mccormick"], lacks))
    elif "mccormick" in comparison:
        bnn, gp_ = arm("mccormick", "bnn-report"), arm("mccormick", "gp-map")
        above = bnn["final_quartiles"][1] - comparison["mccormick"]["optimum"]
        out.append(Claim(
            "BNN surrogate",
            CLAIMS["mccormick"],
            verdict(
                gp_["found_fraction_final"] >= 0.8
                and bnn["found_fraction_final"] < 0.5
                and above <= 1.0,
                gp_["found_fraction_final"] > bnn["found_fraction_final"],
            ),
            numbers("mccormick"), "reproduced if the GP finds it in 80 % of repeats, the "
            "BNN in under half with its median within 1.0 of the minimum; partly if the GP "
            "finds it more often",
        ))  # fmt: skip
    if "six_hump_camel" in comparison and (lacks := lacking("six_hump_camel")):
        out.append(not_judged("BNN surrogate", CLAIMS["six_hump_camel"], lacks))
    elif "six_hump_camel" in comparison:
        bnn, gp_ = arm("six_hump_camel", "bnn-report"), arm("six_hump_camel", "gp-map")
        stuck = bnn["found_fraction_final"] < 0.5
        out.append(Claim(
            "BNN surrogate",
            CLAIMS["six_hump_camel"],
            verdict(stuck and gp_["final_quartiles"][1] < bnn["final_quartiles"][1] - 0.1, stuck),
            numbers("six_hump_camel"), "reproduced if the BNN finds the minimum in under "
            "half the repeats and the GP's median is lower by 0.1; partly if only the first",
        ))  # fmt: skip
    return out


def format_summary(summary: dict[str, Any]) -> str:
    v = summary["verification"]
    lines = [
        f"Verification: {v['samples']} kept samples of {v['parameters']} parameters in "
        f"{v['seconds_incl_compile']:.1f} s; acceptance {v['acceptance']:.2f}, step size "
        f"{v['step_size']:.2g}; ESS parameters min/median {v['ess_parameters_min_median'][0]:.0f}"
        f"/{v['ess_parameters_min_median'][1]:.0f}, function values "
        f"{v['ess_function_min_median'][0]:.0f}/{v['ess_function_min_median'][1]:.0f}",
        f"  noise sd {v['noise_sd_posterior_mean']:.3f} (true {v['noise_sd_true']}); held-out "
        f"log-likelihood {v['test_log_likelihood']:.3f}",
        "",
        f"Figure 11: running minimum (final quartiles); found = within "
        f"{summary['found_gap']} of the optimum",
        f"{'problem':<15}{'arm':<14}{'q25':>10}{'median':>10}{'q75':>10}"
        f"{'found@7':>9}{'found':>7}{'iters to find':>15}{'s/run':>7}",
    ]
    for problem, entry in summary["comparison"].items():
        for arm, row in entry["arms"].items():
            q25, q50, q75 = row["final_quartiles"]
            to_find = row["median_iterations_to_find"]
            lines.append(
                f"{problem:<15}{ARM_LABELS.get(arm, arm):<14}{q25:>10.4f}{q50:>10.4f}{q75:>10.4f}"
                f"{row['found_fraction_after_7_iterations']:>9.2f}{row['found_fraction_final']:>7.2f}"
                f"{'-' if to_find is None else f'{to_find:.1f}':>15}"
                f"{row['mean_seconds_per_run']:>7.1f}"
            )
    return "\n".join(lines)
