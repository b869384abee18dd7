"""Single message transformations and predicates (Kafka's ``Transformation`` and ``Predicate``).

Both are instantiated with no arguments, then ``configure``\\ d with their own keys (the
``transforms.<alias>.`` / ``predicates.<alias>.`` prefix stripped). A transformation returns a
new record (``record.new_record(...)``) or ``None`` to drop it; it must not mutate its input.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from strom.connect.api.config import ConfigDef
from strom.connect.api.records import ConnectRecord

R = TypeVar("R", bound=ConnectRecord)


class Transformation(ABC, Generic[R]):
    """Transforms one record at a time."""

    def version(self) -> str:
        from strom import __version__

        return __version__

    @abstractmethod
    def configure(self, configs: Mapping[str, Any]) -> None:
        """Configure with the transformation's own keys."""

    @abstractmethod
    def apply(self, record: R) -> R | None:
        """The transformed record, or ``None`` to drop it."""

    def config(self) -> ConfigDef:
        return ConfigDef()

    def close(self) -> None:
        """Release resources."""


class Predicate(ABC, Generic[R]):
    """A condition on a record, for ``transforms.<alias>.predicate`` (and ``.negate``)."""

    def version(self) -> str:
        from strom import __version__

        return __version__

    @abstractmethod
    def configure(self, configs: Mapping[str, Any]) -> None:
        """Configure with the predicate's own keys."""

    @abstractmethod
    def test(self, record: R) -> bool:
        """Whether the record matches."""

    def config(self) -> ConfigDef:
        return ConfigDef()

    def close(self) -> None:
        """Release resources."""


__all__ = ["Predicate", "Transformation"]
