"""The arc-kernel report's settings and the report's own numbers."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from bojax.errors import SettingsError
from bojax.objectives.deepnet import DATASETS, Training
from bojax.reports import override

SURROGATE_OF = {"arc": "gp-slice-arc", "baseline": "gp-slice-filled"}
PEERS = ("tpe", "smac")  # names in bojax.reports.peers.PEERS
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
