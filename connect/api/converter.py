"""Converters between Connect data and bytes (Kafka's ``Converter`` and ``HeaderConverter``).

A converter is instantiated with no arguments and ``configure``\\ d with the worker's or
connector's ``key.converter.*``/``value.converter.*`` properties (prefix stripped). Kafka's
``StringConverter`` is both a converter and a header converter; a class may subclass both.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from strom.connect.api.config import ConfigDef
from strom.connect.api.records import Headers
from strom.connect.data.schema import Schema, SchemaAndValue


class ConverterType(enum.Enum):
    """Kafka's ``ConverterType``: the ``converter.type`` config a converter is configured with."""

    KEY = "key"
    VALUE = "value"
    HEADER = "header"


class Converter(ABC):
    """Converts keys or values: Connect data <-> bytes."""

    def version(self) -> str:
        from strom import __version__

        return __version__

    @abstractmethod
    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        """Configure for keys (``is_key``) or values."""

    @abstractmethod
    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Headers | None = None) -> bytes | None:
        """Serialize a Connect value (``None`` stays ``None``: a tombstone)."""

    @abstractmethod
    def to_connect_data(self, topic: str, value: bytes | None, headers: Headers | None = None) -> SchemaAndValue:
        """Deserialize bytes into a schema and a Connect value."""

    def config(self) -> ConfigDef:
        return ConfigDef()

    def close(self) -> None:  # noqa: B027  (optional hook, as in Kafka)
        """Release resources."""


class HeaderConverter(ABC):
    """Converts header values: Connect data <-> bytes."""

    def version(self) -> str:
        from strom import __version__

        return __version__

    @abstractmethod
    def configure(self, configs: Mapping[str, Any]) -> None:
        """Configure with the ``header.converter.*`` properties (prefix stripped)."""

    @abstractmethod
    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any) -> bytes | None:
        """Serialize one header value."""

    @abstractmethod
    def to_connect_header(self, topic: str, key: str, value: bytes | None) -> SchemaAndValue:
        """Deserialize one header value."""

    def config(self) -> ConfigDef:
        return ConfigDef()

    def close(self) -> None:  # noqa: B027  (optional hook, as in Kafka)
        """Release resources."""


__all__ = ["Converter", "ConverterType", "HeaderConverter"]
