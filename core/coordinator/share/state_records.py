"""``__share_group_state`` records: Kafka's ShareSnapshotKey/Value and ShareUpdateKey/Value.

Schemas from Kafka 4.3's ``share-coordinator/src/main/resources/common/message/`` JSON:

* ShareSnapshotKey (coordinator record type 0) and ShareUpdateKey (type 1): GroupId string,
  TopicId uuid, Partition int32; not flexible. Written as Kafka's
  ``MessageUtil.toCoordinatorTypePrefixedBytes``: int16 record type, then the struct.
* ShareSnapshotValue v0 (flexible): SnapshotEpoch, StateEpoch, LeaderEpoch, StartOffset,
  tagged DeliveryCompleteCount (KIP-1226, default -1), CreateTimestamp, WriteTimestamp,
  StateBatches. ShareUpdateValue v0 (flexible): SnapshotEpoch, LeaderEpoch, StartOffset (-1:
  unchanged), tagged DeliveryCompleteCount, StateBatches (only the batches that changed).
  Both written as int16 version then the struct. A null value (tombstone) deletes the state.

The coordinator key of a share partition is ``"<group>:<topic id>:<partition>"`` (Kafka's
``SharePartitionKey.asCoordinatorKey``): its ``__share_group_state`` partition is that string's
Java hash, as for the other coordinators. :class:`ShareGroupOffset` is the state one key holds
(Kafka's ``ShareGroupOffset``) and :func:`merge_state_batches` folds an update into it as
Kafka's share coordinator does (newer batches win offset by offset; offsets below the start
offset are dropped).
"""

from __future__ import annotations

import base64
import heapq
import itertools
import re
import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import ClassVar

from strom.core.coordinator.share.share_partition import PersisterStateBatch
from strom.core.errors import CorruptMessageError, InvalidRequestError
from strom.core.protocol.message_codec import NEVER, F, Message

SHARE_GROUP_STATE_TOPIC = "__share_group_state"
SHARE_SNAPSHOT_RECORD_TYPE = 0
SHARE_UPDATE_RECORD_TYPE = 1
VALUE_VERSION = 0
_I16 = struct.Struct(">h")
ZERO_UUID = uuid.UUID(int=0)  # Kafka's Uuid.ZERO_UUID


@dataclass(frozen=True, slots=True)
class ShareSnapshotKey(Message):
    group_id: str = ""
    topic_id: uuid.UUID = ZERO_UUID
    partition: int = 0
    FLEXIBLE: ClassVar[int] = NEVER
    API_KEY: ClassVar[int] = SHARE_SNAPSHOT_RECORD_TYPE
    SCHEMA: ClassVar[tuple[F, ...]] = (F("group_id", "string"), F("topic_id", "uuid"), F("partition", "int32"))


@dataclass(frozen=True, slots=True)
class ShareUpdateKey(Message):
    group_id: str = ""
    topic_id: uuid.UUID = ZERO_UUID
    partition: int = 0
    FLEXIBLE: ClassVar[int] = NEVER
    API_KEY: ClassVar[int] = SHARE_UPDATE_RECORD_TYPE
    SCHEMA: ClassVar[tuple[F, ...]] = (F("group_id", "string"), F("topic_id", "uuid"), F("partition", "int32"))


@dataclass(frozen=True, slots=True)
class StateBatch(Message):
    first_offset: int = 0
    last_offset: int = 0
    delivery_state: int = 0
    delivery_count: int = 0
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("first_offset", "int64"), F("last_offset", "int64"),
        F("delivery_state", "int8"), F("delivery_count", "int16"),
    )


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue(Message):
    snapshot_epoch: int = 0
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = -1
    delivery_complete_count: int = -1
    create_timestamp: int = -1
    write_timestamp: int = -1
    state_batches: list[StateBatch] = field(default_factory=list)
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("snapshot_epoch", "int32"),
        F("state_epoch", "int32"),
        F("leader_epoch", "int32"),
        F("start_offset", "int64"),
        F("delivery_complete_count", "int32", tag=0),
        F("create_timestamp", "int64"),
        F("write_timestamp", "int64"),
        F("state_batches", StateBatch, array=True),
    )


@dataclass(frozen=True, slots=True)
class ShareUpdateValue(Message):
    snapshot_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = -1
    delivery_complete_count: int = -1
    state_batches: list[StateBatch] = field(default_factory=list)
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("snapshot_epoch", "int32"),
        F("leader_epoch", "int32"),
        F("start_offset", "int64"),
        F("delivery_complete_count", "int32", tag=0),
        F("state_batches", StateBatch, array=True),
    )


ShareKey = ShareSnapshotKey | ShareUpdateKey
ShareValue = ShareSnapshotValue | ShareUpdateValue


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's ``SharePartitionKey.asCoordinatorKey()``: what picks the state topic's partition."""
    return f"{group_id}:{topic_id_string(topic_id)}:{partition}"


# Kafka's Uuid.fromString: URL-safe base64 of 16 bytes (22 characters, or 24 with padding).
_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}(==)?")
# Java's Integer.parseInt: an optional sign, then digits.
_INT_TEXT = re.compile(r"[+-]?[0-9]+")


def parse_coordinator_key(key: str) -> tuple[str, uuid.UUID, int]:
    """The (group id, topic id, partition) of a share coordinator key (FindCoordinator key type 2).

    Kafka's ``SharePartitionKey.getInstance``: the key splits at ``:`` as Java's ``split`` does
    (trailing empty pieces dropped); the last two pieces are the topic id and the partition, and
    everything before them, colons included, is the group id, which may not be empty. Raises
    :class:`InvalidRequestError` for anything else.
    """
    pieces = key.split(":")
    while pieces and pieces[-1] == "":
        pieces.pop()
    if len(pieces) < 3:
        raise InvalidRequestError(f"share coordinator key {key!r} is not <groupId>:<topicId>:<partition>")
    group_id = ":".join(pieces[:-2])
    topic_text, partition_text = pieces[-2], pieces[-1]
    if not group_id or not _UUID_TEXT.fullmatch(topic_text) or not _INT_TEXT.fullmatch(partition_text):
        raise InvalidRequestError(f"share coordinator key {key!r} is not <groupId>:<topicId>:<partition>")
    partition = int(partition_text)
    if not -(2**31) <= partition < 2**31:
        raise InvalidRequestError(f"share coordinator key {key!r}: partition {partition_text} is not an int32")
    topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(topic_text[:22] + "=="))
    return group_id, topic_id, partition


def topic_id_string(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def encode_key(key: ShareKey) -> bytes:
    """int16 record type, then the key struct at version 0."""
    return _I16.pack(key.API_KEY) + key.encode(0)


def encode_value(value: ShareValue | None) -> bytes | None:
    return None if value is None else _I16.pack(VALUE_VERSION) + value.encode(VALUE_VERSION)


def decode_key(data: bytes | bytearray | memoryview) -> ShareKey | None:
    """The key of a ``__share_group_state`` record; None for a record type this build does not know."""
    if len(data) < 2:
        raise CorruptMessageError("share coordinator record key is shorter than its type")
    record_type = _I16.unpack_from(data, 0)[0]
    cls: type[ShareSnapshotKey] | type[ShareUpdateKey]
    if record_type == SHARE_SNAPSHOT_RECORD_TYPE:
        cls = ShareSnapshotKey
    elif record_type == SHARE_UPDATE_RECORD_TYPE:
        cls = ShareUpdateKey
    else:
        return None
    return cls.decode(bytes(data[2:]), 0)


def decode_value(key: ShareKey, data: bytes | bytearray | memoryview | None) -> ShareValue | None:
    """The value of a record whose key is ``key``; None for a tombstone."""
    if data is None:
        return None
    if len(data) < 2:
        raise CorruptMessageError("share coordinator record value is shorter than its version")
    version = _I16.unpack_from(data, 0)[0]
    if isinstance(key, ShareSnapshotKey):
        return ShareSnapshotValue.decode(bytes(data[2:]), version)
    return ShareUpdateValue.decode(bytes(data[2:]), version)


def to_wire_batches(batches: Iterable[PersisterStateBatch]) -> list[StateBatch]:
    return [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in batches]


def from_wire_batches(batches: Iterable[StateBatch]) -> list[PersisterStateBatch]:
    return [PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in batches]


def merge_state_batches(current: Iterable[PersisterStateBatch], updates: Iterable[PersisterStateBatch],
                        start_offset: int) -> list[PersisterStateBatch]:
    """Fold ``updates`` into ``current``: an updated offset takes the update's state and count.

    Batches are cut to start at ``start_offset``; the result is sorted, non-overlapping, and
    adjacent runs with the same (state, count) are joined, as Kafka's
    ``PersisterStateBatchCombiner`` leaves them.
    """
    # A sweep over the batches' boundaries, later batches overriding earlier ones (priority =
    # position): O(n log n). Cutting every run against every batch was quadratic, and a
    # WriteShareGroupState of 100,000 batches held the event loop for minutes.
    batches: list[PersisterStateBatch] = []
    for b in list(current) + list(updates):
        first = max(b.first_offset, start_offset)
        if first <= b.last_offset:
            batches.append(PersisterStateBatch(first, b.last_offset, b.delivery_state, b.delivery_count))
    starts: dict[int, list[int]] = {}
    ends: dict[int, list[int]] = {}
    for i, b in enumerate(batches):
        starts.setdefault(b.first_offset, []).append(i)
        ends.setdefault(b.last_offset + 1, []).append(i)
    points = sorted(starts.keys() | ends.keys())
    active: list[int] = []  # max-heap of positions (negated); ended ones are dropped lazily
    ended: set[int] = set()
    runs: list[PersisterStateBatch] = []
    for x, nxt in itertools.pairwise(points):
        ended.update(ends.get(x, ()))
        for i in starts.get(x, ()):
            heapq.heappush(active, -i)
        while active and -active[0] in ended:
            heapq.heappop(active)
        if active:
            top = batches[-active[0]]
            runs.append(PersisterStateBatch(x, nxt - 1, top.delivery_state, top.delivery_count))
    joined: list[PersisterStateBatch] = []
    for r in runs:
        if joined and joined[-1].last_offset + 1 == r.first_offset \
                and (joined[-1].delivery_state, joined[-1].delivery_count) == (r.delivery_state, r.delivery_count):
            joined[-1] = replace(joined[-1], last_offset=r.last_offset)
        else:
            joined.append(r)
    return joined


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    """The durable state of one share partition (Kafka's ``ShareGroupOffset``)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[PersisterStateBatch, ...] = ()
    delivery_complete_count: int = -1
    create_timestamp: int = -1
    write_timestamp: int = -1

    @classmethod
    def from_snapshot(cls, v: ShareSnapshotValue) -> ShareGroupOffset:
        return cls(v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset,
                   tuple(from_wire_batches(v.state_batches)), v.delivery_complete_count,
                   v.create_timestamp, v.write_timestamp)

    def to_snapshot(self) -> ShareSnapshotValue:
        return ShareSnapshotValue(self.snapshot_epoch, self.state_epoch, self.leader_epoch, self.start_offset,
                                  self.delivery_complete_count, self.create_timestamp, self.write_timestamp,
                                  to_wire_batches(self.state_batches))

    def apply_update(self, u: ShareUpdateValue) -> ShareGroupOffset:
        """This state with an update folded in (StartOffset -1 keeps the start offset)."""
        start = self.start_offset if u.start_offset == -1 else u.start_offset
        merged = merge_state_batches(self.state_batches, from_wire_batches(u.state_batches), start)
        return replace(self, leader_epoch=u.leader_epoch if u.leader_epoch != -1 else self.leader_epoch,
                       start_offset=start, state_batches=tuple(merged),
                       delivery_complete_count=u.delivery_complete_count)
