"""Parameter kinds: how one named parameter maps between its values and a unit coordinate.

Every kind is a frozen dataclass derived from :class:`Parameter` and registered in
:data:`PARAMETER_KINDS` under the ``type`` word that space files and journals use. The
contract a kind fulfils (the rest of bojax asks nothing else of it):

* ``check(value)``: the value normalised (``int`` for an integer, ...) or a typed
  :class:`~bojax.errors.ParameterError` naming the parameter;
* ``encode(values)`` / ``decode(u)``: checked values to unit coordinates in ``[0, 1]``
  and back, vectorised over NumPy arrays; ``decode(encode(v)) == v`` (for a real, to
  rounding, a log scale's ``exp(log v)`` included; exactly at its bounds);
* ``snap(u)``: the canonical coordinate of the value ``u`` decodes to, so equal values
  have equal coordinates (how repeats are found); the identity for a continuum;
* ``spec()`` / ``from_spec(name, spec)``: the JSON/TOML form (journals, space files),
  validated key by key;
* ``describe()``: one line for ``bojax show``;
* class attributes saying how the rest of bojax treats the kind: ``categorical``
  (models compare its coordinates for equality only), ``ordered`` (conditions may use
  ``<`` ... ``>=``), ``continuous`` (the acquisition optimiser moves it by gradient
  steps; otherwise by ``neighbours(u)``, one value at a time), and ``grid()``, its
  finitely many coordinates (None for a continuum), for exact enumeration.

Sampling needs no method: a space draws uniform (or Sobol) unit coordinates and snaps
them, so a kind whose values own bins of the unit interval is sampled in proportion to
the bins' widths. The built-in kinds:

* ``Real(low, high)``: ``u = (t(v) - t(low)) / (t(high) - t(low))`` with ``t`` the
  identity, or ``log`` when ``log=True``.
* ``Integer(low, high)``: the same map applied to the continuous relaxation
  ``z in [low - 1/2, high + 1/2]``; a unit coordinate decodes to ``round(z)``. Every
  integer owns a bin of equal width in ``t``-space (equal probability under uniform
  sampling, or per octave with ``log=True``) and encodes to the bin's centre, so
  ``decode(encode(k)) == k`` exactly.
* ``Categorical(choices)``: unordered choices in equal bins (see the class).
* ``Ordinal(values)``: an ordered numeric grid spaced as declared (see the class).

A new kind is one class and one :meth:`~bojax.registry.Registry.register` call
(``docs/extending.md``). Any kind may carry a :class:`Condition` on an earlier parameter
(conditional spaces, the arc-kernel report, sec. 2).
"""

from bojax.parameters.base import (
    PARAMETER_KINDS,
    UNIT_TOLERANCE,
    Condition,
    Parameter,
    as_real_scalar,
    checked_unit,
    is_number,
    parameter_from_spec,
    python_scalar,
    same_value,
)
from bojax.parameters.choices import Categorical, Ordinal
from bojax.parameters.numeric import Integer, Real

PARAMETER_KINDS.register(Real, Real.kind)
PARAMETER_KINDS.register(Integer, Integer.kind)
PARAMETER_KINDS.register(Categorical, Categorical.kind)
PARAMETER_KINDS.register(Ordinal, Ordinal.kind)

__all__ = [
    "PARAMETER_KINDS",
    "UNIT_TOLERANCE",
    "Categorical",
    "Condition",
    "Integer",
    "Ordinal",
    "Parameter",
    "Real",
    "as_real_scalar",
    "checked_unit",
    "is_number",
    "parameter_from_spec",
    "python_scalar",
    "same_value",
]
