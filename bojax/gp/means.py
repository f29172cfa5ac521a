"""GP prior mean functions ``m(params, x, data) -> scalar``.

A mean sees the point ``x`` of shape ``(d,)`` and the (padded) observations ``data``
(:class:`bojax.gp.Data`), so data-dependent means such as the ensemble-design report's
exploration mean fit the same signature. Padding rows carry ``mask = False`` and must
not influence the value.

Adding a mean is one function and one register call, as for kernels:
``MEANS.register(Mean("linear", linear, linear_params))``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp

from bojax.registry import Registry

Params = Any


def zero(params: Params, x, data):
    """``m(x) = 0``."""
    return jnp.zeros((), dtype=data.y.dtype)


def constant(params: Params, x, data):
    """``m(x) = c`` with ``c = params["value"]`` a hyperparameter."""
    return jnp.asarray(params["value"], dtype=data.y.dtype)


def exploration(params: Params, x, data):
    """``m(x) = min(y) + 0.5 (mean(y) - min(y))`` (ensemble-design report, eq. 7).

    A constant between the best and the average observation: lower than the average, so
    unexplored regions look promising and BO explores more than with the data mean.
    """
    y = jnp.where(data.mask, data.y, jnp.inf)
    lowest = jnp.min(y)
    average = jnp.sum(jnp.where(data.mask, data.y, 0.0)) / jnp.maximum(jnp.sum(data.mask), 1)
    return lowest + 0.5 * (average - lowest)


def no_params() -> dict:
    return {}


def constant_params() -> dict:
    return {"value": jnp.asarray(0.0)}


@dataclass(frozen=True)
class Mean:
    """A named mean function with its default parameters ``init()``; hashable for jit."""

    name: str
    fn: Callable[[Params, Any, Any], Any]
    init: Callable[[], Params] = no_params

    def __call__(self, params: Params, x, data):
        return self.fn(params, x, data)


MEANS: Registry[Mean] = Registry("mean")
MEANS.register(Mean("zero", zero))
MEANS.register(Mean("constant", constant, constant_params))
MEANS.register(Mean("exploration", exploration))


def get_mean(mean: str | Mean) -> Mean:
    """The registered mean called ``mean`` (a :class:`Mean` passes through)."""
    if isinstance(mean, Mean):
        return mean
    return MEANS.get(mean)
