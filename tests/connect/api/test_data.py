"""Connect data model: schemas, builder, structs, logical types and Values parsing."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strom.connect.data import (
    ConnectSchema,
    Date,
    Decimal,
    Schema,
    SchemaAndValue,
    SchemaBuilder,
    SchemaBuilderException,
    Struct,
    Time,
    Timestamp,
    Type,
    Values,
)
from strom.connect.exceptions import DataException


def _person() -> Schema:
    return (SchemaBuilder.struct().name("com.example.Person").version(2).doc("a person")
            .field("name", Schema.STRING_SCHEMA)
            .field("age", SchemaBuilder.int32().optional().default_value(18))
            .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).optional())
            .build())


def test_builder_builds_struct_with_fields_in_order() -> None:
    s = _person()
    assert s.type is Type.STRUCT and s.name == "com.example.Person" and s.version == 2
    assert [f.name for f in s.fields or ()] == ["name", "age", "tags"]
    assert [f.index for f in s.fields or ()] == [0, 1, 2]
    age = s.field("age")
    assert age is not None and age.schema.optional and age.schema.default == 18
    assert s.field("missing") is None
    assert s == _person() and hash(s) == hash(_person())  # usable as a cache key
    with pytest.raises(DataException):
        Schema.INT32_SCHEMA.field("x")


def test_builder_rejects_misuse() -> None:
    with pytest.raises(SchemaBuilderException, match="name has already been set"):
        SchemaBuilder.string().name("a").name("b")
    with pytest.raises(SchemaBuilderException, match="duplication"):
        SchemaBuilder.struct().field("a", Schema.INT8_SCHEMA).field("a", Schema.INT8_SCHEMA)
    with pytest.raises(SchemaBuilderException):
        SchemaBuilder.int32().field("a", Schema.INT8_SCHEMA)
    with pytest.raises(DataException):  # a default must match the type
        SchemaBuilder.int32().default_value("x")


def test_constants() -> None:
    assert Schema.INT32_SCHEMA.type is Type.INT32 and not Schema.INT32_SCHEMA.optional
    assert Schema.OPTIONAL_STRING_SCHEMA.type is Type.STRING and Schema.OPTIONAL_STRING_SCHEMA.optional
    assert SchemaAndValue(None, None) == SchemaAndValue.NULL


def test_struct_put_get_validate() -> None:
    s = _person()
    st = Struct(s).put("name", "ann")
    assert st.get("age") == 18  # the field's default
    assert st.get_without_default("age") is None
    st.validate()
    assert st.put("age", 30).get_int32("age") == 30
    with pytest.raises(DataException, match="age"):
        st.put("age", "thirty")
    with pytest.raises(DataException):
        st.put("age", 1 << 40)  # out of INT32 range
    with pytest.raises(DataException, match="not a valid field name"):
        st.put("nope", 1)
    with pytest.raises(DataException, match="tags"):
        st.put("tags", [1, 2])
    empty = Struct(s)
    with pytest.raises(DataException, match="required field"):
        empty.validate()  # "name" is required and unset
    assert Struct(s).put("name", "ann") == Struct(s).put("name", "ann")
    assert Struct(s).put("name", "ann") != Struct(s).put("name", "bob")


def test_validate_value_rules() -> None:
    ConnectSchema.validate_value(Schema.INT8_SCHEMA, 127)
    with pytest.raises(DataException):
        ConnectSchema.validate_value(Schema.INT8_SCHEMA, 128)
    with pytest.raises(DataException):
        ConnectSchema.validate_value(Schema.BOOLEAN_SCHEMA, 1)
    with pytest.raises(DataException):
        ConnectSchema.validate_value(Schema.INT32_SCHEMA, True)  # bool is not an int here
    with pytest.raises(DataException):
        Schema.STRING_SCHEMA.validate_value(None)
    Schema.OPTIONAL_STRING_SCHEMA.validate_value(None)
    m = SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT64_SCHEMA).build()
    m.validate_value({"a": 1})
    with pytest.raises(DataException):
        m.validate_value({"a": "x"})
    other = SchemaBuilder.struct().field("x", Schema.INT8_SCHEMA).build()
    with pytest.raises(DataException, match="do not match"):
        _person().validate_value(Struct(other).put("x", 1))
    with pytest.raises(DataException):
        Decimal.schema(2).validate_value(b"\x01")  # logical types take their Python class


def test_decimal_encoding_matches_java_biginteger() -> None:
    s = Decimal.schema(2)
    assert s.name == "org.apache.kafka.connect.data.Decimal" and s.parameters == {"scale": "2"}
    cases = {"1.56": b"\x00\x9c", "-1.56": b"\xff\x64", "0.00": b"\x00", "-0.01": b"\xff",
             "1.27": b"\x7f", "1.28": b"\x00\x80", "-1.28": b"\x80", "-1.29": b"\xff\x7f"}
    for text, encoded in cases.items():
        assert Decimal.from_logical(s, decimal.Decimal(text)) == encoded, text
        assert Decimal.to_logical(s, encoded) == decimal.Decimal(text)
    assert Decimal.from_logical(s, decimal.Decimal("1.5")) == b"\x00\x96"  # widened to scale 2
    with pytest.raises(DataException, match="scale"):
        Decimal.from_logical(s, decimal.Decimal("1.555"))
    big = decimal.Decimal("123456789012345678901234567890.12")
    assert Decimal.to_logical(s, Decimal.from_logical(s, big)) == big
    with pytest.raises(DataException):
        Decimal.from_logical(Schema.BYTES_SCHEMA, decimal.Decimal(1))


def test_date_time_timestamp() -> None:
    assert Date.from_logical(Date.SCHEMA, dt.date(1970, 1, 11)) == 10
    assert Date.to_logical(Date.SCHEMA, -1) == dt.date(1969, 12, 31)
    with pytest.raises(DataException, match="time fields"):
        Date.from_logical(Date.SCHEMA, dt.datetime(2020, 1, 1, 12))
    assert Time.from_logical(Time.SCHEMA, dt.time(1, 2, 3, 4000)) == 3_723_004
    assert Time.to_logical(Time.SCHEMA, 3_723_004) == dt.time(1, 2, 3, 4000)
    with pytest.raises(DataException):
        Time.to_logical(Time.SCHEMA, 86_400_000)
    ts = dt.datetime(2021, 3, 4, 5, 6, 7, 890000, tzinfo=dt.UTC)
    ms = Timestamp.from_logical(Timestamp.SCHEMA, ts)
    assert ms == 1614834367890
    assert Timestamp.to_logical(Timestamp.SCHEMA, ms) == ts
    assert Timestamp.from_logical(Timestamp.SCHEMA, ts.replace(tzinfo=None)) == ms  # naive = UTC
    assert Date.SCHEMA.type is Type.INT32 and Timestamp.SCHEMA.type is Type.INT64


@pytest.mark.parametrize(("text", "schema", "value"), [
    ("true", Schema.BOOLEAN_SCHEMA, True),
    ("FALSE", Schema.BOOLEAN_SCHEMA, False),
    ("12", Schema.INT8_SCHEMA, 12),
    ("-129", Schema.INT16_SCHEMA, -129),
    ("40000", Schema.INT32_SCHEMA, 40000),
    ("3000000000", Schema.INT64_SCHEMA, 3000000000),
    ("1.5", Schema.FLOAT32_SCHEMA, 1.5),
    ("1.0", Schema.INT8_SCHEMA, 1),
    ("1e2", Schema.INT8_SCHEMA, 100),
    ("+7", Schema.INT8_SCHEMA, 7),
    ("-2.25e-3", Schema.FLOAT32_SCHEMA, -0.00225),
    ("1.5e300", Schema.FLOAT64_SCHEMA, 1.5e300),
    (".5", Schema.STRING_SCHEMA, ".5"),
    ("NaN", Schema.STRING_SCHEMA, "NaN"),
    ("hello world", Schema.STRING_SCHEMA, "hello world"),
    ("", Schema.STRING_SCHEMA, ""),
    ("2021-03-04", Date.SCHEMA, dt.date(2021, 3, 4)),
    ("05:06:07.890Z", Time.SCHEMA, dt.time(5, 6, 7, 890000)),
    ("2021-03-04T05:06:07.890Z", Timestamp.SCHEMA, dt.datetime(2021, 3, 4, 5, 6, 7, 890000, tzinfo=dt.UTC)),
])
def test_parse_string_scalars(text: str, schema: Schema, value: object) -> None:
    assert Values.parse_string(text) == SchemaAndValue(schema, value)


def test_parse_string_containers_and_fallbacks() -> None:
    arr = Values.parse_string("[1, 2, 3]")
    assert arr.value == [1, 2, 3] and arr.schema is not None and arr.schema.type is Type.ARRAY
    assert arr.schema.value_schema == Schema.INT8_SCHEMA
    m = Values.parse_string('{"a": "x, y", "b": "z"}')
    assert m.value == {"a": "x, y", "b": "z"}
    assert m.schema is not None and m.schema.key_schema == Schema.STRING_SCHEMA
    mixed = Values.parse_string('[1, "a"]')
    assert mixed.value == [1, "a"] and mixed.schema is None  # no common element schema
    nested = Values.parse_string("[[1], [2, 3]]")
    assert nested.value == [[1], [2, 3]]
    assert Values.parse_string("null") == SchemaAndValue.NULL
    assert Values.parse_string(None) == SchemaAndValue.NULL
    assert Values.parse_string("[1, 2") == SchemaAndValue(Schema.STRING_SCHEMA, "[1, 2")  # unbalanced
    assert Values.parse_string("2021-13-45") == SchemaAndValue(Schema.STRING_SCHEMA, "2021-13-45")
    huge = Values.parse_string("99999999999999999999")
    assert huge.schema is not None and huge.schema.name == Decimal.LOGICAL_NAME
    assert huge.value == decimal.Decimal("99999999999999999999")
    enormous = Values.parse_string("1e400000000")  # must not build a 400-million-digit int
    assert enormous.schema is not None and enormous.schema.name == Decimal.LOGICAL_NAME
    widened = Values.parse_string("[1, 300, 70000]")
    assert widened.schema == SchemaBuilder.array(Schema.INT32_SCHEMA).build()
    floats = Values.parse_string("[1, 2.5]")
    assert floats.schema == SchemaBuilder.array(Schema.FLOAT32_SCHEMA).build()
    assert floats.value == [1.0, 2.5] and isinstance(floats.value[0], float)
    with_null = Values.parse_string("[1, null]")
    assert with_null.schema == SchemaBuilder.array(Schema.OPTIONAL_INT8_SCHEMA).build()
    assert with_null.value == [1, None]


def test_conversions() -> None:
    assert Values.convert_to_integer(None, "42") == 42
    assert Values.convert_to_byte(None, 300) == 44  # narrowed like a Java cast
    assert Values.convert_to_long(None, True) == 1
    assert Values.convert_to_boolean(None, "true") is True
    assert Values.convert_to_double(None, "2.5") == 2.5
    assert Values.convert_to_string(None, [1, "a", None]) == '[1,"a",null]'
    assert Values.convert_to_string(None, {"k": True}) == '{"k":true}'
    assert Values.convert_to_string(None, b"\x00\x01") == "AAE="
    assert Values.convert_to_string(None, dt.date(2020, 1, 2)) == "2020-01-02"
    assert Values.convert_to_decimal(None, "1.005", 2) == decimal.Decimal("1.01")
    assert Values.convert_to_timestamp(None, 0) == dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    assert Values.convert_to_date(Date.SCHEMA, 1) == dt.date(1970, 1, 2)
    assert Values.convert_to(Schema.INT16_SCHEMA, "7") == 7
    with pytest.raises(DataException):
        Values.convert_to_integer(None, "seven")
    with pytest.raises(DataException):
        Values.convert_to_boolean(None, "maybe")
    assert Values.infer_schema({"a": 1}) == SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT64_SCHEMA).build()
    assert Values.infer_schema([1, "x"]) is None


@given(st.decimals(allow_nan=False, allow_infinity=False, places=3,
                   min_value=decimal.Decimal("-1e30"), max_value=decimal.Decimal("1e30")))
def test_decimal_round_trip_property(value: decimal.Decimal) -> None:
    s = Decimal.schema(3)
    encoded = Decimal.from_logical(s, value)
    back = Decimal.to_logical(s, encoded)
    assert back == value and back.as_tuple().exponent == -3
    # Minimal two's complement, as Java's BigInteger.toByteArray: no redundant sign byte.
    if len(encoded) > 1:
        assert not (encoded[0] == 0x00 and encoded[1] < 0x80)
        assert not (encoded[0] == 0xFF and encoded[1] >= 0x80)


@given(st.one_of(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1), st.booleans(),
                 st.lists(st.integers(min_value=-100, max_value=100), min_size=1, max_size=5)))
def test_parse_string_inverts_convert_to_string(value: object) -> None:
    parsed = Values.parse_string(Values.convert_to_string(None, value))
    assert parsed.value == value
    if parsed.schema is not None:
        parsed.schema.validate_value(parsed.value)
