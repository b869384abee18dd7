"""ByteArray, String, number and SimpleHeader converters: bytes, schemas, nulls and errors."""

from __future__ import annotations

import pytest

from strom.connect.converters import (
    PLUGINS,
    ByteArrayConverter,
    DoubleConverter,
    FloatConverter,
    IntegerConverter,
    LongConverter,
    ShortConverter,
    SimpleHeaderConverter,
    StringConverter,
)
from strom.connect.data import Schema, SchemaBuilder
from strom.connect.exceptions import ConfigException, DataException


def test_plugins_carry_kafka_names() -> None:
    names = {getattr(c, "KAFKA_CLASS_NAME", None) for c in PLUGINS}
    assert {
        "org.apache.kafka.connect.json.JsonConverter",
        "org.apache.kafka.connect.storage.StringConverter",
        "org.apache.kafka.connect.converters.ByteArrayConverter",
        "org.apache.kafka.connect.converters.ShortConverter",
        "org.apache.kafka.connect.converters.IntegerConverter",
        "org.apache.kafka.connect.converters.LongConverter",
        "org.apache.kafka.connect.converters.FloatConverter",
        "org.apache.kafka.connect.converters.DoubleConverter",
        "org.apache.kafka.connect.storage.SimpleHeaderConverter",
        "io.confluent.connect.avro.AvroConverter",
    } == names


def test_byte_array_passthrough() -> None:
    c = ByteArrayConverter()
    c.configure({}, False)
    assert c.from_connect_data("t", Schema.BYTES_SCHEMA, b"\x00\xff") == b"\x00\xff"
    assert c.from_connect_data("t", None, bytearray(b"ab")) == b"ab"
    assert c.from_connect_data("t", None, None) is None
    sv = c.to_connect_data("t", b"xyz")
    assert sv.schema == Schema.OPTIONAL_BYTES_SCHEMA and sv.value == b"xyz"
    assert c.to_connect_data("t", None).value is None


def test_byte_array_rejects_other_schemas_and_values() -> None:
    c = ByteArrayConverter()
    c.configure({}, True)
    with pytest.raises(DataException, match="Invalid schema type for ByteArrayConverter: STRING"):
        c.from_connect_data("t", Schema.STRING_SCHEMA, "x")
    with pytest.raises(DataException, match="not compatible with objects of type str"):
        c.from_connect_data("t", None, "x")


def test_string_converter_default_utf8() -> None:
    c = StringConverter()
    c.configure({}, False)
    assert c.from_connect_data("t", Schema.STRING_SCHEMA, "h\u00e9llo") == "h\u00e9llo".encode()
    sv = c.to_connect_data("t", "h\u00e9llo".encode())
    assert sv.schema == Schema.OPTIONAL_STRING_SCHEMA and sv.value == "h\u00e9llo"
    assert c.from_connect_data("t", None, None) is None
    assert c.to_connect_data("t", None).value is None


def test_string_converter_to_string_of_other_values() -> None:
    c = StringConverter()
    c.configure({}, False)
    assert c.from_connect_data("t", None, 42) == b"42"
    assert c.from_connect_data("t", None, True) == b"true"
    assert c.from_connect_data("t", None, 1e20) == b"1.0E20"


def test_string_converter_encodings() -> None:
    latin = StringConverter()
    latin.configure({"converter.encoding": "ISO-8859-1"}, False)
    assert latin.from_connect_data("t", None, "\u00e9") == b"\xe9"
    assert latin.to_connect_data("t", b"\xe9").value == "\u00e9"
    utf16 = StringConverter()
    utf16.configure({"converter.encoding": "UTF-16"}, True)
    assert utf16.from_connect_data("t", None, "A") == b"\xfe\xff\x00A"  # Java: big endian with BOM
    assert utf16.to_connect_data("t", b"\xfe\xff\x00A").value == "A"
    assert utf16.to_connect_data("t", b"\x00A").value == "A"


def test_string_converter_invalid_bytes_replaced_like_java() -> None:
    c = StringConverter()
    c.configure({}, False)
    assert c.to_connect_data("t", b"a\xffb").value == "a\ufffdb"


def test_string_converter_unknown_encoding() -> None:
    with pytest.raises(ConfigException, match=r"converter\.encoding"):
        StringConverter().configure({"converter.encoding": "no-such-charset"}, False)


@pytest.mark.parametrize(("cls", "value", "data", "schema"), [
    (ShortConverter, -2, b"\xff\xfe", Schema.OPTIONAL_INT16_SCHEMA),
    (IntegerConverter, 0x01020304, b"\x01\x02\x03\x04", Schema.OPTIONAL_INT32_SCHEMA),
    (LongConverter, -1, b"\xff" * 8, Schema.OPTIONAL_INT64_SCHEMA),
    (FloatConverter, 1.5, b"\x3f\xc0\x00\x00", Schema.OPTIONAL_FLOAT32_SCHEMA),
    (DoubleConverter, -2.0, b"\xc0\x00\x00\x00\x00\x00\x00\x00", Schema.OPTIONAL_FLOAT64_SCHEMA),
])
def test_number_converters_big_endian(cls: type, value: float, data: bytes, schema: Schema) -> None:
    c = cls()
    c.configure({}, False)
    assert c.from_connect_data("t", schema, value) == data
    sv = c.to_connect_data("t", data)
    assert sv.schema == schema and sv.value == value
    assert c.from_connect_data("t", schema, None) is None
    assert c.to_connect_data("t", None).value is None
    # Header converter face of the same class.
    assert c.from_connect_header("t", "h", schema, value) == data


def test_number_converter_errors() -> None:
    c = IntegerConverter()
    c.configure({}, False)
    with pytest.raises(DataException, match="Failed to serialize to INT32"):
        c.from_connect_data("t", None, "12")
    with pytest.raises(DataException, match="Failed to serialize to INT32"):
        c.from_connect_data("t", None, 1 << 40)
    with pytest.raises(DataException, match="Failed to deserialize INT32"):
        c.to_connect_data("t", b"\x00\x01\x02")  # truncated


def test_bad_converter_type() -> None:
    with pytest.raises(ConfigException, match=r"converter\.type"):
        ByteArrayConverter().configure({"converter.type": "sideways"})


def test_simple_header_converter_round_trips_with_inferred_types() -> None:
    c = SimpleHeaderConverter()
    c.configure({})
    assert c.from_connect_header("t", "h", Schema.INT32_SCHEMA, 42) == b"42"
    sv = c.to_connect_header("t", "h", b"42")
    assert sv.value == 42 and sv.schema is not None and sv.schema.type.name in ("INT8", "INT16", "INT32", "INT64")
    assert c.to_connect_header("t", "h", b"true").value is True
    assert c.to_connect_header("t", "h", b"hello world").value == "hello world"
    arr_schema = SchemaBuilder.array(Schema.INT32_SCHEMA).build()
    data = c.from_connect_header("t", "h", arr_schema, [1, 2, 3])
    assert c.to_connect_header("t", "h", data).value == [1, 2, 3]
    empty = c.to_connect_header("t", "h", b"")
    assert empty.schema == Schema.STRING_SCHEMA and empty.value == ""
    assert c.from_connect_header("t", "h", None, None) is None
    nul = c.to_connect_header("t", "h", None)
    assert nul.schema is None and nul.value is None
