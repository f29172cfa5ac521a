"""Acquisition functions: pure functions of the predictive, integrated over samples.

Every acquisition has the signature

    acquire(mean: (S, M), var: (S, M), best: scalar, **options) -> (M,)

and returns a score to **maximise**; the objective is minimised (``maximize=True`` in
the loop negates outputs at the edge). ``S`` indexes hyperparameter samples; the
integrated acquisition averages the per-sample acquisition over them (ensemble-design
report eqs. 10-11; Snoek et al. 2012):

* ``ei``: mean over samples of ``sigma (z Phi(z) + phi(z))`` with ``z = (best - mu) / sigma``
  (the reports print the variance where ``sigma`` belongs).
* ``log_ei``: ``log mean_s EI_s`` via ``logsumexp`` of a stable per-sample log-EI
  (never the mean of the logs), finite far into the tail (z = -40 and beyond).
* ``pi``: mean of ``Phi(z)``.
* ``lcb``: mean of ``-(mu - kappa sigma)`` (lower confidence bound, to be maximised).
* ``max_variance``: mean of ``sigma``, pure exploration.

Adding an acquisition is one function and one ``ACQUISITIONS.register(AcquisitionRecord(
name, fn))`` call (:class:`AcquisitionRecord` says what else a record can declare).

Where evaluations can fail, the loop weights the acquisition by the probability of
success ``P(x)`` from a failure classifier (:func:`weighted_by_success`; constrained EI,
Gelbart, Snoek & Adams 2014). The classifier's posterior is independent of the
objective's, so the integrated weighted acquisition is the integrated acquisition times
the integrated ``P``: ``E_s,c[EI_s P_c] = E_s[EI_s] E_c[P_c]``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import erfc, log_ndtr, logsumexp, ndtr

from bojax.errors import SettingsError
from bojax.registry import Registry

# Python floats, not jnp arrays: a module-level jnp constant would be frozen as float32
# if bojax is imported before float64 is enabled.
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_SQRT_HALF_PI = math.sqrt(math.pi / 2)
_ASYMPTOTIC_T = 100.0  # beyond, the 4-term series is exact to ~1e-13 relative
_MIN_STD = 1e-12  # where sigma is below this, improvement is treated as deterministic
_ERFCX_SERIES_FROM = 25.0


def erfcx(x):
    """The scaled complementary error function ``exp(x^2) erfc(x)`` for ``x >= 0``.

    Below 25 it is the product itself (``erfc(25) = 8e-274`` is still a normal float);
    above, the asymptotic series ``(x sqrt(pi))^-1 sum_k (-1)^k (2k - 1)!! / (2 x^2)^k``,
    whose seventh term is below ``1e-16`` of the first there. Written here rather than
    taken from ``jax.scipy.special`` (which has it from JAX 0.10 only), so bojax runs on
    the JAX releases without the batched-LAPACK deadlock (docs/design.md).
    """
    series_side = x >= _ERFCX_SERIES_FROM
    near = jnp.where(series_side, _ERFCX_SERIES_FROM, x)  # each branch differentiable
    far = jnp.where(series_side, x, _ERFCX_SERIES_FROM)
    inverse = 1.0 / (2.0 * far**2)
    series, term = 1.0, 1.0
    for k in range(1, 7):
        term = -term * (2 * k - 1) * inverse
        series = series + term
    asymptotic = series / (far * math.sqrt(math.pi))
    return jnp.where(series_side, asymptotic, jnp.exp(near**2) * erfc(near))


def _std(var):
    """``sqrt(var)``, floored at ``_MIN_STD`` before the root: the root's derivative at 0
    is infinite, and flooring after it made ``0 x inf`` NaN gradients wherever a posterior
    is exact (noisy EHVI's candidates at a sampled front point), which zeroed the whole
    refinement's gradient and left its starts where they were."""
    return jnp.sqrt(jnp.maximum(var, _MIN_STD**2))


def _z_and_std(mean, var, best):
    std = _std(var)
    return (best - mean) / std, std


def log_h(z):
    """``log(phi(z) + z Phi(z))`` accurately for every real z.

    For z < -1 it uses ``phi(z) + z Phi(z) = phi(z) (1 - |z| R(|z|))`` with the Mills
    ratio ``R(t) = Phi(-t) / phi(t) = sqrt(pi/2) erfcx(t / sqrt 2)``, which avoids the
    catastrophic cancellation of the direct form, and for t > 100 the asymptotic series
    of ``1 - t R(t)``.
    """
    # Each branch sees z clamped into its own range (the boundary with the branch that
    # is taken there) by ``where``: ``maximum``/``minimum`` split the gradient at a tie,
    # so at z = -1 exactly (mean 1, sd 1, best 0) EI's was half (review BF).
    direct_z = jnp.where(z > -1.0, z, -1.0)
    direct = jnp.log(jnp.exp(-0.5 * direct_z**2 - _LOG_SQRT_2PI) + direct_z * ndtr(direct_z))
    t = -jnp.where(z <= -1.0, z, -1.0)
    near = jnp.where(t < _ASYMPTOTIC_T, t, _ASYMPTOTIC_T)
    mills = jnp.log1p(-near * _SQRT_HALF_PI * erfcx(near / math.sqrt(2.0)))
    # Far out, 1 - t R(t) = t^-2 (1 - 3 t^-2 + 15 t^-4 - ...) avoids log1p(-1) = -inf.
    far = jnp.where(t >= _ASYMPTOTIC_T, t, _ASYMPTOTIC_T)
    series = -2.0 * jnp.log(far) + jnp.log1p(-3.0 / far**2 + 15.0 / far**4 - 105.0 / far**6)
    tail = -0.5 * t**2 - _LOG_SQRT_2PI + jnp.where(t < _ASYMPTOTIC_T, mills, series)
    return jnp.where(z > -1.0, direct, tail)


def expected_improvement(mean, var, best):
    """Integrated EI: ``mean_s sigma_s (z_s Phi(z_s) + phi(z_s))``."""
    z, std = _z_and_std(mean, var, best)
    per_sample = jnp.where(std > _MIN_STD, std * jnp.exp(log_h(z)), jnp.maximum(best - mean, 0.0))
    return jnp.mean(per_sample, axis=0)


def log_expected_improvement(mean, var, best):
    """``log`` of integrated EI, stable where EI underflows (``logsumexp`` over samples)."""
    z, std = _z_and_std(mean, var, best)
    per_sample = jnp.log(std) + log_h(z)
    return logsumexp(per_sample, axis=0) - jnp.log(mean.shape[0])


def probability_of_improvement(mean, var, best):
    """Integrated PI: ``mean_s Phi(z_s)``."""
    z, _ = _z_and_std(mean, var, best)
    return jnp.mean(ndtr(z), axis=0)


def lower_confidence_bound(mean, var, best, kappa: float = 2.0):
    """Integrated ``-(mu - kappa sigma)``; ``best`` is unused (kept for the common signature)."""
    del best
    return jnp.mean(kappa * _std(var) - mean, axis=0)


def max_variance(mean, var, best):
    """Integrated posterior standard deviation (pure exploration)."""
    del best
    return jnp.mean(_std(var), axis=0)


class MultiIncumbent(NamedTuple):
    """What the acquisitions of a run with several metrics compare against (arrays, so
    one compiled score serves every iteration):

    * ``lower``, ``upper`` (B, T): the boxes that cut the region the observed front does
      not dominate (:func:`bojax.bo.pareto.nondominated_boxes`), in warped units, with
      ``live`` (B,) False on the padding that keeps B on a bucket; or (S, 1, B, T) and
      (S, 1, B), one set per posterior sample, for noisy EHVI's sampled fronts;
    * ``found``: whether any evaluation met every constraint (before that, only the
      probability of feasibility is maximised, Gelbart et al. 2014);
    * ``best``: ParEGO's incumbent, the best scalarised feasible value;
    * ``columns``, ``orient``, ``bounds`` (C,): constraint ``c`` holds where
      ``orient_c z <= bounds_c`` on model output ``columns_c``
      (:meth:`bojax.bo.metrics.Metrics.thresholds`).
    """

    lower: jax.Array
    upper: jax.Array
    live: jax.Array
    found: jax.Array
    best: jax.Array
    columns: jax.Array
    orient: jax.Array
    bounds: jax.Array


def _log1mexp(x):
    """``log(1 - exp(x))`` for ``x < 0``, accurate at both ends (Maechler 2012)."""
    x = jnp.minimum(x, -1e-100)
    return jnp.where(x > -math.log(2.0), jnp.log(-jnp.expm1(x)), jnp.log1p(-jnp.exp(x)))


_NARROW = 1e-3  # a box side narrower than this, in sds times (1 + |its midpoint z|)


def log_box_side(lower, upper, mean, var):
    """``log E[max(0, u - max(Y, l))]`` for ``Y ~ N(mean, var)``: with ``h(z) = z Phi(z) +
    phi(z)`` it is ``sigma (h(b_u) - h(b_l))``, ``b = (bound - mu) / sigma``, since
    ``(u - max(Y, l))^+ = (u - Y)^+ - (l - Y)^+`` for ``l < u``; ``l = -inf`` leaves
    ``sigma h(b_u)``, the EI integrand.

    A side narrow against sigma (``delta = (u - l) / sigma``) loses its digits in the
    difference of the two logs; there ``h(b_u) - h(b_l) = int Phi`` by the midpoint
    rule with its second-order term, ``delta Phi(m) (1 - delta^2 m phi(m) / (24
    Phi(m)))`` at the midpoint ``m``, whose next term is ``O(delta^4 m^4)``."""
    # Each branch is computed on inputs safe for it (an unused branch's inf or NaN
    # would reach the gradient through jnp.where): -inf lowers as upper - 1.
    z_upper, std = _z_and_std(mean, var, upper)
    finite = jnp.isfinite(lower)
    lower = jnp.where(finite, lower, upper - 1.0)
    z_lower, _ = _z_and_std(mean, var, lower)
    delta = (upper - lower) / std  # not z_u - z_l: that difference cancels too
    mid = z_lower + 0.5 * delta
    narrow = finite & (delta > 0) & (delta * (1.0 + jnp.abs(mid)) < _NARROW)
    log_upper = log_h(z_upper)
    z_lower = jnp.where(narrow, z_upper - 1.0, z_lower)
    log_width = jnp.where(finite, _log1mexp(log_h(z_lower) - log_upper), 0.0)
    wide = jnp.log(std) + log_upper + log_width
    delta, mid = jnp.where(narrow, delta, _NARROW), jnp.where(narrow, mid, 0.0)
    log_cdf = log_ndtr(mid)
    ratio = jnp.exp(-0.5 * mid**2 - _LOG_SQRT_2PI - log_cdf)  # phi(m) / Phi(m)
    midpoint = jnp.log(std * delta) + log_cdf + jnp.log1p(-(delta**2) * mid * ratio / 24.0)
    return jnp.where(narrow, midpoint, wide)


def log_feasibility(mean, var, incumbent: MultiIncumbent):
    """``(S, M)``: ``sum_c log Phi((t_c - a_c mu_c) / sigma_c)``, the log probability
    that every outcome constraint holds (the outputs are independent given a draw)."""
    mu = jnp.take(mean, incumbent.columns, axis=-1) * incumbent.orient
    std = _std(jnp.take(var, incumbent.columns, axis=-1))
    return jnp.sum(log_ndtr((incumbent.bounds - mu) / std), axis=-1)


def log_expected_hypervolume_improvement(mean, var, incumbent: MultiIncumbent):
    """``log mean_s [EHVI_s(x) P_s(feasible | x)]`` over the hyperparameter draws ``s``.

    Per draw, the objectives' outputs are independent Gaussians, so over the boxes of the
    non-dominated region ``EHVI_s = sum_b prod_k E[max(0, u_bk - max(Y_k, l_bk))]``
    (:func:`log_box_side`), exact, in logs throughout (Ament et al. 2023's LogEHVI, here
    closed-form rather than Monte Carlo). The draws are averaged before the log, as for
    log-EI. With one objective this is log-EI, with constraints constrained EI (Gardner
    et al. 2014). Before any feasible evaluation: ``log mean_s P_s(feasible)``.
    """
    objectives = incumbent.lower.shape[-1]
    sides = log_box_side(
        incumbent.lower, incumbent.upper, mean[..., None, :objectives], var[..., None, :objectives]
    )  # (S, M, B, T)
    per_box = jnp.where(incumbent.live, jnp.sum(sides, axis=-1), -jnp.inf)
    log_ehvi = jnp.where(incumbent.found, logsumexp(per_box, axis=-1), 0.0)
    per_sample = log_ehvi + log_feasibility(mean, var, incumbent)
    return logsumexp(per_sample, axis=0) - jnp.log(mean.shape[0])


def log_scalarised_improvement(mean, var, incumbent: MultiIncumbent):
    """ParEGO's acquisition (Knowles 2006): log-EI of model output 0, the random
    Chebyshev scalarisation the loop fitted, on ``incumbent.best``, times the probability
    of feasibility, averaged over draws before the log."""
    z, std = _z_and_std(mean[..., 0], var[..., 0], incumbent.best)
    log_ei = jnp.where(incumbent.found, jnp.log(std) + log_h(z), 0.0)
    per_sample = log_ei + log_feasibility(mean, var, incumbent)
    return logsumexp(per_sample, axis=0) - jnp.log(mean.shape[0])


Acquisition = Callable[..., jnp.ndarray]


def times_success(value, log_p, best):
    """``a(x) P(x)``: how P(success) weights a non-negative utility (EI, PI, max-variance)."""
    return value * jnp.exp(log_p)


def plus_log_success(value, log_p, best):
    """``log a(x) + log P(x)``: the same weighting for an acquisition on the log scale."""
    return value + log_p


def optimistic_improvement_times_success(value, log_p, best):
    """``softplus(best - LCB(x)) P(x)``: LCB's score ``kappa sigma - mu`` changes sign, so
    the lower bound's improvement on the incumbent, made positive, is weighted instead;
    it ranks points as LCB does."""
    return jax.nn.softplus(jnp.mean(best) + value) * jnp.exp(log_p)


@dataclass(frozen=True)
class AcquisitionRecord:
    """An acquisition and what the loop needs to know about it.

    * ``fn(mean (S, M), var (S, M), best, **options) -> (M,)``, a score to maximise;
    * ``options``: names of :class:`bojax.bo.settings.Settings` fields passed to ``fn`` as
      keyword arguments (LCB reads ``kappa``);
    * ``weighting(value, log_p, best)``: the score weighted by the probability of success
      ``exp(log_p)`` where evaluations can fail (default ``a(x) P(x)``);
    * ``outputs``: model outputs it reads: 1, or None for one per modelled metric of a
      run with ``objectives`` (then ``fn`` receives ``(S, M, K)`` means and variances and
      a :class:`MultiIncumbent` as ``best``).

    Calling the record calls ``fn``. Frozen and hashable: the loop compiles one score per
    record.
    """

    name: str
    fn: Acquisition
    options: tuple[str, ...] = ()
    weighting: Callable = times_success
    outputs: int | None = 1

    def __call__(self, mean, var, best, **options):
        return self.fn(mean, var, best, **options)

    @property
    def on_log_scale(self) -> bool:
        """Whether its score is a log (it adds ``log P(success)``): a stopping rule on the
        acquisition then compares ``exp(score)``, log EI's EI."""
        return self.weighting is plus_log_success


def _check_record(record) -> None:
    """SettingsError for a record that is not one, or whose ``options`` name no setting
    (the run read them only after its initial design, as an AttributeError, review CQ)."""
    if not isinstance(record, AcquisitionRecord):
        raise SettingsError(f"register an AcquisitionRecord(name, fn, ...), got {record!r}")
    unknown = [option for option in record.options if option not in _setting_defaults()]
    if unknown:
        raise SettingsError(
            f"acquisition {record.name!r} reads options {unknown}, which are not settings: "
            "options name Settings fields (kappa, tau, ...); bind a constant of its own into "
            "fn (functools.partial, or a closure)"
        )


@functools.cache
def _setting_defaults() -> dict:
    """Every :class:`~bojax.bo.settings.Settings` field's default, by name: the options
    an acquisition may read (imported late: the settings module imports this one)."""
    from dataclasses import fields

    from bojax.bo.settings import Settings

    return {spec.name: spec.default for spec in fields(Settings)}


@functools.cache
def check_scores(record: AcquisitionRecord) -> None:
    """SettingsError unless ``record`` (one output) maps ``mean`` and ``var`` of shape
    ``(S, M)`` to one score per point, ``(M,)``, checked by tracing it on ``(2, 3)``
    inputs with the settings' defaults as options (once per record): a wrong shape failed
    after the run's initial design, with numpy's "p must be 1-dimensional" (review CQ)."""
    options = {name: _setting_defaults()[name] for name in record.options}
    given = jax.ShapeDtypeStruct((2, 3), jnp.float32)
    try:
        shape = jax.eval_shape(
            lambda mean, var, best: record(mean, var, best, **options),
            given, given, jax.ShapeDtypeStruct((), jnp.float32),
        ).shape  # fmt: skip
    except Exception as error:
        raise SettingsError(
            f"acquisition {record.name!r} fails on mean and var of shape (S, M) = (2, 3): "
            f"{type(error).__name__}: {error}"
        ) from error
    if shape != (3,):
        raise SettingsError(
            f"acquisition {record.name!r} must return one score per point, shape (M,), from "
            f"mean and var of shape (S, M); on (2, 3) it returned shape {shape}"
        )


ACQUISITIONS: Registry[AcquisitionRecord] = Registry("acquisition", _check_record)
ACQUISITIONS.register(AcquisitionRecord("ei", expected_improvement))
ACQUISITIONS.register(
    AcquisitionRecord("log_ei", log_expected_improvement, weighting=plus_log_success)
)
PI = ACQUISITIONS.register(AcquisitionRecord("pi", probability_of_improvement))
ACQUISITIONS.register(
    AcquisitionRecord(
        "lcb",
        lower_confidence_bound,
        options=("kappa",),
        weighting=optimistic_improvement_times_success,
    )
)
MAX_VARIANCE = ACQUISITIONS.register(AcquisitionRecord("max_variance", max_variance))
# Several metrics (a run with ``objectives``): one model output per metric.
ACQUISITIONS.register(
    AcquisitionRecord(
        "log_ehvi",
        log_expected_hypervolume_improvement,
        weighting=plus_log_success,
        outputs=None,
    )
)
# Noisy EHVI: the same integrand, averaged over sampled fronts too; the loop draws them
# (:func:`bojax.bo.multiobjective.sampled_fronts`) and hands per-sample boxes.
ACQUISITIONS.register(
    AcquisitionRecord(
        "log_nehvi",
        log_expected_hypervolume_improvement,
        weighting=plus_log_success,
        outputs=None,
    )
)
ACQUISITIONS.register(
    AcquisitionRecord(
        "parego", log_scalarised_improvement, weighting=plus_log_success, outputs=None
    )
)


def weighted_by_success(acquisition: str | AcquisitionRecord, value, log_p, best):
    """The acquisition ``value`` (M,) weighted by the probability of success ``exp(log_p)``
    (M,), as its record's ``weighting`` says: ``a(x) P(x)`` for non-negative utilities (EI,
    PI, max-variance), ``log a(x) + log P(x)`` for log-EI, and ``softplus(best - LCB(x))
    P(x)`` for the lower confidence bound, whose score changes sign. ``best`` is the
    incumbent (one per fantasy allowed)."""
    return get_acquisition(acquisition).weighting(value, log_p, best)


def get_acquisition(name: str | AcquisitionRecord | Acquisition) -> AcquisitionRecord:
    """The registered acquisition ``name``; a record passes through, and a bare function
    ``fn(mean, var, best)`` becomes an unregistered record of its own."""
    if isinstance(name, AcquisitionRecord):
        return name
    if callable(name):
        return AcquisitionRecord(getattr(name, "__name__", "acquisition"), name)
    return ACQUISITIONS.get(name)
