"""Registries of records: one per kind of extension (kernels, acquisitions, samplers, ...).

A registry maps a name to a **record**: the object itself (a surrogate, a parameter
kind) or a small frozen dataclass that carries the function and everything the rest of
bojax needs to know about it (an acquisition's options and how a probability of success
weights it, a policy's default threshold, ...). Nothing else in bojax keeps a table
keyed by these names, so adding an entry is one function and one call::

    from bojax.bo.acquisition import ACQUISITIONS, AcquisitionRecord

    def my_score(mean, var, best):
        ...

    ACQUISITIONS.register(AcquisitionRecord("my_score", my_score))

``register`` refuses to replace a name unless ``replace=True`` (a typo cannot silently
shadow a built-in), and :meth:`Registry.scoped` registers for the length of a ``with``
block, which is what tests use. Lookups of unknown names raise
:class:`~bojax.errors.UnknownNameError` listing what is known.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from bojax.errors import SettingsError, UnknownNameError

T = TypeVar("T")

_ALL: list[Registry] = []  # every registry made, in creation order (``bojax list``)


def _name_of(record: Any) -> str:
    name = getattr(record, "name", None)
    if not isinstance(name, str) or not name:
        raise SettingsError(f"a registered record needs a non-empty string .name, got {record!r}")
    return name


class Registry(Generic[T]):
    """Named records of one ``kind`` (the word error messages use: ``"acquisition"``)."""

    def __init__(
        self, kind: str, check: Callable[[Any], None] | None = None, plural: str | None = None
    ):
        self.kind = kind
        self.plural = plural or f"{kind}s"
        self._check = check  # raises a typed error for a record of the wrong shape
        self._records: dict[str, T] = {}
        _ALL.append(self)

    def register(self, record: T, name: str | None = None, *, replace: bool = False) -> T:
        """Add ``record`` under ``name`` (default: ``record.name``) and return it."""
        name = _name_of(record) if name is None else name
        if not isinstance(name, str) or not name:
            raise SettingsError(f"{self.kind} names must be non-empty strings, got {name!r}")
        if name in self._records and not replace and self._records[name] is not record:
            raise SettingsError(
                f"{self.kind} {name!r} is already registered; pass replace=True to replace it"
            )
        if self._check is not None:
            self._check(record)
        self._records[name] = record
        return record

    def unregister(self, name: str) -> None:
        if name not in self._records:
            raise UnknownNameError(self.kind, name, list(self._records))
        del self._records[name]

    @contextmanager
    def scoped(self, record: T, name: str | None = None) -> Iterator[T]:
        """Register ``record`` inside the block only (restoring any entry it replaced)."""
        name = _name_of(record) if name is None else name
        previous = self._records.get(name)
        self.register(record, name, replace=True)
        try:
            yield record
        finally:
            if previous is None:
                self._records.pop(name, None)
            else:
                self._records[name] = previous

    def get(self, name: str) -> T:
        try:
            return self._records[name]
        except (KeyError, TypeError):
            raise UnknownNameError(self.kind, str(name), list(self._records)) from None

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._records

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def names(self) -> tuple[str, ...]:
        return tuple(self._records)

    def items(self):
        return self._records.items()

    def values(self):
        return self._records.values()

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._records)})"


def registries() -> list[Registry]:
    """Every registry created so far (those of the modules imported), in creation order."""
    return list(_ALL)
