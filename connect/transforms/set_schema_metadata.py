"""``SetSchemaMetadata$Key`` / ``SetSchemaMetadata$Value``: set the schema's name and/or version.

Kafka's keys: ``schema.name``, ``schema.version`` (at least one must be set),
``replace.null.with.default``. The record must have a schema; a Struct value is rebuilt on the
renamed schema so value and schema stay consistent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from strom.connect.api.config import ConfigDef, ConfigType, Importance
from strom.connect.data import Schema, Struct
from strom.connect.exceptions import ConfigException
from strom.connect.transforms._base import (
    REPLACE_NULL_WITH_DEFAULT_CONFIG,
    REPLACE_NULL_WITH_DEFAULT_DOC,
    BaseTransformation,
    KeyOrValue,
    require_schema,
    struct_get,
)

PURPOSE = "updating schema metadata"
SCHEMA_NAME, SCHEMA_VERSION = "schema.name", "schema.version"

CONFIG_DEF = (
    ConfigDef()
    .define(SCHEMA_NAME, ConfigType.STRING, default=None, importance=Importance.HIGH, doc="Schema name to set.")
    .define(SCHEMA_VERSION, ConfigType.INT, default=None, importance=Importance.HIGH, doc="Schema version to set.")
    .define(REPLACE_NULL_WITH_DEFAULT_CONFIG, ConfigType.BOOLEAN, default=True, importance=Importance.MEDIUM,
            doc=REPLACE_NULL_WITH_DEFAULT_DOC)
)


class SetSchemaMetadata(KeyOrValue, BaseTransformation):
    """Kafka's ``SetSchemaMetadata``; use :class:`SetSchemaMetadataKey` or :class:`SetSchemaMetadataValue`."""

    Key: ClassVar[type[SetSchemaMetadata]]
    Value: ClassVar[type[SetSchemaMetadata]]

    @classmethod
    def config_def(cls) -> ConfigDef:
        return CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.parse(configs)
        self.schema_name: str | None = c[SCHEMA_NAME] or None
        self.schema_version: int | None = c[SCHEMA_VERSION]
        if self.schema_name is None and self.schema_version is None:
            raise ConfigException("Neither schema name nor version configured")
        self.replace_null_with_default = bool(c[REPLACE_NULL_WITH_DEFAULT_CONFIG])

    def apply(self, record: Any) -> Any:
        schema = require_schema(self.operating_schema(record), PURPOSE)
        is_array = schema.type.name == "ARRAY"
        is_map = schema.type.name == "MAP"
        updated = dataclasses.replace(
            schema,
            name=self.schema_name if self.schema_name is not None else schema.name,
            version=self.schema_version if self.schema_version is not None else schema.version,
            key_schema=schema.key_schema if is_map else None,
            value_schema=schema.value_schema if (is_array or is_map) else None,
        )
        return self.new_record(record, updated, self._update_schema_in(self.operating_value(record), updated))

    def _update_schema_in(self, value: Any, schema: Schema) -> Any:
        if not isinstance(value, Struct):
            return value
        out = Struct(schema)
        for f in value.schema.fields or ():
            out.put(f.name, struct_get(value, f.name, self.replace_null_with_default))
        return out


class SetSchemaMetadataKey(SetSchemaMetadata):
    """``org.apache.kafka.connect.transforms.SetSchemaMetadata$Key``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.SetSchemaMetadata$Key"
    IS_KEY = True


class SetSchemaMetadataValue(SetSchemaMetadata):
    """``org.apache.kafka.connect.transforms.SetSchemaMetadata$Value``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.SetSchemaMetadata$Value"
    IS_KEY = False


SetSchemaMetadata.Key = SetSchemaMetadataKey
SetSchemaMetadata.Value = SetSchemaMetadataValue
