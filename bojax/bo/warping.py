"""Output warpings: what the surrogate sees of the objective's values, and back.

The loop minimises, so outputs are first negated when maximising (``sign``). Then:

* ``"standardise"``: ``z = (sign y - mean) / sd`` (a constant or single output keeps
  scale 1).
* ``"rank"``: normal scores, ``z_i = Phi^-1((r_i - 1/2) / n)`` with ``r_i`` the rank of
  ``sign y_i`` (ties share their average rank). A heavy-tailed objective (Rosenbrock,
  Branin) then keeps its basin resolvable: a few huge values no longer squash the
  region that matters into a sliver of the scale (the same idea as Snoek et al. 2014's
  input and Cowen-Rivers et al. 2022's output warpings; this one is fixed, not fitted).

Both are increasing, so the argmin, incumbents and every improvement-based acquisition
keep their meaning on ``z``. :meth:`Warping.inverse` takes a value back to the
objective's units for reporting: piecewise linear between the observed pairs (exact at
them), extended beyond the extremes with the slope of the outermost segment.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

WARPINGS = ("standardise", "rank")


class Warping(NamedTuple):
    """A fitted warping: ``z = forward(y)`` on the outputs it was fitted to."""

    kind: str
    sign: float
    shift: float
    scale: float
    knots_y: np.ndarray  # sorted distinct values of sign * y
    knots_z: np.ndarray  # their warped values

    def forward(self, y: np.ndarray) -> np.ndarray:
        """``z`` at outputs ``y`` in the objective's units (exact at the fitted ones)."""
        v = self.sign * np.asarray(y, dtype=np.float64)
        if self.kind == "standardise":
            return (v - self.shift) / self.scale
        return _interpolate(v, self.knots_y, self.knots_z, 1.0 / self.scale)

    def inverse(self, z: np.ndarray) -> np.ndarray:
        """The objective's value whose warped value is ``z``."""
        z = np.asarray(z, dtype=np.float64)
        if self.kind == "standardise":
            return self.sign * (z * self.scale + self.shift)
        return self.sign * _interpolate(z, self.knots_z, self.knots_y, self.scale)

    def inverse_sd(self, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
        """An sd ``sd`` around ``mean`` (warped units) in the objective's units: half the
        width of the image of ``mean +- sd`` (exact for ``"standardise"``)."""
        upper, lower = self.inverse(mean + sd), self.inverse(mean - sd)
        return np.abs(upper - lower) / 2


def fit(kind: str, y: np.ndarray, maximize: bool = False) -> Warping:
    """The warping ``kind`` fitted to finite outputs ``y`` (at least one)."""
    if kind not in WARPINGS:
        raise ValueError(f"warping must be one of {WARPINGS}, got {kind!r}")
    sign = -1.0 if maximize else 1.0
    v = sign * np.asarray(y, dtype=np.float64)
    shift, scale = float(np.mean(v)), float(np.std(v))
    if not scale > 1e-12 * max(1.0, abs(shift)):
        scale = 1.0
    if kind == "standardise":
        return Warping(kind, sign, shift, scale, v[:0], v[:0])
    from scipy import stats  # here: importing scipy.stats takes ~1.5 s of every run

    z = stats.norm.ppf((stats.rankdata(v) - 0.5) / len(v))
    knots_y, first = np.unique(v, return_index=True)
    return Warping(kind, sign, shift, scale, knots_y, z[first])


def _interpolate(x, knots_x, knots_y, slope_if_single):
    """Piecewise linear through the knots, continued linearly past both ends."""
    if len(knots_x) < 2:
        return knots_y[0] + (x - knots_x[0]) * slope_if_single
    inside = np.interp(x, knots_x, knots_y)
    low = (knots_y[1] - knots_y[0]) / (knots_x[1] - knots_x[0])
    high = (knots_y[-1] - knots_y[-2]) / (knots_x[-1] - knots_x[-2])
    below = knots_y[0] + (x - knots_x[0]) * low
    above = knots_y[-1] + (x - knots_x[-1]) * high
    return np.where(x < knots_x[0], below, np.where(x > knots_x[-1], above, inside))
