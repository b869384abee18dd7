"""``TimestampConverter$Key`` / ``TimestampConverter$Value``: convert timestamps between Unix
epoch numbers, formatted strings and Connect's Date/Time/Timestamp logical types.

Kafka's keys: ``target.type`` (``string``, ``unix``, ``Date``, ``Time``, ``Timestamp``),
``field`` (empty: the whole key/value), ``format`` (a Java ``SimpleDateFormat`` pattern, needed
for strings), ``unix.precision`` (``seconds``, ``milliseconds``, ``microseconds``,
``nanoseconds``), ``replace.null.with.default``. The input type is taken from the schema (its
logical name, STRING or INT64) or, schemaless, from the value (datetime, int, str). All
conversions go through UTC milliseconds, as Kafka's go through ``java.util.Date``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, ClassVar

from strom.connect.api.config import ConfigDef, ConfigType, Importance, ValidString
from strom.connect.data import Date, Schema, SchemaBuilder, Struct, Time, Timestamp
from strom.connect.exceptions import ConfigException, DataException
from strom.connect.transforms._base import (
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
from strom.connect.transforms.java_date_format import UTC, JavaDateFormat

PURPOSE = "converting timestamp formats"
FIELD, TARGET_TYPE, FORMAT, UNIX_PRECISION = "field", "target.type", "format", "unix.precision"
TYPE_STRING, TYPE_UNIX, TYPE_DATE, TYPE_TIME, TYPE_TIMESTAMP = "string", "unix", "Date", "Time", "Timestamp"
PRECISIONS = ("nanoseconds", "microseconds", "milliseconds", "seconds")
MILLIS_PER_DAY = 86_400_000

CONFIG_DEF = (
    ConfigDef()
    .define(FIELD, ConfigType.STRING, default="", importance=Importance.HIGH,
            doc="The field containing the timestamp, or empty if the entire value is a timestamp")
    .define(TARGET_TYPE, ConfigType.STRING,
            validator=ValidString.in_(TYPE_STRING, TYPE_UNIX, TYPE_DATE, TYPE_TIME, TYPE_TIMESTAMP),
            importance=Importance.HIGH,
            doc="The desired timestamp representation: string, unix, Date, Time, or Timestamp")
    .define(FORMAT, ConfigType.STRING, default="", importance=Importance.MEDIUM,
            doc="A SimpleDateFormat-compatible format for the timestamp. Used to generate the output when "
                "type=string or used to parse the input if the input is a string.")
    .define(UNIX_PRECISION, ConfigType.STRING, default="milliseconds", validator=ValidString.in_(*PRECISIONS),
            importance=Importance.LOW,
            doc="The desired Unix precision for the timestamp: seconds, milliseconds, microseconds, or nanoseconds.")
    .define(REPLACE_NULL_WITH_DEFAULT_CONFIG, ConfigType.BOOLEAN, default=True, importance=Importance.MEDIUM,
            doc=REPLACE_NULL_WITH_DEFAULT_DOC)
)

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


def _millis_of(when: dt.datetime) -> int:
    return Timestamp.from_logical(Timestamp.SCHEMA, when)


def _trunc_div(a: int, b: int) -> int:
    # Java's TimeUnit conversions truncate toward zero.
    q = abs(a) // b
    return q if a >= 0 else -q


class TimestampConverter(KeyOrValue, BaseTransformation):
    """Kafka's ``TimestampConverter``; use :class:`TimestampConverterKey` or :class:`TimestampConverterValue`."""

    Key: ClassVar[type[TimestampConverter]]
    Value: ClassVar[type[TimestampConverter]]

    @classmethod
    def config_def(cls) -> ConfigDef:
        return CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.parse(configs)
        self.field: str = c[FIELD]
        self.target_type: str = c[TARGET_TYPE]
        pattern: str = c[FORMAT]
        self.unix_precision: str = c[UNIX_PRECISION]
        self.replace_null_with_default = bool(c[REPLACE_NULL_WITH_DEFAULT_CONFIG])
        if self.target_type == TYPE_STRING and not pattern:
            raise ConfigException("TimestampConverter requires format option to be specified when using string timestamps")
        self.format: JavaDateFormat | None = JavaDateFormat(pattern, FORMAT) if pattern else None
        self._cache = SchemaCache()

    # -- translation through UTC milliseconds ------------------------------------------------
    def _to_millis(self, kind: str, value: Any) -> int:
        if kind == TYPE_STRING:
            if self.format is None:
                raise DataException("TimestampConverter requires format option to be specified when using string timestamps")
            try:
                return _millis_of(self.format.parse(value))
            except ValueError as e:
                raise DataException(f"Could not parse timestamp: value ({value}) does not match pattern "
                                    f"({self.format.pattern})") from e
        if kind == TYPE_UNIX:
            p = self.unix_precision
            if p == "seconds":
                return int(value) * 1000
            if p == "microseconds":
                return _trunc_div(int(value), 1000)
            if p == "nanoseconds":
                return _trunc_div(int(value), 1_000_000)
            return int(value)
        if kind == TYPE_DATE:
            return Date.from_logical(Date.SCHEMA, value) * MILLIS_PER_DAY
        if kind == TYPE_TIME:
            return Time.from_logical(Time.SCHEMA, value)
        return _millis_of(value)

    def _from_millis(self, millis: int) -> Any:
        t = self.target_type
        if t == TYPE_STRING:
            assert self.format is not None
            return self.format.format_millis(millis)
        if t == TYPE_UNIX:
            p = self.unix_precision
            if p == "seconds":
                return _trunc_div(millis, 1000)
            if p == "microseconds":
                return millis * 1000
            if p == "nanoseconds":
                return millis * 1_000_000
            return millis
        if t == TYPE_DATE:
            return Date.to_logical(Date.SCHEMA, millis // MILLIS_PER_DAY)
        if t == TYPE_TIME:
            return Time.to_logical(Time.SCHEMA, millis % MILLIS_PER_DAY)
        return Timestamp.to_logical(Timestamp.SCHEMA, millis)

    def _target_schema(self, optional: bool) -> Schema:
        t = self.target_type
        if t == TYPE_STRING:
            return Schema.OPTIONAL_STRING_SCHEMA if optional else Schema.STRING_SCHEMA
        if t == TYPE_UNIX:
            return Schema.OPTIONAL_INT64_SCHEMA if optional else Schema.INT64_SCHEMA
        logical: dict[str, type[Date] | type[Time] | type[Timestamp]] = {
            TYPE_DATE: Date, TYPE_TIME: Time, TYPE_TIMESTAMP: Timestamp}
        builder = logical[t].builder()
        return (builder.optional() if optional else builder).build()

    @staticmethod
    def _kind_of_schema(schema: Schema) -> str:
        name = schema.name
        if name == Timestamp.LOGICAL_NAME:
            return TYPE_TIMESTAMP
        if name == Date.LOGICAL_NAME:
            return TYPE_DATE
        if name == Time.LOGICAL_NAME:
            return TYPE_TIME
        if schema.type.name == "STRING":
            return TYPE_STRING
        if schema.type.name == "INT64":
            return TYPE_UNIX
        raise DataException(f"Schema {schema!r} does not correspond to a known timestamp type format")

    @staticmethod
    def _kind_of_value(value: Any) -> str:
        if isinstance(value, dt.datetime):
            return TYPE_TIMESTAMP
        if isinstance(value, dt.date):
            return TYPE_DATE
        if isinstance(value, dt.time):
            return TYPE_TIME
        if isinstance(value, int) and not isinstance(value, bool):
            return TYPE_UNIX
        if isinstance(value, str):
            return TYPE_STRING
        raise DataException(f"TimestampConverter does not support {class_name(value)} objects as timestamps")

    def _convert(self, value: Any, kind: str | None = None) -> Any:
        if value is None:
            return None
        return self._from_millis(self._to_millis(kind or self._kind_of_value(value), value))

    # -- records ---------------------------------------------------------------------------
    def apply(self, record: Any) -> Any:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            if not self.field:
                return self.new_record(record, None, self._convert(value))
            if value is None:
                return record
            updated = dict(require_map(value, PURPOSE))
            updated[self.field] = self._convert(updated.get(self.field))
            return self.new_record(record, None, updated)
        if not self.field:
            kind = self._kind_of_schema(schema)
            return self.new_record(record, self._target_schema(schema.optional), self._convert(value, kind))
        updated_schema = self._cache.get(schema)
        if updated_schema is None:
            builder = copy_schema_basics(schema, SchemaBuilder.struct())
            for f in schema.fields or ():
                if f.name == self.field:
                    builder.field(f.name, self._target_schema(f.schema.optional))
                else:
                    builder.field(f.name, f.schema)
            if schema.optional:
                builder.optional()
            updated_schema = builder.build()
            self._cache.put(schema, updated_schema)
        if value is None:
            return self.new_record(record, updated_schema, None)
        return self.new_record(record, updated_schema,
                               self._convert_struct(require_struct(value, PURPOSE), updated_schema))

    def _convert_struct(self, struct: Struct, updated_schema: Schema) -> Struct:
        out = Struct(updated_schema)
        for f in struct.schema.fields or ():
            v = struct_get(struct, f.name, self.replace_null_with_default)
            if f.name == self.field:
                v = self._convert(v, self._kind_of_schema(f.schema))
            out.put(f.name, v)
        return out


class TimestampConverterKey(TimestampConverter):
    """``org.apache.kafka.connect.transforms.TimestampConverter$Key``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.TimestampConverter$Key"
    IS_KEY = True


class TimestampConverterValue(TimestampConverter):
    """``org.apache.kafka.connect.transforms.TimestampConverter$Value``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.TimestampConverter$Value"
    IS_KEY = False


TimestampConverter.Key = TimestampConverterKey
TimestampConverter.Value = TimestampConverterValue
