"""Where every random number of a run comes from: all derive from ``key(seed)``.

The initial design reads :func:`design_key`; proposal ``k`` (issued in that order) reads
:func:`iteration_key` ``k`` and splits it further (:func:`proposal_keys`: the fit and
the acquisition optimiser; ``fold_in`` 2, 3, 4, 5 and 6 for the policies, the
fantasies, the failure classifier, ParEGO's weights and a restarted trust region's
random design). Nothing else is random, which is what makes
a resumed sequential run bit-identical to an uninterrupted one.
"""

from __future__ import annotations

import jax


def design_key(seed: int) -> jax.Array:
    """The scrambled Sobol design's key."""
    return jax.random.split(jax.random.key(seed))[0]


def iteration_key(seed: int, k: int) -> jax.Array:
    """Proposal ``k``'s key."""
    return jax.random.fold_in(jax.random.split(jax.random.key(seed))[1], k)


def proposal_keys(seed: int, k: int) -> tuple[jax.Array, jax.Array]:
    """The fit key and the proposal key of proposal ``k``."""
    fit_key, propose_key = jax.random.split(jax.random.fold_in(iteration_key(seed, k), 1))
    return fit_key, propose_key
