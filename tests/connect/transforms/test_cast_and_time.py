"""Cast, TimestampConverter, TimestampRouter and RegexRouter."""

from __future__ import annotations

import ctypes
import datetime as dt
import decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strom.connect.data import Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp
from strom.connect.exceptions import ConfigException, DataException
from strom.connect.transforms import (
    Cast,
    CastKey,
    CastValue,
    FlattenValue,
    RegexRouter,
    TimestampConverterKey,
    TimestampConverterValue,
    TimestampRouter,
)
from strom.connect.transforms.java_date_format import JavaDateFormat
from tests.connect.transforms.conftest import make, sink

UTC = dt.UTC


CAST = {spec: make(CastValue, spec=spec) for spec in ("int8", "int16", "int32", "int64", "string")}


# -- Cast ------------------------------------------------------------------------------------

def test_cast_names() -> None:
    assert CastValue.KAFKA_CLASS_NAME == "org.apache.kafka.connect.transforms.Cast$Value"
    assert Cast.Key is CastKey


def test_cast_whole_value_schemaless() -> None:
    assert make(CastValue, spec="int8").apply(sink(value=300)).value == 44  # Java (byte) 300
    assert make(CastValue, spec="int32").apply(sink(value=3.9)).value == 3
    assert make(CastValue, spec="int16").apply(sink(value=True)).value == 1
    assert make(CastValue, spec="float64").apply(sink(value="2.5")).value == 2.5
    assert make(CastValue, spec="boolean").apply(sink(value="TRUE")).value is True
    assert make(CastValue, spec="boolean").apply(sink(value="yes")).value is False
    assert make(CastValue, spec="boolean").apply(sink(value=0)).value is False
    assert make(CastValue, spec="string").apply(sink(value=False)).value == "false"
    assert make(CastValue, spec="string").apply(sink(value=1e20)).value == "1.0E20"
    assert make(CastValue, spec="string").apply(sink(value=b"\x01\x02")).value == "AQI="
    assert make(CastKey, spec="int64").apply(sink(value=1, key="123")).key == 123


def test_cast_whole_value_with_schema() -> None:
    rec = make(CastValue, spec="string").apply(sink(Schema.INT32_SCHEMA, 42))
    assert rec.value == "42" and rec.value_schema == Schema.STRING_SCHEMA
    rec = make(CastValue, spec="int32").apply(sink(Schema.OPTIONAL_STRING_SCHEMA, "7"))
    assert rec.value == 7 and rec.value_schema == Schema.OPTIONAL_INT32_SCHEMA


def test_cast_fields_struct() -> None:
    schema = (SchemaBuilder.struct().name("r")
              .field("a", Schema.INT8_SCHEMA).field("b", Schema.INT16_SCHEMA)
              .field("c", SchemaBuilder.int32().optional().default_value(5).build())
              .field("d", Schema.FLOAT32_SCHEMA).field("e", Schema.BOOLEAN_SCHEMA)
              .field("f", Schema.STRING_SCHEMA).field("dec", Decimal.schema(2))
              .field("ts", Timestamp.SCHEMA).field("keep", Schema.STRING_SCHEMA).build())
    value = (Struct(schema).put("a", 8).put("b", 16).put("c", None).put("d", 32.5).put("e", True)
             .put("f", "-64").put("dec", decimal.Decimal("12.34"))
             .put("ts", dt.datetime(2020, 1, 1, tzinfo=UTC)).put("keep", "k"))
    t = make(CastValue, spec="a:int16,b:int32,c:int64,d:float64,e:int8,f:int32,dec:float64,ts:int64")
    rec = t.apply(sink(schema, value))
    s, v = rec.value_schema, rec.value
    assert s.name == "r"
    assert [s.field(n).schema.type.name for n in ("a", "b", "c", "d", "e", "f", "dec", "ts", "keep")] == \
        ["INT16", "INT32", "INT64", "FLOAT64", "INT8", "INT32", "FLOAT64", "INT64", "STRING"]
    assert s.field("c").schema.optional and s.field("c").schema.default == 5
    assert s.field("ts").schema.name is None  # the logical name does not survive the cast
    assert (v.get("a"), v.get("b"), v.get("c"), v.get("d"), v.get("e"), v.get("f")) == (8, 16, 5, 32.5, 1, -64)
    assert v.get("dec") == 12.34 and v.get("ts") == 1577836800000 and v.get("keep") == "k"


def test_cast_logical_to_string() -> None:
    schema = SchemaBuilder.struct().field("day", Date.SCHEMA).field("t", Time.SCHEMA).build()
    value = Struct(schema).put("day", dt.date(2021, 3, 4)).put("t", dt.time(1, 2, 3, 4000))
    v = make(CastValue, spec="day:string,t:string").apply(sink(schema, value)).value
    assert v.get("day") == "2021-03-04" and v.get("t") == "01:02:03.004Z"


def test_cast_schemaless_fields() -> None:
    rec = make(CastValue, spec="a:int32,b:string,missing:int8").apply(sink(value={"a": "12", "b": 3, "c": 1}))
    assert rec.value == {"a": 12, "b": "3", "c": 1, "missing": None}


def test_cast_errors() -> None:
    with pytest.raises(ConfigException, match="Invalid type found in casting spec: nope"):
        make(CastValue, spec="a:nope")
    with pytest.raises(ConfigException, match="does not support casting to BYTES"):
        make(CastValue, spec="bytes")
    with pytest.raises(ConfigException, match="may ony specify a single cast"):
        make(CastValue, spec="int8,a:int16")
    with pytest.raises(ConfigException, match="spec"):
        make(CastValue)
    with pytest.raises(DataException, match="out of range"):
        make(CastValue, spec="int8").apply(sink(value="300"))
    with pytest.raises(DataException, match="out of range"):
        make(CastValue, spec="int32").apply(sink(value="1.5"))
    with pytest.raises(DataException, match="Unexpected type"):
        make(CastValue, spec="int32").apply(sink(Schema.BYTES_SCHEMA, b"x"))
    nested = SchemaBuilder.struct().field("s", SchemaBuilder.struct().build()).build()
    inner = nested.field("s")
    assert inner is not None
    with pytest.raises(DataException, match="does not support casting from STRUCT"):
        make(CastValue, spec="s:string").apply(sink(nested, Struct(nested).put("s", Struct(inner.schema))))


def test_cast_tombstone() -> None:
    rec = sink(Schema.OPTIONAL_INT32_SCHEMA, None)
    assert make(CastValue, spec="string").apply(rec) is rec


# -- TimestampConverter ----------------------------------------------------------------------

TS_MS = 1_577_934_245_006  # 2020-01-02T03:04:05.006Z
TS = dt.datetime(2020, 1, 2, 3, 4, 5, 6000, tzinfo=UTC)


def test_timestamp_converter_schemaless_whole_value() -> None:
    to_str = make(TimestampConverterValue, **{"target.type": "string", "format": "yyyy-MM-dd'T'HH:mm:ss.SSSZ"})
    assert to_str.apply(sink(value=TS_MS)).value == "2020-01-02T03:04:05.006+0000"
    to_unix = make(TimestampConverterValue, **{"target.type": "unix", "format": "yyyy-MM-dd HH:mm:ss"})
    assert to_unix.apply(sink(value="2020-01-02 03:04:05")).value == 1_577_934_245_000
    assert make(TimestampConverterValue, **{"target.type": "Timestamp"}).apply(sink(value=TS_MS)).value == TS
    assert make(TimestampConverterValue, **{"target.type": "Date"}).apply(sink(value=TS)).value == dt.date(2020, 1, 2)
    assert make(TimestampConverterValue, **{"target.type": "Time"}).apply(sink(value=TS)).value == \
        dt.time(3, 4, 5, 6000)


def test_timestamp_converter_unix_precision() -> None:
    for precision, value in (("seconds", 1_577_934_245), ("microseconds", TS_MS * 1000),
                             ("nanoseconds", TS_MS * 1_000_000)):
        t = make(TimestampConverterValue, **{"target.type": "unix", "unix.precision": precision})
        out = t.apply(sink(value=TS)).value
        assert out == value
        back = make(TimestampConverterValue, **{"target.type": "Timestamp", "unix.precision": precision})
        expected = TS.replace(microsecond=0) if precision == "seconds" else TS
        assert back.apply(sink(value=out)).value == expected


def test_timestamp_converter_struct_field() -> None:
    schema = SchemaBuilder.struct().field("id", Schema.INT32_SCHEMA).field("at", Schema.INT64_SCHEMA).build()
    t = make(TimestampConverterValue, field="at", **{"target.type": "Timestamp"})
    rec = t.apply(sink(schema, Struct(schema).put("id", 1).put("at", TS_MS)))
    assert rec.value_schema.field("at").schema == Timestamp.SCHEMA
    assert rec.value.get("at") == TS and rec.value.get("id") == 1
    k = make(TimestampConverterKey, field="at", **{"target.type": "string", "format": "yyyyMMdd"})
    assert k.apply(sink(value=1, key={"at": TS_MS, "x": 2})).key == {"at": "20200102", "x": 2}


def test_timestamp_converter_whole_schema_value() -> None:
    t = make(TimestampConverterValue, **{"target.type": "unix"})
    rec = t.apply(sink(Timestamp.SCHEMA, TS))
    assert rec.value == TS_MS and rec.value_schema == Schema.INT64_SCHEMA


def test_timestamp_converter_errors() -> None:
    with pytest.raises(ConfigException, match=r"target\.type"):
        make(TimestampConverterValue, **{"target.type": "decade"})
    with pytest.raises(ConfigException, match="requires format"):
        make(TimestampConverterValue, **{"target.type": "string"})
    with pytest.raises(ConfigException, match=r"unix\.precision"):
        make(TimestampConverterValue, **{"target.type": "unix", "unix.precision": "days"})
    t = make(TimestampConverterValue, **{"target.type": "unix", "format": "yyyy-MM-dd"})
    with pytest.raises(DataException, match="does not match pattern"):
        t.apply(sink(value="not a date"))
    with pytest.raises(DataException, match="does not support"):
        t.apply(sink(value=1.5))
    with pytest.raises(DataException, match="known timestamp type"):
        t.apply(sink(Schema.BOOLEAN_SCHEMA, True))


def test_java_date_format_round_trips() -> None:
    for pattern in ("yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "yyyyMMddHHmmssSSS", "dd MMM yyyy hh:mm:ss a", "EEE, d MMMM yyyy HH:mm"):
        f = JavaDateFormat(pattern)
        text = f.format(TS)
        parsed = f.parse(text)
        assert f.format(parsed) == text
    assert JavaDateFormat("dd MMM yyyy hh:mm a").format(TS) == "02 Jan 2020 03:04 AM"
    assert JavaDateFormat("yyyy-MM-dd'T'HH:mm:ssZ").parse("2020-01-02T05:04:05+0200") == TS.replace(microsecond=0)
    with pytest.raises(ConfigException, match="Illegal pattern character"):
        JavaDateFormat("yyyy-bb")


# -- routers ---------------------------------------------------------------------------------

def test_timestamp_router() -> None:
    rec = make(TimestampRouter).apply(sink(value=1, timestamp=TS_MS))
    assert rec.topic == "orders-20200102"
    t = make(TimestampRouter, **{"topic.format": "${timestamp}_${topic}", "timestamp.format": "yyyy.MM"})
    assert t.apply(sink(value=1, timestamp=TS_MS)).topic == "2020.01_orders"
    with pytest.raises(DataException, match="Timestamp missing"):
        make(TimestampRouter).apply(sink(value=1, timestamp=None))


def test_regex_router() -> None:
    t = make(RegexRouter, regex="(.*)ders", replacement="$1-x")
    assert t.apply(sink(value=1)).topic == "or-x"
    assert make(RegexRouter, regex="or", replacement="z").apply(sink(value=1)).topic == "orders"  # must match fully
    named = make(RegexRouter, regex="(?<base>\\w+)s", replacement="${base}\\$")
    assert named.apply(sink(value=1)).topic == "order$"
    with pytest.raises(ConfigException, match="regex"):
        make(RegexRouter, regex="(", replacement="x")
    with pytest.raises(ConfigException, match="replacement"):
        make(RegexRouter, regex="x")


@given(st.integers(-(2**70), 2**70))
def test_cast_integer_narrowing_matches_java(n: int) -> None:
    # Java's (byte)/(short)/(int)/(long) casts keep the low bits, two's complement.
    for spec, ctype in (("int8", ctypes.c_int8), ("int16", ctypes.c_int16), ("int32", ctypes.c_int32),
                        ("int64", ctypes.c_int64)):
        assert CAST[spec].apply(sink(value=n)).value == ctype(n).value


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_cast_float_to_string_reads_back(x: float) -> None:
    assert float(CAST["string"].apply(sink(value=x)).value) == x


@given(st.dictionaries(st.text(alphabet="abc", min_size=1, max_size=3),
                       st.integers() | st.dictionaries(st.text(alphabet="xyz", min_size=1, max_size=2),
                                                       st.integers(), max_size=3), max_size=5))
def test_flatten_schemaless_keeps_every_leaf(value: dict[str, Any]) -> None:
    flat = make(FlattenValue, delimiter="/").apply(sink(value=value)).value
    expected = {}
    for k, v in value.items():
        if isinstance(v, dict):
            expected.update({f"{k}/{k2}": v2 for k2, v2 in v.items()})
        else:
            expected[k] = v
    assert flat == expected
