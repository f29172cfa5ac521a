"""Test problems with several objectives (all minimised), each returning a dict of
metrics, with the reference point its hypervolume is measured against.

* ``branin-currin`` (d = 2): Branin and Currin's exponential function on the unit square
  (Belakaria et al. 2019; reference point (18, 6), as in BoTorch).
* ``zdt1``, ``zdt2``, ``zdt3`` (d = 4): Zitzler, Deb & Thiele (2000); ``f1 = x_1``,
  ``g = 1 + 9 / (d - 1) sum_{i>1} x_i``, ``f2 = g h(f1, g)`` with ``h = 1 - sqrt(f1/g)``,
  ``1 - (f1/g)^2`` and ``1 - sqrt(f1/g) - (f1/g) sin(10 pi f1)``; the front lies at
  ``g = 1``. Reference point (11, 11).
* ``dtlz2`` (d = 6, three objectives): Deb et al. (2005); the front is the positive
  part of the unit sphere. Reference point (1.1, 1.1, 1.1).
* ``c-branin-currin``: Branin-Currin with the outcome constraint
  ``disc = (x1' - 2.5)^2 + (x2' - 7.5)^2 <= 50`` on Branin's scaled inputs (Gelbart et
  al. 2014's disc constraint, as in BoTorch's ConstrainedBraninCurrin); the run models
  ``disc`` as a metric of its own. Reference point (80, 12).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bojax.spaces import Real, Space


@dataclass(frozen=True)
class MultiProblem:
    """A problem with several metrics: ``fn(point) -> {metric: value}``."""

    name: str
    space: Space
    fn: Callable[[dict[str, Any]], dict[str, float]]
    objectives: dict[str, str]
    reference_point: tuple[float, ...]
    constraints: dict[str, tuple[str, float]] = field(default_factory=dict)

    def __call__(self, point: dict[str, Any]) -> dict[str, float]:
        return self.fn(point)

    def settings(self) -> dict[str, Any]:
        """The ``minimize``/``Settings`` keywords that declare this problem's metrics."""
        return {
            "objectives": dict(self.objectives),
            "constraints": dict(self.constraints) or None,
            "reference_point": list(self.reference_point),
        }


def _unit(d: int) -> Space:
    return Space([Real(f"x{i}", 0.0, 1.0) for i in range(d)])


def _xs(point: dict[str, Any], d: int) -> np.ndarray:
    return np.array([point[f"x{i}"] for i in range(d)], dtype=np.float64)


def _branin(x1: float, x2: float) -> float:
    a, b = 15.0 * x1 - 5.0, 15.0 * x2
    return (
        (b - 5.1 / (4 * math.pi**2) * a**2 + 5 / math.pi * a - 6) ** 2
        + 10 * (1 - 1 / (8 * math.pi)) * math.cos(a)
        + 10
    )


def _currin(x1: float, x2: float) -> float:
    x2 = max(x2, 1e-12)  # its limit at x2 = 0 is finite; the formula divides by zero
    factor = 1 - math.exp(-1 / (2 * x2))
    return (
        factor
        * (2300 * x1**3 + 1900 * x1**2 + 2092 * x1 + 60)
        / (100 * x1**3 + 500 * x1**2 + 4 * x1 + 20)
    )


def branin_currin(point: dict[str, Any]) -> dict[str, float]:
    return {
        "branin": _branin(point["x0"], point["x1"]),
        "currin": _currin(point["x0"], point["x1"]),
    }


def constrained_branin_currin(point: dict[str, Any]) -> dict[str, float]:
    a, b = 15.0 * point["x0"] - 5.0, 15.0 * point["x1"]
    return {**branin_currin(point), "disc": (a - 2.5) ** 2 + (b - 7.5) ** 2}


def _zdt(h: Callable[[float, float], float], d: int) -> Callable[[dict[str, Any]], dict]:
    def fn(point: dict[str, Any]) -> dict[str, float]:
        x = _xs(point, d)
        f1 = float(x[0])
        g = 1.0 + 9.0 / (d - 1) * float(np.sum(x[1:]))
        return {"f1": f1, "f2": g * h(f1, g)}

    return fn


def _dtlz2(d: int, objectives: int) -> Callable[[dict[str, Any]], dict]:
    def fn(point: dict[str, Any]) -> dict[str, float]:
        x = _xs(point, d)
        g = float(np.sum((x[objectives - 1 :] - 0.5) ** 2))
        angles = x[: objectives - 1] * math.pi / 2
        values = []
        for m in range(objectives):
            value = 1.0 + g
            value *= float(np.prod(np.cos(angles[: objectives - 1 - m])))
            if m > 0:
                value *= math.sin(angles[objectives - 1 - m])
            values.append(value)
        return {f"f{m + 1}": v for m, v in enumerate(values)}

    return fn


ZDT_D = 4
DTLZ_D = 6
MULTI_PROBLEMS: dict[str, MultiProblem] = {
    "branin-currin": MultiProblem(
        "branin-currin", _unit(2), branin_currin, {"branin": "min", "currin": "min"}, (18.0, 6.0)
    ),
    "zdt1": MultiProblem(
        "zdt1", _unit(ZDT_D), _zdt(lambda f, g: 1 - math.sqrt(f / g), ZDT_D),
        {"f1": "min", "f2": "min"}, (11.0, 11.0),
    ),
    "zdt2": MultiProblem(
        "zdt2", _unit(ZDT_D), _zdt(lambda f, g: 1 - (f / g) ** 2, ZDT_D),
        {"f1": "min", "f2": "min"}, (11.0, 11.0),
    ),
    "zdt3": MultiProblem(
        "zdt3", _unit(ZDT_D),
        _zdt(lambda f, g: 1 - math.sqrt(f / g) - f / g * math.sin(10 * math.pi * f), ZDT_D),
        {"f1": "min", "f2": "min"}, (11.0, 11.0),
    ),
    "dtlz2": MultiProblem(
        "dtlz2", _unit(DTLZ_D), _dtlz2(DTLZ_D, 3), {"f1": "min", "f2": "min", "f3": "min"},
        (1.1, 1.1, 1.1),
    ),
    "c-branin-currin": MultiProblem(
        "c-branin-currin", _unit(2), constrained_branin_currin,
        {"branin": "min", "currin": "min"}, (80.0, 12.0), {"disc": ("<=", 50.0)},
    ),
}  # fmt: skip
