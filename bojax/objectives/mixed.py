"""Test problems with categorical parameters (mixed-space benchmarks).

* ``func2c``: two categoricals choose which of three scaled 2-D functions (Rosenbrock
  / 300, six-hump camel / 10, Beale / 50) are summed at ``2x``, ``x in [-1, 1]^2``; the
  second categorical has five choices, three of them Beale (CoCaBO, Ru et al. 2020).
  Minimum ``2 camel(x*) / 10 = -0.20632``.
* ``func3c``: three binary categoricals: the first two add Rosenbrock or camel, the
  third ``5 camel`` or ``2 Rosenbrock`` (the binary variant Casmopolitan uses, Wan et al.
  2021). Minimum ``7 camel(x*) / 10 = -0.72214``.
* ``ackley-5c5``: Ackley in ten dimensions, five of them binary categoricals with
  values ``{0, 1}`` and five reals on ``[-1, 1]`` (a small cousin of Ackley-53, Bliek et
  al. 2021). Minimum 0 at the origin.
* ``pest-control``: 25 stages, each choosing one of four pesticides or none; the cost
  of the pesticides bought plus the stages where the pest fraction exceeded 10 %, over
  100 simulations of a seeded pest-spread model (COMBO, Oh et al. 2019). The minimum is
  not known; benchmarks measure regret against the best value any method found.

Each categorical is also offered as the integer code a user must write without
categorical parameters (:func:`integer_coded`), for the benchmark's comparison.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

from bojax.objectives.problems import Problem
from bojax.parameters import Categorical, Condition
from bojax.spaces import Integer, Real, Space

_CAMEL_MIN = -1.031628453489877


def _rosenbrock(x1, x2):
    return (100 * (x2 - x1**2) ** 2 + (x1 - 1) ** 2) / 300


def _camel(x1, x2):
    return ((4 - 2.1 * x1**2 + x1**4 / 3) * x1**2 + x1 * x2 + (-4 + 4 * x2**2) * x2**2) / 10


def _beale(x1, x2):
    terms = (1.5 - x1 + x1 * x2, 2.25 - x1 + x1 * x2**2, 2.625 - x1 + x1 * x2**3)
    return sum(t**2 for t in terms) / 50


_PARTS = {"rosenbrock": _rosenbrock, "camel": _camel, "beale": _beale}


def func2c(p: Mapping) -> float:
    x1, x2 = 2 * p["x1"], 2 * p["x2"]
    second = p["h2"].rstrip("0123456789")  # beale1..beale3 are the same function
    return float(_PARTS[p["h1"]](x1, x2) + _PARTS[second](x1, x2))


def func3c(p: Mapping) -> float:
    x1, x2 = 2 * p["x1"], 2 * p["x2"]
    value = _PARTS[p["h1"]](x1, x2) + _PARTS[p["h2"]](x1, x2)
    value += 5 * _camel(x1, x2) if p["h3"] == "camel" else 2 * _rosenbrock(x1, x2)
    return float(value)


def ackley_5c5(p: Mapping) -> float:
    x = np.array([p[f"c{i}"] for i in range(5)] + [p[f"x{i}"] for i in range(5)], float)
    d = len(x)
    value = -20 * np.exp(-0.2 * np.sqrt(np.sum(x**2) / d)) - np.exp(
        np.sum(np.cos(2 * np.pi * x)) / d
    )
    return float(value + 20 + np.e)


def pest_control(p: Mapping, stages: int = 25, simulations: int = 100, seed: int = 0) -> float:
    """The COMBO pest-control cost of a plan ``p["s0"] .. p["s24"]`` in {0, ..., 4}
    (0: no pesticide). Each stage the pest fraction spreads as ``f + r (1 - f)`` without
    control or falls to ``(1 - c) f`` with pesticide ``k``; ``r ~ Beta(1, 17/3)``, ``c ~
    Beta(1, b_k)``, the initial fraction ``~ Beta(1, 30)``, every draw from one generator
    seeded afresh per draw (as the original does). Each use of ``k`` raises ``b_k`` by its
    tolerance rate / stages; its price falls with the number of stages using it."""
    plan = np.array([int(p[f"s{i}"]) for i in range(stages)])
    tolerance = {1: 1.0 / 7, 2: 2.5 / 7, 3: 2.0 / 7, 4: 0.5 / 7}
    price = {1: 1.0, 2: 0.8, 3: 0.7, 4: 0.5}
    discount = {1: 0.2, 2: 0.3, 3: 0.3, 4: 0.0}
    beta = {1: 2.0 / 7, 2: 3.0 / 7, 3: 3.0 / 7, 4: 5.0 / 7}

    def draw(b):
        return np.random.RandomState(seed).beta(1.0, b, size=simulations)

    fraction, cost = draw(30.0), 0.0
    for k in plan:
        spread = draw(17.0 / 3.0)
        cost += np.mean(fraction > 0.1)
        if k > 0:
            fraction = (1.0 - draw(beta[k])) * fraction
            beta[k] += tolerance[k] / stages
            cost += price[k] * (1.0 - discount[k] / stages * np.sum(plan == k))
        else:
            fraction = spread * (1 - fraction) + fraction
    return float(cost)


def _box(names, low=-1.0, high=1.0):
    return [Real(n, low, high) for n in names]


PARTS = ("rosenbrock", "camel", "beale")
MIXED_PROBLEMS: dict[str, Problem] = {
    p.name: p
    for p in [
        Problem(
            "func2c",
            Space(
                [
                    Categorical("h1", PARTS),
                    Categorical("h2", (*PARTS[:2], "beale1", "beale2", "beale3")),
                    *_box(("x1", "x2")),
                ]
            ),
            func2c,
            2 * _CAMEL_MIN / 10,
            {"h1": "camel", "h2": "camel", "x1": 0.0898420 / 2, "x2": -0.7126564 / 2},
            "2 categoricals (3, 5 choices) + 2 reals (CoCaBO)",
        ),
        Problem(
            "func3c",
            Space(
                [
                    Categorical("h1", PARTS[:2]),
                    Categorical("h2", PARTS[:2]),
                    Categorical("h3", ("camel", "rosenbrock")),
                    *_box(("x1", "x2")),
                ]
            ),
            func3c,
            7 * _CAMEL_MIN / 10,
            {
                "h1": "camel",
                "h2": "camel",
                "h3": "camel",
                "x1": 0.0898420 / 2,
                "x2": -0.7126564 / 2,
            },
            "3 binary categoricals + 2 reals (Casmopolitan's Func3C)",
        ),
        Problem(
            "ackley-5c5",
            Space(
                [
                    *(Categorical(f"c{i}", (0, 1)) for i in range(5)),
                    *_box(f"x{i}" for i in range(5)),
                ]
            ),
            ackley_5c5,
            0.0,
            {**{f"c{i}": 0 for i in range(5)}, **{f"x{i}": 0.0 for i in range(5)}},
            "Ackley, 5 binary categoricals + 5 reals",
        ),
        Problem(
            "pest-control",
            Space([Categorical(f"s{i}", (0, 1, 2, 3, 4)) for i in range(25)]),
            pest_control,
            float("nan"),  # unknown: regret is measured against the best found
            {},
            "25 categoricals of 5 choices (COMBO)",
        ),
    ]
}


def integer_coded(space: Space) -> tuple[Space, Callable[[Mapping], dict]]:
    """``space`` with each categorical replaced by an integer code ``0 .. K-1`` (the
    workaround without categorical parameters), and the map from coded points back."""

    def coded_condition(condition):
        parent = space[condition.parent] if condition is not None else None
        if not isinstance(parent, Categorical):
            return condition
        codes = tuple(parent.index(v) for v in condition.values)
        value = codes if condition.op == "in" else codes[0]
        return Condition(condition.parent, condition.op, value)

    coded = Space(
        [
            Integer(p.name, 0, len(p.choices) - 1, condition=coded_condition(p.condition))
            if isinstance(p, Categorical)
            else replace(p, condition=coded_condition(p.condition))
            for p in space.parameters
        ]
    )

    def decode(point: Mapping) -> dict:
        return {
            name: space[name].choices[int(v)] if isinstance(space[name], Categorical) else v
            for name, v in point.items()
        }

    return coded, decode
