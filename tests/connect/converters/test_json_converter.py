"""JsonConverter: Kafka Connect's exact bytes, round trips, schemaless mode, logical types, errors."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pytest

from strom.connect.converters import JsonConverter
from strom.connect.data import Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp
from strom.connect.exceptions import ConfigException, DataException

UTC = dt.UTC


def conv(**cfg: str) -> JsonConverter:
    c = JsonConverter()
    c.configure(cfg, False)
    return c


def test_kafka_class_name() -> None:
    assert JsonConverter.KAFKA_CLASS_NAME == "org.apache.kafka.connect.json.JsonConverter"


@pytest.mark.parametrize(("schema", "value", "expected"), [
    (Schema.BOOLEAN_SCHEMA, True, b'{"schema":{"type":"boolean","optional":false},"payload":true}'),
    (Schema.INT8_SCHEMA, 12, b'{"schema":{"type":"int8","optional":false},"payload":12}'),
    (Schema.INT16_SCHEMA, 12, b'{"schema":{"type":"int16","optional":false},"payload":12}'),
    (Schema.INT32_SCHEMA, 12, b'{"schema":{"type":"int32","optional":false},"payload":12}'),
    (Schema.INT64_SCHEMA, 4398046511104, b'{"schema":{"type":"int64","optional":false},"payload":4398046511104}'),
    (Schema.FLOAT32_SCHEMA, 12.34, b'{"schema":{"type":"float","optional":false},"payload":12.34}'),
    (Schema.FLOAT64_SCHEMA, 12.34, b'{"schema":{"type":"double","optional":false},"payload":12.34}'),
    (Schema.FLOAT64_SCHEMA, 1e20, b'{"schema":{"type":"double","optional":false},"payload":1.0E20}'),
    (Schema.STRING_SCHEMA, "foo-bar-baz", b'{"schema":{"type":"string","optional":false},"payload":"foo-bar-baz"}'),
    (Schema.OPTIONAL_STRING_SCHEMA, None, b'{"schema":{"type":"string","optional":true},"payload":null}'),
    (Schema.BYTES_SCHEMA, b"test-string", b'{"schema":{"type":"bytes","optional":false},"payload":"dGVzdC1zdHJpbmc="}'),
])
def test_primitive_envelopes(schema: Schema, value: object, expected: bytes) -> None:
    c = conv()
    assert c.from_connect_data("t", schema, value) == expected
    back = c.to_connect_data("t", expected)
    assert back.schema == schema
    if isinstance(value, float) and schema is Schema.FLOAT32_SCHEMA:
        assert back.value == pytest.approx(value, rel=1e-6)
    else:
        assert back.value == value


def test_struct_envelope_is_kafkas_layout() -> None:
    # The exact bytes Kafka's JsonConverter writes for this struct (field key last, compact).
    schema = (SchemaBuilder.struct().name("com.example.Person").version(2).doc("a person")
              .field("name", Schema.STRING_SCHEMA)
              .field("age", SchemaBuilder.int32().optional().default_value(18).build())
              .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).build())
              .field("attrs", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT64_SCHEMA).optional().build())
              .build())
    value = Struct(schema).put("name", "Ada").put("age", 36).put("tags", ["x", "y"]).put("attrs", {"k": 1})
    out = conv().from_connect_data("people", schema, value)
    assert out == (
        b'{"schema":{"type":"struct","fields":['
        b'{"type":"string","optional":false,"field":"name"},'
        b'{"type":"int32","optional":true,"default":18,"field":"age"},'
        b'{"type":"array","items":{"type":"string","optional":false},"optional":false,"field":"tags"},'
        b'{"type":"map","keys":{"type":"string","optional":false},"values":{"type":"int64","optional":false},'
        b'"optional":true,"field":"attrs"}],'
        b'"optional":false,"name":"com.example.Person","version":2,"doc":"a person"},'
        b'"payload":{"name":"Ada","age":36,"tags":["x","y"],"attrs":{"k":1}}}'
    )
    back = conv().to_connect_data("people", out)
    assert back.schema == schema
    assert back.value == value


def test_map_with_non_string_keys_is_array_of_pairs() -> None:
    schema = SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.STRING_SCHEMA).build()
    out = conv().from_connect_data("t", schema, {1: "a", 2: "b"})
    assert out is not None
    assert json.loads(out)["payload"] == [[1, "a"], [2, "b"]]
    assert conv().to_connect_data("t", out).value == {1: "a", 2: "b"}


def test_logical_types_as_kafka_encodes_them() -> None:
    schema = (SchemaBuilder.struct()
              .field("d", Date.SCHEMA).field("t", Time.SCHEMA).field("ts", Timestamp.SCHEMA)
              .field("dec", Decimal.schema(2)).build())
    value = (Struct(schema).put("d", dt.date(2020, 1, 2)).put("t", dt.time(1, 2, 3, 4000))
             .put("ts", dt.datetime(2020, 1, 2, 3, 4, 5, 6000, tzinfo=UTC)).put("dec", decimal.Decimal("-1.56")))
    out = conv().from_connect_data("t", schema, value)
    assert out is not None
    payload = json.loads(out)["payload"]
    assert payload == {"d": 18263, "t": 3723004, "ts": 1577934245006, "dec": "/2Q="}
    fields = json.loads(out)["schema"]["fields"]
    assert fields[3] == {"type": "bytes", "optional": False, "name": "org.apache.kafka.connect.data.Decimal",
                         "version": 1, "parameters": {"scale": "2"}, "field": "dec"}
    assert conv().to_connect_data("t", out).value == value


def test_decimal_format_numeric() -> None:
    schema = Decimal.schema(3)
    c = conv(**{"decimal.format": "NUMERIC"})
    out = c.from_connect_data("t", schema, decimal.Decimal("12345678901234567890.125"))
    assert out is not None
    assert out.endswith(b'"payload":12345678901234567890.125}')
    assert c.to_connect_data("t", out).value == decimal.Decimal("12345678901234567890.125")
    # A BASE64 reader still understands numeric decimals, and the other way round.
    assert conv().to_connect_data("t", out).value == decimal.Decimal("12345678901234567890.125")
    b64 = conv().from_connect_data("t", schema, decimal.Decimal("1.500"))
    assert c.to_connect_data("t", b64).value == decimal.Decimal("1.500")


def test_bad_decimal_format_is_config_error() -> None:
    with pytest.raises(ConfigException, match=r"decimal\.format"):
        conv(**{"decimal.format": "HEX"})


def test_schemas_disabled_writes_plain_json() -> None:
    c = conv(**{"schemas.enable": "false"})
    assert c.from_connect_data("t", None, {"a": 1, "b": [True, None, 2.5], "c": b"\x00\x01"}) == \
        b'{"a":1,"b":[true,null,2.5],"c":"AAE="}'
    schema = SchemaBuilder.struct().field("x", Schema.INT32_SCHEMA).build()
    assert c.from_connect_data("t", schema, Struct(schema).put("x", 5)) == b'{"x":5}'
    back = c.to_connect_data("t", b'{"a":1,"b":[1.5,"s"],"c":{"d":null}}')
    assert back.schema is None
    assert back.value == {"a": 1, "b": [1.5, "s"], "c": {"d": None}}


def test_schemaless_with_envelope_has_null_schema() -> None:
    c = conv()
    out = c.from_connect_data("t", None, {"k": "v"})
    assert out == b'{"schema":null,"payload":{"k":"v"}}'
    assert c.to_connect_data("t", out).value == {"k": "v"}


def test_null_is_tombstone_both_ways() -> None:
    for c in (conv(), conv(**{"schemas.enable": "false"})):
        assert c.from_connect_data("t", None, None) is None
        sv = c.to_connect_data("t", None)
        assert sv.schema is None and sv.value is None


def test_null_with_default_uses_default_unless_disabled() -> None:
    schema = SchemaBuilder.int32().optional().default_value(42).build()
    assert json.loads(conv().from_connect_data("t", schema, None) or b"")["payload"] == 42
    c = conv(**{"replace.null.with.default": "false"})
    assert json.loads(c.from_connect_data("t", schema, None) or b"")["payload"] is None


def test_required_null_is_data_error() -> None:
    with pytest.raises(DataException, match="null value for field that is required"):
        conv().from_connect_data("t", Schema.INT32_SCHEMA, None)


def test_envelope_required_when_schemas_enabled() -> None:
    with pytest.raises(DataException, match='requires "schema" and "payload"'):
        conv().to_connect_data("t", b'{"a":1}')
    with pytest.raises(DataException, match='requires "schema" and "payload"'):
        conv().to_connect_data("t", b'{"schema":null,"payload":1,"extra":2}')


@pytest.mark.parametrize("data", [b"{", b"\xff\xfe", b'{"schema":{"type":"int32"},"payload":"x"', b"NaN"])
def test_corrupt_input_is_data_error(data: bytes) -> None:
    with pytest.raises(DataException):
        conv().to_connect_data("t", data)


@pytest.mark.parametrize(("schema_json", "message"), [
    ('{"optional":false}', "must contain 'type'"),
    ('{"type":"nope"}', "Unknown schema type"),
    ('{"type":"array"}', "did not specify the element type"),
    ('{"type":"struct","fields":{}}', "not an array"),
])
def test_bad_schemas_are_data_errors(schema_json: str, message: str) -> None:
    with pytest.raises(DataException, match=message):
        conv().to_connect_data("t", f'{{"schema":{schema_json},"payload":null}}'.encode())


def test_wrong_payload_type_is_data_error() -> None:
    with pytest.raises(DataException):
        conv().to_connect_data("t", b'{"schema":{"type":"int32","optional":false},"payload":"x"}')
    with pytest.raises(DataException):
        conv().from_connect_data("t", Schema.INT32_SCHEMA, "x")


def test_mismatching_struct_schema_is_data_error() -> None:
    a = SchemaBuilder.struct().field("x", Schema.INT32_SCHEMA).build()
    b = SchemaBuilder.struct().field("y", Schema.INT32_SCHEMA).build()
    with pytest.raises(DataException, match="Mismatching schema"):
        conv().from_connect_data("t", b, Struct(a).put("x", 1))


def test_java_number_forms() -> None:
    c = conv(**{"schemas.enable": "false"})
    assert c.from_connect_data("t", None, [1e-5, 12345678.0, 0.001, -0.0, 100.0]) == \
        b"[1.0E-5,1.2345678E7,0.001,-0.0,100.0]"
    assert c.from_connect_data("t", Schema.FLOAT32_SCHEMA, 0.1) == b"0.1"


def test_unicode_written_raw_utf8() -> None:
    out = conv(**{"schemas.enable": "false"}).from_connect_data("t", Schema.STRING_SCHEMA, "h\u00e9\u4e16")
    assert out == '"h\u00e9\u4e16"'.encode()


def test_header_converter_interface() -> None:
    c = JsonConverter()
    c.configure({"schemas.enable": "false"})
    assert c.from_connect_header("t", "h", Schema.INT32_SCHEMA, 7) == b"7"
    assert c.to_connect_header("t", "h", b"7").value == 7


def test_schema_cache_bounded() -> None:
    c = conv(**{"schemas.cache.size": "2"})
    for i in range(5):
        s = SchemaBuilder.struct().name(f"s{i}").field("x", Schema.INT32_SCHEMA).build()
        c.to_connect_data("t", c.from_connect_data("t", s, Struct(s).put("x", i)))
    assert len(c._to_json_cache) <= 2 and len(c._to_connect_cache) <= 2


def test_repeated_schema_fast_path_still_validates() -> None:
    c = conv()
    schema = SchemaBuilder.struct().field("x", Schema.INT32_SCHEMA).build()
    first = c.from_connect_data("t", schema, Struct(schema).put("x", 1))
    assert first is not None
    assert c.to_connect_data("t", first).value.get("x") == 1
    same_schema = first.replace(b'"payload":{"x":1}', b'"payload":{"x":2}')
    assert c.to_connect_data("t", same_schema).value.get("x") == 2
    with pytest.raises(DataException, match='requires "schema" and "payload"'):
        c.to_connect_data("t", first[:-1] + b',"extra":1}')
    with pytest.raises(DataException):
        c.to_connect_data("t", first.replace(b'{"x":1}', b'{"x":"one"}'))
    with pytest.raises(DataException):
        c.to_connect_data("t", first[:-3])  # truncated
    other = SchemaBuilder.struct().field("x", Schema.STRING_SCHEMA).build()
    assert c.to_connect_data("t", c.from_connect_data("t", other, Struct(other).put("x", "s"))).schema == other
