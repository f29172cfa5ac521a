"""Cholesky factorisation with a jitter ladder, jittable, vmappable and differentiable.

A Gram matrix that is positive definite on paper is often not in floating point
(duplicate inputs, long length-scales, tiny noise). :func:`jittered_cholesky` tries
``A + c_k s I`` for the rungs ``c_0 = 0 < c_1 < ...`` of a ladder, where ``s`` is the
mean diagonal of ``A`` (the kernel amplitude plus noise for a stationary GP), and keeps
the first factor without NaNs whose pivots ``L_ii^2`` all exceed the rounding level
``n eps s``. It reports the absolute jitter ``c_k s`` it used and
whether any rung succeeded; it never raises, so it can sit inside a log density
(which then returns ``-inf``). :func:`cholesky` is the eager wrapper that raises
:class:`~bojax.errors.CholeskyError` once the ladder is exhausted.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular
from jaxtyping import Array, Bool, Float

from bojax.errors import CholeskyError

#: Jitter rungs relative to the mean diagonal. 1e-2 is the last resort: beyond it the
#: matrix no longer describes the model the user asked for.
DEFAULT_LADDER: tuple[float, ...] = (0.0, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2)


class CholeskyResult(NamedTuple):
    """``factor`` is lower-triangular ``L`` with ``L L^T = A + jitter diag(weights)``.

    When ``ok`` is False the ladder was exhausted, ``factor`` is the identity (so that
    downstream arithmetic stays finite) and ``jitter`` is the largest rung tried.
    """

    factor: Float[Array, "n n"]
    jitter: Float[Array, ""]
    ok: Bool[Array, ""]


@jax.custom_jvp
def _cholesky_of(a, factor):
    """Return ``factor``, which the caller guarantees is ``chol(a)``; differentiate as chol(a)."""
    del a
    return factor


@_cholesky_of.defjvp
def _cholesky_of_jvp(primals, tangents):
    # d chol(A) = L Phi(L^{-1} dA L^{-T}), with Phi taking the lower triangle and halving
    # the diagonal (Murray 2016, "Differentiation of the Cholesky decomposition").
    _, factor = primals
    da, _ = tangents
    da = 0.5 * (da + da.T)
    left = solve_triangular(factor, da, lower=True)
    phi = solve_triangular(factor, left.T, lower=True).T
    phi = jnp.tril(phi, -1) + 0.5 * jnp.diag(jnp.diag(phi))
    return factor, factor @ phi


def _search_ladder(a, scale, weights, ladder):
    """First rung whose factor is finite: (factor, rung value, ok). Not differentiated."""
    rungs = jnp.asarray(ladder, dtype=a.dtype)

    # A pivot below the backward-error level n eps s is rounding noise: LAPACK reports
    # success on numerically singular matrices (exact duplicates, zero noise), but the
    # factor is meaningless, so such a rung counts as failed.
    n = jnp.maximum(jnp.sum(weights), 1.0)
    min_pivot = n * jnp.finfo(a.dtype).eps * scale

    def attempt(k):
        factor = jnp.linalg.cholesky(a + rungs[k] * scale * jnp.diag(weights))
        pivots = jnp.where(weights > 0, jnp.diag(factor) ** 2, jnp.inf)
        return factor, jnp.all(jnp.isfinite(factor)) & jnp.all(pivots >= min_pivot)

    def keep_trying(state):
        k, _, ok = state
        return jnp.logical_and(~ok, k < len(ladder) - 1)

    def next_rung(state):
        k, _, _ = state
        return (k + 1, *attempt(k + 1))

    k, factor, ok = jax.lax.while_loop(keep_trying, next_rung, (0, *attempt(0)))
    return factor, rungs[k], ok


def jittered_cholesky(
    a: Float[Array, "n n"],
    weights: Float[Array, " n"] | None = None,
    ladder: tuple[float, ...] = DEFAULT_LADDER,
    scale: Float[Array, ""] | None = None,
) -> CholeskyResult:
    """Cholesky of ``a + jitter * diag(weights)`` with the smallest jitter of the ladder.

    ``weights`` (default all ones) is 1 on real rows and 0 on padding rows, which then
    receive no jitter and do not count towards the mean diagonal ``s``. The jitter is
    ``c_k * s`` with ``c_k`` the first rung that works. Gradients flow through ``a``
    (including through ``s``), so the result is safe under ``jax.grad`` and ``vmap``.

    ``scale`` replaces ``s`` where ``a``'s diagonal understates its rounding error: a
    posterior covariance ``K22 - V^T V`` carries errors of the prior's size ``eps k(x, x)``
    however small its diagonal, and a pivot judged against that diagonal alone lets
    rounding through as signal (:func:`bojax.gp.core.extension`).
    """
    if weights is None:
        weights = jnp.ones(a.shape[0], dtype=a.dtype)
    weights = jnp.asarray(weights, dtype=a.dtype)
    if scale is None:
        scale = jnp.sum(jnp.diag(a) * weights) / jnp.maximum(jnp.sum(weights), 1.0)
    scale = jnp.where(jnp.isfinite(scale) & (scale > 0), scale, 1.0)

    found, rung, ok = _search_ladder(
        jax.lax.stop_gradient(a), jax.lax.stop_gradient(scale), weights, ladder
    )
    jitter = rung * scale
    eye = jnp.eye(a.shape[0], dtype=a.dtype)
    factor = _cholesky_of(a + jitter * jnp.diag(weights), jnp.where(ok, found, eye))
    return CholeskyResult(factor, jitter, ok)


def cholesky(a: Float[Array, "n n"], ladder: tuple[float, ...] = DEFAULT_LADDER) -> CholeskyResult:
    """Eager :func:`jittered_cholesky` that raises :class:`CholeskyError` on failure."""
    result = jittered_cholesky(jnp.asarray(a), ladder=ladder)
    raise_if_failed(result)
    return result


def raise_if_failed(result: CholeskyResult) -> None:
    """Raise :class:`CholeskyError` for every failed factorisation in ``result`` (any batch)."""
    failed = ~jnp.asarray(result.ok)
    if bool(jnp.any(failed)):
        raise CholeskyError(
            f"Cholesky failed for {int(jnp.sum(failed))} of {failed.size} matrices even with "
            f"jitter {float(jnp.max(result.jitter)):.3g} (the last rung of the ladder); the "
            "matrix has NaN/inf entries or is far from positive definite"
        )
