"""Typed errors raised by bojax.

Every error bojax raises on purpose derives from :class:`BojaxError` and from the
built-in exception a Python user would expect (``ValueError``, ``TypeError``,
``LookupError``, ``numpy.linalg.LinAlgError``), so both ``except BojaxError`` and the
usual idioms catch them.
"""

from __future__ import annotations

import numbers
import os
import sys
import warnings

import numpy as np

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the first caller outside bojax, the user's line,
    however deep in bojax the warning arises (a fixed ``stacklevel`` pointed into
    bojax's own wrappers; review CZ)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level + 1)


class BojaxError(Exception):
    """Base class of all errors raised deliberately by bojax."""


class SpaceDefinitionError(BojaxError, ValueError):
    """A search space or one of its parameters is defined inconsistently."""


class ParameterError(BojaxError):
    """A point does not fit its search space. ``name`` is the offending parameter."""

    def __init__(self, name: str, message: str):
        self.name = name
        super().__init__(f"parameter {name!r}: {message}")


class ParameterTypeError(ParameterError, TypeError):
    """A parameter value has the wrong type (a string for a real, 2.5 for an integer)."""


class InvalidValueError(ParameterError, ValueError):
    """A parameter value is NaN or infinite."""


class OutOfBoundsError(InvalidValueError):
    """A parameter value lies outside its bounds."""

    def __init__(self, name: str, value: float, low: float, high: float):
        self.value, self.low, self.high = value, low, high
        super().__init__(name, f"value {value!r} is outside [{low}, {high}]")


class MissingParameterError(ParameterError, LookupError):
    """A point lacks a parameter of the space."""


class UnknownParameterError(ParameterError, LookupError):
    """A point names a parameter the space does not have."""


class UnknownNameError(BojaxError, LookupError):
    """A registry (kernels, means, ...) was asked for a name it does not hold."""

    def __init__(self, kind: str, name: str, known: list[str]):
        self.kind, self.name, self.known = kind, name, known
        super().__init__(f"unknown {kind} {name!r}; known: {', '.join(sorted(known))}")


class ObjectiveReferenceError(BojaxError, LookupError):
    """``module:function`` or ``file.py:function`` does not name a callable objective."""


class DataError(BojaxError, ValueError):
    """Observations are unusable: empty, mis-shaped, or not finite."""


class SettingsError(BojaxError, ValueError):
    """A run setting is out of range, mistyped, or names nothing registered."""


class SpaceExhaustedError(BojaxError, RuntimeError):
    """Every candidate repeats an evaluated or pending point (a used-up integer space)."""


class ObjectiveError(BojaxError, RuntimeError):
    """No evaluation of the objective succeeded, so a run has no result to return."""


class JournalError(BojaxError, ValueError):
    """A run journal is corrupt, or does not match the run that tries to resume it."""


class RunLockedError(JournalError):
    """Another live process is running in the same run folder (the error names it)."""


class RunFolderError(JournalError, OSError):
    """A run folder cannot be created or written (permissions, a full disk)."""


class CholeskyError(BojaxError, np.linalg.LinAlgError):
    """The Cholesky factorisation failed even with the largest jitter of the ladder."""


def is_count(value: object) -> bool:
    """A non-negative integer, and not a bool: the check behind every count setting."""
    return not isinstance(value, bool) and isinstance(value, numbers.Integral) and value >= 0


def require_positive_counts(owner: object, *names: str) -> None:
    """SettingsError naming the first of ``owner``'s attributes ``names`` that is not a
    whole number >= 1 (a training's epochs, a batch size, a layer count)."""
    for name in names:
        value = getattr(owner, name)
        if not is_count(value) or value < 1:
            raise SettingsError(f"{name} must be a positive integer, got {value!r}")


def require_batch_fits(batch_size: int, examples: int) -> None:
    """SettingsError where a minibatch is larger than the training set: every epoch would
    drop its only partial batch and train on nothing."""
    if batch_size > examples:
        raise SettingsError(
            f"batch_size ({batch_size}) exceeds the {examples} training examples: an epoch "
            "takes whole batches only, so it would train on nothing"
        )
