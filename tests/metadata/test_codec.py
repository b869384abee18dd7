"""The shared schema walker: both Kafka wire formats, null markers, tagged fields, corrupt input.

Synthetic schemas cover every field type in a flexible and a non-flexible version, so the cases
no real record schema exercises (an untagged nullable struct, null bytes) are pinned too.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strom.core.errors import CorruptMessageError
from strom.core.protocol.message_codec import ALL, F, Message


@dataclass(frozen=True, slots=True)
class Inner(Message):
    n: int = 0
    SCHEMA: ClassVar[tuple[F, ...]] = (F("n", "int16"),)


@dataclass(frozen=True, slots=True)
class Everything(Message):
    s: str = ""
    ns: str | None = None
    b: bytes = b""
    nb: bytes | None = None
    ints: list[int] = field(default_factory=list)
    ids: list[uuid.UUID] = field(default_factory=list)
    strs: list[str] = field(default_factory=list)
    inners: list[Inner] | None = None
    opt: Inner | None = None          # untagged nullable struct: int8 marker
    tagged: int = -1                  # tagged in the flexible version only
    VERSIONS: ClassVar[tuple[int, int]] = (0, 1)
    FLEXIBLE: ClassVar[int] = 1
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("s", "string"), F("ns", "string", nullable=ALL), F("b", "bytes"), F("nb", "bytes", nullable=ALL),
        F("ints", "[]int32"), F("ids", "[]uuid"), F("strs", "[]string"),
        F("inners", Inner, array=True, nullable=ALL), F("opt", Inner, nullable=ALL),
        F("tagged", "int32", versions=(1, 32767), tag=3),
    )


def test_non_flexible_layout() -> None:
    msg = Everything("a", None, b"x", None, [7], [], ["q"], None, None)
    assert msg.encode(0).hex() == (
        "000161" "ffff"                 # int16-length string, null string = int16 -1
        "0000000178" "ffffffff"         # int32-length bytes, null bytes = int32 -1
        "0000000100000007" "00000000"   # int32 counts
        "00000001" "000171"             # []string: int32 count, int16-length elements
        "ffffffff" "ff")                # null array, null struct marker int8 -1 (no tagged section)


def test_flexible_layout() -> None:
    msg = Everything("a", None, b"x", None, [7], [], ["q"], [Inner(2)], Inner(3), tagged=9)
    assert msg.encode(1).hex() == (
        "0261" "00" "0278" "00" "0200000007" "01" "020271"
        "02" "0002" "00"                # compact array of one Inner (its own empty tag section)
        "01" "0003" "00"                # present marker, then the struct
        "01" "03" "04" "00000009")      # one tagged field: tag 3, size 4


def test_tagged_field_at_its_default_is_omitted_and_unknown_tags_are_skipped() -> None:
    plain = Everything().encode(1)
    assert plain.endswith(b"\x00")
    with_unknown = plain[:-1] + b"\x01\x63\x02zz"   # tag 99, 2 bytes nobody knows
    assert Everything.decode(with_unknown, 1) == Everything()


inners = st.builds(Inner, st.integers(-(2**15), 2**15 - 1))
everything = st.builds(
    Everything, st.text(max_size=8), st.none() | st.text(max_size=8), st.binary(max_size=8),
    st.none() | st.binary(max_size=8), st.lists(st.integers(-(2**31), 2**31 - 1), max_size=4),
    st.lists(st.uuids(), max_size=2), st.lists(st.text(max_size=4), max_size=3),
    st.none() | st.lists(inners, max_size=3), st.none() | inners)


@given(everything, st.integers(-(2**31), 2**31 - 1))
def test_round_trip_both_formats(msg: Everything, tagged: int) -> None:
    assert Everything.decode(msg.encode(0), 0) == msg
    flex = Everything(**{**{f.attr: getattr(msg, f.attr) for f in Everything.SCHEMA}, "tagged": tagged})
    assert Everything.decode(flex.encode(1), 1) == flex


@pytest.mark.parametrize("version", [0, 1])
def test_every_truncation_is_corrupt(version: int) -> None:
    data = Everything("ab", "c", b"d", b"e", [1], [uuid.UUID(int=1)], ["f"], [Inner(1)], Inner(2), 5).encode(version)
    for cut in range(len(data)):
        with pytest.raises(CorruptMessageError):
            Everything.decode(data[:cut], version)
    with pytest.raises(CorruptMessageError):
        Everything.decode(data + b"\x00", version)


def test_null_in_a_non_nullable_field() -> None:
    with pytest.raises(ValueError):
        Everything(s=None).encode(0)  # type: ignore[arg-type]
    with pytest.raises(CorruptMessageError):
        Everything.decode(b"\xff\xff" + Everything().encode(0)[2:], 0)   # s = int16 -1


def test_unknown_version() -> None:
    with pytest.raises(ValueError):
        Everything().encode(2)
    with pytest.raises(CorruptMessageError):
        Everything.decode(Everything().encode(1), 2)
