"""MirrorMaker 2's internal record formats, byte for byte Kafka's (``OffsetSync``,
``Checkpoint``, ``Heartbeat``): Kafka protocol ``Struct``\\ s — a STRING is an int16 length and
UTF-8 bytes, integers are big-endian — so Kafka's MM2 and ``RemoteClusterUtils`` read what
strom writes and the other way round.

- offset sync (``mm2-offset-syncs.<cluster>.internal``): key (topic STRING, partition INT32),
  value (upstreamOffset INT64, offset INT64); no version header.
- checkpoint (``<source>.checkpoints.internal``): key (group STRING, topic STRING, partition
  INT32), value (version INT16 = 0, upstreamOffset INT64, offset INT64, metadata STRING).
- heartbeat (``heartbeats``): key (sourceClusterAlias STRING, targetClusterAlias STRING),
  value (version INT16 = 0, timestamp INT64).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from strom.connect.exceptions import DataException

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I64x2 = struct.Struct(">qq")
VERSION = 0


def _string(value: str) -> bytes:
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise DataException(f"string of {len(data)} bytes does not fit a Kafka STRING")
    return _I16.pack(len(data)) + data


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes | None, what: str) -> None:
        if data is None:
            raise DataException(f"{what}: null bytes")
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise DataException(f"truncated MirrorMaker record: {n} bytes wanted at {self.pos} of {len(self.data)}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def string(self) -> str:
        (n,) = _I16.unpack(self.take(2))
        if n < 0:
            raise DataException("null STRING in a MirrorMaker record")
        return self.take(n).decode("utf-8")

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])


@dataclass(frozen=True, slots=True)
class OffsetSync:
    """Upstream offset ``upstream_offset`` of ``topic``/``partition`` was written downstream at
    ``downstream_offset`` (Kafka's ``OffsetSync``; ``topic`` is the upstream topic)."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def record_key(self) -> bytes:
        return _string(self.topic) + _I32.pack(self.partition)

    def record_value(self) -> bytes:
        return _I64x2.pack(self.upstream_offset, self.downstream_offset)

    @classmethod
    def deserialize(cls, key: bytes | None, value: bytes | None) -> OffsetSync:
        k = _Reader(key, "offset sync key")
        topic, partition = k.string(), k.i32()
        v = _Reader(value, "offset sync value")
        return cls(topic, partition, v.i64(), v.i64())


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Group ``group``'s committed offset ``upstream_offset`` of the (remote) ``topic``/
    ``partition`` translates to ``downstream_offset`` on the target (Kafka's ``Checkpoint``;
    ``topic`` is the target cluster's name of the topic)."""

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def record_key(self) -> bytes:
        return _string(self.group) + _string(self.topic) + _I32.pack(self.partition)

    def record_value(self) -> bytes:
        return _I16.pack(VERSION) + _I64x2.pack(self.upstream_offset, self.downstream_offset) + _string(self.metadata)

    @classmethod
    def deserialize(cls, key: bytes | None, value: bytes | None) -> Checkpoint:
        v = _Reader(value, "checkpoint value")
        version = v.i16()
        if version != VERSION:
            raise DataException(f"checkpoint value version {version} is not supported (only 0)")
        upstream, downstream, metadata = v.i64(), v.i64(), v.string()
        k = _Reader(key, "checkpoint key")
        return cls(k.string(), k.string(), k.i32(), upstream, downstream, metadata)

    def connect_partition(self) -> dict[str, str | int]:
        return {"group": self.group, "topic": self.topic, "partition": self.partition}


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """``source_cluster_alias`` was alive at ``timestamp`` (ms), as seen by the flow to
    ``target_cluster_alias`` (Kafka's ``Heartbeat``)."""

    source_cluster_alias: str
    target_cluster_alias: str
    timestamp: int

    def record_key(self) -> bytes:
        return _string(self.source_cluster_alias) + _string(self.target_cluster_alias)

    def record_value(self) -> bytes:
        return _I16.pack(VERSION) + _I64.pack(self.timestamp)

    @classmethod
    def deserialize(cls, key: bytes | None, value: bytes | None) -> Heartbeat:
        v = _Reader(value, "heartbeat value")
        version = v.i16()
        if version != VERSION:
            raise DataException(f"heartbeat value version {version} is not supported (only 0)")
        timestamp = v.i64()
        k = _Reader(key, "heartbeat key")
        return cls(k.string(), k.string(), timestamp)

    def connect_partition(self) -> dict[str, str]:
        return {"sourceClusterAlias": self.source_cluster_alias, "targetClusterAlias": self.target_cluster_alias}
