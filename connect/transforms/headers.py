"""Header transformations: ``HeaderFrom$Key``/``HeaderFrom$Value`` (fields to headers, by copy
or move), ``InsertHeader`` (a literal header) and ``DropHeaders`` (remove headers by name).

Kafka's keys: HeaderFrom ``fields``, ``headers`` (same length), ``operation`` (``move`` or
``copy``), ``replace.null.with.default``; InsertHeader ``header`` and ``value.literal`` (parsed
with ``Values.parse_string``, so ``42`` becomes an int header); DropHeaders ``headers``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from strom.connect.api.config import ConfigDef, ConfigType, Importance, NonEmptyString, ValidString
from strom.connect.api.records import Headers
from strom.connect.data import SchemaBuilder, Struct, Values
from strom.connect.exceptions import ConfigException, DataException
from strom.connect.transforms._base import (
    NON_EMPTY_LIST,
    REPLACE_NULL_WITH_DEFAULT_CONFIG,
    REPLACE_NULL_WITH_DEFAULT_DOC,
    BaseTransformation,
    KeyOrValue,
    SchemaCache,
    copy_schema_basics,
    require_map,
    require_struct,
    struct_get,
)

FIELDS, HEADERS, OPERATION = "fields", "headers", "operation"
MOVE, COPY = "move", "copy"

HEADER_FROM_CONFIG_DEF = (
    ConfigDef()
    .define(FIELDS, ConfigType.LIST, validator=NON_EMPTY_LIST, importance=Importance.HIGH,
            doc="Field names in the record whose values are to be copied or moved to headers.")
    .define(HEADERS, ConfigType.LIST, validator=NON_EMPTY_LIST, importance=Importance.HIGH,
            doc="Header names, in the same order as the field names listed in the fields configuration property.")
    .define(OPERATION, ConfigType.STRING, validator=ValidString.in_(MOVE, COPY), importance=Importance.HIGH,
            doc="Either <code>move</code> if the fields are to be moved to the headers (removed from the key/value), "
                "or <code>copy</code> if the fields are to be copied to the headers (retained in the key/value).")
    .define(REPLACE_NULL_WITH_DEFAULT_CONFIG, ConfigType.BOOLEAN, default=True, importance=Importance.MEDIUM,
            doc=REPLACE_NULL_WITH_DEFAULT_DOC)
)


class HeaderFrom(KeyOrValue, BaseTransformation):
    """Kafka's ``HeaderFrom``; use :class:`HeaderFromKey` or :class:`HeaderFromValue`."""

    Key: ClassVar[type[HeaderFrom]]
    Value: ClassVar[type[HeaderFrom]]

    @classmethod
    def config_def(cls) -> ConfigDef:
        return HEADER_FROM_CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.parse(configs)
        self.fields: list[str] = list(c[FIELDS])
        self.headers: list[str] = list(c[HEADERS])
        if len(self.fields) != len(self.headers):
            raise ConfigException(FIELDS, c[FIELDS],
                                  f"'{FIELDS}' config must have the same number of elements as '{HEADERS}' config.")
        self.operation: str = c[OPERATION]
        self.replace_null_with_default = bool(c[REPLACE_NULL_WITH_DEFAULT_CONFIG])
        self._cache = SchemaCache()

    def apply(self, record: Any) -> Any:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if value is None:
            return record
        headers: Headers = record.headers.duplicate()
        if schema is None:
            original = require_map(value, f"header {self.operation}")
            for field, header in zip(self.fields, self.headers, strict=True):
                headers.add(header, original.get(field), None)
            updated: Any = original
            if self.operation == MOVE:
                updated = {k: v for k, v in original.items() if k not in self.fields}
            return self._with(record, None, updated, headers)
        struct = require_struct(value, f"header {self.operation}")
        for field, header in zip(self.fields, self.headers, strict=True):
            f = schema.field(field)
            if f is None:
                raise DataException(f"Field {field} not found in schema of record {record}")
            headers.add(header, struct_get(struct, field, self.replace_null_with_default), f.schema)
        if self.operation == COPY:
            return self._with(record, schema, struct, headers)
        new_schema = self._cache.get(schema)
        if new_schema is None:
            builder = copy_schema_basics(schema, SchemaBuilder.struct())
            for f in schema.fields or ():
                if f.name not in self.fields:
                    builder.field(f.name, f.schema)
            new_schema = builder.build()
            self._cache.put(schema, new_schema)
        out = Struct(new_schema)
        for f in new_schema.fields or ():
            out.put(f.name, struct_get(struct, f.name, self.replace_null_with_default))
        return self._with(record, new_schema, out, headers)

    def _with(self, record: Any, schema: Any, value: Any, headers: Headers) -> Any:
        if self.IS_KEY:
            return record.new_record(record.topic, record.kafka_partition, schema, value,
                                     record.value_schema, record.value, record.timestamp, headers)
        return record.new_record(record.topic, record.kafka_partition, record.key_schema, record.key,
                                 schema, value, record.timestamp, headers)


class HeaderFromKey(HeaderFrom):
    """``org.apache.kafka.connect.transforms.HeaderFrom$Key``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.HeaderFrom$Key"
    IS_KEY = True


class HeaderFromValue(HeaderFrom):
    """``org.apache.kafka.connect.transforms.HeaderFrom$Value``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.HeaderFrom$Value"
    IS_KEY = False


HeaderFrom.Key = HeaderFromKey
HeaderFrom.Value = HeaderFromValue


HEADER, VALUE_LITERAL = "header", "value.literal"

INSERT_HEADER_CONFIG_DEF = (
    ConfigDef()
    .define(HEADER, ConfigType.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
            doc="The name of the header.")
    .define(VALUE_LITERAL, ConfigType.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
            doc="The literal value that is to be set as the header value on all records.")
)


class InsertHeader(BaseTransformation):
    """``org.apache.kafka.connect.transforms.InsertHeader``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.InsertHeader"

    @classmethod
    def config_def(cls) -> ConfigDef:
        return INSERT_HEADER_CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.parse(configs)
        self.header: str = c[HEADER]
        self.literal = Values.parse_string(c[VALUE_LITERAL])

    def apply(self, record: Any) -> Any:
        headers = record.headers.duplicate()
        headers.add(self.header, self.literal)
        return record.new_record(record.topic, record.kafka_partition, record.key_schema, record.key,
                                 record.value_schema, record.value, record.timestamp, headers)


DROP_HEADERS_CONFIG_DEF = ConfigDef().define(
    HEADERS, ConfigType.LIST, validator=NON_EMPTY_LIST, importance=Importance.HIGH,
    doc="The name of the headers to be removed.")


class DropHeaders(BaseTransformation):
    """``org.apache.kafka.connect.transforms.DropHeaders``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.DropHeaders"

    @classmethod
    def config_def(cls) -> ConfigDef:
        return DROP_HEADERS_CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.headers = set(self.parse(configs)[HEADERS])

    def apply(self, record: Any) -> Any:
        kept = Headers(h for h in record.headers if h.key not in self.headers)
        return record.new_record(record.topic, record.kafka_partition, record.key_schema, record.key,
                                 record.value_schema, record.value, record.timestamp, kept)
