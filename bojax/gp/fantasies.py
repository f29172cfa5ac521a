"""Pending points by fantasy: how a GP surrogate proposes while evaluations are in flight.

A point that is being evaluated has no outcome yet, but the next proposal must know it is
there, or it would propose the same neighbourhood again. Each pending point gets a
*fantasy* outcome and every hyperparameter sample's GP is conditioned on it:

* ``believer`` (the Kriging believer): the fantasy is the GP's own predictive mean, one
  per hyperparameter sample. Conditioning on it leaves the mean unchanged and shrinks the
  variance around pending points. Cheap; the posterior can be overconfident.
* ``integrated`` (Snoek, Larochelle & Adams 2012, sec. 3.3, the default): the acquisition
  is integrated over the pending outcomes as well as the hyperparameters,
  ``a(x) = E_theta E_{y_p | theta, D} [ a(x | D + (X_p, y_p), theta) ]``. For each
  hyperparameter sample ``theta_s`` we draw ``J`` joint outcomes
  ``y_p ~ N(mu_s(X_p), Sigma_s(X_p, X_p) + s2_s I)`` and condition one GP on each, so the
  sample axis becomes ``S J`` and every acquisition in :mod:`bojax.bo.acquisition`, which
  averages over that axis, is the Monte-Carlo estimate of the double integral.

Each fantasy's incumbent is the best of the real outputs and its own fantasised ones
(:func:`incumbents`), as in the Kriging believer's augmented data and in q-EI's joint
improvement (Ginsbourger et al. 2010).

The hyperparameter samples themselves come from the real data only, as in Spearmint.
Pending rows join the padded data set (their own bucket of sizes), so a BO run with a
steady number of workers compiles this once per bucket.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bojax.gp import core
from bojax.gp.linalg import jittered_cholesky

STRATEGIES = ("integrated", "believer")
DEFAULT_TOTAL = 128  # integrated: at least this many conditioned GPs (S J) in all


def per_sample(strategy: str, samples: int, fantasies: int | None) -> int:
    """Fantasies per hyperparameter sample: 1 for the believer; for the integrated
    treatment ``fantasies`` if given, else enough for ``S J >= 128`` (one per sample for a
    128-draw slice chain, 128 for a MAP point estimate)."""
    if strategy == "believer":
        return 1
    return fantasies if fantasies is not None else max(1, math.ceil(DEFAULT_TOTAL / samples))


def augmented_data(x, y, pending) -> tuple[core.Data, jax.Array, jax.Array]:
    """Real data with the pending inputs appended (outputs 0 until fantasised), the pending
    inputs padded to a small bucket, and the rows they occupy (padding rows point past the
    end, so scatters drop them)."""
    x, pending = np.asarray(x, np.float64), np.asarray(pending, np.float64)
    n, p = len(x), len(pending)
    data = core.make_data(np.concatenate([x, pending]), np.concatenate([y, np.zeros(p)]))
    size = core.bucket_size(p, minimum=8)
    padded = np.concatenate([pending, np.zeros((size - p, x.shape[1]))])
    rows = np.where(np.arange(size) < p, n + np.arange(size), data.y.shape[0])
    return data, jnp.asarray(padded), jnp.asarray(rows)


@partial(jax.jit, static_argnums=(0, 1, 2))
def fantasize(
    model: core.GP, strategy: str, num: int, key, posteriors: core.Posterior, data, pending, rows
) -> tuple[core.Posterior, jax.Array]:
    """GPs conditioned on real data plus fantasised pending outcomes, sample axis ``S num``,
    and the outcomes ``(S num, P')`` (``+inf`` on padding).

    ``posteriors`` are the S GPs conditioned on the real data; ``data``, ``pending`` and
    ``rows`` come from :func:`augmented_data`. Fantasies are drawn as noisy observations
    (the real outputs are noisy too), so the noise variance ``s2_s`` enters their spread.
    """
    live = (rows < data.y.shape[0]).astype(data.y.dtype)
    samples = posteriors.params["noise"].shape[0]

    def one_sample(key, post):
        mean, cov = core.predict_cov(model, post, pending)
        if strategy == "believer":
            outcomes = mean[None]
        else:
            noisy = cov * live[:, None] * live[None, :] + jnp.diag(
                post.params["noise"] * live + (1.0 - live)
            )
            factor = jittered_cholesky(noisy, live, model.ladder).factor
            eps = jax.random.normal(key, (num, pending.shape[0]), dtype=mean.dtype)
            outcomes = mean[None] + eps @ factor.T

        def condition(outcome):
            y = data.y.at[rows].set(outcome, mode="drop")
            return core.posterior(model, post.params, data._replace(y=y))

        return jax.vmap(condition)(outcomes), jnp.where(live > 0, outcomes, jnp.inf)

    conditioned = jax.vmap(one_sample)(jax.random.split(key, samples), posteriors)
    return jax.tree.map(lambda a: a.reshape((-1, *a.shape[2:])), conditioned)


def incumbents(best, outcomes) -> jax.Array:
    """The incumbent of each fantasy, ``min(best, min_p y_p)``, shaped ``(S J, 1)`` to
    broadcast against the acquisition's ``(S J, M)`` predictions: an improvement a
    pending point is fantasised to make is not one a new point can claim (without it,
    integrated EI is drawn towards pending points whose fantasy beat the incumbent)."""
    return jnp.minimum(best, jnp.min(outcomes, axis=1, keepdims=True))
