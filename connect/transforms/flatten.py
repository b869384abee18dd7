"""``Flatten$Key`` / ``Flatten$Value``: nested structs/maps become top-level fields whose names
join the path with ``delimiter`` (Kafka's key, default ``.``).

Schemaless: nested maps are flattened, lists and primitives kept. With a schema: nested structs
are flattened (a field is optional when it or any parent is; defaults come from the parent's
default), arrays and maps kept as they are. Null values pass.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping
from typing import Any, ClassVar

from strom.connect.api.config import ConfigDef, ConfigType, Importance
from strom.connect.data import Schema, SchemaBuilder, Struct
from strom.connect.data.schema import required_schema
from strom.connect.exceptions import DataException
from strom.connect.transforms._base import (
    BaseTransformation,
    KeyOrValue,
    SchemaCache,
    class_name,
    copy_schema_basics,
    require_map,
    require_struct,
)

PURPOSE = "flattening"
DELIMITER = "delimiter"

CONFIG_DEF = ConfigDef().define(
    DELIMITER, ConfigType.STRING, default=".", importance=Importance.MEDIUM,
    doc="Delimiter to insert between field names from the input record when generating field names for the output record")

_PRIMITIVES = (bool, int, float, str, bytes, bytearray, list, tuple, decimal.Decimal, dt.date, dt.time)


class Flatten(KeyOrValue, BaseTransformation):
    """Kafka's ``Flatten``; use :class:`FlattenKey` or :class:`FlattenValue`."""

    Key: ClassVar[type[Flatten]]
    Value: ClassVar[type[Flatten]]

    @classmethod
    def config_def(cls) -> ConfigDef:
        return CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        # Kafka does not strip the delimiter; keep a configured value as given.
        raw = (configs or {}).get(DELIMITER)
        self.delimiter: str = raw if isinstance(raw, str) else self.parse(configs)[DELIMITER]
        self._cache = SchemaCache()

    def _name(self, prefix: str, name: str) -> str:
        return name if not prefix else prefix + self.delimiter + name

    def apply(self, record: Any) -> Any:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if schema is None:
            if value is None:
                return record
            out: dict[str, Any] = {}
            self._flatten_map(require_map(value, PURPOSE), "", out)
            return self.new_record(record, None, out)
        updated = self._cache.get(schema)
        if updated is None:
            builder = copy_schema_basics(schema, SchemaBuilder.struct())
            self._build_schema(schema, "", builder, schema.optional,
                               schema.default if isinstance(schema.default, Struct) else None)
            updated = builder.build()
            self._cache.put(schema, updated)
        if value is None:
            return self.new_record(record, updated, None)
        struct = require_struct(value, PURPOSE)
        flat = Struct(updated)
        self._flatten_struct(struct, "", flat)
        return self.new_record(record, updated, flat)

    def _flatten_map(self, value: dict[str, Any], prefix: str, out: dict[str, Any]) -> None:
        for k, v in value.items():
            name = self._name(prefix, str(k))
            if v is None or isinstance(v, _PRIMITIVES):
                out[name] = v
            elif isinstance(v, dict):
                self._flatten_map(v, name, out)
            else:
                raise DataException(f"Flatten transformation does not support {class_name(v)} "
                                    f"for record without schemas (for field {name}).")

    def _build_schema(self, schema: Schema, prefix: str, builder: SchemaBuilder, optional: bool,
                      parent_default: Struct | None) -> None:
        for f in schema.fields or ():
            name = self._name(prefix, f.name)
            field_optional = optional or f.schema.optional
            default = f.schema.default
            if default is None and parent_default is not None:
                default = parent_default.get(f.name)
            if f.schema.type.name == "STRUCT":
                self._build_schema(f.schema, name, builder, field_optional,
                                   default if isinstance(default, Struct) else None)
            else:
                builder.field(name, _with(f.schema, field_optional, default))

    def _flatten_struct(self, struct: Struct | None, prefix: str, out: Struct) -> None:
        if struct is None:
            return  # a null nested struct leaves its flattened fields null
        for f in struct.schema.fields or ():
            name = self._name(prefix, f.name)
            v = struct.get(f.name)
            if f.schema.type.name == "STRUCT":
                self._flatten_struct(v, name, out)
            else:
                out.put(name, v)


def _with(schema: Schema, optional: bool, default: Any) -> Schema:
    # Kafka's convertFieldSchema: copy basics and type, make optional, carry the default.
    builder = copy_schema_basics(schema, SchemaBuilder.of_type(schema.type))
    if schema.type.name == "ARRAY":
        builder = copy_schema_basics(schema, SchemaBuilder.array(required_schema(schema.value_schema, "array element")))
    elif schema.type.name == "MAP":
        builder = copy_schema_basics(schema, SchemaBuilder.map(required_schema(schema.key_schema, "map key"),
                                                                  required_schema(schema.value_schema, "map value")))
    if optional:
        builder.optional()
    if default is not None:
        builder.default_value(default)
    return builder.build()


class FlattenKey(Flatten):
    """``org.apache.kafka.connect.transforms.Flatten$Key``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.Flatten$Key"
    IS_KEY = True


class FlattenValue(Flatten):
    """``org.apache.kafka.connect.transforms.Flatten$Value``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.Flatten$Value"
    IS_KEY = False


Flatten.Key = FlattenKey
Flatten.Value = FlattenValue
