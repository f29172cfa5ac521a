"""Fit a Bayesian neural network to 20 noisy points of sin(7x) + cos(17x) on [-1, 1]:
bojax's ``bnn-hmc`` (BlackJAX HMC + Gibbs precisions, 3 x 50 tanh; two chains of 50
kept networks) and the report's set-up ``bnn-report`` (one chain of 100) against pybnn's
Bohamiann with its default settings (adaptive SGHMC, 13000 steps of which 3000 burn-in,
a network kept every 100: 100 networks; 3 x 50 tanh with a mean and a log-variance
output), on the same data, in one process run.

    uv pip install /opt/wheels/torch-*.whl emcee && uv pip install --no-deps pybnn
    uv run --no-sync python benchmarks/bnn_vs_bohamiann.py [--datasets 3]

Printed per data set and on average: fit seconds (bojax steady, i.e. compiled, and with
its one-off compilation), networks kept, and the held-out log-likelihood of 500 test
points under each model's Gaussian predictive (mean and total variance, noise included;
bojax's mixture log-likelihood beside it).
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from bojax import gp  # noqa: E402
from bojax.objectives.problems import sin_cos  # noqa: E402
from bojax.surrogates.bnn import REPORT_BNN, BNNSurrogate, mixture_log_likelihood  # noqa: E402

NOISE = 0.1


def dataset(seed: int):
    rng = np.random.default_rng([seed, 2016])
    x = rng.uniform(-1, 1, 20)
    x_test = rng.uniform(-1, 1, 500)
    f = np.vectorize(lambda v: sin_cos({"x": v}))
    return x, f(x) + NOISE * rng.normal(size=20), x_test, f(x_test) + NOISE * rng.normal(size=500)


def gaussian_log_likelihood(mean, var, y) -> float:
    return float(np.mean(-0.5 * np.log(2 * np.pi * var) - 0.5 * (y - mean) ** 2 / var))


def fit_bojax(surrogate: BNNSurrogate, seed: int, x, y, x_test, y_test) -> dict:
    shift, scale = y.mean(), y.std()
    data = gp.make_data(((x + 1) / 2)[:, None], (y - shift) / scale)
    state0 = surrogate.init(1)
    timings = []
    for attempt in range(2):  # the first call compiles; the second is the steady cost
        tick = time.perf_counter()
        state = surrogate.fit(jax.random.key(seed * 10 + attempt), state0, data)
        jax.block_until_ready(state.theta)
        timings.append(time.perf_counter() - tick)
    outputs = np.asarray(surrogate.outputs(state, ((x_test + 1) / 2)[:, None])) * scale + shift
    noise_var = np.asarray(1 / state.tau_n) * scale**2
    mean, var = outputs.mean(0), outputs.var(0) + noise_var.mean()
    mixture = mixture_log_likelihood(outputs, noise_var, y_test)
    return {
        "seconds": timings[1],
        "seconds_with_compile": timings[0],
        "networks": outputs.shape[0],
        "log_likelihood": gaussian_log_likelihood(mean, var, y_test),
        "mixture_log_likelihood": mixture,
        "acceptance": state.diagnostics["acceptance"],
    }


def fit_bohamiann(seed: int, x, y, x_test, y_test, **train) -> dict:
    import torch
    from pybnn.bohamiann import Bohamiann

    torch.manual_seed(seed)
    np.random.seed(seed)  # noqa: NPY002 (pybnn draws from the global NumPy generator)
    model = Bohamiann(print_every_n_steps=10**9)
    tick = time.perf_counter()
    model.train(x[:, None], y, **train)
    seconds = time.perf_counter() - tick
    mean, var = model.predict(x_test[:, None])
    return {
        "seconds": seconds,
        "networks": len(model.sampled_weights),
        "log_likelihood": gaussian_log_likelihood(mean, var, y_test),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=3)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(2)
    # bojax: 100 kept networks per fit, after each set-up's default burn-in.
    ours = {
        "bojax bnn-hmc": BNNSurrogate().configured(samples=100),
        "bojax bnn-report": REPORT_BNN.configured(samples=100),
    }
    rows: dict[str, list[dict]] = {name: [] for name in ours}
    rows["Bohamiann (defaults)"] = []
    rows["Bohamiann (lr 1e-2)"] = []
    for seed in range(args.datasets):
        x, y, x_test, y_test = dataset(seed)
        for name, surrogate in ours.items():
            rows[name].append(fit_bojax(surrogate, seed, x, y, x_test, y_test))
        rows["Bohamiann (defaults)"].append(fit_bohamiann(seed, x, y, x_test, y_test))
        rows["Bohamiann (lr 1e-2)"].append(fit_bohamiann(seed, x, y, x_test, y_test, lr=1e-2))
        for name, results in rows.items():
            r = results[-1]
            print(
                f"data set {seed}: {name:<22} {r['seconds']:7.2f} s  {r['networks']:>4} networks  "
                f"held-out log-lik {r['log_likelihood']:7.3f}",
                flush=True,
            )
    print(f"\nBNN fit, 20 points, 3 x 50 tanh, {args.datasets} data sets (mean); bojax:")
    for name, surrogate in ours.items():
        sweeps = surrogate.burn_in + surrogate.num_samples * surrogate.thin
        print(
            f"  {name}: {surrogate.chains} chain(s) x {sweeps} HMC sweeps of "
            f"{surrogate.leapfrog_steps} leapfrog steps"
            + (
                f", after {surrogate.warm_start_steps} Adam steps"
                if surrogate.warm_start == "trained"
                else ""
            )
        )
    print(
        f"{'model':<24}{'fit s':>8}{'with compile':>14}{'networks':>10}{'log-lik':>9}{'ratio':>8}"
    )
    for name, results in rows.items():
        seconds = np.mean([r["seconds"] for r in results])
        compiled = np.mean([r.get("seconds_with_compile", r["seconds"]) for r in results])
        ratio = seconds / np.mean([r["seconds"] for r in rows["bojax bnn-hmc"]])
        print(
            f"{name:<24}{seconds:>8.2f}{compiled:>14.2f}{results[0]['networks']:>10}"
            f"{np.mean([r['log_likelihood'] for r in results]):>9.3f}{ratio:>7.1f}x"
        )
    for name in ours:
        print(
            f"{name}: mixture log-likelihood (per-sample noise) "
            f"{np.mean([r['mixture_log_likelihood'] for r in rows[name]]):.3f}; "
            f"HMC acceptance {np.mean([r['acceptance'] for r in rows[name]]):.2f}"
        )
    print("ratio: each model's fit seconds over bojax bnn-hmc's")


if __name__ == "__main__":
    main()
