"""The batch paths of the serdes (issue 26) give what the per-value ones give, value for value,
and refuse what they refuse (the runtime then redoes the batch value by value)."""

from __future__ import annotations

from typing import Any

import pytest

from strom.streams import Serdes
from strom.streams.exceptions import SerializationError
from strom.streams.processor.stores import AUTO_SERDE, batch_deserializer_of, batch_serializer_of

GOOD: dict[str, tuple[Any, list[Any]]] = {
    "string": (Serdes.string(), ["", "word", "ü€😀", None, "a" * 1000]),
    "long": (Serdes.long(), [0, -1, 2**63 - 1, -(2**63), None, 42]),
    "integer": (Serdes.integer(), [0, -1, 2**31 - 1, -(2**31), None]),
    "double": (Serdes.double(), [0.0, -1.5, 1e300, None, 3]),
    "bytes": (Serdes.bytes(), [b"", b"\x00\xff", None, bytearray(b"ab"), memoryview(b"cd")]),
    "auto": (AUTO_SERDE, ["word", "", None, 7, -(2**63), 2.5, b"raw", True, {"a": [1]}, "ü"]),
    "json": (Serdes.json(), [{"a": 1}, [1, 2], "s", None]),
}

BAD: dict[str, tuple[Any, list[Any], list[Any]]] = {
    # serde, values serialize refuses, bytes deserialize refuses
    "string": (Serdes.string(), [1, b"bytes"], [b"\xff\xfe"]),
    "long": (Serdes.long(), [2**63, True, "1", 1.0], [b"\x00" * 4, b""]),
    "integer": (Serdes.integer(), [2**31, False], [b"\x00" * 8]),
    "double": (Serdes.double(), ["x"], [b"\x00"]),
    "bytes": (Serdes.bytes(), ["str", 3], []),
    "auto": (AUTO_SERDE, [object()], [b"", b"\x09x"]),
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_batch_round_trip_equals_per_value(name: str) -> None:
    serde, values = GOOD[name]
    ser, de = batch_serializer_of(serde), batch_deserializer_of(serde)
    data = ser("t", values)
    assert data == [serde.serialize("t", v) for v in values]
    assert all(d is None or type(d) is bytes for d in data)
    assert de("t", data) == [serde.deserialize("t", d) for d in data]


@pytest.mark.parametrize("name", sorted(BAD))
def test_batch_refuses_what_per_value_refuses(name: str) -> None:
    serde, bad_values, bad_data = BAD[name]
    ser, de = batch_serializer_of(serde), batch_deserializer_of(serde)
    for bad in bad_values:
        with pytest.raises(SerializationError):
            serde.serialize("t", bad)
        with pytest.raises(Exception):  # noqa: B017 - any failure: the caller redoes it per value
            ser("t", ["fine" if name in ("string", "auto") else None, bad])
    for bad in bad_data:
        with pytest.raises(SerializationError):
            serde.deserialize("t", bad)
        with pytest.raises(Exception):  # noqa: B017
            de("t", [None, bad])


def test_user_serde_without_batch_methods_is_called_per_value() -> None:
    calls: list[Any] = []

    class Upper:
        def serialize(self, topic: str, value: Any, headers: Any = None) -> bytes | None:
            calls.append(value)
            return None if value is None else value.upper().encode()

        def deserialize(self, topic: str, data: bytes | None, headers: Any = None) -> Any:
            return None if data is None else data.decode().lower()

    assert batch_serializer_of(Upper())("t", ["a", None, "b"]) == [b"A", None, b"B"]
    assert calls == ["a", None, "b"]
    assert batch_deserializer_of(Upper())("t", [b"A", None]) == ["a", None]
    assert batch_deserializer_of(None)("t", [b"x", None]) == [b"x", None]
