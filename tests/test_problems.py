"""Built-in problems: the stated optimum is the real one (checked with SciPy)."""

import numpy as np
import pytest
from scipy.optimize import minimize

from bojax.errors import OutOfBoundsError, UnknownNameError
from bojax.problems import PROBLEMS, get_problem


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_stated_minimum_is_attained_and_is_global(name):
    problem = PROBLEMS[name]
    assert problem(problem.minimiser) == pytest.approx(problem.minimum, abs=1e-9)
    bounds = [(p.low, p.high) for p in problem.space]
    rng = np.random.default_rng(0)
    for start in rng.uniform(*np.array(bounds).T, size=(20, len(bounds))):
        found = minimize(
            lambda v: problem(dict(zip(problem.space.names, v, strict=True))),
            start,
            bounds=bounds,
            method="L-BFGS-B",
        )
        assert found.fun >= problem.minimum - 1e-9


def test_forrester_known_values():
    forrester = get_problem("forrester")
    assert forrester({"x": 0.7572}) == pytest.approx(-6.02074, abs=1e-5)
    assert forrester({"x": 0.0}) == pytest.approx(4 * np.sin(-4))


def test_problem_errors():
    with pytest.raises(UnknownNameError):
        get_problem("nope")
    with pytest.raises(OutOfBoundsError):
        get_problem("forrester")({"x": 1.5})
