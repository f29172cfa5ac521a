"""The optimisers the benchmarks compare, behind one ask-only interface.

Every method works on the unit cube ``[0, 1]^d`` and minimises. ``make(name, dim, seed,
initial)`` returns an object with ``tell(u, y)`` (one evaluation: unit point, output)
and ``ask() -> u`` (the next unit point: surrogate fit + acquisition maximisation, the
part the speed benchmark times). Methods keep state between calls: bojax's slice chain
continues from one fit to the next, Optuna keeps its study; BoTorch refits from
scratch, as its own loops do.

The peers are imported when first made, so the bojax arms run without them:

* BoTorch (torch): ``SingleTaskGP`` + ``LogExpectedImprovement`` and
  ``SaasFullyBayesianSingleTaskGP`` (NUTS in NumPyro) + ``qLogExpectedImprovement``,
  each refitted from scratch every iteration with BoTorch's defaults, acquisitions by
  ``optimize_acqf`` (10 restarts, 512 raw samples; BoTorch's tutorials' settings).
* from :mod:`bojax.reports.peers` (shared with the reports): Optuna's ``TPESampler``,
  ``GPSampler`` (needs torch) and bojax's Optuna sampler, defaults, with the shared
  initial design added as finished trials; random search.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
from collections.abc import Callable

import jax
import numpy as np

import bojax
from bojax.reports import peers

BOJAX_ARMS = {
    # name: (surrogate, acquisition)
    "bojax gp-slice": ("gp-slice", "log_ei"),
    "bojax gp-ess": ("gp-ess", "log_ei"),
    "bojax gp-hmc": ("gp-hmc", "ei"),
    "bojax gp-map": ("gp-map", "ei"),
    "bojax bnn-hmc": ("bnn-hmc", "lcb"),
    "bojax bnn-hmc-logei": ("bnn-hmc", "log_ei"),
    "bojax bnn-report": ("bnn-report", "lcb"),
}


class BojaxArm:
    """bojax's own loop (``init``/``tell``/``ask``); the surrogate's chain carries over."""

    def __init__(self, name: str, dim: int, seed: int, initial: int):
        surrogate, acquisition = BOJAX_ARMS[name]
        settings = bojax.Settings(
            surrogate=surrogate, acquisition=acquisition, initial=initial, seed=seed
        )
        self.state = bojax.init(
            bojax.Space([bojax.Real(f"u{i}", 0, 1) for i in range(dim)]), settings
        )

    def tell(self, u: np.ndarray, y: float) -> None:
        self.state = bojax.tell(self.state, u, y)

    def ask(self) -> np.ndarray:
        point, self.state, _ = bojax.ask(self.state)
        return np.asarray(point)


class PeerArm:
    """A peer of :mod:`bojax.reports.peers` (Optuna's samplers, random search) on the
    unit cube ``u0..u{d-1}``."""

    def __init__(self, name: str, dim: int, seed: int, initial: int):
        self.names = [f"u{i}" for i in range(dim)]
        space = bojax.Space([bojax.Real(n, 0, 1) for n in self.names])
        self.peer = peers.PEERS[PEER_OF[name]].make(space, seed=seed, initial=initial)

    def tell(self, u: np.ndarray, y: float) -> None:
        self.peer.tell({n: float(v) for n, v in zip(self.names, u, strict=True)}, y)

    def ask(self) -> np.ndarray:
        point = self.peer.ask()
        return np.array([point[n] for n in self.names])


class BoTorchArm:
    """BoTorch, refitted from scratch each call (its usual loop); maximises ``-y``."""

    def __init__(self, name: str, dim: int, seed: int, initial: int):
        import torch

        self.torch, self.name, self.dim, self.seed = torch, name, dim, seed
        self.u, self.y, self.calls = [], [], 0

    def tell(self, u: np.ndarray, y: float) -> None:
        self.u.append(np.asarray(u, dtype=np.float64))
        self.y.append(float(y))

    def ask(self) -> np.ndarray:
        torch = self.torch
        from botorch.optim import optimize_acqf

        torch.manual_seed(self.seed * 100_003 + self.calls)
        self.calls += 1
        x = torch.tensor(np.array(self.u), dtype=torch.float64)
        targets = -torch.tensor(self.y, dtype=torch.float64).unsqueeze(-1)
        bounds = torch.stack([torch.zeros(self.dim), torch.ones(self.dim)]).double()
        if self.name == "BoTorch SAAS":
            from botorch.acquisition.logei import qLogExpectedImprovement
            from botorch.fit import fit_fully_bayesian_model_nuts
            from botorch.models.fully_bayesian import SaasFullyBayesianSingleTaskGP

            standardised = (targets - targets.mean()) / targets.std()
            model = SaasFullyBayesianSingleTaskGP(x, standardised)
            fit_fully_bayesian_model_nuts(model, disable_progbar=True, seed=self.seed)
            acquisition = qLogExpectedImprovement(model, best_f=standardised.max())
        else:
            from botorch.acquisition.analytic import LogExpectedImprovement
            from botorch.fit import fit_gpytorch_mll
            from botorch.models import SingleTaskGP
            from gpytorch.mlls import ExactMarginalLogLikelihood

            model = SingleTaskGP(x, targets)  # outcomes standardised by its default transform
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
            acquisition = LogExpectedImprovement(model, best_f=targets.max())
        candidate, _ = optimize_acqf(
            acquisition, bounds=bounds, q=1, num_restarts=10, raw_samples=512
        )
        return candidate.squeeze(0).detach().numpy()


# Names here -> bojax.reports.peers names; BoTorch's arms are the benchmarks' own.
PEER_OF = {"Optuna TPE": "tpe", "Optuna GP": "optuna-gp", "Optuna bojax": "optuna-bojax"}
PEER_OF["random"] = "random"
PEERS: dict[str, tuple[Callable, tuple[str, ...]]] = {
    # name: (class, the modules it needs)
    "BoTorch SAAS": (BoTorchArm, ("botorch",)),
    "BoTorch GP": (BoTorchArm, ("botorch",)),
    **{name: (PeerArm, peers.PEERS[peer].packages) for name, peer in PEER_OF.items()},
}


def available(name: str) -> bool:
    """Whether ``name`` can run here (its peer library is installed)."""
    needs = () if name in BOJAX_ARMS else PEERS[name][1]
    return all(importlib.util.find_spec(module) is not None for module in needs)


def select(requested: list[str], refuse: Callable[[str], None], console) -> list[str]:
    """The requested methods that can run here; ``refuse(message)`` for an unknown name
    (a parser's ``error``), a printed note for those whose peer is not installed."""
    unknown = [m for m in requested if m not in BOJAX_ARMS and m not in PEERS]
    if unknown:
        refuse(f"unknown methods {unknown}; known: {[*BOJAX_ARMS, *PEERS]}")
    names = [m for m in requested if available(m)]
    missing = [m for m in requested if m not in names]
    if missing:
        console.print(f"[yellow]not installed, skipped: {', '.join(missing)}[/yellow]")
    return names


def make(name: str, dim: int, seed: int, initial: int):
    if name in BOJAX_ARMS:
        return BojaxArm(name, dim, seed, initial)
    if name not in PEERS:
        raise ValueError(f"unknown method {name!r}; known: {[*BOJAX_ARMS, *PEERS]}")
    return PEERS[name][0](name, dim, seed, initial)


def sobol_design(dim: int, count: int, seed: int) -> np.ndarray:
    """The shared initial design: ``count`` scrambled Sobol points of ``[0, 1]^dim``."""
    space = bojax.Space([bojax.Real(f"u{i}", 0, 1) for i in range(dim)])
    return np.asarray(space.sample(jax.random.key(seed), count, method="sobol"))


def machine() -> dict:
    """Where a table was measured: CPU, cores, and the versions that matter."""
    versions = {}
    for package in ("bojax-research", "jax", "blackjax", "numpyro", "torch", "botorch", "optuna"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    return {
        "processor": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "devices": [str(d) for d in jax.devices()],
        "versions": versions,
    }
