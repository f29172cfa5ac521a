"""Time per BO iteration: bojax ``gp-slice`` against BoTorch's fully Bayesian SAAS GP.

Both start from the same 60 Sobol points of Hartmann-6 (d = 6) and run the same number
of BO iterations in this one process, each iteration being a full hyperparameter fit
plus an acquisition optimisation and one evaluation:

* bojax: slice sampling, 256 burn-in sweeps on the first fit, then 128 retained sweeps
  continuing the chain; integrated EI over 2048 Sobol candidates + 8 gradient refinements.
* BoTorch: ``SaasFullyBayesianSingleTaskGP`` fitted by NUTS (256 warm-up, 128 samples,
  no thinning) each iteration; qLogEI with 8 restarts and 512 raw samples.

Compilation is included in bojax's time. Run (the peer is not a project dependency,
since on PyPI torch brings CUDA wheels; install any CPU build next to bojax):

    uv pip install torch botorch      # here: uv pip install /opt/wheels/torch-*.whl botorch
    uv run python benchmarks/gp_slice_vs_botorch.py [--iterations 30]
"""

from __future__ import annotations

import argparse
import time

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import bojax  # noqa: E402
from bojax.compilation import count_compilations  # noqa: E402
from bojax.problems import get_problem  # noqa: E402

HARTMANN = get_problem("hartmann6")
N_START = 60


def starting_points(seed: int) -> tuple[np.ndarray, np.ndarray]:
    u = HARTMANN.space.sample(jax.random.key(seed), N_START, method="sobol")
    y = np.array([HARTMANN(p) for p in HARTMANN.space.from_unit(u)])
    return u, y


def run_bojax(u0, y0, iterations: int, seed: int):
    settings = bojax.Settings(
        surrogate="gp-slice", acquisition="ei", initial=1, seed=seed, num_candidates=2048
    )
    state = bojax.init(HARTMANN.space, settings)
    for u, y in zip(u0, y0, strict=True):
        state = bojax.tell(state, u, y)
    times = []
    with count_compilations() as compilations:
        for _ in range(iterations):
            tick = time.perf_counter()
            u, state, _ = bojax.ask(state)
            state = bojax.tell(state, u, HARTMANN(HARTMANN.space.from_unit(u)))
            times.append(time.perf_counter() - tick)
    return np.array(times), float(np.min(state.y)), compilations


def run_botorch(u0, y0, iterations: int, seed: int):
    import torch
    from botorch.acquisition.logei import qLogExpectedImprovement
    from botorch.fit import fit_fully_bayesian_model_nuts
    from botorch.models.fully_bayesian import SaasFullyBayesianSingleTaskGP
    from botorch.optim import optimize_acqf

    torch.manual_seed(seed)
    x = torch.tensor(u0, dtype=torch.float64)
    y = torch.tensor(-y0, dtype=torch.float64).unsqueeze(-1)  # BoTorch maximises
    bounds = torch.stack([torch.zeros(6), torch.ones(6)]).double()
    times = []
    for _ in range(iterations):
        tick = time.perf_counter()
        y_std = (y - y.mean()) / y.std()
        model = SaasFullyBayesianSingleTaskGP(x, y_std)
        fit_fully_bayesian_model_nuts(
            model, warmup_steps=256, num_samples=128, thinning=1, disable_progbar=True
        )
        acqf = qLogExpectedImprovement(model, best_f=y_std.max())
        candidate, _ = optimize_acqf(acqf, bounds=bounds, q=1, num_restarts=8, raw_samples=512)
        value = HARTMANN(HARTMANN.space.from_unit(candidate.squeeze(0).numpy()))
        x = torch.cat([x, candidate])
        y = torch.cat([y, torch.tensor([[-value]], dtype=torch.float64)])
        times.append(time.perf_counter() - tick)
    return np.array(times), float(-y.max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument(
        "--botorch-iterations", type=int, default=None, help="default: --iterations"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    console = Console()
    u0, y0 = starting_points(args.seed)
    console.print(
        f"Hartmann-6, {N_START} Sobol points, best {y0.min():.4f}; {args.iterations} iterations"
    )

    bojax_times, bojax_best, compilations = run_bojax(u0, y0, args.iterations, args.seed)
    console.print(f"bojax done: {bojax_times.sum():.1f} s")
    try:
        peer_iterations = args.botorch_iterations or args.iterations
        peer_times, peer_best = run_botorch(u0, y0, peer_iterations, args.seed)
    except ImportError as error:
        console.print(f"[yellow]BoTorch not installed ({error}); only bojax was timed[/yellow]")
        peer_times, peer_best = None, float("nan")

    table = Table(
        title=f"One BO iteration at n = {N_START}..{N_START + args.iterations}, d = 6 (2-core CPU)"
    )
    for column in ("", "iterations", "first (s)", "mean (s)", "median (s)", "best found"):
        table.add_column(column, justify="right")
    rows = [("bojax gp-slice + EI", bojax_times, bojax_best)]
    if peer_times is not None:
        rows.append(("BoTorch SAAS NUTS + qLogEI", peer_times, peer_best))
    for name, times, best in rows:
        table.add_row(
            name,
            str(len(times)),
            f"{times[0]:.2f}",
            f"{times.mean():.3f}",
            f"{np.median(times):.3f}",
            f"{best:.4f}",
        )
    console.print(table)
    if peer_times is not None:
        ratio = peer_times.mean() / bojax_times.mean()
        console.print(
            f"ratio of mean time per iteration (BoTorch / bojax): [bold]{ratio:.1f}x[/bold]"
        )
    counts = {name: compilations.of(name) for name in ("_fit", "score", "_refine")}
    console.print(
        f"bojax compilations during the {args.iterations} iterations: {compilations.total} in all; "
        + ", ".join(f"{name} {count}" for name, count in counts.items())
    )


if __name__ == "__main__":
    main()
