"""Kafka Connect's plain converters: ``ByteArrayConverter``, ``StringConverter`` and the
big-endian number converters (``ShortConverter`` ... ``DoubleConverter``).

Each is also a header converter, as in Kafka. Values read back carry Kafka's optional schemas
(``OPTIONAL_BYTES_SCHEMA``, ``OPTIONAL_STRING_SCHEMA``, ``OPTIONAL_INT32_SCHEMA``, ...); a null
(tombstone) stays null both ways.
"""

from __future__ import annotations

import codecs
import struct
from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import Any, ClassVar, cast

from strom.connect.api.config import ConfigDef, ConfigType, Importance
from strom.connect.api.converter import Converter, HeaderConverter
from strom.connect.converters._base import converter_config_def, with_type
from strom.connect.data import Schema, SchemaAndValue
from strom.connect.exceptions import ConfigException, DataException

ENCODING_CONFIG = "converter.encoding"
ENCODING_DEFAULT = "UTF8"


class ByteArrayConverter(Converter, HeaderConverter):
    """Passes bytes through unchanged (``org.apache.kafka.connect.converters.ByteArrayConverter``)."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.converters.ByteArrayConverter"

    def config(self) -> ConfigDef:
        return converter_config_def()

    def configure(self, configs: Mapping[str, Any], is_key: bool | None = None) -> None:
        converter_config_def().parse(with_type(configs, is_key))

    def close(self) -> None:
        """Nothing to release."""

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any, headers: Any = None) -> bytes | None:
        if schema is not None and schema.type.name != "BYTES":
            raise DataException(f"Invalid schema type for ByteArrayConverter: {schema.type.name}")
        if value is None:
            return None
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise DataException(f"ByteArrayConverter is not compatible with objects of type {type(value).__name__}")
        return bytes(value)

    def to_connect_data(self, topic: str, value: bytes | None, headers: Any = None) -> SchemaAndValue:
        return SchemaAndValue(Schema.OPTIONAL_BYTES_SCHEMA, None if value is None else bytes(value))

    def from_connect_data_batch(self, topic: str, schemas: Sequence[Schema | None],
                                values: Sequence[Any]) -> list[bytes | None]:
        """``from_connect_data`` of many values of one topic in one call (the runtime's fast path)."""
        if all(type(v) is bytes or v is None for v in values) and all(
                s is None or s.type.name == "BYTES" for s in schemas):
            return list(values)
        return [self.from_connect_data(topic, s, v) for s, v in zip(schemas, values, strict=True)]

    def to_connect_data_batch(self, topic: str, values: Sequence[bytes | None]) -> tuple[Schema, list[Any]]:
        """``to_connect_data`` of many values of one topic: their one schema and the values."""
        return Schema.OPTIONAL_BYTES_SCHEMA, [None if v is None else bytes(v) for v in values]

    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)


def _python_codec(java_name: str) -> str:
    """The Python codec of a Java charset name; ConfigException when there is none."""
    upper = java_name.strip().upper()
    if upper in ("UTF-16", "UTF16"):
        return "java-utf-16"  # Java's UTF-16: big endian, BOM written, BOM honoured on read
    try:
        return codecs.lookup(java_name.strip()).name
    except LookupError:
        raise ConfigException(ENCODING_CONFIG, java_name, "unsupported character encoding") from None


def _string_config_def() -> ConfigDef:
    return converter_config_def().define(
        ENCODING_CONFIG, ConfigType.STRING, default=ENCODING_DEFAULT, importance=Importance.HIGH,
        doc="The name of the Java character set to use for encoding strings as byte arrays.",
    )


class StringConverter(Converter, HeaderConverter):
    """Strings in a configurable charset (``org.apache.kafka.connect.storage.StringConverter``).

    Like Kafka, any value is written as its string form, and undecodable bytes read back as
    U+FFFD instead of failing (Java's ``new String(bytes, charset)``).
    """

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.storage.StringConverter"

    def __init__(self) -> None:
        self._codec = "utf-8"

    def config(self) -> ConfigDef:
        return _string_config_def()

    def configure(self, configs: Mapping[str, Any], is_key: bool | None = None) -> None:
        conf = with_type(configs, is_key)
        parsed = _string_config_def().parse(conf)
        # Kafka's StringSerializer also honours key./value.serializer.encoding and serializer.encoding.
        prefix = "key" if parsed["converter.type"] == "key" else "value"
        name = conf.get(f"{prefix}.serializer.encoding") or conf.get("serializer.encoding") or parsed[ENCODING_CONFIG]
        self._codec = _python_codec(str(name))

    def close(self) -> None:
        """Nothing to release."""

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any, headers: Any = None) -> bytes | None:
        if value is None:
            return None
        text = value if isinstance(value, str) else _java_to_string(value)
        if self._codec == "java-utf-16":
            return codecs.BOM_UTF16_BE + text.encode("utf-16-be", "replace")
        return text.encode(self._codec, "replace")

    def to_connect_data(self, topic: str, value: bytes | None, headers: Any = None) -> SchemaAndValue:
        if value is None:
            return SchemaAndValue(Schema.OPTIONAL_STRING_SCHEMA, None)
        data = bytes(value)
        if self._codec == "java-utf-16":
            if data[:2] in (codecs.BOM_UTF16_BE, codecs.BOM_UTF16_LE):
                return SchemaAndValue(Schema.OPTIONAL_STRING_SCHEMA, data.decode("utf-16", "replace"))
            return SchemaAndValue(Schema.OPTIONAL_STRING_SCHEMA, data.decode("utf-16-be", "replace"))
        return SchemaAndValue(Schema.OPTIONAL_STRING_SCHEMA, data.decode(self._codec, "replace"))

    def from_connect_data_batch(self, topic: str, schemas: Sequence[Schema | None],
                                values: Sequence[Any]) -> list[bytes | None]:
        """``from_connect_data`` of many values of one topic in one call (the runtime's fast path)."""
        codec = self._codec
        if codec == "java-utf-16":
            return [self.from_connect_data(topic, s, v) for s, v in zip(schemas, values, strict=True)]
        try:  # all strings (the common case): encoded through map, no Python-level step per value
            return list(map(str.encode, values, repeat(codec), repeat("replace")))
        except TypeError:  # a null or a non-string value among them
            return [None if v is None else (v if type(v) is str else _java_to_string(v)).encode(codec, "replace")
                    for v in values]

    def to_connect_data_batch(self, topic: str, values: Sequence[bytes | None]) -> tuple[Schema, list[Any]]:
        """``to_connect_data`` of many values of one topic: their one schema and the values."""
        codec = self._codec
        if codec == "java-utf-16":
            return Schema.OPTIONAL_STRING_SCHEMA, [self.to_connect_data(topic, v).value for v in values]
        # str(buffer, codec, errors) decodes bytes, bytearray and memoryview alike; without nulls
        # it runs through map, with no Python-level step per value.
        if None in values:
            return Schema.OPTIONAL_STRING_SCHEMA, [None if v is None else str(v, codec, "replace") for v in values]
        return Schema.OPTIONAL_STRING_SCHEMA, list(map(str, cast("Sequence[bytes]", values), repeat(codec), repeat("replace")))

    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)


def _java_to_string(value: Any) -> str:
    # Java's toString() for the value kinds that differ from Python's str().
    from strom.connect.converters._javafmt import java_double_str

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_str(value)
    return str(value)


class _NumberConverter(Converter, HeaderConverter):
    """Kafka's ``NumberConverter``: one fixed-width big-endian number per message."""

    TYPE_NAME: ClassVar[str]
    FORMAT: ClassVar[struct.Struct]
    SCHEMA_ATTR: ClassVar[str]
    FLOATING: ClassVar[bool] = False

    def config(self) -> ConfigDef:
        return converter_config_def()

    def configure(self, configs: Mapping[str, Any], is_key: bool | None = None) -> None:
        converter_config_def().parse(with_type(configs, is_key))

    def close(self) -> None:
        """Nothing to release."""

    def _schema(self) -> Schema:
        return getattr(Schema, self.SCHEMA_ATTR)

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any, headers: Any = None) -> bytes | None:
        if value is None:
            return None
        ok = isinstance(value, (int, float)) if self.FLOATING else isinstance(value, int)
        if not ok or isinstance(value, bool):
            raise DataException(f"Failed to serialize to {self.TYPE_NAME} (was {type(value).__name__}): "
                                f"{value!r} is not a {self.TYPE_NAME} value")
        try:
            return self.FORMAT.pack(value)
        except (struct.error, OverflowError) as e:
            raise DataException(f"Failed to serialize to {self.TYPE_NAME} (was {type(value).__name__}): {e}") from e

    def to_connect_data(self, topic: str, value: bytes | None, headers: Any = None) -> SchemaAndValue:
        if value is None:
            return SchemaAndValue(self._schema(), None)
        if len(value) != self.FORMAT.size:
            raise DataException(f"Failed to deserialize {self.TYPE_NAME}: Size of data received by "
                                f"{type(self).__name__} is not {self.FORMAT.size}")
        return SchemaAndValue(self._schema(), self.FORMAT.unpack(value)[0])

    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)


class ShortConverter(_NumberConverter):
    """int16, 2 bytes big endian (``org.apache.kafka.connect.converters.ShortConverter``)."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.converters.ShortConverter"
    TYPE_NAME = "INT16"
    FORMAT = struct.Struct(">h")
    SCHEMA_ATTR = "OPTIONAL_INT16_SCHEMA"


class IntegerConverter(_NumberConverter):
    """int32, 4 bytes big endian (``org.apache.kafka.connect.converters.IntegerConverter``)."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.converters.IntegerConverter"
    TYPE_NAME = "INT32"
    FORMAT = struct.Struct(">i")
    SCHEMA_ATTR = "OPTIONAL_INT32_SCHEMA"


class LongConverter(_NumberConverter):
    """int64, 8 bytes big endian (``org.apache.kafka.connect.converters.LongConverter``)."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.converters.LongConverter"
    TYPE_NAME = "INT64"
    FORMAT = struct.Struct(">q")
    SCHEMA_ATTR = "OPTIONAL_INT64_SCHEMA"


class FloatConverter(_NumberConverter):
    """float32, 4 bytes IEEE 754 big endian (``org.apache.kafka.connect.converters.FloatConverter``)."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.converters.FloatConverter"
    TYPE_NAME = "FLOAT32"
    FORMAT = struct.Struct(">f")
    SCHEMA_ATTR = "OPTIONAL_FLOAT32_SCHEMA"
    FLOATING = True


class DoubleConverter(_NumberConverter):
    """float64, 8 bytes IEEE 754 big endian (``org.apache.kafka.connect.converters.DoubleConverter``)."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.converters.DoubleConverter"
    TYPE_NAME = "FLOAT64"
    FORMAT = struct.Struct(">d")
    SCHEMA_ATTR = "OPTIONAL_FLOAT64_SCHEMA"
    FLOATING = True
