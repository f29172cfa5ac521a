"""Built-in problems: the stated optimum is the real one (checked with SciPy)."""

import numpy as np
import pytest
from scipy.optimize import minimize

from bojax.errors import OutOfBoundsError, UnknownNameError
from bojax.objectives.problems import PROBLEMS, get_problem


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_stated_optimum_is_attained_and_is_global(name):
    problem = PROBLEMS[name]
    sign = -1.0 if problem.maximize else 1.0
    assert problem(problem.optimiser) == pytest.approx(problem.optimum, abs=1e-7)
    bounds = [(p.low, p.high) for p in problem.space]
    rng = np.random.default_rng(0)
    for start in rng.uniform(*np.array(bounds).T, size=(20, len(bounds))):
        found = minimize(
            lambda v: sign * problem(dict(zip(problem.space.names, v, strict=True))),
            start,
            bounds=bounds,
            method="L-BFGS-B",
        )
        assert found.fun >= sign * problem.optimum - 1e-9


def test_forrester_known_values():
    forrester = get_problem("forrester")
    assert forrester({"x": 0.7572}) == pytest.approx(-6.02074, abs=1e-5)
    assert forrester({"x": 0.0}) == pytest.approx(4 * np.sin(-4))


def test_known_values_from_the_literature():
    assert PROBLEMS["branin"]({"x1": 9.42478, "x2": 2.475}) == pytest.approx(0.397887, abs=1e-6)
    assert PROBLEMS["six_hump_camel"]({"x1": -0.0898, "x2": 0.7126}) == pytest.approx(
        -1.0316, abs=1e-4
    )
    assert PROBLEMS["mccormick"]({"x1": -0.54719, "x2": -1.54719}) == pytest.approx(
        -1.9133, abs=1e-4
    )
    assert PROBLEMS["hartmann6"](
        {
            f"x{i}": v
            for i, v in enumerate(
                [0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573], start=1
            )
        }
    ) == pytest.approx(-3.32237, abs=1e-5)
    assert PROBLEMS["sinc"]({"x": 0.0}) == pytest.approx(1 / np.pi)


def test_problem_errors():
    with pytest.raises(UnknownNameError):
        get_problem("nope")
    with pytest.raises(OutOfBoundsError):
        get_problem("forrester")({"x": 1.5})
