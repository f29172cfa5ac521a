"""Point estimates, registered as records with ``point=True`` (``S = 1``, no chains):
``"map"``, multi-start L-BFGS (optax) on ``-log density``, and ``"fixed"``, the start
itself (hyperparameters chosen by hand, as the architecture-search report's GP)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from bojax.inference.contract import SAMPLERS, Chain, LogDensity, SamplerRecord, safe_logdensity

PyTree = Any


@jax.custom_vjp
def _finite_gradient(v):
    """Identity whose backward pass zeroes non-finite gradient entries, so one NaN from
    a failed Cholesky cannot poison the optimiser's curvature memory."""
    return v


def _finite_gradient_fwd(v):
    return v, None


def _finite_gradient_bwd(_, g):
    return (jnp.where(jnp.isfinite(g), g, 0.0),)


_finite_gradient.defvjp(_finite_gradient_fwd, _finite_gradient_bwd)


def map_fit(
    logdensity_fn: LogDensity,
    starts: PyTree,
    *,
    count: int | jax.Array | None = None,
    steps: int = 200,
    gradient_tolerance: float = 1e-5,
    value_tolerance: float = 2.2e-9,
) -> Chain:
    """Maximise ``logdensity_fn`` by L-BFGS from each start (leading axis); keep the best.

    A start stops, as SciPy's L-BFGS-B does by default, once the largest gradient entry
    is below ``gradient_tolerance`` or an iteration lowers ``-logdensity`` by less than
    ``value_tolerance * max(|value|, 1)``, and after ``steps`` iterations at most (each
    with at most 20 zoom line-search evaluations, optax's default). The best point seen
    is kept: a failed line search may step uphill. Starts run one after another: a
    vmapped line search waits for its slowest member. ``count`` (may be traced) uses only
    the first ``count`` starts, so fits with different restart counts share one program.
    Returns a chain of one draw (``S = 1``) so that MAP plugs into the same integrated
    acquisitions as the samplers.
    """
    logdensity_fn = safe_logdensity(logdensity_fn)
    _, unravel = jax.flatten_util.ravel_pytree(jax.tree.map(lambda a: a[0], starts))
    optimiser = optax.lbfgs()

    def loss(v):
        value = logdensity_fn(unravel(_finite_gradient(v)))
        # -inf is a large finite penalty: the line search then backs off from it.
        return -jnp.where(jnp.isfinite(value), value, -1e30)

    value_and_grad = optax.value_and_grad_from_state(loss)

    def run(z):
        def step(carry):
            v, state, k, _, previous, best, best_value = carry
            value, grad = value_and_grad(v, state=state)
            better = value < best_value
            best, best_value = jnp.where(better, v, best), jnp.where(better, value, best_value)
            updates, state = optimiser.update(grad, state, v, value=value, grad=grad, value_fn=loss)
            decrease = (previous - value) / jnp.maximum(jnp.abs(value), 1.0)
            return optax.apply_updates(v, updates), state, k + 1, decrease, value, best, best_value

        def going(carry):
            _, state, k, decrease, *_ = carry
            gradient = optax.tree_utils.tree_get(state, "grad")
            small = jnp.max(jnp.abs(gradient)) < gradient_tolerance
            return (k < 2) | ((k < steps) & ~small & (decrease > value_tolerance))

        v = jax.flatten_util.ravel_pytree(z)[0]
        inf = jnp.asarray(jnp.inf, dtype=v.dtype)
        carry = (v, optimiser.init(v), 0, inf, inf, v, inf)
        v, _, k, _, _, best, best_value = jax.lax.while_loop(going, step, carry)
        final = loss(v)
        v = jnp.where(final < best_value, v, best)
        return unravel(v), logdensity_fn(unravel(v)), k

    def keep_best(i, carry):
        position, value, most = carry
        end, new, iterations = run(jax.tree.map(lambda a: a[i], starts))
        # The first start always counts, even at -inf, so a position is returned.
        better = (i == 0) | (jnp.where(jnp.isfinite(new), new, -jnp.inf) > value)
        position = jax.tree.map(lambda a, b: jnp.where(better, b, a), position, end)
        value = jnp.where(better, jnp.where(jnp.isfinite(new), new, -jnp.inf), value)
        return position, value, jnp.maximum(most, iterations)

    first = jax.tree.map(lambda a: a[0], starts)
    available = jax.tree.leaves(starts)[0].shape[0]
    total = available if count is None else jnp.clip(count, 1, available)
    carry = (first, jnp.asarray(-jnp.inf, dtype=float), 0)
    position, value, most = jax.lax.fori_loop(0, total, keep_best, carry)
    diagnostics = {
        "acceptance": jnp.asarray(1.0),
        "divergences": jnp.asarray(0),
        "ess": jnp.asarray(1.0),
        "log_density": value,
        "map_iterations": jnp.asarray(most).astype(float),
    }
    return Chain(jax.tree.map(lambda a: a[None], position), None, diagnostics)


def _run_map(key, logdensity_fn, starts, *, count=None, steps=200):
    return map_fit(logdensity_fn, starts, count=count, steps=steps)


def _run_fixed(key, logdensity_fn, starts, *, count=None, steps=0):
    """The first start, unchanged (``S = 1``; no diagnostics: nothing was fitted)."""
    return Chain(jax.tree.map(lambda a: a[:1], starts), None, {})


SAMPLERS.register(SamplerRecord("map", _run_map, gradients=True, point=True, continues=False))
SAMPLERS.register(SamplerRecord("fixed", _run_fixed, point=True, continues=False, moves=False))
