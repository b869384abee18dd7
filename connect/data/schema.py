"""Connect schemas: :class:`Type`, :class:`Schema` (Kafka's ``ConnectSchema``), :class:`Field`
and the fluent :class:`SchemaBuilder`.

A schema is a frozen value; equal schemas compare and hash equal, so converters can cache by
schema. Python values per type: INT8..INT64 ``int``, FLOAT32/FLOAT64 ``float``, BOOLEAN ``bool``,
STRING ``str``, BYTES ``bytes``, ARRAY ``list``, MAP ``dict``, STRUCT :class:`~strom.connect.data.struct.Struct`;
the logical types (``strom.connect.data.logical``) use ``decimal.Decimal``, ``datetime.date``,
``datetime.time`` and ``datetime.datetime``.
"""

from __future__ import annotations

import datetime
import decimal
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from strom.connect.exceptions import DataException

if TYPE_CHECKING:
    from strom.connect.data.struct import Struct


class Type(enum.Enum):
    """Kafka Connect's ``Schema.Type``; values are Kafka's lower-case names (as in JSON envelopes)."""

    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"

    @property
    def is_primitive(self) -> bool:
        return self not in (Type.ARRAY, Type.MAP, Type.STRUCT)

    @property
    def type_name(self) -> str:
        return self.value


# Inclusive value ranges of the integer types (Java's byte, short, int, long).
INT_RANGES: dict[Type, tuple[int, int]] = {
    Type.INT8: (-(1 << 7), (1 << 7) - 1),
    Type.INT16: (-(1 << 15), (1 << 15) - 1),
    Type.INT32: (-(1 << 31), (1 << 31) - 1),
    Type.INT64: (-(1 << 63), (1 << 63) - 1),
}

# Logical type names, here so that validation needs no import of the logical module.
DECIMAL_LOGICAL_NAME = "org.apache.kafka.connect.data.Decimal"
DATE_LOGICAL_NAME = "org.apache.kafka.connect.data.Date"
TIME_LOGICAL_NAME = "org.apache.kafka.connect.data.Time"
TIMESTAMP_LOGICAL_NAME = "org.apache.kafka.connect.data.Timestamp"


@dataclass(frozen=True, slots=True)
class Field:
    """A named field of a STRUCT schema at position ``index``."""

    name: str
    index: int
    schema: Schema


@dataclass(frozen=True, slots=True, eq=True)
class Schema:
    """An immutable Connect schema (Kafka's ``Schema``/``ConnectSchema``).

    ``fields`` is set for STRUCT, ``key_schema`` for MAP, ``value_schema`` for MAP and ARRAY.
    Build one directly or with :class:`SchemaBuilder`; the ``*_SCHEMA`` constants are the
    primitive schemas.
    """

    type: Type
    optional: bool = False
    default: Any = None
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    parameters: Mapping[str, str] | None = None
    fields: tuple[Field, ...] | None = None
    key_schema: Schema | None = None
    value_schema: Schema | None = None
    _index: dict[str, Field] = field(init=False, repr=False, compare=False, hash=False)
    _hash: int = field(init=False, repr=False, compare=False, hash=False)

    INT8_SCHEMA: ClassVar[Schema]
    INT16_SCHEMA: ClassVar[Schema]
    INT32_SCHEMA: ClassVar[Schema]
    INT64_SCHEMA: ClassVar[Schema]
    FLOAT32_SCHEMA: ClassVar[Schema]
    FLOAT64_SCHEMA: ClassVar[Schema]
    BOOLEAN_SCHEMA: ClassVar[Schema]
    STRING_SCHEMA: ClassVar[Schema]
    BYTES_SCHEMA: ClassVar[Schema]
    OPTIONAL_INT8_SCHEMA: ClassVar[Schema]
    OPTIONAL_INT16_SCHEMA: ClassVar[Schema]
    OPTIONAL_INT32_SCHEMA: ClassVar[Schema]
    OPTIONAL_INT64_SCHEMA: ClassVar[Schema]
    OPTIONAL_FLOAT32_SCHEMA: ClassVar[Schema]
    OPTIONAL_FLOAT64_SCHEMA: ClassVar[Schema]
    OPTIONAL_BOOLEAN_SCHEMA: ClassVar[Schema]
    OPTIONAL_STRING_SCHEMA: ClassVar[Schema]
    OPTIONAL_BYTES_SCHEMA: ClassVar[Schema]

    def __post_init__(self) -> None:
        if not isinstance(self.type, Type):
            object.__setattr__(self, "type", Type(str(self.type).lower()))
        if self.parameters is not None:
            object.__setattr__(self, "parameters", dict(self.parameters))
        if self.fields is not None:
            if self.type is not Type.STRUCT:
                raise DataException(f"Cannot set fields on a non-struct schema of type {self.type.name}")
            object.__setattr__(self, "fields", tuple(self.fields))
        elif self.type is Type.STRUCT:
            object.__setattr__(self, "fields", ())
        object.__setattr__(self, "_index", {f.name: f for f in self.fields or ()})
        # Computed once: converters and transformations cache by schema on the record path.
        # default and parameters may be unhashable (dict/list defaults) and are left out; equal
        # schemas still hash equal because every hashed part takes part in __eq__.
        object.__setattr__(self, "_hash", hash((self.type, self.optional, self.name, self.version,
                                                self.fields, self.key_schema, self.value_schema)))

    def __hash__(self) -> int:
        return self._hash

    def field(self, name: str) -> Field | None:
        """The field called ``name`` (``None`` if there is none); STRUCT schemas only."""
        if self.type is not Type.STRUCT:
            raise DataException("Cannot look up fields on non-struct type")
        return self._index.get(name)

    @property
    def is_optional(self) -> bool:
        return self.optional

    def validate_value(self, value: Any, field_name: str | None = None) -> None:
        """Raise :class:`DataException` unless ``value`` is valid for this schema.

        ``ConnectSchema.validate_value(schema, value)`` works too (``ConnectSchema`` is this class).
        """
        _validate(self, value, field_name)

    def __repr__(self) -> str:
        parts = [self.type.name]
        if self.name:
            parts.append(f"name={self.name}")
        if self.optional:
            parts.append("optional")
        if self.fields:
            parts.append("fields=[" + ", ".join(f"{f.name}:{f.schema!r}" for f in self.fields) + "]")
        if self.key_schema is not None:
            parts.append(f"key={self.key_schema!r}")
        if self.value_schema is not None:
            parts.append(f"value={self.value_schema!r}")
        return "Schema{" + ", ".join(parts) + "}"


ConnectSchema = Schema
"""Kafka's name for the schema implementation; ``ConnectSchema.validate_value(schema, value)``."""

for _t in (Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.FLOAT32, Type.FLOAT64,
           Type.BOOLEAN, Type.STRING, Type.BYTES):
    setattr(Schema, f"{_t.name}_SCHEMA", Schema(_t))
    setattr(Schema, f"OPTIONAL_{_t.name}_SCHEMA", Schema(_t, optional=True))


def _where(field_name: str | None) -> str:
    return f" for field: \"{field_name}\"" if field_name else ""


def _validate(schema: Schema | None, value: Any, field_name: str | None = None) -> None:
    if value is None:
        if schema is None or schema.optional:
            return
        raise DataException(f"Invalid value: null used for required field{_where(field_name)}, "
                            f"schema type: {schema.type.name}")
    if schema is None:
        raise DataException(f"Invalid value{_where(field_name)}: schema is null")
    t = schema.type
    name = schema.name
    # Logical types decide the Python class by name, like ConnectSchema's LOGICAL_TYPE_CLASSES.
    if name == DECIMAL_LOGICAL_NAME:
        if isinstance(value, decimal.Decimal):
            return
        raise _mismatch(schema, value, field_name)
    if name == DATE_LOGICAL_NAME:
        if isinstance(value, datetime.date):
            return
        raise _mismatch(schema, value, field_name)
    if name == TIME_LOGICAL_NAME:
        if isinstance(value, datetime.time):
            return
        raise _mismatch(schema, value, field_name)
    if name == TIMESTAMP_LOGICAL_NAME:
        if isinstance(value, datetime.datetime):
            return
        raise _mismatch(schema, value, field_name)
    if t in INT_RANGES:
        if not isinstance(value, int) or isinstance(value, bool):
            raise _mismatch(schema, value, field_name)
        lo, hi = INT_RANGES[t]
        if not lo <= value <= hi:
            raise DataException(f"Invalid value {value}{_where(field_name)}: out of range for {t.name}")
    elif t in (Type.FLOAT32, Type.FLOAT64):
        if not isinstance(value, float | int) or isinstance(value, bool):
            raise _mismatch(schema, value, field_name)
    elif t is Type.BOOLEAN:
        if not isinstance(value, bool):
            raise _mismatch(schema, value, field_name)
    elif t is Type.STRING:
        if not isinstance(value, str):
            raise _mismatch(schema, value, field_name)
    elif t is Type.BYTES:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise _mismatch(schema, value, field_name)
    elif t is Type.ARRAY:
        if not isinstance(value, list | tuple):
            raise _mismatch(schema, value, field_name)
        for item in value:
            _validate(schema.value_schema, item, field_name)
    elif t is Type.MAP:
        if not isinstance(value, Mapping):
            raise _mismatch(schema, value, field_name)
        for k, v in value.items():
            _validate(schema.key_schema, k, field_name)
            _validate(schema.value_schema, v, field_name)
    elif t is Type.STRUCT:
        from strom.connect.data.struct import Struct

        if not isinstance(value, Struct):
            raise _mismatch(schema, value, field_name)
        if value.schema != schema:
            raise DataException(f"Struct schemas do not match{_where(field_name)}.")
        value.validate()


def _mismatch(schema: Schema, value: Any, field_name: str | None) -> DataException:
    kind = schema.type.name + (f" ({schema.name})" if schema.name else "")
    return DataException(f"Invalid Python object for schema{_where(field_name)} with type {kind}: "
                         f"{type(value).__name__}")


def validate_value(schema: Schema | None, value: Any, field_name: str | None = None) -> None:
    """Module-level form of :meth:`Schema.validate_value`; ``schema=None`` (schemaless data)
    accepts any value."""
    if schema is None:
        return
    _validate(schema, value, field_name)


class SchemaBuilderException(DataException):
    """A SchemaBuilder was used wrongly (a property set twice, a field on a non-struct...)."""


_UNSET: Any = object()


class SchemaBuilder:
    """Kafka's fluent schema builder: ``SchemaBuilder.struct().name("n").field("a",
    Schema.INT32_SCHEMA).build()``.

    Python spellings of Kafka's static factories: ``int8() int16() int32() int64() float32()
    float64() boolean() string() bytes_() struct() array(s) map(k, v)`` and ``of_type(t)``.
    Wherever a schema is taken, a builder is accepted too (it is built).
    """

    def __init__(self, type_: Type) -> None:
        self._type = type_
        self._optional: bool | None = None
        self._default: Any = _UNSET
        self._name: str | None = None
        self._version: int | None = None
        self._doc: str | None = None
        self._parameters: dict[str, str] | None = None
        self._fields: dict[str, Field] | None = {} if type_ is Type.STRUCT else None
        self._key_schema: Schema | None = None
        self._value_schema: Schema | None = None

    # -- factories -----------------------------------------------------------------------
    @classmethod
    def of_type(cls, type_: Type) -> SchemaBuilder:
        return cls(type_)

    @classmethod
    def int8(cls) -> SchemaBuilder:
        return cls(Type.INT8)

    @classmethod
    def int16(cls) -> SchemaBuilder:
        return cls(Type.INT16)

    @classmethod
    def int32(cls) -> SchemaBuilder:
        return cls(Type.INT32)

    @classmethod
    def int64(cls) -> SchemaBuilder:
        return cls(Type.INT64)

    @classmethod
    def float32(cls) -> SchemaBuilder:
        return cls(Type.FLOAT32)

    @classmethod
    def float64(cls) -> SchemaBuilder:
        return cls(Type.FLOAT64)

    @classmethod
    def boolean(cls) -> SchemaBuilder:
        return cls(Type.BOOLEAN)

    @classmethod
    def string(cls) -> SchemaBuilder:
        return cls(Type.STRING)

    @classmethod
    def bytes_(cls) -> SchemaBuilder:
        return cls(Type.BYTES)

    @classmethod
    def struct(cls) -> SchemaBuilder:
        return cls(Type.STRUCT)

    @classmethod
    def array(cls, value_schema: Schema | SchemaBuilder) -> SchemaBuilder:
        b = cls(Type.ARRAY)
        b._value_schema = as_schema(value_schema)
        return b

    @classmethod
    def map(cls, key_schema: Schema | SchemaBuilder, value_schema: Schema | SchemaBuilder) -> SchemaBuilder:
        b = cls(Type.MAP)
        b._key_schema = as_schema(key_schema)
        b._value_schema = as_schema(value_schema)
        return b

    # -- properties ----------------------------------------------------------------------
    @property
    def type(self) -> Type:
        return self._type

    def _check_unset(self, what: str, current: Any, unset: Any = None) -> None:
        if current is not unset:
            raise SchemaBuilderException(f"Invalid SchemaBuilder call: {what} has already been set.")

    def optional(self) -> SchemaBuilder:
        self._check_unset("optional", self._optional)
        self._optional = True
        return self

    def required(self) -> SchemaBuilder:
        self._check_unset("optional", self._optional)
        self._optional = False
        return self

    def default_value(self, value: Any) -> SchemaBuilder:
        self._check_unset("default", self._default, _UNSET)
        # Validate against the schema as built so far (Kafka validates against the builder).
        _validate(Schema(self._type, optional=True, name=self._name,
                         fields=tuple(self._fields.values()) if self._fields is not None else None,
                         key_schema=self._key_schema, value_schema=self._value_schema), value)
        self._default = value
        return self

    def name(self, name: str) -> SchemaBuilder:
        self._check_unset("name", self._name)
        self._name = name
        return self

    def version(self, version: int) -> SchemaBuilder:
        self._check_unset("version", self._version)
        self._version = version
        return self

    def doc(self, doc: str) -> SchemaBuilder:
        self._check_unset("doc", self._doc)
        self._doc = doc
        return self

    def parameter(self, key: str, value: str) -> SchemaBuilder:
        if self._parameters is None:
            self._parameters = {}
        self._parameters[key] = value
        return self

    def parameters(self, params: Mapping[str, str]) -> SchemaBuilder:
        for k, v in params.items():
            self.parameter(k, v)
        return self

    def field(self, name: str, schema: Schema | SchemaBuilder) -> SchemaBuilder:
        if self._fields is None:
            raise SchemaBuilderException("Cannot create fields on type " + self._type.name)
        if not name:
            raise SchemaBuilderException("fieldName cannot be null or empty.")
        if name in self._fields:
            raise SchemaBuilderException(f"Cannot create field because of field name duplication {name}")
        built = as_schema(schema)
        if built is None:
            raise SchemaBuilderException(f"Field schema for {name} cannot be null.")
        self._fields[name] = Field(name, len(self._fields), built)
        return self

    def fields(self) -> list[Field]:
        if self._fields is None:
            raise DataException("Cannot list fields on non-struct type")
        return list(self._fields.values())

    def build(self) -> Schema:
        return Schema(
            self._type,
            optional=bool(self._optional),
            default=None if self._default is _UNSET else self._default,
            name=self._name,
            version=self._version,
            doc=self._doc,
            parameters=dict(self._parameters) if self._parameters is not None else None,
            fields=tuple(self._fields.values()) if self._fields is not None else None,
            key_schema=self._key_schema,
            value_schema=self._value_schema,
        )

    def schema(self) -> Schema:
        return self.build()


def as_schema(schema: Schema | SchemaBuilder | None) -> Schema | None:
    """A schema from a schema or a builder (``None`` stays ``None``)."""
    if isinstance(schema, SchemaBuilder):
        return schema.build()
    return schema


def required_schema(schema: Schema | None, what: str) -> Schema:
    """``schema``, which the caller's type requires (an array's elements, a map's keys or values,
    a field's schema); a DataException naming ``what`` if it is missing."""
    if schema is None:
        raise DataException(f"{what} schema is missing")
    return schema


def struct_validated(value: Any) -> Struct:
    """``value`` as a Struct, or a DataException (used by transformations)."""
    from strom.connect.data.struct import Struct

    if not isinstance(value, Struct):
        raise DataException(f"Expected Struct, found {type(value).__name__}")
    return value


@dataclass(frozen=True, slots=True)
class SchemaAndValue:
    """A value with its schema (``schema=None`` for schemaless data); what converters return."""

    schema: Schema | None
    value: Any

    NULL: ClassVar[SchemaAndValue]


SchemaAndValue.NULL = SchemaAndValue(None, None)
