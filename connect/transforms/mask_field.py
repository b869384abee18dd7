"""``MaskField$Key`` / ``MaskField$Value``: replace field values with a neutral value.

Kafka's keys: ``fields`` (non-empty list) and ``replacement`` (optional). Without a replacement
a field becomes its type's empty value (0, 0.0, false, "", empty bytes/list/map, Decimal 0,
the epoch for dates and times); with one, numbers and strings become the replacement parsed to
the field's type, and other types are a DataException. Null values and null fields stay null.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping
from typing import Any, ClassVar

from strom.connect.api.config import ConfigDef, ConfigType, Importance
from strom.connect.data import Date, Decimal, Schema, Struct, Time, Timestamp
from strom.connect.data import Type as Type_
from strom.connect.data.schema import INT_RANGES
from strom.connect.exceptions import DataException
from strom.connect.transforms._base import (
    NON_EMPTY_LIST,
    NON_EMPTY_STRING_OR_NULL,
    REPLACE_NULL_WITH_DEFAULT_CONFIG,
    REPLACE_NULL_WITH_DEFAULT_DOC,
    BaseTransformation,
    KeyOrValue,
    class_name,
    require_map,
    require_struct,
    struct_get,
)

PURPOSE = "mask fields"
FIELDS, REPLACEMENT = "fields", "replacement"

CONFIG_DEF = (
    ConfigDef()
    .define(FIELDS, ConfigType.LIST, validator=NON_EMPTY_LIST, importance=Importance.HIGH,
            doc="Names of fields to mask.")
    .define(REPLACEMENT, ConfigType.STRING, default=None, validator=NON_EMPTY_STRING_OR_NULL, importance=Importance.LOW,
            doc="Custom value replacement, that will be applied to all 'fields' values (numeric or non-empty string values only).")
    .define(REPLACE_NULL_WITH_DEFAULT_CONFIG, ConfigType.BOOLEAN, default=True, importance=Importance.MEDIUM,
            doc=REPLACE_NULL_WITH_DEFAULT_DOC)
)

_EPOCH_TS = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
INT_NAMES = {"INT8": Type_.INT8, "INT16": Type_.INT16, "INT32": Type_.INT32, "INT64": Type_.INT64}


def _empty_by_schema(schema: Schema) -> Any:
    name, t = schema.name, schema.type.name
    if name == Decimal.LOGICAL_NAME:
        return decimal.Decimal(0)
    if name == Date.LOGICAL_NAME:
        return dt.date(1970, 1, 1)
    if name == Time.LOGICAL_NAME:
        return dt.time(0)
    if name == Timestamp.LOGICAL_NAME:
        return _EPOCH_TS
    empty = {"INT8": 0, "INT16": 0, "INT32": 0, "INT64": 0, "FLOAT32": 0.0, "FLOAT64": 0.0,
             "BOOLEAN": False, "STRING": "", "BYTES": b"", "ARRAY": [], "MAP": {}}
    if t in empty:
        return empty[t]
    raise DataException(f"Cannot mask value of type: {t}")


def _empty_by_value(value: Any) -> Any:
    # Schemaless: by the Python class, as Kafka goes by the Java class.
    if isinstance(value, bool):
        return False
    for kind, empty in ((int, 0), (float, 0.0), (str, ""), (bytes, b""), (decimal.Decimal, decimal.Decimal(0))):
        if isinstance(value, kind):
            return empty
    if isinstance(value, dt.datetime):
        return _EPOCH_TS
    if isinstance(value, dt.date):
        return dt.date(1970, 1, 1)
    if isinstance(value, dt.time):
        return dt.time(0)
    if isinstance(value, list):
        return []
    if isinstance(value, dict):
        return {}
    raise DataException(f"Cannot mask value of type: {class_name(value)}")


def _replace(kind: str, replacement: str, value: Any) -> Any:
    try:
        if kind in INT_NAMES:
            n = int(replacement.strip())
            lo, hi = INT_RANGES[INT_NAMES[kind]]
            if not lo <= n <= hi:
                raise ValueError(f"out of range for {kind}")
            return n
        if kind == "FLOAT":
            return float(replacement)
        if kind == "DECIMAL":
            return decimal.Decimal(replacement)
    except (ValueError, decimal.InvalidOperation) as e:
        raise DataException(f"Unable to convert {replacement} (String) to number: {e}") from e
    if kind == "STRING":
        return replacement
    raise DataException(f"Cannot mask value of type {class_name(value)} with custom replacement.")




def _kind_of_schema(schema: Schema) -> str:
    if schema.name == Decimal.LOGICAL_NAME:
        return "DECIMAL"
    if schema.name is not None and schema.name in (Date.LOGICAL_NAME, Time.LOGICAL_NAME, Timestamp.LOGICAL_NAME):
        return "OTHER"
    t = schema.type.name
    if t in INT_NAMES:
        return t
    return {"FLOAT32": "FLOAT", "FLOAT64": "FLOAT", "STRING": "STRING"}.get(t, "OTHER")


def _kind_of_value(value: Any) -> str:
    if isinstance(value, bool):
        return "OTHER"
    if isinstance(value, int):
        return "INT64"
    if isinstance(value, float):
        return "FLOAT"
    if isinstance(value, decimal.Decimal):
        return "DECIMAL"
    if isinstance(value, str):
        return "STRING"
    return "OTHER"


class MaskField(KeyOrValue, BaseTransformation):
    """Kafka's ``MaskField``; use :class:`MaskFieldKey` or :class:`MaskFieldValue`."""

    Key: ClassVar[type[MaskField]]
    Value: ClassVar[type[MaskField]]

    @classmethod
    def config_def(cls) -> ConfigDef:
        return CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.parse(configs)
        self.masked_fields = set(c[FIELDS])
        self.replacement: str | None = c[REPLACEMENT]
        self.replace_null_with_default = bool(c[REPLACE_NULL_WITH_DEFAULT_CONFIG])

    def apply(self, record: Any) -> Any:
        value = self.operating_value(record)
        if value is None:
            return record
        if self.operating_schema(record) is None:
            updated = dict(require_map(value, PURPOSE))
            for name in self.masked_fields:
                if name in updated:
                    updated[name] = self._masked_schemaless(updated[name])
            return self.new_record(record, None, updated)
        struct = require_struct(value, PURPOSE)
        out = Struct(struct.schema)
        for f in struct.schema.fields or ():
            v = struct_get(struct, f.name, self.replace_null_with_default)
            out.put(f.name, self._masked_with_schema(f.schema, v) if f.name in self.masked_fields else v)
        return self.new_record(record, struct.schema, out)

    def _masked_schemaless(self, value: Any) -> Any:
        if value is None:
            return None
        if self.replacement is None:
            return _empty_by_value(value)
        return _replace(_kind_of_value(value), self.replacement, value)

    def _masked_with_schema(self, schema: Schema, value: Any) -> Any:
        if value is None:
            return None
        if self.replacement is None:
            return _empty_by_schema(schema)
        return _replace(_kind_of_schema(schema), self.replacement, value)


class MaskFieldKey(MaskField):
    """``org.apache.kafka.connect.transforms.MaskField$Key``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.MaskField$Key"
    IS_KEY = True


class MaskFieldValue(MaskField):
    """``org.apache.kafka.connect.transforms.MaskField$Value``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.MaskField$Value"
    IS_KEY = False


MaskField.Key = MaskFieldKey
MaskField.Value = MaskFieldValue
