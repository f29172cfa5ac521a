"""Training one MLP ensemble: bojax's single vmapped, jitted call against the report's
implementation style (PyTorch, members one after another), in the same process.

The workload is the largest design of the ensemble-design report's Experiment 1: N = 30
members, L = 5 hidden ReLU layers of width D = 15, 150 training points, 1000 full-batch
Adadelta epochs (the stopping rule is disabled so both do exactly 1000). Both sides use
the same initial weights and the same DropConnect masks (drawn by bojax, keep p = 0.9),
PyTorch's Adadelta defaults, and float32.

* bojax steady state: mean of ``--repeats`` calls of ``jit_train_ensemble`` (the
  trainer as the objective compiles it: LLVM -O1 on CPU);
  cold: ``jax.clear_caches()`` then one call, i.e. tracing and XLA compilation included.
* PyTorch: ``nn.Linear`` layers with masked weights (``F.linear(h, W * M, b * m)``),
  ``torch.optim.Adadelta``, ``loss.item()`` each epoch as the report's convergence check
  needs, members trained one after another.

Also printed: member-epochs per second, and achieved GFLOP/s (matrix-multiply FLOPs of
forward and backward passes, 3x the forward's) against the machine's measured peak
(best of 5 jitted float32 2048x2048 matrix products).

    uv pip install torch        # here: uv pip install /opt/wheels/torch-*.whl
    uv run python benchmarks/ensemble_training.py [--repeats 5] [--torch-repeats 1]

On a GPU or TPU the bojax side runs unchanged (JAX picks the accelerator).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from rich.console import Console
from rich.table import Table

from bojax.objectives import datasets
from bojax.objectives import ensemble as E

N, L, D, EPOCHS, KEEP = 30, 5, 15, 1000, 0.9
ARCH = E.Architecture(max_layers=L, max_width=D, max_members=N)
TRAINING = E.Training(min_epochs=EPOCHS, max_epochs=EPOCHS)
DESIGN = E.Design(jnp.int32(L), jnp.int32(D), jnp.int32(N), jnp.float32(KEEP))


def matmul_flops_per_member_epoch(batch: int, inputs: int = 1) -> float:
    forward = 2 * batch * (inputs * D + (L - 1) * D * D + D)
    return 3.0 * forward  # forward, plus gradients w.r.t. activations and weights


def measured_peak_gflops() -> float:
    a = jax.random.normal(jax.random.key(0), (2048, 2048), jnp.float32)
    product = jax.jit(lambda a: a @ a)
    product(a).block_until_ready()
    best = min(_timed(lambda: product(a).block_until_ready()) for _ in range(5))
    return 2 * 2048**3 / best / 1e9


def _timed(fn) -> float:
    tick = time.perf_counter()
    fn()
    return time.perf_counter() - tick


def run_bojax(key, x, y, repeats: int):
    def call():
        ensemble = E.jit_train_ensemble(key, ARCH, TRAINING, DESIGN, x, y)
        ensemble.train_loss.block_until_ready()
        return ensemble

    cold = []
    for _ in range(2):
        jax.clear_caches()
        cold.append(_timed(call))
    steady = [_timed(call) for _ in range(repeats)]
    return np.array(cold), np.array(steady), call()


def run_torch(ensemble: E.Ensemble, x, y, repeats: int):
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    xt, yt = torch.tensor(np.asarray(x), dtype=torch.float32), torch.tensor(np.asarray(y))
    start, _ = E.init_ensemble(jax.random.key(0), ARCH, DESIGN)
    masks = jax.tree.map(np.asarray, ensemble.masks)
    start = jax.tree.map(np.asarray, start)

    def member(i):
        """Layers as (weight (out, in), bias) tensors, PyTorch's layout, plus masks."""
        pairs = [("w_in", "b_in")] + [(("w_hidden", l), ("b_hidden", l)) for l in range(L - 1)]
        pairs.append(("w_out", "b_out"))
        layers = []
        for w_name, b_name in pairs:

            def pick(tree, name):
                return tree[name[0]][i][name[1]] if isinstance(name, tuple) else tree[name][i]

            w, b = pick(start, w_name), pick(start, b_name)
            mw, mb = pick(masks, w_name), pick(masks, b_name)
            w, mw = np.atleast_2d(w.T), np.atleast_2d(mw.T)  # (in, out) -> (out, in)
            layers.append(
                (
                    torch.nn.Parameter(torch.tensor(w.copy())),
                    torch.nn.Parameter(torch.tensor(np.atleast_1d(b).copy())),
                    torch.tensor(mw.copy()),
                    torch.tensor(np.atleast_1d(mb).copy()),
                )
            )
        return layers

    def forward(layers, h):
        for w, b, mw, mb in layers[:-1]:
            h = F.relu(F.linear(h, w * mw, b * mb))
        w, b, mw, mb = layers[-1]
        return F.linear(h, w * mw, b * mb)[:, 0]

    def train_all():
        losses = []
        for i in range(N):  # the report's style: one network after another
            layers = member(i)
            optimiser = torch.optim.Adadelta([p for layer in layers for p in layer[:2]])
            previous = float("inf")
            for _ in range(EPOCHS):
                optimiser.zero_grad()
                loss = F.mse_loss(forward(layers, xt), yt)
                loss.backward()
                optimiser.step()
                current = loss.item()
                if abs(current - previous) < 0.0:  # the stopping check; disabled here
                    break
                previous = current
            losses.append(current)
        return np.array(losses)

    times, losses = [], None
    for _ in range(repeats):
        tick = time.perf_counter()
        losses = train_all()
        times.append(time.perf_counter() - tick)
    return np.array(times), losses, torch.__version__, torch.get_num_threads()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="bojax steady-state calls")
    parser.add_argument("--torch-repeats", type=int, default=1)
    args = parser.parse_args()
    console = Console()

    data = datasets.experiment1(seed=0)
    x, y = data.x_train.astype(np.float32), data.y_train.astype(np.float32)
    key = jax.random.key(0)
    console.print(f"devices: {jax.devices()}; peak measurement ...")
    peak = measured_peak_gflops()
    cold, steady, ensemble = run_bojax(key, x, y, args.repeats)
    torch_times, torch_losses, torch_version, threads = run_torch(
        ensemble, x, y, args.torch_repeats
    )

    flops = matmul_flops_per_member_epoch(len(y)) * N * EPOCHS
    member_epochs = N * EPOCHS
    table = Table(title=f"{N} MLPs (L={L}, D={D}), {len(y)} points, {EPOCHS} Adadelta epochs")
    for column in ("", "seconds", "member-epochs/s", "GFLOP/s", "% of peak", "PyTorch / this"):
        table.add_column(column, justify="right")
    torch_mean = float(np.mean(torch_times))
    for name, seconds in [
        ("bojax, steady state (mean)", float(np.mean(steady))),
        ("bojax, compilation included", float(np.mean(cold))),
        (f"PyTorch {torch_version}, one after another", torch_mean),
    ]:
        gflops = flops / seconds / 1e9
        table.add_row(
            name,
            f"{seconds:.3f}",
            f"{member_epochs / seconds:,.0f}",
            f"{gflops:.2f}",
            f"{100 * gflops / peak:.1f}",
            f"{torch_mean / seconds:.1f}x",
        )
    console.print(table)
    console.print(
        f"bojax steady runs: {np.round(steady, 3).tolist()}; "
        f"cold runs: {np.round(cold, 3).tolist()}"
    )
    console.print(
        f"measured peak: {peak:.1f} GFLOP/s (float32 matmul); useful work: {flops / 1e9:.2f} "
        f"GFLOP per ensemble; torch threads: {threads}"
    )
    bojax_losses = np.asarray(ensemble.train_loss)
    console.print(
        "final training MSE, mean over members (same start, same masks): "
        f"bojax {bojax_losses.mean():.2f}, PyTorch {torch_losses.mean():.2f} "
        f"(y variance {np.var(y):.1f})"
    )


if __name__ == "__main__":
    main()
