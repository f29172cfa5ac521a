"""The architecture-search report (Twist 2019): Figures 3-8 and BO over architecture
vectors ``[n_1 .. n_L, E, eta]`` (:mod:`bojax.objectives.archnet`).

* Figures 3-4: a small (4 hidden layers: 6, 8, 9, 7) and a large (10 hidden layers,
  23-95 units) sigmoid network trained for 1000 epochs at learning rate 0.05 with
  per-example SGD (the report's settings): classification regions and the training and
  validation cost per epoch.
* Figure 5: Bayesian linear regression (alpha = 1, sigma = 0.25, the report's values)
  with a linear basis and a richer one (a constant and 12 Gaussian bumps), mean +- 1.96
  sd. Figure 6: zero-mean SE GP posteriors for two length-scales. The 1-D function is
  ours (the report does not give it): ``-(sin(x) + sin(10 x / 3))`` on [2.7, 7.5].
* Figure 7: BO of that function by the report's Algorithm 4: a zero-mean SE GP with
  fixed (alpha, sigma, ell), EI over random candidates, posterior after 0, 2, 4 and 8
  iterations.
* BO of the network design on a 2-D two-class problem (half-moons, validation accuracy
  to maximise): the report's surrogate (``gp-fixed-se``: alpha = 1, ell = 0.3,
  sigma = 0.1 on unit-cube inputs and standardised outputs) against the same kernel
  with slice-sampled hyperparameters (``gp-slice-se``, the report's missing step), both
  with EI over random candidates. Figure 8: the best design found, retrained.

The fixed hyperparameters act on the loop's standardised outputs, not on raw
accuracies as in the report's code; EI is the standard form (the report's eq. for it
uses the variance for the standard deviation and has a sign slip).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bojax import gp
from bojax.bo.driver import minimize
from bojax.bo.loop import Settings, ask, init, predict, tell
from bojax.objectives.archnet import (
    ArchitectureObjective,
    accuracy,
    architecture_space,
    forward,
    hidden_layers,
    init_net,
    moons,
    shape_of,
    train_recorded,
)
from bojax.reports import CachedObjective, configure, prepare_out, write_summary
from bojax.reports.claims import Claim, verdict
from bojax.reports.figures import pyplot, save
from bojax.reports.peers import RandomSearch
from bojax.reports.provenance import begin
from bojax.spaces import Real, Space

SURROGATE_OF = {"fixed": "gp-fixed-se", "sampled": "gp-slice-se"}
LABELS = {
    "fixed": "SE GP, fixed alpha, sigma, ell (report)",
    "sampled": "SE GP, slice-sampled hyperparameters",
    "random": "random search (same initial designs)",
}
SMALL_NET = (6, 8, 9, 7)
LARGE_NET = (60, 82, 95, 70, 44, 23, 50, 45, 44, 72)
DOMAIN_1D = (2.7, 7.5)


def f_1d(x):
    """``-(sin(x) + sin(10 x / 3))``: global maximum 1.899 near x = 5.146 on [2.7, 7.5]."""
    return -(np.sin(x) + np.sin(10 * x / 3))


@dataclass(frozen=True)
class Config:
    quick: bool = False
    seeds: int = 3
    initial: int = 5
    iterations: int = 25
    candidates: int = 1000
    samples: int = 64
    burn_in: int = 128
    max_layers: int = 4
    # Up to 40 units a layer and per-example SGD (the report's): random designs then range
    # from chance (0.47) to 0.85 validation accuracy and good ones reach ~0.91. With 20
    # units and batches of 10 every design plateaued near 0.85, and BO had nothing to find.
    max_units: int = 40
    batch_size: int = 1
    figure_epochs: int = 1000


QUICK = {"seeds": 1, "initial": 4, "iterations": 8, "candidates": 256, "samples": 16}
QUICK |= {"burn_in": 32, "figure_epochs": 150}


def config(quick: bool = False, **overrides: Any) -> Config:
    return configure(Config(), quick, QUICK, overrides)


# -- Figures 3, 4 and 8: networks ------------------------------------------------------------


def train_network(data, hidden, epochs, learning_rate, batch_size, seed=0) -> dict:
    """A network with ``hidden`` units per layer trained by :func:`train_recorded`: the
    network (``net``, ``shape``), its cost curves, and the numbers the summary keeps."""
    layers, width = max(len(hidden), 1), max(*hidden, 2)
    shape = shape_of(hidden, layers, width)
    net = init_net(jax.random.key(seed), layers, width)
    net, (train_cost, val_cost) = train_recorded(
        jax.random.key(seed + 1), net, shape, data, epochs, learning_rate, batch_size
    )
    train_cost, val_cost = np.asarray(train_cost), np.asarray(val_cost)
    numbers = {
        "hidden": list(hidden),
        "final_train_cost": float(train_cost[-1]),
        "final_validation_cost": float(val_cost[-1]),
        "min_validation_cost": float(val_cost.min()),
        "min_validation_epoch": int(val_cost.argmin()) + 1,
        "validation_accuracy": float(accuracy(net, shape, data.x_val, data.y_val)),
        "test_accuracy": float(accuracy(net, shape, data.x_test, data.y_test)),
    }
    return {"net": net, "shape": shape, "costs": (train_cost, val_cost), "numbers": numbers}


def network_figure(data, hidden, epochs, learning_rate, batch_size, title, path) -> dict:
    """Train the network (:func:`train_network`), plot it into ``path``; its numbers."""
    trained = train_network(data, hidden, epochs, learning_rate, batch_size)
    plot_network(data, trained, title, path)
    return trained["numbers"]


def plot_network(data, trained: dict, title: str, path: Path) -> Path:
    plt = pyplot()
    net, shape, (train_cost, val_cost) = trained["net"], trained["shape"], trained["costs"]
    grid = np.stack(np.meshgrid(np.linspace(0, 1, 200), np.linspace(0, 1, 200)), -1)
    prob = np.asarray(forward(net, shape, jnp.asarray(grid.reshape(-1, 2))))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    score = (prob[:, 1] - prob[:, 0]).reshape(200, 200)  # > 0: class 1
    axes[0].contourf(grid[..., 0], grid[..., 1], score, levels=20, cmap="RdBu_r", vmin=-1, vmax=1)
    for x, y, marker in ((data.x_train, data.y_train, "x"), (data.x_val, data.y_val, "o")):
        for cls, colour in ((0, "C0"), (1, "C3")):
            pts = x[y[:, cls] == 1]
            style = {"c": colour} if marker == "x" else {"facecolors": "none", "edgecolors": colour}
            axes[0].scatter(pts[:, 0], pts[:, 1], marker=marker, s=14, lw=0.8, **style)
    axes[0].set_title("(a) classification: crosses train, circles validation", fontsize=9)
    axes[1].plot(train_cost, label="training cost")
    axes[1].plot(val_cost, label="validation cost")
    axes[1].set_xlabel("epoch")
    axes[1].set_title("(b) cost per epoch", fontsize=9)
    axes[1].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    return save(fig, path, dpi=130)


# -- Figures 5 and 6: Bayesian linear regression and GP posteriors ---------------------------


def linear_basis(x):
    return np.stack([np.ones_like(x), x], -1)


BUMP_CENTRES = np.linspace(*DOMAIN_1D, 12)


def bump_basis(x, centres=BUMP_CENTRES, width=0.5):
    bumps = np.exp(-((x[:, None] - centres[None, :]) ** 2) / (2 * width**2))
    return np.concatenate([np.ones((len(x), 1)), bumps], -1)


def bayesian_linear_regression(phi_t, y_t, phi_u, alpha: float, sigma: float):
    """Posterior of ``f(x_u) = phi(x_u)^T w`` given ``y_t = phi(x_t)^T w + eps`` with
    ``w ~ N(0, alpha^2 I)``, ``eps ~ N(0, sigma^2 I)`` (report secs. 3.3-3.4):

        mu    = alpha^2 Phi_u Phi_t^T (alpha^2 Phi_t Phi_t^T + sigma^2 I)^{-1} y_t
        Sigma = alpha^2 Phi_u Phi_u^T - alpha^4 Phi_u Phi_t^T (...)^{-1} Phi_t Phi_u^T
    """
    gram = alpha**2 * phi_t @ phi_t.T + sigma**2 * np.eye(len(y_t))
    cross = alpha**2 * phi_u @ phi_t.T
    mean = cross @ np.linalg.solve(gram, y_t)
    cov = alpha**2 * phi_u @ phi_u.T - cross @ np.linalg.solve(gram, cross.T)
    return mean, cov


def _sample_1d(n=7, seed=3):
    x = np.sort(np.random.default_rng(seed).uniform(*DOMAIN_1D, n))
    return x, f_1d(x)


def _band(ax, xs, mean, sd, x_t, y_t, title):
    ax.plot(xs, f_1d(xs), "k-", lw=1)
    ax.plot(xs, mean, "C3-", lw=1.2)
    ax.fill_between(xs, mean - 1.96 * sd, mean + 1.96 * sd, color="C3", alpha=0.2, lw=0)
    ax.plot(x_t, y_t, "kx", ms=8, mew=1.5)
    ax.set_title(title, fontsize=9)
    ax.set_ylim(-4, 4)


def plot_regressions(out: Path) -> list[Path]:
    plt = pyplot()
    x_t, y_t = _sample_1d()
    xs = np.linspace(*DOMAIN_1D, 300)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, (name, basis) in zip(
        axes,
        (("(a) linear basis (1, x)", linear_basis), ("(b) constant + 12 bumps", bump_basis)),
        strict=True,
    ):
        mean, cov = bayesian_linear_regression(basis(x_t), y_t, basis(xs), 1.0, 0.25)
        _band(ax, xs, mean, np.sqrt(np.maximum(np.diag(cov), 0)), x_t, y_t, name)
    fig.suptitle("Figure 5: Bayesian linear regression, alpha = 1, sigma = 0.25", fontsize=10)
    paths = [save(fig, out / "figure5_linear_regression.png", dpi=130)]

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    model = gp.GP(kernel="se", mean="zero")
    data = gp.make_data(x_t[:, None], y_t)
    for ax, ell in zip(axes, (1.0, 0.3), strict=True):
        params = {
            "kernel": {"amplitude": jnp.asarray(1.0), "lengthscales": jnp.asarray([ell])},
            "mean": {},
            "noise": jnp.asarray(0.05**2),
        }
        mean, var = gp.predict(model, gp.condition(model, params, data), jnp.asarray(xs[:, None]))
        _band(ax, xs, np.asarray(mean), np.sqrt(np.asarray(var)), x_t, y_t, f"ell = {ell}")
    fig.suptitle("Figure 6: zero-mean SE GP, alpha = 1, sigma = 0.05", fontsize=10)
    paths.append(save(fig, out / "figure6_gp_lengthscales.png", dpi=130))
    return paths


# -- Figure 7: Algorithm 4 on the 1-D function ----------------------------------------------


def plot_bo_1d(out: Path, cfg: Config, stages=(0, 2, 4, 8)) -> Path:
    plt = pyplot()
    space = Space([Real("x", *DOMAIN_1D)])
    settings = Settings(
        surrogate="gp-fixed-se", acquisition="ei", optimizer="random", initial=3,
        iterations=max(stages), seed=1, maximize=True, num_candidates=cfg.candidates,
    )  # fmt: skip
    state = init(space, settings)
    states = {}
    for step in range(settings.initial + settings.iterations):
        if step - settings.initial in stages:
            states[step - settings.initial] = state
        u, state, _ = ask(state)
        state = tell(state, u, float(f_1d(space.from_unit(u)["x"])))
    states[max(stages)] = state
    grid = np.linspace(0, 1, 300)
    xs = DOMAIN_1D[0] + grid * (DOMAIN_1D[1] - DOMAIN_1D[0])
    fig, axes = plt.subplots(1, len(stages), figsize=(3.2 * len(stages), 3.2), sharey=True)
    for ax, stage in zip(axes, stages, strict=True):
        s = states[stage]
        mean, sd = predict(s, grid[:, None])
        x_seen = DOMAIN_1D[0] + s.u[:, 0] * (DOMAIN_1D[1] - DOMAIN_1D[0])
        _band(ax, xs, mean, sd, x_seen[:3], s.y[:3], f"after {stage} iterations")
        if stage:
            ax.plot(x_seen[3:-1], s.y[3:-1], "k+", ms=10, mew=1.5)
            ax.plot(x_seen[-1:], s.y[-1:], "g+", ms=12, mew=2)
    fig.suptitle("Figure 7: Algorithm 4 (fixed SE GP, EI over random candidates)", fontsize=10)
    return save(fig, out / "figure7_bo_1d.png", dpi=130)


# -- BO over architectures ------------------------------------------------------------------


def search(cfg: Config, data, progress: bool) -> dict[str, list[list[dict]]]:
    space = architecture_space(cfg.max_layers, cfg.max_units)
    runs: dict[str, list[list[dict]]] = {method: [] for method in (*SURROGATE_OF, "random")}
    for seed in range(cfg.seeds):
        network = ArchitectureObjective(data, cfg.max_layers, cfg.max_units, cfg.batch_size, seed)
        objective = CachedObjective(network.evaluate, "validation_accuracy")
        initial_designs = None
        for method, surrogate in SURROGATE_OF.items():
            tick = time.perf_counter()
            # (fixed hyperparameters have no draws: a run refuses samples for them)
            draws = {"samples": cfg.samples, "burn_in": cfg.burn_in} if method == "sampled" else {}
            result = minimize(
                objective, space, surrogate=surrogate, optimizer="random",
                initial=cfg.initial, iterations=cfg.iterations, seed=seed, maximize=True,
                num_candidates=cfg.candidates, progress=False, **draws,
            )  # fmt: skip
            rows = [
                {**r["x"], **objective.evaluate(r["x"]), "hidden": list(hidden_layers(r["x"]))}
                for r in result.history
            ]
            runs[method].append(rows)
            initial_designs = rows[: cfg.initial]
            if progress:
                best = max(rows, key=lambda r: r["validation_accuracy"])
                print(
                    f"  seed {seed} {method:<8} best validation accuracy "
                    f"{best['validation_accuracy']:.3f} with hidden {best['hidden']}, "
                    f"E={best['epochs']}, eta={best['learning_rate']:.2f} "
                    f"({time.perf_counter() - tick:.0f} s)"
                )
        # Random search (bojax.reports.peers) after the BO runs' initial designs.
        randomly = RandomSearch(space, seed)
        drawn = [randomly.ask() for _ in range(cfg.iterations)]
        runs["random"].append(
            initial_designs
            + [{**p, **objective.evaluate(p), "hidden": list(hidden_layers(p))} for p in drawn]
        )
    return runs


def _search_summary(cfg: Config, runs: dict) -> dict[str, Any]:
    summary = {}
    for method, per_seed in runs.items():
        bests = [max(rows, key=lambda r: r["validation_accuracy"]) for rows in per_seed]
        units = [[sum(r["hidden"]) for r in rows[cfg.initial :]] for rows in per_seed]
        summary[method] = {
            "final_best_validation": [b["validation_accuracy"] for b in bests],
            "median_final_best_validation": float(
                np.median([b["validation_accuracy"] for b in bests])
            ),
            "best": bests,
            "mean_total_units_bo": float(np.mean([np.mean(u) for u in units])),
            "mean_layers_bo": float(
                np.mean(
                    [np.mean([len(r["hidden"]) for r in rows[cfg.initial :]]) for rows in per_seed]
                )
            ),
        }
    return summary


def plot_best_so_far(cfg: Config, runs: dict, path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, (method, per_seed) in enumerate(runs.items()):
        curves = np.array(
            [np.maximum.accumulate([r["validation_accuracy"] for r in rows]) for rows in per_seed]
        )
        steps = np.arange(1, curves.shape[1] + 1)
        ax.plot(steps, np.median(curves, 0), f"C{i}-", label=LABELS[method])
        ax.fill_between(steps, curves.min(0), curves.max(0), color=f"C{i}", alpha=0.15, lw=0)
    ax.axvline(cfg.initial + 0.5, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("evaluations")
    ax.set_ylabel("best validation accuracy so far")
    ax.set_title(f"BO over architecture vectors: median and range of {cfg.seeds} seeds", fontsize=9)
    ax.legend(fontsize=8)
    return save(fig, path, dpi=130)


def run(cfg: Config, out: str | Path, *, progress: bool = True) -> dict[str, Any]:
    """All figures and the BO comparison, into ``out`` with ``summary.json``."""
    out = prepare_out(out, "architecture_search")
    started = begin(cfg)
    data = moons()
    networks = {
        "small": network_figure(
            data, SMALL_NET, cfg.figure_epochs, 0.05, 1,
            f"Figure 3: hidden layers {SMALL_NET}, {cfg.figure_epochs} epochs, eta = 0.05",
            out / "figure3_small_network.png",
        ),
        "large": network_figure(
            data, LARGE_NET, cfg.figure_epochs, 0.05, 1,
            f"Figure 4: {len(LARGE_NET)} hidden layers, {cfg.figure_epochs} epochs, eta = 0.05",
            out / "figure4_large_network.png",
        ),
    }  # fmt: skip
    figures = [*plot_regressions(out), plot_bo_1d(out, cfg)]
    runs = search(cfg, data, progress)
    search_summary = _search_summary(cfg, runs)
    figures.append(plot_best_so_far(cfg, runs, out / "best_so_far.png"))
    best = max(
        (b for method in SURROGATE_OF for b in search_summary[method]["best"]),
        key=lambda b: (b["validation_accuracy"], -sum(b["hidden"])),
    )
    networks["optimised"] = network_figure(
        data, tuple(best["hidden"]), int(best["epochs"]), float(best["learning_rate"]),
        cfg.batch_size,
        f"Figure 8: the best design found, hidden {best['hidden']}, E = {best['epochs']}, "
        f"eta = {best['learning_rate']:.2f}",
        out / "figure8_optimised_network.png",
    )  # fmt: skip
    summary = {
        "config": asdict(cfg),
        "networks": networks,
        "search": search_summary,
        "runs": runs,
        "seconds": started.seconds(),
    }
    return write_summary(out, summary, started, cfg, config(cfg.quick), indent=2)


def claims(summary: dict[str, Any]) -> list[Claim]:
    """The over-fitting and search claims, judged from ``summary``."""
    large, cfg = summary["networks"]["large"], summary["config"]
    overfits = large["min_validation_epoch"] < cfg["figure_epochs"] * 0.9 and (
        large["final_validation_cost"] > large["min_validation_cost"] * 1.05
    )
    gains = {}
    for surrogate, runs in summary["runs"].items():
        gains[surrogate] = [
            max(r["validation_accuracy"] for r in run)
            - max(r["validation_accuracy"] for r in run[: cfg["initial"]])
            for run in runs
        ]
    # BO against random search from the same initial designs, seed by seed.
    beats = {
        s: [g > r for g, r in zip(gs, gains["random"], strict=True)]
        for s, gs in gains.items()
        if s != "random"
    }
    medians = {s: summary["search"][s]["median_final_best_validation"] for s in gains}
    versus = ", ".join(f"{s} {m:.3f}" for s, m in medians.items())
    return [
        Claim(
            "architecture search",
            "Figures 3-4: the large network over-fits, its validation cost turns up",
            verdict(overfits),
            f"large network: validation cost lowest at epoch {large['min_validation_epoch']} "
            f"({large['min_validation_cost']:.4f}), {large['final_validation_cost']:.4f} at "
            f"epoch {cfg['figure_epochs']}",
            "reproduced if the minimum comes before 90 % of the epochs and the final cost is "
            "5 % above it",
        ),
        Claim(
            "architecture search",
            "BO finds a better design than its initial ones",
            verdict(all(all(b) for b in beats.values()), any(all(b) for b in beats.values())),
            "BO runs gaining more over their "
            f"{cfg['initial']} initial designs than random search from the same designs: "
            + "; ".join(f"{s} {sum(b)} of {len(b)}" for s, b in beats.items())
            + "; gains "
            + "; ".join(f"{s}: +{', +'.join(f'{g:.3f}' for g in gs)}" for s, gs in gains.items())
            + f"; median final best validation accuracy {versus}",
            "reproduced if every BO run improves on its initial designs' best validation "
            "accuracy by more than random search from the same designs (same seed); partly if "
            "every run of one surrogate does",
        ),
    ]


def format_summary(summary: dict) -> str:
    lines = ["Figures 3-4 (per-example SGD, eta = 0.05):"]
    for name in ("small", "large"):
        n = summary["networks"][name]
        lines.append(
            f"  {name:<6} hidden {n['hidden']}: validation cost min {n['min_validation_cost']:.4f}"
            f" at epoch {n['min_validation_epoch']}, final {n['final_validation_cost']:.4f}; "
            f"train cost final {n['final_train_cost']:.4f}; validation accuracy "
            f"{n['validation_accuracy']:.3f}"
        )
    lines.append("BO over [n_1..n_4, E, eta] (validation accuracy, maximised):")
    for method, s in summary["search"].items():
        finals = ", ".join(f"{v:.3f}" for v in s["final_best_validation"])
        lines.append(
            f"  {LABELS[method]:<40} final best per seed [{finals}], median "
            f"{s['median_final_best_validation']:.3f}; BO picks average "
            f"{s['mean_layers_bo']:.1f} layers, {s['mean_total_units_bo']:.0f} units"
        )
    n = summary["networks"]["optimised"]
    lines.append(
        f"Figure 8: best design hidden {n['hidden']}: validation accuracy "
        f"{n['validation_accuracy']:.3f}, test accuracy {n['test_accuracy']:.3f}"
    )
    return "\n".join(lines)
