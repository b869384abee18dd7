"""Kafka Connect's default header converter, ``SimpleHeaderConverter``.

Header values are written as the string form of the value (``Values.convert_to_string``) in
UTF-8 and read back by parsing that string (``Values.parse_string``), which infers the schema:
``true`` is a boolean, ``42`` an int, ``[1,2]`` an array, ``{"a":1}`` a map, anything else a
string.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strom.connect.api.config import ConfigDef
from strom.connect.api.converter import HeaderConverter
from strom.connect.data import Schema, SchemaAndValue, Values
from strom.connect.exceptions import DataException


class SimpleHeaderConverter(HeaderConverter):
    """``org.apache.kafka.connect.storage.SimpleHeaderConverter``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.storage.SimpleHeaderConverter"

    def config(self) -> ConfigDef:
        return ConfigDef()

    def configure(self, configs: Mapping[str, Any]) -> None:
        """No settings."""

    def close(self) -> None:
        """Nothing to release."""

    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        return str(Values.convert_to_string(schema, value)).encode("utf-8", "replace")

    def to_connect_header(self, topic: str, key: str, value: bytes | None) -> SchemaAndValue:
        if value is None:
            return SchemaAndValue(None, None)
        text = bytes(value).decode("utf-8", "replace")
        if not text:
            return SchemaAndValue(Schema.STRING_SCHEMA, text)
        try:
            return Values.parse_string(text)
        except DataException:
            # Kafka logs and keeps the raw string when the text does not parse.
            return SchemaAndValue(Schema.STRING_SCHEMA, text)
        except Exception as e:
            raise DataException(f"Failed to deserialize value for header '{key}' on topic '{topic}': {e}") from e
