"""Serdes: round trips (hypothesis), Kafka's exact wire bytes, None pass-through, errors."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strom.streams.exceptions import SerializationError, StreamsError
from strom.streams.serdes import Serde, Serdes

T = "t"


@given(st.binary())
def test_bytes_round_trip(b: bytes) -> None:
    assert Serdes.bytes().deserialize(T, Serdes.bytes().serialize(T, b)) == b


@given(st.text())
def test_string_round_trip_utf8(s: str) -> None:
    data = Serdes.string().serialize(T, s)
    assert data == s.encode("utf-8")
    assert Serdes.string().deserialize(T, data) == s


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_integer_round_trip_and_wire(i: int) -> None:
    data = Serdes.integer().serialize(T, i)
    assert data == i.to_bytes(4, "big", signed=True)
    assert Serdes.integer().deserialize(T, data) == i


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_long_round_trip_and_wire(i: int) -> None:
    data = Serdes.long().serialize(T, i)
    assert data == i.to_bytes(8, "big", signed=True)
    assert Serdes.long().deserialize(T, data) == i


@given(st.floats(allow_nan=True))
def test_double_round_trip(f: float) -> None:
    back = Serdes.double().deserialize(T, Serdes.double().serialize(T, f))
    assert back == f or (math.isnan(f) and back is not None and math.isnan(back))


def test_exact_wire_bytes_like_kafka() -> None:
    assert Serdes.long().serialize(T, 1) == bytes.fromhex("0000000000000001")
    assert Serdes.long().serialize(T, -1) == b"\xff" * 8
    assert Serdes.integer().serialize(T, 1) == bytes.fromhex("00000001")
    assert Serdes.integer().serialize(T, -2) == bytes.fromhex("fffffffe")
    assert Serdes.double().serialize(T, 1.0) == bytes.fromhex("3ff0000000000000")
    assert Serdes.double().serialize(T, -2.5) == bytes.fromhex("c004000000000000")
    assert Serdes.double().serialize(T, 3) == struct.pack(">d", 3.0)


@pytest.mark.parametrize(
    "serde",
    [Serdes.bytes(), Serdes.string(), Serdes.integer(), Serdes.long(), Serdes.double(), Serdes.json(), Serdes.void()],
    ids=repr,
)
def test_none_passes_through(serde: Serde[object]) -> None:
    assert serde.serialize(T, None) is None
    assert serde.deserialize(T, None) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(), c, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_json_round_trip(v: object) -> None:
    data = Serdes.json().serialize(T, v) if v is not None else None
    assert Serdes.json().deserialize(T, data) == v


AVRO_SCHEMA = {
    "type": "record",
    "name": "PageView",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "count", "type": "long"},
        {"name": "ratio", "type": ["null", "double"], "default": None},
    ],
}


AVRO = Serdes.avro(AVRO_SCHEMA)


@settings(deadline=None)  # fastavro compiles its reader/writer on first use
@given(st.text(), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.none() | st.floats(allow_nan=False))
def test_avro_round_trip(user: str, count: int, ratio: float | None) -> None:
    serde = AVRO
    rec = {"user": user, "count": count, "ratio": ratio}
    assert serde.deserialize(T, serde.serialize(T, rec)) == rec


def test_avro_schemaless_wire_bytes() -> None:
    # zig-zag varints, no container header: "a" -> len 1 (02) 'a'; 1 -> 02; union branch 0 -> 00
    assert Serdes.avro(AVRO_SCHEMA).serialize(T, {"user": "a", "count": 1, "ratio": None}) == b"\x02a\x02\x00"


def test_avro_errors_name_topic_and_type() -> None:
    serde = Serdes.avro(AVRO_SCHEMA)
    with pytest.raises(SerializationError, match=r"orders.*dict|dict.*orders"):
        serde.serialize("orders", {"user": 5})
    with pytest.raises(SerializationError, match="orders"):
        serde.deserialize("orders", b"\x02a\x02\x00\xff\xff")  # trailing garbage
    with pytest.raises(SerializationError, match="orders"):
        serde.deserialize("orders", b"\x09")  # truncated


@pytest.mark.parametrize(
    ("serde", "value", "typename"),
    [
        (Serdes.long(), "1", "str"),
        (Serdes.long(), 2**63, "int"),
        (Serdes.long(), True, "bool"),
        (Serdes.integer(), 2**31, "int"),
        (Serdes.integer(), 1.5, "float"),
        (Serdes.string(), b"x", "bytes"),
        (Serdes.bytes(), "x", "str"),
        (Serdes.double(), "1.0", "str"),
        (Serdes.json(), {1, 2}, "set"),
        (Serdes.void(), 1, "int"),
    ],
)
def test_serialize_errors_name_topic_and_type(serde: Serde[object], value: object, typename: str) -> None:
    with pytest.raises(SerializationError) as ei:
        serde.serialize("my-topic", value)
    assert "my-topic" in str(ei.value) and typename in str(ei.value)
    assert isinstance(ei.value, StreamsError)


@pytest.mark.parametrize(
    ("serde", "data"),
    [
        (Serdes.long(), b"\x00" * 7),
        (Serdes.integer(), b"\x00" * 5),
        (Serdes.double(), b"\x00"),
        (Serdes.string(), b"\xff\xfe"),
        (Serdes.json(), b"{not json"),
        (Serdes.void(), b""),
    ],
)
def test_deserialize_errors_name_topic(serde: Serde[object], data: bytes) -> None:
    with pytest.raises(SerializationError, match="in-topic"):
        serde.deserialize("in-topic", data)


def test_from_functions() -> None:
    serde = Serdes.from_functions(lambda v: v.to_bytes(2, "little"), lambda b: int.from_bytes(b, "little"), "u16le")
    assert serde.serialize(T, 258) == b"\x02\x01"
    assert serde.deserialize(T, b"\x02\x01") == 258
    assert serde.serialize(T, None) is None
    with pytest.raises(SerializationError, match=r"u16le serde.*int.*topic 't'"):
        serde.serialize(T, 70000)  # OverflowError inside the user function is wrapped
    bad = Serdes.from_functions(lambda v: str(v), lambda b: b)  # type: ignore[arg-type,return-value]
    with pytest.raises(SerializationError, match="not bytes"):
        bad.serialize(T, 1)
