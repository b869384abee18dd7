"""Shared machinery of the built-in transformations (Kafka's ``transforms.util``).

- :class:`KeyOrValue`: the ``$Key``/``$Value`` split — which side of the record a transformation
  reads and replaces.
- ``require_map``/``require_struct``/``require_schema``/``require_sink_record``: Kafka's
  ``Requirements``, with its messages.
- :func:`copy_schema_basics`: Kafka's ``SchemaUtil.copySchemaBasics`` (name, version, doc and
  parameters — not optionality or default, exactly as Kafka).
- :class:`SchemaCache`: a small bounded cache of derived schemas (Kafka's ``SynchronizedCache``
  of an ``LRUCache(16)``), so per-record work is a dictionary hit.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, ClassVar

from strom.connect.api.config import ConfigDef, LambdaValidator
from strom.connect.api.transforms import Transformation
from strom.connect.data import Schema, SchemaBuilder, Struct
from strom.connect.exceptions import ConfigException, DataException

REPLACE_NULL_WITH_DEFAULT_CONFIG = "replace.null.with.default"
REPLACE_NULL_WITH_DEFAULT_DOC = (
    "Whether to replace fields that have a default value and that are null to the default value. "
    "When set to true, the default value is used, otherwise null is used.")


def _non_empty_list(name: str, value: Any) -> None:
    if not value:
        raise ConfigException(name, value, "Empty list is not allowed")


def _non_empty_string_or_null(name: str, value: Any) -> None:
    if value is not None and not str(value).strip():
        raise ConfigException(name, value, "String must be non-empty")


NON_EMPTY_LIST = LambdaValidator.with_(_non_empty_list, "non-empty list")
"""Kafka's ``NonEmptyListValidator``."""
NON_EMPTY_STRING_OR_NULL = LambdaValidator.with_(_non_empty_string_or_null, "non-empty string")
"""Kafka's ``NonEmptyString`` (which lets an unset value through)."""


def type_name(schema: Schema) -> str:
    """The Connect type name of ``schema`` (``INT32``, ``STRUCT``...)."""
    return schema.type.name


def class_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def require_map(value: Any, purpose: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DataException(f"Only Map objects supported in absence of schema for [{purpose}], found: {class_name(value)}")
    return value


def require_map_or_null(value: Any, purpose: str) -> dict[str, Any] | None:
    return None if value is None else require_map(value, purpose)


def require_struct(value: Any, purpose: str) -> Struct:
    if not isinstance(value, Struct):
        raise DataException(f"Only Struct objects supported for [{purpose}], found: {class_name(value)}")
    return value


def require_struct_or_null(value: Any, purpose: str) -> Struct | None:
    return None if value is None else require_struct(value, purpose)


def require_schema(schema: Schema | None, purpose: str) -> Schema:
    if schema is None:
        raise DataException(f"Schema required for [{purpose}]")
    return schema


def require_sink_record(record: Any, purpose: str) -> Any:
    from strom.connect.api.records import SinkRecord

    if not isinstance(record, SinkRecord):
        raise DataException(f"Only SinkRecord supported for [{purpose}], found: {class_name(record)}")
    return record


def copy_schema_basics(source: Schema, builder: SchemaBuilder) -> SchemaBuilder:
    """Kafka's ``SchemaUtil.copySchemaBasics``: name, version, doc, parameters."""
    if source.name is not None:
        builder.name(source.name)
    if source.version is not None:
        builder.version(source.version)
    if source.doc is not None:
        builder.doc(source.doc)
    if source.parameters:
        builder.parameters(source.parameters)
    return builder


def struct_get(struct: Struct, name: str, replace_null_with_default: bool) -> Any:
    """A field's value; with ``replace.null.with.default=false`` a null stays null."""
    return struct.get(name) if replace_null_with_default else struct.get_without_default(name)


class SchemaCache:
    """Bounded, thread-safe map from an input schema to the schema derived from it."""

    def __init__(self, size: int = 16) -> None:
        self._size = size
        self._data: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._size:
                self._data.popitem(last=False)


class BaseTransformation(Transformation):
    """A transformation whose settings come from its class-level ``CONFIG_DEF``."""

    KAFKA_CLASS_NAME: ClassVar[str]

    @classmethod
    @abstractmethod
    def config_def(cls) -> ConfigDef:
        raise NotImplementedError

    def config(self) -> ConfigDef:
        return type(self).config_def()

    def parse(self, configs: Mapping[str, Any]) -> dict[str, Any]:
        return dict(type(self).config_def().parse(dict(configs or {})))

    def close(self) -> None:
        """Nothing to release."""


class KeyOrValue:
    """Kafka's ``$Key``/``$Value`` pair: ``IS_KEY`` picks the side of the record worked on."""

    IS_KEY: ClassVar[bool] = False

    def operating_schema(self, record: Any) -> Schema | None:
        return record.key_schema if self.IS_KEY else record.value_schema

    def operating_value(self, record: Any) -> Any:
        return record.key if self.IS_KEY else record.value

    def new_record(self, record: Any, schema: Schema | None, value: Any) -> Any:
        if self.IS_KEY:
            return record.new_record(record.topic, record.kafka_partition, schema, value,
                                     record.value_schema, record.value, record.timestamp)
        return record.new_record(record.topic, record.kafka_partition, record.key_schema, record.key,
                                 schema, value, record.timestamp)
