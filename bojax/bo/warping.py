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

WARPINGS = ("standardise", "rank", "power")
LAMBDA_RANGE = (-2.0, 2.0)  # the power is searched here: beyond it, one point dominates


class Warping(NamedTuple):
    """A fitted warping: ``z = forward(y)`` on the outputs it was fitted to."""

    kind: str
    sign: float
    shift: float
    scale: float
    knots_y: np.ndarray  # sorted distinct values of sign * y
    knots_z: np.ndarray  # their warped values
    power: float = 1.0  # "power": the fitted lambda
    method: str = ""  # "power": "box-cox" or "yeo-johnson"
    unit: float = 1.0  # "power": the transform acts on sign * y / unit

    def forward(self, y: np.ndarray) -> np.ndarray:
        """``z`` at outputs ``y`` in the objective's units (exact at the fitted ones)."""
        v = self.sign * np.asarray(y, dtype=np.float64)
        if self.kind == "standardise":
            return (v - self.shift) / self.scale
        if self.kind == "power":
            return (_power(v / self.unit, self.power, self.method) - self.shift) / self.scale
        return _interpolate(v, self.knots_y, self.knots_z, 1.0 / self.scale)

    def inverse(self, z: np.ndarray) -> np.ndarray:
        """The objective's value whose warped value is ``z``."""
        z = np.asarray(z, dtype=np.float64)
        if self.kind == "standardise":
            return self.sign * (z * self.scale + self.shift)
        if self.kind == "power":
            t = z * self.scale + self.shift
            return self.sign * self.unit * _power_inverse(t, self.power, self.method)
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
    if kind == "power":
        return _fit_power(v, sign)
    shift, scale = _location_and_scale(v)
    if kind == "standardise":
        return Warping(kind, sign, shift, scale, v[:0], v[:0])
    from scipy import stats  # here: importing scipy.stats takes ~1.5 s of every run

    z = stats.norm.ppf((stats.rankdata(v) - 0.5) / len(v))
    knots_y, first = np.unique(v, return_index=True)
    return Warping(kind, sign, shift, scale, knots_y, z[first])


def mean_and_spread(v: np.ndarray, axis: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(np.mean(v, axis), np.std(v, axis))`` computed on ``v`` divided by its largest
    magnitude, so that values of 1e-200 units do not square to zero, nor a finite
    penalty of 1e308 sum or square to inf."""
    largest = np.max(np.abs(v), axis=axis, keepdims=True, initial=0.0)
    safe = np.where(largest > 0, largest, 1.0)
    unit = v / safe
    squeeze = (lambda a: np.squeeze(a, axis=axis)) if axis is not None else np.squeeze
    mean = safe * np.mean(unit, axis=axis, keepdims=True)
    return squeeze(mean), squeeze(safe * np.std(unit, axis=axis, keepdims=True))


def spread(v: np.ndarray, axis: int | None = None) -> np.ndarray:
    """``np.std(v, axis)``, robust to tiny and huge values (:func:`mean_and_spread`)."""
    return mean_and_spread(v, axis)[1]


def usable_scale(shift, scale):
    """``scale``, or 1 where the values are (numerically) constant: their spread within
    rounding of their mean, relative to it (values of 1e-13 units differ), or zero."""
    return np.where(scale > np.maximum(1e-12 * np.abs(shift), 1e-300), scale, 1.0)


def _location_and_scale(v: np.ndarray) -> tuple[float, float]:
    """Mean and sd of ``v`` (:func:`mean_and_spread`); sd 1 where the values are
    (numerically) constant (:func:`usable_scale`)."""
    shift, scale = mean_and_spread(v)
    return float(shift), float(usable_scale(shift, scale))


def _interpolate(x, knots_x, knots_y, slope_if_single):
    """Piecewise linear through the knots, continued linearly past both ends."""
    if len(knots_x) < 2:
        return knots_y[0] + (x - knots_x[0]) * slope_if_single
    inside = np.interp(x, knots_x, knots_y)
    low = (knots_y[1] - knots_y[0]) / (knots_x[1] - knots_x[0])
    high = (knots_y[-1] - knots_y[-2]) / (knots_x[-1] - knots_x[-2])
    with np.errstate(over="ignore"):  # (far points overflow on the side np.where drops)
        below = knots_y[0] + (x - knots_x[0]) * low
        above = knots_y[-1] + (x - knots_x[-1]) * high
    return np.where(x < knots_x[0], below, np.where(x > knots_x[-1], above, inside))


def _power(v, lam: float, method: str):
    """Box-Cox (``method="box-cox"``, ``v > 0``) or Yeo-Johnson of ``v`` at ``lam``."""
    v = np.asarray(v, dtype=np.float64)
    if method == "box-cox":
        return np.log(v) if lam == 0 else np.expm1(lam * np.log(v)) / lam
    positive, magnitude = v >= 0, np.abs(v)
    up = np.log1p(magnitude) if lam == 0 else np.expm1(lam * np.log1p(magnitude)) / lam
    down = (
        np.log1p(magnitude) if lam == 2 else np.expm1((2 - lam) * np.log1p(magnitude)) / (2 - lam)
    )
    return np.where(positive, up, -down)


def _power_inverse(t, lam: float, method: str):
    """The inverse of :func:`_power`; past the transform's range (Box-Cox with
    ``lam != 0`` is bounded on one side) it returns the range's end, 0 or infinity."""
    t = np.asarray(t, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if method == "box-cox":
            if lam == 0:
                return np.exp(t)
            return np.exp(_log1p_clipped(lam * t) / lam)
        if lam == 0:
            up = np.expm1(t)
        else:
            up = np.expm1(_log1p_clipped(lam * t) / lam)
        if lam == 2:
            down = -np.expm1(-t)
        else:
            down = -np.expm1(_log1p_clipped(-(2 - lam) * t) / (2 - lam))
        return np.where(t >= 0, up, down)


def _log1p_clipped(a):
    """``log(1 + a)``, ``-inf`` where ``a <= -1`` (past the transform's range)."""
    return np.log1p(np.maximum(a, -1.0))


def _profile_log_likelihood(v: np.ndarray, lam: float, method: str) -> float:
    """The Gaussian log-likelihood of ``v`` under the power transform at ``lam``, its
    mean and variance profiled out, with the transform's log-Jacobian."""
    t = _power(v, lam, method)
    variance = np.var(t)
    if not variance > 0 or not np.isfinite(variance):
        return -np.inf
    if method == "box-cox":
        jacobian = (lam - 1) * np.sum(np.log(v))
    else:
        jacobian = (lam - 1) * np.sum(np.sign(v) * np.log1p(np.abs(v)))
    return -0.5 * len(v) * np.log(variance) + jacobian


def _fit_power(v: np.ndarray, sign: float) -> Warping:
    """The maximum-likelihood power transform of ``v`` (bounded search of ``lambda``),
    standardised; Yeo-Johnson's inputs are first divided by their spread so that the
    transform does not depend on the objective's units."""
    from scipy.optimize import minimize_scalar

    method = "box-cox" if np.all(v > 0) else "yeo-johnson"
    if method == "yeo-johnson":
        unit = float(spread(v)) or 1.0
    else:
        unit = float(np.exp(np.mean(np.log(v))))  # the geometric mean: units drop out
    scaled = v / unit
    lam = 1.0
    if len(np.unique(scaled)) > 2:
        found = minimize_scalar(
            lambda a: -_profile_log_likelihood(scaled, a, method),
            bounds=LAMBDA_RANGE,
            method="bounded",
            options={"xatol": 1e-6},
        )
        lam = float(found.x) if np.isfinite(found.fun) else 1.0
    shift, scale = _location_and_scale(_power(scaled, lam, method))
    return Warping("power", sign, shift, scale, v[:0], v[:0], lam, method, unit)
