"""Learning curves the step-wise tests train: a quadratic's value reached along 1/step."""

from __future__ import annotations

import math

import bojax
from bojax.parameters import Real

SPACE = bojax.Space([Real("lr", 1e-4, 1e-1, log=True), Real("w", 0.0, 1.0)])


def final_value(point) -> float:
    a = math.log10(point["lr"]) + 2.5
    return a * a + (point["w"] - 0.3) ** 2


def make_train(max_step: int = 27, log: list | None = None):
    """Curves falling as 1/step to the design's final value; ``log`` gets every report."""

    def train(point, report):
        final = final_value(point)
        for step in range(1, max_step + 1):
            value = final + 2.0 / step
            if log is not None:
                log.append((point["lr"], step))
            report(step, value)
        return final

    return train


KEYS = ("x", "u", "y", "status", "curve", "phase")


def same_records(a, b):
    return [{k: r[k] for k in KEYS} for r in a] == [{k: r[k] for k in KEYS} for r in b]


def resumable(log: list | None = None, max_step: int = 27):
    """make_train's curves, continued from a checkpoint (the last step reported)."""

    def train(point, report, checkpoint=None):
        final = final_value(point)
        for step in range(1 + (checkpoint or 0), max_step + 1):
            if log is not None:
                log.append(step)
            report(step, final + 2.0 / step, checkpoint=step)
        return final

    return train
