"""The one narrow interface every surrogate implements (:class:`Surrogate`).

``predict(state, x: (M, d)) -> (mean: (S, M), var: (S, M))`` with ``S`` the sample axis
(hyperparameter draws; 1 for MAP or for a surrogate that returns one Gaussian). Outputs
are in whatever units the data were given (the BO loop warps them, by default
standardising). The loop's
jitted acquisition reads the same prediction as a pure function,
``predictive(conditioned(state), x)``, and a run journal stores ``pack(state)``.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax

from bojax.gp import Data

PyTree = Any


class Surrogate(Protocol):
    """What the BO loop needs of a surrogate (a frozen, hashable dataclass)."""

    def init(self, dim: int) -> Any: ...  # a fresh state for ``dim`` inputs

    def fit(self, key: jax.Array, state: Any, data: Data) -> Any: ...  # condition on data

    def predict(self, state: Any, x: jax.Array) -> tuple[jax.Array, jax.Array]: ...

    def conditioned(self, state: Any) -> PyTree: ...  # the arrays ``predictive`` reads

    def predictive(self, conditioned: PyTree, x: jax.Array) -> tuple[jax.Array, jax.Array]: ...

    def configured(self, samples: int | None, burn_in: int | None) -> Surrogate: ...

    # Draws that rank the acquisition optimiser's candidate grid (None: all of them); the
    # leaves of ``conditioned`` then carry the sample axis first.
    def screening_draws(self) -> int | None: ...

    def pack(self, state: Any) -> dict[str, Any]: ...  # JSON-ready chain position

    def unpack(self, dim: int, saved: dict[str, Any]) -> Any: ...

    # Optional, so not declared: an attribute ``warping`` names the output warping the
    # loop applies unless the settings name one (bojax.bo.warping; "standardise" without).
    # A method ``noise_sd(conditioned) -> float`` gives the fitted noise sd, which the
    # noise-relative stopping rule reads (bojax.bo.policies; without it that rule is off).
    # A fitted state's attribute ``diagnostics`` (a dict of floats: acceptance, ess, ...)
    # is journalled with each proposal; a method ``fantasize(key, state, pending, strategy,
    # fantasies, room=0)`` conditions on pending points (bojax.gp.fantasies; ``room``, the
    # most pending points the batch reaches, sizes the padding; without the method the
    # loop refits on believed outcomes).


def for_space(model: Any, space: Any) -> Any:
    """``model`` adapted to ``space``'s inputs: a surrogate or classifier with a
    ``for_space(space)`` method adapts itself (the GPs compare categorical coordinates for
    equality only); one without it sees the unit coordinates as numbers."""
    adapt = getattr(model, "for_space", None)
    return model if adapt is None else adapt(space)
