"""Exploration policies: which of two proposals a BO iteration evaluates, and when to stop.

Every BO iteration that uses a policy proposes two points (hybrid-exploration report,
Brofos 2014, Algorithms 2-3):

* ``exploit``: the maximiser of the acquisition (any of :mod:`bojax.bo.acquisition`);
* ``explore``: the point of largest posterior standard deviation,
  ``u^u = argmax_u sigma(u)`` (averaged over hyperparameter samples); once failures are
  modelled, of ``sigma(u) P(success | u)``, as every score is weighted, so that ``sd``,
  ``nu`` and the stop below read the success-weighted values: a region where
  evaluations fail is not worth mapping out and does not keep a run going.

A policy is one small function of the :class:`Proposals` that returns the
**probability of exploiting**; the iteration draws ``rho ~ U(0, 1)`` from its own key
and evaluates ``exploit`` if ``rho < p``, otherwise ``explore``:

* ``acquisition``: ``p = 1``, the plain loop (report's Algorithm 1).
* ``hybrid``: ``p = tau`` (Algorithm 2; the report uses ``tau = 4/5``).
* ``variable-threshold``: ``p = min(1, nu tau)`` with ``nu`` the probability of
  improvement at ``u^u`` and a basis threshold ``tau`` (default 1), the report's
  pseudo-code for Algorithm 3: the more likely the uncertain point is to improve, the
  more often the loop exploits. The report's prose argues the other way (exploit in
  inverse proportion to ``nu``); ``scaling="prose"`` gives ``p = 1 - min(1, nu tau)``,
  i.e. explore with probability ``nu tau``.

Early stop (the report's convergence, optional): the plain loop stops when the best
acquisition value falls below ``stop_tolerance`` (no candidate is expected to improve);
a policy that may explore stops only when, in addition, the largest posterior standard
deviation is below ``stop_sd`` (the function is mapped out). Both are in the loop's
standardised output units. On a noisy objective the latent sd need not fall below a fixed
``stop_sd`` within any budget that matters, so ``stop_noise`` makes the sd criterion
relative to the fitted noise: the policy stops once ``sd < max(stop_sd, stop_noise *
sigma_n)``, i.e. no point's function value is more uncertain than ``stop_noise``
observations' worth of noise (``sigma_n``: the surrogate's fitted noise sd, averaged over
hyperparameter samples).

Adding a policy is one function ``(proposals, tau, scaling) -> p`` and one
``POLICIES.register(PolicyRecord(name, fn, default_tau=...))`` call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import jax
import numpy as np

from bojax.bo.acquisition import MAX_VARIANCE, PI, AcquisitionRecord
from bojax.errors import SettingsError
from bojax.registry import Registry

DEFAULT_STOP_SD = 0.1  # stop_sd when only stop_tolerance is given
SCALINGS = ("pseudocode", "prose")


class Proposals(NamedTuple):
    """The two candidates of one iteration, with what the policies read from them."""

    exploit: np.ndarray  # (d,) acquisition maximiser
    acquisition: float  # the acquisition's value there
    explore: np.ndarray  # (d,) point of largest posterior standard deviation
    sd: float  # posterior sd there (mean over samples; times P(success) once modelled)
    pi: float  # probability of improvement there, the report's nu
    noise_sd: float = float("nan")  # the fitted noise sd (NaN: the surrogate has none)


class Decision(NamedTuple):
    u: np.ndarray  # the point to evaluate
    explored: bool
    exploit_probability: float
    rho: float  # the uniform draw compared with exploit_probability
    converged: bool  # the stopping rule holds: do not evaluate, end the run


def acquisition_only(proposals: Proposals, tau: float, scaling: str) -> float:
    """Always the acquisition maximiser (Algorithm 1)."""
    return 1.0


def hybrid(proposals: Proposals, tau: float, scaling: str) -> float:
    """Exploit with the fixed probability ``tau`` (Algorithm 2)."""
    return tau


def variable_threshold(proposals: Proposals, tau: float, scaling: str) -> float:
    """Exploit with probability ``min(1, nu tau)`` (Algorithm 3's pseudo-code), or
    ``1 - min(1, nu tau)`` with ``scaling="prose"``."""
    scaled = min(1.0, proposals.pi * tau)
    return scaled if scaling == "pseudocode" else 1.0 - scaled


Policy = Callable[[Proposals, float, str], float]


@dataclass(frozen=True)
class PolicyRecord:
    """A policy and what the loop needs to know about it: ``exploit_probability(proposals,
    tau, scaling) -> p``, its threshold's default and upper bound, whether it ever
    evaluates the uncertain point (``explores``; the loop then proposes it), whether it
    reads ``scaling`` (``reads_scaling``; a setting it ignores is refused), the score
    that finds that point (``explore_with``, the posterior sd) and the improvement
    measure the loop reads there (``improvement_with``, PI: the report's ``nu``)."""

    name: str
    exploit_probability: Policy
    default_tau: float = 1.0
    max_tau: float = math.inf
    explores: bool = True
    reads_scaling: bool = True  # its exploit_probability reads ``scaling`` (else inert)
    # How the uncertain point is found, and the improvement measure read there (nu).
    explore_with: AcquisitionRecord = MAX_VARIANCE
    improvement_with: AcquisitionRecord = PI


def _check_record(record) -> None:
    if not isinstance(record, PolicyRecord):
        raise SettingsError(f"register a PolicyRecord(name, exploit_probability), got {record!r}")


POLICIES: Registry[PolicyRecord] = Registry("policy", _check_record, plural="policies")
POLICIES.register(
    PolicyRecord("acquisition", acquisition_only, explores=False, reads_scaling=False)
)
POLICIES.register(PolicyRecord("hybrid", hybrid, default_tau=0.8, max_tau=1.0, reads_scaling=False))
POLICIES.register(PolicyRecord("variable-threshold", variable_threshold))


def explores(policy: str) -> bool:
    """Whether the policy ever evaluates the uncertain point (so it needs ``explore``)."""
    return POLICIES.get(policy).explores


def check(policy: str, tau: float | None, scaling: str) -> None:
    """Typed errors for an unknown policy or scaling, or a threshold out of range."""
    record = POLICIES.get(policy)
    if scaling not in SCALINGS:
        raise SettingsError(f"scaling must be one of {SCALINGS}, got {scaling!r}")
    if tau is not None:
        upper = record.max_tau
        if isinstance(tau, bool) or not isinstance(tau, int | float) or not 0 <= tau <= upper:
            raise SettingsError(f"tau for policy {policy!r} must lie in [0, {upper}], got {tau!r}")


def sd_threshold(noise_sd: float, stop_sd: float | None, stop_noise: float | None) -> float:
    """The posterior sd below which an exploring policy may stop: ``stop_sd`` (default
    0.1), raised to ``stop_noise * noise_sd`` when that is larger and the noise is known."""
    limit = DEFAULT_STOP_SD if stop_sd is None else stop_sd
    if stop_noise is not None and np.isfinite(noise_sd):
        limit = max(limit, stop_noise * noise_sd)
    return float(limit)


def decide(
    key: jax.Array,
    policy: str,
    proposals: Proposals,
    *,
    tau: float | None = None,
    scaling: str = "pseudocode",
    stop_tolerance: float | None = None,
    stop_sd: float | None = None,
    stop_noise: float | None = None,
) -> Decision:
    """Apply ``policy`` to ``proposals`` with the draw ``rho = U(key)``; deterministic in key."""
    check(policy, tau, scaling)
    record = POLICIES.get(policy)
    tau = record.default_tau if tau is None else float(tau)
    p = float(np.clip(record.exploit_probability(proposals, tau, scaling), 0.0, 1.0))
    rho = float(jax.random.uniform(key))
    explored = not rho < p
    converged = stop_tolerance is not None and proposals.acquisition < stop_tolerance
    if converged and record.explores:
        converged = proposals.sd < sd_threshold(proposals.noise_sd, stop_sd, stop_noise)
    u = proposals.explore if explored else proposals.exploit
    return Decision(np.asarray(u), explored, p, rho, bool(converged))
