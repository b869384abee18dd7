"""Property tests: every converter reads back what it wrote."""

from __future__ import annotations

import datetime as dt
import decimal
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from strom.connect.converters import (
    DoubleConverter,
    FloatConverter,
    IntegerConverter,
    JsonConverter,
    LongConverter,
    ShortConverter,
    StringConverter,
)
from strom.connect.converters._javafmt import java_double_str, java_float_str, to_float32
from strom.connect.data import Date, Decimal, Schema, SchemaBuilder, Struct, Timestamp

UTC = dt.UTC

json_leaf = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text() | \
    st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(json_leaf, lambda kids: st.lists(kids, max_size=4) |
                           st.dictionaries(st.text(max_size=5), kids, max_size=4), max_leaves=12)


def _conv(**cfg: str) -> JsonConverter:
    c = JsonConverter()
    c.configure(cfg, False)
    return c


@given(json_values)
@settings(max_examples=200, deadline=None)
def test_schemaless_json_round_trip(value: object) -> None:
    for c in (_conv(**{"schemas.enable": "false"}), _conv()):
        out = c.from_connect_data("t", None, value)
        if value is None:
            assert out is None
            continue
        assert c.to_connect_data("t", out).value == value


STRUCT = (SchemaBuilder.struct().name("rec")
          .field("i8", Schema.INT8_SCHEMA).field("i64", Schema.INT64_SCHEMA)
          .field("f32", Schema.FLOAT32_SCHEMA).field("f64", Schema.OPTIONAL_FLOAT64_SCHEMA)
          .field("s", Schema.STRING_SCHEMA).field("b", Schema.BYTES_SCHEMA)
          .field("arr", SchemaBuilder.array(Schema.INT32_SCHEMA).build())
          .field("m", SchemaBuilder.map(Schema.INT16_SCHEMA, Schema.BOOLEAN_SCHEMA).build())
          .field("dec", Decimal.schema(4)).field("day", Date.SCHEMA).field("ts", Timestamp.SCHEMA)
          .build())


@given(
    i8=st.integers(-128, 127), i64=st.integers(-(2**63), 2**63 - 1),
    f32=st.floats(width=32, allow_nan=False, allow_infinity=False),
    f64=st.none() | st.floats(allow_nan=False), s=st.text(), b=st.binary(),
    arr=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=5),
    m=st.dictionaries(st.integers(-(2**15), 2**15 - 1), st.booleans(), max_size=4),
    dec=st.decimals(allow_nan=False, allow_infinity=False, places=4, min_value=-10**12, max_value=10**12),
    day=st.dates(min_value=dt.date(1, 1, 1)),
    ts=st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1)),
    numeric=st.booleans(),
)
@settings(max_examples=150, deadline=None)
def test_struct_json_round_trip(i8: int, i64: int, f32: float, f64: float | None, s: str, b: bytes,
                                arr: list[int], m: dict[int, bool], dec: decimal.Decimal, day: dt.date,
                                ts: dt.datetime, numeric: bool) -> None:
    ts = ts.replace(microsecond=ts.microsecond // 1000 * 1000, tzinfo=UTC)
    value = (Struct(STRUCT).put("i8", i8).put("i64", i64).put("f32", f32).put("f64", f64).put("s", s)
             .put("b", b).put("arr", arr).put("m", m).put("dec", dec).put("day", day).put("ts", ts))
    c = _conv(**{"decimal.format": "NUMERIC" if numeric else "BASE64"})
    back = c.to_connect_data("t", c.from_connect_data("t", STRUCT, value))
    assert back.schema == STRUCT
    assert back.value == value


@given(st.floats(allow_nan=False))
def test_java_double_form_reads_back(x: float) -> None:
    text = java_double_str(x)
    if math.isinf(x):
        assert text in ("Infinity", "-Infinity")
    else:
        assert float(text) == x
        assert "." in text  # Java always writes a fraction or an exponent mantissa


@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_java_float_form_reads_back_as_same_float32(x: float) -> None:
    assert to_float32(float(java_float_str(x))) == x


@given(st.integers(-(2**15), 2**15 - 1), st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1),
       st.floats(width=32), st.floats())
def test_number_converters_round_trip(i16: int, i32: int, i64: int, f32: float, f64: float) -> None:
    for cls, v in ((ShortConverter, i16), (IntegerConverter, i32), (LongConverter, i64),
                   (FloatConverter, f32), (DoubleConverter, f64)):
        c = cls()
        c.configure({}, False)
        back = c.to_connect_data("t", c.from_connect_data("t", None, v)).value
        assert back == v or (math.isnan(v) and math.isnan(back))


@given(st.text().filter(lambda s: not any(0xD800 <= ord(ch) <= 0xDFFF for ch in s)),
       st.sampled_from(["UTF8", "UTF-8", "UTF-16", "UTF-16LE"]))
def test_string_converter_round_trip(text: str, encoding: str) -> None:
    c = StringConverter()
    c.configure({"converter.encoding": encoding}, False)
    assert c.to_connect_data("t", c.from_connect_data("t", None, text)).value == text
