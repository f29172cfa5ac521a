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
    """An objective on a space with its known optimum value and one optimiser."""

    name: str
    space: Space
    objective: Callable[[Mapping[str, float]], float]
    optimum: float
    optimiser: Mapping[str, float]
    description: str
    maximize: bool = False

    def __call__(self, point: Mapping[str, float]) -> float:
        return self.objective(self.space.validate(point))


def forrester(p):
    """``(6x - 2)^2 sin(12x - 4)`` on [0, 1] (Forrester et al. 2008; BNN report)."""
    return float((6 * p["x"] - 2) ** 2 * np.sin(12 * p["x"] - 4))


def branin(p):
    """Branin-Hoo on [-5, 10] x [0, 15]: three global minima of 0.397887."""
    x1, x2 = p["x1"], p["x2"]
    b, c = 5.1 / (4 * np.pi**2), 5 / np.pi
    return float((x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - 1 / (8 * np.pi)) * np.cos(x1) + 10)


def six_hump_camel(p):
    """Six-hump camel on [-3, 3] x [-2, 2]: two global minima of -1.0316 (BNN report)."""
    x1, x2 = p["x1"], p["x2"]
    return float((4 - 2.1 * x1**2 + x1**4 / 3) * x1**2 + x1 * x2 + (-4 + 4 * x2**2) * x2**2)


def mccormick(p):
    """McCormick on [-1.5, 4] x [-3, 4] (BNN report)."""
    x1, x2 = p["x1"], p["x2"]
    return float(np.sin(x1 + x2) + (x1 - x2) ** 2 - 1.5 * x1 + 2.5 * x2 + 1)


def rosenbrock(p):
    """Rosenbrock on [-2.048, 2.048]^2: minimum 0 at (1, 1) (BNN report)."""
    x1, x2 = p["x1"], p["x2"]
    return float(100 * (x2 - x1**2) ** 2 + (1 - x1) ** 2)


_HARTMANN_A = np.array(
    [
        [10, 3, 17, 3.5, 1.7, 8],
        [0.05, 10, 17, 0.1, 8, 14],
        [3, 3.5, 1.7, 10, 17, 8],
        [17, 8, 0.05, 10, 0.1, 14],
    ]
)
_HARTMANN_P = 1e-4 * np.array(
    [
        [1312, 1696, 5569, 124, 8283, 5886],
        [2329, 4135, 8307, 3736, 1004, 9991],
        [2348, 1451, 3522, 2883, 3047, 6650],
        [4047, 8828, 8732, 5743, 1091, 381],
    ]
)
_HARTMANN_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])


def hartmann6(p):
    """Hartmann-6 on [0, 1]^6: minimum -3.32237."""
    x = np.array([p[f"x{i}"] for i in range(1, 7)])
    return float(
        -np.sum(_HARTMANN_ALPHA * np.exp(-np.sum(_HARTMANN_A * (x - _HARTMANN_P) ** 2, axis=1)))
    )


def sinc(p):
    """``sin(x) / (pi x)`` on [-10, 10], to maximise: 1/pi at 0, side maxima near +-7.725.

    The hybrid-exploration report's toy problem; it gives no domain, this one is ours.
    """
    return float(np.sinc(p["x"] / np.pi) / np.pi)


def sin_cos(p):
    """``sin(7x) + cos(17x)`` on [-1, 1] (BNN report, eq. 5.10)."""
    return float(np.sin(7 * p["x"]) + np.cos(17 * p["x"]))


def _box(*bounds: tuple[str, float, float]) -> Space:
    return Space([Real(name, low, high) for name, low, high in bounds])


PROBLEMS: dict[str, Problem] = {
    p.name: p
    for p in [
        Problem(
            "forrester",
            _box(("x", 0, 1)),
            forrester,
            -6.020740055767083,
            {"x": 0.7572487561660257},
            "1-D, one global and one local minimum",
        ),
        Problem(
            "branin",
            _box(("x1", -5, 10), ("x2", 0, 15)),
            branin,
            0.39788735772973816,
            {"x1": np.pi, "x2": 2.275},
            "2-D, three global minima",
        ),
        Problem(
            "six_hump_camel",
            _box(("x1", -3, 3), ("x2", -2, 2)),
            six_hump_camel,
            -1.031628453489877,
            {"x1": 0.08984201, "x2": -0.71265641},
            "2-D, six local minima, two global",
        ),
        Problem(
            "mccormick",
            _box(("x1", -1.5, 4), ("x2", -3, 4)),
            mccormick,
            -1.9132229549810358,
            {"x1": -0.54719757, "x2": -1.54719757},
            "2-D, smooth valley",
        ),
        Problem(
            "rosenbrock",
            _box(("x1", -2.048, 2.048), ("x2", -2.048, 2.048)),
            rosenbrock,
            0.0,
            {"x1": 1.0, "x2": 1.0},
            "2-D, curved narrow valley",
        ),
        Problem(
            "hartmann6",
            _box(*[(f"x{i}", 0, 1) for i in range(1, 7)]),
            hartmann6,
            -3.322368011415514,
            dict(
                zip(
                    [f"x{i}" for i in range(1, 7)],
                    [
                        0.20168950968761765,
                        0.15001069413863433,
                        0.47687396963094986,
                        0.27533242916768874,
                        0.31165161370991157,
                        0.6573005333899428,
                    ],
                    strict=True,
                )
            ),
            "6-D, six local minima",
        ),
        Problem(
            "sinc",
            _box(("x", -10, 10)),
            sinc,
            1 / np.pi,
            {"x": 0.0},
            "1-D, maximise; EI stalls on a side lobe (hybrid report)",
            maximize=True,
        ),
        Problem(
            "sin_cos",
            _box(("x", -1, 1)),
            sin_cos,
            -1.9672852514210337,
            {"x": -0.1905020327023089},
            "1-D, many local minima (BNN report)",
        ),
    ]
}


def get_problem(name: str) -> Problem:
    try:
        return PROBLEMS[name]
    except KeyError:
        raise UnknownNameError("problem", name, list(PROBLEMS)) from None
