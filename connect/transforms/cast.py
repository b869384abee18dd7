"""``Cast$Key`` / ``Cast$Value``: cast fields, or the whole key/value, to another primitive type.

Kafka's keys: ``spec`` (``field:type`` pairs, or a single ``type`` for the whole value) and
``replace.null.with.default``. Targets: int8, int16, int32, int64, float32, float64, boolean,
string. Inputs: those types plus bytes (to string, base64) and the logical types (Decimal,
Date, Time, Timestamp — encoded to their numbers, or formatted as strings). Casting follows
Java: numbers narrow like Java casts (wrapping), strings are parsed (``Integer.parseInt``...),
booleans are 1/0, ``"true"`` (any case) is the only true string. Null values pass.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from strom.connect.api.config import ConfigDef, ConfigType, Importance
from strom.connect.converters._javafmt import java_double_str, java_float_str, to_float32
from strom.connect.data import Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp, Type, Values
from strom.connect.exceptions import ConfigException, DataException
from strom.connect.transforms._base import (
    NON_EMPTY_LIST,
    REPLACE_NULL_WITH_DEFAULT_CONFIG,
    REPLACE_NULL_WITH_DEFAULT_DOC,
    BaseTransformation,
    KeyOrValue,
    SchemaCache,
    class_name,
    copy_schema_basics,
    require_map,
    require_struct,
    struct_get,
)

PURPOSE = "cast types"
SPEC = "spec"
WHOLE_VALUE = ""
OUTPUT_TYPES = (Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.FLOAT32, Type.FLOAT64,
                Type.BOOLEAN, Type.STRING)
INPUT_TYPES = (*OUTPUT_TYPES, Type.BYTES)
_LOGICAL = (Decimal.LOGICAL_NAME, Date.LOGICAL_NAME, Time.LOGICAL_NAME, Timestamp.LOGICAL_NAME)
_BITS = {Type.INT8: 8, Type.INT16: 16, Type.INT32: 32, Type.INT64: 64}
_JAVA_INT = re.compile(r"[+-]?\d+\Z")

CONFIG_DEF = (
    ConfigDef()
    .define(SPEC, ConfigType.LIST, validator=NON_EMPTY_LIST, importance=Importance.HIGH,
            doc="List of fields and the type to cast them to of the form field1:type,field2:type to cast fields of "
                "Maps or Structs. A single type to cast the entire value. Valid types are int8, int16, int32, "
                "int64, float32, float64, boolean, and string. Note that binary fields can only be cast to string.")
    .define(REPLACE_NULL_WITH_DEFAULT_CONFIG, ConfigType.BOOLEAN, default=True, importance=Importance.MEDIUM,
            doc=REPLACE_NULL_WITH_DEFAULT_DOC)
)


def _type_of(text: str) -> Type:
    try:
        t = Type[text.strip().upper()]
    except KeyError:
        raise ConfigException(f"Invalid type found in casting spec: {text.strip()}") from None
    if t not in OUTPUT_TYPES:
        raise ConfigException(f"Cast transformation does not support casting to {t.name}; supported types are "
                              f"{[x.name for x in OUTPUT_TYPES]}")
    return t


def parse_spec(mappings: list[str]) -> dict[str, Type]:
    """``["a:int32", "b:string"]`` (or ``["int64"]``) -> field -> target type."""
    casts: dict[str, Type] = {}
    whole = False
    for mapping in mappings:
        parts = mapping.split(":")
        if len(parts) > 2:
            raise ConfigException(SPEC, mappings, f"Invalid cast mapping: {mapping}")
        if len(parts) == 1:
            casts[WHOLE_VALUE] = _type_of(parts[0])
            whole = True
        else:
            casts[parts[0].strip()] = _type_of(parts[1])
    if whole and len(mappings) > 1:
        raise ConfigException("Cast transformations that specify a type to cast the entire value to may ony "
                              "specify a single cast in their spec")
    return casts


def _inferred_type(value: Any) -> Type | None:
    # Kafka's ConnectSchema.schemaType(value.getClass()) for schemaless values.
    if isinstance(value, bool):
        return Type.BOOLEAN
    if isinstance(value, int):
        return Type.INT64
    if isinstance(value, float):
        return Type.FLOAT64
    if isinstance(value, str):
        return Type.STRING
    if isinstance(value, (bytes, bytearray, memoryview)):
        return Type.BYTES
    if isinstance(value, list):
        return Type.ARRAY
    if isinstance(value, dict):
        return Type.MAP
    if isinstance(value, Struct):
        return Type.STRUCT
    return None


def _wrap(n: int, bits: int) -> int:
    span = 1 << bits
    n &= span - 1
    return n - span if n >= span >> 1 else n


def _java_narrow(value: float | decimal.Decimal | int, target: Type) -> int:
    """``Number.byteValue()/shortValue()/intValue()/longValue()`` of ``value``."""
    bits = _BITS[target]
    if isinstance(value, int):
        return _wrap(value, bits)
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return 0
        return _wrap(int(value), bits)  # BigDecimal: low-order bits of the integer part
    if math.isnan(value):
        return 0
    # double -> int/long saturates; int -> byte/short then keeps the low bits.
    lo, hi = (-(1 << 63), (1 << 63) - 1) if bits == 64 else (-(1 << 31), (1 << 31) - 1)
    n = max(lo, min(hi, int(value))) if math.isfinite(value) else (hi if value > 0 else lo)
    return _wrap(n, bits)


def _parse_java_int(text: str, target: Type) -> int:
    bits = _BITS[target]
    if not _JAVA_INT.match(text) or not -(1 << (bits - 1)) <= int(text) < (1 << (bits - 1)):
        raise DataException(f"Value ({text}) was out of range for requested data type")
    return int(text)


def _parse_java_float(text: str) -> float:
    t = text.strip()
    if t and t[-1] in "fFdD" and not t.lower().endswith("infinity"):
        t = t[:-1]
    if t in ("NaN", "+NaN", "-NaN"):
        return math.nan
    if t in ("Infinity", "+Infinity", "-Infinity"):
        return math.inf if not t.startswith("-") else -math.inf
    if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", t):
        raise DataException(f"Value ({text}) was out of range for requested data type")
    return float(t)


def _encode_logical(schema: Schema, value: Any) -> Any:
    name = schema.name
    if name == Date.LOGICAL_NAME:
        return Date.from_logical(schema, value)
    if name == Time.LOGICAL_NAME:
        return Time.from_logical(schema, value)
    if name == Timestamp.LOGICAL_NAME:
        return Timestamp.from_logical(schema, value)
    return value  # Decimal stays a number


def cast_value(schema: Schema | None, value: Any, target: Type) -> Any:
    """Kafka's ``castValueToType``."""
    if value is None:
        return None
    inferred = _inferred_type(value) if schema is None else schema.type
    if inferred is None:
        raise DataException(f"Cast transformation was passed a value of type {class_name(value)} which is not "
                            "supported by Connect's data API")
    if inferred not in INPUT_TYPES:
        raise DataException(f"Cast transformation does not support casting from {inferred.name}; supported types "
                            f"are {[x.name for x in INPUT_TYPES]}")
    if schema is not None and schema.name is not None and target is not Type.STRING:
        value = _encode_logical(schema, value)
    if target is Type.STRING:
        return _to_string(schema, value)
    if isinstance(value, (bytes, bytearray, memoryview, dt.date, dt.time)):
        raise DataException(f"Unexpected type in Cast transformation: {class_name(value)}")
    if target in _BITS:
        if isinstance(value, bool):
            return 1 if value else 0
        if isinstance(value, str):
            return _parse_java_int(value, target)
        return _java_narrow(value, target)
    if target in (Type.FLOAT32, Type.FLOAT64):
        if isinstance(value, bool):
            f = 1.0 if value else 0.0
        elif isinstance(value, str):
            f = _parse_java_float(value)
        else:
            f = float(value)
        return to_float32(f) if target is Type.FLOAT32 else f
    if target is Type.BOOLEAN:
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            return value.lower() == "true"  # Boolean.parseBoolean
        return _java_narrow(value, Type.INT64) != 0
    raise DataException(f"{target.name} is not supported in the Cast transformation.")


def _to_string(schema: Schema | None, value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_float_str(value) if schema is not None and schema.type is Type.FLOAT32 else java_double_str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (dt.date, dt.time)):
        return str(Values.convert_to_string(schema, value))
    return str(value)


def _builder(t: Type) -> SchemaBuilder:
    return SchemaBuilder.of_type(t)


class Cast(KeyOrValue, BaseTransformation):
    """Kafka's ``Cast``; use :class:`CastKey` or :class:`CastValue`."""

    Key: ClassVar[type[Cast]]
    Value: ClassVar[type[Cast]]

    @classmethod
    def config_def(cls) -> ConfigDef:
        return CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.parse(configs)
        self.casts = parse_spec(list(c[SPEC]))
        self.whole_value_type: Type | None = self.casts.get(WHOLE_VALUE)
        self.replace_null_with_default = bool(c[REPLACE_NULL_WITH_DEFAULT_CONFIG])
        self._cache = SchemaCache()

    def apply(self, record: Any) -> Any:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            if self.whole_value_type is not None:
                return self.new_record(record, None, cast_value(None, value, self.whole_value_type))
            original = require_map(value, PURPOSE)
            updated = dict(original)
            for field, target in self.casts.items():
                # Kafka puts every spec'd field, so a missing one becomes null.
                updated[field] = cast_value(None, original.get(field), target)
            return self.new_record(record, None, updated)
        updated_schema = self._updated_schema(schema)
        if self.whole_value_type is not None:
            return self.new_record(record, updated_schema, cast_value(schema, value, self.whole_value_type))
        struct = require_struct(value, PURPOSE)
        out = Struct(updated_schema)
        for f in struct.schema.fields or ():
            v = struct_get(struct, f.name, self.replace_null_with_default)
            cast_to = self.casts.get(f.name)
            out.put(f.name, cast_value(f.schema, v, cast_to) if cast_to is not None else v)
        return self.new_record(record, updated_schema, out)

    def _cast_schema(self, source: Schema, target: Type) -> SchemaBuilder:
        # Keep name/doc/params of a plain schema; a logical name no longer fits the new type.
        builder = _builder(target)
        if source.name not in _LOGICAL and source.type is not Type.STRUCT:
            copy_schema_basics(source, builder)
        if source.optional:
            builder.optional()
        if source.default is not None:
            builder.default_value(cast_value(source, source.default, target))
        return builder

    def _updated_schema(self, schema: Schema) -> Schema:
        cached = self._cache.get(schema)
        if cached is not None:
            return cached
        if self.whole_value_type is not None:
            if schema.type not in INPUT_TYPES:
                raise DataException(f"Cast transformation does not support casting from {schema.type.name}")
            updated = self._cast_schema(schema, self.whole_value_type).build()
        else:
            if schema.type is not Type.STRUCT:
                raise DataException(f"Only Struct objects supported for [{PURPOSE}], found schema of type "
                                    f"{schema.type.name}")
            builder = copy_schema_basics(schema, SchemaBuilder.struct())
            for f in schema.fields or ():
                target = self.casts.get(f.name)
                if target is None:
                    builder.field(f.name, f.schema)
                    continue
                if f.schema.type not in INPUT_TYPES:
                    raise DataException(f"Cast transformation does not support casting from {f.schema.type.name}; "
                                        f"supported types are {[x.name for x in INPUT_TYPES]} (field {f.name})")
                builder.field(f.name, self._cast_schema(f.schema, target).build())
            if schema.optional:
                builder.optional()
            updated = builder.build()
        self._cache.put(schema, updated)
        return updated


class CastKey(Cast):
    """``org.apache.kafka.connect.transforms.Cast$Key``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.Cast$Key"
    IS_KEY = True


class CastValue(Cast):
    """``org.apache.kafka.connect.transforms.Cast$Value``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.Cast$Value"
    IS_KEY = False


Cast.Key = CastKey
Cast.Value = CastValue
