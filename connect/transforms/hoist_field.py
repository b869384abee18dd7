"""``HoistField$Key`` / ``HoistField$Value``: wrap the key or value in a one-field struct/map.

Kafka's key: ``field``. Schemaless data becomes ``{field: value}``; data with a schema becomes a
Struct whose single field has the original schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from strom.connect.api.config import ConfigDef, ConfigType, Importance
from strom.connect.data import SchemaBuilder, Struct
from strom.connect.transforms._base import BaseTransformation, KeyOrValue, SchemaCache

FIELD = "field"

CONFIG_DEF = ConfigDef().define(
    FIELD, ConfigType.STRING, importance=Importance.MEDIUM,
    doc="Field name for the single field that will be created in the resulting Struct or Map.")


class HoistField(KeyOrValue, BaseTransformation):
    """Kafka's ``HoistField``; use :class:`HoistFieldKey` or :class:`HoistFieldValue`."""

    Key: ClassVar[type[HoistField]]
    Value: ClassVar[type[HoistField]]

    @classmethod
    def config_def(cls) -> ConfigDef:
        return CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.field_name: str = self.parse(configs)[FIELD]
        self._cache = SchemaCache()

    def apply(self, record: Any) -> Any:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            return self.new_record(record, None, {self.field_name: value})
        updated = self._cache.get(schema)
        if updated is None:
            updated = SchemaBuilder.struct().field(self.field_name, schema).build()
            self._cache.put(schema, updated)
        return self.new_record(record, updated, Struct(updated).put(self.field_name, value))


class HoistFieldKey(HoistField):
    """``org.apache.kafka.connect.transforms.HoistField$Key``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.HoistField$Key"
    IS_KEY = True


class HoistFieldValue(HoistField):
    """``org.apache.kafka.connect.transforms.HoistField$Value``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.HoistField$Value"
    IS_KEY = False


HoistField.Key = HoistFieldKey
HoistField.Value = HoistFieldValue
