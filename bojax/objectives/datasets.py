"""Data sets of the reports, generated from a recorded seed.

Each generator returns a :class:`Regression` with independent training and test sets of
the same law: the training set from ``numpy.random.default_rng([seed, 0])``, the test
set from ``default_rng([seed, 1])``, so a test set never depends on the training size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bojax.errors import UnknownNameError


@dataclass(frozen=True)
class Regression:
    """A one-dimensional regression problem: train/test samples and the true mean."""

    name: str
    seed: int
    x_train: np.ndarray  # (n, 1)
    y_train: np.ndarray  # (n,)
    x_test: np.ndarray
    y_test: np.ndarray
    truth: Callable[[np.ndarray], np.ndarray]  # E[y | x]
    domain: tuple[float, float]
    noise_std: float

    @property
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.x_train, self.y_train, self.x_test, self.y_test


def piecewise(x: np.ndarray) -> np.ndarray:
    """The ensemble-design report's Experiment 1 function: linear pieces, a parabola and
    ``x^2 sin(2x)``, with jumps at -10, -8, -6 and 2."""
    x = np.asarray(x, dtype=np.float64)
    return np.select(
        [x < -10, x < -8, x < -6, x < 2],
        [x, -x, x, (x + 5) ** 2 - 7],
        default=x**2 * np.sin(2 * x),
    )


def cubic(x: np.ndarray) -> np.ndarray:
    """Experiment 2's mean ``10 - 140 x + 400 x^2 - 250 x^3`` (Kroese et al. 2019's polyreg)."""
    x = np.asarray(x, dtype=np.float64)
    return 10 - 140 * x + 400 * x**2 - 250 * x**3


def _sample(name, seed, truth, domain, noise_std, n_train, n_test) -> Regression:
    def draw(stream: int, n: int):
        rng = np.random.default_rng([seed, stream])
        x = rng.uniform(*domain, size=n)
        return x[:, None], truth(x) + noise_std * rng.standard_normal(n)

    (x, y), (x_test, y_test) = draw(0, n_train), draw(1, n_test)
    return Regression(name, seed, x, y, x_test, y_test, truth, domain, noise_std)


def experiment1(seed: int = 0, n_train: int = 150, n_test: int = 150) -> Regression:
    """``x ~ U(-14, 11)``, ``y = piecewise(x) + N(0, 5^2)`` (ensemble-design report, 5.1)."""
    return _sample("experiment1", seed, piecewise, (-14.0, 11.0), 5.0, n_train, n_test)


def experiment2(seed: int = 0, n_train: int = 100, n_test: int = 100) -> Regression:
    """``x ~ U(0, 1)``, ``y ~ N(cubic(x), 5^2)`` (ensemble-design report, 5.2)."""
    return _sample("experiment2", seed, cubic, (0.0, 1.0), 5.0, n_train, n_test)


DATASETS: dict[str, Callable[..., Regression]] = {
    "experiment1": experiment1,
    "experiment2": experiment2,
}


def get_dataset(name: str, seed: int = 0, **sizes) -> Regression:
    try:
        return DATASETS[name](seed, **sizes)
    except KeyError:
        raise UnknownNameError("dataset", name, list(DATASETS)) from None
