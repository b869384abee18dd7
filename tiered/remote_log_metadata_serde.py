"""The bytes of ``__remote_log_metadata``: Kafka's storage module's message schemas, by hand.

Record values are Kafka's ``RemoteLogMetadataSerde`` (an ``AbstractApiMessageSerde``): unsigned
varint frame version (1), unsigned varint api key, unsigned varint version (0), then the message
in flexible-version encoding (compact strings/bytes/arrays, 16-byte uuids, tagged fields after
every struct). Api keys and fields follow ``message/*.json`` of ``kafka-storage``:

====  ========================================  ============================================
key   message                                   Python value
====  ========================================  ============================================
0     RemoteLogSegmentMetadataRecord            :class:`RemoteLogSegmentMetadata`
1     RemoteLogSegmentMetadataUpdateRecord      :class:`RemoteLogSegmentMetadataUpdate`
2     RemotePartitionDeleteMetadataRecord       :class:`RemotePartitionDeleteMetadata`
3     RemoteLogSegmentMetadataSnapshotRecord    :class:`RemoteLogSegmentMetadataSnapshot`
====  ========================================  ============================================

Records carry no key; :func:`metadata_partition` is Kafka's ``RemoteLogMetadataTopicPartitioner``.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Final

from strom.plugins.hookspecs.storage import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)

FRAME_VERSION: Final = 1
SEGMENT_METADATA_KEY: Final = 0
SEGMENT_METADATA_UPDATE_KEY: Final = 1
PARTITION_DELETE_KEY: Final = 2
SEGMENT_METADATA_SNAPSHOT_KEY: Final = 3
TXN_INDEX_EMPTY_TAG: Final = 0


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadataSnapshot:
    """Kafka's ``RemoteLogSegmentMetadataSnapshot``: a segment's metadata without its partition
    (the snapshot file it is stored in names the partition)."""

    segment_id: uuid.UUID
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    custom_metadata: bytes | None
    state: RemoteLogSegmentState
    segment_leader_epochs: dict[int, int]
    txn_index_empty: bool = False


RemoteLogMetadata = (RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate | RemotePartitionDeleteMetadata
                     | RemoteLogSegmentMetadataSnapshot)


class RemoteLogMetadataSerdeError(ValueError):
    """Bytes that are not one of the four records (truncated, unknown key or version)."""


# -- primitives ---------------------------------------------------------------------------------

class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def uvarint(self, v: int) -> None:
        while v >= 0x80:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)

    def fmt(self, f: str, v: int) -> None:
        self.out += struct.pack(f, v)

    def uuid(self, u: uuid.UUID) -> None:
        self.out += u.bytes  # Kafka's Uuid: most then least significant long, big-endian

    def string(self, s: str) -> None:
        data = s.encode()
        self.uvarint(len(data) + 1)
        self.out += data

    def nullable_bytes(self, b: bytes | None) -> None:
        if b is None:
            self.uvarint(0)
        else:
            self.uvarint(len(b) + 1)
            self.out += b

    def no_tags(self) -> None:
        self.uvarint(0)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise RemoteLogMetadataSerdeError(f"record truncated at byte {self.pos} (needs {n} more)")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise RemoteLogMetadataSerdeError("varint longer than 5 bytes")

    def fmt(self, f: str) -> int:
        value: int = struct.unpack(f, self._take(struct.calcsize(f)))[0]
        return value

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self._take(16)))

    def string(self) -> str:
        n = self.uvarint()
        if n == 0:
            raise RemoteLogMetadataSerdeError("null string in a non-nullable field")
        return bytes(self._take(n - 1)).decode()

    def nullable_bytes(self) -> bytes | None:
        n = self.uvarint()
        return None if n == 0 else bytes(self._take(n - 1))

    def tags(self) -> dict[int, bytes]:
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = bytes(self._take(self.uvarint()))
        return out


# -- shared structs -----------------------------------------------------------------------------

def _write_tip(w: _Writer, tip: TopicIdPartition) -> None:
    w.string(tip.topic)
    w.uuid(tip.topic_id)
    w.fmt(">i", tip.partition)
    w.no_tags()


def _read_tip(r: _Reader) -> TopicIdPartition:
    name, topic_id, partition = r.string(), r.uuid(), r.fmt(">i")
    r.tags()
    return TopicIdPartition(topic_id, name, partition)


def _write_segment_id(w: _Writer, sid: RemoteLogSegmentId) -> None:
    _write_tip(w, sid.topic_id_partition)
    w.uuid(sid.id)
    w.no_tags()


def _read_segment_id(r: _Reader) -> RemoteLogSegmentId:
    tip = _read_tip(r)
    sid = r.uuid()
    r.tags()
    return RemoteLogSegmentId(tip, sid)


def _write_epochs(w: _Writer, epochs: dict[int, int]) -> None:
    w.uvarint(len(epochs) + 1)
    for epoch, offset in sorted(epochs.items()):
        w.fmt(">i", epoch)
        w.fmt(">q", offset)
        w.no_tags()


def _read_epochs(r: _Reader) -> dict[int, int]:
    n = r.uvarint()
    if n == 0:
        raise RemoteLogMetadataSerdeError("null SegmentLeaderEpochs")
    out = {}
    for _ in range(n - 1):
        epoch, offset = r.fmt(">i"), r.fmt(">q")
        r.tags()
        out[epoch] = offset
    return out


def _write_txn_tag(w: _Writer, txn_index_empty: bool) -> None:
    if txn_index_empty:  # a tagged field at its default (false) is not written
        w.uvarint(1)
        w.uvarint(TXN_INDEX_EMPTY_TAG)
        w.uvarint(1)
        w.out.append(1)
    else:
        w.no_tags()


def _txn_tag(tags: dict[int, bytes]) -> bool:
    raw = tags.get(TXN_INDEX_EMPTY_TAG)
    return bool(raw and raw[0])


def _state(value: int) -> RemoteLogSegmentState:
    try:
        return RemoteLogSegmentState(value)
    except ValueError:
        raise RemoteLogMetadataSerdeError(f"unknown RemoteLogSegmentState id {value}") from None


# -- records ------------------------------------------------------------------------------------

def serialize(record: RemoteLogMetadata) -> bytes:
    """A record value of ``__remote_log_metadata`` (Kafka's ``RemoteLogMetadataSerde.serialize``)."""
    w = _Writer()
    w.uvarint(FRAME_VERSION)
    if isinstance(record, RemoteLogSegmentMetadata):
        w.uvarint(SEGMENT_METADATA_KEY)
        w.uvarint(0)
        _write_segment_id(w, record.segment_id)
        w.fmt(">q", record.start_offset)
        w.fmt(">q", record.end_offset)
        w.fmt(">i", record.broker_id)
        w.fmt(">q", record.max_timestamp_ms)
        w.fmt(">q", record.event_timestamp_ms)
        _write_epochs(w, dict(record.segment_leader_epochs))
        w.fmt(">i", record.segment_size_in_bytes)
        w.nullable_bytes(record.custom_metadata)
        w.fmt(">b", record.state.value)
        _write_txn_tag(w, record.txn_index_empty)
    elif isinstance(record, RemoteLogSegmentMetadataUpdate):
        w.uvarint(SEGMENT_METADATA_UPDATE_KEY)
        w.uvarint(0)
        _write_segment_id(w, record.segment_id)
        w.fmt(">i", record.broker_id)
        w.fmt(">q", record.event_timestamp_ms)
        w.nullable_bytes(record.custom_metadata)
        w.fmt(">b", record.state.value)
        w.no_tags()
    elif isinstance(record, RemotePartitionDeleteMetadata):
        w.uvarint(PARTITION_DELETE_KEY)
        w.uvarint(0)
        _write_tip(w, record.topic_id_partition)
        w.fmt(">i", record.broker_id)
        w.fmt(">q", record.event_timestamp_ms)
        w.fmt(">b", record.state.value)
        w.no_tags()
    else:
        w.uvarint(SEGMENT_METADATA_SNAPSHOT_KEY)
        w.uvarint(0)
        w.uuid(record.segment_id)
        w.fmt(">q", record.start_offset)
        w.fmt(">q", record.end_offset)
        w.fmt(">i", record.broker_id)
        w.fmt(">q", record.max_timestamp_ms)
        w.fmt(">q", record.event_timestamp_ms)
        _write_epochs(w, record.segment_leader_epochs)
        w.fmt(">i", record.segment_size_in_bytes)
        w.nullable_bytes(record.custom_metadata)
        w.fmt(">b", record.state.value)
        _write_txn_tag(w, record.txn_index_empty)
    return bytes(w.out)


def deserialize(data: bytes) -> RemoteLogMetadata:
    """Inverse of :func:`serialize`; raises :class:`RemoteLogMetadataSerdeError` on bad bytes."""
    r = _Reader(data)
    frame = r.uvarint()
    if frame != FRAME_VERSION:
        raise RemoteLogMetadataSerdeError(f"unknown frame version {frame}")
    key, version = r.uvarint(), r.uvarint()
    if version != 0:
        raise RemoteLogMetadataSerdeError(f"api key {key}: unsupported version {version}")
    record: RemoteLogMetadata
    if key == SEGMENT_METADATA_KEY:
        sid = _read_segment_id(r)
        start, end, broker, max_ts, event_ts = r.fmt(">q"), r.fmt(">q"), r.fmt(">i"), r.fmt(">q"), r.fmt(">q")
        epochs = _read_epochs(r)
        size, custom, state = r.fmt(">i"), r.nullable_bytes(), _state(r.fmt(">b"))
        txn_empty = _txn_tag(r.tags())
        try:
            record = RemoteLogSegmentMetadata(sid, start, end, max_ts, broker, event_ts, size, epochs, custom,
                                              state, txn_empty)
        except ValueError as e:
            raise RemoteLogMetadataSerdeError(str(e)) from e
    elif key == SEGMENT_METADATA_UPDATE_KEY:
        sid = _read_segment_id(r)
        broker, event_ts, custom, state = r.fmt(">i"), r.fmt(">q"), r.nullable_bytes(), _state(r.fmt(">b"))
        r.tags()
        try:
            record = RemoteLogSegmentMetadataUpdate(sid, event_ts, custom, state, broker)
        except ValueError as e:
            raise RemoteLogMetadataSerdeError(str(e)) from e
    elif key == PARTITION_DELETE_KEY:
        tip = _read_tip(r)
        broker, event_ts, raw_state = r.fmt(">i"), r.fmt(">q"), r.fmt(">b")
        r.tags()
        try:
            delete_state = RemotePartitionDeleteState(raw_state)
        except ValueError:
            raise RemoteLogMetadataSerdeError(f"unknown RemotePartitionDeleteState id {raw_state}") from None
        record = RemotePartitionDeleteMetadata(tip, delete_state, event_ts, broker)
    elif key == SEGMENT_METADATA_SNAPSHOT_KEY:
        seg = r.uuid()
        start, end, broker, max_ts, event_ts = r.fmt(">q"), r.fmt(">q"), r.fmt(">i"), r.fmt(">q"), r.fmt(">q")
        epochs = _read_epochs(r)
        size, custom, state = r.fmt(">i"), r.nullable_bytes(), _state(r.fmt(">b"))
        txn_empty = _txn_tag(r.tags())
        record = RemoteLogSegmentMetadataSnapshot(seg, start, end, max_ts, broker, event_ts, size, custom, state,
                                                  epochs, txn_empty)
    else:
        raise RemoteLogMetadataSerdeError(f"unknown api key {key}")
    if r.pos != len(r.data):
        raise RemoteLogMetadataSerdeError(f"{len(r.data) - r.pos} bytes after the record")
    return record


# -- partitioning -------------------------------------------------------------------------------

def _murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` as a signed 32-bit int."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    tail = length - rest
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def _java_long_hash(v: int) -> int:
    u = v & 0xFFFFFFFFFFFFFFFF
    return (u ^ (u >> 32)) & 0xFFFFFFFF


def metadata_partition(tip: TopicIdPartition, num_partitions: int) -> int:
    """Kafka's ``RemoteLogMetadataTopicPartitioner.metadataPartition``: murmur2 of the 4 big-endian
    bytes of ``Objects.hash(topicId.lsb, topicId.msb, partition)``, made positive, mod the count."""
    msb, lsb = tip.topic_id.int >> 64, tip.topic_id.int & 0xFFFFFFFFFFFFFFFF
    h = 1
    for element in (_java_long_hash(lsb), _java_long_hash(msb), tip.partition & 0xFFFFFFFF):
        h = (31 * h + element) & 0xFFFFFFFF
    return (_murmur2(h.to_bytes(4, "big")) & 0x7FFFFFFF) % num_partitions
