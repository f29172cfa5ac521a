"""Covariance functions as pure functions of one pair of points.

A kernel is a function ``k(params, x, x') -> scalar`` on two points of shape ``(d,)``;
Gram matrices come from :func:`gram`, which vmaps it over both arguments. The stationary
kernels here take ``params = {"amplitude": a, "lengthscales": ell}`` (``ell`` of shape
``(d,)``, automatic relevance determination) and depend on the scaled distance

    r^2(x, x') = sum_i (x_i - x'_i)^2 / ell_i^2.

``a`` is the prior variance ``k(x, x)`` (theta_0 in the ensemble-design report, sec. 3.4.3).

Adding a kernel is one function and one registry line::

    def rational_quadratic(params, x, y):
        return params["amplitude"] * (1 + 0.5 * scaled_sq_distance(params, x, y)) ** -1

    KERNELS["rq"] = Kernel("rq", rational_quadratic)

Kernels combine with ``+`` and ``*``; the parameters of a combination are the tuple of
its parts' parameters.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from bojax.errors import UnknownNameError

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


def squared_exponential(params: Params, x, y):
    """``a exp(-r^2 / 2)`` (ensemble-design report, sec. 3.4.3; architecture-search report)."""
    return params["amplitude"] * jnp.exp(-0.5 * scaled_sq_distance(params, x, y))


def matern12(params: Params, x, y):
    """Matern nu=1/2 (exponential): ``a exp(-r)``."""
    return params["amplitude"] * jnp.exp(-_safe_sqrt(scaled_sq_distance(params, x, y)))


def matern32(params: Params, x, y):
    """Matern nu=3/2: ``a (1 + sqrt3 r) exp(-sqrt3 r)``."""
    s = _SQRT3 * _safe_sqrt(scaled_sq_distance(params, x, y))
    return params["amplitude"] * (1.0 + s) * jnp.exp(-s)


def matern52(params: Params, x, y):
    """Matern nu=5/2: ``a (1 + sqrt5 r + 5/3 r^2) exp(-sqrt5 r)``.

    The ensemble-design report's eq. 8 calls this "Matern 5/3" and misplaces a
    parenthesis; this is the standard form it intends (Snoek et al. 2012).
    """
    r2 = scaled_sq_distance(params, x, y)
    s = _SQRT5 * _safe_sqrt(r2)
    return params["amplitude"] * (1.0 + s + (5.0 / 3.0) * r2) * jnp.exp(-s)


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


AnyKernel = Kernel | SumKernel | ProductKernel


KERNELS: dict[str, Kernel] = {
    "se": Kernel("se", squared_exponential),
    "matern12": Kernel("matern12", matern12),
    "matern32": Kernel("matern32", matern32),
    "matern52": Kernel("matern52", matern52),
}


def get_kernel(kernel: str | AnyKernel) -> AnyKernel:
    """The registered kernel called ``kernel`` (a :class:`Kernel` passes through)."""
    if isinstance(kernel, _Composable):
        return kernel
    try:
        return KERNELS[kernel]
    except KeyError:
        raise UnknownNameError("kernel", kernel, list(KERNELS)) from None


def gram(kernel: PairFn, params: Params, x1: Float[Array, "n d"], x2: Float[Array, "m d"]):
    """The matrix ``K[i, j] = k(x1_i, x2_j)``, shape ``(n, m)``."""
    row = jax.vmap(kernel, in_axes=(None, None, 0))
    return jax.vmap(row, in_axes=(None, 0, None))(params, x1, x2)


def diagonal(kernel: PairFn, params: Params, x: Float[Array, "n d"]):
    """``k(x_i, x_i)`` for each row, shape ``(n,)``, without forming the Gram matrix."""
    return jax.vmap(kernel, in_axes=(None, 0, 0))(params, x, x)
