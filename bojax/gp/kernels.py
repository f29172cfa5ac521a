"""Covariance functions as pure functions of one pair of points.

A kernel is a function ``k(params, x, x') -> scalar`` on two points of shape ``(d,)``;
Gram matrices come from :func:`gram`, which vmaps it over both arguments. The stationary
kernels here take ``params = {"amplitude": a, "lengthscales": ell}`` (``ell`` of shape
``(d,)``, automatic relevance determination) and depend on the scaled distance

    r^2(x, x') = sum_i (x_i - x'_i)^2 / ell_i^2.

``a`` is the prior variance ``k(x, x)`` (theta_0 in the ensemble-design report, sec. 3.4.3).

Adding a kernel is one function and one register call::

    def rational_quadratic(params, x, y):
        return params["amplitude"] * (1 + 0.5 * scaled_sq_distance(params, x, y)) ** -1

    KERNELS.register(Kernel("rq", rational_quadratic))

Kernels combine with ``+`` and ``*``; the parameters of a combination are the tuple of
its parts' parameters.

For conditional spaces (:mod:`bojax.spaces`, irrelevant coordinates hold the sentinel
``-1``) there is the arc kernel (:func:`arc`, the arc-kernel report's eqs. 3-4), and
:func:`filled`, which wraps any kernel into the report's relevance-agnostic baseline.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from bojax.registry import Registry
from bojax.spaces import IRRELEVANT, fill_irrelevant

Params = Any  # a pytree of hyperparameters
PairFn = Callable[[Params, Float[Array, " d"], Float[Array, " d"]], Float[Array, ""]]

_SQRT3 = 3.0**0.5
_SQRT5 = 5.0**0.5


def scaled_sq_distance(params: Params, x: Float[Array, " d"], y: Float[Array, " d"]):
    """``r^2 = sum_i ((x_i - y_i) / ell_i)^2``."""
    return jnp.sum(((x - y) / params["lengthscales"]) ** 2)


def _safe_sqrt(r2):
    """``sqrt(r2)`` whose gradient at ``r2 = 0`` is 0 instead of NaN (diagonal of K)."""
    positive = r2 > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, r2, 1.0)), 0.0)


# Stationary kernels are a profile kappa(r^2) times the amplitude; the arc kernel reuses
# the profiles on its own distance.
def se_profile(r2):
    """``exp(-r^2 / 2)``."""
    return jnp.exp(-0.5 * r2)


def matern12_profile(r2):
    """``exp(-r)``."""
    return jnp.exp(-_safe_sqrt(r2))


def matern32_profile(r2):
    """``(1 + sqrt3 r) exp(-sqrt3 r)``."""
    s = _SQRT3 * _safe_sqrt(r2)
    return (1.0 + s) * jnp.exp(-s)


def matern52_profile(r2):
    """``(1 + sqrt5 r + 5/3 r^2) exp(-sqrt5 r)``."""
    s = _SQRT5 * _safe_sqrt(r2)
    return (1.0 + s + (5.0 / 3.0) * r2) * jnp.exp(-s)


def squared_exponential(params: Params, x, y):
    """``a exp(-r^2 / 2)`` (ensemble-design report, sec. 3.4.3; architecture-search report)."""
    return params["amplitude"] * se_profile(scaled_sq_distance(params, x, y))


def matern12(params: Params, x, y):
    """Matern nu=1/2 (exponential): ``a exp(-r)``."""
    return params["amplitude"] * matern12_profile(scaled_sq_distance(params, x, y))


def matern32(params: Params, x, y):
    """Matern nu=3/2: ``a (1 + sqrt3 r) exp(-sqrt3 r)``."""
    return params["amplitude"] * matern32_profile(scaled_sq_distance(params, x, y))


def matern52(params: Params, x, y):
    """Matern nu=5/2: ``a (1 + sqrt5 r + 5/3 r^2) exp(-sqrt5 r)``.

    The ensemble-design report's eq. 8 calls this "Matern 5/3" and misplaces a
    parenthesis; this is the standard form it intends (Snoek et al. 2012).
    """
    return params["amplitude"] * matern52_profile(scaled_sq_distance(params, x, y))


# -- conditional spaces --------------------------------------------------------------------


def arc_embedding(params: Params, x: Float[Array, " d"]) -> Float[Array, "d 2"]:
    """The cylindrical embedding of the arc-kernel report, eq. 3, per dimension ``i``:

        g_i(x) = [0, 0]                                             if x_i is irrelevant
        g_i(x) = omega_i [sin(pi rho_i x_i), cos(pi rho_i x_i)]      otherwise,

    with ``x_i`` the unit coordinate (the report's ``x_i / (u_i - l_i)`` up to a shift,
    which rotates the arc and leaves every distance alone), ``omega_i = 1 / ell_i``
    (``params["lengthscales"]``, so the length-scale prior carries over) and
    ``rho_i in [0, 1]`` (``params["rho"]``). Irrelevant means ``x_i == -1``.
    """
    angle = jnp.pi * params["rho"] * x
    arc = jnp.stack([jnp.sin(angle), jnp.cos(angle)], axis=-1) / params["lengthscales"][:, None]
    return jnp.where((x != IRRELEVANT)[:, None], arc, 0.0)


def arc_sq_distance(params: Params, x, y):
    """``sum_i d_i(x, y)^2`` with ``d_i = ||g_i(x) - g_i(y)||`` (arc-kernel report, eq. 4):
    0 if ``i`` is irrelevant to both, ``omega_i`` if to one only, and
    ``omega_i sqrt(2) sqrt(1 - cos(pi rho_i (x_i - y_i)))`` if relevant to both."""
    return jnp.sum((arc_embedding(params, x) - arc_embedding(params, y)) ** 2)


def arc(profile: Callable) -> PairFn:
    """The arc kernel with the stationary ``profile``: ``a kappa(sum_i d_i^2)``.

    Irrelevant values cannot change it (the report's desiderata, eqs. 1-2), since the
    embedding of an irrelevant dimension is the origin whatever the value.
    """

    def pair(params: Params, x, y):
        return params["amplitude"] * profile(arc_sq_distance(params, x, y))

    pair.__name__ = pair.__qualname__ = f"arc_{profile.__name__.removesuffix('_profile')}"
    return pair


def arc_params(dim: int, amplitude: float = 1.0, lengthscale: float = 1.0) -> dict[str, Array]:
    """ARD parameters plus ``rho = 1/2`` per dimension."""
    return {**ard_params(dim, amplitude, lengthscale), "rho": jnp.full((dim,), 0.5)}


def filled(pair: PairFn) -> PairFn:
    """``k(fill(x), fill(y))``: the arc-kernel report's baseline GP, which ignores relevance
    and sees irrelevant dimensions filled at random (:func:`bojax.spaces.fill_irrelevant`)."""

    def pair_filled(params: Params, x, y):
        return pair(params, fill_irrelevant(x), fill_irrelevant(y))

    pair_filled.__name__ = pair_filled.__qualname__ = f"filled_{pair.__name__}"
    return pair_filled


def ard_params(dim: int, amplitude: float = 1.0, lengthscale: float = 1.0) -> dict[str, Array]:
    """Default parameters of a stationary ARD kernel in ``dim`` dimensions."""
    return {
        "amplitude": jnp.asarray(amplitude),
        "lengthscales": jnp.full((dim,), lengthscale),
    }


class _Composable:
    """``+`` and ``*`` on kernels; nested sums and products are flattened."""

    def __add__(self, other: AnyKernel) -> SumKernel:
        return SumKernel(_parts(self, SumKernel) + _parts(other, SumKernel))

    def __mul__(self, other: AnyKernel) -> ProductKernel:
        return ProductKernel(_parts(self, ProductKernel) + _parts(other, ProductKernel))


def _parts(kernel, kind: type) -> tuple:
    return kernel.parts if isinstance(kernel, kind) else (kernel,)


@dataclass(frozen=True)
class Kernel(_Composable):
    """A named pair function with a default-parameter constructor ``init(dim)``.

    Frozen and hashable, so a kernel is a static argument of ``jax.jit``: equal kernels
    share one compilation.
    """

    name: str
    pair: PairFn
    init: Callable[[int], Params] = ard_params
    # What an irrelevant coordinate (-1) is to the kernel: "value", a coordinate like
    # any other; "origin", the arc kernel's embedding's origin; "fill", a hashed value
    # (:func:`filled`). :class:`Overlap` prepares categorical coordinates to match.
    irrelevant: str = "value"

    def __call__(self, params: Params, x, y):
        return self.pair(params, x, y)


@dataclass(frozen=True)
class SumKernel(_Composable):
    """``k(x, y) = sum_j k_j(x, y)``; parameters are the tuple ``(params_1, ..., params_m)``."""

    parts: tuple

    @property
    def name(self) -> str:
        return "(" + " + ".join(k.name for k in self.parts) + ")"

    def __call__(self, params: Params, x, y):
        return sum(k(p, x, y) for k, p in zip(self.parts, params, strict=True))

    def init(self, dim: int) -> tuple:
        return tuple(k.init(dim) for k in self.parts)


@dataclass(frozen=True)
class ProductKernel(_Composable):
    """``k(x, y) = prod_j k_j(x, y)``; parameters are the tuple ``(params_1, ..., params_m)``."""

    parts: tuple

    @property
    def name(self) -> str:
        return "(" + " * ".join(k.name for k in self.parts) + ")"

    def __call__(self, params: Params, x, y):
        values = [k(p, x, y) for k, p in zip(self.parts, params, strict=True)]
        return functools.reduce(operator.mul, values)

    def init(self, dim: int) -> tuple:
        return tuple(k.init(dim) for k in self.parts)


#: The coordinate gap a categorical mismatch stands for (see :class:`Overlap`).
CATEGORICAL_GAP = 0.5


def overlap_inputs(categorical: tuple[int, ...], x, y, keep_irrelevant: bool = False):
    """``(x', y')`` with every categorical coordinate replaced by ``0`` and ``gap [x_i !=
    y_i]``, so a kernel of differences sees a mismatch, not a distance between the
    choices' codes; other coordinates are unchanged. "Irrelevant" (``-1``) is one more
    choice: a mismatch with any relevant one, a match with itself.

    For a stationary kernel this is the overlap (Hamming) distance inside its ``r^2``,
    with a length-scale per categorical: ``r^2 = sum_num ((x_i - y_i)/ell_i)^2 + sum_cat
    gap^2 [x_i != y_i] / ell_i^2``, the squared Euclidean distance of a one-hot embedding,
    so every kernel valid in Euclidean space stays positive definite (the distance Optuna's
    GPSampler uses). Comparing an irrelevant ``-1`` with a choice's code instead (as bojax
    did) broke the triangle inequality for three or more choices, and with it positive
    definiteness (eigenvalues to -0.12 on a conditional space).

    With ``keep_irrelevant`` (the arc kernel, which embeds an irrelevant coordinate at its
    origin) only coordinates relevant to both points are replaced: a mismatch is then an
    arc of ``pi rho_i gap``, so with ``gap = 1/2`` the choices sit on a regular simplex on
    the circle, and the origin is equally far from all of them, which stays valid.
    """
    mask = np.zeros(x.shape[-1], bool)
    mask[list(categorical)] = True
    if keep_irrelevant:
        mask = mask & (x != IRRELEVANT) & (y != IRRELEVANT)
    return jnp.where(mask, 0.0, x), jnp.where(mask, jnp.where(x != y, CATEGORICAL_GAP, 0.0), y)


@dataclass(frozen=True)
class Overlap(_Composable):
    """A kernel for a space with categorical parameters ``C`` (``m = |C|``)::

        k(x, y) = k_joint(x', y') + b (1/m) sum_{i in C} [x_i = y_i]

    ``k_joint`` is ``kernel`` with the categorical coordinates compared for equality only
    (:func:`overlap_inputs`); its parameters are ``kernel``'s own, so each categorical
    keeps its length-scale and prior and is sampled like the others. It decays with the
    number of choices two points differ in: over many categoricals, points that differ in
    most of them are nearly independent, and it learns only from near neighbours.

    The second part, the overlap kernel of CoCaBO (Ru et al. 2020) with amplitude
    ``b = params["additive"]``, is additive: a choice's own effect, learnt from every
    point that made it, however much else differs (the additive-plus-joint mixture of
    CoCaBO, and Duvenaud et al.'s first-order additive kernel). ``b`` has a narrow prior
    (:mod:`bojax.gp.priors`), so the data must show such effects before they count. Both
    parts are positive definite (an indicator is a dot product of one-hot vectors); a
    coordinate irrelevant to both points matches, one irrelevant to one does not.
    ``additive=False``, or a ``kernel`` whose parameters are not one dict (a sum or
    product), leaves ``k_joint`` alone.
    """

    kernel: AnyKernel
    categorical: tuple[int, ...]
    additive: bool = True

    @property
    def name(self) -> str:
        suffix = " + additive" if self.additive else ""
        return f"overlap({self.kernel.name}, {list(self.categorical)}{suffix})"

    def __call__(self, params: Params, x, y):
        irrelevant = getattr(self.kernel, "irrelevant", "value")
        # A filling kernel fills from the point itself, before the pair is compared: a
        # fill of the compared (0, gap) pair would differ with the other point.
        a, b = (fill_irrelevant(x), fill_irrelevant(y)) if irrelevant == "fill" else (x, y)
        pair = overlap_inputs(self.categorical, a, b, keep_irrelevant=irrelevant == "origin")
        joint = self.kernel(params, *pair)
        if not (isinstance(params, dict) and "additive" in params):
            return joint
        columns = np.asarray(self.categorical)
        agree = jnp.mean((x[columns] == y[columns]).astype(jnp.result_type(joint)))
        return joint + params["additive"] * agree

    def init(self, dim: int) -> Params:
        params = self.kernel.init(dim)
        if self.additive and isinstance(params, dict):
            params = {**params, "additive": jnp.asarray(0.5)}
        return params


@dataclass(frozen=True)
class LearningCurves(_Composable):
    """A kernel over (design, step) points whose last coordinate is the step on a log
    scale, ``tau = log t / log T`` (:func:`bojax.bo.freezethaw.curve_space`; ``t =
    T^tau``)::

        k((x, tau), (x', tau')) = k_base((x, tau), (x', tau'))
                                  + [x = x'] c (beta / (t + t' + beta))^alpha.

    The second part is the exponential-decay kernel of Swersky, Snoek and Adams (2014,
    "Freeze-thaw Bayesian optimization", eq. 6: the covariance of mixtures of decays
    ``exp(-lambda t)`` under a Gamma(alpha, beta) mixing law), private to each design
    (``[x = x']`` compares the design coordinates exactly, as a design keeps its ``x``
    across its segments): each curve may depart from what ``k_base`` predicts from its
    neighbours, by a deviation whose prior variance ``c (beta / (2 t + beta))^alpha``
    falls as the design trains. A design seen only for a few steps thus keeps more
    uncertainty about its value at ``T`` than under ``k_base`` alone (its expected
    improvement there rises), and a finished one none. ``c = 0`` is ``k_base`` alone;
    ``c``, ``alpha`` and ``beta`` are sampled (or, under MAP, optimised) with the others,
    under the prior set's prior for positive parameters (Half-Cauchy(1) in the
    default). Parameters: ``k_base``'s dict plus ``"curve_amplitude"`` (``c``),
    ``"curve_alpha"`` and ``"curve_beta"``; a ``k_base`` whose parameters are not one dict
    (a sum or product) is not supported.
    """

    kernel: AnyKernel
    max_step: float

    @property
    def name(self) -> str:
        return f"curves({self.kernel.name}, T={self.max_step:g})"

    def __call__(self, params: Params, x, y):
        base = self.kernel(params, x, y)
        same = jnp.all(x[:-1] == y[:-1]).astype(jnp.result_type(base))
        log_top = float(np.log(self.max_step))
        t, t2 = jnp.exp(x[-1] * log_top), jnp.exp(y[-1] * log_top)
        beta, alpha = params["curve_beta"], params["curve_alpha"]
        decay = jnp.exp(alpha * (jnp.log(beta) - jnp.log(t + t2 + beta)))
        return base + same * params["curve_amplitude"] * decay

    def init(self, dim: int) -> Params:
        params = self.kernel.init(dim)
        if not isinstance(params, dict):
            raise TypeError(
                f"LearningCurves needs a kernel with one parameter dict, not {self.kernel.name}"
            )
        one = jnp.asarray(1.0)
        return {**params, "curve_amplitude": jnp.asarray(0.1), "curve_alpha": one,
                "curve_beta": one}  # fmt: skip


AnyKernel = Kernel | SumKernel | ProductKernel | Overlap | LearningCurves


KERNELS: Registry[Kernel] = Registry("kernel")
for _kernel in (
    Kernel("se", squared_exponential),
    Kernel("matern12", matern12),
    Kernel("matern32", matern32),
    Kernel("matern52", matern52),
    # Conditional spaces (arc-kernel report): the arc kernel and the random-fill baseline.
    Kernel("arc", arc(matern52_profile), arc_params, irrelevant="origin"),
    Kernel("arc-se", arc(se_profile), arc_params, irrelevant="origin"),
    Kernel("matern52-filled", filled(matern52), irrelevant="fill"),
):
    KERNELS.register(_kernel)


def get_kernel(kernel: str | AnyKernel) -> AnyKernel:
    """The registered kernel called ``kernel`` (a :class:`Kernel` passes through)."""
    if isinstance(kernel, _Composable):
        return kernel
    return KERNELS.get(kernel)


def gram(kernel: PairFn, params: Params, x1: Float[Array, "n d"], x2: Float[Array, "m d"]):
    """The matrix ``K[i, j] = k(x1_i, x2_j)``, shape ``(n, m)``."""
    row = jax.vmap(kernel, in_axes=(None, None, 0))
    return jax.vmap(row, in_axes=(None, 0, None))(params, x1, x2)


def diagonal(kernel: PairFn, params: Params, x: Float[Array, "n d"]):
    """``k(x_i, x_i)`` for each row, shape ``(n,)``, without forming the Gram matrix."""
    return jax.vmap(kernel, in_axes=(None, 0, 0))(params, x, x)
