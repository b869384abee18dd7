"""Serdes of internal data: table changes on repartition topics and the untyped fallback."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strom.streams import Serdes, SerializationError
from strom.streams.dsl.processors import Change, ChangeSerde
from strom.streams.processor.stores import AUTO_SERDE

values = st.none() | st.text() | st.integers(-(1 << 63), (1 << 63) - 1) | st.binary()


@given(st.none() | st.text(), st.none() | st.text())
def test_change_serde_round_trip(new: str | None, old: str | None) -> None:
    serde = ChangeSerde(Serdes.string())
    assert serde.deserialize("t", serde.serialize("t", Change(new, old))) == Change(new, old)


def test_change_serde_truncated_is_an_error() -> None:
    serde = ChangeSerde(Serdes.string())
    data = serde.serialize("t", Change("abc", "de"))
    assert data is not None
    with pytest.raises(SerializationError, match="corrupt table change"):
        serde.deserialize("t", data[:2])
    with pytest.raises(SerializationError):
        serde.deserialize("t", data[:7])  # new value cut: no room for the old-value flag


@given(values)
def test_auto_serde_round_trip(v: object) -> None:
    assert AUTO_SERDE.deserialize("t", AUTO_SERDE.serialize("t", v)) == v


@given(st.integers(-(1 << 63), (1 << 63) - 1), st.integers(-(1 << 63), (1 << 63) - 1))
def test_auto_serde_int_bytes_keep_order(a: int, b: int) -> None:
    ba, bb = AUTO_SERDE.serialize("t", a), AUTO_SERDE.serialize("t", b)
    assert ba is not None and bb is not None
    assert (ba < bb) == (a < b)


def test_auto_serde_rejects_unknown_tag_and_unserializable() -> None:
    with pytest.raises(SerializationError, match="unknown type tag"):
        AUTO_SERDE.deserialize("t", b"\x09abc")
    with pytest.raises(SerializationError, match="not JSON-serializable"):
        AUTO_SERDE.serialize("t", object())
