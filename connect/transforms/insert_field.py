"""``InsertField$Key`` / ``InsertField$Value``: add the record's topic, partition, offset,
timestamp or a static value as fields.

Config keys are Kafka's: ``topic.field``, ``partition.field``, ``offset.field`` (sink records
only), ``timestamp.field``, ``static.field`` with ``static.value``, ``replace.null.with.default``.
A field name ending in ``!`` makes the field required, ``?`` (or nothing) optional. Schemaless
values must be maps; values with a schema must be Structs and get a schema with the new fields
appended. Null values (tombstones) pass unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

from strom.connect.api.config import ConfigDef, ConfigType, Importance
from strom.connect.data import Schema, SchemaBuilder, Struct, Timestamp
from strom.connect.exceptions import ConfigException
from strom.connect.transforms._base import (
    REPLACE_NULL_WITH_DEFAULT_CONFIG,
    REPLACE_NULL_WITH_DEFAULT_DOC,
    BaseTransformation,
    KeyOrValue,
    SchemaCache,
    copy_schema_basics,
    require_map,
    require_sink_record,
    require_struct,
    struct_get,
)

PURPOSE = "field insertion"
TOPIC_FIELD = "topic.field"
PARTITION_FIELD = "partition.field"
OFFSET_FIELD = "offset.field"
TIMESTAMP_FIELD = "timestamp.field"
STATIC_FIELD = "static.field"
STATIC_VALUE = "static.value"


class _Spec(NamedTuple):
    name: str
    optional: bool


def _spec(text: str | None) -> _Spec | None:
    if not text:
        return None
    if text.endswith("?"):
        return _Spec(text[:-1], True)
    if text.endswith("!"):
        return _Spec(text[:-1], False)
    return _Spec(text, True)


_SUFFIX = " Suffix with <code>!</code> to make this a required field, or <code>?</code> to keep it optional (the default)."
CONFIG_DEF = (
    ConfigDef()
    .define(TOPIC_FIELD, ConfigType.STRING, default=None, importance=Importance.MEDIUM,
            doc="Field name for Kafka topic." + _SUFFIX)
    .define(PARTITION_FIELD, ConfigType.STRING, default=None, importance=Importance.MEDIUM,
            doc="Field name for Kafka partition." + _SUFFIX)
    .define(OFFSET_FIELD, ConfigType.STRING, default=None, importance=Importance.MEDIUM,
            doc="Field name for Kafka offset - only applicable to sink connectors." + _SUFFIX)
    .define(TIMESTAMP_FIELD, ConfigType.STRING, default=None, importance=Importance.MEDIUM,
            doc="Field name for record timestamp." + _SUFFIX)
    .define(STATIC_FIELD, ConfigType.STRING, default=None, importance=Importance.MEDIUM,
            doc="Field name for static data field." + _SUFFIX)
    .define(STATIC_VALUE, ConfigType.STRING, default=None, importance=Importance.MEDIUM,
            doc="Static field value, if field name configured.")
    .define(REPLACE_NULL_WITH_DEFAULT_CONFIG, ConfigType.BOOLEAN, default=True,
            importance=Importance.MEDIUM, doc=REPLACE_NULL_WITH_DEFAULT_DOC)
)


class InsertField(KeyOrValue, BaseTransformation):
    """Kafka's ``InsertField``; use :class:`InsertFieldKey` or :class:`InsertFieldValue`."""

    Key: ClassVar[type[InsertField]]
    Value: ClassVar[type[InsertField]]

    @classmethod
    def config_def(cls) -> ConfigDef:
        return CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.parse(configs)
        self.topic_field = _spec(c[TOPIC_FIELD])
        self.partition_field = _spec(c[PARTITION_FIELD])
        self.offset_field = _spec(c[OFFSET_FIELD])
        self.timestamp_field = _spec(c[TIMESTAMP_FIELD])
        self.static_field = _spec(c[STATIC_FIELD])
        self.static_value = c[STATIC_VALUE]
        self.replace_null_with_default = bool(c[REPLACE_NULL_WITH_DEFAULT_CONFIG])
        if not (self.topic_field or self.partition_field or self.offset_field or self.timestamp_field
                or self.static_field):
            raise ConfigException("No field insertion configured")
        if self.static_field and self.static_value is None:
            raise ConfigException(STATIC_VALUE, None, f"No value specified for static field: {self.static_field.name}")
        self._cache = SchemaCache()

    def apply(self, record: Any) -> Any:
        value = self.operating_value(record)
        if value is None:
            return record
        if self.operating_schema(record) is None:
            return self._apply_schemaless(record, value)
        return self._apply_with_schema(record, value)

    def _apply_schemaless(self, record: Any, value: Any) -> Any:
        updated = dict(require_map(value, PURPOSE))
        if self.topic_field:
            updated[self.topic_field.name] = record.topic
        if self.partition_field and record.kafka_partition is not None:
            updated[self.partition_field.name] = record.kafka_partition
        if self.offset_field:
            updated[self.offset_field.name] = require_sink_record(record, PURPOSE).kafka_offset
        if self.timestamp_field and record.timestamp is not None:
            updated[self.timestamp_field.name] = record.timestamp
        if self.static_field and self.static_value is not None:
            updated[self.static_field.name] = self.static_value
        return self.new_record(record, None, updated)

    def _updated_schema(self, schema: Schema) -> Schema:
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        for f in schema.fields or ():
            builder.field(f.name, f.schema)
        if self.topic_field:
            builder.field(self.topic_field.name,
                          Schema.OPTIONAL_STRING_SCHEMA if self.topic_field.optional else Schema.STRING_SCHEMA)
        if self.partition_field:
            builder.field(self.partition_field.name,
                          Schema.OPTIONAL_INT32_SCHEMA if self.partition_field.optional else Schema.INT32_SCHEMA)
        if self.offset_field:
            builder.field(self.offset_field.name,
                          Schema.OPTIONAL_INT64_SCHEMA if self.offset_field.optional else Schema.INT64_SCHEMA)
        if self.timestamp_field:
            ts = Timestamp.builder()
            builder.field(self.timestamp_field.name, ts.optional() if self.timestamp_field.optional else ts)
        if self.static_field:
            builder.field(self.static_field.name,
                          Schema.OPTIONAL_STRING_SCHEMA if self.static_field.optional else Schema.STRING_SCHEMA)
        return builder.build()

    def _apply_with_schema(self, record: Any, value: Any) -> Any:
        struct = require_struct(value, PURPOSE)
        updated_schema = self._cache.get(struct.schema)
        if updated_schema is None:
            updated_schema = self._updated_schema(struct.schema)
            self._cache.put(struct.schema, updated_schema)
        updated = Struct(updated_schema)
        for f in struct.schema.fields or ():
            updated.put(f.name, struct_get(struct, f.name, self.replace_null_with_default))
        if self.topic_field:
            updated.put(self.topic_field.name, record.topic)
        if self.partition_field:
            updated.put(self.partition_field.name, record.kafka_partition)
        if self.offset_field:
            updated.put(self.offset_field.name, require_sink_record(record, PURPOSE).kafka_offset)
        if self.timestamp_field and record.timestamp is not None:
            updated.put(self.timestamp_field.name, Timestamp.to_logical(Timestamp.SCHEMA, record.timestamp))
        if self.static_field:
            updated.put(self.static_field.name, self.static_value)
        return self.new_record(record, updated_schema, updated)


class InsertFieldKey(InsertField):
    """``org.apache.kafka.connect.transforms.InsertField$Key``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.InsertField$Key"
    IS_KEY = True


class InsertFieldValue(InsertField):
    """``org.apache.kafka.connect.transforms.InsertField$Value``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.InsertField$Value"
    IS_KEY = False


InsertField.Key = InsertFieldKey
InsertField.Value = InsertFieldValue
