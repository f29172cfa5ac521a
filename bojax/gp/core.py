"""Gaussian-process regression as pure, jitted functions of (model, params, data).

Notation (see docs/design.md): observations ``X`` (n, d) and ``y`` (n,), prior mean
``m``, kernel ``k``, noise variance ``s2``,

    K     = k(X, X) + s2 I                         (+ jitter from the ladder)
    L     = chol(K),  alpha = K^{-1} (y - m(X))    via two triangular solves
    log p(y | X, params) = -1/2 (y - m)^T alpha - sum_i log L_ii - n/2 log 2 pi
    mu_*(x)      = m(x) + k(x, X) alpha
    sigma_*^2(x) = k(x, x) - || L^{-1} k(X, x) ||^2     (latent f, noise excluded)

(Rasmussen & Williams 2006, Alg. 2.1; ensemble-design report sec. 3.4.1.)

Data are padded to a few sizes (:func:`bucket_size`) and carry a mask, so that a BO run
whose data set grows by one point per iteration compiles once per bucket, not once per
iteration. Padding rows are decoupled from the real ones (a unit block on the diagonal,
zero residual), which leaves every quantity above exactly unchanged.

The model (kernel + mean + ladder) is a hashable static argument; params and data are
traced pytrees. Hyperparameters are a dict::

    {"kernel": {"amplitude": a, "lengthscales": ell}, "mean": {...}, "noise": s2}
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular
from jaxtyping import Array, Bool, Float

from bojax.compilation import bucket_size
from bojax.errors import DataError
from bojax.gp.kernels import AnyKernel, LearningCurves, Overlap, diagonal, get_kernel, gram
from bojax.gp.linalg import DEFAULT_LADDER, CholeskyResult, jittered_cholesky, raise_if_failed
from bojax.gp.means import Mean, get_mean

Params = Any


class Data(NamedTuple):
    """Observations padded to a bucket size; ``mask`` is False on padding rows."""

    x: Float[Array, "N d"]
    y: Float[Array, " N"]
    mask: Bool[Array, " N"]


def make_data(x, y, size: int | None = None) -> Data:
    """Validate observations and pad them to ``size`` (default :func:`bucket_size`).

    ``x`` is ``(n, d)`` (or ``(n,)`` for d = 1), ``y`` is ``(n,)``. Raises
    :class:`~bojax.errors.DataError` for empty, mis-shaped or non-finite data.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or y.ndim != 1:
        raise DataError(f"expected x of shape (n, d) and y of shape (n,), got {x.shape}, {y.shape}")
    n = y.shape[0]
    if n == 0:
        raise DataError("no observations: a GP needs at least one")
    if x.shape[0] != n:
        raise DataError(f"x has {x.shape[0]} rows but y has {n} values")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise DataError("observations contain NaN or inf; drop failed evaluations first")
    size = bucket_size(n) if size is None else size
    if size < n:
        raise DataError(f"cannot pad {n} observations to size {size}")
    pad = size - n
    return Data(
        x=jnp.asarray(np.pad(x, ((0, pad), (0, 0)))),
        y=jnp.asarray(np.pad(y, (0, pad))),
        mask=jnp.asarray(np.arange(size) < n),
    )


@dataclass(frozen=True)
class GP:
    """A GP prior: kernel, mean and the jitter ladder. Hashable, so a static jit argument."""

    kernel: AnyKernel = field(default_factory=lambda: get_kernel("matern52"))
    mean: Mean = field(default_factory=lambda: get_mean("constant"))
    ladder: tuple[float, ...] = DEFAULT_LADDER

    def __post_init__(self) -> None:
        object.__setattr__(self, "kernel", get_kernel(self.kernel))
        object.__setattr__(self, "mean", get_mean(self.mean))

    def with_categorical(self, categorical: tuple[int, ...], additive: bool = True) -> GP:
        """This GP with the coordinates ``categorical`` compared for equality only (its
        kernel wrapped in :class:`~bojax.gp.kernels.Overlap`, with the additive part
        and its ``additive`` parameter unless ``additive=False``)."""
        if not categorical:
            return self
        return replace(self, kernel=Overlap(self.kernel, tuple(categorical), additive))

    def with_curves(self, max_step: float) -> GP:
        """This GP over (design, step) points, the step last, with each design's own
        decaying deviation added (:class:`~bojax.gp.kernels.LearningCurves`)."""
        return replace(self, kernel=LearningCurves(self.kernel, float(max_step)))

    def init_params(self, dim: int, noise: float = 1e-3) -> dict:
        """Default hyperparameters: the kernel's and mean's defaults, noise variance ``noise``."""
        return {
            "kernel": self.kernel.init(dim),
            "mean": self.mean.init(),
            "noise": jnp.asarray(noise),
        }


#: Padded sizes above which a posterior keeps no ``L^{-1}`` (predictions then solve).
INVERSE_LIMIT = 1024


class Posterior(NamedTuple):
    """Everything a prediction needs: the factorised training covariance, ``alpha`` and
    ``L^{-1}``, so that ``v = L^{-1} k(X, x*)`` is a matrix product. Acquisitions predict
    thousands of times per fit, and on CPU a batched triangular solve took 6x as long as
    the product (S = 128 GPs, N = 128, 13 points: 13.7 ms against 2.2 ms). Past
    :data:`INVERSE_LIMIT` rows ``inverse`` is None and predictions solve with ``L``:
    the inverse would double an already ``O(N^2)`` posterior per draw (16 draws at
    N = 3008: 1.2 GB more)."""

    params: Params
    data: Data
    factor: Float[Array, "N N"]
    alpha: Float[Array, " N"]
    jitter: Float[Array, ""]
    ok: Bool[Array, ""]
    inverse: Float[Array, "N N"] | None
    # The data a data-dependent prior mean reads (the exploration mean's min and average
    # of y), when not ``data``: a GP conditioned on fantasies keeps the real data's mean.
    mean_data: Data | None = None

    @property
    def mean_reads(self) -> Data:
        """The data the prior mean is computed from."""
        return self.data if self.mean_data is None else self.mean_data


def _prior_mean(model: GP, params: Params, x, data: Data):
    return jax.vmap(lambda xi: model.mean(params["mean"], xi, data))(x)


def training_factor(model: GP, params: Params, data: Data) -> CholeskyResult:
    """``chol(K)`` with ``K = k(X, X) + s2 I`` on the real rows and a unit block on the
    padding rows, through the jitter ladder (never raises: see ``ok``)."""
    weights = data.mask.astype(data.y.dtype)
    both = weights[:, None] * weights[None, :]
    k = gram(model.kernel, params["kernel"], data.x, data.x) * both
    k = k + jnp.diag(params["noise"] * weights + (1.0 - weights))  # unit block on padding
    return jittered_cholesky(k, weights, model.ladder)


def prior_mean(
    model: GP, params: Params, data: Data, mean_data: Data | None = None
) -> Float[Array, " N"]:
    """``m(X)`` at the data's inputs, zero on padding rows; a data-dependent mean reads
    ``mean_data`` if given, else ``data``."""
    reads = data if mean_data is None else mean_data
    return jnp.where(data.mask, _prior_mean(model, params, data.x, reads), 0.0)


def _factorise(model: GP, params: Params, data: Data) -> tuple[CholeskyResult, Array]:
    chol = training_factor(model, params, data)
    residual = jnp.where(data.mask, data.y, 0.0) - prior_mean(model, params, data)
    return chol, residual


def solved(
    model: GP,
    params: Params,
    data: Data,
    chol: CholeskyResult,
    inverse: Array | None = None,
    outputs: Array | None = None,
    mean_data: Data | None = None,
) -> Posterior:
    """The posterior whose training covariance has the factor ``chol`` (and, if known, its
    ``inverse``): outputs may change without refactorising, since only ``alpha``'s two
    triangular solves depend on them. ``outputs`` (N, J), if given, replace ``data.y``
    with J output vectors at once: ``alpha`` is then (N, J), one column each.
    ``mean_data``, if given, is what a data-dependent prior mean reads instead of
    ``data`` (fantasies: the real data, so fantasised outcomes do not move the mean)."""
    size = chol.factor.shape[0]
    if inverse is None and size <= INVERSE_LIMIT:
        inverse = solve_triangular(chol.factor, jnp.eye(size, dtype=chol.factor.dtype), lower=True)
    prior = prior_mean(model, params, data, mean_data)
    if outputs is None:
        residual = jnp.where(data.mask, data.y, 0.0) - prior
    else:
        residual = jnp.where(data.mask[:, None], outputs, 0.0) - prior[:, None]
    half = solve_triangular(chol.factor, residual, lower=True)
    alpha = solve_triangular(chol.factor.T, half, lower=False)
    return Posterior(params, data, chol.factor, alpha, chol.jitter, chol.ok, inverse, mean_data)


@partial(jax.jit, static_argnums=0)
def posterior(model: GP, params: Params, data: Data) -> Posterior:
    """Condition the GP on ``data``. Never raises: check ``ok`` (or use :func:`condition`)."""
    chol, _ = _factorise(model, params, data)
    return solved(model, params, data, chol)


def condition(model: GP, params: Params, data: Data) -> Posterior:
    """:func:`posterior`, raising :class:`~bojax.errors.CholeskyError` if it failed."""
    post = posterior(model, params, data)
    raise_if_failed(CholeskyResult(post.factor, post.jitter, post.ok))
    return post


@partial(jax.jit, static_argnums=0)
def log_marginal_likelihood(model: GP, params: Params, data: Data) -> Float[Array, ""]:
    """``log p(y | X, params)``; ``-inf`` where the Cholesky ladder is exhausted."""
    chol, residual = _factorise(model, params, data)
    half = solve_triangular(chol.factor, residual, lower=True)
    n = jnp.sum(data.mask)
    value = (
        -0.5 * jnp.sum(half**2)
        - jnp.sum(jnp.log(jnp.diag(chol.factor)))
        - 0.5 * n * jnp.log(2.0 * jnp.pi)
    )
    return jnp.where(chol.ok, value, -jnp.inf)


def _cross(model: GP, post: Posterior, x_star):
    """Predictive mean and ``v = L^{-1} k(X, x_star)`` shared by both predictions."""
    k_cross = gram(model.kernel, post.params["kernel"], post.data.x, x_star)
    k_cross = k_cross * post.data.mask[:, None].astype(k_cross.dtype)
    prior = _prior_mean(model, post.params, x_star, post.mean_reads)
    if post.alpha.ndim == 2:  # several output vectors: means (m, J)
        prior = prior[:, None]
    mean = prior + k_cross.T @ post.alpha
    if post.inverse is None:  # a large posterior: solve rather than keep L^{-1}
        return mean, solve_triangular(post.factor, k_cross, lower=True)
    return mean, post.inverse @ k_cross


def joined(data: Data, new: Data) -> Data:
    """``data`` followed by ``new`` (padding rows may sit between them: masks decouple them)."""
    new = new._replace(y=jnp.where(new.mask, new.y, 0.0))
    return Data(*(jnp.concatenate([a, b]) for a, b in zip(data, new, strict=True)))


def extension(
    model: GP, post: Posterior, new_x, new_mask, latent: bool = False
) -> tuple[Array, CholeskyResult, Array | None]:
    """The factor of the training covariance with the rows ``new_x`` appended (``new_mask``
    False on padding), from the existing factor ``L`` by one block:

        [[K11, K12], [K21, K22]] = [[L, 0], [V^T, L22]] [[L, 0], [V^T, L22]]^T,
        V = L^{-1} K12,   L22 = chol(K22 - V^T V),

    ``O(n^2 p + p^3)`` instead of the ``O((n + p)^3)`` of refactorising (the block form
    of the Cholesky factorisation; Osborne's 2010 thesis uses it for sequential GP
    updates). ``K22 - V^T V`` is the predictive covariance of noisy outputs at ``new_x``,
    so its factor is also what draws joint outcomes there (``factor[n:, n:]``). Returns
    the predictive mean at ``new_x``, the joint factor and its inverse
    ``[[L^{-1}, 0], [-L22^{-1} V^T L^{-1}, L22^{-1}]]`` (None past
    :data:`INVERSE_LIMIT` rows); the new block gets its own jitter rung, and ``ok``
    holds if both blocks did. ``latent``: the new rows are noise-free values of ``f``
    (the block is the factor of the latent predictive covariance, jitter aside).
    """
    mean, v = _cross(model, post, new_x)
    live = new_mask.astype(v.dtype)
    params = post.params
    cov = gram(model.kernel, params["kernel"], new_x, new_x) - v.T @ v
    noise = 0.0 if latent else params["noise"]
    noisy = cov * live[:, None] * live[None, :] + jnp.diag(noise * live + (1.0 - live))
    # The block's entries are differences of prior-sized terms, so its rounding error is
    # eps times the prior variance, not its own (possibly tiny) diagonal. Judged against
    # the latter, a near-zero posterior variance (a GP with amplitude 5,000 and noise
    # 1e-11 on ZDT1's linear f1) passed with garbage pivots, and noise-free samples at
    # observed points came out O(1) away from the data.
    prior = diagonal(model.kernel, params["kernel"], new_x) + noise
    scale = jnp.sum(prior * live) / jnp.maximum(jnp.sum(live), 1.0)
    block = jittered_cholesky(noisy, live, model.ladder, scale)
    n, p = post.factor.shape[0], new_x.shape[0]
    zeros, lower = jnp.zeros((n, p), v.dtype), (v * live).T
    factor = jnp.block([[post.factor, zeros], [lower, block.factor]])
    if post.inverse is None or n + p > INVERSE_LIMIT:
        inverse = None  # solved() keeps none either at this size
    else:
        block_inverse = solve_triangular(block.factor, jnp.eye(p, dtype=v.dtype), lower=True)
        inverse = jnp.block(
            [[post.inverse, zeros], [-block_inverse @ lower @ post.inverse, block_inverse]]
        )
    jitter = jnp.maximum(post.jitter, block.jitter)
    return mean, CholeskyResult(factor, jitter, post.ok & block.ok), inverse


@partial(jax.jit, static_argnums=0)
def extend(model: GP, post: Posterior, new: Data) -> Posterior:
    """``post`` conditioned on the observations ``new`` as well, with the same
    hyperparameters, by extending its Cholesky factor (:func:`extension`) rather than
    refactorising: for pending points, fantasies and observations that arrive before the
    next hyperparameter fit. Equals :func:`posterior` on the joined data (when neither
    needed jitter) up to rounding."""
    _, chol, inverse = extension(model, post, new.x, new.mask)
    return solved(model, post.params, joined(post.data, new), chol, inverse)


@partial(jax.jit, static_argnums=0)
def predict(
    model: GP, post: Posterior, x_star: Float[Array, "m d"]
) -> tuple[Float[Array, " m"], Float[Array, " m"]]:
    """Predictive mean ``mu_*`` and variance ``sigma_*^2`` of the latent function at ``x_star``."""
    mean, v = _cross(model, post, x_star)
    prior_var = diagonal(model.kernel, post.params["kernel"], x_star)
    return mean, jnp.maximum(prior_var - jnp.sum(v**2, axis=0), 0.0)


@partial(jax.jit, static_argnums=0)
def predict_cov(
    model: GP, post: Posterior, x_star: Float[Array, "m d"]
) -> tuple[Float[Array, " m"], Float[Array, "m m"]]:
    """Predictive mean and full covariance ``k(x*, x*) - v^T v`` of the latent function."""
    mean, v = _cross(model, post, x_star)
    prior_cov = gram(model.kernel, post.params["kernel"], x_star, x_star)
    return mean, prior_cov - v.T @ v
