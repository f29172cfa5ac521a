"""Benchmark objectives with known optima, each with its search space.

An objective takes a dict of named parameter values and returns a float, the same
contract as :func:`bojax.minimize` will use. Minimisation is the convention.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from bojax.errors import UnknownNameError
from bojax.spaces import Real, Space


@dataclass(frozen=True)
class Problem:
    """An objective on a space with its known minimum value and a minimiser."""

    name: str
    space: Space
    objective: Callable[[Mapping[str, float]], float]
    minimum: float
    minimiser: Mapping[str, float]
    description: str

    def __call__(self, point: Mapping[str, float]) -> float:
        return self.objective(self.space.validate(point))


def forrester(point: Mapping[str, float]) -> float:
    """``f(x) = (6x - 2)^2 sin(12x - 4)`` on [0, 1] (Forrester et al. 2008, BNN report)."""
    x = point["x"]
    return float((6 * x - 2) ** 2 * np.sin(12 * x - 4))


PROBLEMS: dict[str, Problem] = {
    "forrester": Problem(
        "forrester",
        Space([Real("x", 0.0, 1.0)]),
        forrester,
        minimum=-6.020740055767083,
        minimiser={"x": 0.7572487561660257},
        description="1-D, one global and one local minimum",
    ),
}


def get_problem(name: str) -> Problem:
    try:
        return PROBLEMS[name]
    except KeyError:
        raise UnknownNameError("problem", name, list(PROBLEMS)) from None
