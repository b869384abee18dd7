"""``ValueToKey``: replace the key with a struct/map of fields copied from the value.

Kafka's keys: ``fields`` (non-empty list), ``replace.null.with.default``. Schemaless values
must be maps; with a schema every listed field must exist (DataException naming the field).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strom.connect.api.config import ConfigDef, ConfigType, Importance
from strom.connect.data import SchemaBuilder, Struct
from strom.connect.exceptions import DataException
from strom.connect.transforms._base import (
    NON_EMPTY_LIST,
    REPLACE_NULL_WITH_DEFAULT_CONFIG,
    REPLACE_NULL_WITH_DEFAULT_DOC,
    BaseTransformation,
    SchemaCache,
    require_map,
    require_struct,
    struct_get,
)

PURPOSE = "copying fields from value to key"
FIELDS = "fields"

CONFIG_DEF = (
    ConfigDef()
    .define(FIELDS, ConfigType.LIST, validator=NON_EMPTY_LIST, importance=Importance.HIGH,
            doc="Field names on the record value to extract as the record key.")
    .define(REPLACE_NULL_WITH_DEFAULT_CONFIG, ConfigType.BOOLEAN, default=True, importance=Importance.MEDIUM,
            doc=REPLACE_NULL_WITH_DEFAULT_DOC)
)


class ValueToKey(BaseTransformation):
    """``org.apache.kafka.connect.transforms.ValueToKey``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.ValueToKey"

    @classmethod
    def config_def(cls) -> ConfigDef:
        return CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.parse(configs)
        self.fields: list[str] = list(c[FIELDS])
        self.replace_null_with_default = bool(c[REPLACE_NULL_WITH_DEFAULT_CONFIG])
        self._cache = SchemaCache()

    def apply(self, record: Any) -> Any:
        if record.value_schema is None:
            value = require_map(record.value, PURPOSE)
            key = {f: value.get(f) for f in self.fields}
            return record.new_record(record.topic, record.kafka_partition, None, key,
                                     record.value_schema, record.value, record.timestamp)
        struct = require_struct(record.value, PURPOSE)
        key_schema = self._cache.get(struct.schema)
        if key_schema is None:
            builder = SchemaBuilder.struct()
            for name in self.fields:
                field = struct.schema.field(name)
                if field is None:
                    raise DataException(f"Field does not exist: {name}")
                builder.field(name, field.schema)
            key_schema = builder.build()
            self._cache.put(struct.schema, key_schema)
        key_struct = Struct(key_schema)
        for name in self.fields:
            key_struct.put(name, struct_get(struct, name, self.replace_null_with_default))
        return record.new_record(record.topic, record.kafka_partition, key_schema, key_struct,
                                 struct.schema, struct, record.timestamp)
