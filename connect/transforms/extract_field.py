"""``ExtractField$Key`` / ``ExtractField$Value``: replace the key or value with one of its fields.

Kafka's keys: ``field`` (required), ``field.syntax.version`` (V1/V2 nested paths),
``replace.null.with.default``. Schemaless values must be maps (a missing field gives null);
with a schema the field must exist (else an error naming it) and its schema becomes the new
schema. A null value stays null.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from strom.connect.api.config import ConfigDef, ConfigType, Importance, NonEmptyString
from strom.connect.exceptions import DataException
from strom.connect.transforms._base import (
    REPLACE_NULL_WITH_DEFAULT_CONFIG,
    REPLACE_NULL_WITH_DEFAULT_DOC,
    BaseTransformation,
    KeyOrValue,
    require_map_or_null,
    require_struct_or_null,
)
from strom.connect.transforms.field_path import (
    FIELD_SYNTAX_VERSION_CONFIG,
    define_syntax_version,
    field_from,
    split_path,
    value_from_map,
    value_from_struct,
)

PURPOSE = "field extraction"
FIELD = "field"

CONFIG_DEF = define_syntax_version(
    ConfigDef()
    .define(FIELD, ConfigType.STRING, validator=NonEmptyString(), importance=Importance.MEDIUM,
            doc="Field name to extract.")
    .define(REPLACE_NULL_WITH_DEFAULT_CONFIG, ConfigType.BOOLEAN, default=True, importance=Importance.MEDIUM,
            doc=REPLACE_NULL_WITH_DEFAULT_DOC)
)


class ExtractField(KeyOrValue, BaseTransformation):
    """Kafka's ``ExtractField``; use :class:`ExtractFieldKey` or :class:`ExtractFieldValue`."""

    Key: ClassVar[type[ExtractField]]
    Value: ClassVar[type[ExtractField]]

    @classmethod
    def config_def(cls) -> ConfigDef:
        return CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.parse(configs)
        self.field_name: str = c[FIELD]
        self.steps = split_path(self.field_name, str(c[FIELD_SYNTAX_VERSION_CONFIG]))
        self.replace_null_with_default = bool(c[REPLACE_NULL_WITH_DEFAULT_CONFIG])

    def apply(self, record: Any) -> Any:
        schema = self.operating_schema(record)
        if schema is None:
            value = require_map_or_null(self.operating_value(record), PURPOSE)
            return self.new_record(record, None, None if value is None else value_from_map(value, self.steps))
        struct = require_struct_or_null(self.operating_value(record), PURPOSE)
        field = field_from(schema, self.steps)
        if field is None:
            raise DataException(f"Unknown field: {self.field_name}")
        extracted = None if struct is None else value_from_struct(struct, self.steps, self.replace_null_with_default)
        return self.new_record(record, field.schema, extracted)


class ExtractFieldKey(ExtractField):
    """``org.apache.kafka.connect.transforms.ExtractField$Key``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.ExtractField$Key"
    IS_KEY = True


class ExtractFieldValue(ExtractField):
    """``org.apache.kafka.connect.transforms.ExtractField$Value``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.ExtractField$Value"
    IS_KEY = False


ExtractField.Key = ExtractFieldKey
ExtractField.Value = ExtractFieldValue
